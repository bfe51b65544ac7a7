#!/usr/bin/env python3
"""Spark through kafkawire against Spark's own JVM Kafka connector: same broker, same records, one run.

    python benchmarks/bench_spark.py                    # 5,000,000 records, kafkawire broker, local[2]
    python benchmarks/bench_spark.py --records 500000
    python benchmarks/bench_spark.py --bootstrap host:port   # an existing broker
    python benchmarks/bench_spark.py --jvm-connector none    # kafkawire only

Figures (records/s, best of --repeat runs after one warm-up run of each):

* spark read (kafkawire)   spark.read.format("kafkawire") -> count(*) and sum(length(value))
* spark read (jvm kafka)   the same with spark.read.format("kafka") (spark-sql-kafka-0-10 from Maven Central)
* spark write (kafkawire)  the records' key and value from a local Parquet copy -> df.write.format("kafkawire")
* spark write (jvm kafka)  the same -> df.write.format("kafka")
* spark write (arrow ceiling) the same -> a Python data source writer that drops every Arrow batch:
                           what Spark's Python data source API costs a sink with no Kafka (Parquet
                           scan, Arrow from the JVM to the Python worker), the most any Python sink
                           can write on this master
* confluent-kafka consumer one librdkafka consumer process reading every partition (reference)
* spark read (parquet)     the same records from the Parquet copy, same aggregation (reference)
* spark read (arrow ceiling) a Python data source that yields one pre-built Arrow batch of the read
                           schema (same sizes, same partitions) again and again: what Spark's Python
                           data source API carries with no Kafka and no decoding, the most any Python
                           source can read on this master; kafkawire's share of it is printed

Ratios kafkawire / JVM connector are printed for read and write. The connector's version is the
installed pyspark's when Maven Central serves it, else ``--jvm-connector`` (default: the newest release
of the same major version that Maven serves, 4.2.0 for pyspark 4.3.0); the line printed says which.
The records are loaded with confluent-kafka's producer (not measured); each write goes to a new topic
whose end offsets are checked.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

VALUE_SIZE = 100
# Maven Central has no spark-sql-kafka-0-10 4.3.0 (the installed pyspark) yet; 4.2.0 is the newest release
JVM_CONNECTOR = "4.2.0"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(tmp: str, storage: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = open(os.path.join(tmp, "broker.log"), "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kafkawire",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--data-dir",
            os.path.join(tmp, "data"),
            "--storage",
            storage,
            "--log-level",
            "WARNING",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    for _ in range(300):
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}, see {tmp}/broker.log")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("broker did not listen")


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its descendants, those reaped included (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry)] = fields
            parents.setdefault(int(fields[1]), []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        fields = stats.get(p)
        if fields is not None:
            total += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
        todo.extend(parents.get(p, []))
    return total / tick


def own_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` alone (all its threads, no children)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def create_topic(bootstrap: str, name: str, partitions: int, replication: int = 1) -> None:
    from kafkawire.client import Admin, NewTopic

    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, replication)])


def load(
    bootstrap: str, topic: str, n: int, partitions: int, *, replication: int = 1, acks: str | None = None
) -> float:
    """A new topic, and ``n`` records of VALUE_SIZE bytes in it (confluent-kafka's producer); the seconds taken."""
    from confluent_kafka import Producer

    create_topic(bootstrap, topic, partitions, replication)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "none",
            "partitioner": "murmur2_random",
            **({"acks": acks} if acks is not None else {}),
        }
    )
    t0 = time.perf_counter()
    body = bytearray(os.urandom(VALUE_SIZE))
    for i in range(n):
        body[:8] = i.to_bytes(8, "big")
        while True:
            try:
                p.produce(topic, bytes(body), b"k%07d" % (i % 100_000))
                break
            except BufferError:
                p.poll(0.05)
    left = p.flush(600)
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return time.perf_counter() - t0


def spark_session(master: str, app: str, jvm_connector: str | None, config: dict[str, str] | None = None):
    """A quiet SparkSession (no UI, no progress bars, ERROR logs) with kafkawire's data source registered and,
    unless ``jvm_connector`` is None, Spark's JVM Kafka connector of that version from Maven Central."""
    from pyspark.sql import SparkSession

    from kafkawire.spark import register

    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        **(config or {}),
    }
    if jvm_connector:
        settings["spark.jars.packages"] = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{jvm_connector}"
    builder = SparkSession.builder.master(master).appName(app)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-check"})
    try:
        return sum(
            c.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1] for p in range(partitions)
        )
    finally:
        c.close()


def confluent_read(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    """One librdkafka consumer process reading all N records (values touched, sizes summed)."""
    code = f"""
import time
from confluent_kafka import Consumer, TopicPartition
c = Consumer({{"bootstrap.servers": {bootstrap!r}, "group.id": "bench-ref", "enable.auto.commit": False,
              "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
              "queued.max.messages.kbytes": 1048576}})
c.assign([TopicPartition({topic!r}, p, 0) for p in range({partitions})])
t0 = time.perf_counter(); n = 0; size = 0
while n < {n}:
    for m in c.consume(100000, 5.0):
        if m.error() is None:
            n += 1; size += len(m.value())
print(time.perf_counter() - t0, n, size)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800, check=True)
    secs, got, size = out.stdout.split()
    assert int(got) == n and int(size) == n * VALUE_SIZE, out.stdout
    return float(secs)


CEILING_ROWS = 16384  # about the rows of one 2 MiB fetch of 100-byte records, what kafkawire's reader yields


def ceiling_batch(rows: int):
    """One Arrow batch of ``rows`` records in format("kafkawire")'s read schema: 8-byte keys and VALUE_SIZE-byte
    values of random bytes, offsets and timestamps counting from 0, the other columns zero or empty. Built in
    the Python worker that reads (numpy and pyarrow are imported there)."""
    import numpy as np
    import pyarrow as pa

    from kafkawire.spark.schema import arrow_read_schema

    ints = np.arange(rows, dtype=np.int64)

    def binary(width):
        offsets = pa.py_buffer((np.arange(rows + 1, dtype=np.int32) * width).tobytes())
        return pa.Array.from_buffers(pa.binary(), rows, [None, offsets, pa.py_buffer(os.urandom(rows * width))])

    topic = pa.Array.from_buffers(
        pa.string(), rows, [None, pa.py_buffer(np.zeros(rows + 1, np.int32)), pa.py_buffer(b"")]
    )
    return pa.RecordBatch.from_arrays(
        [
            binary(8),
            binary(VALUE_SIZE),
            topic,
            pa.array(np.zeros(rows, np.int32)),
            pa.array(ints),
            pa.array(ints).cast(pa.timestamp("us", tz="UTC")),
            pa.array(np.zeros(rows, np.int32)),
        ],
        schema=arrow_read_schema(False),
    )


def repeated(batch, total: int):
    """``batch`` again and again, the last one cut, until ``total`` rows have been yielded."""
    left = total
    while left > 0:
        yield batch if left >= batch.num_rows else batch.slice(0, left)
        left -= batch.num_rows


def register_ceiling(spark) -> None:
    """``format("arrow-ceiling")``: options n, partitions; the read schema of format("kafkawire")."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Part(InputPartition):
        def __init__(self, rows):
            self.rows = rows

    class Reader(DataSourceReader):
        def __init__(self, n, parts):
            self.n, self.parts = n, parts

        def partitions(self):
            return [Part(self.n * (i + 1) // self.parts - self.n * i // self.parts) for i in range(self.parts)]

        def read(self, part):
            yield from repeated(ceiling_batch(CEILING_ROWS), part.rows)

    class Ceiling(DataSource):
        @classmethod
        def name(cls):
            return "arrow-ceiling"

        def schema(self):
            from kafkawire.spark.schema import read_schema

            return read_schema(False)

        def reader(self, schema):
            return Reader(int(self.options["n"]), int(self.options["partitions"]))

    spark.dataSource.register(Ceiling)


def register_sink_ceiling(spark) -> None:
    """``format("arrow-sink-ceiling")``: a writer that takes every Arrow batch Spark hands it and drops it
    (rows counted, nothing sent). What Spark's Python data source API costs a sink with no Kafka: the
    Parquet scan, the JVM's Arrow batches and the Python worker receiving them."""
    from dataclasses import dataclass

    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    @dataclass
    class Counted(WriterCommitMessage):
        rows: int

    class Writer(DataSourceArrowWriter):
        def write(self, iterator):
            return Counted(sum(b.num_rows for b in iterator))

        def commit(self, messages):
            total = sum(m.rows for m in messages if m is not None)
            if total != int(self.n):
                raise AssertionError(f"the sink ceiling got {total} rows, not {self.n}")

    class SinkCeiling(DataSource):
        @classmethod
        def name(cls):
            return "arrow-sink-ceiling"

        def writer(self, schema, overwrite):
            w = Writer()
            w.n = self.options["n"]
            return w

    spark.dataSource.register(SinkCeiling)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--cluster" in argv:  # three Kafka brokers and a Spark standalone cluster: bench_spark_cluster.py
        from bench_spark_cluster import main as cluster_main

        return cluster_main([a for a in argv if a != "--cluster"])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--bootstrap", help="existing broker (default: start kafkawire serve)")
    ap.add_argument(
        "--storage",
        default="memory",
        choices=("memory", "segments"),
        help="storage of the broker started here (default memory)",
    )
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per figure, best kept (default 2)")
    ap.add_argument("--skip-write", action="store_true")
    ap.add_argument(
        "--jvm-connector",
        default=JVM_CONNECTOR,
        help="spark-sql-kafka-0-10_2.13 version to compare with ('none': skip; default %(default)s)",
    )
    args = ap.parse_args(argv)
    n = args.records

    tmp = tempfile.mkdtemp(prefix="kafkawire-bench-spark-")
    proc = None
    try:
        bootstrap = args.bootstrap
        if not bootstrap:
            proc, bootstrap = start_broker(tmp, args.storage)
        topic = f"bench-{os.getpid()}"
        load_s = load(bootstrap, topic, n, args.partitions)
        print(
            f"loaded {n:,} records of {VALUE_SIZE} bytes into {args.partitions} partitions in {load_s:.1f} s "
            f"({n / load_s:,.0f}/s, confluent-kafka producer)",
            flush=True,
        )

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import functions as F

        jvm = args.jvm_connector if args.jvm_connector != "none" else None
        spark = spark_session(args.master, "bench-spark", jvm, {"spark.driver.memory": "4g"})
        register_ceiling(spark)
        register_sink_ceiling(spark)
        if jvm:
            print(f"Spark {spark.version}, JVM connector spark-sql-kafka-0-10_2.13:{jvm}", flush=True)

        def kafka_df(fmt="kafkawire", rows=n):
            if fmt == "arrow-ceiling":
                return spark.read.format(fmt).option("n", rows).option("partitions", args.partitions).load()
            reader = spark.read
            if rows != n:  # the first records of each partition
                ending = {topic: {str(p): rows // args.partitions for p in range(args.partitions)}}
                reader = reader.option("endingOffsets", json.dumps(ending))
            return reader.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()

        def agg(df, rows=n):
            row = df.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).first()
            assert row.n == rows and row.bytes == rows * VALUE_SIZE, (row, rows)

        # CPU seconds of the Spark JVM and the broker, each with its descendants (Python workers), for a
        # second view that the other loads of a shared machine disturb less than wall time
        trees = [spark.sparkContext._gateway.proc.pid] + ([proc.pid] if proc is not None else [])

        def split():
            """CPU seconds so far: the Spark JVM itself, its Python workers (and daemon), the broker."""
            jvm_self = own_cpu_seconds(trees[0])
            broker = tree_cpu_seconds(trees[1]) if len(trees) > 1 else 0.0
            return jvm_self, tree_cpu_seconds(trees[0]) - jvm_self, broker

        def measure(fn):
            s0 = split()
            t0 = time.perf_counter()
            took = fn()
            wall = time.perf_counter() - t0 if took is None else took
            parts = tuple(b - a for a, b in zip(s0, split()))
            return wall, sum(parts), parts

        def timed(fn, runs):
            return min(measure(fn) for _ in range(runs))

        def report(name, wall_cpu):
            results.append((name, wall_cpu[0], wall_cpu[1]))
            if len(wall_cpu) > 2:
                split_of[name] = wall_cpu[2]
            cpu = f"  {wall_cpu[1]:.1f} CPU s (Spark + broker)" if wall_cpu[1] else ""
            print(f"{name:28s} {n / wall_cpu[0]:>12,.0f} records/s{cpu}", flush=True)

        def side_by_side(what, fn):
            """Each format once per round, rounds alternating which goes first; best wall kept."""
            runs: dict = {fmt: [] for fmt in formats}
            for i in range(args.repeat):
                for fmt in formats if i % 2 == 0 else formats[::-1]:
                    runs[fmt].append(measure(lambda fmt=fmt: fn(fmt)))
            for fmt in formats:
                report(f"spark {what} ({label[fmt]})", min(runs[fmt]))

        results: list = []
        split_of: dict = {}
        formats = ["kafkawire"] + (["kafka"] if jvm else [])
        label = {"kafkawire": "kafkawire", "kafka": "jvm kafka", "arrow-ceiling": "arrow ceiling"}
        formats.append("arrow-ceiling")
        for fmt in formats:
            agg(kafka_df(fmt))  # warm-up: JVM, Python workers, the connector's classes
        side_by_side("read", lambda fmt: agg(kafka_df(fmt)))
        # What a read costs whatever its size (planning with a Python worker, the tasks' start, the connection
        # and offset look-ups): a read of one record per partition, best of --repeat. The rate net of it is
        # what each source's per-record path can carry on this master, the figure a longer read approaches.
        tiny = args.partitions
        fixed: dict = {}
        for fmt in formats:
            fixed[fmt] = min(
                measure(lambda fmt=fmt: agg(kafka_df(fmt, tiny), tiny)) for _ in range(max(2, args.repeat))
            )
        formats.remove("arrow-ceiling")

        pq = os.path.join(tmp, "parquet")
        kafka_df().select("key", "value").write.mode("overwrite").parquet(pq)
        if not args.skip_write:
            state = {"i": 0}

            def write(fmt):
                if fmt == "arrow-ceiling":  # rows counted by the sink's commit, nothing sent
                    t0 = time.perf_counter()
                    spark.read.parquet(pq).write.mode("append").format("arrow-sink-ceiling").option("n", n).save()
                    return time.perf_counter() - t0
                state["i"] += 1
                out = f"{topic}-out{state['i']}"
                create_topic(bootstrap, out, args.partitions)
                t0 = time.perf_counter()
                (
                    spark.read.parquet(pq)
                    .write.mode("append")
                    .format(fmt)
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("topic", out)
                    .save()
                )
                dt = time.perf_counter() - t0
                got = end_offsets(bootstrap, out, args.partitions)
                assert got == n, (got, n)
                return dt

            formats.append("arrow-ceiling")
            for fmt in formats:
                write(fmt)  # warm-up
            side_by_side("write", write)
            formats.remove("arrow-ceiling")

        report(
            "confluent-kafka consumer",
            (min(confluent_read(bootstrap, topic, args.partitions, n) for _ in range(args.repeat)), 0.0),
        )
        agg(spark.read.parquet(pq))
        report("spark read (parquet)", timed(lambda: agg(spark.read.parquet(pq)), args.repeat))

        spark.stop()
        print()
        print(
            f"{'':28s} {'seconds':>9s} {'records/s':>12s} {'CPU s':>7s}   ({n:,} records x {VALUE_SIZE} B, {args.master})"
        )
        for name, secs, cpu in results:
            print(f"{name:28s} {secs:9.2f} {n / secs:>12,.0f} {cpu:7.1f}")
        wall_of = {name: secs for name, secs, _ in results}
        print(
            f"\n{'CPU us per record (best run)':34s} {'Spark JVM':>10s} {'Python':>7s} {'broker':>7s}  (busy share of the cores)"
        )
        for name, (jvm_s, py_s, broker_s) in split_of.items():
            busy = (jvm_s + py_s + broker_s) / wall_of[name]
            print(
                f"{name:34s} {jvm_s / n * 1e6:10.2f} {py_s / n * 1e6:7.2f} {broker_s / n * 1e6:7.2f}"
                f"  ({busy / os.cpu_count():.0%})"
            )
        figures = {name: (secs, cpu) for name, secs, cpu in results}
        print(f"\n{'fixed cost of a read':34s} {'seconds':>8s} {'CPU s':>6s}   rate net of it (records/s)")
        for fmt, (secs, cpu, _) in fixed.items():
            whole = figures[f"spark read ({label[fmt]})"][0]
            net = f"{n / (whole - secs):>12,.0f}" if whole > secs else "(the fixed cost is most of the read)"
            print(
                f"spark read ({label[fmt]}, {tiny} records) {'':>{max(0, 14 - len(label[fmt]))}s}{secs:8.2f} {cpu:6.2f}   {net}"
            )
        for what in ("read", "write"):
            ours, ceiling = figures.get(f"spark {what} (kafkawire)"), figures.get(f"spark {what} (arrow ceiling)")
            if ours and ceiling:
                print(
                    f"{what}: kafkawire / arrow ceiling (Spark's Python data source API, no Kafka) = "
                    f"{ceiling[0] / ours[0]:.2f} records/s, {ceiling[1] / ours[1]:.2f} per CPU second; "
                    f"CPU per record {ours[1] / n * 1e6:.2f} us, of which Kafka's part (kafkawire + broker) "
                    f"{(ours[1] - ceiling[1]) / n * 1e6:.2f} us"
                )
        for what in ("read", "write"):
            ours, theirs = figures.get(f"spark {what} (kafkawire)"), figures.get(f"spark {what} (jvm kafka)")
            if ours and theirs:
                print(
                    f"{what}: kafkawire / JVM connector = {theirs[0] / ours[0]:.2f} records/s, "
                    f"{theirs[1] / ours[1]:.2f} per CPU second (same broker, records, {args.master}; load "
                    f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
                )
        return 0
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
