"""Durability with a real client: what the broker acknowledged is there after a restart or a crash.

Each test runs its own broker on disk storage; a restart keeps its port and
data directory. They run against kafkawire and Apache Kafka (a SIGKILL loses
nothing Kafka wrote: its unflushed data sits in the page cache, which outlives
the process). Tansu runs in memory here, so it is skipped.
"""

from __future__ import annotations

import time

import pytest

from .peer_harness import Rec, assert_readback, by_partition, confluent_consume, confluent_produce, make_records

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType  # noqa: E402


@pytest.fixture
def disk_broker(peer_target, broker_factory):
    if peer_target == "tansu":
        pytest.skip(f"{peer_target} runs with memory storage here: nothing survives a restart")
    return broker_factory("disk")


def create_topic(bootstrap, topic, partitions, config=None):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(30)


def watermarks(bootstrap, topic, partitions):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "peers-durability"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)}
    finally:
        consumer.close()


@pytest.mark.timeout(180)
def test_restart_between_produce_and_consume(disk_broker, topic):
    partitions = 3
    create_topic(disk_broker.bootstrap, topic, partitions, {"retention.ms": "86400000"})
    records = make_records(1500, partitions, seed=500)
    # Two producers, two codecs: the log holds batches of both kinds.
    first = confluent_produce(
        disk_broker.bootstrap,
        topic,
        records[:800],
        {"enable.idempotence": True, "acks": "all", "compression.type": "lz4"},
    )
    second = confluent_produce(disk_broker.bootstrap, topic, records[800:], {"acks": "1", "compression.type": "none"})
    delivered = first + second
    # A topic deleted before the restart stays deleted after it.
    gone = topic + "-deleted"
    create_topic(disk_broker.bootstrap, gone, 2)
    confluent_produce(disk_broker.bootstrap, gone, make_records(50, 2, seed=502))
    deleter = AdminClient({"bootstrap.servers": disk_broker.bootstrap})
    deleter.delete_topics([gone])[gone].result(30)

    disk_broker.restart()

    got = confluent_consume(disk_broker.bootstrap, topic, partitions, len(records))
    assert_readback(records, got, delivered=delivered)
    counts = {p: len(rs) for p, rs in by_partition(records).items()}
    assert watermarks(disk_broker.bootstrap, topic, partitions) == {p: (0, counts[p]) for p in range(partitions)}

    # The topic's metadata survived too: partition count and the config set at creation.
    admin = AdminClient({"bootstrap.servers": disk_broker.bootstrap})
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == partitions
    assert gone not in admin.list_topics(timeout=10).topics
    resource = ConfigResource(ResourceType.TOPIC, topic)
    assert admin.describe_configs([resource])[resource].result(30)["retention.ms"].value == "86400000"

    # New records continue the recovered logs, and a second restart keeps everything.
    more = make_records(300, partitions, seed=501)
    more_delivered = confluent_produce(disk_broker.bootstrap, topic, more, {"enable.idempotence": True, "acks": "all"})
    disk_broker.restart()
    got = confluent_consume(disk_broker.bootstrap, topic, partitions, len(records) + len(more))
    assert_readback(records + more, got, delivered=delivered + more_delivered)


@pytest.mark.timeout(240)
def test_sigkill_during_acks_all_load_keeps_every_acknowledged_record(disk_broker, topic):
    """SIGKILL while an acks=all producer is mid-load; after restart every acknowledged record is at
    its acknowledged offset, in order. Unacknowledged records may or may not be there, but whatever
    is there is what was produced, in production order, without duplicates or gaps."""
    partitions = 3
    total = 20_000
    create_topic(disk_broker.bootstrap, topic, partitions)
    records = make_records(total, partitions, seed=600, big_every=0)
    producer = Producer(
        {
            "bootstrap.servers": disk_broker.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "batch.num.messages": 200,
            "message.timeout.ms": 6000,
            "reconnect.backoff.max.ms": 500,
            "queue.buffering.max.messages": total,
        }
    )
    reports: list = [None] * total
    tally = {"ok": 0, "done": 0}

    def on_delivery(index):
        def report(err, msg):
            reports[index] = ("err", err) if err is not None else ("ok", msg.partition(), msg.offset())
            tally["done"] += 1
            tally["ok"] += err is None

        return report

    kill_after = 8000  # acknowledged records before the crash
    window = 2000  # records without a delivery report at most, so the load stays steady
    burst = 1500  # then this many more at once, and the kill right behind them: batches are in flight
    after_kill = 1000  # the producer keeps sending into the crash, as an application would
    acked_at_kill = outstanding_at_kill = None
    kill_at = stop_at = None
    produced = 0
    deadline = time.monotonic() + 90
    for i, r in enumerate(records):
        while kill_at is None and i - tally["done"] >= window and time.monotonic() < deadline:
            producer.poll(0.01)
        producer.produce(
            topic,
            value=r.value,
            key=r.key,
            partition=r.partition,
            headers=list(r.headers) or None,
            timestamp=r.timestamp,
            on_delivery=on_delivery(i),
        )
        produced = i + 1
        if kill_at is None:
            producer.poll(0)
            if tally["ok"] >= kill_after:
                kill_at = produced + burst
        elif acked_at_kill is None and produced >= kill_at:
            producer.poll(0)
            acked_at_kill, outstanding_at_kill = tally["ok"], produced - tally["done"]
            disk_broker.kill()
            stop_at = produced + after_kill
        if stop_at is not None and produced >= stop_at:
            break
    assert acked_at_kill is not None, "the producer never reached the kill point: the broker is too slow or stuck"
    assert outstanding_at_kill > 0, "the kill came when no record was awaiting its acknowledgement"
    producer.flush(30)
    assert all(rep is not None for rep in reports[:produced]), "every record gets a delivery report (ok or error)"
    acked = {i: (rep[1], rep[2]) for i, rep in enumerate(reports[:produced]) if rep[0] == "ok"}
    assert len(acked) >= acked_at_kill
    assert len(acked) < produced, "records sent after the crash cannot have been acknowledged"
    del producer

    disk_broker.start()

    consumer = Consumer(
        {"bootstrap.servers": disk_broker.bootstrap, "group.id": "peers-durability", "enable.auto.commit": False}
    )
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        consumer.close()
    got = confluent_consume(disk_broker.bootstrap, topic, partitions, sum(ends.values()))
    assert len(got) == sum(ends.values()), f"high watermarks {ends} but read {len(got)} records"

    # Per partition: offsets 0..end-1, and the records are a prefix-ordered, duplicate-free
    # subsequence of what was produced there; every acknowledged one is at its reported offset.
    sent = by_partition(records[:produced])
    index_in_partition = {}
    for recs in sent.values():
        for j, r in enumerate(recs):
            index_in_partition[r] = j
    found: dict[tuple[int, int], Rec] = {}
    for p in range(partitions):
        mine = [(o, r) for o, r in got if r.partition == p]
        assert [o for o, _ in mine] == list(range(len(mine))), f"partition {p}: offsets are not 0..{len(mine) - 1}"
        positions = []
        for o, r in mine:
            assert r in index_in_partition, f"partition {p} offset {o} holds a record nobody produced: {r}"
            positions.append(index_in_partition[r])
            found[(p, o)] = r
        assert positions == sorted(set(positions)), f"partition {p}: records out of order or duplicated"
    print(
        f"killed after {acked_at_kill} acks with {outstanding_at_kill} records awaiting acknowledgement; "
        f"acknowledged in the end {len(acked)}; in the log after restart {len(got)}"
    )
    missing = [(i, where) for i, where in acked.items() if found.get(where) != records[i]]
    assert not missing, (
        f"{len(missing)} acknowledged records are not at their acknowledged offset after "
        f"SIGKILL and restart, first: record #{missing[0][0]} at {missing[0][1]}"
    )

    # The recovered log takes new records after its end.
    tail = make_records(200, partitions, seed=601)
    tail_delivered = confluent_produce(disk_broker.bootstrap, topic, tail, {"acks": "all"})
    for _r, (p, o) in zip(tail, tail_delivered):
        assert o >= ends[p]
    got_tail = confluent_consume(disk_broker.bootstrap, topic, partitions, len(tail), start=ends)
    assert_readback(tail, got_tail, delivered=tail_delivered, start_offsets=ends)
