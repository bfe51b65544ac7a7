"""kafkawire's producer, read back by librdkafka (confluent-kafka) and checked field by field."""

from __future__ import annotations

import pytest

from kafkawire.client import KafkaError, Producer
from kafkawire.client.partitioner import partition_for_key
from kafkawire.client.transactions import TransactionStateError

from .helpers import confluent_consume_all, confluent_produce, make_records

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _produce(bootstrap, topic, records, **options):
    with Producer(bootstrap, **options) as p:
        futs = [
            p.produce(topic, r["value"], r["key"], headers=r["headers"] or None, timestamp=r["timestamp"])
            for r in records
        ]
        p.flush(60)
        return [f.result(0) for f in futs]


@pytest.mark.parametrize("codec", CODECS)
def test_records_read_back_by_librdkafka(bootstrap, make_topic, topic, codec):
    make_topic(topic, 3)
    records = make_records(400, seed=hash(codec) & 0xFFFF)
    metas = _produce(bootstrap, topic, records, compression=codec, linger_ms=20, batch_size=64 << 10)
    by_part = confluent_consume_all(bootstrap, topic, [0, 1, 2], len(records))
    assert sum(len(v) for v in by_part.values()) == len(records)
    got = {(p, r["offset"]): r for p, rs in by_part.items() for r in rs}
    for rec, meta in zip(records, metas):
        assert meta.topic == topic and meta.timestamp == rec["timestamp"]
        seen = got[(meta.partition, meta.offset)]
        assert seen["key"] == rec["key"]
        assert seen["value"] == rec["value"]
        assert seen["headers"] == rec["headers"]
        assert seen["timestamp"] == rec["timestamp"]
    # per partition, offsets are dense and in produce order
    for _p, rs in by_part.items():
        assert [r["offset"] for r in rs] == list(range(len(rs)))


def test_keyed_records_land_where_librdkafka_murmur2_random_puts_them(bootstrap, make_topic, topic):
    partitions = 7
    make_topic(topic, partitions)
    keys = [b"user-%d" % i for i in range(60)] + [bytes([i]) * i for i in range(1, 20)] + [b"\xff\x00\x80"]
    records = [{"key": k, "value": b"v", "headers": [], "timestamp": 1_700_000_000_000} for k in keys]
    theirs = confluent_produce(bootstrap, topic, records, {"partitioner": "murmur2_random"})
    ours = _produce(bootstrap, topic, records)
    for key, (their_partition, _), meta in zip(keys, theirs, ours):
        assert meta.partition == their_partition == partition_for_key(key, partitions), key


def test_idempotent_batches_carry_producer_id_and_sequences(bootstrap, make_topic, topic):
    from kafkawire.client import Consumer
    from kafkawire.protocol.records import iter_batches

    make_topic(topic, 1)
    with Producer(bootstrap, linger_ms=0, batch_size=2000) as p:
        for _i in range(200):
            p.produce(topic, b"x" * 50, partition=0)
        p.flush()
        pid = p._core.producer_id
    assert pid >= 0
    with Consumer(bootstrap) as c:
        c.assign([(topic, 0)], offset="earliest")
        batches = []
        for _ in range(50):
            chunks = c._run(c._core._take(1.0))
            for ch in chunks:
                batches.extend(iter_batches(ch.data))
            if sum(b.record_count for b in batches) >= 200:
                break
    assert len(batches) > 1
    expected_seq = 0
    for b in batches:
        assert b.producer_id == pid and b.producer_epoch >= 0
        assert b.base_sequence == expected_seq
        expected_seq += b.record_count
    assert expected_seq == 200


def test_non_idempotent_producer_and_acks(bootstrap, make_topic, topic):
    make_topic(topic, 1)
    records = make_records(30, seed=3)
    for acks in (1, 0):
        with Producer(bootstrap, acks=acks, enable_idempotence=False) as p:
            futs = [p.produce(topic, r["value"], r["key"], partition=0, timestamp=r["timestamp"]) for r in records]
            p.flush()
            metas = [f.result(0) for f in futs]
        if acks == 0:
            assert all(m.offset == -1 for m in metas)
        else:
            assert [m.offset for m in metas] == list(range(30))
    got = confluent_consume_all(bootstrap, topic, [0], 60)[0]
    assert [r["value"] for r in got] == [r["value"] for r in records] * 2


def test_produce_to_a_new_topic_retries_until_auto_created(bootstrap, topic):
    # the topic does not exist: metadata answers UNKNOWN_TOPIC_OR_PARTITION / LEADER_NOT_AVAILABLE until the
    # broker has auto-created it; the producer retries with backoff meanwhile
    with Producer(bootstrap) as p:
        meta = p.send(topic, b"hello", b"k", timeout=30)
    assert meta.offset == 0
    parts = list(range(meta.partition + 1))
    got = confluent_consume_all(bootstrap, topic, parts, 1)
    assert got[meta.partition][0]["value"] == b"hello"


def test_unknown_partition_is_a_kafka_error(bootstrap, make_topic, topic):
    make_topic(topic, 2)
    with Producer(bootstrap) as p:
        fut = p.produce(topic, b"v", partition=5)
        p.flush()
        with pytest.raises(KafkaError) as info:
            fut.result(0)
    assert info.value.name == "UNKNOWN_TOPIC_OR_PARTITION" and info.value.code == 3


def test_delivery_callbacks_and_string_values(bootstrap, make_topic, topic):
    make_topic(topic, 1)
    reports = []
    with Producer(bootstrap) as p:
        for i in range(10):
            p.produce(
                topic,
                f"v{i}",
                key=f"k{i}",
                headers={"h": "x"},
                on_delivery=lambda meta, err: reports.append((meta, err)),
            )
        p.flush()
    assert len(reports) == 10 and all(err is None for _, err in reports)
    assert sorted(m.offset for m, _ in reports) == list(range(10))
    got = confluent_consume_all(bootstrap, topic, [0], 10)[0]
    assert [(r["key"], r["value"], r["headers"]) for r in got] == [
        (f"k{i}".encode(), f"v{i}".encode(), [("h", b"x")]) for i in range(10)
    ]


def test_produce_many_nowait_keeps_call_order_and_raises_on_result(bootstrap, make_topic, topic):
    """Calls that do not wait for the client's thread, each waited for before the next (as the Spark sink
    does), keep their order within a partition; a call the producer refuses raises from ``result()``."""
    pa = pytest.importorskip("pyarrow")
    make_topic(topic, 1)
    with Producer(bootstrap) as p:
        groups, queued = [], None
        for call in range(20):
            values = [b"%d-%d" % (call, i) for i in range(500)]
            if queued is not None:
                groups.append(queued.result(60))
            queued = p.produce_many_nowait(topic, values)
        groups.append(queued.result(60))
        p.flush(60)
        assert [(g.delivered, g.failed) for g in groups] == [(500, 0)] * 20
    with Producer(bootstrap, transactional_id=f"{topic}-txn") as t:
        t.init_transactions(60)
        # outside a transaction: the Arrow path refuses the call (a list is refused record by record)
        refused = t.produce_many_nowait(topic, pa.array([b"x"]))
        with pytest.raises(TransactionStateError, match="cannot send"):
            refused.result(60)
    got = confluent_consume_all(bootstrap, topic, [0], 20 * 500)
    assert [r["value"] for r in got[0]] == [b"%d-%d" % (c, i) for c in range(20) for i in range(500)]


def test_large_volume_spans_many_batches(bootstrap, make_topic, topic):
    make_topic(topic, 2)
    n = 20_000
    with Producer(bootstrap, batch_size=16 << 10, compression="lz4") as p:
        futs = [p.produce(topic, b"%08d" % i, partition=i % 2) for i in range(n)]
        p.flush()
        metas = [f.result(0) for f in futs]
    assert [m.offset for m in metas[0::2]] == list(range(n // 2))
    got = confluent_consume_all(bootstrap, topic, [0, 1], n)
    assert [r["value"] for r in got[1]] == [b"%08d" % i for i in range(1, n, 2)]


def test_produce_many(bootstrap, make_topic, topic):
    make_topic(topic, 3)
    n = 3000
    values = [b"v%d" % i for i in range(n)]
    keys = [None if i % 5 == 0 else b"k%d" % (i % 31) for i in range(n)]
    headers = [[("i", b"%d" % i)] if i % 7 == 0 else None for i in range(n)]
    timestamps = [1_700_000_000_000 + i for i in range(n)]
    with Producer(bootstrap) as p:
        group = p.produce_many(topic, values, keys, headers=headers, timestamps=timestamps)
        assert group.result(60) is group
        assert (group.delivered, group.failed, group.errors) == (n, 0, [])
        bad = p.produce_many([topic, topic], [b"a", b"b"], partitions=[0, 99]).result(60)
        assert (bad.delivered, bad.failed) == (1, 1)
        assert bad.errors[0][1].name == "UNKNOWN_TOPIC_OR_PARTITION"
        with pytest.raises(KafkaError):
            bad.raise_first()
    got = confluent_consume_all(bootstrap, topic, [0, 1, 2], n + 1)
    rows = {r["value"]: (p, r) for p, rs in got.items() for r in rs}
    for i in range(n):
        part, r = rows[values[i]]
        assert r["key"] == keys[i] and r["timestamp"] == timestamps[i]
        assert r["headers"] == (headers[i] or [])
        if keys[i] is not None:
            assert part == partition_for_key(keys[i], 3)
