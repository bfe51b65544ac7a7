#!/usr/bin/env python3
"""A streaming pipeline on kafkawire, end to end, in one command.

    python examples/pipeline.py                 # starts a kafkawire broker on a free port
    python examples/pipeline.py --events 20000  # smaller run
    python examples/pipeline.py --bootstrap localhost:9092   # an existing broker (kafkawire or Kafka)

Spark runs on a Java runtime (17 or later): the script checks for one first and says how to get it.
It reports progress as it goes (events produced, each micro-batch with its records/s). The output (Parquet and
the queries' checkpoints) is kept in ``--out`` (default ``./kafkawire-pipeline-out``, replaced on the next run);
``--discard-output`` removes it at the end. The broker it starts keeps its data in a temporary directory,
removed when the broker stops.

1. a kafkawire broker (``python -m kafkawire serve``, temporary data dir) unless ``--bootstrap`` is given;
2. page-view events as JSON, with event-time timestamps slightly out of order, produced to the
   topic ``pageviews`` (keyed by user, Kafka timestamp = event time) with ``kafkawire.client``;
3. a Spark Structured Streaming job reads the topic with the ``kafkawire`` data source, parses the
   JSON, counts views, distinct users (exact) and mean time on page per page and 1-minute event-time window
   with a 2-minute watermark, and writes each closed window both to the topic
   ``pageviews-per-minute`` (JSON) and to Parquet;
4. Trigger.AvailableNow: the job reads what is in the topic, then stops; a summary is printed.

The last event of the generator is a marker one hour after the others: it moves the watermark past
every window so all of them close; the marker's own window never closes, so it is in no output.
With ``--bootstrap``, use new topics (``--topics IN,OUT``): records already in them are read too.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

IN_TOPIC = "pageviews"
OUT_TOPIC = "pageviews-per-minute"
PAGES = ["/", "/search", "/product/1", "/product/2", "/product/3", "/cart", "/checkout", "/help"]
COUNTRIES = ["DE", "FR", "US", "BR", "JP", "IN", "NG", "ES"]
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MARKER_PAGE = "__watermark__"
DEFAULT_OUT = "kafkawire-pipeline-out"
OUT_MARK = ".kafkawire-pipeline"  # in an output directory this script made (and may replace)
MIN_JAVA = 17  # Spark 4


def _quiet(*_args, **_kw) -> None:
    pass


# ---------------------------------------------------------------------------------- Java


def java_problem() -> str | None:
    """None when a Java runtime Spark can use is found, else what is wrong and how to get one."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    how = (
        f"Spark needs a Java runtime, {MIN_JAVA} or later. Install one, e.g.\n"
        f"  Debian/Ubuntu: sudo apt-get install openjdk-{MIN_JAVA}-jre-headless\n"
        f"  Fedora:        sudo dnf install java-{MIN_JAVA}-openjdk-headless\n"
        f"  macOS:         brew install openjdk@{MIN_JAVA}\n"
        "  or any JDK distribution (Temurin, Zulu, Corretto),\n"
        "then put its java on PATH or set JAVA_HOME to its directory."
    )
    if home and not os.path.isfile(java):
        return f"JAVA_HOME is {home}, but {java} does not exist.\n{how}"
    if not java:
        return f"no Java runtime found: JAVA_HOME is not set and there is no java on PATH.\n{how}"
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{java} -version failed: {exc}\n{how}"
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if m:
        major = int(m.group(2)) if m.group(1) == "1" else int(m.group(1))  # "1.8.0" is Java 8
        if major < MIN_JAVA:
            return f"{java} is Java {major}; this Spark needs {MIN_JAVA} or later.\n{how}"
    return None


# ---------------------------------------------------------------------------------- the events


def generate_events(n: int, *, seed: int = 7, minutes: int | None = None) -> list[dict]:
    """``n`` page views over ``minutes`` of event time, up to 20 s out of order (less than the watermark)."""
    rng = random.Random(seed)
    minutes = minutes or max(3, min(60, n // 2000))
    span = minutes * 60_000
    users = max(10, n // 20)
    out = []
    for i in range(n):
        ts = BASE_MS + i * span // n + rng.randint(-20_000, 0)
        out.append(
            {
                "event_id": i,
                "user_id": f"u{rng.randrange(users):06d}",
                "page": rng.choices(PAGES, weights=[30, 20, 10, 10, 10, 8, 5, 7])[0],
                "country": rng.choice(COUNTRIES),
                "ts": max(BASE_MS, ts),
                "duration_ms": int(rng.expovariate(1 / 4000)),
            }
        )
    return out


def marker_event(events: list[dict]) -> dict:
    last = max(e["ts"] for e in events) if events else BASE_MS
    return {"event_id": -1, "user_id": "", "page": MARKER_PAGE, "country": "", "ts": last + 3_600_000, "duration_ms": 0}


def expected_windows(events: list[dict]) -> dict:
    """What the job must output: {(window start ms, page): (views, users, total duration)}."""
    acc: dict = {}
    for e in events:
        k = (e["ts"] - e["ts"] % 60_000, e["page"])
        views, users, total = acc.get(k, (0, set(), 0))
        users.add(e["user_id"])
        acc[k] = (views + 1, users, total + e["duration_ms"])
    return {k: (v, len(u), t) for k, (v, u, t) in acc.items()}


# ---------------------------------------------------------------------------------- the broker


def start_broker():
    """A kafkawire broker on a free 127.0.0.1 port, data on disk in a temporary directory (``.stop()`` removes it)."""
    from kafkawire.testing import KafkaBroker

    return KafkaBroker(storage="disk", mode="subprocess").start()


def create_topics(bootstrap: str, partitions: int, topics=(IN_TOPIC, OUT_TOPIC)) -> None:
    from kafkawire.client import Admin, NewTopic

    with Admin(bootstrap) as admin:
        existing = set(admin.list_topics())
        new = [NewTopic(t, num_partitions=partitions) for t in topics if t not in existing]
        if new:
            admin.create_topics(new)


def produce_events(bootstrap: str, events: list[dict], topic: str = IN_TOPIC, progress=_quiet) -> float:
    """Produce every event (and the marker); returns seconds taken. ``progress(text)`` about every 2 s."""
    from kafkawire.client import Producer

    t0 = time.perf_counter()
    dumps = json.dumps
    todo = events + [marker_event(events)]
    next_report = t0 + 2.0
    with Producer(bootstrap, linger_ms=20, compression="lz4") as p:
        for i, e in enumerate(todo, 1):
            p.produce(topic, dumps(e, separators=(",", ":")).encode(), e["user_id"].encode(), timestamp=e["ts"])
            if i % 1000 == 0 and time.perf_counter() >= next_report:
                now = time.perf_counter()
                progress(f"producing: {i:,} of {len(todo):,} events sent ({i / (now - t0):,.0f}/s)")
                next_report = now + 2.0
        p.flush(120)
    took = time.perf_counter() - t0
    progress(f"produced {len(todo):,} events to {topic!r} in {took:.1f} s, all acknowledged")
    return took


# ---------------------------------------------------------------------------------- the job


def spark_session(master: str = "local[2]"):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafkawire.spark import register

    spark = (
        SparkSession.builder.master(master)
        .appName("kafkawire-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def run_job(
    spark,
    bootstrap: str,
    out_dir: str,
    *,
    max_per_trigger: int | None = None,
    in_topic: str = IN_TOPIC,
    out_topic: str = OUT_TOPIC,
    progress=_quiet,
    timeout: float = 1800.0,
) -> dict:
    """The streaming job: Kafka -> parse -> windowed aggregate -> Kafka + Parquet. Returns progress figures."""
    from pyspark.sql import functions as F

    schema = "event_id BIGINT, user_id STRING, page STRING, country STRING, ts BIGINT, duration_ms BIGINT"
    reader = (
        spark.readStream.format("kafkawire")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", in_topic)
        .option("startingOffsets", "earliest")
    )
    if max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_per_trigger))
    views = (
        reader.load()
        .select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
        .select("e.*")
        .withColumn("event_time", F.timestamp_millis("ts"))
        .withWatermark("event_time", "2 minutes")
    )
    per_minute = (
        views.groupBy(F.window("event_time", "1 minute").alias("w"), "page")
        .agg(
            F.count("*").alias("views"),
            F.size(F.collect_set("user_id")).alias("users"),
            F.sum("duration_ms").alias("total_duration_ms"),
        )
        .select(
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "page",
            "views",
            "users",
            "total_duration_ms",
            F.round(F.col("total_duration_ms") / F.col("views"), 1).alias("avg_duration_ms"),
        )
    )
    # the marker is not filtered out (Spark would push the filter below the watermark): its window,
    # the latest of all, stays open and is never written

    out = Path(out_dir)
    t0 = time.perf_counter()
    to_parquet = (
        per_minute.writeStream.format("parquet")
        .outputMode("append")
        .option("path", str(out / "parquet"))
        .option("checkpointLocation", str(out / "ck-parquet"))
        .trigger(availableNow=True)
        .start()
    )
    to_kafka = (
        per_minute.select(
            F.col("page").cast("binary").alias("key"),
            F.to_json(F.struct("window_start", "window_end", "page", "views", "users", "avg_duration_ms")).alias(
                "value"
            ),
        )
        .writeStream.format("kafkawire")
        .outputMode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out_topic)
        .option("checkpointLocation", str(out / "ck-kafka"))
        .trigger(availableNow=True)
        .start()
    )
    queries = {"parquet": to_parquet, "kafka": to_kafka}
    watch_progress(queries, t0, progress, timeout)
    for q in queries.values():
        if q.exception() is not None:
            raise RuntimeError(f"query failed: {q.exception()}")
    elapsed = time.perf_counter() - t0
    progress = to_parquet.recentProgress
    rows_in = sum(p["numInputRows"] for p in progress)
    dropped = sum(op.get("numRowsDroppedByWatermark", 0) for p in progress for op in p.get("stateOperators", []))
    return {"records_in": rows_in, "micro_batches": len(progress), "late_dropped": dropped, "seconds": elapsed}


def watch_progress(queries: dict, t0: float, progress, timeout: float) -> None:
    """Wait for the queries to finish, reporting each micro-batch as it completes (and a line every 15 s
    while one runs); stops them and raises after ``timeout`` seconds."""
    reported = {name: 0 for name in queries}
    quiet_since = time.perf_counter()
    deadline = t0 + timeout
    while any(q.isActive for q in queries.values()):
        if time.perf_counter() > deadline:
            for q in queries.values():
                q.stop()
            raise RuntimeError(f"the streaming job did not finish within {timeout:.0f} s")
        for q in queries.values():
            if q.isActive:
                q.awaitTermination(1.0)
                break
        for name, q in queries.items():
            done = q.recentProgress
            for p in done[reported[name] :]:
                rate = p.get("processedRowsPerSecond") or 0.0
                secs = p.get("durationMs", {}).get("triggerExecution", 0) / 1000
                progress(
                    f"micro-batch {p['batchId']} to {name} done: {p['numInputRows']:,} records in "
                    f"{secs:.1f} s ({rate:,.0f} records/s)"
                )
                quiet_since = time.perf_counter()
            reported[name] = max(reported[name], len(done))
        if time.perf_counter() - quiet_since >= 15:
            first = " (the first one includes Spark's warm-up, see the README)" if not any(reported.values()) else ""
            progress(f"a micro-batch is running, {time.perf_counter() - t0:.0f} s into the job{first}")
            quiet_since = time.perf_counter()


def read_output_topic(bootstrap: str, topic: str = OUT_TOPIC) -> list[dict]:
    """The windows the job wrote to the output topic (read with kafkawire.client)."""
    from kafkawire.client import Admin, Consumer

    with Admin(bootstrap) as admin:
        parts = sorted(admin.describe_topics([topic])[topic].partitions)
        ends = {tp: o.offset for tp, o in admin.list_offsets({(topic, p): "latest" for p in parts}).items()}
    out = []
    with Consumer(bootstrap, auto_offset_reset="earliest") as c:
        c.assign({tp: 0 for tp in ends})
        for _ in range(120):
            if len(out) >= sum(ends.values()):
                break
            out.extend(json.loads(r.value) for r in c.poll(0.5))
    return out


# ---------------------------------------------------------------------------------- main


def run(
    spark,
    bootstrap: str,
    events: int,
    out_dir: str,
    *,
    partitions: int = 3,
    seed: int = 7,
    in_topic: str = IN_TOPIC,
    out_topic: str = OUT_TOPIC,
    max_per_trigger: int | None = None,
    progress=_quiet,
) -> dict:
    """Generate, produce, run the job; returns figures (records in, windows out, seconds...)."""
    t = time.perf_counter()
    evs = generate_events(events, seed=seed)
    progress(f"generated {events:,} page views in {time.perf_counter() - t:.1f} s")
    create_topics(bootstrap, partitions, (in_topic, out_topic))
    produce_s = produce_events(bootstrap, evs, in_topic, progress)
    progress("streaming job started (Trigger.AvailableNow: it reads what is in the topic, then stops)")
    stats = run_job(
        spark,
        bootstrap,
        out_dir,
        max_per_trigger=max_per_trigger,
        in_topic=in_topic,
        out_topic=out_topic,
        progress=progress,
    )
    windows = spark.read.parquet(str(Path(out_dir) / "parquet")).count()
    topic_rows = read_output_topic(bootstrap, out_topic)
    stats.update(
        events=events,
        produce_seconds=produce_s,
        windows_out=windows,
        topic_windows=len(topic_rows),
        records_per_second=stats["records_in"] / stats["seconds"] if stats["seconds"] else 0.0,
    )
    return stats


def prepare_out_dir(path: str) -> Path:
    """The output directory, empty; one a previous run of this script made is replaced (its checkpoints would
    resume from that run's offsets), any other non-empty directory is refused."""
    out = Path(path).resolve()
    if out.exists() and any(out.iterdir()):
        if not (out / OUT_MARK).exists():
            raise SystemExit(f"{out} exists and was not made by this script: choose another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / OUT_MARK).write_text("output of examples/pipeline.py; replaced by its next run\n")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", help="an existing broker, host:port (default: start a kafkawire broker)")
    ap.add_argument("--events", type=int, default=200_000, help="page views to generate (default 200000)")
    ap.add_argument("--partitions", type=int, default=3, help="partitions of the topics (default 3)")
    ap.add_argument(
        "--out",
        default=DEFAULT_OUT,
        help=f"output directory, kept after the run and replaced by the next one (default ./{DEFAULT_OUT})",
    )
    ap.add_argument("--discard-output", action="store_true", help="remove the output directory at the end")
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    ap.add_argument("--max-per-trigger", type=int, help="maxOffsetsPerTrigger (default: all in one micro-batch)")
    ap.add_argument("--topics", default=f"{IN_TOPIC},{OUT_TOPIC}", help="input,output topic names")
    args = ap.parse_args(argv)
    in_topic, _, out_topic = args.topics.partition(",")
    if not in_topic or not out_topic:
        ap.error("--topics takes two names: IN,OUT")
    problem = java_problem()
    if problem:
        print(f"cannot run the pipeline: {problem}", file=sys.stderr)
        return 2

    def progress(text: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {text}", flush=True)

    started = time.perf_counter()
    out = prepare_out_dir(args.out)
    out_dir = str(out)
    broker = None
    try:
        bootstrap = args.bootstrap
        if not bootstrap:
            broker = start_broker()
            bootstrap = broker.bootstrap
            progress(f"kafkawire broker on {bootstrap} (data in a temporary directory, removed at the end)")
        progress(f"starting Spark ({args.master}); its JVM takes a few seconds")
        spark = spark_session(args.master)
        try:
            s = run(
                spark,
                bootstrap,
                args.events,
                out_dir,
                partitions=args.partitions,
                max_per_trigger=args.max_per_trigger,
                in_topic=in_topic,
                out_topic=out_topic,
                progress=progress,
            )
        finally:
            spark.stop()
        where = (
            f"Parquet {out_dir}/parquet (removed: --discard-output)"
            if args.discard_output
            else f"Parquet {out_dir}/parquet"
        )
        print(f"records in:      {s['records_in'] - 1} page views (+1 watermark marker) from topic {in_topic!r}")
        print(
            f"windows out:     {s['windows_out']} (page x 1-minute window) to {where} "
            f"and {s['topic_windows']} to topic {out_topic!r}"
        )
        print(f"late dropped:    {s['late_dropped']}")
        print(f"produce:         {s['events'] / s['produce_seconds']:,.0f} events/s")
        print(
            f"streaming job:   {s['seconds']:.1f} s, {s['micro_batches']} micro-batches, "
            f"{s['records_per_second']:,.0f} records/s"
        )
        if not args.discard_output:
            print(f"output kept in:  {out_dir} (read it with spark.read.parquet('{out_dir}/parquet'))")
        if s["records_in"] != s["events"] + 1:
            print(f"the input topic held {s['records_in'] - s['events'] - 1} records from before: use new --topics")
            return 1
        return 0 if s["windows_out"] == s["topic_windows"] else 1
    finally:
        if broker is not None:
            broker.stop()  # and its temporary data directory
        if args.discard_output:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
