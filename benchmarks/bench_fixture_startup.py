#!/usr/bin/env python3
"""Start-up of the ``kafka_broker`` fixture: time until its bootstrap answers a request (target < 0.5 s).

    python benchmarks/bench_fixture_startup.py [--runs 5]

Each run is a fresh interpreter, as a test session is: it imports ``kafkawire.testing``, starts a
``KafkaBroker`` (memory storage; ``mode="thread"`` or ``"subprocess"``, the fixture's two modes) and stops the
clock once an ApiVersions request is answered on its bootstrap (what ``start()`` waits for; checked again
after). ``thread, again`` is a second broker in the same interpreter (modules already imported: a second
broker of a session, e.g. from a ``kafka_broker_config`` marker). Also measured: importing the plugin module,
which every pytest run in an environment with kafkawire pays. Figures: median, min, max over the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
import pytest  # a pytest run has it already
t0 = time.perf_counter()
import kafkawire.testing.plugin
t_plugin = time.perf_counter() - t0
from kafkawire.testing import KafkaBroker
from kafkawire.testing._broker import answers
mode = sys.argv[1]
t0 = time.perf_counter()
b = KafkaBroker(mode=mode).start()
first = time.perf_counter() - t0
host, port = b.bootstrap.rsplit(":", 1)
assert answers(host, int(port))
out = {"plugin_import": t_plugin, "first": first}
if mode == "thread":
    t0 = time.perf_counter()
    b2 = KafkaBroker(mode=mode).start()
    out["again"] = time.perf_counter() - t0
    b2.stop()
b.stop()
print(json.dumps(out))
"""


def machine() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    return f"{os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in load)}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="fresh interpreters per mode (default 5)")
    args = ap.parse_args(argv)
    print(f"machine: {machine()}; python {sys.version.split()[0]}")
    rows: dict[str, list[float]] = {}
    for mode in ("thread", "subprocess"):
        for _ in range(max(1, args.runs)):
            out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=120)
            if out.returncode != 0:
                print(out.stderr[-2000:], file=sys.stderr)
                return 1
            got = json.loads(out.stdout.strip().splitlines()[-1])
            rows.setdefault("import kafkawire.testing.plugin", []).append(got["plugin_import"])
            rows.setdefault(f"{mode}, first in the session", []).append(got["first"])
            if "again" in got:
                rows.setdefault(f"{mode}, again (modules loaded)", []).append(got["again"])
    print(f"\n{'case':38} {'median':>8} {'min':>8} {'max':>8}   target < 0.500 s")
    for name, xs in rows.items():
        med = statistics.median(xs)
        flag = "" if name.startswith("import") else ("  ok" if med < 0.5 else "  over")
        print(f"{name:38} {med:8.3f} {min(xs):8.3f} {max(xs):8.3f}{flag}")
    print(f"\nmachine after: {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
