#!/usr/bin/env python3
"""Broker CPU per Produce request in process (no sockets), for requests of many partitions of small batches.

librdkafka producing to 12 partitions sends requests of every partition with a batch of a few to a few
hundred records each, so the broker's cost per partition (the record check, the append, the response) is
most of its CPU per MB there; bench_produce_cpu sends one partition per request. Here a Broker with the disk
engine (no fsync) answers prebuilt ProduceRequest v10 frames through ``Broker.handle``, as the net layer
calls it, and the process CPU per request is printed for each shape: partitions x records per batch, 100 B
values (``--size``), codecs none and lz4.

With ``--kafkawire-src PATH`` (another tree's ``src``, e.g. ``git archive <commit> src``) every shape is
also run importing that tree, rounds interleaved, and each row prints old/new (above 1: the current tree
spends less). Each run is a fresh process; the least of ``--rounds`` is reported (other work on the machine
only adds CPU time: cache misses, frequency).

Usage: python benchmarks/bench_produce_handler.py [--kafkawire-src PATH] [--rounds 3] [--requests 800]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHAPES = [(12, 5), (12, 20), (12, 100), (1, 500)]  # (partitions per request, records per batch)
CODECS = ("none", "lz4")


def measure(codec: str, partitions: int, per: int, requests: int, size: int) -> float:
    """Microseconds of process CPU per request, for the kafkawire on sys.path."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_broker as bb

    from kafkawire.broker.config import BrokerConfig
    from kafkawire.broker.server import Broker
    from kafkawire.protocol import rpc
    from kafkawire.protocol.messages import ProduceRequest
    from kafkawire.protocol.records.builder import build_batch

    values = bb.payloads(size)
    frames, k = [], 0
    for i in range(requests + 50):
        data = []
        for p in range(partitions):
            records = [(b"k%d" % (j & 1023), values[j & 63]) for j in range(k, k + per)]
            data.append(ProduceRequest.PartitionProduceData(index=p, records=build_batch(records, compression=codec)))
            k += per
        body = ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout_ms=30000,
            topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=data)],
        )
        # the net layer hands each request to the broker as a writable buffer without its size prefix
        frames.append(bytearray(bytes(rpc.encode_request(rpc.request_header(0, 10, i + 1, "bench"), body))[4:]))

    async def run() -> float:
        with tempfile.TemporaryDirectory(prefix="bench-produce-handler-") as data_dir:
            broker = Broker(BrokerConfig(port=0, storage="disk", data_dir=data_dir, acks_all_fsync=False))
            await broker.start()
            try:
                broker.storage.create_topic("t", partitions, {})
                for n, frame in enumerate(frames):
                    if n == 50:  # the first requests warm up (imports, segment files, caches)
                        t0 = time.process_time()
                    answer = broker.handle(frame, None)
                    if not isinstance(answer, list):
                        answer = await answer
                    assert answer, "no answer to an acks=1 request"
                return (time.process_time() - t0) / requests * 1e6
            finally:
                await broker.stop()

    return asyncio.run(run())


def run_in(src: str | None, args, codec: str, partitions: int, per: int) -> float:
    env = dict(os.environ)
    env["PYTHONPATH"] = src or str(REPO / "src")
    out = subprocess.run(
        [sys.executable, __file__, "--one", json.dumps([codec, partitions, per, args.requests, args.size])],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kafkawire-src", help="another kafkawire source tree, timed as old")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=800, help="timed requests per run (default 800)")
    parser.add_argument("--size", type=int, default=100, help="value size in bytes (default 100)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(measure(*json.loads(args.one)))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_broker as bb

    print(bb.machine_state(), flush=True)
    trees = {"new": None} | ({"old": args.kafkawire_src} if args.kafkawire_src else {})
    figures: dict = {}
    for r in range(args.rounds):
        for codec in CODECS:
            for partitions, per in SHAPES:
                for name, src in trees.items():
                    us = run_in(src, args, codec, partitions, per)
                    figures.setdefault((codec, partitions, per), {}).setdefault(name, []).append(us)
                    print(f"round {r} {name} {codec} p{partitions}x{per}: {us:.1f} us/request", flush=True)
    print(f"\nprocess CPU us per request, least of {args.rounds}; {args.size} B values")
    print(
        f"{'codec':5} {'shape':9} {'new':>9} {'new/part':>9}"
        + (f" {'old':>9} {'old/new':>8}" if len(trees) > 1 else "")
    )
    for (codec, partitions, per), by in figures.items():
        new = min(by["new"])
        row = f"{codec:5} {f'p{partitions}x{per}':9} {new:9.1f} {new / partitions:9.1f}"
        if "old" in by:
            old = min(by["old"])
            row += f" {old:9.1f} {old / new:8.2f}"
        print(row)
    print(f"\n{bb.machine_state()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
