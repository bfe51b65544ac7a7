"""bench_latency_tail's perf-tool mode: it reads the tool's progress lines and each thread's CPU right, and it runs
end to end against kafkawire (smallest run). No figure is asserted: the benchmark measures, these tests prove that
its readings are read right and that it still works."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_latency_tail.py"
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_latency_tail as tail  # noqa: E402


def test_perf_window_reads_progress_lines_only():
    # lines as ProducerPerformance 4.x prints them with --reporting-interval 100 (captured 2026-12-01)
    assert tail.perf_window(
        "5530 records sent, 55300.0 records/sec (54.00 MB/sec), 1048.2 ms avg latency, 1065.0 ms max latency."
    ) == (5530, 1048.2, 1065.0)
    assert tail.perf_window(
        "1 records sent, 2.1 records/sec (0.00 MB/sec), 480.0 ms avg latency, 480.0 ms max latency."
    ) == (
        1,
        480.0,
        480.0,
    )
    # the final summaries carry percentiles: they are not a window
    assert (
        tail.perf_window(
            "120000 records sent, 19936.866589 records/sec (19.47 MB/sec), 100.43 ms avg latency, 554.00 ms max "
            "latency, 1 ms 50th, 520 ms 95th, 547 ms 99th, 552 ms 99.9th."
        )
        is None
    )
    assert (
        tail.perf_window(
            "100000 steady state records sent, 19845.207382 records/sec (19.38 MB/sec), 36.80 ms avg latency, "
            "456.00 ms max latency, 1 ms 50th, 317 ms 95th, 423 ms 99th, 449 ms 99.9th."
        )
        is None
    )
    assert tail.perf_window("WARN something else") is None


def test_thread_kind_by_the_names_linux_keeps():
    # names as /proc shows them for a HotSpot JVM (15 characters at most)
    assert tail.thread_kind("C2 CompilerThre") == "jit"
    assert tail.thread_kind("C1 CompilerThre") == "jit"
    assert tail.thread_kind("GC Thread#0") == "gc"
    assert tail.thread_kind("G1 Conc#0") == "gc"
    assert tail.thread_kind("kafka-producer-") == "other"
    assert tail.thread_kind("java") == "other"
    assert tail.thread_kind("python") == "other"


def test_cpu_by_second_adds_each_threads_ticks_into_its_second():
    tick = os.sysconf("SC_CLK_TCK")
    samples = [
        (100.0, {("1", "java"): 0, ("2", "C2 CompilerThre"): 0}, {("9", "python"): 0}),
        (100.5, {("1", "java"): tick // 10, ("2", "C2 CompilerThre"): tick // 5}, {("9", "python"): tick // 10}),
        # a thread that started between samples counts from zero; one that ended is gone from the reading
        (101.2, {("2", "C2 CompilerThre"): tick // 5, ("3", "GC Thread#0"): tick // 10}, {("9", "python"): tick // 2}),
    ]
    seconds = tail.cpu_by_second(samples, 100.0)
    assert seconds[0] == pytest.approx({"client": 0.3, "jit": 0.2, "gc": 0.0, "broker": 0.1})
    assert seconds[1] == pytest.approx({"client": 0.1, "jit": 0.0, "gc": 0.1, "broker": 0.4})


def test_thread_ticks_sees_this_thread_working():
    me = str(threading.get_native_id())
    before = {tid: ticks for (tid, _), ticks in tail.thread_ticks(os.getpid()).items()}
    assert me in before, before
    end = time.thread_time() + 0.3  # bounded: 0.3 s of this thread's CPU
    while time.thread_time() < end:
        pass
    after = {tid: ticks for (tid, _), ticks in tail.thread_ticks(os.getpid()).items()}
    assert after[me] > before[me]


def test_perf_mode_runs_against_kafkawire(tmp_path):
    pytest.importorskip("confluent_kafka")  # the topic is created through librdkafka's admin client
    import kafka_perf

    from conftest import reference_unavailable
    from kafka_reference import KafkaUnavailable

    try:
        kafka_perf.PerfTools()
    except KafkaUnavailable as exc:
        reference_unavailable(str(exc))
    pin = ["--pin", "0:1"] if {0, 1} <= os.sched_getaffinity(0) else []
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--generator", "perf", *pin, "--rate", "2000", "--seconds", "1"]
        + ["--warmup", "1", "--acks", "all"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "steady state: 2,000 records" in out, out
    assert "second | client cores (JIT, GC) | broker cores" in out, out
    rows = [line.split("|") for line in out.splitlines() if line.strip()[:1].isdigit() and "|" in line]
    assert rows, out
    # both processes were read: some second shows CPU on each side
    assert any(float(r[1].split()[0]) > 0 for r in rows), out
    assert any(float(r[2]) > 0 for r in rows), out
    if pin:
        assert "pinned: broker on CPUs [0], client and probes on [1]" in out, out
