"""A transaction left open on one broker is found, fenced and aborted by the other on a data directory Kafka 4.4
and kafkawire share: each looks for a transactional id's state in the partition of ``__transaction_state``
Kafka's ``partitionFor`` picks (the topic as Kafka creates it: 50 partitions). The epoch the next
InitProducerId gives is the one Kafka gives when it wrote the state itself (measured on Kafka in the same
test), and the open transaction's records are never read by a read_committed consumer."""

from __future__ import annotations

import time

import pytest
from broker.conftest import RawClient
from storage.kafka_dir import create_topics, kafka_on, kafkawire_on

from kafkawire.broker.groups.persistence import partition_for
from kafkawire.protocol import errors, message_class

pytest.importorskip("confluent_kafka")

TXN_TIMEOUT_MS = 600_000  # no timed-out abort while the test runs: only the next InitProducerId ends it
KAFKA_PARTITIONS = 50


def _address(bootstrap: str):
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def describe(bootstrap: str, tid: str, timeout: float = 60.0):
    """DescribeTransactions (retried until the node serves and has loaded the partition): (state, producer id, epoch)."""
    request = message_class("DescribeTransactionsRequest")(transactional_ids=[tid])
    deadline = time.monotonic() + timeout
    while True:
        c = RawClient(_address(bootstrap))
        try:
            (state,) = c.call(request, 0).transaction_states
        finally:
            c.close()
        if state.error_code not in (
            errors.COORDINATOR_LOAD_IN_PROGRESS,
            errors.COORDINATOR_NOT_AVAILABLE,
            errors.NOT_COORDINATOR,
        ):
            break
        assert time.monotonic() < deadline, f"coordinator for {tid} still loading"
        time.sleep(0.5)
    if state.error_code == errors.TRANSACTIONAL_ID_NOT_FOUND:
        return None
    assert state.error_code == 0, state
    return state.transaction_state, state.producer_id, state.producer_epoch


def producer(bootstrap: str, tid: str):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": TXN_TIMEOUT_MS})
    p.init_transactions(60)
    return p


def send(p, topic: str, values: list[bytes], commit: bool) -> None:
    """One transaction of ``values``; committed, or left open (flushed, never ended)."""
    p.begin_transaction()
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % 2)
    assert p.flush(30) == 0
    if commit:
        p.commit_transaction(30)


def read_committed(bootstrap: str, topic: str, expected: int, timeout: float = 30.0) -> set[bytes]:
    """Values a read_committed consumer reads from the beginning: ``expected`` of them, then nothing more
    up to the last stable offset."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
        got, eof = [], set()
        deadline = time.monotonic() + timeout
        while (len(got) < expected or len(eof) < 2) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(msg.partition())
                    continue
                pytest.fail(f"consumer error: {msg.error()}")
            eof.discard(msg.partition())
            got.append(msg.value())
        assert len(eof) == 2, f"read_committed did not reach the end of {topic}: {sorted(got)}"
        assert len(got) == len(set(got))
        return set(got)
    finally:
        consumer.close()


def leave_open(bootstrap: str, tid: str, topic: str, tag: str):
    """A producer commits one transaction and leaves a second open, then goes away: (committed values, the
    open transaction's (state, producer id, epoch) as the broker describes it)."""
    p = producer(bootstrap, tid)
    committed = [f"{tag}-committed-{i}".encode() for i in range(6)]
    send(p, topic, committed, commit=True)
    send(p, topic, [f"{tag}-open-{i}".encode() for i in range(4)], commit=False)
    del p  # the process ends with its transaction open
    state = describe(bootstrap, tid)
    assert state is not None and state[0] == "Ongoing", state
    return set(committed), state


def take_over(bootstrap: str, tid: str, topic: str, tag: str):
    """A new producer of ``tid``: InitProducerId fences the open transaction; one transaction committed. The
    (state, producer id, epoch) after InitProducerId, and the values committed."""
    p = producer(bootstrap, tid)
    after_init = describe(bootstrap, tid)
    committed = [f"{tag}-after-{i}".encode() for i in range(4)]
    send(p, topic, committed, commit=True)
    del p
    return after_init, set(committed)


def kafkas_epoch_step(bootstrap: str) -> int:
    """On Kafka alone: how far the epoch moves from an open transaction to the next InitProducerId's."""
    create_topics(bootstrap, {"seed": (2, {})})
    _committed, (_state, pid, epoch) = leave_open(bootstrap, "seed-txn", "seed", "seed")
    (state, pid_after, epoch_after), _ = take_over(bootstrap, "seed-txn", "seed", "seed")
    assert pid_after == pid and state in ("Empty", "CompleteAbort")
    return epoch_after - epoch


def _off_partition_0(tid: str) -> str:
    assert partition_for(tid, KAFKA_PARTITIONS) != 0, tid  # where an older kafkawire wrote every id
    return tid


def test_kafkawire_finds_fences_and_aborts_a_transaction_kafka_left_open(tmp_path):
    tid = _off_partition_0("orders-txn")
    kafka = kafka_on(tmp_path)
    try:
        step = kafkas_epoch_step(kafka.bootstrap)  # also creates __transaction_state, 50 partitions
        create_topics(kafka.bootstrap, {"orders": (2, {})})
        committed, (_, pid, epoch) = leave_open(kafka.bootstrap, tid, "orders", "kafka")
    finally:
        kafka.stop()

    wire = kafkawire_on(tmp_path)
    try:
        assert describe(wire.bootstrap, tid) == ("Ongoing", pid, epoch)
        (state, pid_after, epoch_after), more = take_over(wire.bootstrap, tid, "orders", "kafkawire")
        assert (pid_after, epoch_after) == (pid, epoch + step)
        assert read_committed(wire.bootstrap, "orders", len(committed | more)) == committed | more
    finally:
        wire.stop()


def test_kafka_finds_fences_and_aborts_a_transaction_kafkawire_left_open(tmp_path):
    tid = _off_partition_0("payments-app-txn")
    kafka = kafka_on(tmp_path)
    try:
        step = kafkas_epoch_step(kafka.bootstrap)  # __transaction_state as Kafka creates it
        create_topics(kafka.bootstrap, {"payments": (2, {})})
    finally:
        kafka.stop()

    wire = kafkawire_on(tmp_path)
    try:
        committed, (_, pid, epoch) = leave_open(wire.bootstrap, tid, "payments", "kafkawire")
    finally:
        wire.stop()

    kafka = kafka_on(tmp_path)
    try:
        assert describe(kafka.bootstrap, tid) == ("Ongoing", pid, epoch)
        (state, pid_after, epoch_after), more = take_over(kafka.bootstrap, tid, "payments", "kafka")
        assert (pid_after, epoch_after) == (pid, epoch + step)
        assert read_committed(kafka.bootstrap, "payments", len(committed | more)) == committed | more
    finally:
        kafka.stop()
