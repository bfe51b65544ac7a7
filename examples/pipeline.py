#!/usr/bin/env python3
"""A streaming pipeline on kafkawire, end to end, in one command.

    python examples/pipeline.py                 # starts a kafkawire broker on a free port
    python examples/pipeline.py --events 20000  # smaller run
    python examples/pipeline.py --bootstrap localhost:9092   # an existing broker (kafkawire or Kafka)

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
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

IN_TOPIC = "pageviews"
OUT_TOPIC = "pageviews-per-minute"
PAGES = ["/", "/search", "/product/1", "/product/2", "/product/3", "/cart", "/checkout", "/help"]
COUNTRIES = ["DE", "FR", "US", "BR", "JP", "IN", "NG", "ES"]
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MARKER_PAGE = "__watermark__"


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
        out.append({
            "event_id": i,
            "user_id": f"u{rng.randrange(users):06d}",
            "page": rng.choices(PAGES, weights=[30, 20, 10, 10, 10, 8, 5, 7])[0],
            "country": rng.choice(COUNTRIES),
            "ts": max(BASE_MS, ts),
            "duration_ms": int(rng.expovariate(1 / 4000)),
        })
    return out


def marker_event(events: list[dict]) -> dict:
    last = max(e["ts"] for e in events) if events else BASE_MS
    return {"event_id": -1, "user_id": "", "page": MARKER_PAGE, "country": "", "ts": last + 3_600_000,
            "duration_ms": 0}


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

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data_dir: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = open(os.path.join(data_dir, "broker.log"), "wb")
    proc = subprocess.Popen([sys.executable, "-m", "kafkawire", "serve", "--listen", f"127.0.0.1:{port}",
                             "--data-dir", os.path.join(data_dir, "data"), "--log-level", "WARNING"],
                            stdout=log, stderr=subprocess.STDOUT)
    for _ in range(300):
        if proc.poll() is not None:
            raise RuntimeError(f"the broker exited with code {proc.returncode}; see {data_dir}/broker.log")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the broker did not start listening within 30 s")


def stop_broker(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def create_topics(bootstrap: str, partitions: int, topics=(IN_TOPIC, OUT_TOPIC)) -> None:
    from kafkawire.client import Admin, NewTopic

    with Admin(bootstrap) as admin:
        existing = set(admin.list_topics())
        new = [NewTopic(t, num_partitions=partitions) for t in topics if t not in existing]
        if new:
            admin.create_topics(new)


def produce_events(bootstrap: str, events: list[dict], topic: str = IN_TOPIC) -> float:
    """Produce every event (and the marker); returns seconds taken."""
    from kafkawire.client import Producer

    t0 = time.perf_counter()
    dumps = json.dumps
    with Producer(bootstrap, linger_ms=20, compression="lz4") as p:
        for e in events + [marker_event(events)]:
            p.produce(topic, dumps(e, separators=(",", ":")).encode(), e["user_id"].encode(),
                      timestamp=e["ts"])
        p.flush(120)
    return time.perf_counter() - t0


# ---------------------------------------------------------------------------------- the job

def spark_session(master: str = "local[2]"):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafkawire.spark import register

    spark = (SparkSession.builder.master(master).appName("kafkawire-pipeline")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def run_job(spark, bootstrap: str, out_dir: str, *, max_per_trigger: int | None = None, in_topic: str = IN_TOPIC,
            out_topic: str = OUT_TOPIC) -> dict:
    """The streaming job: Kafka -> parse -> windowed aggregate -> Kafka + Parquet. Returns progress figures."""
    from pyspark.sql import functions as F

    schema = ("event_id BIGINT, user_id STRING, page STRING, country STRING, ts BIGINT, duration_ms BIGINT")
    reader = (spark.readStream.format("kafkawire").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", in_topic).option("startingOffsets", "earliest"))
    if max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_per_trigger))
    views = (reader.load()
             .select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
             .select("e.*")
             .withColumn("event_time", F.timestamp_millis("ts"))
             .withWatermark("event_time", "2 minutes"))
    per_minute = (views.groupBy(F.window("event_time", "1 minute").alias("w"), "page")
                  .agg(F.count("*").alias("views"), F.size(F.collect_set("user_id")).alias("users"),
                       F.sum("duration_ms").alias("total_duration_ms"))
                  .select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"), "page",
                          "views", "users", "total_duration_ms",
                          F.round(F.col("total_duration_ms") / F.col("views"), 1).alias("avg_duration_ms")))
    # the marker is not filtered out (Spark would push the filter below the watermark): its window,
    # the latest of all, stays open and is never written

    out = Path(out_dir)
    t0 = time.perf_counter()
    to_parquet = (per_minute.writeStream.format("parquet").outputMode("append")
                  .option("path", str(out / "parquet")).option("checkpointLocation", str(out / "ck-parquet"))
                  .trigger(availableNow=True).start())
    to_kafka = (per_minute.select(F.col("page").cast("binary").alias("key"),
                                  F.to_json(F.struct("window_start", "window_end", "page", "views", "users",
                                                     "avg_duration_ms")).alias("value"))
                .writeStream.format("kafkawire").outputMode("append").option("kafka.bootstrap.servers", bootstrap)
                .option("topic", out_topic).option("checkpointLocation", str(out / "ck-kafka"))
                .trigger(availableNow=True).start())
    for q in (to_parquet, to_kafka):
        if not q.awaitTermination(1800):
            q.stop()
            raise RuntimeError(f"query {q.name or q.id} did not finish")
        if q.exception() is not None:
            raise RuntimeError(f"query failed: {q.exception()}")
    elapsed = time.perf_counter() - t0
    progress = to_parquet.recentProgress
    rows_in = sum(p["numInputRows"] for p in progress)
    dropped = sum(op.get("numRowsDroppedByWatermark", 0) for p in progress for op in p.get("stateOperators", []))
    return {"records_in": rows_in, "micro_batches": len(progress), "late_dropped": dropped, "seconds": elapsed}


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

def run(spark, bootstrap: str, events: int, out_dir: str, *, partitions: int = 3, seed: int = 7,
        in_topic: str = IN_TOPIC, out_topic: str = OUT_TOPIC, max_per_trigger: int | None = None) -> dict:
    """Generate, produce, run the job; returns figures (records in, windows out, seconds...)."""
    evs = generate_events(events, seed=seed)
    create_topics(bootstrap, partitions, (in_topic, out_topic))
    produce_s = produce_events(bootstrap, evs, in_topic)
    stats = run_job(spark, bootstrap, out_dir, max_per_trigger=max_per_trigger, in_topic=in_topic,
                    out_topic=out_topic)
    windows = spark.read.parquet(str(Path(out_dir) / "parquet")).count()
    topic_rows = read_output_topic(bootstrap, out_topic)
    stats.update(events=events, produce_seconds=produce_s, windows_out=windows, topic_windows=len(topic_rows),
                 records_per_second=stats["records_in"] / stats["seconds"] if stats["seconds"] else 0.0)
    return stats


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", help="an existing broker, host:port (default: start a kafkawire broker)")
    ap.add_argument("--events", type=int, default=200_000, help="page views to generate (default 200000)")
    ap.add_argument("--partitions", type=int, default=3, help="partitions of the topics (default 3)")
    ap.add_argument("--out", help="output directory (default: a new temporary directory)")
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    ap.add_argument("--max-per-trigger", type=int, help="maxOffsetsPerTrigger (default: all in one micro-batch)")
    ap.add_argument("--topics", default=f"{IN_TOPIC},{OUT_TOPIC}", help="input,output topic names")
    args = ap.parse_args(argv)
    in_topic, _, out_topic = args.topics.partition(",")
    if not in_topic or not out_topic:
        ap.error("--topics takes two names: IN,OUT")

    tmp = tempfile.mkdtemp(prefix="kafkawire-pipeline-")
    out_dir = args.out or os.path.join(tmp, "out")
    proc = None
    try:
        bootstrap = args.bootstrap
        if not bootstrap:
            proc, bootstrap = start_broker(tmp)
            print(f"kafkawire broker on {bootstrap} (data in {tmp}/data)")
        spark = spark_session(args.master)
        try:
            s = run(spark, bootstrap, args.events, out_dir, partitions=args.partitions,
                    max_per_trigger=args.max_per_trigger, in_topic=in_topic, out_topic=out_topic)
        finally:
            spark.stop()
        print(f"records in:      {s['records_in'] - 1} page views (+1 watermark marker) from topic {in_topic!r}")
        print(f"windows out:     {s['windows_out']} (page x 1-minute window) to Parquet {out_dir}/parquet "
              f"and {s['topic_windows']} to topic {out_topic!r}")
        print(f"late dropped:    {s['late_dropped']}")
        print(f"produce:         {s['events'] / s['produce_seconds']:,.0f} events/s")
        print(f"streaming job:   {s['seconds']:.1f} s, {s['micro_batches']} micro-batches, "
              f"{s['records_per_second']:,.0f} records/s")
        if s["records_in"] != s["events"] + 1:
            print(f"the input topic held {s['records_in'] - s['events'] - 1} records from before: use new --topics")
            return 1
        return 0 if s["windows_out"] == s["topic_windows"] else 1
    finally:
        if proc is not None:
            stop_broker(proc)
        if not args.out:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
