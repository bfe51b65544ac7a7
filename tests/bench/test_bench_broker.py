"""The broker benchmark runs (smallest mode, kafkawire only) and reads Kafka's perf-tool summaries right.

No figure is asserted: the benchmark measures, these tests only prove that it
still works end to end and that its parsers read the tools' output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_broker.py"
sys.path.insert(0, str(ROOT / "benchmarks"))

import kafka_perf  # noqa: E402

SMALLEST = ["--quick", "--brokers", "kafkawire-memory", "--records", "2000", "--warmup", "0", "--seconds", "0.5"]


def run_bench(tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *SMALLEST, *extra, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "machine at start: " in proc.stdout and "machine at end: " in proc.stdout
    assert "RAM only" in proc.stdout  # every row states its durability
    return json.loads(out.read_text())["results"]["kafkawire-memory"]


def test_parse_producer_summary():
    out = (
        "40313 records sent, 8052.9 records/sec (7.86 MB/sec), 2221.5 ms avg latency, 3099.0 ms max latency.\n"
        "200000 records sent, 14577.259475 records/sec (14.24 MB/sec), 1827.25 ms avg latency, "
        "3099.00 ms max latency, 1784 ms 50th, 2616 ms 95th, 2902 ms 99th, 3056 ms 99.9th.\n"
    )
    assert kafka_perf.parse_producer(out) == {
        "records": 200000,
        "records_per_s": 14577.259475,
        "avg_ms": 1827.25,
        "max_ms": 3099.0,
        "p50_ms": 1784.0,
        "p95_ms": 2616.0,
        "p99_ms": 2902.0,
        "p999_ms": 3056.0,
    }
    assert kafka_perf.parse_producer(out.splitlines()[0]) is None  # an interval line is no summary


def test_parse_consumer_summary_skips_a_warning_between_header_and_data():
    out = (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
        "WARNING: Exiting before consuming the expected number of records: timeout (15000 ms) exceeded.\n"
        "2026-11-23 15:05:04:967, 2026-11-23 15:05:06:830, 195.3125, 104.8376, 200000, 107353.7305, 716, "
        "1147, 170.2812, 174367.9163\n"
    )
    assert kafka_perf.parse_consumer(out) == {
        "records": 200000,
        "records_per_s": 174367.9163,
        "records_per_s_total": 107353.7305,
        "join_ms": 716.0,
        "fetch_ms": 1147.0,
    }
    assert kafka_perf.parse_consumer("start.time, end.time\n") is None


def test_smallest_run_with_librdkafka(tmp_path):
    pytest.importorskip("confluent_kafka")
    results = run_bench(tmp_path, "--generators", "librdkafka", "--reads", "3")
    for key in (
        "librdkafka/produce/1024B p1 none acks=all",
        "librdkafka/consume/1024B p1 none acks=all",
        "librdkafka/latency/2000/s",
    ):
        assert results[key]["complete"], (key, results[key])
        assert results[key]["records"] > 0
    # the consume row is the median of three reads of the same topic, each read whole, each with the load
    # generator's CPU and its time to the first record
    consume = results["librdkafka/consume/1024B p1 none acks=all"]
    reads = consume["runs"]
    assert [r["records"] for r in reads] == [2000] * 3
    assert sorted(r["records_per_s"] for r in reads)[1] == consume["records_per_s"]
    for r in reads:
        assert 0 < r["generator_cpu_s"] and 0 < r["first_record_ms"] <= r["seconds"] * 1000
    assert results["librdkafka/produce/1024B p1 none acks=all"]["generator_cpu_s"] > 0


def test_smallest_run_with_kafka_perf_tools(tmp_path):
    pytest.importorskip("confluent_kafka")  # topics are created through librdkafka's admin client
    from conftest import reference_unavailable
    from kafka_reference import KafkaUnavailable

    try:
        kafka_perf.PerfTools()
    except KafkaUnavailable as exc:
        reference_unavailable(str(exc))
    results = run_bench(tmp_path, "--generators", "perf")
    for key in ("perf/produce/1024B p1 none acks=all", "perf/consume/1024B p1 none acks=all", "perf/latency/2000/s"):
        assert results[key]["complete"], (key, results[key])
        assert results[key]["records"] > 0


def test_smallest_run_with_kcat(tmp_path):
    import os
    import shutil

    pytest.importorskip("confluent_kafka")  # topics are created through librdkafka's admin client
    if shutil.which("kcat") is None:
        message = "kcat not installed (Debian package 'kcat'; tools/run-tests installs it as root)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    results = run_bench(tmp_path, "--generators", "kcat")
    for key in ("kcat/produce/1024B p1 none acks=all", "kcat/consume/1024B p1 none acks=all"):
        assert results[key]["complete"], (key, results[key])
        assert results[key]["records"] == 2000  # every record delivered, then every one read back
    assert not any(key.startswith("kcat/latency") for key in results)  # kcat reports no per-record latency
