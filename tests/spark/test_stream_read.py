"""Streaming reads: rate limit, checkpointed offsets, stop and restart, exactly once across runs."""

from __future__ import annotations

import collections
import json
import os
import time
import uuid

import pytest

from .test_read import produce


def values(n0: int, n1: int) -> list[dict]:
    return [
        {"key": f"k{i % 5}".encode(), "value": f"rec-{i}".encode(), "headers": None, "timestamp": 1_700_000_000_000 + i}
        for i in range(n0, n1)
    ]


def stream(spark, broker, topic, **options):
    r = (
        spark.readStream.format("kafkawire")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def to_parquet(df, out, ck, **trigger):
    return (
        df.selectExpr("CAST(value AS STRING) AS v", "partition", "offset")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", ck)
        .trigger(**trigger)
        .start()
    )


def finished(q, seconds=180) -> None:
    assert q.awaitTermination(seconds), "query did not finish"
    assert q.exception() is None, q.exception()


def rows_per_batch(q) -> list[int]:
    return [p["numInputRows"] for p in q.recentProgress]


def test_max_offsets_per_trigger_stop_restart_exactly_once(spark, broker, tmp_path):
    topic = broker.new_topic("stream", partitions=2)
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    produce(broker, topic, values(0, 40))

    # run 1: Trigger.AvailableNow with at most 7 records per micro-batch
    q = to_parquet(stream(spark, broker, topic, maxOffsetsPerTrigger="7"), out, ck, availableNow=True)
    finished(q)
    per_batch = [n for n in rows_per_batch(q) if n]
    assert sum(per_batch) == 40
    assert max(per_batch) <= 7 and len(per_batch) >= 6

    # the checkpoint holds Spark-style offsets {"topic": {"partition": offset}}
    offsets_dir = os.path.join(ck, "offsets")
    last = max(int(f) for f in os.listdir(offsets_dir) if f.isdigit())
    with open(os.path.join(offsets_dir, str(last))) as fh:
        source_offsets = json.loads(fh.read().strip().splitlines()[-1])
    assert set(source_offsets) == {topic}
    assert sum(source_offsets[topic].values()) == 40

    # run 2: continuous micro-batches, stopped after a few
    produce(broker, topic, values(40, 100))
    q = to_parquet(stream(spark, broker, topic, maxOffsetsPerTrigger="9"), out, ck, processingTime="0 seconds")
    for _ in range(600):  # bounded wait for two micro-batches with data
        if sum(1 for n in rows_per_batch(q) if n) >= 2 or q.exception() is not None:
            break
        time.sleep(0.1)
    q.stop()
    assert q.exception() is None
    assert sum(1 for n in rows_per_batch(q) if n) >= 2

    # run 3: resume from the checkpoint, read the rest
    produce(broker, topic, values(100, 130))
    q = to_parquet(stream(spark, broker, topic, maxOffsetsPerTrigger="50"), out, ck, availableNow=True)
    finished(q)
    assert max(rows_per_batch(q)) <= 50

    got = spark.read.parquet(out).collect()
    counts = collections.Counter(r.v for r in got)
    assert counts == collections.Counter(f"rec-{i}" for i in range(130))  # every record, exactly once
    assert len({(r.partition, r.offset) for r in got}) == 130


def test_starting_latest_reads_only_new_records(spark, broker, tmp_path):
    topic = broker.new_topic("latest", partitions=1)
    produce(broker, topic, values(0, 10))
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    df = stream(spark, broker, topic, startingOffsets="latest")
    q = to_parquet(df, out, ck, availableNow=True)
    finished(q)  # first run fixes the starting point at the then latest offset
    produce(broker, topic, values(10, 15))
    q = to_parquet(stream(spark, broker, topic, startingOffsets="latest"), out, ck, availableNow=True)
    finished(q)
    got = sorted(r.v for r in spark.read.parquet(out).collect())
    assert got == sorted(f"rec-{i}" for i in range(10, 15))


def test_new_partition_assignment_json_offsets(spark, broker, tmp_path):
    topic = broker.new_topic("assign", partitions=3)
    recs = produce(broker, topic, values(0, 60))
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    start = {topic: {"0": 3, "2": -2}}
    df = (
        spark.readStream.format("kafkawire")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("assign", json.dumps({topic: [0, 2]}))
        .option("startingOffsets", json.dumps(start))
        .load()
    )
    q = to_parquet(df, out, ck, availableNow=True)
    finished(q)
    got = sorted((r.partition, r.offset, r.v) for r in spark.read.parquet(out).collect())
    want = sorted(
        (r["partition"], r["offset"], r["value"].decode())
        for r in recs
        if r["partition"] == 2 or (r["partition"] == 0 and r["offset"] >= 3)
    )
    assert got == want


def test_pattern_picks_up_new_topics_from_earliest(spark, broker, tmp_path):
    base = f"pat{uuid.uuid4().hex[:6]}"
    first = broker.create_topic(f"{base}-a", 2)
    produce(broker, first, values(0, 12))
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")

    def run():
        df = (
            spark.readStream.format("kafkawire")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribePattern", f"{base}-.*")
            .option("startingOffsets", "earliest")
            .load()
        )
        finished(to_parquet(df, out, ck, availableNow=True))

    run()
    second = broker.create_topic(f"{base}-b", 3)  # appears while the query is stopped
    produce(broker, second, values(100, 130))
    produce(broker, first, values(12, 15))
    run()
    got = collections.Counter(r.v for r in spark.read.parquet(out).collect())
    assert got == collections.Counter([f"rec-{i}" for i in range(15)] + [f"rec-{i}" for i in range(100, 130)])


def delete_records(broker, topic: str, partition: int, before: int) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    if broker.kind == "tansu":
        pytest.skip("Tansu has no DeleteRecords")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.delete_records([TopicPartition(topic, partition, before)]).values():
        f.result(timeout=30)


@pytest.mark.parametrize("fail", [True, False])
def test_batch_data_loss_follows_fail_on_data_loss(spark, broker, fail):
    topic = broker.new_topic("loss", partitions=1)
    produce(broker, topic, values(0, 20))
    delete_records(broker, topic, 0, 8)
    df = (
        spark.read.format("kafkawire")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: {"0": 2}}))
        .option("failOnDataLoss", str(fail).lower())
        .load()
    )
    if fail:
        with pytest.raises(Exception, match="failOnDataLoss"):
            df.collect()
    else:
        assert sorted(r.offset for r in df.collect()) == list(range(8, 20))


@pytest.mark.parametrize("fail", [True, False])
def test_stream_data_loss_after_restart(spark, broker, tmp_path, fail):
    """Records deleted by retention while the query was stopped: error, or go on from the earliest left."""
    topic = broker.new_topic("sloss", partitions=1)
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    produce(broker, topic, values(0, 10))
    opts = {"failOnDataLoss": str(fail).lower()}
    finished(to_parquet(stream(spark, broker, topic, **opts), out, ck, availableNow=True))
    produce(broker, topic, values(10, 20))
    delete_records(broker, topic, 0, 15)
    q = to_parquet(stream(spark, broker, topic, **opts), out, ck, availableNow=True)
    if fail:
        with pytest.raises(Exception, match="earliest available offset is now 15.*failOnDataLoss"):
            q.awaitTermination(180)
    else:
        finished(q)
        got = sorted(r.offset for r in spark.read.parquet(out).collect())
        assert got == list(range(0, 10)) + list(range(15, 20))
