"""Rebalance callbacks run as Kafka's ConsumerRebalanceListener contract says, on kafkawire's broker and Kafka 4.4.

Kafka's consumer runs onPartitionsAssigned / Revoked / Lost inside poll() (or close(), unsubscribe()) on
the application's thread; a partition is fetched, and its records returned, only after its
onPartitionsAssigned returned (a seek() there decides the first record), and no record of it is
returned once onPartitionsRevoked is under way. An exception a callback throws comes out of that poll()
(the rebalance completes all the same). The callbacks below sleep a little to widen the window in which
a client that ran them elsewhere would return records too early; nothing here asserts on time.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kafkawire.client import AsyncConsumer, Consumer
from kafkawire.client.sync import LoopThread
from kafkawire.protocol import ApiKey, errors as kerrors

from .groups_support import FAST, create_topics, group_broker, names, produce, wait_for  # noqa: F401
from .test_groups_errors import TOPIC, GroupBroker

SLOW_CALLBACK = 0.3  # seconds a callback takes: long enough for a fetch to come back meanwhile


class Granted:
    """One member's view of its partitions through its callbacks; every record a poll returns must be of a
    partition whose on_partitions_assigned has returned and whose on_partitions_revoked has not begun."""

    def __init__(self, name: str, log: list):
        self.name = name
        self.log = log  # shared by every member: (member, event, partitions) in the order things happened
        self.granted: set = set()

    def assigned(self, tps):
        time.sleep(SLOW_CALLBACK)
        self.granted |= set(tps)
        self.log.append((self.name, "assigned", [p for _, p in tps]))

    def revoked(self, tps):
        self.granted -= set(tps)
        self.log.append((self.name, "revoked", [p for _, p in tps]))

    def lost(self, tps):
        self.granted -= set(tps)
        self.log.append((self.name, "lost", [p for _, p in tps]))

    def check(self, records):
        early = sorted({(r.topic, r.partition) for r in records} - self.granted)
        assert not early, f"member {self.name} returned records of {early} outside its callbacks; log {self.log}"


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_no_record_of_a_partition_before_its_assigned_callback(group_broker, names, strategy):
    """Three members join one after the other and one leaves while records keep coming: no poll of any
    member returns a record of a partition before that member's on_partitions_assigned for it returned
    (nor after its on_partitions_revoked began), and every record is read."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=6)
    log: list = []
    members: dict[str, tuple[Consumer, Granted]] = {}
    seen: set[int] = set()

    def join(name):
        g = Granted(name, log)
        c = Consumer(bs, group_id=group, partition_assignment_strategy=strategy, **FAST)
        c.subscribe([topic], on_partitions_assigned=g.assigned, on_partitions_revoked=g.revoked,
                    on_partitions_lost=g.lost)  # fmt: skip
        members[name] = (c, g)

    def poll_until(predicate, what, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for c, g in list(members.values()):
                records = c.poll(0.05)
                g.check(records)
                seen.update(int(r.value) for r in records)
            if predicate():
                return
        raise AssertionError(f"timed out waiting for {what}: {log}")

    def split(n):
        return sorted(len(g.granted) for _, g in members.values()) == [6 // n] * n

    try:
        produce(bs, topic, range(0, 120), 6)
        join("a")
        poll_until(lambda: seen >= set(range(120)), "a reading the first 120")
        for n, name in ((2, "b"), (3, "c")):
            join(name)
            produce(bs, topic, range(n * 120 - 120, n * 120), 6)
            poll_until(lambda n=n: split(n), f"{n} members with {6 // n} partitions each")
        produce(bs, topic, range(360, 480), 6)
        c, g = members.pop("a")
        c.close()  # on_partitions_revoked on this thread; b and c share the partitions again
        poll_until(lambda: split(2) and seen >= set(range(480)), "b and c with every record")
    finally:
        for c, _ in members.values():
            c.close()
    assert seen == set(range(480))
    # every member got partitions through its callback at least once, and a gave them back on close
    assert {e[0] for e in log if e[1] == "assigned"} == {"a", "b", "c"}
    assert ("a", "revoked") in [e[:2] for e in log]


def test_seek_in_the_assigned_callback_decides_the_first_record(group_broker, names):
    """on_partitions_assigned seeks each partition to offset 30: the first record every partition returns
    is offset 30 (the fetch from the committed/reset position must not come first)."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=2)
    produce(bs, topic, range(100), 2)  # 50 per partition, offsets 0..49
    first: dict = {}
    offsets: dict = {0: [], 1: []}
    with Consumer(bs, group_id=group, enable_auto_commit=False, **FAST) as c:

        def on_assigned(tps):
            time.sleep(SLOW_CALLBACK)
            for tp in tps:
                c.seek(tp, 30)

        c.subscribe([topic], on_partitions_assigned=on_assigned)
        deadline = time.monotonic() + 60
        while sum(map(len, offsets.values())) < 40 and time.monotonic() < deadline:
            for r in c.poll(0.1):
                first.setdefault(r.partition, r.offset)
                offsets[r.partition].append(r.offset)
    assert first == {0: 30, 1: 30}
    assert offsets == {0: list(range(30, 50)), 1: list(range(30, 50))}


def test_callbacks_run_on_the_polling_thread(group_broker, names):
    """on_partitions_assigned runs on the thread that polls, on_partitions_revoked on the one that closes
    (here the same, a thread of the test's own, not the client's loop or a worker)."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=2)
    produce(bs, topic, range(10), 2)
    calls: list = []
    result: dict = {}

    def member():
        try:
            c = Consumer(bs, group_id=group, **FAST)
            c.subscribe(
                [topic],
                on_partitions_assigned=lambda tps: calls.append(("assigned", threading.get_ident())),
                on_partitions_revoked=lambda tps: calls.append(("revoked", threading.get_ident())),
            )
            got = 0
            deadline = time.monotonic() + 60
            while got < 10 and time.monotonic() < deadline:
                got += len(c.poll(0.1))
            c.close()
            result["got"] = got
        except BaseException as exc:
            result["error"] = exc

    t = threading.Thread(target=member, name="t21-poller")
    t.start()
    t.join(120)
    assert not t.is_alive()
    assert "error" not in result, result
    assert result["got"] == 10
    assert calls == [("assigned", t.ident), ("revoked", t.ident)]


def test_an_assigned_callback_error_is_raised_by_the_poll(group_broker, names):
    """on_partitions_assigned raises: the poll that ran it raises that exception (Kafka's poll throws it,
    wrapped in a KafkaException there) before returning any record; the assignment stands, and the next
    polls read the partitions."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=2)
    produce(bs, topic, range(20), 2)
    boom = ValueError("the application's callback failed")
    raised = []

    def on_assigned(tps):
        time.sleep(SLOW_CALLBACK)
        if not raised:
            raise boom

    with Consumer(bs, group_id=group, **FAST) as c:
        c.subscribe([topic], on_partitions_assigned=on_assigned)
        before: list = []
        deadline = time.monotonic() + 60
        while not raised and time.monotonic() < deadline:
            try:
                before += c.poll(0.1)
            except ValueError as exc:
                raised.append(exc)
        assert raised and raised[0] is boom
        assert before == [], "records returned before the callback that raised had run"
        assert sorted(c.assignment()) == [(topic, 0), (topic, 1)]
        got: list = []
        while len(got) < 20 and time.monotonic() < deadline:
            got += c.poll(0.1)
    assert sorted(int(r.value) for r in got) == list(range(20))


def test_async_consumer_fetches_after_its_assigned_callback(group_broker, names):
    """AsyncConsumer awaits a coroutine on_partitions_assigned before fetching the partitions: a seek
    after an await in it still decides the first record."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=1)
    produce(bs, topic, range(50), 1)

    async def main():
        offsets = []
        async with AsyncConsumer(bs, group_id=group, enable_auto_commit=False, **FAST) as c:

            async def on_assigned(tps):
                await asyncio.sleep(SLOW_CALLBACK)
                for tp in tps:
                    c.seek(tp, 40)

            c.subscribe([topic], on_partitions_assigned=on_assigned)
            deadline = time.monotonic() + 60
            while len(offsets) < 10 and time.monotonic() < deadline:
                offsets += [r.offset for r in await c.records(0.1)]
        return offsets

    assert asyncio.run(main()) == list(range(40, 50))


def test_heartbeats_continue_while_a_revoke_waits_for_the_poll():
    """A rebalance starts while the application is not polling: on_partitions_revoked waits for its next
    poll (no JoinGroup before it), and the member keeps heartbeating meanwhile, as Kafka's heartbeat
    thread does, so that the coordinator does not drop it. Against a scripted coordinator."""
    loop_thread = LoopThread.get()
    b = loop_thread.run(GroupBroker().start())
    events: list = []
    try:
        b.join_script = [(0, "m-1", 1), (0, "m-1", 2)]
        c = Consumer(
            b.bootstrap, group_id="g", partition_assignment_strategy="range", heartbeat_interval_ms=50,
            fetch_max_wait_ms=50,
        )  # fmt: skip
        try:
            c.subscribe(
                [TOPIC],
                on_partitions_assigned=lambda tps: events.append("assigned"),
                on_partitions_revoked=lambda tps: events.append("revoked"),
            )
            deadline = time.monotonic() + 30
            while "assigned" not in events and time.monotonic() < deadline:
                c.poll(0.05)
            assert events == ["assigned"]
            # no poll from now on; the next heartbeat says the group rebalances
            before = len(b.sent(ApiKey.HEARTBEAT))
            b.heartbeats = [kerrors.REBALANCE_IN_PROGRESS]
            wait_for(lambda: len(b.sent(ApiKey.HEARTBEAT)) >= before + 10, 30, "heartbeats while the revoke waits")
            assert events == ["assigned"], "on_partitions_revoked ran outside a poll"
            assert len(b.sent(ApiKey.JOIN_GROUP)) == 1, "joined again before the revoke callback had run"
            while len(events) < 3 and time.monotonic() < deadline + 30:
                c.poll(0.05)
            assert events == ["assigned", "revoked", "assigned"]
            assert [s.generation_id for s in b.sent(ApiKey.SYNC_GROUP)] == [1, 2]
        finally:
            c.close()
    finally:
        loop_thread.run(b.close())
