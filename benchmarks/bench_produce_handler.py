#!/usr/bin/env python3
"""Broker CPU per Produce request in process (no sockets), for requests of many partitions of small batches.

librdkafka producing to 12 partitions sends requests of every partition with a batch of a few to a few
hundred records each, so the broker's cost per partition (the record check, the append, the response) is
most of its CPU per MB there; bench_produce_cpu sends one partition per request. Here a Broker with the disk
engine (no fsync) answers prebuilt ProduceRequest v10 frames through ``Broker.handle``, as the net layer
calls it, and the process CPU per request is printed for each shape: partitions x records per batch (1 x 1
among them, one record a request: what a producer with linger.ms=0 sends), 100 B values (``--size``), codecs
none and lz4. Keys are ``k<n>``, n counting up through 0-1023, except in the keyed
shape (``k`` after it): there each partition's keys are drawn at random from 0-1023, as a producer's keyed
partitioner spreads them (the key's length changes every few records), in batches of the size kcat and
librdkafka send to each of 12 partitions at full speed (bench_broker: 1,200-8,800 records, median 2,400).

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
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# (partitions per request, records per batch, keys drawn at random per partition)
SHAPES = [(1, 1, False), (12, 5, False), (12, 20, False), (12, 100, False), (1, 500, False), (12, 2000, True)]
# records built per run at most (requests x this): a shape of larger requests times fewer of them
RECORDS_PER_REQUEST = 1200
CODECS = ("none", "lz4")


def measure(codec: str, partitions: int, per: int, requests: int, size: int, keyed: bool = False) -> float:
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
    requests = min(requests, max(50, requests * RECORDS_PER_REQUEST // (partitions * per)))
    rng = random.Random(1)
    for i in range(requests + 50):
        data = []
        for p in range(partitions):
            keys = [rng.randrange(1024) if keyed else j & 1023 for j in range(k, k + per)]
            records = [(b"k%d" % n, values[j & 63]) for n, j in zip(keys, range(k, k + per))]
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


def run_in(src: str | None, args, codec: str, partitions: int, per: int, keyed: bool) -> float:
    env = dict(os.environ)
    env["PYTHONPATH"] = src or str(REPO / "src")
    out = subprocess.run(
        [sys.executable, __file__, "--one", json.dumps([codec, partitions, per, args.requests, args.size, keyed])],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def shape_label(partitions: int, per: int, keyed: bool) -> str:
    return f"p{partitions}x{per}" + ("k" if keyed else "")


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
            for partitions, per, keyed in SHAPES:
                for name, src in trees.items():
                    us = run_in(src, args, codec, partitions, per, keyed)
                    figures.setdefault((codec, partitions, per, keyed), {}).setdefault(name, []).append(us)
                    print(
                        f"round {r} {name} {codec} {shape_label(partitions, per, keyed)}: {us:.1f} us/request",
                        flush=True,
                    )
    print(f"\nprocess CPU us per request, least of {args.rounds}; {args.size} B values")
    print(
        f"{'codec':5} {'shape':9} {'new':>9} {'new/part':>9}"
        + (f" {'old':>9} {'old/new':>8}" if len(trees) > 1 else "")
    )
    for (codec, partitions, per, keyed), by in figures.items():
        new = min(by["new"])
        row = f"{codec:5} {shape_label(partitions, per, keyed):9} {new:9.1f} {new / partitions:9.1f}"
        if "old" in by:
            old = min(by["old"])
            row += f" {old:9.1f} {old / new:8.2f}"
        print(row)
    print(f"\n{bb.machine_state()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
