#!/usr/bin/env python3
"""Transactional produce and read_committed consume throughput, on kafkawire and the reference Kafka 4.4 in
the same run.

One librdkafka (confluent-kafka) transactional producer writes ``--records`` records of ``--size`` bytes to a
fresh one-partition topic in transactions of 100 and of 10,000 records (linger.ms=5, acks=all as
transactions require; timed from the first ``begin_transaction`` to the last ``commit_transaction``;
``init_transactions`` not timed). Every tenth transaction is aborted (after its records reached the log),
so the read side has aborted data to skip. Then one read_committed consumer reads the topic from offset 0
until it has every committed record.

Targets, one after the other, never together:

* ``kafkawire``: ``kafkawire serve`` on the segments (disk) engine with its default durability: an fsync
  before each acks=all Produce answer and on each ``__transaction_state`` change;
* ``kafkawire-nofsync``: the same with ``kafkawire.acks.all.fsync=false`` and
  ``kafkawire.transactions.fsync=false``: the page cache only, as Kafka's defaults (no flush);
* ``kafka``: Apache Kafka 4.4 (tools/kafka_reference.py), one KRaft node.

Usage: python benchmarks/bench_transactions.py [--quick] [--records N] [--size B] [--repeat N]
           [--targets kafkawire,kafkawire-nofsync,kafka]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "src"))

TXN_SIZES = (100, 10_000)
ABORT_EVERY = 10


def produce(bootstrap: str, topic: str, records: int, per_txn: int, size: int) -> tuple[float, float, int]:
    """(records/s, transactions/s, committed records) of one transactional producer."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-{topic}",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 200_000,
        }
    )
    p.init_transactions(60)
    value = os.urandom(size)
    txns = max(1, records // per_txn)
    committed = 0
    started = time.perf_counter()
    for t in range(txns):
        p.begin_transaction()
        for _ in range(per_txn):
            while True:
                try:
                    p.produce(topic, value, partition=0)
                    break
                except BufferError:
                    p.poll(0.005)
        if t % ABORT_EVERY == ABORT_EVERY - 1:
            p.flush(120)  # into the log, then aborted: read_committed must skip it
            p.abort_transaction(120)
        else:
            p.commit_transaction(120)
            committed += per_txn
    elapsed = time.perf_counter() - started
    return txns * per_txn / elapsed, txns / elapsed, committed


def consume(bootstrap: str, topic: str, committed: int) -> float:
    """records/s of a read_committed consumer reading ``committed`` records from offset 0."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-" + topic,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.max.bytes": 52_428_800,
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got = 0
        started = time.perf_counter()
        deadline = time.monotonic() + 300
        while got < committed and time.monotonic() < deadline:
            for m in c.consume(10_000, 1.0):
                if not m.error():
                    got += 1
        elapsed = time.perf_counter() - started
    finally:
        c.close()
    if got != committed:
        raise RuntimeError(f"read_committed read {got} records, {committed} were committed")
    return committed / elapsed


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)


def start(target: str, workdir: Path):
    if target == "kafka":
        from kafka_reference import ReferenceKafka

        return ReferenceKafka(workdir / "kafka").start()
    from kafkawire.testing import KafkaBroker

    config = {}
    if target == "kafkawire-nofsync":
        config = {"kafkawire.acks.all.fsync": "false", "kafkawire.transactions.fsync": "false"}
    return KafkaBroker(storage="segments", data_dir=workdir / target, config=config).start()


def stop(broker) -> None:
    (broker.close if hasattr(broker, "close") else broker.stop)()


def run_target(target: str, args, workdir: Path) -> dict:
    broker = start(target, workdir)
    try:
        out = {}
        for per_txn in TXN_SIZES:
            rates, txn_rates, reads = [], [], []
            for _ in range(args.repeat):
                topic = f"bench-txn-{per_txn}-{uuid.uuid4().hex[:8]}"
                create_topic(broker.bootstrap, topic)
                records = max(args.records, per_txn * ABORT_EVERY)  # an aborted one among them
                rps, tps, committed = produce(broker.bootstrap, topic, records, per_txn, args.size)
                rates.append(rps)
                txn_rates.append(tps)
                reads.append(consume(broker.bootstrap, topic, committed))
            out[per_txn] = (statistics.median(rates), statistics.median(txn_rates), statistics.median(reads))
        return out
    finally:
        stop(broker)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--records",
        type=int,
        default=100_000,
        help="records per run (10,000-record transactions: at least 10 transactions)",
    )
    ap.add_argument("--size", type=int, default=100, help="value bytes")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--targets", default="kafkawire,kafkawire-nofsync,kafka")
    ap.add_argument("--quick", action="store_true", help="20,000 records, 100-byte values")
    args = ap.parse_args()
    if args.quick:
        args.records, args.size = 20_000, 100
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-transactions-") as tmp:
        for target in targets:
            print(f"... {target}", file=sys.stderr, flush=True)
            results[target] = run_target(target, args, Path(tmp))
    print(
        f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.2f}; {args.records} records of {args.size} B "
        f"per run, every {ABORT_EVERY}th transaction aborted, median of {args.repeat}"
    )
    print(f"{'target':<18} {'records/txn':>11} {'produce rec/s':>14} {'txn/s':>9} {'read_committed rec/s':>21}")
    for target, rows in results.items():
        for per_txn, (rps, tps, read) in rows.items():
            print(f"{target:<18} {per_txn:>11,} {rps:>14,.0f} {tps:>9,.1f} {read:>21,.0f}")
    if "kafka" in results:
        for target in (t for t in results if t != "kafka"):
            for per_txn, (rps, tps, read) in results[target].items():
                k = results["kafka"][per_txn]
                print(
                    f"{target} / kafka at {per_txn:,} records/txn: produce {rps / k[0]:.2f}x, "
                    f"transactions {tps / k[1]:.2f}x, read_committed {read / k[2]:.2f}x"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
