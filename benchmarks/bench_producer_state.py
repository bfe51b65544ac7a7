"""Rebuilding idempotent producers' state after a restart: from producer snapshots against a rescan of the log.

Builds a data directory (segments engine) of --partitions partitions in which --producers idempotent
producers per partition each append --batches one-record batches (the produce path's append + record, in this
process: no broker, no sockets), stops cleanly (a snapshot of every producer at each log end), reopens it and
rebuilds every partition's state three ways, in the same run, measuring CPU time (``time.process_time``):

- ``snapshot``: what a start after a clean stop does: the snapshot at the log end, nothing replayed;
- ``crash``: the snapshot of the last roll and the log after it (the clean stop's snapshot removed first);
- ``rescan``: kafkawire before producer snapshots held every producer: the last 20,000 offsets / 16 MiB of
  each log read again (``ensure_loaded`` without a snapshot; producers older than that window are not found).

Printed: CPU ms per partition and per 1,000 producers for each, how many producers each found, the ratio
rescan / snapshot, and the CPU time of writing one snapshot of every producer (a roll's cost).

    python benchmarks/bench_producer_state.py                       # 8 partitions x 2,000 producers x 5 batches
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


def build(data_dir: Path, partitions: int, producers: int, batches: int, roll_every: int) -> None:
    from kafkawire.broker.producer_state import BatchMeta, ProducerStateManager
    from kafkawire.broker.storage.base import NewTopic
    from kafkawire.broker.storage.segments import SegmentStorage
    from kafkawire.protocol.records import build_batch

    storage = SegmentStorage(data_dir, {"kafkawire.log.fsync.acks.all": "false"})
    manager = ProducerStateManager()
    storage.producer_state = manager
    (meta,) = storage.create_topics([NewTopic("idem", partitions, {"retention.ms": "-1"})])
    pids = [manager.allocate()[0] for _ in range(producers)]
    for p in range(partitions):
        plog = storage.partition("idem", p)
        manager.ensure_loaded("idem", p, plog)
        n = 0
        for seq in range(batches):
            for pid in pids:
                data = build_batch([(None, b"x" * 100)], producer_id=pid, producer_epoch=0, base_sequence=seq)
                result = plog.append(data)
                ts = int(time.time() * 1000)
                manager.record("idem", p, pid, 0, BatchMeta(seq, seq, result.base_offset, result.last_offset, ts, -1))
                n += 1
                if n % roll_every == 0:
                    plog.roll()
    storage.close()


def rebuild(data_dir: Path, partitions: int, how: str) -> tuple[float, int, int]:
    """(CPU seconds, producers found, batches replayed) of rebuilding every partition's state."""
    from kafkawire.broker.producer_state import ProducerStateManager
    from kafkawire.broker.storage.segments import SegmentStorage

    storage = SegmentStorage(data_dir)
    try:
        manager = ProducerStateManager()
        plogs = [storage.partition("idem", p) for p in range(partitions)]
        t = time.process_time()
        for p, plog in enumerate(plogs):
            if how == "rescan":
                manager._load(("idem", p), plog, None)  # the path a log without snapshots takes
            else:
                manager.ensure_loaded("idem", p, plog)
        took = time.process_time() - t
        found = sum(len(manager.active("idem", p)) for p in range(partitions))
        return took, found, manager.replayed_batches
    finally:
        storage._release()  # no close: a close would write new snapshots


def snapshot_write_cost(data_dir: Path) -> tuple[float, int]:
    """CPU seconds of writing one partition's snapshot of every producer (no fsync), and its producers."""
    from kafkawire.broker.producer_state import ProducerStateManager
    from kafkawire.broker.storage import snapshot
    from kafkawire.broker.storage.segments import SegmentStorage

    storage = SegmentStorage(data_dir)
    try:
        manager = ProducerStateManager()
        plog = storage.partition("idem", 0)
        manager.ensure_loaded("idem", 0, plog)
        runs = 20
        t = time.process_time()
        for _ in range(runs):
            entries = manager.snapshot_entries("idem", 0, plog, plog.log_end_offset + 1)
            snapshot.write_entries(str(Path(plog.directory)), plog.log_end_offset + 1, entries, fsync=False)
        took = (time.process_time() - t) / runs
        snapshot.delete(plog.directory, plog.log_end_offset + 1)
        return took, len(entries)
    finally:
        storage._release()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--producers", type=int, default=2000, help="idempotent producers per partition")
    ap.add_argument("--batches", type=int, default=5, help="batches per producer and partition")
    ap.add_argument("--roll-every", type=int, default=4000, help="batches per segment (a roll, a snapshot)")
    args = ap.parse_args(argv)

    from kafkawire.broker.storage import snapshot

    root = Path(tempfile.mkdtemp(prefix="bench-producer-state-"))
    try:
        t = time.monotonic()
        build(root, args.partitions, args.producers, args.batches, args.roll_every)
        print(
            f"built: {args.partitions} partitions x {args.producers} producers x {args.batches} batches "
            f"in {time.monotonic() - t:.1f} s; load average {os.getloadavg()[0]:.1f}"
        )
        per_k = args.partitions * args.producers / 1000
        results = {}
        for how in ("snapshot", "rescan", "crash"):
            if how == "crash":  # what a crash leaves: no snapshot at the log end, the rolls' ones
                for p in range(args.partitions):
                    directory = str(root / f"idem-{p}")
                    snapshot.delete(directory, snapshot.offsets(directory)[-1])
            took, found, replayed = rebuild(root, args.partitions, how)
            results[how] = took
            print(
                f"{how:8s}: {took * 1000 / args.partitions:8.2f} CPU ms per partition, "
                f"{took * 1000 / per_k:7.2f} per 1,000 producers; {found} producers found, {replayed} batches replayed"
            )
        print(f"ratio rescan / snapshot (CPU): {results['rescan'] / results['snapshot']:.1f}")
        took, n = snapshot_write_cost(root)
        print(f"one snapshot of {n} producers written: {took * 1000:.2f} CPU ms (no fsync)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
