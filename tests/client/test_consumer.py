"""kafkawire's consumer reading what librdkafka (confluent-kafka) produced: records and Arrow paths."""

from __future__ import annotations

import time

import pytest

from kafkawire.client import Consumer, KafkaError, Producer

from .helpers import T0, confluent_produce, make_records

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _poll_all(consumer: Consumer, n: int, timeout: float = 60.0) -> list:
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out.extend(consumer.poll(0.5))
    return out


def _arrow_all(consumer: Consumer, n: int, timeout: float = 60.0, **kw) -> list[dict]:
    rows = []
    deadline = time.monotonic() + timeout
    while len(rows) < n and time.monotonic() < deadline:
        for rb in consumer.poll_arrow(0.5, **kw):
            rows.extend(rb.to_pylist())
    return rows


def _expected(records, placed):
    """{(partition, offset): record} from what the producer reported."""
    return {(p, o): r for r, (p, o) in zip(records, placed)}


@pytest.mark.parametrize("codec", CODECS)
def test_reads_librdkafka_records_exactly(bootstrap, make_topic, topic, codec):
    make_topic(topic, 3)
    records = make_records(300, seed=len(codec))
    placed = confluent_produce(bootstrap, topic, records, {"compression.type": codec, "linger.ms": 20})
    expected = _expected(records, placed)
    with Consumer(bootstrap) as c:
        c.assign([(topic, p) for p in range(3)], offset="earliest")
        got = _poll_all(c, len(records))
        assert len(got) == len(records)
        for r in got:
            e = expected[(r.partition, r.offset)]
            assert (r.topic, r.key, r.value, r.headers, r.timestamp, r.timestamp_type) == (
                topic,
                e["key"],
                e["value"],
                e["headers"],
                e["timestamp"],
                0,
            )
        # per partition in offset order, nothing twice
        for p in range(3):
            offs = [r.offset for r in got if r.partition == p]
            assert offs == sorted(offs) == list(range(len(offs)))

        c.seek_to_beginning()
        rows = _arrow_all(c, len(records), headers=True)
        assert len(rows) == len(records)
        for row in rows:
            e = expected[(row["partition"], row["offset"])]
            assert row["topic"] == topic
            assert row["key"] == e["key"] and row["value"] == e["value"]
            assert [(h["key"], h["value"]) for h in row["headers"]] == e["headers"]
            assert int(row["timestamp"].timestamp() * 1000) == e["timestamp"]


def test_start_positions_and_seeks(bootstrap, make_topic, topic, tansu_gap):
    tansu_gap("ListOffsets latest is the last batch's base offset + 1")
    make_topic(topic, 1)
    records = [{"key": None, "value": b"%d" % i, "headers": [], "timestamp": T0 + 10 * i} for i in range(40)]
    confluent_produce(bootstrap, topic, records, {"linger.ms": 50}, partition=0)
    tp = (topic, 0)
    with Consumer(bootstrap) as c:
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 40}
        # by timestamp: the first record with timestamp >= T0 + 55 is offset 6
        assert c.offsets_for_times({tp: T0 + 55})[tp].offset == 6
        c.assign([tp])
        c.seek_to_timestamp(T0 + 55)
        got = _poll_all(c, 34)
        assert [r.offset for r in got] == list(range(6, 40))
        # an offset inside a batch: records before it are not returned (records and Arrow paths)
        c.seek(tp, 17)
        assert c.position(tp) == 17
        assert [r.value for r in _poll_all(c, 23)] == [b"%d" % i for i in range(17, 40)]
        c.seek(tp, 33)
        assert [row["offset"] for row in _arrow_all(c, 7)] == list(range(33, 40))
        assert c.position(tp) == 40
        # latest: only records produced afterwards
        c.seek_to_end()
        assert c.poll(0.3) == []
        confluent_produce(bootstrap, topic, [{"key": b"k", "value": b"new", "headers": []}], partition=0)
        got = _poll_all(c, 1)
        assert [(r.offset, r.value) for r in got] == [(40, b"new")]


def test_offset_out_of_range(bootstrap, make_topic, topic, tansu_gap):
    tansu_gap("a fetch beyond the log end gets no OFFSET_OUT_OF_RANGE")
    make_topic(topic, 1)
    confluent_produce(bootstrap, topic, make_records(5), partition=0)
    with Consumer(bootstrap, auto_offset_reset="none") as c:
        c.assign({(topic, 0): 1000})
        with pytest.raises(KafkaError) as info:
            for _ in range(20):
                c.poll(0.5)
        assert info.value.name == "OFFSET_OUT_OF_RANGE" and info.value.code == 1
    with Consumer(bootstrap, auto_offset_reset="earliest") as c:
        c.assign({(topic, 0): 1000})
        assert len(_poll_all(c, 5)) == 5


def test_read_committed_skips_aborted_transactions(bootstrap, make_topic, topic, tansu_gap):
    tansu_gap("Fetch responses carry no aborted transactions (librdkafka returns the aborted records too)")
    from confluent_kafka import KafkaException, Producer as CProducer

    make_topic(topic, 1)
    p = CProducer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}", "linger.ms": 5})
    try:
        p.init_transactions(15)
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, b"aborted-%d" % i, partition=0)
        p.flush()
        p.abort_transaction(15)
        p.begin_transaction()
        for i in range(3):
            p.produce(topic, b"committed-%d" % i, partition=0)
        p.commit_transaction(15)
    except KafkaException as exc:
        pytest.skip(f"the broker does not support transactions: {exc}")
    tp = (topic, 0)
    with Consumer(bootstrap, isolation_level="read_committed") as c:
        c.assign([tp], offset="earliest")
        got = _poll_all(c, 3, timeout=10)
        assert [r.value for r in got] == [b"committed-%d" % i for i in range(3)]
        c.seek_to_beginning()
        assert [row["value"] for row in _arrow_all(c, 3, timeout=10)] == [b"committed-%d" % i for i in range(3)]
    with Consumer(bootstrap, isolation_level="read_uncommitted") as c:
        c.assign([tp], offset="earliest")
        got = _poll_all(c, 8, timeout=10)
        # no control records in either mode
        assert [r.value for r in got] == [b"aborted-%d" % i for i in range(5)] + [b"committed-%d" % i for i in range(3)]


def test_roundtrip_with_own_producer_and_many_partitions(bootstrap, make_topic, topic):
    make_topic(topic, 4)
    n = 5000
    with Producer(bootstrap, compression="zstd") as p:
        for i in range(n):
            p.produce(topic, b"value-%d" % i, key=b"k%d" % (i % 97))
        p.flush()
    with Consumer(bootstrap, max_partition_fetch_bytes=16 << 10) as c:  # small fetches: many round trips
        c.assign([(topic, p) for p in range(4)], offset="earliest")
        rows = _arrow_all(c, n)
    assert sorted(int(r["value"][6:]) for r in rows) == list(range(n))
    for r in rows:
        from kafkawire.client.partitioner import partition_for_key

        assert r["partition"] == partition_for_key(r["key"], 4)


def test_poll_waits_at_most_its_timeout(bootstrap, make_topic, topic):
    make_topic(topic, 1)
    with Consumer(bootstrap) as c:
        c.assign([(topic, 0)], offset="earliest")
        t0 = time.monotonic()
        assert c.poll(0.5) == []
        assert c.poll_arrow(0.3) == []
        assert time.monotonic() - t0 < 3


def test_stop_at_reads_a_range_without_fetching_past_it(bootstrap, make_topic, topic):
    make_topic(topic, 1)
    recs = [{"key": None, "value": b"%d" % i, "headers": []} for i in range(300)]
    for i in range(0, 300, 10):  # 30 batches of 10
        confluent_produce(bootstrap, topic, recs[i : i + 10], partition=0)
    tp = (topic, 0)
    with Consumer(bootstrap) as c:
        c.assign({tp: 25})
        c.stop_at(tp, 95)
        rows = _arrow_all(c, 70, timeout=10)
        offsets = [r["offset"] for r in rows]
        assert offsets[:70] == list(range(25, 95))
        assert max(offsets) < 100  # nothing fetched beyond the batch holding offset 94
        assert c.poll(0.5) == []  # and no more fetches
        c.stop_at(tp, None)
        assert _poll_all(c, 200)[-1].offset == 299


def test_max_records_pause_resume_and_async_api(bootstrap, make_topic, topic):
    import asyncio

    from kafkawire.client import AsyncConsumer, AsyncProducer

    make_topic(topic, 2)

    async def main():
        async with AsyncProducer(bootstrap) as p:
            for i in range(40):
                await p.send(topic, b"%d" % i, partition=i % 2)
            await p.flush()
        async with AsyncConsumer(bootstrap) as c:
            c.assign([(topic, 0), (topic, 1)], offset="earliest")
            first = await c.getmany(timeout=5, max_records=7)
            assert sum(len(v) for v in first.values()) == 7
            got = [r for recs in first.values() for r in recs]
            for _ in range(40):
                got += await c.records(0.3)
                if len(got) >= 40:
                    break
            assert sorted(int(r.value) for r in got) == list(range(40))  # nothing lost, nothing twice
            c.pause((topic, 1))
            async with AsyncProducer(bootstrap) as p:
                await p.send_and_wait(topic, b"p0", partition=0)
                await p.send_and_wait(topic, b"p1", partition=1)
            got = []
            for _ in range(10):
                got += await c.records(0.3)
            assert [r.value for r in got] == [b"p0"]
            c.resume((topic, 1))
            got = []
            for _ in range(20):
                got += await c.records(0.3)
                if got:
                    break
            assert [r.value for r in got] == [b"p1"]

    asyncio.run(asyncio.wait_for(main(), 60))
