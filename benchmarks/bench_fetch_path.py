#!/usr/bin/env python3
"""Fetch's two ways of sending stored records, side by side in one run: views of the mapped segments written
with ``writev`` against segment ranges sent with ``os.sendfile`` (``BrokerConfig.fetch_sendfile``, the default).

A broker runs in this process (asyncio's loop, in its thread; segments engine) with one partition of
``--records`` 1 KiB records; a raw-socket client fetches it from the start over and over, one Fetch v12 at a
time (PartitionMaxBytes 1 MiB), ``--passes`` times, for each way in turn, alternating ``--repeat`` times.
Printed per way: MB/s served (the best run) and the broker thread's CPU per MB (its scheduler time, from
/proc: meaningful on a shared machine where MB/s is not), and the ratio sendfile / writev.

Usage: python benchmarks/bench_fetch_path.py [--records 100000] [--passes 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from broker.helpers import fetch_request  # noqa: E402

from kafkawire.broker.config import BrokerConfig  # noqa: E402
from kafkawire.broker.server import start_in_thread  # noqa: E402
from kafkawire.protocol import encode_request, request_header  # noqa: E402
from kafkawire.protocol.records import build_batch  # noqa: E402

MB = 1e6


def thread_cpu(native_id: int) -> float:
    """CPU seconds of one thread of this process (schedstat: nanoseconds on a CPU)."""
    return int(Path(f"/proc/self/task/{native_id}/schedstat").read_text().split()[0]) / 1e9


def load(data_dir: str, records: int) -> None:
    broker = start_in_thread(BrokerConfig(port=0, storage="segments", data_dir=data_dir))
    try:
        storage = broker.broker.storage
        storage.create_topic("f", 1)
        log = storage.partition("f", 0)
        value = os.urandom(1024)
        for _ in range(records // 500):
            log.append(build_batch([(None, value)] * 500))
    finally:
        broker.stop()


def serve(data_dir: str, sendfile: bool, passes: int) -> tuple[float, float]:
    """(MB/s, broker thread CPU ms per MB) of ``passes`` reads of the whole partition, one Fetch at a time."""
    cfg = BrokerConfig(port=0, storage="segments", data_dir=data_dir)
    cfg.fetch_sendfile = sendfile
    broker = start_in_thread(cfg)
    try:
        end = broker.broker.storage.partition("f", 0).log_end_offset
        tid = broker._thread.native_id
        sock = socket.create_connection(broker.address)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = memoryview(bytearray(4 << 20))
        cid = served = 0
        cpu0, t0 = thread_cpu(tid), time.perf_counter()
        for _ in range(passes):
            offset = 0
            while offset < end:
                cid += 1
                request = fetch_request([("f", 0, offset)], partition_max_bytes=1 << 20)
                sock.sendall(encode_request(request_header(1, 12, cid, "bench"), request))
                size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
                got = 0
                while got < size:
                    n = sock.recv_into(buf[: min(size - got, len(buf))])
                    if not n:
                        raise ConnectionError("broker closed the connection")
                    got += n
                served += size + 4
                offset += 1000  # 1 MiB of 1 KiB records is about 1,000 of them; an answer starts at a batch
        seconds, cpu = time.perf_counter() - t0, thread_cpu(tid) - cpu0
        sock.close()
    finally:
        broker.stop()
    return served / MB / seconds, cpu * 1000 / (served / MB)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"2 cores, shared; load average {os.getloadavg()[0]:.1f} at start")
    results: dict[str, list[tuple[float, float]]] = {"writev": [], "sendfile": []}
    with tempfile.TemporaryDirectory() as data:
        load(data, args.records)
        for _ in range(args.repeat):
            for name in results:
                results[name].append(serve(data, name == "sendfile", args.passes))
    best = {}
    for name, runs in results.items():
        rate = max(r for r, _ in runs)
        cpu = min(c for _, c in runs)
        best[name] = (rate, cpu)
        print(f"{name:9} {rate:8.0f} MB/s (best of {len(runs)})   broker CPU {cpu:.3f} ms/MB (least)")
    print(
        f"sendfile / writev: throughput {best['sendfile'][0] / best['writev'][0]:.2f}x, "
        f"CPU per MB {best['sendfile'][1] / best['writev'][1]:.2f}x; load average {os.getloadavg()[0]:.1f} at end"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
