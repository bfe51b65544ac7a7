#!/usr/bin/env python3
"""CPU per batch of the broker's produce record check alone, per batch shape, and old/new ratios.

The broker reads every record of every produced batch before appending it (``validation._check_records``:
decompress when compressed, then ``walk.unreadable``). Its cost is a fixed part per batch and a part per
record; librdkafka sends many small batches, so the fixed part matters. This times the check on batches of
1, 10, 100 and 1000 records of 100 B and 1 KiB values, uncompressed and lz4 (keys ``k<n>``, timestamps one ms
apart every 50 records, no headers, as a producer builds them; and batches of 1,000 and 9,000 records whose
keys vary in length as a keyed partition's do), and splits each codec/size into a fixed cost
per batch and a cost per record (a line through the 1- and 1000-record figures).

Figures are thread CPU time (min over repeats), microseconds per batch. With ``--kafkawire-src PATH`` (a git
worktree of an older commit, its ``src``) the same shapes are timed in a subprocess importing that tree, and
each row prints old/new (above 1: the current tree spends less).

Usage: python benchmarks/bench_record_check.py [--kafkawire-src PATH] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

COUNTS = (1, 10, 100, 1000)
SIZES = (100, 1024)
CODECS = ("none", "lz4")
TS = 1_700_000_000_000


# keys as one partition of a keyed topic sees them: ``k<n>`` for n drawn from 0-1023 (the key's length changes
# every few records, so a batch is hundreds of runs of equal-sized records: what kcat's -K produce of
# bench_broker sends to each of 12 partitions, batches of 400-9,000 records)
HASHED_COUNTS = (1000, 9000)


def shapes():
    for codec in CODECS:
        for size in SIZES:
            for count in COUNTS:
                yield codec, size, count, "seq"
    for codec in CODECS:
        for count in HASHED_COUNTS:
            yield codec, 100, count, "hashed"


def measure(repeats: int, budget: float) -> dict:
    """{"codec size count": microseconds of thread CPU per check} for the tree on sys.path."""
    from kafkawire.protocol.records import build_batch
    from kafkawire.protocol.records.batch import RECORDS_OFFSET  # noqa: F401 (both trees have it)
    from kafkawire.protocol.records.validation import _check_records

    out = {}
    import random

    for codec, size, count, keys in shapes():
        value = bytes((i * 7 + 33) % 90 + 32 for i in range(size // 2)) + b"order status=shipped " * (size // 42 + 1)
        value = value[:size]
        rng = random.Random(count)
        key_numbers = range(count) if keys == "seq" else [rng.randrange(1024) for _ in range(count)]
        recs = [(b"k%d" % n, value, (), TS + i // 50) for i, n in enumerate(key_numbers)]
        batch = build_batch(recs, compression=codec, base_offset=0)
        view = memoryview(batch)
        codec_id = batch[22] & 7  # attributes: bytes 21-22, big-endian
        assert _check_records(view, 0, len(batch), codec_id, count, None) is None
        # enough calls per repeat that the clock's resolution does not matter
        per = max(1, int(budget / repeats / max(count, 1) * 2000))
        best = float("inf")
        for _ in range(repeats):
            t0 = time.thread_time()
            for _ in range(per):
                _check_records(view, 0, len(batch), codec_id, count, None)
            best = min(best, (time.thread_time() - t0) / per)
        out[_key(codec, size, count, keys)] = best * 1e6
    return out


def _key(codec: str, size: int, count: int, keys: str) -> str:
    return f"{codec} {size} {count}" + ("" if keys == "seq" else f" {keys}")


def split(fig: dict, codec: str, size: int) -> tuple[float, float]:
    """(fixed us per batch, us per record) through the 1- and 1000-record points."""
    one, many = fig[f"{codec} {size} 1"], fig[f"{codec} {size} {COUNTS[-1]}"]
    per = (many - one) / (COUNTS[-1] - 1)
    return one - per, per


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kafkawire-src", help="another kafkawire source tree (its src directory), as old")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget", type=float, default=1.0, help="roughly the calls per shape (scale)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.json:
        print(json.dumps(measure(args.repeats, args.budget)))
        return 0
    one, five, fifteen = os.getloadavg()
    print(
        f"{os.cpu_count()} cores, load average {one:.2f} {five:.2f} {fifteen:.2f}; thread CPU, min of {args.repeats}",
        flush=True,
    )

    def run(src: str) -> dict:
        # each tree in a fresh process of the same shape: the allocator's state (a 1 MiB decompressed
        # section is mapped and faulted in afresh, or not) moves the large lz4 figures otherwise
        env = dict(os.environ, PYTHONPATH=src)
        cmd = [sys.executable, __file__, "--json", "--repeats", str(args.repeats), "--budget", str(args.budget)]
        return json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)

    new = run(str(Path(__file__).resolve().parent.parent / "src"))
    old = run(args.kafkawire_src) if args.kafkawire_src else None
    head = f"{'codec':5} {'value':>6} {'records':>7} {'keys':>6} {'new us':>9} {'us/record':>9}"
    if old:
        head += f" {'old us':>9} {'old/new':>8}"
    print(head)
    for codec, size, count, keys in shapes():
        key = _key(codec, size, count, keys)
        if old and key not in old:  # an older tree without the shape
            continue
        row = f"{codec:5} {size:6} {count:7} {keys:>6} {new[key]:9.1f} {new[key] / count:9.2f}"
        if old:
            row += f" {old[key]:9.1f} {old[key] / new[key]:8.2f}"
        print(row)
    print("\nfixed us per batch + us per record (line through 1 and 1000 records)")
    for codec in CODECS:
        for size in SIZES:
            fixed, per = split(new, codec, size)
            row = f"{codec:5} {size:6}  new {fixed:7.1f} + {per:6.3f}/record"
            if old:
                ofixed, oper = split(old, codec, size)
                row += f"   old {ofixed:7.1f} + {oper:6.3f}/record"
            print(row)
    one, five, fifteen = os.getloadavg()
    print(f"\nload average {one:.2f} {five:.2f} {fifteen:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
