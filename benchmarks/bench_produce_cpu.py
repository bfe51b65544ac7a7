#!/usr/bin/env python3
"""Broker CPU per MB for a fixed produce workload: kafkawire against Tansu (and Apache Kafka on request).

Throughput on a shared machine is noise, and with librdkafka as the producer even a broker's CPU per MB
moves with the batch sizes the client happens to build. Here every broker gets the same bytes: ProduceRequest
v10 frames built once (acks=1, one batch of one partition per request, as librdkafka sends them, partitions
in turn), sent over one connection with a window of requests in flight. The broker's CPU seconds (its
threads' schedstat) are counted over the produce phase and over a librdkafka consume of what was produced,
and printed per MB of record values, with each kafkawire figure's ratio to Tansu's (and Kafka's). Brokers
run one after another, rounds interleaved; the median round is reported.

Cases: 100 B values (``--sizes 100,1024`` adds 1 KiB ones, as many MB per case: records scaled down), 1
partition (500 records a request) and 12 partitions (100 records a request), codecs none and lz4.

Usage: python benchmarks/bench_produce_cpu.py [--brokers kafkawire,tansu,kafka] [--records N] [--rounds N]
           [--sizes 100,1024]
           [--kafkawire-src PATH]   # also run the kafkawire of another source tree (e.g. a git worktree of
                                    # an older commit), as "kafkawire-other"
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_broker as bb  # noqa: E402

from kafkawire.protocol import rpc  # noqa: E402
from kafkawire.protocol.messages import ProduceRequest  # noqa: E402
from kafkawire.protocol.records.builder import build_batch  # noqa: E402

from peers.peer_harness import BrokerProcess  # noqa: E402

SIZE = 100
CASES = [(1, "none", 500), (1, "lz4", 500), (12, "none", 100), (12, "lz4", 100)]
WINDOW = 8  # requests in flight, as a producer's max.in.flight


def requests(topic: str, partitions: int, codec: str, per_request: int, records: int, size: int = SIZE) -> list[bytes]:
    values = bb.payloads(size)
    out = []
    for i in range(records // per_request):
        first = i * per_request
        batch = build_batch(
            [(b"k%d" % (j & 1023), values[j & 63]) for j in range(first, first + per_request)],
            compression=codec,
            base_offset=0,
        )
        body = ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout_ms=30000,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name=topic,
                    partition_data=[ProduceRequest.PartitionProduceData(index=i % partitions, records=batch)],
                )
            ],
        )
        out.append(rpc.encode_request(rpc.request_header(0, 10, i + 1, "bench-produce-cpu"), body))
    return out


def _read(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def send(bootstrap: str, frames: list[bytes]) -> int:
    """Send every frame, WINDOW in flight; the number of partitions answered with an error."""
    host, port = bootstrap.rsplit(":", 1)
    errors = 0
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sent = answered = 0
        while answered < len(frames):
            while sent < len(frames) and sent - answered < WINDOW:
                sock.sendall(frames[sent])
                sent += 1
            size = struct.unpack(">i", _read(sock, 4))[0]
            response = rpc.decode_response(_read(sock, size), 0, 10, framed=False)
            errors += sum(p.error_code != 0 for t in response.body.responses for p in t.partition_responses)
            answered += 1
    return errors


class Running:
    """One broker: bootstrap, a CPU-seconds reader, close()."""

    def __init__(self, name: str, other_src: str | None):
        self.name = name
        if name == "kafka":
            from kafka_reference import ReferenceKafka

            self._proc = ReferenceKafka()
            self._proc.start()
            self.bootstrap, self.close = self._proc.bootstrap, self._proc.close
            self.cpu = lambda: bb.cpu_seconds(self._proc.proc)
            return
        if name == "tansu":
            broker = BrokerProcess("tansu", storage="memory")
            broker.__enter__()
        else:
            saved = os.environ.get("PYTHONPATH")
            os.environ["PYTHONPATH"] = other_src if name == "kafkawire-other" else str(REPO / "src")
            try:  # the process is started here, with the source tree chosen above
                broker = BrokerProcess(
                    "kafkawire", storage="disk", extra_args=("--override", "kafkawire.acks.all.fsync=false")
                )
                broker.__enter__()
            finally:
                if saved is None:
                    os.environ.pop("PYTHONPATH", None)
                else:
                    os.environ["PYTHONPATH"] = saved
        self.bootstrap = broker.bootstrap
        self.cpu = lambda: bb.cpu_seconds(broker.proc)
        self.close = lambda: broker.__exit__(None, None, None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", default="kafkawire,tansu", help="kafkawire,tansu,kafka (default kafkawire,tansu)")
    parser.add_argument("--records", type=int, default=200_000, help="records per case (default 200000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, brokers interleaved (default 3)")
    parser.add_argument("--kafkawire-src", help="another kafkawire source tree, run as kafkawire-other")
    parser.add_argument("--sizes", default=str(SIZE), help=f"value sizes in bytes (default {SIZE})")
    args = parser.parse_args(argv)
    names = [b for b in args.brokers.split(",") if b]
    if args.kafkawire_src:
        names.insert(1, "kafkawire-other")
    sizes = [int(x) for x in args.sizes.split(",") if x]
    print(f"{bb.machine_state()}; {args.records * SIZE / bb.MB:.1f} MB of values per case", flush=True)
    figures: dict = {}
    for r in range(args.rounds):
        for name in names:
            broker = Running(name, args.kafkawire_src)
            try:
                warm = f"warm-{r}"
                bb.create_topic(broker.bootstrap, warm, 12, {})
                send(broker.bootstrap, requests(warm, 12, "lz4", 100, 20_000))
                for size, (partitions, codec, per) in ((z, c) for z in sizes for c in CASES):
                    topic = f"cpu-{r}-p{partitions}-{codec}-{size}"
                    bb.create_topic(broker.bootstrap, topic, partitions, {})
                    records = max(per, args.records * SIZE // size // per * per)
                    frames = requests(topic, partitions, codec, per, records, size)
                    c0 = broker.cpu()
                    errors = send(broker.bootstrap, frames)
                    c1 = broker.cpu()
                    consumed = bb.rdkafka_consume(broker.bootstrap, topic, partitions, len(frames) * per)
                    c2 = broker.cpu()
                    mb = len(frames) * per * size / bb.MB
                    label = f"{size}B p{partitions} {codec}"
                    produce_ms, consume_ms = (c1 - c0) * 1000 / mb, (c2 - c1) * 1000 / mb
                    figures.setdefault(label, {}).setdefault(name, []).append((produce_ms, consume_ms))
                    print(
                        f"round {r} {name:16} {label:14} produce {produce_ms:6.2f} ms/MB"
                        f"{f' ({errors} ERRORS)' if errors else ''}, consume {consume_ms:6.2f} ms/MB"
                        f"{'' if consumed['complete'] else ' INCOMPLETE'}; load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
            finally:
                broker.close()
    print(f"\nbroker CPU ms per MB of values, median of {args.rounds} round(s); peer/kafkawire: how many times")
    print("more CPU the peer spends per MB (above 1: kafkawire spends less)")
    peers = [n for n in names if n in ("tansu", "kafka", "kafkawire-other")]
    print(
        f"{'case':14} {'phase':8} " + " ".join(f"{n:>16}" for n in names) + "".join(f" {p + '/kw':>18}" for p in peers)
    )
    for label, by_name in figures.items():
        for i, phase in enumerate(("produce", "consume")):
            med = {n: statistics.median(x[i] for x in by_name[n]) for n in names}
            row = f"{label:14} {phase:8} " + " ".join(f"{med[n]:16.2f}" for n in names)
            row += "".join(f" {med[p] / med['kafkawire']:18.2f}" for p in peers)
            print(row)
    print(f"\n{bb.machine_state()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
