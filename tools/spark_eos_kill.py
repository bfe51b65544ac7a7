"""Kill test of the Spark sink's exactly-once mode: the driver killed at random points, then restarted.

A streaming query reads a source topic and writes every record to an output topic with
``exactlyOnce=true``; its driver (a separate process running Spark in local mode, so the executors'
tasks die with it) is killed with SIGKILL at a random moment after the run's first micro-batch, ``--rounds``
times, each time restarted from the same checkpoint; a last run goes to the end (Trigger.AvailableNow).
Then a read_committed consumer reads the output: every input value must be there exactly once.

    python tools/spark_eos_kill.py --rounds 10                 # starts a kafkawire broker of its own
    python tools/spark_eos_kill.py --bootstrap 127.0.0.1:9092  # a broker already running

Prints one JSON line (rounds, kills that hit a running batch, duplicates, losses, aborted records
seen by read_uncommitted) and exits 1 when a record is duplicated or lost.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from kafkawire.testing import KafkaBroker

STARTED = "EOS-QUERY-STARTED"
BATCH = "EOS-BATCH-DONE"


# -- the driver ------------------------------------------------------------------------------------


def driver(bootstrap: str, src: str, dst: str, checkpoint: str, per_trigger: int) -> int:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from kafkawire.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kafkawire-eos-kill")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # every run is a fresh JVM killed within seconds: the C2 compiler's work on two cores never pays back
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    try:
        df = (
            spark.readStream.format("kafkawire")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", src)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(per_trigger))
            .load()
        )
        q = (
            df.selectExpr("key", "value")
            .writeStream.format("kafkawire")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", dst)
            .option("exactlyOnce", "true")
            # a transaction a killed run left open and no later run reuses ends this soon
            .option("kafka.transaction.timeout.ms", "20000")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        print(STARTED, flush=True)
        seen = -1
        while not q.awaitTermination(0.2):  # tell the harness each micro-batch Spark has committed
            progress = q.lastProgress
            if progress is not None and progress["batchId"] > seen:
                seen = progress["batchId"]
                print(f"{BATCH} {seen}", flush=True)
        if q.exception() is not None:
            print(f"query failed: {q.exception()}", file=sys.stderr, flush=True)
            return 1
        return 0
    finally:
        spark.stop()


# -- the harness -----------------------------------------------------------------------------------


def _prepare(bootstrap: str, records: int) -> tuple[str, str]:
    from kafkawire.client import Admin, NewTopic, Producer

    tag = uuid.uuid4().hex[:8]
    src, dst = f"eos-kill-in-{tag}", f"eos-kill-out-{tag}"
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(src, num_partitions=2), NewTopic(dst, num_partitions=3)])
    with Producer(bootstrap) as p:
        for i in range(records):
            p.produce(src, f"v{i}".encode(), key=f"k{i % 17}".encode())
        p.flush(120)
    return src, dst


def _read(bootstrap: str, topic: str, isolation: str, partitions: int = 3, timeout: float = 60.0) -> list[bytes]:
    """Every record of ``topic`` ``isolation`` shows, read up to the partitions' end offsets (the last stable
    offset for read_committed, the high watermark for read_uncommitted) as of when the read starts: nothing
    written before is left unread, so a duplicate past the expected count is seen without polling on."""
    from kafkawire.client import Consumer

    out: list[bytes] = []
    with Consumer(bootstrap, isolation_level=isolation) as c:
        tps = [(topic, p) for p in range(partitions)]
        c.assign(tps, offset="earliest")
        ends = c.end_offsets(tps)
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            out += [r.value for r in c.poll(timeout=0.5)]
    return out


def _run_driver(
    bootstrap: str,
    src: str,
    dst: str,
    ck: str,
    per_trigger: int,
    log_path: str,
    kill_after: float | None,
    timeout: float,
) -> str:
    """One driver run: "killed", "finished" or "failed".

    ``kill_after``: SIGKILL this many seconds after the run's first micro-batch was done (the session is
    warm by then, so the kill lands among writes and commits rather than in Spark's start-up)."""
    log = open(log_path, "ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            os.path.abspath(__file__),
            "--driver",
            "--bootstrap",
            bootstrap,
            "--src",
            src,
            "--dst",
            dst,
            "--checkpoint",
            ck,
            "--per-trigger",
            str(per_trigger),
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        start_new_session=True,
    )
    lines: queue.Queue = queue.Queue()

    def pump():
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.decode(errors="replace").strip())
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    try:
        if kill_after is not None:
            while time.monotonic() < deadline:
                try:
                    line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if line is None or line.startswith(BATCH):
                    break
            try:
                proc.wait(timeout=kill_after)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and the Python workers
                proc.wait(timeout=30)
                return "killed"
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        return "finished" if proc.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        return "failed"
    finally:
        reader.join(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
        log.close()


def run(
    bootstrap: str,
    *,
    rounds: int,
    records: int,
    per_trigger: int,
    workdir: str,
    seed: int,
    kill_window: float = 4.0,
    timeout: float = 300.0,
) -> dict:
    """``rounds`` killed runs and a last one to the end; the result as a dict (see the module docstring)."""
    rng = random.Random(seed)
    src, dst = _prepare(bootstrap, records)
    ck = os.path.join(workdir, "checkpoint")
    log_path = os.path.join(workdir, "driver.log")
    outcomes = []
    for _ in range(rounds):
        after = rng.uniform(0.0, kill_window)
        t0 = time.monotonic()
        outcome = _run_driver(bootstrap, src, dst, ck, per_trigger, log_path, after, timeout)
        outcomes.append({"kill_after_s": round(after, 2), "outcome": outcome, "s": round(time.monotonic() - t0, 1)})
        if outcome == "failed":
            break
    final = _run_driver(bootstrap, src, dst, ck, per_trigger, log_path, None, timeout)
    committed = _read(bootstrap, dst, "read_committed")
    raw = _read(bootstrap, dst, "read_uncommitted")
    counts = collections.Counter(committed)
    want = {f"v{i}".encode() for i in range(records)}
    duplicates = sum(c - 1 for v, c in counts.items() if c > 1)
    losses = len(want - set(counts))
    commits = os.path.join(ck, "commits")
    return {
        "rounds": rounds,
        "records": records,
        "seed": seed,
        "runs": outcomes,
        "final": final,
        "kills": sum(1 for o in outcomes if o["outcome"] == "killed"),
        "batches": len([f for f in os.listdir(commits) if f.isdigit()]) if os.path.isdir(commits) else 0,
        "read_committed": len(committed),
        "duplicates": duplicates,
        "losses": losses,
        "unexpected": len(set(counts) - want),
        "aborted_or_open_records": len(raw) - len(committed),
        "ok": final == "finished" and duplicates == 0 and losses == 0 and not set(counts) - want,
        "driver_log": log_path,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--per-trigger", type=int, default=2000, help="maxOffsetsPerTrigger of the query")
    ap.add_argument(
        "--kill-window",
        type=float,
        default=4.0,
        help="each kill comes at a uniformly random time up to this many seconds after the run's first micro-batch",
    )
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--bootstrap", help="a running broker (default: start a kafkawire broker)")
    ap.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--src", help=argparse.SUPPRESS)
    ap.add_argument("--dst", help=argparse.SUPPRESS)
    ap.add_argument("--checkpoint", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.driver:
        return driver(args.bootstrap, args.src, args.dst, args.checkpoint, args.per_trigger)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    tmp = tempfile.mkdtemp(prefix="kafkawire-eos-kill-")
    broker = None
    try:
        bootstrap = args.bootstrap
        if bootstrap is None:
            # the one launcher of kafkawire.testing (free port, readiness probe, log, stop)
            broker = KafkaBroker(storage="memory", data_dir=os.path.join(tmp, "data")).start()
            bootstrap = broker.bootstrap
        result = run(
            bootstrap,
            rounds=args.rounds,
            records=args.records,
            per_trigger=args.per_trigger,
            workdir=tmp,
            seed=seed,
            kill_window=args.kill_window,
        )
        print(json.dumps(result))
        return 0 if result["ok"] else 1
    finally:
        if broker is not None:
            broker.stop()
        if "KAFKAWIRE_KEEP" not in os.environ:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
