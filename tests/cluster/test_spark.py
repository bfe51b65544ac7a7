"""kafkawire's Spark data source against the three-broker Kafka 4.4 cluster (``local[2]`` Spark).

Topics have six partitions led by all three brokers; a streaming query reads one topic and writes
another while the broker leading some of its partitions stops and comes back. With the exactly-once sink
every input record must come out exactly once (read_committed); with the default sink at least once, as
Spark's own Kafka sink promises, and the query must not fail.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time

import pytest

from kafkawire.client import Consumer, Producer

from .conftest import node_down
from .test_client import create

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

pytestmark = pytest.mark.kafka_cluster


@pytest.fixture(scope="module")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafkawire.spark import register

    existing = SparkSession.getActiveSession()
    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafkawire-cluster-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        # a Python worker's socket to the JVM times out after 15 s by default, which failed queries on two busy
        # cores ("CANNOT_OPEN_SOCKET"); the JVM's own 10 s wait for a new worker has no setting
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    if existing is None:
        session.stop()


def read_values(bootstrap: str, topic: str, partitions: int, expected: int, isolation: str = "read_committed"):
    with Consumer(bootstrap, isolation_level=isolation) as consumer:
        consumer.assign([(topic, p) for p in range(partitions)], offset="earliest")
        out: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(out) < expected and time.monotonic() < deadline:
            out += [r.value for r in consumer.poll(timeout=1.0)]
        out += [r.value for r in consumer.poll(timeout=1.0)]
        return out


def test_batch_write_and_read_over_three_leaders(spark, kafka_cluster, topic_name):
    info = create(kafka_cluster, topic_name)
    assert {p.leader for p in info.partitions.values()} == {1, 2, 3}
    rows = [(f"k{i}", f"v{i}") for i in range(3000)]
    (
        spark.createDataFrame(rows, "key string, value string")
        .write.format("kafkawire")
        .mode("append")  # a Python data source takes append or overwrite only (README)
        .option("kafka.bootstrap.servers", kafka_cluster.bootstrap)
        .option("topic", topic_name)
        .save()
    )
    df = (
        spark.read.format("kafkawire")
        .option("kafka.bootstrap.servers", kafka_cluster.bootstrap)
        .option("subscribe", topic_name)
        .load()
    )
    got = df.selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v", "partition").collect()
    assert sorted((r.k, r.v) for r in got) == sorted(rows)
    assert {r.partition for r in got} == set(range(6))


def stream_through_a_restart(spark, kafka_cluster, topic_name, tmp_path, *, exactly_once: bool):
    """A query copies a topic fed for ~6 s while the leader of its partition 0 stops and comes back:
    (the counts of each output value, the records produced)."""
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    info = create(kafka_cluster, src)
    create(kafka_cluster, dst)
    victim = info.partitions[0].leader
    chunk, chunks = 500, 12
    produced = threading.Event()

    def feed():  # 6,000 records over ~6 s, so that the restart falls in the middle of the query
        with Producer(kafka_cluster.bootstrap, enable_idempotence=True, delivery_timeout=90) as p:
            for c in range(chunks):
                for i in range(c * chunk, (c + 1) * chunk):
                    p.produce(src, b"v%d" % i, key=b"k%d" % i)
                p.flush(90)
                time.sleep(0.5)
        produced.set()

    writer = (
        spark.readStream.format("kafkawire")
        .option("kafka.bootstrap.servers", kafka_cluster.bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "1000")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("kafkawire")
        .option("kafka.bootstrap.servers", kafka_cluster.bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="500 milliseconds")
    )
    if exactly_once:
        writer = writer.option("exactlyOnce", "true")
    query = writer.start()
    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        time.sleep(2)
        with node_down(kafka_cluster, victim):
            time.sleep(3)
        feeder.join(120)
        assert produced.is_set()
        query.processAllAvailable()
    finally:
        query.stop()
        feeder.join(120)
    assert query.exception() is None
    return collections.Counter(read_values(kafka_cluster.bootstrap, dst, 6, chunk * chunks)), chunk * chunks


def test_stream_through_a_broker_restart_exactly_once(spark, kafka_cluster, topic_name, tmp_path):
    got, n = stream_through_a_restart(spark, kafka_cluster, topic_name, tmp_path, exactly_once=True)
    want = collections.Counter(b"v%d" % i for i in range(n))
    duplicated = [v for v, k in got.items() if k > 1]
    missing = [v for v in want if v not in got]
    assert not duplicated and not missing, f"{len(duplicated)} duplicated, {len(missing)} missing"


def test_stream_through_a_broker_restart_at_least_once(spark, kafka_cluster, topic_name, tmp_path):
    """The default sink (no transactions), as Spark's own Kafka sink promises: every record at least once,
    the query carries on. Duplicates come only from a task or micro-batch run again (the producer is
    idempotent, so its own retries through the leader change add none); the count is printed."""
    got, n = stream_through_a_restart(spark, kafka_cluster, topic_name, tmp_path, exactly_once=False)
    want = [b"v%d" % i for i in range(n)]
    missing = [v for v in want if v not in got]
    assert not missing, f"{len(missing)} of {n} records missing, e.g. {missing[:5]}"
    assert set(got) == set(want), "records that were never produced"
    print(f"at-least-once through a broker restart: {n} records, {sum(got.values()) - n} duplicates")
