"""Protocol message encode / decode throughput: kafkawire against kafka-python 3.x and kio, same run.

    python benchmarks/bench_protocol.py [--quick]
    python benchmarks/bench_protocol.py --instructions [--decodes N]

The corpus (built once, equal content for every library):

* ApiVersionsResponse v3 listing every API key (0-92)
* MetadataResponse v12: 100 topics x 12 partitions, 3 replicas, 3 ISR each
* ProduceRequest v9: 10 partitions of 16 KiB record batches
* FetchResponse v12: 10 partitions of 64 KiB record batches

encode: message object -> bytes (kafkawire ``encode``, kafka-python ``encode``,
        kio's pure-Python ``entity_writer``).
decode: bytes -> message object (kafkawire ``decode``, kafka-python ``decode``,
        kio's native ``entity_reader``).

Each figure is the best of several timed rounds. Targets: at least 2x kafka-python
on encode and decode, and faster than kio's pure-Python encoder.

--instructions counts instead of timing: each library's decoder runs N times under
valgrind's callgrind, which counts the machine instructions (Ir) executed inside the
decode calls only, freeing of the decoded message included. The count does not depend
on the machine's load, so it compares decoders on a shared machine where timings are
noise. Printed: Ir per decode and kio's count over kafkawire's (above 1: kafkawire
executes fewer instructions).
"""

from __future__ import annotations

import argparse
import collections
import gc
import io
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path

from kafkawire.protocol import all_apis, message_class

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from protocol import peers  # the differential tests' adapters build the peers' objects

        KP = peers.kafka_python_classes()
except ImportError:  # pragma: no cover - the benchmark still runs for kafkawire alone
    peers, KP = None, {}
try:
    KIO = peers.kio_classes() if peers else {}
except ImportError:  # pragma: no cover
    KIO = {}


def api_versions_response():
    cls = message_class("ApiVersionsResponse")
    return cls(
        api_keys=[
            cls.ApiVersion(api_key=k, min_version=a.min_version, max_version=a.max_version)
            for k, a in sorted(all_apis().items())
        ],
        throttle_time_ms=0,
    ), 3


def metadata_response():
    cls = message_class("MetadataResponse")
    brokers = [
        cls.MetadataResponseBroker(node_id=i, host=f"broker-{i}.example.internal", port=9092, rack=f"r{i % 3}")
        for i in range(3)
    ]
    topics = []
    for t in range(100):
        partitions = [
            cls.MetadataResponsePartition(
                partition_index=p,
                leader_id=p % 3,
                leader_epoch=7,
                replica_nodes=[0, 1, 2],
                isr_nodes=[0, 1, 2],
                offline_replicas=[],
            )
            for p in range(12)
        ]
        topics.append(
            cls.MetadataResponseTopic(
                name=f"events.topic-{t:03d}",
                topic_id=uuid.UUID(int=t + 1),
                partitions=partitions,
                topic_authorized_operations=-2147483648,
            )
        )
    return cls(brokers=brokers, cluster_id="kafkawire-cluster", controller_id=0, topics=topics), 12


def produce_request():
    cls = message_class("ProduceRequest")
    topic = cls.TopicProduceData(
        name="events",
        partition_data=[cls.PartitionProduceData(index=p, records=bytes([p]) * (16 * 1024)) for p in range(10)],
    )
    return cls(acks=-1, timeout_ms=30000, topic_data=[topic]), 9


def fetch_response():
    cls = message_class("FetchResponse")
    partitions = [
        cls.PartitionData(
            partition_index=p,
            high_watermark=100_000,
            last_stable_offset=100_000,
            log_start_offset=0,
            aborted_transactions=[],
            records=bytes([p]) * (64 * 1024),
        )
        for p in range(10)
    ]
    return cls(session_id=0, responses=[cls.FetchableTopicResponse(topic="events", partitions=partitions)]), 12


CORPUS = [
    ("ApiVersionsResponse v3", api_versions_response),
    ("MetadataResponse v12", metadata_response),
    ("ProduceRequest v9", produce_request),
    ("FetchResponse v12", fetch_response),
]


def _loops(fn, min_time: float) -> int:
    n = 1
    while True:
        start = time.process_time()
        for _ in range(n):
            fn()
        elapsed = time.process_time() - start
        if elapsed >= min_time / 4:
            return max(1, int(n * min_time / max(elapsed, 1e-9)))
        n *= 4


def best_rates(fns: dict, min_time: float, rounds: int) -> dict[str, float]:
    """Calls per second per library: the best of ``rounds`` loops, the libraries interleaved round by
    round so that all see the same machine load. CPU time of this process, not wall time: the
    benchmark shares its cores with other work."""
    loops = {lib: _loops(fn, min_time) for lib, fn in fns.items()}
    best = {lib: float("inf") for lib in fns}
    gc.collect()
    for _ in range(rounds):
        for lib, fn in fns.items():
            n = loops[lib]
            start = time.process_time()
            for _ in range(n):
                fn()
            best[lib] = min(best[lib], (time.process_time() - start) / n)
    return {lib: 1.0 / t for lib, t in best.items()}


def candidates(msg, version: int) -> dict[str, dict]:
    """Per library: encode and decode callables over equal content (checked to give identical bytes)."""
    cls = type(msg)
    data = msg.encode(version)
    assert cls.decode(data, version) == msg
    out = {"kafkawire": {"encode": lambda: msg.encode(version), "decode": lambda: cls.decode(data, version)}}
    root = cls.spec.definition(version).root
    kp_cls = KP.get(cls.spec.name)
    if kp_cls is not None:
        kp_obj = peers.to_kafka_python(msg, root, kp_cls, version)
        assert bytes(kp_obj.encode(version=version)) == data, "kafka-python encodes different bytes"
        assert peers.kp_neutral(kp_cls.decode(data, version=version), kp_cls._struct, root, version) == peers.neutral(
            msg, root, version
        )
        out["kafka-python"] = {
            "encode": lambda: kp_obj.encode(version=version),
            "decode": lambda: kp_cls.decode(data, version=version),
        }
    kio_key = (cls.spec.name, version)
    if KIO and kio_key in KIO:
        from kio.serial import entity_reader, entity_writer

        kio_cls = KIO[kio_key]
        read, write = entity_reader(kio_cls), entity_writer(kio_cls)
        kio_obj, _ = read(data, 0)

        def kio_encode():
            buf = io.BytesIO()
            write(buf, kio_obj)
            return buf.getvalue()

        assert kio_encode() == data, "kio encodes different bytes"
        out["kio"] = {"encode": kio_encode, "decode": lambda: read(data, 0)}
    return out


# Under callgrind, instructions are collected only inside itertools.starmap's next (the loop that
# calls the decoder), counters are zeroed on os.getpgrp and dumped on os.getppid: one dump file
# per (message, library), in the order the child prints them. Those calls appear nowhere in any
# decoder's path.
_CALLGRIND = [
    "--tool=callgrind",
    "--collect-atstart=no",
    "--toggle-collect=starmap_next",
    "--zero-before=os_getpgrp*",
    "--dump-before=os_getppid*",
]
_COUNTED = ("kafkawire", "kio")


def callgrind_child(decodes: int) -> None:
    """Run under callgrind: each decoder ``decodes`` times between a zero and a dump of the counters."""
    for label, build in CORPUS:
        msg, version = build()
        runs = candidates(msg, version)
        for lib in _COUNTED:
            if lib not in runs:
                continue
            decode = runs[lib]["decode"]
            decode()  # compiles the codec, fills caches: steady state, as the timed rounds see it
            decode()

            def once(decode=decode):
                decode()  # the message is freed inside the call, so freeing is counted

            os.getpgrp()
            collections.deque(itertools.starmap(once, itertools.repeat((), decodes)), maxlen=0)
            os.getppid()
            print(f"{label}\t{lib}", flush=True)


def count_instructions(decodes: int) -> int:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("valgrind is not installed", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        child = subprocess.run(
            [valgrind, *_CALLGRIND, f"--callgrind-out-file={out}", sys.executable, os.path.abspath(__file__)]
            + ["--callgrind-child", str(decodes)],
            capture_output=True,
            text=True,
        )
        if child.returncode != 0:
            print(child.stdout, child.stderr, sep="\n", file=sys.stderr)
            return 1
        order = [tuple(line.split("\t")) for line in child.stdout.splitlines() if "\t" in line]
        counts = []
        for i in range(1, len(order) + 1):
            with open(f"{out}.{i}") as dump:
                counts.append(next(int(line.split()[1]) for line in dump if line.startswith("totals:")))
        if len(counts) != len(order) or os.path.exists(f"{out}.{len(order) + 1}"):
            print("callgrind dumps do not match the decoders run", file=sys.stderr)
            return 1
    per = {key: n / decodes for key, n in zip(order, counts)}
    header = f"{'message':<24} {'kafkawire Ir/decode':>20} {'kio Ir/decode':>15} {'vs kio':>8}"
    print(header)
    print("-" * len(header))
    for label, _ in CORPUS:
        kw, kio = per.get((label, "kafkawire")), per.get((label, "kio"))
        ratio = f"{kio / kw:.2f}x" if kw and kio else "n/a"
        kio_cell = f"{kio:>15,.0f}" if kio else f"{'n/a':>15}"
        print(f"{label:<24} {kw:>20,.0f} {kio_cell} {ratio:>8}")
    print(
        f"\n(valgrind --tool=callgrind, {decodes} decodes each after two warm-up decodes; Python {sys.version.split()[0]})"
    )
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter timing loops (noisier)")
    ap.add_argument("--instructions", action="store_true", help="count decode instructions under callgrind")
    ap.add_argument("--decodes", type=int, default=10, help="decodes counted per library with --instructions")
    ap.add_argument("--callgrind-child", type=int, metavar="N", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.callgrind_child is not None:
        callgrind_child(args.callgrind_child)
        return 0
    if args.instructions:
        return count_instructions(args.decodes)
    min_time, rounds = (0.05, 3) if args.quick else (0.1, 9)
    libs = ["kafkawire", "kafka-python", "kio"]
    header = (
        f"{'message':<24} {'op':<7} {'bytes':>8} "
        + " ".join(f"{lib + ' ops/s':>18}" for lib in libs)
        + f" {'vs kafka-python':>16} {'vs kio':>8}"
    )
    print(header)
    print("-" * len(header))
    worst = {"kafka-python": float("inf"), "kio": float("inf")}
    kio_encode_worst = float("inf")
    for label, build in CORPUS:
        msg, version = build()
        size = len(msg.encode(version))
        runs = candidates(msg, version)
        for op in ("encode", "decode"):
            rates = best_rates({lib: fns[op] for lib, fns in runs.items()}, min_time, rounds)
            cells = " ".join(f"{rates[lib]:>18,.0f}" if lib in rates else f"{'n/a':>18}" for lib in libs)
            ratios = []
            for peer in ("kafka-python", "kio"):
                if peer in rates:
                    ratio = rates["kafkawire"] / rates[peer]
                    ratios.append(f"{ratio:.2f}x")
                    worst[peer] = min(worst[peer], ratio)
                    if peer == "kio" and op == "encode":
                        kio_encode_worst = min(kio_encode_worst, ratio)
                else:
                    ratios.append("n/a")
            print(f"{label:<24} {op:<7} {size:>8} {cells} {ratios[0]:>16} {ratios[1]:>8}")
    print()
    print(f"worst ratio vs kafka-python (target >= 2x): {worst['kafka-python']:.2f}x")
    print(f"worst encode ratio vs kio's pure-Python encoder (target > 1x): {kio_encode_worst:.2f}x")
    print(f"worst ratio vs kio overall (its decoder is native code): {worst['kio']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
