"""Starting from a KRaft metadata snapshot against replaying the whole metadata log.

Builds a metadata log (``storage/kraft``, in this process: no broker, no sockets) of --topics topics with 4
partitions each, --rounds rounds of a config change on every topic and --restarts restarts (every partition left
leaderless, then elected), then measures CPU time (``time.process_time``) of:

- ``log``: loading it as kafkawire did before snapshots, every record replayed;
- ``write``: writing one snapshot of the image (what the snapshot thread does);
- ``snapshot``: loading it again, from that snapshot alone (nothing after it).

Printed: the log's and the snapshot's sizes, CPU ms of each, and the ratio log / snapshot. Both loads are
checked to give the same image.

    python benchmarks/bench_metadata_snapshot.py                    # 500 topics x 20 rounds x 5 restarts
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid

from kafkawire.broker.storage.base import TopicMeta
from kafkawire.broker.storage.kraft import METADATA_DIR, MetadataLog

DIRECTORY_ID = uuid.UUID(int=7)


def build(data_dir: str, topics: int, rounds: int, restarts: int) -> None:
    log = MetadataLog(data_dir, 1, DIRECTORY_ID).load()
    log.configure({"metadata.log.max.record.bytes.between.snapshots": str(1 << 40)})  # none but the measured one
    wanted = {f"t{j}": TopicMeta(f"t{j}", uuid.UUID(int=100 + j), 4, {}) for j in range(topics)}
    log.save_topics(wanted)
    for i in range(rounds):
        for name, meta in wanted.items():
            wanted[name] = TopicMeta(name, meta.topic_id, 4, {"retention.ms": str(1000 + i)})
        log.save_topics(wanted)
    for _ in range(restarts):
        log.resign_leaders()
        log.elect_leaders()


def load(data_dir: str) -> tuple[float, MetadataLog]:
    started = time.process_time()
    log = MetadataLog(data_dir, 1, DIRECTORY_ID).load(repair=False)
    return time.process_time() - started, log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--restarts", type=int, default=5)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="bench-metadata-snapshot-")
    try:
        build(data_dir, args.topics, args.rounds, args.restarts)
        replay, whole = load(data_dir)
        started = time.process_time()
        path = whole.snapshot()
        write = time.process_time() - started
        from_snapshot, snapped = load(data_dir)
        assert snapped.snapshot_offset == whole.end_offset
        assert snapped.image.snapshot_records() == whole.image.snapshot_records()
        directory = os.path.join(data_dir, METADATA_DIR)
        size = sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory) if n.endswith(".log"))
        print(f"metadata log: {whole.end_offset} records, {size} bytes; snapshot {os.path.getsize(path)} bytes")
        print(f"log       {replay * 1000:8.1f} CPU ms (every record replayed)")
        print(f"write     {write * 1000:8.1f} CPU ms (one snapshot)")
        print(f"snapshot  {from_snapshot * 1000:8.1f} CPU ms (the snapshot alone)")
        print(f"ratio log / snapshot: {replay / from_snapshot:.1f}")
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
