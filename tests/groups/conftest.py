"""Fixtures for the group scenarios: each runs once per broker target (shown in the test id).

Targets as in tests/peers (``KAFKAWIRE_PEER_TARGET``, default kafkawire and
Apache Kafka). kafkawire: a broker per test. Kafka: the session's shared node
(tests/peers uses the same one), or a private node for the tests marked
``restarts_broker`` (they restart or SIGKILL it). Both take the group timings
of ``harness.GROUP_OVERRIDES``. When Kafka cannot run, its tests fail in CI and
skip elsewhere.
"""

import uuid

import pytest

from .harness import GROUP_OVERRIDES, Broker
from peers.peer_harness import KafkaBroker, close_shared_kafka, mark_gaps, selected_targets, start_kafka

try:
    TARGETS_SELECTED = selected_targets()
except ValueError as exc:
    raise pytest.UsageError(str(exc)) from None


@pytest.fixture(scope="session", params=TARGETS_SELECTED)
def peer_target(request) -> str:
    if request.param not in ("kafkawire", "kafka"):
        pytest.skip(f"the group scenarios run against kafkawire and kafka, not {request.param}")
    return request.param


@pytest.fixture
def broker(peer_target, request, tmp_path):
    if peer_target == "kafka":
        if request.node.get_closest_marker("restarts_broker") is None:
            yield start_kafka(config=GROUP_OVERRIDES)
            return
        b = KafkaBroker(tmp_path / "kafka", GROUP_OVERRIDES)
        try:
            yield start_kafka(b)
        finally:
            b.close()
        return
    b = Broker(tmp_path / "broker").start()
    yield b
    b.stop()


@pytest.fixture
def topic(request):
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]
    return f"{name}-{uuid.uuid4().hex[:6]}"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "kafkawire_gap(reason): the scenario passes on Apache Kafka but kafkawire "
        "fails it; expected to fail (strictly) only when the target is kafkawire",
    )


def pytest_collection_modifyitems(config, items):
    mark_gaps([item for item in items if "tests/groups/" in str(item.path).replace("\\", "/")])


def pytest_sessionfinish(session, exitstatus):
    close_shared_kafka()


def pytest_runtest_makereport(item, call):
    if call.when == "call" and call.excinfo is not None:
        b = item.funcargs.get("broker") if hasattr(item, "funcargs") else None
        if b is not None:
            item.add_report_section("call", f"broker log ({b.target})", b.log_tail(80))
