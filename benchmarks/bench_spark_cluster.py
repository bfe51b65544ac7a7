#!/usr/bin/env python3
"""Spark read and write throughput on a three-broker Kafka 4.4 and a Spark standalone cluster, kafkawire's
data source beside Spark's own JVM Kafka connector in one run.

    python benchmarks/bench_spark_cluster.py [--records 500000] [--partitions 6] [--repeat 3]
    python benchmarks/bench_spark.py --cluster [same options]      # the same

Starts ``tools/kafka_cluster.py``'s three nodes (replication factor 3, ``min.insync.replicas=2``) and
``tools/spark_cluster.py``'s master with two workers (one core, 1 GB each), loads ``--records`` records of
100 bytes (confluent-kafka, ``acks=all``) into a topic whose partitions are led by all three brokers, then
for each figure runs the two connectors alternately ``--repeat`` times after one warm-up run of each:

* read: ``spark.read.format(F)...load()`` aggregated (count and total value length) on the executors;
* stream: ``spark.readStream.format(F)`` from the earliest offset with ``Trigger.AvailableNow`` and
  ``maxOffsetsPerTrigger`` of a fifth of the records (five micro-batches) into the ``noop`` sink, from
  ``start()`` until the query ends; the query's progress must count every record;
* write: ``--records`` generated rows written with ``df.write.format(F)`` to a new topic (acks=all).

Prints, per figure and connector, the median records/s of the timed runs with their spread (lowest and
highest), and kafkawire's ratio to the JVM connector (of the medians). The executors run this environment's
Python; the JVM connector comes from Maven Central (``spark.jars.packages``, the version
``bench_spark.JVM_CONNECTOR``). Everything listens on 127.0.0.1 and is stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None) -> int:
    from bench_spark import JVM_CONNECTOR, VALUE_SIZE, create_topic, load, spark_session
    from kafka_cluster import ReferenceKafkaCluster
    from spark_cluster import SparkStandalone

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per connector and figure (median printed)")
    ap.add_argument("--figures", default="read,stream,write", help="which of read,stream,write to run")
    ap.add_argument("--jvm-connector", default=JVM_CONNECTOR, help="spark-sql-kafka-0-10_2.13 version")
    args = ap.parse_args(argv)
    n = args.records

    work = Path(tempfile.mkdtemp(prefix="kafkawire-bench-spark-cluster-"))
    kafka = ReferenceKafkaCluster(work / "kafka")
    spark_cluster = SparkStandalone(work / "spark", workers=2, cores=1, memory="1g")
    spark = None
    try:
        t0 = time.perf_counter()
        kafka.start()
        spark_cluster.start()
        print(f"3 Kafka 4.4 brokers and a Spark master with 2 workers up in {time.perf_counter() - t0:.0f} s")
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        took = load(kafka.bootstrap, topic, n, args.partitions, replication=3, acks="all")
        print(f"loaded {n:,} records of {VALUE_SIZE} bytes into {args.partitions} partitions in {took:.1f} s")

        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        from pyspark.sql import functions as F

        spark = spark_session(
            spark_cluster.master_url,
            "bench-spark-cluster",
            args.jvm_connector,
            {
                "spark.driver.host": "127.0.0.1",
                "spark.executor.memory": "768m",
                # a Python worker's socket to the JVM times out after 15 s by default, too short on two busy cores
                "spark.python.authenticate.socketTimeout": "120s",
            },
        )
        print(f"Spark {spark.version} on {spark_cluster.master_url}, JVM connector {args.jvm_connector}")

        def read(fmt: str) -> None:
            df = (
                spark.read.format(fmt)
                .option("kafka.bootstrap.servers", kafka.bootstrap)
                .option("subscribe", topic)
                .load()
            )
            count, size = df.agg(F.count("*"), F.sum(F.length("value"))).first()
            assert count == n and size == n * VALUE_SIZE, (fmt, count, size)

        def write(fmt: str) -> None:
            target = f"{topic}-{fmt}-{uuid.uuid4().hex[:4]}"
            create_topic(kafka.bootstrap, target, args.partitions, 3)
            rows = spark.range(n, numPartitions=args.partitions).selectExpr(
                "CAST(id % 100000 AS STRING) AS key", f"CAST(repeat('x', {VALUE_SIZE}) AS BINARY) AS value"
            )
            rows.write.format(fmt).mode("append").option("kafka.bootstrap.servers", kafka.bootstrap).option(
                "topic", target
            ).save()

        def stream(fmt: str) -> None:
            query = (
                spark.readStream.format(fmt)
                .option("kafka.bootstrap.servers", kafka.bootstrap)
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", str(max(1, n // 5)))
                .load()
                .writeStream.format("noop")
                .option("checkpointLocation", str(work / f"ck-{uuid.uuid4().hex[:8]}"))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            if query.exception() is not None:
                raise RuntimeError(f"{fmt} stream failed: {query.exception()}")
            rows = sum(p["numInputRows"] for p in query.recentProgress)
            assert rows == n, (fmt, rows)

        figures = {"read": read, "stream": stream, "write": write}
        print("load average %.1f %.1f %.1f (a busy machine: the ratios are the result)" % os.getloadavg())
        for what in args.figures.split(","):
            fn = figures[what]
            fn("kafkawire")  # warm-up of both: the first job pays for the executors' start and class loading
            fn("kafka")
            rates: dict[str, list[float]] = {"kafkawire": [], "kafka": []}
            for _ in range(args.repeat):
                for fmt in ("kafkawire", "kafka"):
                    t = time.perf_counter()
                    fn(fmt)
                    rates[fmt].append(n / (time.perf_counter() - t))
            ours, theirs = statistics.median(rates["kafkawire"]), statistics.median(rates["kafka"])
            print(
                f"spark {what:6}  kafkawire {ours:>10,.0f} records/s ({min(rates['kafkawire']):,.0f}-"
                f"{max(rates['kafkawire']):,.0f})   jvm kafka {theirs:>10,.0f} records/s ({min(rates['kafka']):,.0f}-"
                f"{max(rates['kafka']):,.0f})   ratio {ours / theirs:.2f}   median of {args.repeat}",
                flush=True,
            )
        print("load average %.1f %.1f %.1f at the end" % os.getloadavg())
        return 0
    finally:
        if spark is not None:
            spark.stop()
        spark_cluster.stop()
        kafka.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
