"""Storage engine throughput: append MB/s of 16 KiB batches (durable and not) and read MB/s.

    python benchmarks/bench_storage.py [--quick] [--dir PATH] [--engine segments|memory]

Durable appends fsync every batch (acks=all with kafkawire's default policy),
so their figure is bounded by the disk's fsync latency, not by Python.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import tempfile
import time

from crc32c import crc32c

from kafkawire.broker.storage.memory import MemoryStorage
from kafkawire.broker.storage.segments import SegmentStorage

BATCH_SIZE = 16 * 1024


def make_batch(size: int = BATCH_SIZE, records: int = 16) -> bytes:
    """A valid v2 batch of exactly ``size`` bytes: ``records`` records of equal-sized values."""

    def varint(v: int) -> bytes:
        v = (v << 1) ^ (v >> 63)
        out = bytearray()
        while v >= 0x80:
            out.append(v & 0x7F | 0x80)
            v >>= 7
        out.append(v)
        return bytes(out)

    def build(value_len: int) -> bytes:
        recs = b""
        for i in range(records):
            body = b"\x00" + varint(0) + varint(i) + varint(-1) + varint(value_len) + b"v" * value_len + varint(0)
            recs += varint(len(body)) + body
        after_crc = (
            struct.pack(">hiqqqhii", 0, records - 1, 1_700_000_000_000, 1_700_000_000_000, -1, -1, -1, records) + recs
        )
        body = struct.pack(">ibI", 0, 2, crc32c(after_crc)) + after_crc
        return struct.pack(">qi", 0, len(body)) + body

    value_len = (size - 61) // records - 8
    while len(build(value_len)) < size:
        value_len += 1
    while len(build(value_len)) > size:
        value_len -= 1
    return build(value_len)  # within a few bytes of size; exactness does not matter for throughput


def bench(engine: str, directory: str, total_bytes: int, durable_bytes: int) -> dict[str, float]:
    props = {"log.segment.bytes": str(256 * 1024 * 1024)}
    storage = SegmentStorage(directory, props) if engine == "segments" else MemoryStorage(props)
    try:
        storage.create_topic("bench", 1)
        storage.create_topic("bench-durable", 1)
        batch = make_batch()
        out = {}

        log = storage.partition("bench", 0)
        n = total_bytes // len(batch)
        t0 = time.perf_counter()
        for _ in range(n):
            log.append(batch)
        elapsed = time.perf_counter() - t0
        out["append MB/s"] = n * len(batch) / elapsed / 1e6
        out["append batches/s"] = n / elapsed

        durable = storage.partition("bench-durable", 0)
        m = max(1, durable_bytes // len(batch))
        t0 = time.perf_counter()
        for _ in range(m):
            durable.append(batch, durable=True)
        elapsed = time.perf_counter() - t0
        out["durable append MB/s"] = m * len(batch) / elapsed / 1e6
        out["durable appends/s"] = m / elapsed

        # acks=all from several producers at once: concurrent durable appends share fsyncs
        import threading

        per_thread = max(1, m // 4)

        def produce():
            for _ in range(per_thread):
                durable.append(batch, durable=True)

        threads = [threading.Thread(target=produce) for _ in range(4)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        out["durable appends/s (4 threads)"] = 4 * per_thread / elapsed

        # Reads hand out views without copying; copying them into a buffer stands in for the
        # socket write that follows, so both figures are shown.
        sink = bytearray(2 << 20)
        end = log.log_end_offset
        for label, max_bytes, copy in (
            ("read MB/s (1 MiB, views only)", 1 << 20, False),
            ("read MB/s (1 MiB, views copied)", 1 << 20, True),
            ("read MB/s (16 KiB, views copied)", BATCH_SIZE, True),
        ):
            offset, read, t0 = 0, 0, time.perf_counter()
            while offset < end:
                result = log.read(offset, max_bytes)
                pos = 0
                for chunk in result.chunks:
                    if copy:
                        sink[pos : pos + len(chunk)] = chunk
                    pos += len(chunk)
                read += result.size
                offset += result.size // len(batch) * 16
            elapsed = time.perf_counter() - t0
            out[label] = read / elapsed / 1e6

        # a consumer tailing a producer: each read sees the batch just appended
        tail = storage.partition("bench-durable", 0)
        k = min(n, 5000)
        t0 = time.perf_counter()
        for _ in range(k):
            first = tail.append(batch).base_offset
            tail.read(first, 1 << 20)
        out["append+tail-read pairs/s"] = k / (time.perf_counter() - t0)

        # random-offset lookups: index search + header scan
        import random

        rng = random.Random(1)
        k = 20_000
        t0 = time.perf_counter()
        for _ in range(k):
            log.read(rng.randrange(end), 1)
        out["random-offset reads/s"] = k / (time.perf_counter() - t0)
        if engine == "segments":
            # restart: sealed segments are sanity-checked, the active one CRC-checked batch by batch
            active = storage.partition("bench", 0).segments[-1].size
            storage.close()
            t0 = time.perf_counter()
            storage = SegmentStorage(directory, props)
            elapsed = time.perf_counter() - t0
            out["restart s"] = elapsed
            out["restart MB/s (active segment)"] = active / elapsed / 1e6
        return out
    finally:
        storage.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small run (seconds), for CI smoke checks")
    parser.add_argument("--dir", help="data directory (default: a temporary one)")
    parser.add_argument("--engine", choices=["segments", "memory"], default="segments")
    args = parser.parse_args(argv)
    total = 64 * 1024 * 1024 if args.quick else 1024 * 1024 * 1024
    durable = 4 * 1024 * 1024 if args.quick else 64 * 1024 * 1024
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        results = bench(args.engine, os.path.join(tmp, "data"), total, durable)
    print(f"engine={args.engine} batch={BATCH_SIZE} B appended={total >> 20} MiB durable={durable >> 20} MiB")
    for key, value in results.items():
        print(f"  {key:32s} {value:12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
