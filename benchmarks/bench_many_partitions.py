"""Start-up time, memory and open files of `kafkawire serve` holding many partitions on disk.

Builds a data directory of N partitions (one small batch each, written through the segments engine),
then, per run: spawns `kafkawire serve` on it (optionally under a lower open file limit), times spawn to
the first answered ApiVersions, reads VmRSS and the open descriptor count, fetches every partition once
(one Fetch request per 1,000 partitions), reads them again, and stops the broker with SIGTERM.

    python benchmarks/bench_many_partitions.py [--partitions 10000] [--runs 2] [--nofile 1024]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from kafkawire.protocol import decode_response, encode_request, message_class, request_header
from kafkawire.protocol.records import build_batch

sys.path.insert(0, os.path.dirname(__file__))
from bench_startup import first_api_versions, free_port  # noqa: E402


def build(data_dir: str, partitions: int) -> float:
    from kafkawire.broker.storage.segments import SegmentStorage

    t = time.monotonic()
    storage = SegmentStorage(data_dir, {"kafkawire.log.fsync.acks.all": "false"})
    storage.create_topic("wide", partitions)
    for p in range(partitions):
        storage.partition("wide", p).append(build_batch([(None, b"record-%d" % p)]))
    storage.close()
    return time.monotonic() - t


def call(sock, body, version: int):
    sock.sendall(encode_request(request_header(body.api_key, version, 1, "bench"), body))
    size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return decode_response(bytes(data), body.api_key, version, framed=False).body


def fetch_all(port: int, partitions: int) -> int:
    F = message_class("FetchRequest")
    got = 0
    with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
        for start in range(0, partitions, 1000):
            parts = [
                F.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
                for p in range(start, min(start + 1000, partitions))
            ]
            body = F(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=256 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[F.FetchTopic(topic="wide", partitions=parts)],
                forgotten_topics_data=[],
            )
            res = call(s, body, 12)
            if res.error_code or not res.responses:
                raise RuntimeError(f"Fetch answered error {res.error_code} with {len(res.responses)} topics")
            got += sum(1 for p in res.responses[0].partitions if p.error_code == 0 and p.records)
    return got


def proc_status(pid: int) -> tuple[int, int]:
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def run_once(data_dir: str, partitions: int, nofile: int | None) -> dict:
    port = free_port()

    def limit():
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    t = time.monotonic()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kafkawire",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--data-dir",
            data_dir,
            "--log-level",
            "WARNING",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=limit,
    )
    try:
        first_api_versions(port, time.monotonic() + 600)
        started = time.monotonic() - t
        rss_start, fds_start = proc_status(proc.pid)
        t = time.monotonic()
        served = fetch_all(port, partitions)
        first_read = time.monotonic() - t
        t = time.monotonic()
        fetch_all(port, partitions)
        second_read = time.monotonic() - t
        rss_read, fds_read = proc_status(proc.pid)
        assert served == partitions, f"only {served} of {partitions} partitions answered"
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        return {
            "start_s": started,
            "rss_start_mb": rss_start / 2**20,
            "fds_start": fds_start,
            "read_all_s": first_read,
            "read_all_again_s": second_read,
            "rss_after_reads_mb": rss_read / 2**20,
            "fds_after_reads": fds_read,
        }
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sys.stderr.write(proc.stderr.read().decode(errors="replace")[-3000:])
        raise
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--nofile", type=int, default=None, help="RLIMIT_NOFILE of the broker (default: inherited)")
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="kafkawire-many-")
    try:
        data_dir = os.path.join(tmp, "data")
        built = build(data_dir, args.partitions)
        print(f"built {args.partitions} partitions in {built:.1f} s")
        rows = [run_once(data_dir, args.partitions, args.nofile) for _ in range(args.runs)]
        print(
            f"kafkawire serve, {args.partitions} partitions, open file limit "
            f"{args.nofile or resource.getrlimit(resource.RLIMIT_NOFILE)[0]} (median of {args.runs}):"
        )
        for key in rows[0]:
            values = [r[key] for r in rows]
            print(f"  {key:22s} {statistics.median(values):10.2f}   runs: {', '.join(f'{v:.2f}' for v in values)}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
