"""pytest plugin (entry point ``pytest11``): kafkawire brokers, topics and admin clients as fixtures.

Fixtures
    ``kafka_broker`` (session): a :class:`~kafkawire.testing.KafkaBroker` with ``.bootstrap``.
    ``kafka_topic``: the name of a topic made for this test (deleted after it).
    ``kafka_admin``: a ``kafkawire.client.Admin`` bound to ``kafka_broker``.

Settings (command line wins over ini)
    ``--kafka-broker-storage`` / ini ``kafka_broker_storage``: memory (default), segments or disk.
    ``--kafka-broker-mode`` / ini ``kafka_broker_mode``: subprocess (default) or thread.
    ini ``kafka_broker_config``: ``key=value`` lines, server.properties keys of every broker.

Markers
    ``@pytest.mark.kafka_broker_config(num_partitions=3)`` (test, class or module): the test gets a broker
    with these keys on top of the ini ones. Tests with equal overrides share one broker; pytest orders tests
    so that each such broker starts once.
    ``@pytest.mark.kafka_topic(partitions=3, configs={"cleanup.policy": "compact"})``: the test's topic;
    indirect parametrisation (``parametrize("kafka_topic", [3, {"partitions": 2}], indirect=True)``) too.

Under pytest-xdist each worker is a session of its own, so each worker runs its own brokers.

Nothing here is imported beyond the standard library until a test asks for a fixture: the plugin loads into
every pytest run of an environment where kafkawire is installed.
"""

from __future__ import annotations

import re
import uuid

import pytest

from ._broker import KafkaBroker, config_key, normalise_mode, normalise_storage, parse_config_lines

_brokers: list[KafkaBroker] = []


def pytest_addoption(parser):
    group = parser.getgroup("kafkawire", "kafkawire test brokers")
    group.addoption(
        "--kafka-broker-storage",
        dest="kafka_broker_storage",
        default=None,
        help="storage of the kafka_broker fixture: memory (default), segments or disk",
    )
    group.addoption(
        "--kafka-broker-mode",
        dest="kafka_broker_mode",
        default=None,
        help="how the kafka_broker fixture runs: subprocess (default) or thread",
    )
    parser.addini(
        "kafka_broker_storage", "storage of the kafka_broker fixture: memory, segments or disk", default="memory"
    )
    parser.addini("kafka_broker_mode", "how the kafka_broker fixture runs: subprocess or thread", default="subprocess")
    parser.addini(
        "kafka_broker_config",
        "server.properties keys of the kafka_broker fixture, key=value lines",
        type="linelist",
        default=[],
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "kafka_broker_config(config=None, **overrides): server.properties keys "
        "(num_partitions=3 for num.partitions) of this test's kafka_broker",
    )
    config.addinivalue_line(
        "markers",
        "kafka_topic(partitions=1, configs=None): the partitions and topic configs of this test's kafka_topic",
    )


def _marker_overrides(node) -> dict[str, str]:
    """The kafka_broker_config markers of a test, module's first and the test's own last (closest wins)."""
    merged: dict[str, str] = {}
    for mark in reversed(list(node.iter_markers("kafka_broker_config"))):
        for arg in mark.args:
            if not isinstance(arg, dict):
                raise pytest.UsageError(f"kafka_broker_config takes a dict of keys or keyword arguments, not {arg!r}")
            merged.update({str(k): str(v) for k, v in arg.items()})
        if "config" in mark.kwargs:
            merged.update({str(k): str(v) for k, v in (mark.kwargs["config"] or {}).items()})
        merged.update({config_key(k): str(v) for k, v in mark.kwargs.items() if k != "config"})
    return merged


def pytest_generate_tests(metafunc):
    # A session-scoped fixture cannot see a test's markers: a test whose markers ask for other broker
    # settings gets kafka_broker parametrised (indirectly, session scope) with them, so equal settings share one
    # broker and pytest groups those tests together.
    if "kafka_broker" not in metafunc.fixturenames:
        return
    overrides = _marker_overrides(metafunc.definition)
    if not overrides:
        return
    key = tuple(sorted(overrides.items()))
    ident = ",".join(f"{k}={v}" for k, v in key)
    metafunc.parametrize("kafka_broker", [key], indirect=True, scope="session", ids=[ident])


def _setting(config, name: str) -> str:
    return config.getoption(name) or config.getini(name)


@pytest.fixture(scope="session")
def kafka_broker(request):
    """A kafkawire broker on a free 127.0.0.1 port for the session (one per distinct kafka_broker_config)."""
    config = request.config
    try:
        storage = normalise_storage(_setting(config, "kafka_broker_storage"))
        mode = normalise_mode(_setting(config, "kafka_broker_mode"))
        props = parse_config_lines(config.getini("kafka_broker_config"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    param = getattr(request, "param", None) or ()
    props.update({config_key(str(k)): str(v) for k, v in (param.items() if isinstance(param, dict) else param)})
    b = KafkaBroker(storage=storage, mode=mode, config=props)
    _brokers.append(b)
    try:
        try:
            b.start()
        except RuntimeError as exc:
            pytest.fail(str(exc), pytrace=False)
        yield b
    finally:
        b.stop()
        _brokers.remove(b)


@pytest.fixture
def kafka_admin(kafka_broker):
    """``kafkawire.client.Admin`` bound to ``kafka_broker`` (closed after the test)."""
    from kafkawire.client import Admin

    with Admin(kafka_broker.bootstrap) as a:
        yield a


def _topic_settings(request) -> tuple[int, dict[str, str]]:
    partitions, configs = 1, {}
    for mark in reversed(list(request.node.iter_markers("kafka_topic"))):
        if mark.args:
            partitions = int(mark.args[0])
        partitions = int(mark.kwargs.get("partitions", partitions))
        configs.update(mark.kwargs.get("configs") or {})
    param = getattr(request, "param", None)
    if isinstance(param, int):
        partitions = param
    elif isinstance(param, dict):
        partitions = int(param.get("partitions", partitions))
        configs.update(param.get("configs") or {})
    elif param is not None:
        raise pytest.UsageError(f"kafka_topic takes a partition count or a dict, not {param!r}")
    return partitions, {str(k): str(v) for k, v in configs.items()}


def topic_name(test_name: str) -> str:
    """A legal, unique topic name that says which test made it."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", test_name).strip("-.")[:80] or "test"
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kafka_topic(request, kafka_admin):
    """A new topic for this test on ``kafka_broker`` (its name), deleted after the test."""
    from kafkawire.client import NewTopic

    partitions, configs = _topic_settings(request)
    name = topic_name(request.node.name)
    kafka_admin.create_topics([NewTopic(name, partitions, -1, configs)])
    yield name
    result = kafka_admin.delete_topics([name], raise_errors=False)[name]
    if result is not None and result.name != "UNKNOWN_TOPIC_OR_PARTITION":  # a test may delete it itself
        raise result


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when != "call" or "kafka_broker" not in getattr(item, "fixturenames", ()):
        return
    report = outcome.get_result()
    if report.failed:
        for b in _brokers:
            if b.mode == "subprocess":
                report.sections.append((f"kafkawire broker log ({b.bootstrap})", b.log_tail(40)))
