"""failOnDataLoss on the three-broker cluster: kafkawire's data source and Spark's JVM connector side by side.

Records the query has not read yet are deleted (DeleteRecords moves a partition's log start past them) while a
streaming query waits between two micro-batches, and before a batch read that starts below the new log start.
With ``failOnDataLoss=true`` the query must fail with the data-loss error; with ``false`` it must go on from the
earliest offset still there, skipping the deleted range, reading nothing twice. Then the topic a streaming
query reads is deleted. Spark's own connector (spark-sql-kafka-0-10, the version the benchmarks use) runs every
scenario in the same Spark session, and the test asserts that both connectors end the same way.

Both connectors run in one child process (``python test_spark_data_loss.py --bootstrap ...``): the JVM
connector must be on the driver's class path when its JVM starts (``spark.jars.packages``), which a SparkSession
made by an earlier test in this process cannot give. The child prints one JSON line of outcomes.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ("kafkawire", "kafka")
PARTITIONS = 3
FIRST = 30  # records per partition read by the first micro-batch
SECOND = 30  # records per partition added after it
LOST_PARTITION = 1
DELETE_BEFORE = FIRST + 15  # offsets FIRST..DELETE_BEFORE-1 of partition 1 are deleted before they are read


# ----------------------------------------------------------------------------------------------------------
# the child: runs the scenarios for both connectors and prints their outcomes


def _jvm_connector() -> str:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_spark import JVM_CONNECTOR

    return JVM_CONNECTOR


def _produce(bootstrap: str, topic: str, partition_counts: dict, start: int = 0) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for partition, n in partition_counts.items():
        for i in range(start, start + n):
            p.produce(topic, b"r%d-%d" % (partition, i), partition=partition)
    assert p.flush(60) == 0, "records not delivered"


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)  # held until the futures are done: a collected client cancels them
    for f in admin.create_topics([NewTopic(topic, partitions, 3)]).values():
        f.result(60)
    deadline = time.monotonic() + 60
    while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) < partitions:
        assert time.monotonic() < deadline, f"{topic} has no metadata"
        time.sleep(0.2)


def _delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    from confluent_kafka import TopicPartition

    admin = _admin(bootstrap)
    for f in admin.delete_records([TopicPartition(topic, partition, before)]).values():
        f.result(60)


def _delete_topic(bootstrap: str, topic: str) -> None:
    admin = _admin(bootstrap)
    for f in admin.delete_topics([topic]).values():
        f.result(60)


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:4000]


def stream_scenario(spark, bootstrap: str, fmt: str, fail: bool, *, delete_topic: bool = False) -> dict:
    """A stream reads FIRST records of each partition in batch 0; while batch 0's sink holds the query,
    SECOND more are written and then either records of partition 1 not yet read are deleted, or the topic.
    """
    topic = f"loss-{fmt}-{'t' if fail else 'f'}{'-gone' if delete_topic else ''}-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, PARTITIONS)
    _produce(bootstrap, topic, {p: FIRST for p in range(PARTITIONS)})
    rows: list = []
    batches: list = []
    first_done, go = threading.Event(), threading.Event()

    def sink(df, batch_id):
        got = [(r.partition, r.offset) for r in df.collect()]
        rows.extend(got)
        batches.append((batch_id, len(got)))
        if got and not first_done.is_set():
            first_done.set()
            go.wait(120)  # the next micro-batch is planned only after this one ends

    query = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", str(fail).lower())
        .load()
        .writeStream.foreachBatch(sink)
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    outcome: dict = {"format": fmt, "fail": fail}
    t0 = time.monotonic()
    try:
        assert first_done.wait(120), f"{fmt}: no first micro-batch"
        outcome["first_batch_s"] = time.monotonic() - t0
        if delete_topic:
            _delete_topic(bootstrap, topic)
        else:
            _produce(bootstrap, topic, {p: SECOND for p in range(PARTITIONS)}, start=FIRST)
            _delete_records(bootstrap, topic, LOST_PARTITION, DELETE_BEFORE)
        go.set()
        want = PARTITIONS * FIRST if delete_topic else PARTITIONS * (FIRST + SECOND) - (DELETE_BEFORE - FIRST)
        # a bound: the loop ends when the query does. 30 s was once too short for Spark's own connector to fail
        # after its topic was deleted (a CI run of 2026-11-30; it notices through its AdminClient's retries)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and query.isActive:
            if len(rows) >= want and not delete_topic:
                time.sleep(1.0)  # anything read twice would arrive now
                break
            time.sleep(0.2)
        outcome["active"] = query.isActive
        outcome["after_s"] = time.monotonic() - t0 - outcome["first_batch_s"]
        error = query.exception()
        outcome["error"] = None if error is None else _error_text(error)
    finally:
        go.set()
        try:
            query.stop()
        except Exception as exc:  # a failed query's stop re-raises nothing useful to the outcome
            outcome.setdefault("stop_error", _error_text(exc))
    outcome["rows"] = sorted(rows)
    outcome["duplicates"] = len(rows) - len(set(rows))
    return outcome


def batch_scenario(spark, bootstrap: str, fmt: str, fail: bool) -> dict:
    """A batch read asked to start at offset 2 of a partition whose records before 8 were deleted."""
    topic = f"bloss-{fmt}-{'t' if fail else 'f'}-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, 1)
    _produce(bootstrap, topic, {0: 20})
    _delete_records(bootstrap, topic, 0, 8)
    df = (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: {"0": 2}}))
        .option("endingOffsets", "latest")
        .option("failOnDataLoss", str(fail).lower())
        .load()
    )
    outcome: dict = {"format": fmt, "fail": fail, "error": None, "rows": []}
    try:
        outcome["rows"] = sorted(r.offset for r in df.select("offset").collect())
    except Exception as exc:
        outcome["error"] = _error_text(exc)
    return outcome


def child(bootstrap: str, formats: list[str]) -> dict:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafkawire.spark import register

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("kafkawire-data-loss")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "768m")
        # a Python worker's socket to the JVM times out after 15 s by default, too short on two busy cores
        .config("spark.python.authenticate.socketTimeout", "120s")
        # a JVM that lives a minute beside three Kafka JVMs on two cores: C2's compile work does not pay back
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
    )
    if "kafka" in formats:
        builder = builder.config(
            "spark.jars.packages", f"org.apache.spark:spark-sql-kafka-0-10_2.13:{_jvm_connector()}"
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("OFF")
    register(spark)

    def scenarios(fmt: str) -> dict:
        res: dict = {"stream": [], "batch": [], "topic_deleted": []}
        for fail in (True, False):
            for kind, scenario in (("stream", stream_scenario), ("batch", batch_scenario)):
                t0 = time.monotonic()
                res[kind].append({**scenario(spark, bootstrap, fmt, fail), "seconds": time.monotonic() - t0})
        # both connectors fail this one whatever failOnDataLoss says (below): once is enough
        t0 = time.monotonic()
        gone = stream_scenario(spark, bootstrap, fmt, False, delete_topic=True)
        res["topic_deleted"].append({**gone, "seconds": time.monotonic() - t0})
        return res

    out: dict = {"stream": [], "batch": [], "topic_deleted": []}
    try:
        # the connectors' scenarios (each on topics of its own) run side by side in the one session: most of a
        # scenario is waiting (query start, triggers, the brokers' acks), and two run in the time of about one
        with concurrent.futures.ThreadPoolExecutor(len(formats)) as pool:
            for res in pool.map(scenarios, formats):
                for kind, outcomes in res.items():
                    out[kind] += outcomes
    finally:
        spark.stop()
    return out


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--formats", default=",".join(FORMATS))
    args = ap.parse_args()
    result = child(args.bootstrap, args.formats.split(","))
    print("RESULT " + json.dumps(result), flush=True)
    sys.exit(0)


# ----------------------------------------------------------------------------------------------------------
# the tests

import pytest  # noqa: E402

pytest.importorskip("pyspark")
pytest.importorskip("confluent_kafka")

# a Spark application (a JVM, Python workers) beside three Kafka JVMs on two cores: minutes, not seconds
pytestmark = [pytest.mark.kafka_cluster, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def outcomes(kafka_cluster, tmp_path_factory):
    from conftest import reference_unavailable

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    run = subprocess.run(
        [sys.executable, __file__, "--bootstrap", kafka_cluster.bootstrap],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path_factory.mktemp("data-loss"),
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines and "spark-sql-kafka" in run.stderr and "unresolved dependency" in run.stderr.lower():
        reference_unavailable("Spark's JVM Kafka connector could not be resolved from Maven Central")
    assert run.returncode == 0 and lines, run.stdout[-3000:] + run.stderr[-8000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    print({kind: [(o["format"], o["fail"], round(o["seconds"], 1)) for o in result[kind]] for kind in result})
    for kind in ("stream", "topic_deleted"):
        for o in result[kind]:
            o["rows"] = [tuple(r) for r in o["rows"]]  # (partition, offset) pairs arrive as JSON lists
    return {kind: {(o["format"], o["fail"]): o for o in result[kind]} for kind in ("stream", "batch", "topic_deleted")}


def first_batch() -> list:
    return [(p, o) for p in range(PARTITIONS) for o in range(FIRST)]


def skipped_deleted_range() -> list:
    return sorted(
        (p, o)
        for p in range(PARTITIONS)
        for o in range(FIRST + SECOND)
        if not (p == LOST_PARTITION and FIRST <= o < DELETE_BEFORE)
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_stream_fails_on_records_deleted_before_they_were_read(outcomes, fmt):
    o = outcomes["stream"][(fmt, True)]
    assert not o["active"] and o["error"], o
    assert "failOnDataLoss" in o["error"], o["error"]
    # the first micro-batch was delivered, nothing of the second
    assert o["rows"] == first_batch() and o["duplicates"] == 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_stream_skips_deleted_records_without_fail_on_data_loss(outcomes, fmt):
    o = outcomes["stream"][(fmt, False)]
    assert o["active"] and o["error"] is None, o.get("error")
    assert o["duplicates"] == 0
    assert o["rows"] == skipped_deleted_range()


@pytest.mark.parametrize("fail", [True, False])
def test_batch_read_below_the_log_start(outcomes, fail):
    ours, spark = outcomes["batch"][("kafkawire", fail)], outcomes["batch"][("kafka", fail)]
    if fail:
        assert ours["error"] and "failOnDataLoss" in ours["error"], ours
        assert bool(spark["error"]) and "failOnDataLoss" in spark["error"], spark
    else:
        assert ours["error"] is None and ours["rows"] == list(range(8, 20)), ours
        assert spark["error"] is None and spark["rows"] == ours["rows"], spark


def test_stream_whose_topic_is_deleted_fails_even_without_fail_on_data_loss(outcomes):
    """Spark's connector (its AdminClient offset reader) fails the query with UnknownTopicOrPartitionException
    when the subscribed topic goes away, failOnDataLoss=false or not; kafkawire fails it too, naming the topic."""
    ours, spark = outcomes["topic_deleted"][("kafkawire", False)], outcomes["topic_deleted"][("kafka", False)]
    assert ours["rows"] == spark["rows"] == first_batch()
    assert not spark["active"] and "UnknownTopicOrPartition" in spark["error"], spark
    assert not ours["active"] and "do not exist" in ours["error"], ours
