#!/usr/bin/env python3
"""Where the produce latency tail comes from: librdkafka at a fixed rate (1 KiB, linger.ms=0, acks=1 on the
segments engine, no fsync on that path) against ``kafkawire serve``, with two probes running at the same time:

  loop probe   an ApiVersions request every 2 ms on its own connection: its round trip is how long the
               broker's event loop took to get to a request (a stall from storage work, GC or a long callback
               shows here as on produce)
  host probe   a 1 ms sleep in this process, timed: how late the OS runs a thread that is ready (the machine's
               scheduling delay, which no broker can do anything about)

Each produce record's latency (librdkafka's own, send to acknowledgement) is matched with the probes: a slow
record whose interval holds a slow loop round trip points at the broker; one whose interval holds a late
host wake-up points at the machine. ``--py-spy FILE`` also records the broker with py-spy (speedscope file)
to show what runs during a stall.

``--in-process`` runs the broker in this process instead (asyncio's loop, in a thread) to look inside a stall:
a watchdog samples the loop thread's stack whenever its 1 ms heartbeat is over 10 ms late, gc.callbacks time
every collection on that thread, and every segment write (pwritev) is timed; it runs the load twice, without
and with ``gc.freeze()`` after start-up (what ``kafkawire serve`` does), and prints both.

``--generator perf`` drives the same broker with Kafka's ProducerPerformance (1 KiB, linger.ms=0) instead,
one JVM, which reports every 100 ms the window's average and largest latency. Every 100 ms the CPU of each
thread of that JVM and of the broker is read from /proc; the report gives, second by second, the cores each
side used, how much of the client's went to its JIT compiler and GC threads, the loop probe's slowest round
trip and the tool's slowest record. A slow second with the loop probe fast and the client's core full of its
own compilation is the client's, not the broker's. ``--pin 0:1`` runs the broker on CPU 0 and the client and
the probes on CPU 1, as ``bench_broker.py --pin`` does.

Usage: python benchmarks/bench_latency_tail.py [--rate 2000] [--seconds 10] [--acks 1] [--py-spy FILE]
       python benchmarks/bench_latency_tail.py --generator perf [--pin 0:1] [--rate 20000] [--warmup 10]
       python benchmarks/bench_latency_tail.py --in-process [--rate 2000] [--seconds 10]
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from kafkawire.protocol import encode_request, message_class, request_header  # noqa: E402

from peers.peer_harness import BrokerProcess  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))

SLOW_MS = 5.0  # a record slower than this is in the tail the target cares about (p99 <= 5 ms)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def loop_probe(address, stop: threading.Event, out: list) -> None:
    """(start time, round trip ms) of an ApiVersions request every 2 ms."""
    body = message_class("ApiVersionsRequest")()
    with socket.create_connection(address, timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        cid = 0
        while not stop.is_set():
            cid += 1
            frame = encode_request(request_header(body.api_key, 0, cid, "probe"), body)
            t0 = time.perf_counter()
            sock.sendall(frame)
            size = struct.unpack(">i", _read(sock, 4))[0]
            _read(sock, size)
            out.append((t0, (time.perf_counter() - t0) * 1000))
            time.sleep(0.002)


def _read(sock, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the probe connection")
        buf += chunk
    return bytes(buf)


def host_probe(stop: threading.Event, out: list) -> None:
    """(start time, ms late) of a 1 ms sleep, over and over."""
    while not stop.is_set():
        t0 = time.perf_counter()
        time.sleep(0.001)
        out.append((t0, (time.perf_counter() - t0) * 1000 - 1.0))


def produce(bootstrap: str, topic: str, rate: int, seconds: float, acks: str) -> list[tuple[float, float]]:
    """(send time, latency ms) of each record acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "enable.idempotence": False})
    value = os.urandom(1024)
    sent: dict[int, float] = {}
    done: list[tuple[float, float]] = []

    def report(err, msg, i):
        if err is None:
            done.append((sent[i], msg.latency() * 1000))

    start = time.perf_counter()
    for i in range(int(rate * seconds)):
        due = start + i / rate
        while (now := time.perf_counter()) < due:
            producer.poll(min(due - now, 0.001))
        sent[i] = time.perf_counter()
        producer.produce(topic, value, on_delivery=lambda err, msg, i=i: report(err, msg, i))
        producer.poll(0)
    producer.flush(30)
    return done


def overlaps(samples: list[tuple[float, float]], times: list[float], t0: float, t1: float, slow: float) -> bool:
    """Whether a probe sample that started in [t0 - 0.01, t1] took longer than ``slow`` ms."""
    i = bisect.bisect_left(times, t0 - 0.01)
    while i < len(samples) and samples[i][0] <= t1:
        if samples[i][1] > slow:
            return True
        i += 1
    return False


# ProducerPerformance's progress line for one reporting interval (its final summaries carry percentiles too)
_PERF_WINDOW = re.compile(
    r"^(\d+) records sent, [\d.]+ records/sec .*, ([\d.]+) ms avg latency, ([\d.]+) ms max latency\.$"
)


def perf_window(line: str) -> tuple[int, float, float] | None:
    """(records, average ms, largest ms) of a ProducerPerformance progress line; None for any other line."""
    m = _PERF_WINDOW.match(line.strip())
    return (int(m.group(1)), float(m.group(2)), float(m.group(3))) if m else None


def thread_kind(name: str) -> str:
    """What a JVM thread (or a broker thread) does, by the name Linux keeps for it (15 characters)."""
    if "Compiler" in name:
        return "jit"
    if name.startswith(("GC ", "G1 ")):
        return "gc"
    return "other"


def thread_ticks(pid: int) -> dict[tuple[str, str], int]:
    """Clock ticks (user + system) each thread of ``pid`` has used: {(thread id, name): ticks}."""
    out: dict[tuple[str, str], int] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended between the listing and the read
        name, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        out[(tid, name)] = int(fields[11]) + int(fields[12])
    return out


def cpu_by_second(samples: list[tuple[float, dict, dict]], t0: float) -> dict[int, dict[str, float]]:
    """Cores used per whole second since ``t0``, from (time, client threads' ticks, broker threads' ticks)
    samples: {second: {"client": .., "jit": .., "gc": .., "broker": ..}}."""
    tick = os.sysconf("SC_CLK_TCK")
    seconds: dict[int, dict[str, float]] = {}
    for (_, client0, broker0), (t, client1, broker1) in zip(samples, samples[1:]):
        row = seconds.setdefault(int(t - t0), {"client": 0.0, "jit": 0.0, "gc": 0.0, "broker": 0.0})
        for key, used in client1.items():
            delta = (used - client0.get(key, 0)) / tick
            row["client"] += delta
            kind = thread_kind(key[1])
            if kind != "other":
                row[kind] += delta
        row["broker"] += sum(used - broker0.get(key, 0) for key, used in broker1.items()) / tick
    return seconds


def perf_run(args) -> int:
    """The latency case driven by Kafka's ProducerPerformance, with both probes and both sides' CPU."""
    import bench_broker
    from kafka_perf import PRODUCER, PerfTools, parse_producer, producer_args, run_watched

    pin = args.pin
    perf = PerfTools()
    payload_file = perf.payload_file("payloads-1024.txt", bench_broker.payloads(1024))
    if args.broker == "kafka":
        from kafka_reference import ReferenceKafka

        broker = ReferenceKafka()  # Kafka's default flush policy: never forced, as kafkawire below
    else:
        extra = () if args.acks != "all" else ("--override", "kafkawire.acks.all.fsync=false")
        broker = BrokerProcess("kafkawire", storage="disk", extra_args=extra)
    started(broker, pin)
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    try:
        bench_broker.create_topic(broker.bootstrap, "tail", 1, {})
        warmup = int(args.rate * args.warmup)
        command = perf.command(
            PRODUCER,
            producer_args(
                broker.bootstrap, "tail", int(args.rate * args.seconds), payload_file, args.rate, warmup,
                {"acks": args.acks, "linger.ms": 0, "enable.idempotence": "false"},
            ) + ["--reporting-interval", "100"],
        )  # fmt: skip
        stop = threading.Event()
        loop_samples: list = []
        host_samples: list = []
        probes = [
            threading.Thread(target=loop_probe, args=(("127.0.0.1", port), stop, loop_samples), daemon=True),
            threading.Thread(target=host_probe, args=(stop, host_samples), daemon=True),
        ]
        for t in probes:
            t.start()
        t0 = time.perf_counter()
        cpu_samples: list = []
        lines: list[tuple[float, str]] = []

        def sample_cpu(client: subprocess.Popen) -> None:
            while client.poll() is None and not stop.is_set():
                cpu_samples.append((time.perf_counter(), thread_ticks(client.pid), thread_ticks(broker.proc.pid)))
                time.sleep(0.1)

        def start_sampler(client: subprocess.Popen) -> None:
            sampler = threading.Thread(target=sample_cpu, args=(client,), daemon=True)
            sampler.start()
            probes.append(sampler)

        try:
            # bounded: a tool that hangs is killed
            run_watched(
                command,
                (args.seconds + args.warmup) * 3 + 60,
                lambda line: lines.append((time.perf_counter(), line.rstrip())),
                start_sampler,
            )
        finally:
            stop.set()
            for t in probes:
                t.join(10)
    finally:
        broker.close()
    text = "\n".join(line for _, line in lines)
    steady = parse_producer(text, steady=warmup > 0)
    if steady is None:
        print("the perf tool printed no summary:", text[-800:])
        return 1
    where = f"pinned: broker on CPUs {sorted(pin[0])}, client and probes on {sorted(pin[1])}" if pin else "unpinned"
    print(
        f"{args.broker}, no fsync; perf tool, {args.rate:,}/s of 1 KiB, acks={args.acks}, linger.ms=0, "
        f"{args.warmup:g} s of warm-up records; {where}"
    )
    print(
        f"  steady state: {steady['records']:,} records, p50 {steady['p50_ms']:g} ms, p99 {steady['p99_ms']:g} ms, "
        f"max {steady['max_ms']:g} ms"
    )
    per_second = cpu_by_second(cpu_samples, t0)
    print("  second | client cores (JIT, GC) | broker cores | loop probe max ms | slowest record ms")
    for second, row in sorted(per_second.items()):
        loop_max = max((ms for ts, ms in loop_samples if int(ts - t0) == second), default=float("nan"))
        windows = [w for ts, line in lines if int(ts - t0) == second and (w := perf_window(line))]
        slowest = max((w[2] for w in windows), default=float("nan"))
        print(
            f"  {second:6} | {row['client']:5.2f} ({row['jit']:4.2f}, {row['gc']:4.2f})      | "
            f"{row['broker']:12.2f} | {loop_max:17.1f} | {slowest:17.0f}"
        )
    slow = [(ts, w) for ts, line in lines if (w := perf_window(line)) and w[2] > SLOW_MS]
    loop_times = [t for t, _ in loop_samples]
    by_loop = sum(overlaps(loop_samples, loop_times, ts - 0.1, ts, SLOW_MS) for ts, _ in slow)
    busy = sum(
        per_second.get(int(ts - t0), {}).get("client", 0) >= 0.9 * (len(pin[1]) if pin else os.cpu_count())
        for ts, _ in slow
    )
    print(
        f"  100 ms windows with a record over {SLOW_MS} ms: {len(slow)}; with a loop probe over {SLOW_MS} ms in "
        f"them: {by_loop}; in a second where the client used 90% or more of its CPUs: {busy}"
    )
    return 0


def in_process(args) -> None:
    import collections
    import gc
    import tempfile
    import traceback

    from confluent_kafka.admin import AdminClient, NewTopic

    from kafkawire.broker.config import BrokerConfig
    from kafkawire.broker.server import start_in_thread

    real_pwritev = os.pwritev
    writes: list[float] = []

    def timed_pwritev(*a):
        t = time.perf_counter()
        try:
            return real_pwritev(*a)
        finally:
            writes.append((time.perf_counter() - t) * 1000)

    def run(freeze: bool) -> None:
        with tempfile.TemporaryDirectory() as data:
            broker = start_in_thread(BrokerConfig(port=0, storage="segments", data_dir=data))
            loop, tid = broker.loop, broker._thread.ident
            bootstrap = "%s:%d" % broker.address
            beat = [time.perf_counter()]

            def tick():
                beat[0] = time.perf_counter()
                loop.call_later(0.001, tick)

            pauses: list[tuple[float, int]] = []
            began = [0.0]

            def on_gc(phase, info):
                if threading.get_ident() == tid:
                    if phase == "start":
                        began[0] = time.perf_counter()
                    else:
                        pauses.append(((time.perf_counter() - began[0]) * 1000, info["generation"]))

            stacks: collections.Counter = collections.Counter()
            stop = threading.Event()

            def watch():
                while not stop.is_set():
                    time.sleep(0.002)
                    if time.perf_counter() - beat[0] > 0.010:
                        frame = sys._current_frames().get(tid)
                        where = traceback.extract_stack(frame)[-3:] if frame is not None else []
                        stacks[" < ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(where))] += 1

            try:
                admin = AdminClient({"bootstrap.servers": bootstrap})
                admin.create_topics([NewTopic("tail", 1, 1)])["tail"].result(30)
                produce(bootstrap, "tail", 500, 1.0, args.acks)  # warm-up
                if freeze:
                    gc.freeze()
                loop.call_soon_threadsafe(tick)
                gc.callbacks.append(on_gc)
                os.pwritev = timed_pwritev
                writes.clear()
                watcher = threading.Thread(target=watch, daemon=True)
                watcher.start()
                records = produce(bootstrap, "tail", args.rate, args.seconds, args.acks)
            finally:
                stop.set()
                os.pwritev = real_pwritev
                if on_gc in gc.callbacks:
                    gc.callbacks.remove(on_gc)
                broker.stop()
                gc.unfreeze()
            lat = [ms for _, ms in records]
            print(
                f"{'with' if freeze else 'without'} gc.freeze(): produce p50 {percentile(lat, 0.5):.2f} ms "
                f"p99 {percentile(lat, 0.99):.2f} ms max {max(lat):.2f} ms; load average {os.getloadavg()[0]:.1f}"
            )
            gen2 = [ms for ms, g in pauses if g == 2]
            print(
                f"  collections on the loop thread: {len(pauses)}, longest {max((ms for ms, _ in pauses), default=0):.2f}"
                f" ms, total {sum(ms for ms, _ in pauses):.1f} ms; gen 2: {len(gen2)}, longest {max(gen2, default=0):.2f} ms"
            )
            print(
                f"  segment writes (pwritev, on the loop for acks=1): {len(writes):,}, p99 {percentile(writes, 0.99):.3f}"
                f" ms, longest {max(writes, default=0):.2f} ms, over {SLOW_MS} ms: {sum(w > SLOW_MS for w in writes)}"
            )
            print(f"  loop stalls over 10 ms, sampled every 2 ms: {sum(stacks.values())}; where the loop thread was:")
            for where, n in stacks.most_common(5):
                print(f"    {n:4}  {where}")

    for freeze in (False, True):
        run(freeze)


def started(broker, pin):
    """``broker`` started on --pin's broker CPUs (this process back on the generator CPUs after), or unpinned."""
    import bench_broker

    with bench_broker.on_broker_cpus(pin):
        broker.start()
    return broker


def _parse_pin(text: str):
    import bench_broker

    return bench_broker.parse_pin(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--py-spy", type=Path, help="record the broker with py-spy into this speedscope file")
    parser.add_argument("--in-process", action="store_true", help="look inside the stalls (see the docstring)")
    parser.add_argument("--generator", choices=("librdkafka", "perf"), default="librdkafka")
    parser.add_argument("--pin", type=_parse_pin, metavar="BROKER_CPUS:GENERATOR_CPUS", help="as bench_broker.py --pin")
    parser.add_argument("--broker", choices=("kafkawire", "kafka"), default="kafkawire", help="perf only")
    parser.add_argument("--warmup", type=float, default=None, help="perf only: seconds of warm-up records")
    args = parser.parse_args()
    if args.generator == "perf":
        import bench_broker

        args.warmup = bench_broker.PERF_LATENCY_WARMUP_S if args.warmup is None else args.warmup
        return perf_run(args)
    if args.in_process:
        print(f"2 cores shared with others; load average {os.getloadavg()}", flush=True)
        in_process(args)
        return 0

    from confluent_kafka.admin import AdminClient, NewTopic

    print(f"2 cores shared with others; load average {os.getloadavg()}", flush=True)
    with contextlib.closing(started(BrokerProcess("kafkawire", storage="disk"), args.pin)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("tail", 1, 1)])["tail"].result(30)
        produce(broker.bootstrap, "tail", 500, 1.0, args.acks)  # warm-up: connections, first segment
        spy = None
        if args.py_spy:
            spy = subprocess.Popen(
                [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(broker.proc.pid), "--format",
                 "speedscope", "--output", str(args.py_spy), "--rate", "500", "--nonblocking"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        stop = threading.Event()
        loop_samples: list = []
        host_samples: list = []
        threads = [
            threading.Thread(target=loop_probe, args=(("127.0.0.1", broker.port), stop, loop_samples), daemon=True),
            threading.Thread(target=host_probe, args=(stop, host_samples), daemon=True),
        ]
        for t in threads:
            t.start()
        try:
            records = produce(broker.bootstrap, "tail", args.rate, args.seconds, args.acks)
        finally:
            stop.set()
            for t in threads:
                t.join(10)
            if spy is not None:
                spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
                spy.wait(30)
    lat = [ms for _, ms in records]
    loop_ms = [ms for _, ms in loop_samples]
    host_ms = [ms for _, ms in host_samples]
    print(f"produce {len(records):,} records at {args.rate}/s acks={args.acks} (segments engine, no fsync per write)")
    for name, values in (("produce latency", lat), ("loop probe RTT", loop_ms), ("host probe late", host_ms)):
        print(
            f"  {name:16} p50 {percentile(values, 0.5):7.2f} ms  p99 {percentile(values, 0.99):7.2f} ms  "
            f"max {max(values, default=float('nan')):7.2f} ms  ({len(values):,} samples)"
        )
    loop_times = [t for t, _ in loop_samples]
    host_times = [t for t, _ in host_samples]
    slow = [(t, ms) for t, ms in records if ms > SLOW_MS]
    by_loop = sum(overlaps(loop_samples, loop_times, t, t + ms / 1000, SLOW_MS) for t, ms in slow)
    by_host = sum(overlaps(host_samples, host_times, t, t + ms / 1000, SLOW_MS) for t, ms in slow)
    print(
        f"records over {SLOW_MS} ms: {len(slow)} ({len(slow) / max(1, len(records)):.2%}); with a loop probe "
        f"over {SLOW_MS} ms in their interval: {by_loop}; with this process woken over {SLOW_MS} ms late: {by_host}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
