"""The broker benchmark runs (smallest mode, kafkawire only) and reads Kafka's perf-tool summaries right.

No figure is asserted: the benchmark measures, these tests only prove that it
still works end to end and that its parsers read the tools' output.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_broker.py"
sys.path.insert(0, str(ROOT / "benchmarks"))

import kafka_perf  # noqa: E402

SMALLEST = ["--quick", "--brokers", "kafkawire-memory", "--records", "2000", "--warmup", "0", "--seconds", "0.5"]


def run_bench_json(tmp_path: Path, *args: str) -> tuple[dict, str]:
    """The --json output of a run and its printed tables."""
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "machine at start: " in proc.stdout and "machine at end: " in proc.stdout
    assert "RAM only" in proc.stdout  # every row states its durability
    return json.loads(out.read_text()), proc.stdout


def run_bench(tmp_path: Path, *extra: str) -> dict:
    return run_bench_json(tmp_path, *SMALLEST, *extra)[0]["results"]["kafkawire-memory"]


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
        "steady_state": False,
    }
    assert kafka_perf.parse_producer(out.splitlines()[0]) is None  # an interval line is no summary
    assert kafka_perf.parse_producer(out, steady=True) is None  # no warm-up, no steady-state line


def test_parse_producer_steady_state_summary():
    """ProducerPerformance with --warmup-records prints the whole run's summary, then the steady state's (the
    tool's output at 2,000/s, 2,000 warm-up records, against kafkawire)."""
    out = (
        "Warmup first 2000 records. Steady state results will print after the complete test summary.\n"
        "In steady state.\n"
        "9997 records sent, 1998.6 records/sec (1.95 MB/sec), 0.9 ms avg latency, 12.0 ms max latency.\n"
        "12000 records sent, 1996.007984 records/sec (1.95 MB/sec), 2.15 ms avg latency, 218.00 ms max latency, "
        "1 ms 50th, 6 ms 95th, 33 ms 99th, 41 ms 99.9th.\n"
        "10000 steady state records sent, 1994.415636 records/sec (1.95 MB/sec), 0.93 ms avg latency, "
        "12.00 ms max latency, 1 ms 50th, 3 ms 95th, 7 ms 99th, 10 ms 99.9th.\n"
    )
    steady = kafka_perf.parse_producer(out, steady=True)
    assert steady is not None and steady["records"] == 10000 and steady["p99_ms"] == 7.0 and steady["max_ms"] == 12.0
    assert steady["steady_state"]
    whole = kafka_perf.parse_producer(out)
    assert whole is not None and whole["records"] == 12000 and whole["p99_ms"] == 33.0


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
        "end_s": 1795446306.83,  # 2026-11-23 15:05:06.830 UTC
    }
    assert kafka_perf.parse_consumer("start.time, end.time\n") is None
    # an end time in another format costs only the CPU window, never the counts
    odd = kafka_perf.parse_consumer(out.replace("2026-11-23 15:05:06:830", "23/11/2026 15:05"))
    assert odd is not None and odd["records"] == 200000 and odd["end_s"] is None


BURN_IN_A_WINDOW = """
import time
def burn(seconds):
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass
burn(0.3)  # as a JVM's start-up: before the window
time.sleep(0.2)
start = time.time()
burn(0.5)
end = time.time()
print(start, end, flush=True)
time.sleep(0.3)
"""


def test_cpu_samples_give_a_window_its_own_cpu():
    """What marks a consuming perf phase paced by its client: the CPU its JVM used in the fetch phase alone,
    read off samples taken while it ran (the tool prints nothing meanwhile), not its start-up's or its idle
    tail's."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", BURN_IN_A_WINDOW], stdout=subprocess.PIPE, text=True)
    samples = kafka_perf.CpuSamples(proc.pid)
    out, _ = proc.communicate(timeout=60)
    samples.stop()
    start, end = map(float, out.split())

    def gap(when: float) -> float:
        """The spacing of the readings either side of ``when``: the most CPU the interpolation there can
        misplace (the thread reads every 20 ms, later on a busy machine)."""
        times = [t for t, _cpu in samples.readings]
        return min(b - a for a, b in zip(times, times[1:]) if a <= when <= b)

    ticks = 0.03  # /proc counts in 10 ms ticks, at each of the readings used
    assert abs(samples.between(start, end) - 0.5) <= ticks + gap(start) + gap(end)  # 0.5 s burnt in it
    assert samples.between(end + 0.05, end + 0.25) <= ticks + gap(end + 0.05)  # asleep after it
    assert samples.at(samples.readings[-1][0] + 10) is None  # past the last reading: no figure


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
        assert 0 < r["generator_main_cpu_s"] <= r["generator_cpu_s"]
    produce = results["librdkafka/produce/1024B p1 none acks=all"]
    # 2,000 records: one whole chunk of produce_batch and part of the next
    assert produce["sent"] == produce["records"] == 2000 and produce["errors"] == 0
    assert 0 < produce["generator_main_cpu_s"] <= produce["generator_cpu_s"]


def _rdkafka_produce(topic: str, partitions: int, config: dict, records: int, size: int) -> dict:
    """bench_broker's librdkafka producer, ``records`` of ``size`` bytes into a new topic of a kafkawire broker."""
    pytest.importorskip("confluent_kafka")
    import bench_broker

    from kafkawire.testing import broker

    with broker() as b:
        bench_broker.create_topic(b.bootstrap, topic, partitions, config)
        return bench_broker.rdkafka_produce(
            b.bootstrap, topic, records, bench_broker.Case(size, partitions, "none", "1")
        )


def test_librdkafka_produce_retries_what_a_full_local_queue_refused(monkeypatch):
    """produce_batch takes part of a chunk when librdkafka's queue is full; the rest is sent again, once."""
    import bench_broker

    monkeypatch.setattr(bench_broker, "PRODUCE_QUEUE", 1500)
    r = _rdkafka_produce("full-queue", 3, {}, 5000, 100)
    assert r["complete"] and r["sent"] == r["records"] == 5000 and r["errors"] == 0, r


def test_librdkafka_produce_counts_what_the_broker_refused():
    """Only failed records get a delivery report: records over the topic's max.message.bytes are refused by
    the broker (MESSAGE_TOO_LARGE) and none of them counts as delivered."""
    r = _rdkafka_produce("too-large", 1, {"max.message.bytes": "500"}, 2000, 1024)
    assert not r["complete"] and r["records"] == 0 and r["errors"] == r["sent"] == 2000, r


def test_librdkafka_produce_counts_what_librdkafka_refused_and_does_not_retry_it(monkeypatch):
    """Records over librdkafka's own message.max.bytes never leave the process: produce_batch refuses them at
    once, and they count as failed (sent again instead, none would count as sent before the phase's time ran
    out, shortened here to 10 s)."""
    import bench_broker

    monkeypatch.setattr(bench_broker, "payloads", lambda size, count=64: [b"x" * 1_000_100] * count)
    monkeypatch.setattr(bench_broker, "PHASE_LIMIT", 10.0)
    r = _rdkafka_produce("too-large-here", 1, {}, 50, 1_000_100)
    assert not r["complete"] and r["records"] == 0 and r["errors"] == r["sent"] == 50, r


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
    consume = results["perf/consume/1024B p1 none acks=all"]
    if consume["fetch_ms"] >= kafka_perf.CPU_WINDOW_MIN_S * 1000:  # long enough to be read off the samples
        assert consume["generator_span_s"] == consume["fetch_ms"] / 1000 and consume["generator_cpu_s"] > 0, consume
    else:
        assert "generator_cpu_s" not in consume, consume
    # 0.5 s at 2,000/s measured after 1 s of warm-up records: the figures are the steady state's 1,000
    latency = results["perf/latency/2000/s"]
    assert latency["records"] == 1000 and latency["steady_state"], latency


def test_smallest_run_with_kcat(tmp_path):
    import os
    import shutil

    pytest.importorskip("confluent_kafka")  # topics are created through librdkafka's admin client
    if shutil.which("kcat") is None:
        message = "kcat not installed (Debian package 'kcat'; tools/run-tests installs it as root)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    results = run_bench(tmp_path, "--generators", "kcat", "--sequential")  # the one-target-at-a-time order
    for key in ("kcat/produce/1024B p1 none acks=all", "kcat/consume/1024B p1 none acks=all"):
        assert results[key]["complete"], (key, results[key])
        assert results[key]["records"] == 2000  # every record delivered, then every one read back
    assert not any(key.startswith("kcat/latency") for key in results)  # kcat reports no per-record latency


MAIN_AND_HELPER = """
import threading, time
def burn(seconds):
    t = time.thread_time()
    while time.thread_time() - t < seconds:
        pass
helper = threading.Thread(target=burn, args=(0.6,))
helper.start()
burn(0.3)
helper.join()
"""


def test_a_kcat_phase_reads_its_main_threads_cpu_apart_from_the_others():
    """The reading that marks a phase paced by its client: the main thread's CPU, not the whole process's."""
    import sys

    import bench_broker

    done, _seconds = bench_broker._run_kcat([sys.executable, "-c", MAIN_AND_HELPER])
    assert done.returncode == 0
    assert 0.3 - bench_broker.MAIN_THREAD_SAMPLE_S - 0.02 <= done.main_cpu_s < 0.6  # the helper's 0.6 s not in it
    assert done.cpu_s >= 0.85  # both threads' in the process's


def test_interleaved_rounds_rotate_targets_and_phases_move_equal_bytes(tmp_path):
    """Both targets up at once, each round's phases on one then the other, round r starting with target r mod 2;
    a 100 B phase gets ten times and a bit the records of a 1 KiB one (the same bytes)."""
    pytest.importorskip("confluent_kafka")
    names = ["kafkawire-memory", "kafkawire-nofsync"]
    saved, stdout = run_bench_json(
        tmp_path,
        "--quick",
        "--brokers",
        ",".join(names),
        "--generators",
        "librdkafka",
        "--sizes",
        "1024,100",
        "--records",
        "1000",
        "--repeat",
        "2",
        "--reads",
        "1",
        "--warmup",
        "0",
        "--seconds",
        "0.3",
    )
    throughput = [(s["round"], s["target"], s["case"]) for s in saved["schedule"] if s["round"] is not None]
    assert throughput == [
        (0, names[0], "1024B p1 none acks=all"),
        (0, names[1], "1024B p1 none acks=all"),
        (1, names[1], "1024B p1 none acks=all"),
        (1, names[0], "1024B p1 none acks=all"),
        (2, names[0], "100B p1 none acks=all"),
        (2, names[1], "100B p1 none acks=all"),
        (3, names[1], "100B p1 none acks=all"),
        (3, names[0], "100B p1 none acks=all"),
    ]
    for name in names:
        results = saved["results"][name]
        for size, records in ((1024, 1000), (100, 10240)):
            produce = results[f"librdkafka/produce/{size}B p1 none acks=all"]
            consume = results[f"librdkafka/consume/{size}B p1 none acks=all"]
            assert [r["records"] for r in produce["runs"]] == [records] * 2, (name, size)
            assert [r["records"] for r in consume["runs"]] == [records] * 2, (name, size)
            assert sorted(produce["rounds"]) == (["0", "1"] if size == 1024 else ["2", "3"])
        # the other target stayed up while one ran: its CPU over that time is counted
        assert results["idle"]["seconds"] > 0 and results["idle"]["cpu_s"] >= 0
        assert results["rss_mb_after_warmup"] > 0 and results["rss_mb_at_end"] > 0
    assert "10,240 of 100 B (equal bytes" in stdout
    assert "round r starting with target r mod n" in stdout


def test_ratio_shows_the_spread_of_per_round_ratios():
    import bench_broker

    key = "kcat/produce/100B p1 none acks=1"
    mine = {"records_per_s": 300.0, "rounds": {"0": 300.0, "1": 360.0, "2": 200.0}}
    peer = {"records_per_s": 200.0, "rounds": {"0": 200.0, "1": 150.0, "2": 250.0}}
    # ratio of the medians, then the lowest and highest ratio of one round's two sides
    assert bench_broker.ratio_of(key, mine, peer) == "1.50 (0.80-2.40)"
    # a single round (or rounds that do not pair) has no spread to show
    assert bench_broker.ratio_of(key, {"records_per_s": 3.0, "rounds": {"0": 3.0}}, {"records_per_s": 2.0}) == "1.50"


def test_a_ratio_of_two_phases_paced_by_the_client_is_marked():
    import bench_broker

    key = "librdkafka/produce/100B p1 none acks=1"
    busy = {"records_per_s": 300.0, "seconds": 2.0, "generator_main_cpu_s": 1.9}  # the Python thread 95% busy
    idle = {"records_per_s": 200.0, "seconds": 2.0, "generator_main_cpu_s": 1.0}
    assert bench_broker.ratio_of(key, busy, dict(busy, records_per_s=200.0)) == "1.50c"
    assert bench_broker.ratio_of(key, busy, idle) == "1.50"  # one side had room: the broker may have set its pace
    assert bench_broker.ratio_of(key, {"records_per_s": 3.0}, {"records_per_s": 2.0}) == "1.50"  # no thread figure


def test_with_pinned_generators_a_ratio_of_two_phases_filling_their_cpus_is_marked():
    """--pin: a generator using 90% or more of the CPUs it was given set the pace, whatever its main thread did
    (kcat's main thread hands records over, librdkafka's own threads send them)."""
    import bench_broker

    key = "kcat/produce/1024B p1 none acks=1"
    full = {"records_per_s": 300.0, "seconds": 2.0, "generator_main_cpu_s": 1.4, "generator_cpu_s": 1.95}
    room = dict(full, records_per_s=200.0, generator_cpu_s=1.5)
    assert bench_broker.ratio_of(key, full, dict(full, records_per_s=200.0), 1) == "1.50c"
    assert bench_broker.ratio_of(key, full, room, 1) == "1.50"  # one side's generator had room
    assert bench_broker.ratio_of(key, full, dict(full, records_per_s=200.0)) == "1.50"  # not pinned: 2 CPUs to use
    assert bench_broker.ratio_of(key, full, dict(full, records_per_s=200.0), 2) == "1.50"  # pinned to two CPUs


def test_with_pinned_generators_a_perf_tool_phase_filling_its_cpu_is_marked():
    """The perf tool's produce phases carry its JVM's CPU over the span from its first progress line to its
    summary (no main thread figure): that span, not the tool's whole life, is what the mark compares."""
    import bench_broker

    key = "perf/produce/1024B p1 none acks=1"
    full = {"records_per_s": 300.0, "generator_cpu_s": 1.9, "generator_span_s": 2.0}
    room = dict(full, records_per_s=200.0, generator_cpu_s=1.2)
    assert bench_broker.generator_cores(full) == pytest.approx(0.95)
    assert bench_broker.fmt_generator_cores(room) == "0.60"
    assert bench_broker.ratio_of(key, full, dict(full, records_per_s=200.0), 1) == "1.50c"
    assert bench_broker.ratio_of(key, full, room, 1) == "1.50"
    assert bench_broker.ratio_of(key, full, dict(full, records_per_s=200.0)) == "1.50"  # not pinned
    # a consume phase of the tool has no CPU figure: never marked
    assert bench_broker.ratio_of(key, {"records_per_s": 3.0}, {"records_per_s": 2.0}, 1) == "1.50"


def _perf_tools():
    from conftest import reference_unavailable
    from kafka_reference import KafkaUnavailable

    try:
        return kafka_perf.PerfTools()
    except KafkaUnavailable as exc:
        reference_unavailable(str(exc))


def test_perf_tool_produce_measures_its_jvms_cpu_while_it_sends(tmp_path):
    pytest.importorskip("confluent_kafka")  # the topic is created through librdkafka's admin client
    import bench_broker

    from kafkawire.testing import broker

    perf = _perf_tools()
    payloads = perf.payload_file("p.txt", bench_broker.payloads(100))
    with broker() as b:
        bench_broker.create_topic(b.bootstrap, "perf-cpu", 1, {})
        # 2 s at 5,000/s: progress lines every 200 ms, then the summary
        r = perf.produce(b.bootstrap, "perf-cpu", 10_000, payloads, throughput=5_000, measure_cpu=True, timeout=120)
    assert r["complete"], r
    assert 1.0 < r["generator_span_s"] < 2.5, r  # from the first progress line to the summary
    assert r["generator_cpu_s"] > 0, r


def test_perf_tool_produce_past_its_time_limit_is_killed_and_says_so():
    perf = _perf_tools()
    payloads = perf.payload_file("p.txt", [b"x" * 10])
    # nothing listens on port 9 of 127.0.0.1: the producer waits for metadata (max.block.ms, 60 s) until killed
    r = perf.produce("127.0.0.1:9", "nowhere", 10, payloads, measure_cpu=True, timeout=3)
    assert not r["complete"] and "killed after 3 s" in r["error"], r
    assert "generator_cpu_s" not in r


BURN_AND_END = """
import threading, time
def burn():
    t = time.process_time()
    while time.process_time() - t < 0.2:
        pass
for _ in range(3):
    th = threading.Thread(target=burn)
    th.start()
    th.join()
print("done", flush=True)
time.sleep(30)
"""


def test_a_broker_cpu_reading_keeps_the_time_of_threads_that_ended():
    """A runtime that ends worker threads (Tansu's) must not make the broker's CPU reading go backwards: the
    idle and per-phase CPU figures are differences of two readings."""
    import bench_broker as bb

    proc = subprocess.Popen([sys.executable, "-c", BURN_AND_END], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "done"
        # three threads of 0.2 s each have ended; the main thread is asleep
        assert bb.cpu_seconds(proc) >= 0.55
    finally:
        proc.kill()
        proc.wait()


def test_a_cpu_reading_never_goes_below_the_one_before(monkeypatch):
    """A thread that ends moves from schedstat nanoseconds to clock ticks that round down, so two readings can
    come out a few ticks backwards; a process's CPU time cannot, and an idle target's CPU over a phase (a
    difference of two readings) must not come out negative."""
    import bench_broker as bb

    proc = subprocess.Popen([sys.executable, "-c", BURN_AND_END], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "done"
        first = bb.cpu_seconds(proc)
        assert first >= 0.55
        real = bb._stat_ticks
        # the whole process's ticks read low (the ended threads' time lost): the raw reading drops by ~0.6 s
        monkeypatch.setattr(bb, "_stat_ticks", lambda path: real(path) - (0 if "task" in str(path) else 100))
        assert bb.cpu_seconds(proc) == first
        monkeypatch.setattr(bb, "_stat_ticks", real)
        assert bb.cpu_seconds(proc) >= first
    finally:
        proc.kill()
        proc.wait()


# a wrapper process whose child, started before the meter, burns in threads that end once told to (stdin)
WRAPPED_BURN = "import subprocess, sys; child = subprocess.Popen([sys.executable, '-c', sys.argv[1]]); child.wait()"
BURN_ON_LINE = "import sys; print('ready', flush=True); sys.stdin.readline()\n" + BURN_AND_END


def test_cpu_meter_counts_ended_threads_of_a_child_in_nanoseconds():
    """CpuMeter, where a cgroup can be made (CI runs as root): the broker's child process (a broker started
    through a wrapper) is counted, threads that ended while metered are counted in full, and the group is
    removed when the meter closes. Elsewhere it falls back to cpu_seconds, which must still see the threads."""
    import bench_broker as bb

    proc = subprocess.Popen(
        [sys.executable, "-c", WRAPPED_BURN, BURN_ON_LINE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        with bb.CpuMeter(proc) as meter:
            can_group = os.access(bb._CPUACCT, os.W_OK)
            assert (meter.group is not None) == can_group, meter.how
            before = meter()
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "done"
            used = meter() - before
            group = meter.group
        if can_group:
            # three threads of 0.2 s, all ended, all in a child the meter found: nanoseconds, not ticks
            assert 0.55 <= used < 1.5, used
            assert group is not None and not group.exists()
        else:  # /proc of the wrapper alone: its child's time is not there (the reason for the cgroup)
            assert used >= 0
    finally:
        for pid in bb._descendants(proc.pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()


def footer_of(capsys, keys: list[str]) -> str:
    """The paragraph print_tables writes after the tables, for one target's figures under ``keys``."""
    import argparse

    import bench_broker

    phase = {"records_per_s": 1000.0, "size": 100, "records": 1000, "seconds": 1.0, "complete": True}
    results = {"kafkawire-memory": {"load_at_start": [0.0, 0.0, 0.0], **{k: dict(phase) for k in keys}}}
    args = argparse.Namespace(records=1000, repeat=1, reads=3, seconds=1.0, equal_bytes=True, interleaved=False)
    bench_broker.print_tables(results, {"mb_per_s": 1000.0}, args)
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_footer_describes_only_the_generators_and_cases_that_ran(capsys):
    explained = {
        "librdkafka": "librdkafka produce: produce_batch",
        "perf": "ProducerPerformance",
        "kcat": "kcat: librdkafka driven from C",
    }
    for gen in explained:
        footer = footer_of(capsys, [f"{gen}/produce/100B p1 none acks=all", f"{gen}/consume/100B p1 none acks=all"])
        assert footer.startswith("Records per throughput phase:"), footer
        for other, text in explained.items():
            assert (text in footer) == (other == gen), (gen, other, footer)
        assert "Latency case" not in footer  # no latency phase ran
    footer = footer_of(capsys, ["kcat/produce/100B p1 none acks=all", "librdkafka/latency/2000/s"])
    assert "Latency case: 1024 B" in footer and "kcat: librdkafka" in footer and "librdkafka produce:" in footer
    assert "ProducerPerformance" not in footer


def test_footer_gives_how_long_the_reported_phases_lasted(capsys):
    """Rows of 1,000 records at 1,000/s and 4,000/s: phases of 1 and 0.25 s; the latency row is no phase."""
    import argparse

    import bench_broker

    one = {"records_per_s": 1000.0, "size": 100, "records": 1000, "complete": True}
    quick = dict(one, records_per_s=4000.0)
    cut = dict(one, records_per_s=10.0, records=1, complete=False)  # a phase cut short is not a length
    latency = {"records_per_s": 2000.0, "size": 1024, "records": 10, "p99_ms": 1.0}
    results = {
        "kafkawire-memory": {
            "load_at_start": [0.0, 0.0, 0.0],
            "librdkafka/produce/100B p1 none acks=all": one,
            "librdkafka/consume/100B p1 none acks=all": quick,
            "librdkafka/produce/100B p12 none acks=all": cut,
            "librdkafka/latency/2000/s": latency,
        }
    }
    args = argparse.Namespace(records=1000, repeat=1, reads=3, seconds=1.0, equal_bytes=True, interleaved=False)
    bench_broker.print_tables(results, {"mb_per_s": 1000.0}, args)
    footer = capsys.readouterr().out.strip().splitlines()[-1]
    assert "lasted 0.25 to 1.00 s, median 0.62 s" in footer, footer


def _bytes_written() -> int:
    return int(
        next(line for line in Path("/proc/self/io").read_text().splitlines() if line.startswith("wchar:")).split()[1]
    )


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="reads the process's written bytes from /proc")
def test_warm_page_cache_writes_the_megabytes_asked_and_leaves_no_file(tmp_path):
    import bench_broker

    before = _bytes_written()
    per_page = bench_broker.warm_page_cache(8, str(tmp_path))
    assert _bytes_written() - before >= 8 << 20
    assert per_page > 0
    assert list(tmp_path.iterdir()) == []


def test_page_cache_warmed_before_a_phase_covers_what_it_writes():
    import argparse

    import bench_broker

    args = argparse.Namespace(warm_mb=512)
    assert bench_broker.warm_mb_for(args, 100_000, 1024) == 512  # a small phase: the floor
    assert bench_broker.warm_mb_for(args, 1_000_000, 1024) >= 1_000_000 * 1024 >> 20
    assert bench_broker.warm_mb_for(args, 10_240_000, 100) >= 10_240_000 * 100 >> 20
    assert bench_broker.warm_mb_for(argparse.Namespace(warm_mb=0), 1_000_000, 1024) == 0


def _rss_pages() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1])


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the process's resident pages from /proc")
def test_warm_memory_touches_fresh_pages_and_gives_them_back(monkeypatch):
    """warm_memory faults in every page of the memory it maps (the resident set holds all of it just before
    the mapping is closed) and unmaps it before returning (the resident set is back where it was)."""
    import mmap

    import bench_broker

    at_close = []

    class Watched(mmap.mmap):
        def close(self):
            at_close.append(_rss_pages())
            super().close()

    monkeypatch.setattr(bench_broker.mmap, "mmap", Watched)
    before = _rss_pages()
    per_page = bench_broker.warm_memory(16)
    after = _rss_pages()
    pages = (16 << 20) // mmap.PAGESIZE
    assert per_page > 0
    assert len(at_close) == 1 and at_close[0] - before >= pages * 0.9, (before, at_close)
    assert after - before < pages // 4, (before, after)  # none of it kept


def _cpus_of_every_thread(pid: int) -> set[str]:
    out = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            for line in (task / "status").read_text().splitlines():
                if line.startswith("Cpus_allowed_list:"):
                    out.add(line.split(":", 1)[1].strip())
    return out


def test_pin_starts_a_broker_on_its_cpus_and_keeps_the_generators_on_theirs():
    """With --pin, a broker and every thread it starts run on the broker CPUs from birth, and this process (the
    librdkafka generator, and what it spawns: kcat, the perf tool) is back on the generator CPUs after."""
    import bench_broker

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("--pin needs two CPUs")
    broker_cpu, generator_cpu = cpus[0], cpus[1]
    every = os.sched_getaffinity(0)
    pin = bench_broker.parse_pin(f"{broker_cpu}:{generator_cpu}")
    os.sched_setaffinity(0, {generator_cpu})
    try:
        with bench_broker.running(bench_broker.TARGETS["kafkawire-memory"], pin) as (bootstrap, cpu, _rss):
            assert os.sched_getaffinity(0) == {generator_cpu}
            bench_broker.create_topic(bootstrap, "pinned", 1, {})  # storage and network threads at work
            threads = _cpus_of_every_thread(cpu.proc.pid)  # the CpuMeter's broker process
            assert threads == {str(broker_cpu)}
            child = subprocess.run(["grep", "Cpus_allowed_list", "/proc/self/status"], capture_output=True, text=True)
            assert child.stdout.split(":", 1)[1].strip() == str(generator_cpu)  # what the bench spawns
    finally:
        os.sched_setaffinity(0, every)


def test_pin_wants_two_apart_sets_of_usable_cpus():
    import argparse

    import bench_broker

    cpus = sorted(os.sched_getaffinity(0))
    assert bench_broker.parse_pin(f"{cpus[0]}:{cpus[-1]}") == (frozenset({cpus[0]}), frozenset({cpus[-1]}))
    for bad in ("0", "0:0", "a:1", f"0:{max(cpus) + 1}", "0,1:1"):
        with pytest.raises(argparse.ArgumentTypeError):
            bench_broker.parse_pin(bad)


def test_a_generator_that_stores_nothing_in_the_warm_up_is_not_run_on_that_target(monkeypatch):
    """A client that cannot talk to a target (its warm-up produce stored nothing) gets its phases there recorded as
    INCOMPLETE with the reason at once, instead of each waiting out its time limit; the other clients run."""
    import argparse

    import bench_broker as bb

    @contextlib.contextmanager
    def running(target, pin=None):
        yield "127.0.0.1:1", (lambda: 0.0), (lambda: 1.0)

    calls = []

    def produced(n, error=None):
        return {"records": n, "records_per_s": float(n), "complete": bool(n), "error": error}

    class Perf:
        def produce(self, *args, **kwargs):
            calls.append("perf produce")
            return produced(0, "Reading payloads\nTimeoutException: Expiring 967 record(s)\n")

        def consume(self, *args, **kwargs):  # pragma: no cover - must not be reached
            calls.append("perf consume")

    monkeypatch.setattr(bb, "running", running)
    monkeypatch.setattr(bb, "create_topic", lambda *a, **k: None)
    monkeypatch.setattr(bb, "delete_topic", lambda *a, **k: None)
    monkeypatch.setattr(bb, "warm_page_cache", lambda *a: None)
    monkeypatch.setattr(bb, "rdkafka_produce", lambda *a: calls.append("librdkafka produce") or produced(100))
    monkeypatch.setattr(bb, "rdkafka_consume", lambda *a: calls.append("librdkafka consume") or produced(100))
    monkeypatch.setattr(bb, "kcat_payload_file", lambda *a: None)
    monkeypatch.setattr(bb, "kcat_produce", lambda *a: calls.append("kcat produce") or produced(0, "Read underflow"))
    monkeypatch.setitem(bb.perf_files, 1024, Path("payloads"))
    args = argparse.Namespace(
        warmup=100,
        codecs=["none", "lz4"],
        partitions=[1],
        generators=["librdkafka", "perf", "kcat"],
        scratch=None,
        pin=None,
    )
    logged = []
    with contextlib.ExitStack() as stack:
        live = bb.start_target(stack, bb.TARGETS["kafkawire-memory"], args, Perf(), logged.append)
    # each unusable client tried once (the first codec's warm-up), never consumed with; librdkafka ran both codecs
    assert calls == [
        "librdkafka produce",
        "librdkafka consume",
        "perf produce",
        "kcat produce",
        "librdkafka produce",
        "librdkafka consume",
    ]
    assert live.unusable == {"perf": "TimeoutException: Expiring 967 record(s)", "kcat": "Read underflow"}
    assert any("perf stored nothing in the warm-up" in line and "Expiring" in line for line in logged)

    calls.clear()
    case = bb.Case(1024, 1, "none", "1")
    for gen in ("perf", "kcat"):
        p, c = bb.throughput_round(live, gen, case, args, Perf())
        assert p["complete"] is False and c["complete"] is False and p["records"] == 0
        assert p["error"].startswith(f"not run: {gen} stored nothing here in the warm-up")
    bb.latency_run(live, "perf", 2000, args, Perf(), logged.append)
    latency = live.results["perf/latency/2000/s"]
    assert latency["complete"] is False and latency["saturated"] is True
    assert calls == []  # no phase touched a client
