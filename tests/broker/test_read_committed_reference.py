"""The same transactions (confluent-kafka's transactional producer: commit, abort, commit) written to the
reference Kafka 4.4 and to kafkawire, then read back with raw Fetch requests: read_committed and
read_uncommitted answers compared field by field (high watermark, last stable offset, log start offset,
aborted transactions, and each batch's offsets, control flag, marker type and records), as are ListOffsets
LATEST per isolation level. Producer ids are labelled in order of appearance (each broker allocates its own).

The reference Kafka here is a node of this module's own, not the session's: transactions create
``__transaction_state`` (50 partitions), which would change what later tests see of the shared node (its
topic list, its answers to transactional Produce without a coordinator, how soon new partitions are led)."""

from __future__ import annotations

import struct
import time

import pytest
from confluent_kafka import Producer

from kafkawire.broker.config import BrokerConfig
from kafkawire.protocol import message_class
from kafkawire.protocol.records import iter_batches

from .helpers import create_topic, fetch_request
from .reference import reference_client, unique, wait_for_topic

FETCH_VERSIONS = [4, 12, 17]


def transactions(bootstrap: str, topic: str) -> Producer:
    """Commit, abort, commit; returns the producer (its next transaction is left to the caller)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"{topic}-tx",
            "linger.ms": 0,
            "broker.address.family": "v4",
        }
    )
    producer.init_transactions(60)
    for n, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        for i in range(2):
            producer.produce(topic, value=b"%d-%d" % (n, i), partition=0)
            producer.flush(30)  # one record per batch on both brokers, whatever the timing
        if commit:
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)
    return producer


def describe(client, key, version: int, isolation: int, labels: dict, offset: int = 0):
    p = client.call(fetch_request([(key, 0, offset)], isolation_level=isolation), version).responses[0].partitions[0]

    def label(pid):
        return labels.setdefault(pid, f"P{len(labels)}")

    batches = []
    for b in iter_batches(bytes(p.records or b"")):
        records = list(b.records())
        content = (
            ("marker", struct.unpack(">hh", bytes(records[0].key)))
            if b.is_control
            else [bytes(r.value) for r in records]
        )
        batches.append((b.base_offset, b.last_offset, b.is_transactional, label(b.producer_id), content))
    aborted = (
        None
        if p.aborted_transactions is None
        else [(label(a.producer_id), a.first_offset) for a in p.aborted_transactions]
    )
    return {
        "error": p.error_code,
        "hw": p.high_watermark,
        "lso": p.last_stable_offset,
        "start": p.log_start_offset,
        "aborted": aborted,
        "batches": batches,
    }


def latest(client, topic: str, isolation: int, timestamp: int = -1) -> int:
    """ListOffsets v7's offset for ``timestamp`` (-1 LATEST, -3 MAX_TIMESTAMP)."""
    R = message_class("ListOffsetsRequest")
    req = R(
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            R.ListOffsetsTopic(name=topic, partitions=[R.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])
        ],
    )
    return client.call(req, 7).topics[0].partitions[0].offset


def settled(client, topic: str, end: int, timeout: float = 30.0) -> None:
    """Wait until the last marker is written: a commit returns before the coordinator has written its
    markers (Kafka writes them after answering EndTxn), so the LSO reaches the log end a moment later."""
    deadline = time.monotonic() + timeout
    while (latest(client, topic, 0), latest(client, topic, 1)) != (end, end):
        assert time.monotonic() < deadline, (latest(client, topic, 0), latest(client, topic, 1))
        time.sleep(0.05)


def answers(client, bootstrap: str, topic: str, key_for) -> dict:
    producer = transactions(bootstrap, topic)
    settled(client, topic, 9)  # 6 records and 3 markers
    labels: dict = {}
    out = {(v, iso): describe(client, key_for(v), v, iso, labels) for v in FETCH_VERSIONS for iso in (0, 1)}
    out["latest"] = (latest(client, topic, 0), latest(client, topic, 1))
    # from inside and after the aborted transaction (3-5): which aborted transactions overlap the rest
    out.update(
        {
            ("from", offset, iso): describe(client, key_for(12), 12, iso, labels, offset)
            for offset in (4, 6, 9)
            for iso in (0, 1)
        }
    )
    # a fourth transaction left open: its record is in the log, the LSO stays at its first offset
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0)
    producer.flush(30)
    out.update(
        {("open", v, iso): describe(client, key_for(v), v, iso, labels) for v in FETCH_VERSIONS for iso in (0, 1)}
    )
    out["open latest"] = (latest(client, topic, 0), latest(client, topic, 1))
    # the record with the largest timestamp is the open transaction's: not below read_committed's LSO
    out["open max timestamp"] = (latest(client, topic, 0, -3), latest(client, topic, 1, -3))
    producer.abort_transaction(60)
    return out


@pytest.fixture(scope="module")
def own_kafka(tmp_path_factory):
    from conftest import reference_unavailable  # tests/conftest.py
    from kafka_reference import KafkaUnavailable, ReferenceKafka  # tools/

    kafka = ReferenceKafka(tmp_path_factory.mktemp("reference-kafka-transactions"), heap="512m")
    try:
        kafka.start()
    except KafkaUnavailable as exc:
        kafka.close()
        reference_unavailable(str(exc))
    yield kafka
    kafka.close()


@pytest.fixture(params=["memory", "segments"])
def broker_config(request, tmp_path):
    return BrokerConfig(port=0, storage=request.param, data_dir=str(tmp_path / "data"))


def test_transactions_read_back_as_from_kafka(broker, client, own_kafka):
    ref = reference_client(own_kafka)
    try:
        theirs = unique("rc")
        create_topic(ref, theirs)
        ref_id = wait_for_topic(ref, theirs)
        kafka = answers(ref, f"{own_kafka.host}:{own_kafka.port}", theirs, lambda v: ref_id if v >= 13 else theirs)
        create_topic(client, "rc")
        from .test_metadata_topic_ids import topic_id

        our_id = topic_id(client, "rc")
        host, port = broker.address
        ours = answers(client, f"{host}:{port}", "rc", lambda v: our_id if v >= 13 else "rc")
    finally:
        ref.close()
    # the sequence itself, as Kafka 4.4 lays it out: 2 records and a COMMIT, 2 and an ABORT, 2 and a COMMIT
    committed = kafka[(12, 1)]
    assert [(b[0], b[4]) for b in committed["batches"]] == [
        (0, [b"0-0"]),
        (1, [b"0-1"]),
        (2, ("marker", (0, 1))),
        (3, [b"1-0"]),
        (4, [b"1-1"]),
        (5, ("marker", (0, 0))),
        (6, [b"2-0"]),
        (7, [b"2-1"]),
        (8, ("marker", (0, 1))),
    ], committed
    assert (committed["hw"], committed["lso"], committed["aborted"]) == (9, 9, [("P0", 3)])
    assert kafka["open latest"] == (10, 9) and kafka[("open", 12, 1)]["lso"] == 9
    for key, answer in kafka.items():
        assert ours[key] == answer, key
