"""Produce answers that the conformance suite found different from Kafka 4.4's (fixed here).

Which error, whether a message comes with it, and whether the partition's log start offset is given all
follow where Kafka finds the problem: framing errors while walking the whole request (every partition,
with a message), per-partition request checks and checks of the batch as a whole (no log start offset,
no message), checks of the batch's contents and of producer state (the log start offset, no message),
record timestamps (the log start offset, a message and one record error per record).
"""

from __future__ import annotations

import struct
import time

import pytest
from crc32c import crc32c

from kafkawire.protocol import errors, message_class
from kafkawire.protocol.records import build_batch, build_message_set

from .helpers import create_topic, produce_request, produce_request_of
from .reference import produce_when_led, reference_client, unique, wait_for_topic

TS = 1_700_000_000_000


def records(n=2, ts=TS, **kw):
    return build_batch([(b"k", b"v%d" % i, [], ts + i) for i in range(n)], **kw)


def recrc(data):
    data = bytearray(data)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def patched(data, offset, fmt, value, fix_crc=False):
    data = bytearray(data)
    struct.pack_into(fmt, data, offset, value)
    return recrc(data) if fix_crc else bytes(data)


def init_producer(client):
    R = message_class("InitProducerIdRequest")
    for _ in range(100):  # Kafka answers COORDINATOR_LOAD_IN_PROGRESS for a moment at first
        res = client.call(R(transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1), 4)
        if res.error_code == 0:
            return res.producer_id, res.producer_epoch
        time.sleep(0.1)
    raise AssertionError(res)


def shape(p):
    return (
        p.error_code,
        p.log_append_time_ms,
        p.log_start_offset,
        p.error_message is not None,
        [e.batch_index for e in p.record_errors],
        [e.batch_index_error_message is not None for e in p.record_errors],
    )


def answer(client, topic, data, version=11, transactional_id=None):
    res = client.call(produce_request(topic, 0, data, transactional_id=transactional_id), version)
    return res.responses[0].partition_responses[0]


def cases(pid, epoch, txn_pid):
    """(label, records, produce version, transactional id): asked in this order of both brokers. The
    transactional batches carry their own producer id: Kafka remembers a failed verification for a producer
    (later sequences from it are then out of order for a while), which kafkawire, verifying nothing, does not."""
    now = int(time.time() * 1000)
    b = records()
    truncated = b[:-5]
    bad_crc = b[:-1] + bytes([b[-1] ^ 0xFF])

    def idem(seq, **kw):
        return records(producer_id=kw.get("pid", pid), producer_epoch=kw.get("epoch", epoch), base_sequence=seq)

    txn = build_batch(
        [(b"k", b"v", [], now)], producer_id=txn_pid[0], producer_epoch=txn_pid[1], base_sequence=0, transactional=True
    )
    return [
        ("ok", records(), 11, None),
        ("truncated", truncated, 11, None),
        ("header only", b[:30], 11, None),
        ("declared longer", patched(b, 8, ">i", len(b) - 2), 11, None),
        ("declared shorter", patched(b, 8, ">i", len(b) - 22), 11, None),
        ("bad crc", bad_crc, 11, None),
        ("length below minimum", patched(b, 8, ">i", 5), 11, None),
        ("length below minimum v3", patched(b, 8, ">i", 5), 3, None),
        ("magic 3", patched(b, 16, ">b", 3), 11, None),
        ("magic 1 set", build_message_set([(b"k", b"v", [], TS)], magic=1), 11, None),
        ("two batches", records(1) + records(1), 11, None),
        ("trailing bytes", b + b"\x00\x01\x02", 11, None),
        ("count mismatch", patched(b, 57, ">i", 3, fix_crc=True), 11, None),
        ("base offset not 0", patched(b, 0, ">q", 5), 11, None),
        ("empty", b"", 11, None),
        ("transactional id, plain batch", records(1), 11, "tid-plain"),
        ("transactional batch, no id", txn, 11, None),
        ("transactional batch, no id v3", txn, 3, None),
        ("transactional batch with id", txn, 11, "tid-txn"),
        ("transactional batch with id v12", txn, 12, "tid-txn"),
        ("idempotent 0", idem(0), 11, None),
        ("idempotent 2", idem(2), 11, None),
        ("duplicate 2", idem(2), 11, None),
        ("duplicate 0", idem(0), 11, None),
        ("out of order", idem(7), 11, None),
        ("new epoch not at 0", idem(2, epoch=epoch + 3), 11, None),
        ("new epoch at 0", idem(0, epoch=epoch + 3), 11, None),
        ("old epoch", idem(4), 11, None),
        ("unknown producer at 3", idem(3, pid=987655), 11, None),
        ("unknown producer at 3 again", idem(3, pid=987655), 11, None),
    ]


def test_produce_answers_as_kafka(client):
    create_topic(client, "pa")
    pid, epoch = init_producer(client)
    got = {
        label: shape(answer(client, "pa", data, v, tid))
        for label, data, v, tid in cases(pid, epoch, init_producer(client))
    }
    first = {label: (s[0], s[2], s[3]) for label, s in got.items()}
    assert first["truncated"] == (errors.INVALID_RECORD, -1, False)
    assert first["declared shorter"] == (errors.CORRUPT_MESSAGE, -1, False)  # one batch, which fails its CRC
    assert first["bad crc"] == (errors.CORRUPT_MESSAGE, -1, False)
    assert first["length below minimum"] == (errors.CORRUPT_MESSAGE, -1, True)
    assert first["magic 3"] == (errors.CORRUPT_MESSAGE, -1, True)
    assert first["trailing bytes"][0] == 0
    assert first["count mismatch"] == (errors.INVALID_RECORD, 0, False)
    assert first["empty"] == (errors.INVALID_RECORD, -1, False)
    assert first["transactional id, plain batch"][0] == 0
    assert first["transactional batch, no id"] == (errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, False)
    assert first["transactional batch with id"] == (errors.NOT_ENOUGH_REPLICAS, -1, True)
    assert got["duplicate 2"][:3] == (0, TS + 1, 0)  # the batch's max timestamp, though the topic is CreateTime
    assert first["out of order"] == (errors.OUT_OF_ORDER_SEQUENCE_NUMBER, 0, False)
    assert first["old epoch"] == (errors.INVALID_PRODUCER_EPOCH, 0, False)
    assert first["unknown producer at 3"][0] == 0


def test_a_framing_error_fails_every_partition(client):
    create_topic(client, "pa-two", partitions=2)
    R = message_class("ProduceRequest")
    bad = patched(records(1), 16, ">b", 3)
    body = R(
        transactional_id=None,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            R.TopicProduceData(
                name="pa-two",
                partition_data=[
                    R.PartitionProduceData(index=0, records=records(1)),
                    R.PartitionProduceData(index=1, records=bad),
                ],
            )
        ],
    )
    answers = client.call(body, 11).responses[0].partition_responses
    assert [(p.error_code, p.error_message is not None, p.base_offset) for p in answers] == [
        (errors.CORRUPT_MESSAGE, True, -1)
    ] * 2
    assert client.call(body, 3).responses[0].partition_responses[0].error_code == errors.CORRUPT_MESSAGE


def test_transactional_records_are_not_appended_before_the_transaction_log_exists(client):
    """No FindCoordinator for a transactional id yet, so no __transaction_state: the coordinator cannot verify
    the batch, which is refused as Kafka refuses it then (retriable, nothing appended)."""
    from .helpers import fetch_request

    create_topic(client, "pa-txn")
    pid, epoch = init_producer(client)
    txn = records(
        1, ts=int(time.time() * 1000), producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True
    )
    for version in (3, 8, 11, 12, 13):
        if version >= 13:
            from .test_metadata_topic_ids import topic_id

            req = produce_request("", 0, txn, transactional_id="t", topic_id=topic_id(client, "pa-txn"))
        else:
            req = produce_request("pa-txn", 0, txn, transactional_id="t")
        p = client.call(req, version).responses[0].partition_responses[0]
        assert (p.error_code, p.base_offset) == (errors.NOT_ENOUGH_REPLICAS, -1), version
        assert (p.error_message is not None) == (version >= 8)
    assert client.call(fetch_request([("pa-txn", 0, 0)]), 12).responses[0].partitions[0].high_watermark == 0


def test_timestamp_errors_name_each_record(client):
    create_topic(client, "pa-ts", configs={"message.timestamp.before.max.ms": "3600000"})
    now = int(time.time() * 1000)
    mixed = build_batch([(None, b"a", [], now), (None, b"b", [], now - 7_200_000), (None, b"c", [], now)])
    p = answer(client, "pa-ts", mixed)
    assert shape(p) == (errors.INVALID_TIMESTAMP, -1, 0, True, [1], [True])
    p = answer(client, "pa-ts", mixed, version=7)
    assert (p.error_code, p.log_start_offset) == (errors.INVALID_TIMESTAMP, 0)


def test_describe_producers_unknown_topic_has_a_message(client):
    create_topic(client, "dp")
    D = message_class("DescribeProducersRequest")
    res = client.call(
        D(
            topics=[
                D.TopicRequest(name="dp-missing", partition_indexes=[0]),
                D.TopicRequest(name="dp", partition_indexes=[4]),
            ]
        ),
        0,
    )
    missing, partition = res.topics[0].partitions[0], res.topics[1].partitions[0]
    assert (missing.error_code, missing.error_message is not None) == (errors.UNKNOWN_TOPIC_OR_PARTITION, True)
    assert (partition.error_code, partition.error_message) == (errors.UNKNOWN_TOPIC_OR_PARTITION, None)


def test_same_answers_as_the_reference_kafka(client, reference_kafka):
    ref = reference_client(reference_kafka)
    try:
        theirs = unique("pa")
        create_topic(client, "pa-ref")
        create_topic(ref, theirs)
        wait_for_topic(ref, theirs)
        produce_when_led(ref, produce_request(theirs, 0, records(1)), 11)
        client.call(produce_request("pa-ref", 0, records(1)), 11)
        ours_pid, theirs_pid = init_producer(client), init_producer(ref)
        for (label, a, v, tid), (_, b, _, _) in zip(
            cases(*ours_pid, init_producer(client)), cases(*theirs_pid, init_producer(ref))
        ):
            tid_ours = tid and tid + "-ours"
            tid_theirs = tid and unique(tid)
            x, y = answer(client, "pa-ref", a, v, tid_ours), answer(ref, theirs, b, v, tid_theirs)
            assert shape(x) == shape(y), label
            assert x.base_offset == y.base_offset, label  # both logs start alike
        D = message_class("DescribeProducersRequest")
        ask = lambda c, name: c.call(D(topics=[D.TopicRequest(name=name, partition_indexes=[0])]), 0)  # noqa: E731
        x, y = ask(client, "dp-none").topics[0].partitions[0], ask(ref, unique("dp-none")).topics[0].partitions[0]
        assert (x.error_code, x.error_message is None) == (y.error_code, y.error_message is None)
    finally:
        ref.close()


@pytest.mark.parametrize("version", [3, 9])
def test_framing_errors_as_kafka_with_two_partitions(client, reference_kafka, version):
    ref = reference_client(reference_kafka)
    try:
        theirs = unique("pa-frame")
        create_topic(client, f"pa-frame{version}", partitions=2)
        create_topic(ref, theirs, partitions=2)
        wait_for_topic(ref, theirs)
        produce_when_led(ref, produce_request(theirs, 0, records(1)), 9)
        client.call(produce_request(f"pa-frame{version}", 0, records(1)), 9)

        def ask(c, name, second):
            body = produce_request_of({name: [records(1), second]})
            parts = c.call(body, version).responses[0].partition_responses
            return sorted(
                (p.index, p.error_code, p.base_offset, p.log_start_offset, p.error_message is None) for p in parts
            )

        for second in (patched(records(1), 16, ">b", 3), patched(records(1), 8, ">i", 5), records(1)[:-4]):
            assert ask(client, f"pa-frame{version}", second) == ask(ref, theirs, second)
    finally:
        ref.close()
