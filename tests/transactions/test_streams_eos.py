"""Kafka Streams (4.x from Maven) with ``processing.guarantee=exactly_once_v2``: a word count survives the
SIGKILL of one of its two instances mid-stream, on kafkawire and on the reference Kafka (a node of its own:
Streams' transactions and internal topics would change the shared node's answers for other tests).

``java/WordCountEos.java`` counts the words of an input topic into an output topic. Two instances run; N
lines are written over about 20 s; one instance is killed with SIGKILL once half are written and counts come
out, while lines keep arriving, and started again on the same state directory 2 s later. The app has no record cache, so the
killed instance has written counts (changelog, output) for input it had not committed: with
``at_least_once`` instead, the replay counts those lines twice and this test fails. The output topic read with
``read_committed`` must then hold, for each word, counts that only rise and end at the exact count: a
record processed twice (replayed after the crash without exactly-once) would count it twice.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import reference_unavailable

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import kafka_pins  # noqa: E402
import kafka_reference  # noqa: E402

pytestmark = pytest.mark.timeout(420)

SOURCE = Path(__file__).resolve().parent / "java" / "WordCountEos.java"
PARTITIONS = 4
LINES = 4000
WORDS = [f"w{i:02d}" for i in range(40)]


@pytest.fixture(scope="module")
def word_count(tmp_path_factory):
    """(java, classpath) of the compiled app; fails in CI, skips elsewhere, when Java or the jars are missing."""
    try:
        jars = kafka_reference.resolve(kafka_pins.STREAMS)
        javac, java = kafka_reference._tool("javac"), kafka_reference._tool("java")
    except kafka_reference.KafkaUnavailable as exc:
        reference_unavailable(str(exc))
    classes = tmp_path_factory.mktemp("wordcount-classes")
    cp = os.pathsep.join(str(j) for j in jars)
    proc = subprocess.run(
        [javac, "-nowarn", "-d", str(classes), "-cp", cp, str(SOURCE)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return java, f"{classes}{os.pathsep}{cp}"


@pytest.fixture(params=["kafkawire", "kafka"])
def eos_broker(request, tmp_path):
    """A broker of this test's own: kafkawire on the segments engine, or a reference Kafka node."""
    if request.param == "kafkawire":
        from kafkawire.testing import KafkaBroker

        b = KafkaBroker(storage="segments", data_dir=tmp_path / "kafkawire")
        b.start()
        yield b
        b.stop()
    else:
        kafka = kafka_reference.ReferenceKafka(tmp_path / "kafka", heap="512m")
        try:
            kafka.start()
        except kafka_reference.KafkaUnavailable as exc:
            kafka.close()
            reference_unavailable(str(exc))
        yield kafka
        kafka.close()


class Instance:
    def __init__(self, word_count, bootstrap, app_id, state_dir: Path, log: Path, topics):
        self.argv = [
            word_count[0],
            "-Xmx256m",
            "-cp",
            word_count[1],
            "WordCountEos",
            bootstrap,
            app_id,
            str(state_dir),
            *topics,
        ]
        self.log = log
        self.proc: subprocess.Popen | None = None

    def start(self):
        self.log_offset = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def output(self) -> str:
        return self.log.read_bytes()[self.log_offset :].decode(errors="replace")

    def wait_running(self, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"Streams instance exited:\n{self.output()[-3000:]}"
            if "\nRUNNING" in "\n" + self.output():
                return
            time.sleep(0.5)
        raise AssertionError(f"Streams instance not RUNNING in {timeout} s:\n{self.output()[-3000:]}")

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


fed: list[int] = []
progress = [0]


def produce(bootstrap, topic, lines, chunks=1, pause=0.0):
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    size = -(-len(lines) // chunks)
    for start in range(0, len(lines), size):
        for i, line in enumerate(lines[start : start + size], start):
            p.produce(topic, key=str(i).encode(), value=line.encode())
        assert p.flush(30) == 0
        progress[0] = min(start + size, len(lines))
        time.sleep(pause)
    fed.append(len(lines))


def read_counts(bootstrap, topic, idle_for: float = 3.0) -> dict[str, list[int]]:
    """word -> the counts read_committed shows for it, in order."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eos-check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        seen: dict[str, list[int]] = {}
        idle = time.monotonic()
        while time.monotonic() - idle < idle_for:
            msgs = c.consume(1000, 0.5)
            for m in msgs:
                if m.error() is None:
                    seen.setdefault(m.key().decode(), []).append(int.from_bytes(m.value(), "big", signed=True))
            if msgs:
                idle = time.monotonic()
        return seen
    finally:
        c.close()


def test_word_count_exactly_once_across_a_sigkill(word_count, eos_broker, tmp_path):
    bootstrap = eos_broker.bootstrap
    source, sink = "eos-lines", "eos-counts"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in (source, sink)]).values():
        f.result(30)
    rng = random.Random(11)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8))) for _ in range(LINES)]
    expected = Counter(w for line in lines for w in line.split())

    fed.clear()
    progress[0] = 0
    instances = [
        Instance(
            word_count,
            bootstrap,
            "eos-word-count",
            tmp_path / f"state-{i}",
            tmp_path / f"instance-{i}.log",
            (source, sink),
        )
        for i in range(2)
    ]
    try:
        for inst in instances:
            inst.start()
        for inst in instances:
            inst.wait_running()
        # a first line, counted once the group has settled: the pipeline is live
        produce(bootstrap, source, lines[:1])
        deadline = time.monotonic() + 120
        while not read_counts(bootstrap, sink, idle_for=0.3):
            assert time.monotonic() < deadline, "no count came out of the first line"
            time.sleep(0.5)
        # the other lines arrive over about 20 s, in 80 chunks; the kill comes once half of them were
        # written, so the instance dies while processing
        fed.clear()
        feeder = threading.Thread(
            target=produce, args=(bootstrap, source, lines[1:]), kwargs={"chunks": 80, "pause": 0.25}, daemon=True
        )
        feeder.start()
        deadline = time.monotonic() + 60
        while progress[0] < len(lines) // 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not fed, "the input was all written before the kill: not mid-stream"
        instances[0].kill()
        time.sleep(2)
        instances[0].start()
        feeder.join(120)
        assert not feeder.is_alive() and fed == [len(lines) - 1], "the input was not all written"
        deadline = time.monotonic() + 180
        while True:
            counts = read_counts(bootstrap, sink)
            final = {w: cs[-1] for w, cs in counts.items()}
            if final == dict(expected) or time.monotonic() > deadline:
                break
            for inst in instances:
                assert inst.proc.poll() is None, f"an instance exited:\n{inst.output()[-3000:]}"
            time.sleep(2)
        assert final == dict(expected), {w: (final.get(w), n) for w, n in expected.items() if final.get(w) != n}
        rising = {w: cs for w, cs in counts.items() if any(b <= a for a, b in zip(cs, cs[1:]))}
        assert not rising, f"counts not strictly rising (a record counted twice?): {rising}"
    finally:
        for inst in instances:
            inst.stop()
