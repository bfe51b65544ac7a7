"""Classic and consumer-protocol (KIP-848) members in one group, and groups changing protocol, on the wire.

Each scenario runs against kafkawire and Apache Kafka 4.4. Kafka computes a
consumer group's target assignment in batches (``group.consumer.assignment.interval.ms``,
1 s), kafkawire at once, so the scenarios heartbeat until the group settles
instead of expecting a number of rounds; the checks that hold at every step
(no partition owned by two members, the error codes) are asserted every time.
"""

from __future__ import annotations

import time
import uuid

import pytest

from kafkawire.protocol import errors
from kafkawire.protocol.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
)

from .harness import GROUP_OVERRIDES, Broker, create_topic
from .wire import WireClient
from peers.peer_harness import KafkaBroker, start_kafka

NOT_READY = (errors.COORDINATOR_NOT_AVAILABLE, errors.NOT_COORDINATOR, errors.COORDINATOR_LOAD_IN_PROGRESS)
PARTITIONS = 3


def await_coordinator(port: int, group: str, timeout: float = 60.0) -> None:
    c = WireClient("127.0.0.1", port)
    try:
        deadline = time.monotonic() + timeout
        while True:
            found = c.call("FindCoordinator", 4, key_type=0, coordinator_keys=[group]).coordinators[0].error_code
            described = c.call("DescribeGroups", 5, groups=[group]).groups[0].error_code
            if found == 0 and described not in NOT_READY:
                return
            assert time.monotonic() < deadline, f"the coordinator of {group} is not ready after {timeout:.0f}s"
            time.sleep(0.2)
    finally:
        c.close()


def subscription(topic: str, version: int, owned=()) -> bytes:
    sub = ConsumerProtocolSubscription(topics=[topic])
    if version >= 1:
        sub.owned_partitions = [ConsumerProtocolSubscription.TopicPartition(topic=topic, partitions=sorted(owned))]
    return version.to_bytes(2, "big") + sub.encode(version)


def everything(member_id: str, topic: str, version: int):
    """The classic leader's SyncGroup assignment: every partition to itself."""
    from kafkawire.protocol.messages import SyncGroupRequest

    data = version.to_bytes(2, "big") + ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=list(range(PARTITIONS)))]
    ).encode(version)
    return [SyncGroupRequest.SyncGroupRequestAssignment(member_id=member_id, assignment=data)]


def decode_assignment(data: bytes):
    version = int.from_bytes(data[:2], "big")
    a = ConsumerProtocolAssignment.decode(memoryview(data)[2:], min(version, 3))
    return version, {(t.topic, p) for t in a.assigned_partitions for p in t.partitions}, a.user_data


class NewConsumer:
    """A consumer-protocol member: reports what it owns, takes what it is given (revoking first, as told)."""

    def __init__(self, port: int, group: str, topic: str):
        self.c = WireClient("127.0.0.1", port, "new-consumer")
        self.group, self.topic = group, topic
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: set[int] = set()
        self.topic_id = None

    def heartbeat(self):
        fields = dict(group_id=self.group, member_id=self.member_id, member_epoch=self.epoch)
        if self.epoch == 0:
            fields.update(rebalance_timeout_ms=10000, subscribed_topic_names=[self.topic], topic_partitions=[])
        elif self.topic_id is not None:
            fields["topic_partitions"] = [
                ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=self.topic_id, partitions=sorted(self.owned))
            ]
        r = self.c.call("ConsumerGroupHeartbeat", 1, **fields)
        assert r.error_code == 0, r
        self.epoch = r.member_epoch
        if r.assignment is not None:
            self.owned = {p for t in r.assignment.topic_partitions for p in t.partitions}
            ids = {t.topic_id for t in r.assignment.topic_partitions}
            self.topic_id = ids.pop() if ids else self.topic_id
        return r

    def leave(self):
        r = self.c.call("ConsumerGroupHeartbeat", 1, group_id=self.group, member_id=self.member_id, member_epoch=-1)
        assert r.error_code == 0 and r.member_epoch == -1, r
        self.owned = set()


class ClassicConsumer:
    """A classic member with the consumer protocol type: JoinGroup, SyncGroup, Heartbeat, rejoining when told."""

    def __init__(self, port: int, group: str, topic: str, version: int = 1, session_ms: int = 10000):
        self.c = WireClient("127.0.0.1", port, "classic-consumer")
        self.group, self.topic, self.version, self.session_ms = group, topic, version, session_ms
        self.member_id = ""
        self.generation = -1
        self.owned: set[int] = set()
        self.leader = None
        self.members = []

    def join(self):
        if self.version == 0:
            self.owned = set()  # eager: everything is revoked before rejoining
        P = JoinGroupRequest.JoinGroupRequestProtocol
        r = self.c.call(
            "JoinGroup",
            9,
            group_id=self.group,
            session_timeout_ms=self.session_ms,
            rebalance_timeout_ms=10000,
            member_id=self.member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[P(name="range", metadata=subscription(self.topic, self.version, self.owned))],
        )
        if r.error_code == errors.MEMBER_ID_REQUIRED:
            assert r.member_id and r.generation_id == -1
            self.member_id = r.member_id
            return self.join()
        assert r.error_code == 0, r
        assert (r.member_id, r.protocol_type, r.protocol_name) == (self.member_id, "consumer", "range")
        self.generation, self.leader, self.members = r.generation_id, r.leader, r.members
        return r

    def sync(self, assignments=()):
        s = self.c.call(
            "SyncGroup",
            5,
            group_id=self.group,
            generation_id=self.generation,
            member_id=self.member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=list(assignments),
        )
        if s.error_code == errors.REBALANCE_IN_PROGRESS:
            return s
        assert s.error_code == 0, s
        assert (s.protocol_type, s.protocol_name) == ("consumer", "range")
        version, tps, user_data = decode_assignment(bytes(s.assignment))
        assert version == self.version and user_data is None and {t for t, _ in tps} <= {self.topic}
        self.owned = {p for _, p in tps}
        return s

    def heartbeat(self) -> int:
        return self.c.call(
            "Heartbeat", 4, group_id=self.group, generation_id=self.generation, member_id=self.member_id
        ).error_code

    def poll(self) -> int:
        """Heartbeat; rejoin and sync when the coordinator asks for it."""
        code = self.heartbeat()
        if code == errors.REBALANCE_IN_PROGRESS:
            self.join()
            self.sync()
        else:
            assert code == 0, code
        return code


def describe(c: WireClient, group: str):
    return c.call("ConsumerGroupDescribe", 1, group_ids=[group]).groups[0]


def listed(c: WireClient, group: str):
    found = [g for g in c.call("ListGroups", 5).groups if g.group_id == group]
    return (found[0].group_type, found[0].protocol_type, found[0].group_state) if found else None


def settle(members, admin: WireClient, group: str, timeout: float = 30.0):
    """Heartbeat every member until the consumer group is Stable with every partition owned once."""
    deadline = time.monotonic() + timeout
    while True:
        for m in members:
            if isinstance(m, NewConsumer):
                m.heartbeat()
            else:
                m.poll()
            owned = [x.owned for x in members]
            for i, a in enumerate(owned):  # revocation before assignment: never a partition in two hands
                for b in owned[i + 1 :]:
                    assert not a & b, f"partitions owned twice: {owned}"
        d = describe(admin, group)
        if (
            d.group_state == "Stable"
            and set().union(*(m.owned for m in members)) == set(range(PARTITIONS))
            and all(m.owned for m in members)
        ):
            return d
        assert time.monotonic() < deadline, f"group did not settle: {d}, owned {[m.owned for m in members]}"
        time.sleep(0.1)


def test_classic_member_in_a_consumer_group(broker, topic):
    create_topic(broker.bootstrap, topic, PARTITIONS)
    group = f"mixed-{topic}"
    await_coordinator(broker.port, group)
    admin = WireClient("127.0.0.1", broker.port)
    new, old = NewConsumer(broker.port, group, topic), ClassicConsumer(broker.port, group, topic, version=1)
    try:
        new.heartbeat()
        old.join()
        assert old.leader == "" and old.members == []  # no leader: the coordinator assigns
        old.sync()
        d = settle([new, old], admin, group)
        types = {m.member_id: (m.member_type, m.subscribed_topic_names) for m in d.members}
        assert types == {new.member_id: (1, [topic]), old.member_id: (0, [topic])}
        by_member = {m.member_id: {p for t in m.assignment.topic_partitions for p in t.partitions} for m in d.members}
        assert by_member == {new.member_id: new.owned, old.member_id: old.owned}
        assert {m.member_id: m.member_epoch for m in d.members}[old.member_id] == old.generation
        assert listed(admin, group) == ("consumer", "consumer", "Stable")
        r = admin.call("DescribeGroups", 6, groups=[group]).groups[0]
        assert (r.error_code, r.group_state) == (errors.GROUP_ID_NOT_FOUND, "Dead")
        # the classic member commits with its member epoch as the generation, at a pre-KIP-848 version
        T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestPartition
        commit = dict(
            group_id=group,
            member_id=old.member_id,
            group_instance_id=None,
            topics=[
                T(name=topic, partitions=[P(partition_index=min(old.owned), committed_offset=3, committed_metadata="")])
            ],
        )
        r = old.c.call("OffsetCommit", 8, generation_id_or_member_epoch=old.generation, **commit)
        assert r.topics[0].partitions[0].error_code == 0
        r = old.c.call("OffsetCommit", 8, generation_id_or_member_epoch=old.generation + 7, **commit)
        assert r.topics[0].partitions[0].error_code == errors.ILLEGAL_GENERATION
        # its identity is checked as Kafka checks a classic member's
        assert (
            old.c.call(
                "Heartbeat", 4, group_id=group, generation_id=old.generation + 1, member_id=old.member_id
            ).error_code
            == errors.ILLEGAL_GENERATION
        )
        assert (
            old.c.call("Heartbeat", 4, group_id=group, generation_id=old.generation, member_id="nobody").error_code
            == errors.UNKNOWN_MEMBER_ID
        )
        assert (
            old.c.call("Heartbeat", 4, group_id=group, generation_id=new.epoch, member_id=new.member_id).error_code
            == errors.UNKNOWN_MEMBER_ID
        )
        bad = old.c.call(
            "SyncGroup",
            5,
            group_id=group,
            generation_id=old.generation,
            member_id=old.member_id,
            protocol_type="consumer",
            protocol_name="roundrobin",
            assignments=[],
        )
        assert bad.error_code == errors.INCONSISTENT_GROUP_PROTOCOL
        P2 = JoinGroupRequest.JoinGroupRequestProtocol
        refused = admin.call(
            "JoinGroup",
            9,
            group_id=group,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[P2(name="roundrobin", metadata=subscription(topic, 0))],
        )
        assert refused.error_code == errors.INCONSISTENT_GROUP_PROTOCOL
        # the last consumer-protocol member leaves: the group becomes a classic group and rebalances
        new.leave()
        assert listed(admin, group)[:2] == ("classic", "consumer")
        assert describe(admin, group).error_code == errors.GROUP_ID_NOT_FOUND
        assert old.heartbeat() in (errors.REBALANCE_IN_PROGRESS, errors.ILLEGAL_GENERATION)
        old.owned = set()
        r = old.join()
        assert r.leader == old.member_id and [m.member_id for m in r.members] == [old.member_id]
        old.sync(everything(old.member_id, topic, 1))
        assert old.owned == set(range(PARTITIONS))
        assert listed(admin, group) == ("classic", "consumer", "Stable")
        assert old.heartbeat() == 0
    finally:
        for x in (admin, new.c, old.c):
            x.close()


def test_consumer_member_upgrades_a_classic_group(broker, topic):
    create_topic(broker.bootstrap, topic, PARTITIONS)
    group = f"upgrade-{topic}"
    await_coordinator(broker.port, group)
    admin = WireClient("127.0.0.1", broker.port)
    old = ClassicConsumer(broker.port, group, topic, version=0)
    new = NewConsumer(broker.port, group, topic)
    try:
        r = old.join()
        assert r.leader == old.member_id
        old.sync(everything(old.member_id, topic, 0))
        assert old.owned == set(range(PARTITIONS)) and listed(admin, group)[0] == "classic"
        generation = old.generation
        # a ConsumerGroupHeartbeat upgrades the group: the classic member keeps its partitions and epoch
        first = new.heartbeat()
        assert first.member_epoch > generation
        d = describe(admin, group)
        assert d.error_code == 0 and d.group_epoch > generation
        members = {m.member_id: m for m in d.members}
        assert members[old.member_id].member_type == 0 and members[old.member_id].member_epoch == generation
        assert {p for t in members[old.member_id].assignment.topic_partitions for p in t.partitions} == set(
            range(PARTITIONS)
        )
        assert listed(admin, group)[:2] == ("consumer", "consumer")
        assert new.owned == set()  # everything is still the classic member's
        # the classic member learns about the rebalance from its heartbeat and gives partitions up
        d = settle([new, old], admin, group)
        assert {m.member_id: m.member_type for m in d.members} == {new.member_id: 1, old.member_id: 0}
        # the classic member leaves: the consumer group goes on with its consumer-protocol member
        r = old.c.call(
            "LeaveGroup",
            5,
            group_id=group,
            members=[
                LeaveGroupRequest.MemberIdentity(member_id=old.member_id),
                LeaveGroupRequest.MemberIdentity(member_id="nobody"),
            ],
        )
        assert [(m.member_id, m.error_code) for m in r.members] == [
            (old.member_id, 0),
            ("nobody", errors.UNKNOWN_MEMBER_ID),
        ]
        old.owned = set()
        deadline = time.monotonic() + 30
        while new.owned != set(range(PARTITIONS)):
            new.heartbeat()
            assert time.monotonic() < deadline, new.owned
            time.sleep(0.1)
        assert [m.member_id for m in describe(admin, group).members] == [new.member_id]
        assert listed(admin, group)[0] == "consumer"
    finally:
        new.leave()
        for x in (admin, new.c, old.c):
            x.close()


def test_classic_member_session_expires_in_a_consumer_group(broker, topic):
    create_topic(broker.bootstrap, topic, PARTITIONS)
    group = f"expire-{topic}"
    await_coordinator(broker.port, group)
    admin = WireClient("127.0.0.1", broker.port)
    new = NewConsumer(broker.port, group, topic)
    old = ClassicConsumer(broker.port, group, topic, version=1, session_ms=1500)
    try:
        new.heartbeat()
        old.join()
        old.sync()
        settle([new, old], admin, group)
        # the classic member goes silent: removed after its own session timeout, its partitions go back
        deadline = time.monotonic() + 30
        while len(describe(admin, group).members) != 1 or new.owned != set(range(PARTITIONS)):
            new.heartbeat()
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert old.heartbeat() == errors.UNKNOWN_MEMBER_ID
        assert listed(admin, group)[0] == "consumer"
    finally:
        new.leave()
        for x in (admin, new.c, old.c):
            x.close()


@pytest.fixture
def disabled_policy(peer_target, tmp_path):
    """A broker with group.consumer.migration.policy=disabled."""
    overrides = {"group.consumer.migration.policy": "disabled"}
    if peer_target == "kafka":
        b = KafkaBroker(tmp_path / "kafka", dict(GROUP_OVERRIDES, **overrides))
        try:
            yield start_kafka(b)
        finally:
            b.close()
        return
    b = Broker(tmp_path / "broker", overrides).start()
    yield b
    b.stop()


def test_migration_policy_disabled(disabled_policy, topic):
    broker = disabled_policy
    create_topic(broker.bootstrap, topic, PARTITIONS)
    classic_group, mixed_group = f"c-{topic}", f"m-{topic}"
    await_coordinator(broker.port, classic_group)
    await_coordinator(broker.port, mixed_group)
    admin = WireClient("127.0.0.1", broker.port)
    old = ClassicConsumer(broker.port, classic_group, topic, version=0)
    new = NewConsumer(broker.port, mixed_group, topic)
    old2 = ClassicConsumer(broker.port, mixed_group, topic, version=1)
    try:
        old.join()
        old.sync(everything(old.member_id, topic, 0))
        # no upgrade: a ConsumerGroupHeartbeat to a classic group with members is refused
        r = admin.call(
            "ConsumerGroupHeartbeat",
            1,
            group_id=classic_group,
            member_id=str(uuid.uuid4()),
            member_epoch=0,
            rebalance_timeout_ms=10000,
            subscribed_topic_names=[topic],
            topic_partitions=[],
        )
        assert r.error_code == errors.GROUP_ID_NOT_FOUND
        assert listed(admin, classic_group)[0] == "classic" and old.heartbeat() == 0
        # nor does a classic member join a consumer group with members
        new.heartbeat()
        P = JoinGroupRequest.JoinGroupRequestProtocol
        r = old2.c.call(
            "JoinGroup",
            9,
            group_id=mixed_group,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[P(name="range", metadata=subscription(topic, 1))],
        )
        assert r.error_code == errors.INCONSISTENT_GROUP_PROTOCOL
        assert [m.member_type for m in describe(admin, mixed_group).members] == [1]
        new.leave()
    finally:
        for x in (admin, new.c, old.c, old2.c):
            x.close()


@pytest.mark.restarts_broker
def test_mixed_group_survives_a_restart(broker, topic):
    create_topic(broker.bootstrap, topic, PARTITIONS)
    group = f"restart-{topic}"
    await_coordinator(broker.port, group)
    admin = WireClient("127.0.0.1", broker.port)
    new = NewConsumer(broker.port, group, topic)
    old = ClassicConsumer(broker.port, group, topic, version=1, session_ms=60000)
    try:
        new.heartbeat()
        old.join()
        old.sync()
        before = settle([new, old], admin, group)
        admin.close()
        for x in (new.c, old.c):
            x.close()
        broker.restart()
        await_coordinator(broker.port, group)
        admin = WireClient("127.0.0.1", broker.port)
        new.c = WireClient("127.0.0.1", broker.port, "new-consumer")
        old.c = WireClient("127.0.0.1", broker.port, "classic-consumer")
        after = describe(admin, group)
        assert after.error_code == 0 and after.group_epoch == before.group_epoch

        def members(d):
            return sorted(
                (
                    m.member_id,
                    m.member_type,
                    m.member_epoch,
                    sorted(p for t in m.assignment.topic_partitions for p in t.partitions),
                )
                for m in d.members
            )

        assert members(after) == members(before)
        # the classic member goes on where it was: same generation, same assignment
        assert old.heartbeat() == 0
        owned = set(old.owned)
        old.sync()
        assert old.owned == owned
        assert new.heartbeat().member_epoch == new.epoch
    finally:
        for x in (admin, new.c, old.c):
            x.close()
