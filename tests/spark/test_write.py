"""Batch and streaming writes, read back with confluent-kafka."""

from __future__ import annotations

import collections
import uuid

import pytest
from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

from .conftest import consume_all
from .test_read import produce

SINK_SCHEMA = StructType(
    [
        StructField("key", StringType()),
        StructField("value", BinaryType()),
        StructField(
            "headers", ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
        ),
    ]
)


def confluent_partitions(broker, keys: list[bytes], partitions: int) -> dict[bytes, int]:
    """Where confluent-kafka's murmur2 partitioner (the Java client's) puts each key."""
    topic = broker.new_topic("ref", partitions=partitions)
    recs = produce(broker, topic, [{"key": k, "value": b"x", "headers": None, "timestamp": 1} for k in keys])
    return {r["key"]: r["partition"] for r in recs}


def test_batch_write_complete_and_java_partitioned(spark, broker):
    topic = broker.new_topic("wr", partitions=5)
    n = 500
    rows = []
    for i in range(n):
        key = None if i % 50 == 0 else f"user-{i % 37}"
        value = None if i % 61 == 3 else f"payload-{i}".encode()
        headers = [("trace", f"t{i}".encode()), ("empty", None)] if i % 4 == 0 else None
        rows.append((key, value, headers))
    df = spark.createDataFrame(rows, SINK_SCHEMA).repartition(3)
    (
        df.write.mode("append")
        .format("kafkawire")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .mode("append")
        .save()
    )

    got = consume_all(broker.bootstrap, topic, n, partitions=5)
    assert len(got) == n
    seen = collections.Counter((m.key(), m.value(), tuple(m.headers() or ())) for m in got)
    want = collections.Counter((None if k is None else k.encode(), v, tuple(h or ())) for k, v, h in rows)
    assert seen == want

    keys = sorted({m.key() for m in got if m.key() is not None})
    ref = confluent_partitions(broker, keys, 5)
    for m in got:
        if m.key() is not None:
            assert m.partition() == ref[m.key()], m.key()
    assert len({ref[k] for k in keys}) > 1


def test_topic_and_partition_columns(spark, broker):
    t1 = broker.new_topic("cols-a", partitions=3)
    t2 = broker.new_topic("cols-b", partitions=3)
    rows = [(t1 if i % 2 else t2, f"k{i}", f"v{i}", i % 3) for i in range(60)]
    df = spark.createDataFrame(rows, "topic string, key string, value string, partition int")
    df.write.mode("append").format("kafkawire").option("kafka.bootstrap.servers", broker.bootstrap).save()
    for t in (t1, t2):
        got = consume_all(broker.bootstrap, t, 30, partitions=3)
        want = sorted((k.encode(), v.encode(), p) for tt, k, v, p in rows if tt == t)
        assert sorted((m.key(), m.value(), m.partition()) for m in got) == want


def test_stream_write_from_stream_read(spark, broker, tmp_path):
    src = broker.new_topic("s-in", partitions=2)
    dst = broker.new_topic("s-out", partitions=4)
    recs = [
        {
            "key": f"k{i % 9}".encode(),
            "value": f"{i}".encode(),
            "headers": [("n", f"{i}".encode())],
            "timestamp": 1_700_000_000_000 + i,
        }
        for i in range(200)
    ]
    produce(broker, src, recs)
    df = (
        spark.readStream.format("kafkawire")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", "64")
        .load()
    )
    out = df.selectExpr("key", "CAST(CAST(value AS STRING) AS INT) * 2 AS doubled", "headers").selectExpr(
        "key", "CAST(CAST(doubled AS STRING) AS BINARY) AS value", "headers"
    )
    q = (
        out.writeStream.format("kafkawire")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(180)
    assert q.exception() is None
    got = consume_all(broker.bootstrap, dst, 200, partitions=4)
    assert len(got) == 200
    assert collections.Counter((m.key(), m.value(), tuple(m.headers())) for m in got) == collections.Counter(
        (r["key"], str(2 * int(r["value"])).encode(), tuple(r["headers"])) for r in recs
    )
    ref = confluent_partitions(broker, sorted({r["key"] for r in recs}), 4)
    assert all(m.partition() == ref[m.key()] for m in got)


def test_sink_needs_value_and_topic(spark, broker):
    df = spark.createDataFrame([("a",)], "key string")
    with pytest.raises(Exception, match="needs a 'value' column"):
        df.write.mode("append").format("kafkawire").option("kafka.bootstrap.servers", broker.bootstrap).option(
            "topic", "x"
        ).save()
    df = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(Exception, match="no topic to write to"):
        df.write.mode("append").format("kafkawire").option("kafka.bootstrap.servers", broker.bootstrap).save()
    with pytest.raises(Exception, match="kafka.bootstrap.servers"):
        df.write.mode("append").format("kafkawire").option("topic", f"t-{uuid.uuid4().hex[:6]}").save()


def test_writer_surfaces_failed_rows_and_keeps_batch_order(broker):
    """The sink's writer hands a batch to the client without waiting for it (the next one is read
    meanwhile): the batches still land in their order, and rows the broker cannot take (a partition the
    topic does not have) fail the write with the count and the broker's error."""
    import pyarrow as pa

    from kafkawire.spark import kafka_access

    topic = broker.new_topic("order", partitions=2)
    batches = [
        pa.RecordBatch.from_pydict(
            {"value": [b"%d-%d" % (j, i) for i in range(300)], "partition": [i % 2 for i in range(300)]},
            schema=pa.schema([("value", pa.binary()), ("partition", pa.int32())]),
        )
        for j in range(12)
    ]
    assert kafka_access.write_batches({"bootstrap.servers": broker.bootstrap}, topic, batches) == 3600
    got = consume_all(broker.bootstrap, topic, 3600)
    for p in (0, 1):
        values = [m.value() for m in got if m.partition() == p]
        assert values == [b"%d-%d" % (j, i) for j in range(12) for i in range(p, 300, 2)]
    bad = [
        pa.RecordBatch.from_pydict(
            {"value": [b"a", b"b", b"c"], "partition": [0, 5, 1]},
            schema=pa.schema([("value", pa.binary()), ("partition", pa.int32())]),
        )
    ]
    with pytest.raises(kafka_access.KafkaAccessError, match="1 of 3 records could not be delivered.*no partition 5"):
        kafka_access.write_batches({"bootstrap.servers": broker.bootstrap}, topic, bad)
