#!/usr/bin/env python3
"""What limits Spark's Python data source read with no Kafka at all: the "arrow ceiling" of bench_spark.py,
taken apart. One SparkSession; every variant runs once per round, rounds alternate the order, best kept.

    python benchmarks/bench_spark_ceiling.py                  # 2,000,000 rows of 100 B values, local[2]
    python benchmarks/bench_spark_ceiling.py --records 4000000 --repeat 3

Variants (the source yields the same pre-built Arrow batch again and again, as bench_spark's ceiling does):

* rows per batch (4096 .. 262144) and the number of partitions (Spark tasks);
* the columns yielded: Spark's Kafka read schema, or only key and value (a diagnosis of what the other
  columns cost: format("kafkawire") keeps Spark's Kafka columns);
* the query on top: count(*) with sum(length(value)) (bench_spark's), or count(*) alone;
* tuples instead of Arrow batches (Spark builds the Arrow batches itself, in maxRecordsPerBatch rows);
* a JVM-only reference: spark.range with the same aggregation (no Python worker at all).

Each line gives records/s and the CPU seconds of the Spark JVM itself and of its Python workers, which
says which side of the Arrow stream is the limit.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_spark  # noqa: E402
from bench_spark import VALUE_SIZE, ceiling_batch, own_cpu_seconds, repeated, spark_session, tree_cpu_seconds  # noqa: E402


def cpu_split(jvm: int) -> tuple[float, float]:
    """(CPU seconds of the JVM process itself, of everything under it: the Python daemon and workers)."""
    own = own_cpu_seconds(jvm)
    return own, tree_cpu_seconds(jvm) - own


def register(spark) -> None:
    """``format("ceiling-study")``: options n, partitions, rows, columns (all|kv), mode (arrow|tuples)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    from pyspark.sql.types import BinaryType, StructField, StructType

    class Part(InputPartition):
        def __init__(self, rows):
            self.rows = rows

    class Reader(DataSourceReader):
        def __init__(self, n, parts, rows, columns, mode):
            self.n, self.parts, self.r, self.columns, self.mode = n, parts, rows, columns, mode

        def partitions(self):
            return [Part(self.n * (i + 1) // self.parts - self.n * i // self.parts) for i in range(self.parts)]

        def read(self, part):
            batch = ceiling_batch(self.r)
            if self.columns == "kv":
                batch = batch.select(["key", "value"])
            if self.mode == "tuples":
                rows = [tuple(row.values()) for row in batch.to_pylist()]
                left = part.rows
                while left > 0:
                    yield from rows[: min(left, self.r)]
                    left -= self.r
                return
            yield from repeated(batch, part.rows)

    class Study(DataSource):
        @classmethod
        def name(cls):
            return "ceiling-study"

        def schema(self):
            from kafkawire.spark.schema import read_schema

            if self.options.get("columns", "all") == "kv":
                return StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])
            return read_schema(False)

        def reader(self, schema):
            o = self.options
            return Reader(
                int(o["n"]), int(o["partitions"]), int(o.get("rows", 16384)), o.get("columns", "all"), o.get("mode")
            )

    spark.dataSource.register(Study)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tuples-records", type=int, default=200_000, help="rows of the (slow) tuples variant")
    args = ap.parse_args(argv)
    n = args.records

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import cloudpickle
    from pyspark.sql import functions as F

    # the source's reader calls bench_spark's batch builder in Spark's Python workers, which do not have this
    # directory on their path: the functions travel with the pickled reader instead of by module name
    cloudpickle.register_pickle_by_value(bench_spark)
    spark = spark_session(args.master, "bench-spark-ceiling", None, {"spark.driver.memory": "4g"})
    register(spark)
    jvm = spark.sparkContext._gateway.proc.pid

    def study(count, rows=16384, partitions=4, columns="all", mode="arrow"):
        return (
            spark.read.format("ceiling-study")
            .option("n", count)
            .option("partitions", partitions)
            .option("rows", rows)
            .option("columns", columns)
            .option("mode", mode)
            .load()
        )

    def count_and_sum(df, count):
        row = df.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).first()
        assert row.n == count and row.b == count * VALUE_SIZE, (row, count)

    def count_only(df, count):
        assert df.count() == count

    variants = {
        "fixed cost: 4 rows": (4, lambda: count_and_sum(study(4), 4)),
        "fixed cost: spark.range 4 rows": (
            4,
            lambda: count_and_sum(spark.range(4, numPartitions=4).select(F.expr("repeat('x', 100)").alias("value")), 4),
        ),
        "rows 1024": (n, lambda: count_and_sum(study(n, rows=1024), n)),
        "rows 4096": (n, lambda: count_and_sum(study(n, rows=4096), n)),
        "rows 16384 (bench_spark)": (n, lambda: count_and_sum(study(n), n)),
        "rows 65536": (n, lambda: count_and_sum(study(n, rows=65536), n)),
        "rows 262144": (n, lambda: count_and_sum(study(n, rows=262144), n)),
        "partitions 2": (n, lambda: count_and_sum(study(n, partitions=2), n)),
        "partitions 8": (n, lambda: count_and_sum(study(n, partitions=8), n)),
        "columns key+value only": (n, lambda: count_and_sum(study(n, columns="kv"), n)),
        "count(*) only": (n, lambda: count_only(study(n), n)),
        "tuples (maxRecordsPerBatch)": (
            args.tuples_records,
            lambda: count_and_sum(study(args.tuples_records, mode="tuples"), args.tuples_records),
        ),
        "JVM only: spark.range": (
            n,
            lambda: count_and_sum(spark.range(n, numPartitions=4).select(F.expr("repeat('x', 100)").alias("value")), n),
        ),
    }
    runs: dict = {name: [] for name in variants}
    for _, fn in variants.values():
        fn()  # warm-up: Python workers, code generation
    names = list(variants)
    for i in range(args.repeat):
        for name in names if i % 2 == 0 else names[::-1]:
            count, fn = variants[name]
            c0 = cpu_split(jvm)
            t0 = time.perf_counter()
            fn()
            wall = time.perf_counter() - t0
            c1 = cpu_split(jvm)
            runs[name].append((wall, c1[0] - c0[0], c1[1] - c0[1]))
    spark.stop()
    print(
        f"{'':30s} {'records/s':>11s} {'JVM us/rec':>11s} {'Python us/rec':>14s} {'net of fixed':>13s}"
        f"   ({n:,} x {VALUE_SIZE} B, {args.master})"
    )
    # the fixed cost of a query whatever its size: planning (Python workers for a Python source), code
    # generation, two stages of tasks; "net of fixed" is the rate of the per-record path alone
    fixed = {"python": min(runs["fixed cost: 4 rows"]), "jvm": min(runs["fixed cost: spark.range 4 rows"])}
    for name in names:
        count = variants[name][0]
        wall, jvm_s, py_s = min(runs[name])
        if count < 1000:
            print(f"{name:30s} {wall:>10.3f}s {jvm_s:>10.2f}s {py_s:>13.2f}s   (seconds, per query)")
            continue
        base = fixed["jvm" if name.startswith("JVM only") else "python"]
        net = f"{count / (wall - base[0]):>13,.0f}" if wall > base[0] else f"{'-':>13s}"
        print(f"{name:30s} {count / wall:>11,.0f} {jvm_s / count * 1e6:>11.2f} {py_s / count * 1e6:>14.2f} {net}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
