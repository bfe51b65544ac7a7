"""Produce and Fetch: round trips at every version, limits, conversions, long polling, pipelining."""

from __future__ import annotations

import threading
import time

import pytest

from kafkawire.protocol import errors
from kafkawire.protocol.records import LOG_APPEND_TIME, build_message_set, iter_batches

from .conftest import RawClient, msg
from .helpers import batch, create_topic, fetch_request, produce_request, records_with_offsets, values_of


def produce_ok(client, topic, records, partition=0, version=9, acks=-1):
    res = client.call(produce_request(topic, partition, records, acks=acks), version)
    pr = res.responses[0].partition_responses[0]
    assert pr.error_code == 0, pr
    return pr


@pytest.mark.parametrize("version", range(3, 13))
def test_produce_fetch_round_trip_every_version(client, version):
    create_topic(client, "rt")
    first = produce_ok(client, "rt", batch([b"a", b"b", b"c"]), version=version)
    second = produce_ok(client, "rt", batch([b"d"]), version=version)
    assert (first.base_offset, second.base_offset) == (0, 3)
    if version >= 5:
        assert second.log_start_offset == 0
    for fv in (4, 7, 11, 12):
        res = client.call(fetch_request([("rt", 0, 0)]), fv)
        pd = res.responses[0].partitions[0]
        assert pd.error_code == 0 and pd.high_watermark == 4 and pd.last_stable_offset == 4
        assert records_with_offsets(pd.records) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
        # stored batches carry the partition leader epoch (0)
        assert all(e.partition_leader_epoch == 0 for e in iter_batches(bytes(pd.records)))


def test_produce_fetch_by_topic_id(client):
    t = create_topic(client, "byid")
    res = client.call(produce_request(None, 0, batch([b"x"]), topic_id=t.topic_id), 13)
    assert res.responses[0].topic_id == t.topic_id and res.responses[0].partition_responses[0].error_code == 0
    for fv in (13, 16, 17, 18):
        f = client.call(fetch_request([(t.topic_id, 0, 0)]), fv)
        assert f.responses[0].topic_id == t.topic_id
        assert values_of(f.responses[0].partitions[0].records) == [b"x"]
    import uuid

    missing = client.call(fetch_request([(uuid.uuid4(), 0, 0)]), 13)
    assert missing.responses[0].partitions[0].error_code == errors.UNKNOWN_TOPIC_ID


def test_fetch_inside_a_batch_returns_the_whole_batch_and_out_of_range(client):
    create_topic(client, "mid")
    produce_ok(client, "mid", batch([b"0", b"1", b"2", b"3"]))
    pd = client.call(fetch_request([("mid", 0, 2)]), 12).responses[0].partitions[0]
    assert [o for o, _ in records_with_offsets(pd.records)] == [0, 1, 2, 3]
    # at the log end: nothing, no error
    pd = client.call(fetch_request([("mid", 0, 4)]), 12).responses[0].partitions[0]
    assert pd.error_code == 0 and len(pd.records or b"") == 0
    pd = client.call(fetch_request([("mid", 0, 5)]), 12).responses[0].partitions[0]
    # as in Kafka 4.4, a partition in error reports no offsets
    assert (pd.error_code, pd.high_watermark, pd.log_start_offset) == (errors.OFFSET_OUT_OF_RANGE, -1, -1)


def test_unknown_topic_and_partition(client):
    res = client.call(produce_request("missing", 0, batch([b"x"])), 9)
    assert res.responses[0].partition_responses[0].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    create_topic(client, "one")
    res = client.call(produce_request("one", 5, batch([b"x"])), 9)
    assert res.responses[0].partition_responses[0].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    f = client.call(fetch_request([("missing", 0, 0)]), 12)
    assert f.responses[0].partitions[0].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION


def test_corrupt_crc_and_invalid_records(client):
    create_topic(client, "bad")
    data = bytearray(batch([b"hello"]))
    data[-1] ^= 0xFF
    res = client.call(produce_request("bad", 0, bytes(data)), 9)
    assert res.responses[0].partition_responses[0].error_code == errors.CORRUPT_MESSAGE
    two = batch([b"a"]) + batch([b"b"])
    res = client.call(produce_request("bad", 0, two), 9)
    assert res.responses[0].partition_responses[0].error_code == errors.INVALID_RECORD
    res = client.call(produce_request("bad", 0, batch([b"a"])[:-3]), 9)  # no whole batch: Kafka's INVALID_RECORD
    assert res.responses[0].partition_responses[0].error_code == errors.INVALID_RECORD
    legacy = build_message_set([(None, b"old")], magic=1)
    res = client.call(produce_request("bad", 0, legacy), 9)
    assert res.responses[0].partition_responses[0].error_code == errors.INVALID_RECORD
    f = client.call(fetch_request([("bad", 0, 0)]), 12)
    assert f.responses[0].partitions[0].high_watermark == 0


def test_message_max_bytes(broker, client):
    create_topic(client, "big", configs={"max.message.bytes": "2000"})
    res = client.call(produce_request("big", 0, batch([b"x" * 3000])), 9)
    assert res.responses[0].partition_responses[0].error_code == errors.MESSAGE_TOO_LARGE
    produce_ok(client, "big", batch([b"x" * 1000]))


def test_first_batch_returned_even_if_larger_than_limits(client):
    create_topic(client, "huge")
    produce_ok(client, "huge", batch([b"x" * 5000]))
    produce_ok(client, "huge", batch([b"y" * 5000]))
    res = client.call(fetch_request([("huge", 0, 0)], max_bytes=100, partition_max_bytes=100), 12)
    assert values_of(res.responses[0].partitions[0].records) == [b"x" * 5000]
    # max bytes stops after the first batch across partitions too
    res = client.call(fetch_request([("huge", 0, 0)], max_bytes=6000), 12)
    assert len(values_of(res.responses[0].partitions[0].records)) == 1
    res = client.call(fetch_request([("huge", 0, 0)]), 12)
    assert len(values_of(res.responses[0].partitions[0].records)) == 2


def test_acks_zero_gets_no_response(client):
    create_topic(client, "fire")
    client.send(produce_request("fire", 0, batch([b"x"]), acks=0), 9)
    cid = client.send(msg("ApiVersionsRequest"), 0)
    res = client.recv(18, 0, cid)  # the next frame is the ApiVersions answer
    assert res.error_code == 0
    f = client.call(fetch_request([("fire", 0, 0)]), 12)
    assert values_of(f.responses[0].partitions[0].records) == [b"x"]


def test_acks_zero_failure_closes_connection(connect):
    c = connect()
    c.send(produce_request("no-such-topic", 0, batch([b"x"]), acks=0), 9)
    assert c.is_closed()


def test_invalid_acks(client):
    create_topic(client, "acks")
    res = client.call(produce_request("acks", 0, batch([b"x"]), acks=2), 9)
    assert res.responses[0].partition_responses[0].error_code == errors.INVALID_REQUIRED_ACKS


@pytest.mark.parametrize("produce_version,magic", [(0, 0), (1, 0), (2, 1)])
def test_old_producer_message_sets_are_up_converted(client, produce_version, magic):
    create_topic(client, "legacy")
    ms = build_message_set([(b"k1", b"v1"), (b"k2", b"v2")], magic=magic)
    res = client.call(produce_request("legacy", 0, ms), produce_version)
    assert res.responses[0].partition_responses[0].error_code == 0
    ms2 = build_message_set([(None, b"v3"), (None, b"v4")], magic=magic, compression="gzip")
    res = client.call(produce_request("legacy", 0, ms2), produce_version)
    pr = res.responses[0].partition_responses[0]
    assert pr.error_code == 0 and pr.base_offset == 2
    f = client.call(fetch_request([("legacy", 0, 0)]), 12)
    entries = list(iter_batches(bytes(f.responses[0].partitions[0].records)))
    assert all(e.magic == 2 for e in entries)
    assert records_with_offsets(f.responses[0].partitions[0].records) == [
        (0, b"v1"),
        (1, b"v2"),
        (2, b"v3"),
        (3, b"v4"),
    ]


def test_corrupt_legacy_message_set(client):
    create_topic(client, "legacy-bad")
    ms = bytearray(build_message_set([(None, b"value")], magic=1))
    ms[-1] ^= 0x55
    res = client.call(produce_request("legacy-bad", 0, bytes(ms)), 2)
    assert res.responses[0].partition_responses[0].error_code == errors.CORRUPT_MESSAGE


@pytest.mark.parametrize("fetch_version,magic", [(0, 0), (1, 0), (2, 1), (3, 1)])
def test_old_consumers_get_down_converted_message_sets(client, fetch_version, magic):
    create_topic(client, "down")
    produce_ok(client, "down", batch([b"a", b"b", b"c"]))
    produce_ok(client, "down", batch([b"d"], compression="gzip"))
    res = client.call(fetch_request([("down", 0, 1)]), fetch_version)
    records = bytes(res.responses[0].partitions[0].records)
    entries = list(iter_batches(records))
    assert entries and all(e.magic == magic for e in entries)
    assert records_with_offsets(records) == [(1, b"b"), (2, b"c"), (3, b"d")]


def test_log_append_time_topic(client):
    create_topic(client, "lat", configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    pr = produce_ok(
        client,
        "lat",
        batch(
            [b"a"],
        ),
        version=9,
    )
    assert pr.log_append_time_ms >= before
    f = client.call(fetch_request([("lat", 0, 0)]), 12)
    (entry,) = list(iter_batches(bytes(f.responses[0].partitions[0].records)))
    assert entry.timestamp_type == LOG_APPEND_TIME and entry.max_timestamp == pr.log_append_time_ms
    entry.validate_crc()


def test_pipelined_requests_are_answered_in_order(client):
    create_topic(client, "pipe")
    ids = []
    for i in range(100):
        if i % 3 == 0:
            ids.append((0, 9, client.send(produce_request("pipe", 0, batch([b"%d" % i])), 9)))
        elif i % 3 == 1:
            ids.append((1, 12, client.send(fetch_request([("pipe", 0, 0)], max_wait_ms=50, min_bytes=10**9), 12)))
        else:
            ids.append(
                (
                    18,
                    3,
                    client.send(msg("ApiVersionsRequest", client_software_name="a", client_software_version="1"), 3),
                )
            )
    offsets = []
    for key, version, cid in ids:
        body = client.recv(key, version, cid)
        if key == 0:
            offsets.append(body.responses[0].partition_responses[0].base_offset)
    assert offsets == list(range(len(offsets)))


def test_long_poll_is_woken_by_produce(broker, client, connect):
    create_topic(client, "lp")
    producer = connect()

    def later():
        time.sleep(0.3)
        producer.call(produce_request("lp", 0, batch([b"wake"])), 9)

    writer = threading.Thread(target=later)
    writer.start()
    start = time.monotonic()
    res = client.call(fetch_request([("lp", 0, 0)], max_wait_ms=10_000, min_bytes=1), 12)
    elapsed = time.monotonic() - start
    writer.join(10)  # its connection stays open until the produce's own answer is read
    assert values_of(res.responses[0].partitions[0].records) == [b"wake"]
    assert 0.25 <= elapsed < 3


def test_long_poll_times_out_with_max_wait(client):
    create_topic(client, "lp2")
    start = time.monotonic()
    res = client.call(fetch_request([("lp2", 0, 0)], max_wait_ms=400, min_bytes=1), 12)
    elapsed = time.monotonic() - start
    assert 0.35 <= elapsed < 2
    assert res.responses[0].partitions[0].error_code == 0


def test_long_poll_min_bytes_accumulates(client, connect):
    create_topic(client, "lp3")
    producer = connect()

    def later():
        for _i in range(3):
            time.sleep(0.1)
            producer.call(produce_request("lp3", 0, batch([b"x" * 100])), 9)

    writer = threading.Thread(target=later)
    writer.start()
    res = client.call(fetch_request([("lp3", 0, 0)], max_wait_ms=5000, min_bytes=350), 12)
    writer.join(10)  # its connection stays open until the last produce's answer is read
    assert len(values_of(res.responses[0].partitions[0].records)) == 3


def test_many_connections(broker):
    clients = [RawClient(broker.address) for _ in range(50)]
    try:
        for c in clients:
            c.send(msg("ApiVersionsRequest"), 0)
        for c in clients:
            assert c.recv(18, 0).error_code == 0
    finally:
        for c in clients:
            c.close()


def test_zstd_needs_produce_v7_and_is_fetched_as_stored_from_fetch_v4(client):
    """Kafka 4.x no longer down-converts: Fetch v4-9 get zstd batches as they are (as the reference does);
    only the magic 0/1 message sets of Fetch v0-3, which Kafka 4.x does not serve, cannot carry them."""
    create_topic(client, "zstd")
    res = client.call(produce_request("zstd", 0, batch([b"z"], compression="zstd")), 6)
    assert res.responses[0].partition_responses[0].error_code == errors.UNSUPPORTED_COMPRESSION_TYPE
    produce_ok(client, "zstd", batch([b"z"], compression="zstd"), version=7)
    for version in (4, 9, 10):
        p = client.call(fetch_request([("zstd", 0, 0)]), version).responses[0].partitions[0]
        assert p.error_code == 0 and values_of(p.records) == [b"z"], version
    old = client.call(fetch_request([("zstd", 0, 0)]), 3).responses[0].partitions[0]
    assert old.error_code == errors.UNSUPPORTED_COMPRESSION_TYPE and old.high_watermark == -1


def test_topic_compression_type_recompresses(client):
    from .test_sessions_idempotence import init_producer

    create_topic(client, "recomp", configs={"compression.type": "gzip"})
    pid, epoch = init_producer(client)
    produce_ok(client, "recomp", batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0))
    produce_ok(
        client, "recomp", batch([b"c"], compression="lz4", producer_id=pid, producer_epoch=epoch, base_sequence=2)
    )
    f = client.call(fetch_request([("recomp", 0, 0)]), 12)
    entries = list(iter_batches(bytes(f.responses[0].partitions[0].records)))
    assert [int(e.compression) for e in entries] == [1, 1]
    assert [(e.producer_id, e.base_sequence) for e in entries] == [(pid, 0), (pid, 2)]
    assert records_with_offsets(f.responses[0].partitions[0].records) == [(0, b"a"), (1, b"b"), (2, b"c")]
    for e in entries:
        e.validate_crc()


def test_response_after_a_long_poll_waits_its_turn(client):
    create_topic(client, "turn")
    start = time.monotonic()
    fetch_id = client.send(fetch_request([("turn", 0, 0)], max_wait_ms=400, min_bytes=1), 12)
    versions_id = client.send(msg("ApiVersionsRequest"), 0)
    client.recv(1, 12, fetch_id)  # asserts the correlation id: the fetch is answered first
    client.recv(18, 0, versions_id)
    assert time.monotonic() - start >= 0.35
