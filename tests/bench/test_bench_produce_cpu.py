"""bench_produce_cpu runs end to end against kafkawire (smallest mode): every case produced, read back in
full, and reported. No figure is asserted; the benchmark measures, this only proves it still works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_produce_cpu.py"


def test_smallest_run_reports_every_case_for_both_phases():
    pin = ["--pin", "0:1"] if {0, 1} <= os.sched_getaffinity(0) else []
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--brokers", "kafkawire", "--records", "2000", "--rounds", "1", "--window", "4"]
        + pin,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "kafkawire        disk, no fsync" in out  # the durability of each broker is stated
    assert "CPU read from " in out
    assert "; 4 produce requests in flight" in out
    if pin:
        assert "; brokers on CPUs [0], this client on [1]" in out
    assert out.count("; fresh page ") == 10  # fresh memory touched before each case's produce phase, warm pass too
    for case in ("100B p1 none", "100B p1 lz4", "100B p12 none", "100B p12 lz4", "100B p1 none x1"):
        # the untimed pass and the timed round both ran the case, and the table has both phases
        assert (
            sum(line.startswith(("warm", "round 0")) and f" {case:14} produce" in line for line in out.splitlines())
            == 2
        ), case
        for phase in ("produce", "consume"):
            assert any(line.startswith(f"{case:14} {phase:8}") for line in out.splitlines()), (case, phase)
    # the cost per request: the one-record case sends its 20,000 requests whatever --records says
    table = out[out.index("broker CPU per produce request (us)") :].splitlines()
    assert any(line.startswith("100B p1 none x1") and " 20,000 " in line for line in table), table
    assert any(line.startswith("100B p1 none   ") and " 4 " in line for line in table), table  # 2,000 / 500
    # fetch_all raises when a read comes back short: every record produced was read, 10 times
    assert "fetches" in out and "Traceback" not in proc.stderr
