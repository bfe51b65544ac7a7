#!/usr/bin/env python3
"""What ``kafkawire proxy`` costs: librdkafka direct to a broker vs through the proxy, in one run.

Upstream: ``kafkawire serve --storage memory`` (and, with ``--brokers kafkawire,kafka``, the reference Apache
Kafka from ``tools/kafka_reference.py``). The proxy runs as users run it, ``kafkawire proxy`` in a process of
its own, in each ``--modes``: ``quiet`` (the summary only; every exchange is still described for it, a large
streamed response skimmed for its error codes), ``lines`` (one line per exchange, written to /dev/null) and
``whole`` (``--quiet --decode-all``: every response decoded whole, as before skimming; not run by default).
Measured with confluent-kafka in this process:

* produce latency: one record at a time at ``--rate`` records/s, acks=all, linger.ms=0; the time from
  ``produce()`` to its delivery report; p50 and p99, and what the proxy adds to each;
* produce throughput: ``--records`` records of ``--size`` bytes as fast as librdkafka sends them (acks=all,
  linger.ms=5), from the first send to the last delivery report;
* consume throughput: the same records read back by an assigned consumer from offset 0.

Direct and proxied runs alternate, ``--repeat`` times each; the medians are printed with the ratios
(proxied/direct) and the issue's targets (< 0.5 ms added p50, >= 70% of direct throughput), and the CPU time
per 100 MB relayed (produce / consume) of the broker (kafkawire's; both upstreams' with ``--brokers``) and of the
proxy process: steadier than throughput when the machine is shared. The machine's
core count and load average are printed first and last: on a small shared machine read the figures with them.

Usage: python benchmarks/bench_proxy.py [--quick] [--records N] [--size B] [--rate R] [--latency-records N]
           [--repeat N] [--brokers kafkawire,kafka] [--modes quiet,lines,whole]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def machine() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0, 0, 0)
    return f"{os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port} after {timeout} s")


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


class KafkawireUpstream:
    name = "kafkawire"

    def __enter__(self):
        self.port = free_port()
        self.dir = tempfile.TemporaryDirectory(prefix="kw-proxy-bench-")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kafkawire",
                "serve",
                "--listen",
                f"127.0.0.1:{self.port}",
                "--storage",
                "memory",
                "--data-dir",
                self.dir.name,
                "--log-level",
                "WARNING",
            ],
            stdin=subprocess.DEVNULL,
        )
        wait_port(self.port, self.proc)
        return self

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def __exit__(self, *exc):
        stop(self.proc)
        self.dir.cleanup()


class KafkaUpstream:
    name = "kafka"

    def __enter__(self):
        sys.path.insert(0, str(ROOT / "tools"))
        from kafka_reference import ReferenceKafka

        self.dir = tempfile.TemporaryDirectory(prefix="kw-proxy-bench-kafka-")
        self.kafka = ReferenceKafka(Path(self.dir.name)).start()
        return self

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    @property
    def pid(self) -> int | None:
        return self.kafka.proc.pid if self.kafka.proc is not None else None

    def __exit__(self, *exc):
        self.kafka.close()
        self.dir.cleanup()


class ProxyProcess:
    def __init__(self, upstream: str, mode: str):
        self.upstream, self.mode = upstream, mode

    def __enter__(self):
        cmd = [sys.executable, "-m", "kafkawire", "proxy", "--listen", "127.0.0.1:0", "--upstream", self.upstream]
        if self.mode in ("quiet", "whole"):
            cmd.append("--quiet")
        if self.mode == "whole":
            cmd.append("--decode-all")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        line = self.proc.stderr.readline()
        found = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if not found:
            self.proc.kill()
            raise RuntimeError(f"the proxy did not start: {line!r}")
        self.bootstrap = f"127.0.0.1:{found.group(1)}"
        return self

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGTERM)
        try:
            _out, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate(timeout=10)


def create_topic(bootstrap: str) -> str:
    from kafkawire.client import Admin, NewTopic

    name = f"bench-proxy-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, num_partitions=1)])
    return name


def produce_latency(bootstrap: str, topic: str, n: int, rate: float) -> list[float]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    latencies: list[float] = []

    def done(err, _msg, start):
        if err is None:
            latencies.append(time.perf_counter() - start)

    for _ in range(20):  # warm up: connections and metadata
        p.produce(topic, b"w")
    p.flush(30)
    interval = 1.0 / rate
    next_at = time.perf_counter()
    for _ in range(n):
        now = time.perf_counter()
        if now < next_at:
            time.sleep(next_at - now)
        start = time.perf_counter()
        p.produce(topic, b"x" * 100, on_delivery=lambda err, msg, s=start: done(err, msg, s))
        p.poll(0)
        next_at += interval
    p.flush(60)
    if len(latencies) != n:
        raise RuntimeError(f"{n - len(latencies)} records not delivered")
    return latencies


def produce_throughput(bootstrap: str, topic: str, n: int, size: int) -> float:
    from confluent_kafka import Producer

    p = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "queue.buffering.max.messages": max(n, 100_000)}
    )
    value = os.urandom(size)
    delivered = [0]

    def done(err, _msg):
        if err is None:
            delivered[0] += 1

    p.produce(topic, value, on_delivery=done)
    p.flush(30)
    delivered[0] = 0
    start = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, on_delivery=done)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    elapsed = time.perf_counter() - start
    if delivered[0] != n:
        raise RuntimeError(f"{n - delivered[0]} records not delivered")
    return n / elapsed


def consume_throughput(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    start = None
    deadline = time.monotonic() + 120
    while got < n and time.monotonic() < deadline:
        for m in c.consume(min(10_000, n - got), 1.0):
            if m.error() is None:
                if start is None:
                    start = time.perf_counter()
                got += 1
    elapsed = time.perf_counter() - (start or time.perf_counter())
    c.close()
    if got < n:
        raise RuntimeError(f"consumed {got} of {n}")
    return n / elapsed


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(bootstrap: str, args, pid: int | None = None, broker_pid: int | None = None) -> dict[str, float]:
    """``pid``: the proxy's process, ``broker_pid`` the broker's, whose CPU times during the two throughput runs
    are measured (per 100 MB: on a shared machine a steadier figure of what each costs than throughput)."""
    topic = create_topic(bootstrap)
    lat = sorted(produce_latency(bootstrap, topic, args.latency_records, args.rate))
    tput_topic = create_topic(bootstrap)

    def cpu() -> tuple[float, float]:
        return (cpu_seconds(pid) if pid else 0.0, cpu_seconds(broker_pid) if broker_pid else 0.0)

    cpu0 = cpu()
    produced = produce_throughput(bootstrap, tput_topic, args.records, args.size)
    cpu1 = cpu()
    consumed = consume_throughput(bootstrap, tput_topic, args.records + 1)
    cpu2 = cpu()
    per_100mb = 100e6 / (args.records * args.size)
    return {
        "p50_ms": statistics.median(lat) * 1e3,
        "p99_ms": lat[int(0.99 * (len(lat) - 1))] * 1e3,
        "produce_rps": produced,
        "consume_rps": consumed,
        "produce_cpu": (cpu1[0] - cpu0[0]) * per_100mb,
        "consume_cpu": (cpu2[0] - cpu1[0]) * per_100mb,
        "broker_produce_cpu": (cpu1[1] - cpu0[1]) * per_100mb,
        "broker_consume_cpu": (cpu2[1] - cpu1[1]) * per_100mb,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a short smoke run")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rate", type=float, default=500.0, help="records/s of the latency run")
    ap.add_argument("--latency-records", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--brokers", default="kafkawire", help="kafkawire, kafka or both (comma-separated)")
    ap.add_argument("--modes", default="quiet,lines", help="proxy output modes: quiet, lines")
    args = ap.parse_args(argv)
    if args.quick:
        args.records, args.latency_records, args.repeat = 20_000, 500, 1
    modes = [m for m in args.modes.split(",") if m]
    print(
        f"# bench_proxy: {machine()}; {args.records} records of {args.size} B, latency {args.latency_records} "
        f"records at {args.rate:.0f}/s, {args.repeat} runs each",
        flush=True,
    )
    upstreams = {"kafkawire": KafkawireUpstream, "kafka": KafkaUpstream}
    rows = []
    for name in [b for b in args.brokers.split(",") if b]:
        with upstreams[name]() as upstream:
            results: dict[str, list[dict[str, float]]] = {"direct": [], **{m: [] for m in modes}}
            for _ in range(args.repeat):
                results["direct"].append(run_once(upstream.bootstrap, args, None, upstream.pid))
                for mode in modes:
                    with ProxyProcess(upstream.bootstrap, mode) as proxy:
                        results[mode].append(run_once(proxy.bootstrap, args, proxy.proc.pid, upstream.pid))
            med = {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in results.items()}
            for mode, figures in med.items():
                rows.append((name, mode, figures, med["direct"]))
    print(
        f"{'upstream':<10} {'path':<14} {'p50 ms':>8} {'p99 ms':>8} {'+p50 ms':>8} {'+p99 ms':>8} "
        f"{'produce rec/s':>14} {'ratio':>6} {'consume rec/s':>14} {'ratio':>6} {'broker CPU s/100 MB':>20} "
        f"{'proxy CPU s/100 MB':>19}"
    )
    verdicts = []
    for name, mode, f, d in rows:
        path = "direct" if mode == "direct" else f"proxy ({mode})"
        added50, added99 = f["p50_ms"] - d["p50_ms"], f["p99_ms"] - d["p99_ms"]
        pr, cr = f["produce_rps"] / d["produce_rps"], f["consume_rps"] / d["consume_rps"]
        print(
            f"{name:<10} {path:<14} {f['p50_ms']:>8.3f} {f['p99_ms']:>8.3f} "
            f"{'' if mode == 'direct' else f'{added50:+.3f}':>8} {'' if mode == 'direct' else f'{added99:+.3f}':>8} "
            f"{f['produce_rps']:>14,.0f} {pr:>6.2f} {f['consume_rps']:>14,.0f} {cr:>6.2f} "
            f"{f['broker_produce_cpu']:>9.3f} / {f['broker_consume_cpu']:<8.3f} "
            + ("" if mode == "direct" else f"{f['produce_cpu']:>8.3f} / {f['consume_cpu']:.3f}")
        )
        if mode != "direct":
            verdicts.append(
                f"{name} {mode}: added p50 {added50:.3f} ms ({'<' if added50 < 0.5 else '>='} 0.5 target), "
                f"throughput produce {pr:.0%} consume {cr:.0%} ({'meets' if min(pr, cr) >= 0.7 else 'below'}"
                " the 70% target)"
            )
    for v in verdicts:
        print("# " + v)
    print(f"# {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
