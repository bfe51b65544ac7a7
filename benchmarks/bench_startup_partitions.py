"""Start-up time of `kafkawire serve` on a data directory of many partitions and many bytes of segments.

Builds a data directory (the segments engine, so also a Kafka data directory: KRaft metadata log,
partition.metadata) holding one topic of --partitions partitions and --gb GiB of records, in segments of
--segment-mib MiB, so that nearly all of it sits in sealed segments. Then times `kafkawire serve` from spawn
to its first answered ApiVersions (kafkawire.testing's launcher), --runs times, and the same for an empty
directory of the same partitions: the ratio shows what the bytes cost. Start-up replays the metadata log and
opens each partition's active segment; sealed segments are opened lazily, so the target is under 2 s
whatever --gb is. With --kafka, Kafka 4.4 starts on the same directory afterwards (twice: after kafkawire's
clean stop, then after Kafka's own) and the ratios are printed.

    python benchmarks/bench_startup_partitions.py                   # 1,000 partitions, 1 GiB (quick)
    python benchmarks/bench_startup_partitions.py --gb 10 --kafka   # the documented full run (~12 GB of disk)

The directory is deleted at the end (--keep keeps it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kafkawire.protocol.records import build_batch

RECORD = 4096
RECORDS_PER_BATCH = 256  # 1 MiB batches


def build(data_dir: Path, partitions: int, gib: float, segment_mib: int) -> tuple[float, int]:
    from kafkawire.broker.storage.base import NewTopic
    from kafkawire.broker.storage.segments import SegmentStorage

    t = time.monotonic()
    storage = SegmentStorage(data_dir, {"kafkawire.log.fsync.acks.all": "false"})
    (meta,) = storage.create_topics(
        [NewTopic("wide", partitions, {"segment.bytes": str(segment_mib * 1024 * 1024), "retention.ms": "-1"})]
    )
    if not hasattr(meta, "partitions"):
        raise meta
    batch = build_batch([(None, os.urandom(RECORD)) for _ in range(RECORDS_PER_BATCH)])
    total = int(gib * 1024**3)
    written = 0
    p = 0
    while written < total:
        storage.partition("wide", p % partitions).append(batch)
        written += len(batch)
        p += 1
    for p in range(partitions):  # at least one batch everywhere: every active segment has records
        storage.partition("wide", p).append(build_batch([(None, b"tail-%d" % p)]))
    storage.close()
    return time.monotonic() - t, written


def time_kafkawire(data_dir: Path, runs: int) -> list[float]:
    from kafkawire.testing import KafkaBroker

    out = []
    for _ in range(runs):
        broker = KafkaBroker(storage="segments", data_dir=data_dir, config={"node.id": "1"}, start_timeout=600)
        t = time.monotonic()
        broker.start()
        out.append(time.monotonic() - t)
        broker.stop()
    return out


def time_kafka(root: Path) -> list[float]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    from kafka_reference import ReferenceKafka

    out = []
    for _ in range(2):
        kafka = ReferenceKafka(root, heap="1g")
        t = time.monotonic()
        kafka.start(timeout=1800)
        out.append(time.monotonic() - t)
        kafka.stop()
    return out


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--gb", type=float, default=1.0, help="GiB of records to write (default 1; the full run is 10)")
    ap.add_argument("--segment-mib", type=int, default=8, help="segment.bytes of the topic, MiB (default 8)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kafka", action="store_true", help="also time Kafka 4.4 starting on the same directory")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="bench-startup-partitions-"))
    try:
        empty_dir = root / "empty" / "logs"
        full_dir = root / "full" / "logs"
        build(empty_dir, args.partitions, 0, args.segment_mib)
        took, written = build(full_dir, args.partitions, args.gb, args.segment_mib)
        os.sync()  # the build's dirty pages written back now, not during (and into) the first timed start
        print(
            f"built: {args.partitions} partitions, {written / 1024**3:.2f} GiB of records in {args.segment_mib} MiB "
            f"segments ({du(full_dir) / 1024**3:.2f} GiB on disk) in {took:.1f} s"
        )
        empty = time_kafkawire(empty_dir, args.runs)
        full = time_kafkawire(full_dir, args.runs)
        e, f = statistics.median(empty), statistics.median(full)
        print(
            f"kafkawire serve, {args.partitions} partitions, empty:     median {e:.2f} s  runs {[round(x, 2) for x in empty]}"
        )
        print(
            f"kafkawire serve, {args.partitions} partitions, {args.gb:g} GiB: median {f:.2f} s  runs {[round(x, 2) for x in full]}"
        )
        print(f"ratio {args.gb:g} GiB / empty: {f / e:.2f}  (target: start under 2 s, independent of the bytes)")
        if args.kafka:
            first, clean = time_kafka(root / "full")
            print(
                f"Kafka 4.4 on the same directory: first start {first:.2f} s (after kafkawire's clean stop), "
                f"after its own clean stop {clean:.2f} s"
            )
            print(f"ratio kafkawire / Kafka (clean start): {f / clean:.2f}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
