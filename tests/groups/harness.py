"""A kafkawire broker subprocess for the group tests, and helpers to wait on things with a deadline.

The same scenarios run against Apache Kafka through ``peers.peer_harness.KafkaBroker``
(see conftest.py); both take the group timings of ``GROUP_OVERRIDES``.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from peers.peer_harness import GROUP_SETTINGS

# broker settings that make group tests fast: short delays and session timeouts
GROUP_OVERRIDES = dict(GROUP_SETTINGS)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


class Broker:
    target = "kafkawire"

    def __init__(self, data_dir: Path, overrides: dict | None = None, storage: str = "segments"):
        self.data_dir = Path(data_dir)
        self.port = free_port()
        self.overrides = dict(GROUP_OVERRIDES, **(overrides or {}))
        self.storage = storage
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Broker:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "kafkawire", "serve", "--listen", self.bootstrap, "--data-dir",
               str(self.data_dir), "--storage", self.storage]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        log.close()

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"broker exited: {self.log_tail()}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return True
            return False

        wait_for(ready, 30, "the broker to listen")
        return self

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def kill(self) -> None:
        """SIGKILL, as a crash would; ``start`` brings it back on the same port and data."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def produce(bootstrap: str, topic: str, values: list[int], partitions: int) -> None:
    import confluent_kafka as ck

    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for v in values:
        p.produce(topic, value=str(v).encode(), key=str(v).encode(), partition=v % partitions)
    assert p.flush(30) == 0


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)
