"""Other clients' latency while 2,000 topics are created: kafkawire, then the reference Apache Kafka.

A probe client sends ApiVersions and acks=1 Produce requests one after another (each answered before the
next) while an admin client creates 2,000 one-partition topics in requests of ``--batch`` topics. Printed
per broker: the probe's p50/p99/max latency idle and during the creation, the creation's wall time, and
kafkawire's figures over Kafka's. kafkawire runs as its own process (``kafkawire serve``, segments engine,
fresh data directory), Kafka through ``tools/kafka_reference.py``; both on 127.0.0.1.

    python benchmarks/bench_admin_load.py [--topics 2000] [--batch 200]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kafkawire.protocol import decode_response, encode_request, message_class, request_header
from kafkawire.protocol.records import build_batch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

AV = message_class("ApiVersionsRequest")
CT = message_class("CreateTopicsRequest")
PR = message_class("ProduceRequest")


class Raw:
    def __init__(self, host: str, port: int):
        self.sock = socket.create_connection((host, port), timeout=120)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0

    def call(self, body, version: int):
        self.cid += 1
        self.sock.sendall(encode_request(request_header(body.api_key, version, self.cid, "bench"), body))
        size = struct.unpack(">i", self._read(4))[0]
        return decode_response(self._read(size), body.api_key, version, framed=False).body

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)

    def close(self):
        self.sock.close()


def create(client: Raw, names: list[str]) -> None:
    res = client.call(
        CT(topics=[CT.CreatableTopic(name=n, num_partitions=1, replication_factor=1) for n in names], timeout_ms=60000),
        7,
    )
    bad = [(t.name, t.error_code) for t in res.topics if t.error_code]
    if bad:
        raise RuntimeError(f"create failed: {bad[:3]}")


def probe(host, port, stop: threading.Event, out: list, max_seconds: float) -> None:
    c = Raw(host, port)
    records = build_batch([(None, b"probe")])
    produce = PR(
        acks=1,
        timeout_ms=5000,
        topic_data=[
            PR.TopicProduceData(name="probe", partition_data=[PR.PartitionProduceData(index=0, records=records)])
        ],
    )
    deadline = time.monotonic() + max_seconds
    try:
        i = 0
        while not stop.is_set() and time.monotonic() < deadline and i < 200_000:
            t0 = time.perf_counter()
            if i % 2:
                c.call(produce, 9)
            else:
                c.call(AV(client_software_name="bench", client_software_version="1"), 3)
            out.append(time.perf_counter() - t0)
            i += 1
    finally:
        c.close()


def pct(values, q):
    return statistics.quantiles(values, n=100)[q - 1] if len(values) >= 2 else float("nan")


def measure(host: str, port: int, topics: int, batch: int, tag: str) -> dict:
    admin = Raw(host, port)
    create(admin, ["probe"])
    time.sleep(1.0)
    idle: list = []
    stop = threading.Event()
    t = threading.Thread(target=probe, args=(host, port, stop, idle, 10))
    t.start()
    time.sleep(2.0)
    stop.set()
    t.join()
    during: list = []
    stop = threading.Event()
    t = threading.Thread(target=probe, args=(host, port, stop, during, 600))
    t.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    for start in range(0, topics, batch):
        create(admin, [f"{tag}-{i}" for i in range(start, min(topics, start + batch))])
    wall = time.monotonic() - t0
    stop.set()
    t.join()
    admin.close()
    return {
        "idle_p50": pct(idle, 50),
        "idle_p99": pct(idle, 99),
        "p50": pct(during, 50),
        "p99": pct(during, 99),
        "max": max(during),
        "n": len(during),
        "wall": wall,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_kafkawire(topics, batch) -> dict:
    with tempfile.TemporaryDirectory(prefix="kafkawire-bench-") as data:
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafkawire", "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    Raw("127.0.0.1", port).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError("kafkawire did not start") from None
                    time.sleep(0.1)
            return measure("127.0.0.1", port, topics, batch, "kw")
        finally:
            proc.terminate()
            proc.wait(10)


def run_kafka(topics, batch) -> dict:
    from kafka_reference import ReferenceKafka

    kafka = ReferenceKafka().start()
    try:
        host, port = kafka.bootstrap.rsplit(":", 1)
        return measure(host, int(port), topics, batch, "kafka")
    finally:
        kafka.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=200)
    args = ap.parse_args()
    results = {"kafkawire": run_kafkawire(args.topics, args.batch), "kafka": run_kafka(args.topics, args.batch)}
    print(f"{args.topics} topics in requests of {args.batch}; probe: ApiVersions and acks=1 Produce, one at a time")
    print(f"{'broker':10} {'idle p50':>9} {'idle p99':>9} {'p50':>8} {'p99':>8} {'max':>8} {'probes':>7} {'create':>8}")
    for name, r in results.items():
        print(
            f"{name:10} {r['idle_p50'] * 1000:7.2f}ms {r['idle_p99'] * 1000:7.2f}ms {r['p50'] * 1000:6.2f}ms "
            f"{r['p99'] * 1000:6.2f}ms {r['max'] * 1000:6.1f}ms {r['n']:7d} {r['wall']:7.2f}s"
        )
    kw, ka = results["kafkawire"], results["kafka"]
    print(
        f"kafkawire/kafka: p50 {kw['p50'] / ka['p50']:.2f}x, p99 {kw['p99'] / ka['p99']:.2f}x, "
        f"max {kw['max'] / ka['max']:.2f}x, creation time {kw['wall'] / ka['wall']:.2f}x"
    )


if __name__ == "__main__":
    main()
