#!/usr/bin/env python3
"""What ``kafkawire serve --metrics`` costs: produce throughput with metrics off and on, side by side.

One ``kafkawire serve`` process per run (metrics off, then on, alternating, ``--repeat`` times each), driven by
librdkafka (confluent-kafka) in this process: records of ``--size`` bytes to a topic of ``--partitions``
partitions, acks=all, from the first send to the last delivery report. While metrics are on, a thread scrapes
``/metrics`` every ``--scrape-every`` seconds, as Prometheus would (it usually waits 15 s or more). Prints the
median records/s of each side and their ratio (on/off; 1.00 is no cost), per storage engine. Then the time of
one scrape with ``--scrape-partitions`` partitions, to size the scrape thread's work.

Usage: python benchmarks/bench_metrics_overhead.py [--quick] [--records N] [--size B] [--partitions N]
           [--repeat N] [--storage memory,segments] [--scrape-every S] [--scrape-partitions N]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"kafkawire serve exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"kafkawire serve did not listen on {port} within {timeout} s")


class Serve:
    """``kafkawire serve`` on free loopback ports, stopped (SIGTERM, then kill) on exit."""

    def __init__(self, storage: str, metrics: bool):
        self.storage, self.metrics = storage, metrics
        self.port = free_port()
        self.metrics_port = free_port() if metrics else None
        self.dir = tempfile.TemporaryDirectory(prefix="kw-metrics-bench-")

    def __enter__(self):
        cmd = [
            sys.executable,
            "-m",
            "kafkawire",
            "serve",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--storage",
            self.storage,
            "--data-dir",
            self.dir.name,
            "--log-level",
            "WARNING",
        ]
        if self.metrics:
            cmd += ["--metrics", f"127.0.0.1:{self.metrics_port}"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
        wait_port(self.port, self.proc)
        if self.metrics:
            wait_port(self.metrics_port, self.proc)
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.dir.cleanup()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def scrape(self) -> bytes:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=30) as answer:
            return answer.read()


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)], operation_timeout=30
    ).values():
        fut.result(60)


def produce(bootstrap: str, topic: str, records: int, size: int, limit_s: float) -> float:
    """Records per second, first send to last delivery report (acks=all)."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 200_000,
        }
    )
    value = os.urandom(size)
    failed = []

    def report(err, _msg):
        if err is not None:
            failed.append(err)

    # warm up: metadata, connections, the first batches
    for _ in range(1000):
        producer.produce(topic, value, on_delivery=report)
    producer.flush(30)
    started = time.perf_counter()
    deadline = time.monotonic() + limit_s
    sent = 0
    while sent < records and time.monotonic() < deadline:
        try:
            producer.produce(topic, value, on_delivery=report)
            sent += 1
        except BufferError:
            producer.poll(0.01)
    producer.poll(0)
    left = producer.flush(max(1.0, deadline - time.monotonic() + 30))
    elapsed = time.perf_counter() - started
    if failed or left:
        raise RuntimeError(f"{len(failed)} records failed, {left} undelivered")
    return sent / elapsed


def one_run(storage: str, metrics: bool, args) -> tuple[float, int]:
    """(records/s, scrapes made)."""
    with Serve(storage, metrics) as serve:
        create_topic(serve.bootstrap, "bench", args.partitions)
        stop = threading.Event()
        scrapes = [0]

        def scraper():
            while not stop.wait(args.scrape_every):
                serve.scrape()
                scrapes[0] += 1

        thread = threading.Thread(target=scraper, daemon=True) if metrics else None
        if thread is not None:
            thread.start()
        try:
            rate = produce(serve.bootstrap, "bench", args.records, args.size, args.limit)
        finally:
            stop.set()
            if thread is not None:
                thread.join(30)
        if metrics:
            serve.scrape()
        return rate, scrapes[0]


def scrape_cost(args) -> None:
    """Time of a scrape with ``--scrape-partitions`` partitions holding a record each."""
    from confluent_kafka import Producer

    with Serve("segments", True) as serve:
        create_topic(serve.bootstrap, "wide", args.scrape_partitions)
        producer = Producer({"bootstrap.servers": serve.bootstrap, "acks": "1"})
        for p in range(args.scrape_partitions):
            producer.produce("wide", b"x", partition=p)
        assert producer.flush(60) == 0
        times, size = [], 0
        for _ in range(5):
            t0 = time.perf_counter()
            size = len(serve.scrape())
            times.append(time.perf_counter() - t0)
        print(
            f"scrape with {args.scrape_partitions} partitions: median {statistics.median(times) * 1000:.1f} ms, "
            f"{size / 1024:.0f} KiB of text (5 scrapes)"
        )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small run: 200,000 records, 2 repeats")
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--storage", default="memory,segments")
    ap.add_argument("--scrape-every", type=float, default=1.0)
    ap.add_argument("--scrape-partitions", type=int, default=2000)
    ap.add_argument("--limit", type=float, default=90.0, help="seconds per run at most")
    args = ap.parse_args(argv)
    if args.quick:
        args.records, args.repeat, args.scrape_partitions = 200_000, 2, 500
    print(
        f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.2f}; {args.records} records of {args.size} B, "
        f"{args.partitions} partitions, acks=all, librdkafka; scrape every {args.scrape_every} s while on"
    )
    for storage in args.storage.split(","):
        rates: dict[bool, list[float]] = {False: [], True: []}
        scrapes = 0
        for _ in range(args.repeat):
            for metrics in (False, True):  # alternate, so drift in the machine's load hits both sides
                rate, n = one_run(storage, metrics, args)
                rates[metrics].append(rate)
                scrapes += n
        off, on = statistics.median(rates[False]), statistics.median(rates[True])
        print(
            f"{storage:9s} metrics off {off:10,.0f} rec/s  on {on:10,.0f} rec/s  ratio on/off {on / off:.3f}  "
            f"(runs off {[round(r) for r in rates[False]]}, on {[round(r) for r in rates[True]]}, "
            f"{scrapes} scrapes)"
        )
    scrape_cost(args)
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
