"""confluent-kafka (librdkafka) transactions on kafkawire's broker and on Apache Kafka 4.4, read back by
kafkawire's consumers, and kafkawire's transactions read back by librdkafka's read_committed consumer:

* init, begin, produce, commit / abort / commit: read_committed reads exactly the committed records;
* consume-transform-produce with ``send_offsets_to_transaction`` (librdkafka's group consumer's metadata):
  an aborted round commits no offsets, the committed one does;
* a zombie: a second producer with the same ``transactional.id`` fences the first, whose commit fails with
  a fatal error.
"""

from __future__ import annotations

import time

import pytest

from kafkawire.client import Consumer, Producer

from .groups_support import create_topics, group_broker, names  # noqa: F401
from .test_transactions import assert_reads

ck = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(180)


def ck_producer(bootstrap: str, txn_id: str):
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    p.init_transactions(60)
    return p


def ck_read_committed(bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 30) -> list[int]:
    """librdkafka's read_committed consumer: ``count`` values, then nothing more for a second."""
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        got: list[int] = []
        deadline = time.monotonic() + timeout
        quiet_until = None
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                if len(got) >= count:
                    quiet_until = quiet_until or time.monotonic() + 1.0
                    if time.monotonic() >= quiet_until:
                        break
                continue
            if msg.error():
                continue  # partition EOF and the like
            got.append(int(msg.value()))
        return sorted(got)
    finally:
        c.close()


def test_commit_abort_commit(group_broker, names):
    topic, _ = names
    create_topics(group_broker.bootstrap, topic, partitions=2)
    p = ck_producer(group_broker.bootstrap, f"tx-{topic}")
    for base, commit in ((0, True), (100, False), (200, True)):
        p.begin_transaction()
        for v in range(base, base + 10):
            p.produce(topic, str(v).encode(), partition=v % 2)
        assert p.flush(30) == 0
        (p.commit_transaction if commit else p.abort_transaction)(60)
    committed = list(range(10)) + list(range(200, 210))
    assert_reads(group_broker.bootstrap, topic, 2, "read_committed", committed)
    assert_reads(group_broker.bootstrap, topic, 2, "read_uncommitted", sorted(committed + list(range(100, 110))))
    assert ck_read_committed(group_broker.bootstrap, topic, 2, len(committed)) == committed


def test_kafkawire_transactions_read_by_librdkafka(group_broker, names):
    topic, _ = names
    create_topics(group_broker.bootstrap, topic, partitions=2)
    with Producer(group_broker.bootstrap, transactional_id=f"tx-{topic}", linger_ms=5) as p:
        p.init_transactions(60)
        for base, commit in ((0, True), (100, False), (200, True)):
            p.begin_transaction()
            for v in range(base, base + 10):
                p.produce(topic, str(v).encode(), partition=v % 2)
            p.flush(30)
            (p.commit_transaction if commit else p.abort_transaction)(60)
    committed = list(range(10)) + list(range(200, 210))
    assert_reads(group_broker.bootstrap, topic, 2, "read_committed", committed)
    assert ck_read_committed(group_broker.bootstrap, topic, 2, len(committed)) == committed


def test_send_offsets_to_transaction(group_broker, names):
    source, group = names
    sink = source + "-out"
    create_topics(group_broker.bootstrap, source, sink, partitions=2)
    with Producer(group_broker.bootstrap) as plain:
        for v in range(20):
            plain.produce(source, str(v).encode(), partition=v % 2)
        plain.flush(30)
    consumer = ck.Consumer(
        {
            "bootstrap.servers": group_broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    p = ck_producer(group_broker.bootstrap, f"tx-{source}")
    try:
        consumer.subscribe([source])
        for commit in (False, True):
            got = []
            deadline = time.monotonic() + 60
            while len(got) < 20:
                assert time.monotonic() < deadline, f"read {len(got)} of 20"
                msg = consumer.poll(0.2)
                if msg is not None and not msg.error():
                    got.append(msg)
            p.begin_transaction()
            for m in got:
                p.produce(sink, str(int(m.value()) * 10).encode(), partition=m.partition())
            positions = consumer.position([ck.TopicPartition(source, 0), ck.TopicPartition(source, 1)])
            assert sorted((tp.partition, tp.offset) for tp in positions) == [(0, 10), (1, 10)]
            p.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 60)
            if commit:
                p.commit_transaction(60)
            else:
                assert p.flush(30) == 0
                p.abort_transaction(60)
                for tp in positions:
                    consumer.seek(ck.TopicPartition(source, tp.partition, 0))
    finally:
        consumer.close()
    with Consumer(group_broker.bootstrap, group_id=group) as c:
        assert c.committed([(source, 0), (source, 1)]) == {(source, 0): 10, (source, 1): 10}
    expected = [v * 10 for v in range(20)]
    assert_reads(group_broker.bootstrap, sink, 2, "read_committed", expected)
    assert_reads(group_broker.bootstrap, sink, 2, "read_uncommitted", sorted(expected * 2))


def test_fenced_zombie(group_broker, names):
    topic, _ = names
    create_topics(group_broker.bootstrap, topic, partitions=1)
    zombie = ck_producer(group_broker.bootstrap, f"tx-{topic}")
    zombie.begin_transaction()
    zombie.produce(topic, b"1", partition=0)
    assert zombie.flush(30) == 0
    successor = ck_producer(group_broker.bootstrap, f"tx-{topic}")
    zombie.produce(topic, b"2", partition=0)
    with pytest.raises(ck.KafkaException) as fenced:
        zombie.flush(30)  # librdkafka raises its fatal error here (Produce answered with an old epoch)
        zombie.commit_transaction(30)
    err = fenced.value.args[0]
    assert err.fatal(), err
    assert err.code() in (ck.KafkaError._FENCED, ck.KafkaError.PRODUCER_FENCED, ck.KafkaError.INVALID_PRODUCER_EPOCH), (
        err
    )
    successor.begin_transaction()
    successor.produce(topic, b"10", partition=0)
    successor.commit_transaction(60)
    assert_reads(group_broker.bootstrap, topic, 1, "read_committed", [10])
