#!/usr/bin/env python3
"""The Spark streaming sink, exactly-once (``exactlyOnce=true``) against at-least-once, on the same data.

    python benchmarks/bench_spark_eos.py                       # 500,000 records, kafkawire broker, local[2]
    python benchmarks/bench_spark_eos.py --records 2000000 --per-trigger 500000
    python benchmarks/bench_spark_eos.py --bootstrap host:port # an existing broker

Each timed run is a streaming query (Trigger.AvailableNow, ``maxOffsetsPerTrigger`` records per
micro-batch) reading the source topic with the kafkawire source and writing every record to a fresh
topic, from start() to the end of awaitTermination(). The two modes alternate, after one warm-up run
of each; the best of ``--repeat`` runs is kept and the ratio printed. The records are 100 bytes, loaded
with confluent-kafka's producer (not measured; see bench_spark.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_spark import load, spark_session, start_broker  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--per-trigger", type=int, default=100_000, help="maxOffsetsPerTrigger (default 100,000)")
    ap.add_argument("--bootstrap", help="existing broker (default: start kafkawire serve)")
    ap.add_argument("--storage", default="memory", choices=("memory", "segments"))
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per mode, best kept (default 2)")
    args = ap.parse_args(argv)

    tmp = tempfile.mkdtemp(prefix="kafkawire-bench-spark-eos-")
    broker = None
    spark = None
    try:
        bootstrap = args.bootstrap
        if bootstrap is None:
            broker, bootstrap = start_broker(tmp, args.storage)
        src = f"bench-eos-in-{uuid.uuid4().hex[:6]}"
        load(bootstrap, src, args.records, args.partitions)

        os.environ["PYSPARK_PYTHON"] = sys.executable
        from kafkawire.client import Admin, NewTopic

        spark = spark_session(args.master, "bench-spark-eos", None, {"spark.driver.memory": "2g"})

        def run(exactly_once: bool) -> float:
            dst = f"bench-eos-out-{uuid.uuid4().hex[:6]}"
            with Admin(bootstrap) as admin:
                admin.create_topics([NewTopic(dst, num_partitions=args.partitions)])
            df = (
                spark.readStream.format("kafkawire")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", src)
                .option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", str(args.per_trigger))
                .load()
            )
            w = (
                df.selectExpr("key", "value")
                .writeStream.format("kafkawire")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", dst)
                .option("checkpointLocation", os.path.join(tmp, "ck-" + dst))
                .trigger(availableNow=True)
            )
            if exactly_once:
                w = w.option("exactlyOnce", "true")
            t0 = time.perf_counter()
            q = w.start()
            q.awaitTermination()
            elapsed = time.perf_counter() - t0
            if q.exception() is not None:
                raise RuntimeError(f"query failed: {q.exception()}")
            written = sum(p["numInputRows"] for p in q.recentProgress)
            if written != args.records:
                raise RuntimeError(f"the query read {written} records, not {args.records}")
            return args.records / elapsed

        run(False)
        run(True)  # warm-up of both paths
        best = {False: 0.0, True: 0.0}
        for _ in range(args.repeat):
            for mode in (False, True):
                rate = run(mode)
                print(f"  {'exactly-once ' if mode else 'at-least-once'} {rate:>12,.0f} records/s", flush=True)
                best[mode] = max(best[mode], rate)
        batches = -(-args.records // args.per_trigger)
        print(
            f"{args.records:,} records x 100 B, {args.partitions} partitions, {batches} micro-batches, "
            f"{args.master}, best of {args.repeat}:"
        )
        print(f"  streaming write at-least-once  {best[False]:>12,.0f} records/s")
        print(f"  streaming write exactly-once   {best[True]:>12,.0f} records/s")
        print(f"  exactly-once / at-least-once   {best[True] / best[False]:.2f}")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.terminate()
            try:
                broker.wait(timeout=10)
            except Exception:
                broker.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
