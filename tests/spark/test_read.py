"""Batch reads of topics produced by confluent-kafka: every record, field by field."""

from __future__ import annotations

import datetime as dt
import json

import pytest

BASE_TS = 1_700_000_000_000


def produce(broker, topic: str, records: list[dict]) -> list[dict]:
    """Produce ``records`` (key, value, headers, timestamp, partition?) with confluent-kafka.

    Returns the records with the partition and offset the broker assigned (from the delivery reports).
    """
    from confluent_kafka import Producer

    p = Producer(broker.producer_conf())
    delivered = []
    errors = []

    def report(err, msg, rec):
        if err is not None:
            errors.append(err)
        else:
            delivered.append(dict(rec, partition=msg.partition(), offset=msg.offset()))

    for rec in records:
        kwargs = {"timestamp": rec["timestamp"]}
        if rec.get("headers") is not None:
            kwargs["headers"] = rec["headers"]
        if rec.get("partition") is not None:
            kwargs["partition"] = rec["partition"]
        p.produce(topic, rec["value"], rec["key"], on_delivery=lambda e, m, r=rec: report(e, m, r), **kwargs)
    assert p.flush(60) == 0
    assert not errors, errors
    assert len(delivered) == len(records)
    return delivered


def sample_records(n: int) -> list[dict]:
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else f"key-{i % 13}".encode()
        value = None if i % 11 == 5 else (b"" if i % 11 == 6 else json.dumps({"i": i, "x": "é" * (i % 4)}).encode())
        headers = [] if i % 3 == 0 else [("h1", f"v{i}".encode()), ("h2", None), ("h1", b"\x00\xff")][: i % 3 + 1]
        out.append({"key": key, "value": value, "headers": headers, "timestamp": BASE_TS + i * 1000})
    return out


def row_tuple(r, with_headers=True):
    t = (r["topic"], r["partition"], r["offset"], r["key"], r["value"], r["timestamp"], r["timestampType"])
    if with_headers:
        t += (tuple((h["key"], h["value"]) for h in r["headers"]),)
    return t


def expected_tuple(topic, rec, with_headers=True):
    ts = dt.datetime.fromtimestamp(rec["timestamp"] / 1000, tz=dt.UTC).replace(tzinfo=None)
    t = (topic, rec["partition"], rec["offset"], rec["key"], rec["value"], ts, 0)
    if with_headers:
        t += (tuple(rec["headers"] or ()),)
    return t


def read(spark, broker, **options):
    reader = spark.read.format("kafkawire").option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def as_dicts(df):
    return [r.asDict(recursive=True) for r in df.collect()]


@pytest.fixture(scope="module")
def produced(broker):
    topic = broker.new_topic("read", partitions=3)
    return topic, produce(broker, topic, sample_records(120))


def test_schema_is_sparks_kafka_schema(spark, broker, produced):
    topic, _ = produced
    df = read(spark, broker, subscribe=topic)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
    ]
    df = read(spark, broker, subscribe=topic, includeHeaders="true")
    assert df.schema.fields[-1].dataType.simpleString() == "array<struct<key:string,value:binary>>"


def test_every_record_exactly(spark, broker, produced):
    topic, recs = produced
    rows = as_dicts(read(spark, broker, subscribe=topic, includeHeaders="true"))
    got = sorted(row_tuple(r) for r in rows)
    want = sorted(expected_tuple(topic, rec) for rec in recs)
    assert len(got) == 120
    assert got == want
    # all three partitions hold data, offsets dense from 0 in each
    by_part = {}
    for r in rows:
        by_part.setdefault(r["partition"], []).append(r["offset"])
    assert sorted(by_part) == [0, 1, 2]
    for offs in by_part.values():
        assert sorted(offs) == list(range(len(offs)))


def test_without_headers_and_sql(spark, broker, produced):
    topic, recs = produced
    df = read(spark, broker, subscribe=topic)
    df.createOrReplaceTempView("kw_read")
    n_null_keys = spark.sql("select count(*) from kw_read where key is null").first()[0]
    assert n_null_keys == sum(1 for r in recs if r["key"] is None) > 0
    got = sorted(row_tuple(r, with_headers=False) for r in as_dicts(df))
    assert got == sorted(expected_tuple(topic, rec, with_headers=False) for rec in recs)


def test_offset_ranges_and_assign(spark, broker, produced):
    topic, recs = produced
    counts = {p: sum(1 for r in recs if r["partition"] == p) for p in range(3)}
    start = {topic: {"0": 2, "1": -2, "2": 1}}
    end = {topic: {"0": 5, "1": 3, "2": -1}}
    rows = as_dicts(
        read(spark, broker, subscribe=topic, startingOffsets=json.dumps(start), endingOffsets=json.dumps(end))
    )
    got = sorted((r["partition"], r["offset"]) for r in rows)
    want = sorted([(0, o) for o in range(2, 5)] + [(1, o) for o in range(0, 3)] + [(2, o) for o in range(1, counts[2])])
    assert got == want
    # values match what was produced at those offsets
    by_pos = {(r["partition"], r["offset"]): r["value"] for r in recs}
    assert all(r["value"] == by_pos[(r["partition"], r["offset"])] for r in rows)

    rows = as_dicts(read(spark, broker, assign=json.dumps({topic: [1]})))
    assert sorted(r["offset"] for r in rows) == list(range(counts[1]))
    assert {r["partition"] for r in rows} == {1}


def test_subscribe_pattern(spark, broker, produced):
    topic, recs = produced
    other = broker.create_topic(topic + "-other", 1)
    produce(broker, other, sample_records(5))
    rows = as_dicts(read(spark, broker, subscribePattern=topic.replace("-", ".") + ".*"))
    assert len(rows) == 125
    assert {r["topic"] for r in rows} == {topic, other}
    # a pattern matches whole names only
    rows = as_dicts(read(spark, broker, subscribePattern=topic[:-1]))
    assert rows == []


def test_min_partitions_splits_ranges(spark, broker, produced):
    topic, recs = produced
    df = read(spark, broker, subscribe=topic, minPartitions="8")
    assert df.rdd.getNumPartitions() >= 8
    got = sorted((r["partition"], r["offset"], r["value"]) for r in as_dicts(df))
    assert got == sorted((r["partition"], r["offset"], r["value"]) for r in recs)


def test_starting_timestamp(spark, broker, produced):
    if broker.kind == "tansu":
        pytest.skip("Tansu (memory storage) answers ListOffsets by timestamp with offset 0")
    topic, recs = produced
    cut = BASE_TS + 60 * 1000  # records 60.. have timestamps >= cut
    rows = as_dicts(read(spark, broker, subscribe=topic, startingTimestamp=str(cut)))
    want = sorted((r["partition"], r["offset"]) for r in recs if r["timestamp"] >= cut)
    assert sorted((r["partition"], r["offset"]) for r in rows) == want

    by_ts = {topic: {"0": cut, "1": BASE_TS, "2": cut}}
    rows = as_dicts(read(spark, broker, subscribe=topic, startingOffsetsByTimestamp=json.dumps(by_ts)))
    want = sorted((r["partition"], r["offset"]) for r in recs if r["partition"] == 1 or r["timestamp"] >= cut)
    assert sorted((r["partition"], r["offset"]) for r in rows) == want


def test_ending_timestamp(spark, broker, produced):
    if broker.kind == "tansu":
        pytest.skip("Tansu (memory storage) answers ListOffsets by timestamp with offset 0")
    topic, recs = produced
    lo, hi = BASE_TS + 20 * 1000, BASE_TS + 90 * 1000
    rows = as_dicts(read(spark, broker, subscribe=topic, startingTimestamp=str(lo), endingTimestamp=str(hi)))
    want = sorted((r["partition"], r["offset"]) for r in recs if lo <= r["timestamp"] < hi)
    assert sorted((r["partition"], r["offset"]) for r in rows) == want
    # past every record: the end is the latest offset
    ends = {topic: {"0": BASE_TS, "1": BASE_TS + 10**9, "2": hi}}
    rows = as_dicts(read(spark, broker, subscribe=topic, endingOffsetsByTimestamp=json.dumps(ends)))
    want = sorted(
        (r["partition"], r["offset"])
        for r in recs
        if r["partition"] == 1 or (r["partition"] == 2 and r["timestamp"] < hi)
    )
    assert sorted((r["partition"], r["offset"]) for r in rows) == want


def test_empty_topic_reads_nothing(spark, broker):
    topic = broker.new_topic("empty", partitions=2)
    assert read(spark, broker, subscribe=topic).count() == 0
