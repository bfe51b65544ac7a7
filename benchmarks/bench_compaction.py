#!/usr/bin/env python3
"""Log compaction throughput: kafkawire's cleaner (``storage/cleaner.py``) against Kafka 4.4's on the same data,
in one run, ratio printed.

The same keyed workload (``--records`` records of ``--size``-byte values over ``--keys`` keys, uncompressed,
written by one librdkafka producer with linger.ms=5) goes into a one-partition compacted topic with
segment.bytes=1 MiB on each target; then one cleaning pass over everything below the active segment is timed:

* ``kafka``: Apache Kafka 4.4 (tools/kafka_reference.py) with log.cleaner.backoff.ms=500 and
  min.cleanable.dirty.ratio=0.01 cleans it by itself once min.compaction.lag.ms (an hour while the data is
  written) is set to 0; its own log line ("N MB of log processed in T seconds
  (X MB/sec)") gives the figure;
* ``kafkawire``: ``kafkawire serve`` (segments engine, its cleaner off) takes the writes and stops; then
  ``Cleaner.clean_partition`` runs on its data directory in this process, and the same quantity is computed:
  bytes of log read by the cleaning phase over the whole pass's time (map building included), in MiB/s.

Both figures count the same thing (Kafka's ``CleanerStats.bytesRead`` over ``elapsedSecs``). Records kept and
the size after cleaning are printed for both. The machine may be shared: figures come from one run, one
target after the other.

Usage: python benchmarks/bench_compaction.py [--quick] [--records N] [--keys K] [--size B]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "src"))

TOPIC = "bench-compaction"
# nothing is cleanable while the data is written (min.compaction.lag.ms an hour), so that one pass covers it all
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(1 << 20),
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "3600000",
}
_KAFKA_STATS = re.compile(
    r"cleaned log " + TOPIC + r"-0 .*?([\d,.]+) MB of log processed in ([\d,.]+) seconds \(([\d,.]+) MB/sec\)"
    r".*?End size: ([\d,.]+) MB \(([\d,]+) messages\)",
    re.S,
)


def workload(records: int, keys: int, size: int, seed: int = 1):
    rng = random.Random(seed)
    for _ in range(records):
        key = f"key-{rng.randrange(keys):08d}".encode()
        yield key, rng.randbytes(size)


def produce(bootstrap: str, args) -> float:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config=TOPIC_CONFIGS)])[TOPIC].result(60)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    t0 = time.perf_counter()
    for key, value in workload(args.records, args.keys, args.size):
        while True:
            try:
                producer.produce(TOPIC, value, key)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0
    return time.perf_counter() - t0


def make_cleanable(bootstrap: str) -> None:
    """min.compaction.lag.ms to 0: the whole log below the active segment becomes cleanable at once."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        TOPIC,
        incremental_configs=[ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(60)


def run_kafka(args) -> dict:
    from kafka_reference import ReferenceKafka

    work = Path(tempfile.mkdtemp(prefix="bench-compaction-kafka-"))
    kafka = ReferenceKafka(work, config={"log.cleaner.backoff.ms": 500, "log.cleaner.min.cleanable.ratio": 0.01})
    kafka.start()
    try:
        produce(kafka.bootstrap, args)
        make_cleanable(kafka.bootstrap)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            m = _KAFKA_STATS.search(kafka.log_path.read_text(errors="replace"))
            if m:
                num = [float(x.replace(",", "")) for x in m.groups()]
                return {"mb": num[0], "seconds": num[1], "mb_per_s": num[2], "end_mb": num[3], "kept": int(num[4])}
            time.sleep(0.5)
        raise RuntimeError(f"Kafka logged no cleaning of {TOPIC}-0 in 600 s (see {kafka.log_path})")
    finally:
        kafka.close()


def run_kafkawire(args) -> dict:
    from kafkawire.broker.storage import cleaner
    from kafkawire.broker.storage.segments import SegmentStorage
    from kafkawire.testing import KafkaBroker

    data = Path(tempfile.mkdtemp(prefix="bench-compaction-kafkawire-"))
    broker = KafkaBroker(storage="segments", data_dir=data, config={"log.cleaner.enable": "false"})
    broker.start()
    try:
        produce(broker.bootstrap, args)
    finally:
        broker.stop()
    storage = SegmentStorage(data)
    try:
        storage.set_topic_configs(TOPIC, {"min.compaction.lag.ms": "0"})
        plog = storage.partition(TOPIC, 0)
        stats = cleaner.Cleaner(str(data)).clean_partition(plog, plog._settings(), force=True)
        mb = stats.bytes_read / (1 << 20)
        return {
            "mb": mb,
            "seconds": stats.elapsed_s,
            "mb_per_s": mb / stats.elapsed_s,
            "end_mb": stats.bytes_written / (1 << 20),
            "kept": stats.records_kept,
        }
    finally:
        storage.close()
        import shutil

        shutil.rmtree(data, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--keys", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="60,000 records over 10,000 keys")
    args = ap.parse_args(argv)
    if args.quick:
        args.records, args.keys = 60_000, 10_000
    print(f"{args.records} records of {args.size} B over {args.keys} keys; machine shared, one run (pid {os.getpid()})")
    results = {"kafkawire": run_kafkawire(args), "kafka": run_kafka(args)}
    for name, r in results.items():
        print(
            f"{name:10s} {r['mb']:8.1f} MiB cleaned in {r['seconds']:6.2f} s = {r['mb_per_s']:7.1f} MiB/s; "
            f"after: {r['end_mb']:6.1f} MiB, {r['kept']} records"
        )
    print(f"ratio kafkawire/kafka: {results['kafkawire']['mb_per_s'] / results['kafka']['mb_per_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
