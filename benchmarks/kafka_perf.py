"""Kafka's own load generators (kafka-producer-perf-test, kafka-consumer-perf-test) as a benchmark driver.

The classes ``org.apache.kafka.tools.ProducerPerformance`` and
``org.apache.kafka.tools.ConsumerPerformance`` of the pinned kafka-tools set
(``tools/kafka_pins.py``, resolved by ``tools/kafka_reference.py``) run in a
JVM of their own against any broker; their summaries are parsed into the same
fields as the librdkafka phases of ``bench_broker.py``:

- producer: records, records_per_s, avg_ms, max_ms, p50_ms, p95_ms, p99_ms, p999_ms
  (the tool prints percentiles in whole milliseconds and the average with two decimals);
- consumer: records, records_per_s (fetch phase, i.e. after the group join),
  records_per_s_total (including the join), join_ms, fetch_ms, end_s (the fetch
  phase's end, seconds since the epoch: the tool's JVM runs in UTC).

MB/s is left to the caller (records/s times the record size, in 10^6 bytes):
the tools count in MiB.

Every run is bounded by a subprocess timeout; a run that fails, or counts
fewer records than asked for, comes back with ``complete`` false and the tail
of its output in ``error``.
"""

from __future__ import annotations

import atexit
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

import kafka_pins  # noqa: E402  (tools/ is not a package)
import kafka_reference  # noqa: E402

PRODUCER = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER = "org.apache.kafka.tools.ConsumerPerformance"

# The tools log to stderr at WARN, so stdout carries only their summaries.
LOG4J2_PROPERTIES = """\
status = error
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %p %m (%c)%n
"""

_SUMMARY = re.compile(
    r"(?P<records>\d+) (?P<steady>steady state )?records sent, (?P<rate>[\d.]+) records/sec \([\d.]+ MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99\.9th"
)


def parse_producer(stdout: str, steady: bool = False) -> dict | None:
    """The final summary line of ProducerPerformance (the interval lines carry no percentiles); with ``steady``,
    the one of the records after its ``--warmup-records``, printed after the whole run's."""
    found = None
    for line in stdout.splitlines():
        m = _SUMMARY.search(line)
        if m and bool(m.group("steady")) == steady:
            found = m
    if found is None:
        return None
    g = found.groupdict()
    return {
        "records": int(g["records"]),
        "records_per_s": float(g["rate"]),
        "avg_ms": float(g["avg"]),
        "max_ms": float(g["max"]),
        "p50_ms": float(g["p50"]),
        "p95_ms": float(g["p95"]),
        "p99_ms": float(g["p99"]),
        "p999_ms": float(g["p999"]),
        "steady_state": steady,
    }


def parse_consumer(stdout: str) -> dict | None:
    """The header and data lines of ConsumerPerformance, by column name."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    names: list[str] = []
    for line in lines:
        if line.startswith("start.time"):
            names = [n.strip() for n in line.split(",")]
            continue
        values = [v.strip() for v in line.split(",")]
        if names and len(values) == len(names):  # a WARNING line may come between header and data
            row = dict(zip(names, values))
            try:
                return {
                    "records": int(row["data.consumed.in.nMsg"]),
                    "records_per_s": float(row["fetch.nMsg.sec"]),
                    "records_per_s_total": float(row["nMsg.sec"]),
                    "join_ms": float(row["rebalance.time.ms"]),
                    "fetch_ms": float(row["fetch.time.ms"]),
                    "end_s": _tool_time(row.get("end.time", "")),
                }
            except (KeyError, ValueError):
                return None
    return None


def _tool_time(text: str) -> float | None:
    """The tools' default date format (yyyy-MM-dd HH:mm:ss:SSS), in UTC (``PerfTools.command`` runs the JVM so),
    as seconds since the epoch; None for any other text (only the CPU window needs it: the counts stand without)."""
    try:
        stamp = datetime.datetime.strptime(text[:19], "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.UTC)
        return stamp.timestamp() + int(text[20:23]) / 1000
    except ValueError:
        return None


# The consuming tool prints nothing between its header and its summary, so its JVM's CPU is read this often in a
# thread of the benchmark's and the fetch phase's share (the summary's end.time less its fetch.time.ms, to its
# end.time) taken off the readings either side of each end; /proc counts in 10 ms ticks, so a phase shorter than
# CPU_WINDOW_MIN_S gets no figure.
CPU_SAMPLE_S = 0.02
CPU_WINDOW_MIN_S = 0.2


class CpuSamples:
    """A process's CPU seconds (``process_cpu_s``) read every ``interval`` seconds by wall-clock time, from start
    until ``stop`` or the process is gone."""

    def __init__(self, pid: int, interval: float = CPU_SAMPLE_S):
        self.readings: list[tuple[float, float]] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(pid, interval), daemon=True)
        self._thread.start()

    def _run(self, pid: int, interval: float) -> None:
        while True:
            cpu = process_cpu_s(pid)
            if cpu is None:
                return
            self.readings.append((time.time(), cpu))
            if self._stopped.wait(interval):
                return

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def at(self, when: float) -> float | None:
        """The CPU seconds used by ``when``, between the readings either side of it; None outside them."""
        readings = self.readings
        for (t0, c0), (t1, c1) in zip(readings, readings[1:]):
            if t0 <= when <= t1:
                return c0 if t1 == t0 else c0 + (c1 - c0) * (when - t0) / (t1 - t0)
        return None

    def between(self, start: float, end: float) -> float | None:
        first, last = self.at(start), self.at(end)
        return None if first is None or last is None else last - first


# ProducerPerformance's progress interval when its CPU is measured: the span measured starts at the first line
PROGRESS_MS = 200


def process_cpu_s(pid: int, thread: int | None = None) -> float | None:
    """CPU seconds (user + system) process ``pid`` has used so far, every thread's, or with ``thread`` that thread's
    alone (Linux's /proc); None once it is gone or where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # after the command name, which may hold spaces
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def producer_args(
    bootstrap: str,
    topic: str,
    records: int,
    payload_file: Path,
    throughput: int = -1,
    warmup_records: int = 0,
    props: dict[str, object] | None = None,
) -> list[str]:
    """ProducerPerformance's arguments: ``records`` records after ``warmup_records`` more, at most
    ``throughput``/s, drawn from ``payload_file``, with the producer settings ``props``."""
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records + warmup_records)]
    args += ["--throughput", str(throughput), "--payload-file", str(payload_file)]
    if warmup_records:
        args += ["--warmup-records", str(warmup_records)]
    if props:
        args += ["--command-property", *(f"{k}={v}" for k, v in props.items())]
    return args


def run_watched(
    cmd: list[str],
    timeout: float,
    on_line: Callable[[str], None],
    on_start: Callable[[subprocess.Popen], None] | None = None,
) -> tuple[int | None, str]:
    """Run ``cmd`` and hand each line of its stdout to ``on_line`` as it arrives (``on_start`` gets the process
    first, for samplers of its own); killed after ``timeout`` seconds by a watchdog, since a hung JVM prints
    nothing that would wake the reading loop. (exit code, None when killed; its stderr)."""
    with tempfile.TemporaryFile(mode="w+") as err_file:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err_file, stdin=subprocess.DEVNULL, text=True)
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            proc.kill()

        watchdog = threading.Timer(timeout, expire)
        watchdog.start()
        try:
            if on_start is not None:
                on_start(proc)
            assert proc.stdout is not None  # (stdout=PIPE)
            for line in proc.stdout:
                on_line(line)
            code: int | None = proc.wait()
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err_file.seek(0)
        err = err_file.read()
    if expired.is_set():
        code = None
        err += f"\n(killed after {timeout:.0f} s)"
    return code, err


class PerfTools:
    """Runs the two tools from the pinned kafka-tools jars (resolved on construction)."""

    def __init__(self, heap: str = "512m"):
        self.classpath = kafka_reference.classpath(kafka_pins.TOOLS)
        self.version = kafka_pins.KAFKA_TOOLS
        self._dir = Path(tempfile.mkdtemp(prefix="kafkawire-perf-tools-"))
        atexit.register(shutil.rmtree, self._dir, True)
        self._log_config = self._dir / "log4j2.properties"
        self._log_config.write_text(LOG4J2_PROPERTIES)
        self.heap = heap

    def payload_file(self, name: str, payloads: list[bytes]) -> Path:
        """Payloads, one a line, for ``--payload-file`` (they must be printable and free of newlines)."""
        for p in payloads:
            if b"\n" in p or not p.isascii():
                raise ValueError("payload-file records must be ASCII without newlines")
        path = self._dir / name
        path.write_bytes(b"\n".join(payloads))
        return path

    def command(self, main: str, args: list[str]) -> list[str]:
        """The java command line that runs ``main`` of the tools' jars with ``args``."""
        return [
            kafka_reference._tool("java"),
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            "-Duser.language=en",
            "-Duser.country=US",
            "-Duser.timezone=UTC",  # the consuming tool's summary times, read as UTC (_tool_time)
            f"-Dlog4j2.configurationFile={self._log_config}",
            "-cp",
            self.classpath,
            main,
            *args,
        ]

    def _java(self, main: str, args: list[str], timeout: float) -> tuple[int | None, str, str]:
        cmd = self.command(main, args)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            return None, out, err + f"\n(killed after {timeout:.0f} s)"
        return proc.returncode, proc.stdout, proc.stderr

    def _java_sampled(
        self, main: str, args: list[str], timeout: float
    ) -> tuple[int | None, str, str, tuple[float, float] | None]:
        """As ``_java``, and the JVM's CPU seconds and the wall seconds from its first progress line to its first
        summary (None without two such lines): the process's CPU while it sends, its start-up left out."""
        lines: list[str] = []
        readings: list[tuple[float, float | None]] = []  # at the first progress line, and at the first summary
        proc: subprocess.Popen | None = None

        def started(p: subprocess.Popen) -> None:
            nonlocal proc
            proc = p

        def on_line(line: str) -> None:
            lines.append(line)
            if proc is None or "records sent" not in line or len(readings) == 2:
                return
            if not readings or _SUMMARY.search(line):
                readings.append((time.perf_counter(), process_cpu_s(proc.pid)))

        code, err = run_watched(self.command(main, args), timeout, on_line, started)
        span = None
        if len(readings) == 2 and readings[0][1] is not None and readings[1][1] is not None:
            (t0, c0), (t1, c1) = readings
            span = (c1 - c0, t1 - t0)
        return code, "".join(lines), err, span

    def produce(
        self,
        bootstrap: str,
        topic: str,
        records: int,
        payload_file: Path,
        *,
        throughput: int = -1,
        warmup_records: int = 0,
        props: dict[str, object] | None = None,
        timeout: float = 120.0,
        measure_cpu: bool = False,
    ) -> dict:
        """ProducerPerformance: ``records`` records drawn from ``payload_file``, at most ``throughput``/s; with
        ``warmup_records``, that many more sent first and the figures of the ``records`` after them (the tool's
        steady state: its JVM's own start-up, class loading and compilation, left out). With ``measure_cpu``,
        the tool reports progress every PROGRESS_MS and the result also holds ``generator_cpu_s`` and
        ``generator_span_s``: its JVM's CPU seconds from its first progress line to its summary, and the wall
        seconds between them."""
        args = producer_args(bootstrap, topic, records, payload_file, throughput, warmup_records, props)
        span = None
        if measure_cpu:
            code, out, err, span = self._java_sampled(
                PRODUCER, args + ["--reporting-interval", str(PROGRESS_MS)], timeout
            )
        else:
            code, out, err = self._java(PRODUCER, args, timeout)
        summary = parse_producer(out, steady=warmup_records > 0)
        # the summary counts acknowledged records only (a failed send prints its stack trace instead)
        result = dict(summary or {"records": 0, "records_per_s": 0.0})
        result["complete"] = code == 0 and result["records"] == records
        if not result["complete"]:
            result["error"] = (err or out)[-1500:]
        if span is not None and span[1] > 0:
            result["generator_cpu_s"], result["generator_span_s"] = span
        return result

    def consume(
        self,
        bootstrap: str,
        topic: str,
        records: int,
        *,
        timeout_ms: int = 30_000,
        props: dict[str, object] | None = None,
        timeout: float = 120.0,
        measure_cpu: bool = False,
    ) -> dict:
        """ConsumerPerformance: subscribe with a fresh group, read ``records`` records from the earliest offset.
        With ``measure_cpu`` the result also holds ``generator_cpu_s`` and ``generator_span_s``: its JVM's CPU
        seconds over the fetch phase (after the group join) and that phase's wall seconds, where the phase lasted
        CPU_WINDOW_MIN_S or more."""
        args = [
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--num-records",
            str(records),
            "--timeout",
            str(timeout_ms),
        ]
        if props:
            args += ["--command-property", *(f"{k}={v}" for k, v in props.items())]
        samples: CpuSamples | None = None
        if measure_cpu:
            lines: list[str] = []

            def started(proc: subprocess.Popen) -> None:
                nonlocal samples
                samples = CpuSamples(proc.pid)

            try:
                code, err = run_watched(self.command(CONSUMER, args), timeout, lines.append, started)
            finally:
                if samples is not None:
                    samples.stop()
            out = "".join(lines)
        else:
            code, out, err = self._java(CONSUMER, args, timeout)
        summary = parse_consumer(out)
        result = dict(summary or {"records": 0, "records_per_s": 0.0})
        result["complete"] = code == 0 and result["records"] == records
        if not result["complete"]:
            result["error"] = (err or out)[-1500:]
        if (
            samples is not None
            and summary is not None
            and summary["end_s"] is not None
            and summary["fetch_ms"] >= CPU_WINDOW_MIN_S * 1000
        ):
            span = summary["fetch_ms"] / 1000
            cpu = samples.between(summary["end_s"] - span, summary["end_s"])
            if cpu is not None:
                result["generator_cpu_s"], result["generator_span_s"] = cpu, span
        return result
