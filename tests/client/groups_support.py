"""Shared pieces of the client's consumer-group tests (tests/client/test_groups_*.py).

``group_broker``: each scenario runs against kafkawire's broker (a fresh one per
test, tests/groups/harness.Broker) and Apache Kafka 4.4 (the session's shared
reference node, as tests/groups uses it), both with the short group timings of
``GROUP_OVERRIDES``. Targets follow ``KAFKAWIRE_PEER_TARGET`` like tests/peers;
when Kafka cannot run its tests fail under CI=true and skip elsewhere
(``reference_unavailable`` through ``start_kafka``).

``Members`` polls several kafkawire consumers in turn from the test's thread
(each keeps heartbeating in the client's loop thread meanwhile) and records
what each returned.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter

import pytest
from groups.harness import GROUP_OVERRIDES, Broker, wait_for

from kafkawire.client import Admin, Consumer, NewTopic, Producer

from peers.peer_harness import selected_targets, start_kafka

TARGETS = [t for t in selected_targets() if t in ("kafkawire", "kafka")]

# client timings that match the brokers' GROUP_OVERRIDES (group.min.session.timeout.ms=1000)
FAST = dict(
    session_timeout_ms=6000,
    heartbeat_interval_ms=500,
    auto_offset_reset="earliest",
    metadata_max_age=2.0,
    fetch_max_wait_ms=100,
)


@pytest.fixture(params=TARGETS)
def group_broker(request, tmp_path):
    if request.param == "kafka":
        yield start_kafka(config=GROUP_OVERRIDES)
        return
    b = Broker(tmp_path / "broker").start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def names(request):
    """A fresh topic and group name for this test."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    suffix = uuid.uuid4().hex[:6]
    return f"{base}-{suffix}", f"g-{base}-{suffix}"


def create_topics(bootstrap: str, *topics: str, partitions: int) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(t, partitions) for t in topics])


def produce(bootstrap: str, topic: str, values, partitions: int) -> None:
    """Values as decimal strings, value v to partition v % partitions."""
    with Producer(bootstrap, linger_ms=5) as p:
        for v in values:
            p.produce(topic, str(v).encode(), partition=v % partitions)
        p.flush(30)


class Members:
    """Kafkawire group members polled in turn; ``seen`` counts every value any of them returned."""

    def __init__(self):
        self.consumers: dict[str, Consumer] = {}
        self.records: dict[str, list] = {}
        self.events: list[tuple[str, str, list]] = []  # (member, "assigned"/"revoked"/"lost", partitions)

    def add(self, name: str, bootstrap: str, topics=None, *, pattern=None, **options) -> Consumer:
        c = Consumer(bootstrap, **{**FAST, **options})
        self.consumers[name] = c
        self.records.setdefault(name, [])

        def note(kind):
            return lambda tps: self.events.append((name, kind, list(tps)))

        c.subscribe(
            topics,
            pattern=pattern,
            on_partitions_assigned=note("assigned"),
            on_partitions_revoked=note("revoked"),
            on_partitions_lost=note("lost"),
        )
        return c

    def poll_round(self, timeout: float = 0.1) -> None:
        for name, c in list(self.consumers.items()):
            self.records[name].extend(c.poll(timeout))

    def poll_until(self, predicate, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll_round()
            value = predicate()
            if value:
                return value
        raise AssertionError(
            f"timed out after {timeout:.0f}s waiting for {what}; assignments "
            f"{self.assignments()}, values seen {len(self.seen())}"
        )

    def seen(self) -> Counter:
        return Counter(int(r.value) for recs in self.records.values() for r in recs)

    def assignments(self) -> dict[str, list]:
        return {n: sorted(c.assignment()) for n, c in self.consumers.items()}

    def close(self, name: str | None = None) -> None:
        for n in [name] if name else list(self.consumers):
            c = self.consumers.pop(n, None)
            if c is not None:
                c.close()


def covers(assignments, topic: str, partitions: int) -> bool:
    """Every partition owned by exactly one member."""
    owned = [tp for a in assignments for tp in a]
    return sorted(owned) == [(topic, p) for p in range(partitions)]


__all__ = [
    "FAST",
    "GROUP_OVERRIDES",
    "Members",
    "covers",
    "create_topics",
    "group_broker",
    "names",
    "private_group_broker",
    "produce",
    "wait_for",
]


@pytest.fixture(params=TARGETS)
def private_group_broker(request, tmp_path):
    """A broker of this test's own, to restart: kafkawire on segment storage, or a private Kafka node."""
    if request.param == "kafka":
        from peers.peer_harness import KafkaBroker

        b = KafkaBroker(tmp_path / "kafka", GROUP_OVERRIDES)
        try:
            yield start_kafka(b)
        finally:
            b.close()
        return
    b = Broker(tmp_path / "broker").start()
    try:
        yield b
    finally:
        b.stop()
