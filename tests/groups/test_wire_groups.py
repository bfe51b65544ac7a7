"""Group APIs on the wire, every version that matters, with Kafka's error codes for bad input.

Run against kafkawire (in process) and Apache Kafka (the session's shared
node). Kafka 4 no longer serves the oldest versions of some group APIs
(KIP-896); kafkawire keeps serving them for old clients, so on Kafka a
version it does not advertise is left out, on kafkawire every one is checked.
"""

from __future__ import annotations

import time

import pytest

from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.server import start_in_thread
from kafkawire.protocol import errors
from kafkawire.protocol.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

from .harness import GROUP_OVERRIDES
from .wire import WireClient
from peers.peer_harness import start_kafka


class KafkaNode:
    """The shared Kafka with topic ``wt`` (3 partitions); ``port`` as the in-process broker has it."""

    def __init__(self, kafka):
        self.port = kafka.port
        self.kafka = kafka


# The groups these tests talk to (their coordinators must be ready before the first request).
GROUPS = [
    "adm",
    "allv",
    "allv-simple",
    "dup",
    "g",
    "g1",
    "ghost-group",
    "kip848",
    "meta-check",
    "never",
    "no-such",
    "nope",
    "offs",
    "unknown-g",
    "kip848-mixed",
    "ep-empty",
    "ep-missing",
    "ep-two",
    *(f"v{v}" for v in range(10)),
    *(f"del{v}" for v in range(3)),
]
COORDINATOR_NOT_READY = (errors.COORDINATOR_NOT_AVAILABLE, errors.NOT_COORDINATOR, errors.COORDINATOR_LOAD_IN_PROGRESS)


def await_coordinators(port: int, timeout: float = 60.0) -> None:
    """Find the coordinator first, as a client does: Kafka creates ``__consumer_offsets`` on the first
    FindCoordinator and answers COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
    until the partitions of these groups are loaded (kafkawire answers at once)."""
    c = WireClient("127.0.0.1", port)
    try:
        deadline = time.monotonic() + timeout
        while True:
            found = c.call("FindCoordinator", 4, key_type=0, coordinator_keys=GROUPS).coordinators
            described = c.call("DescribeGroups", 5, groups=GROUPS).groups
            pending = [x.key for x in found if x.error_code] + [
                g.group_id for g in described if g.error_code in COORDINATOR_NOT_READY
            ]
            if not pending:
                return
            assert time.monotonic() < deadline, f"coordinators not ready after {timeout:.0f}s: {pending}"
            time.sleep(0.2)
    finally:
        c.close()


@pytest.fixture(scope="module")
def node(peer_target):
    if peer_target == "kafka":
        kafka = start_kafka(config=GROUP_OVERRIDES)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        if "wt" not in admin.list_topics(timeout=10).topics:
            admin.create_topics([NewTopic("wt", 3, 1)])["wt"].result(30)
        await_coordinators(kafka.port)
        yield KafkaNode(kafka)
        return
    cfg = BrokerConfig(
        port=0, storage="memory", properties=dict(GROUP_OVERRIDES, **{"group.initial.rebalance.delay.ms": "0"})
    )
    with start_in_thread(cfg) as b:
        b.call(lambda: b.broker.storage.create_topic("wt", 3))
        await_coordinators(b.port)
        yield b


@pytest.fixture(scope="module")
def advertised(node, peer_target):
    """``{api name: (min, max)}`` as the broker advertises; kafkawire must advertise every version of its spec."""
    from kafkawire.protocol import api_by_name

    c = WireClient("127.0.0.1", node.port)
    try:
        keys = {
            k.api_key: (k.min_version, k.max_version)
            for k in c.call("ApiVersions", 3, client_software_name="wire-test", client_software_version="1").api_keys
        }
    finally:
        c.close()
    names = (
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "LeaveGroup",
        "OffsetCommit",
        "OffsetFetch",
        "DescribeGroups",
        "ListGroups",
        "DeleteGroups",
        "FindCoordinator",
        "OffsetDelete",
        "ConsumerGroupHeartbeat",
        "ConsumerGroupDescribe",
    )
    return {name: keys.get(api_by_name(name).key, (0, -1)) for name in names}


def served(advertised, peer_target, api, versions):
    """The versions of ``versions`` the broker serves: all of them on kafkawire, Kafka's advertised ones on Kafka."""
    lo, hi = advertised[api]
    if peer_target != "kafka":
        return list(versions)
    return [v for v in versions if lo <= v <= hi]


@pytest.fixture
def client(node):
    c = WireClient("127.0.0.1", node.port)
    yield c
    c.close()


def subscription(topics):
    meta = ConsumerProtocolSubscription(topics=topics).encode(0)
    return (0).to_bytes(2, "big") + meta


def protocols():
    P = JoinGroupRequest.JoinGroupRequestProtocol
    return [P(name="range", metadata=subscription(["wt"]))]


def join(client, group, member_id="", version=9, instance=None, session=6000):
    fields = dict(
        group_id=group, session_timeout_ms=session, member_id=member_id, protocol_type="consumer", protocols=protocols()
    )
    if version >= 1:
        fields["rebalance_timeout_ms"] = 10000
    if version >= 5:
        fields["group_instance_id"] = instance
    return client.call("JoinGroup", version, **fields)


def stable_member(client, group, version=9):
    r = join(client, group, version=version)
    if r.error_code == errors.MEMBER_ID_REQUIRED:
        r = join(client, group, r.member_id, version=version)
    assert r.error_code == 0
    assignment = (0).to_bytes(2, "big") + ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic="wt", partitions=[0, 1, 2])]
    ).encode(0)
    s = client.call(
        "SyncGroup",
        min(version, 5),
        group_id=group,
        generation_id=r.generation_id,
        member_id=r.member_id,
        protocol_type="consumer" if version >= 5 else None,
        protocol_name="range" if version >= 5 else None,
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=r.member_id, assignment=assignment)],
    )
    assert s.error_code == 0 and s.assignment == assignment
    return r.member_id, r.generation_id


@pytest.mark.parametrize("version", range(0, 10))
def test_join_sync_heartbeat_leave_every_version(client, version, advertised, peer_target):
    if not served(advertised, peer_target, "JoinGroup", [version]):
        pytest.skip(f"Kafka {advertised['JoinGroup']} no longer serves JoinGroup v{version} (kafkawire does)")
    group = f"v{version}"
    r = join(client, group, version=version)
    if version >= 4:
        assert r.error_code == errors.MEMBER_ID_REQUIRED and r.member_id
        r = join(client, group, r.member_id, version=version)
    assert r.error_code == 0 and r.generation_id == 1 and r.leader == r.member_id
    assert [m.member_id for m in r.members] == [r.member_id]
    sync_v = min(version, 5)
    mine = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=r.member_id, assignment=b"\x00\x01abc")]
    if sync_v >= 5:  # from v5 the protocol type and name are mandatory
        s = client.call("SyncGroup", sync_v, group_id=group, generation_id=1, member_id=r.member_id, assignments=mine)
        assert s.error_code == errors.INCONSISTENT_GROUP_PROTOCOL
        s = client.call(
            "SyncGroup",
            sync_v,
            group_id=group,
            generation_id=1,
            member_id=r.member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=mine,
        )
    else:
        s = client.call("SyncGroup", sync_v, group_id=group, generation_id=1, member_id=r.member_id, assignments=mine)
    assert s.error_code == 0 and s.assignment == b"\x00\x01abc"
    hb_v = min(version, 4)
    assert client.call("Heartbeat", hb_v, group_id=group, generation_id=1, member_id=r.member_id).error_code == 0
    assert (
        client.call("Heartbeat", hb_v, group_id=group, generation_id=2, member_id=r.member_id).error_code
        == errors.ILLEGAL_GENERATION
    )
    assert (
        client.call("Heartbeat", hb_v, group_id="nope", generation_id=1, member_id=r.member_id).error_code
        == errors.UNKNOWN_MEMBER_ID
    )
    leave_v = min(version, 5)
    if leave_v >= 3:
        resp = client.call(
            "LeaveGroup", leave_v, group_id=group, members=[LeaveGroupRequest.MemberIdentity(member_id=r.member_id)]
        )
        assert resp.error_code == 0 and [m.error_code for m in resp.members] == [0]
    else:
        assert client.call("LeaveGroup", leave_v, group_id=group, member_id=r.member_id).error_code == 0


def test_find_coordinator_all_versions(client, node):
    for v in range(0, 4):
        fields = {"key": "g"}
        if v >= 1:
            fields["key_type"] = 0
        r = client.call("FindCoordinator", v, **fields)
        assert r.error_code == 0 and r.node_id == 1 and r.port == node.port
    # Kafka creates __transaction_state on the first transaction-coordinator lookup and answers
    # COORDINATOR_NOT_AVAILABLE until it is ready: retried, as a client does
    deadline = time.monotonic() + 30
    while True:
        r = client.call("FindCoordinator", 4, key_type=1, coordinator_keys=["txn-a", "txn-b"])
        if time.monotonic() > deadline or not any(
            c.error_code == errors.COORDINATOR_NOT_AVAILABLE for c in r.coordinators
        ):
            break
        time.sleep(0.2)
    assert [(c.key, c.node_id, c.error_code) for c in r.coordinators] == [("txn-a", 1, 0), ("txn-b", 1, 0)]
    r = client.call("FindCoordinator", 6, key_type=0, coordinator_keys=["g1"])
    assert r.coordinators[0].port == node.port
    r = client.call("FindCoordinator", 4, key_type=7, coordinator_keys=["g1"])
    assert r.coordinators[0].error_code == errors.INVALID_REQUEST


def test_offsets_errors_and_versions(client):
    group = "offs"
    member, gen = stable_member(client, group)
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestPartition
    r = client.call(
        "OffsetCommit",
        8,
        group_id=group,
        generation_id_or_member_epoch=gen,
        member_id=member,
        topics=[
            T(
                name="wt",
                partitions=[
                    P(partition_index=0, committed_offset=5, committed_metadata="m0"),
                    P(partition_index=1, committed_offset=6, committed_metadata="x" * 4097),
                    P(partition_index=7, committed_offset=1, committed_metadata=""),
                ],
            ),
            T(name="missing-topic", partitions=[P(partition_index=0, committed_offset=1, committed_metadata="")]),
        ],
    )
    # per topic, each partition's code (Kafka lists a topic's refused partitions before the others)
    codes = [(t.name, sorted((p.partition_index, p.error_code) for p in t.partitions)) for t in r.topics]
    assert codes == [
        ("wt", [(0, 0), (1, errors.OFFSET_METADATA_TOO_LARGE), (7, errors.UNKNOWN_TOPIC_OR_PARTITION)]),
        ("missing-topic", [(0, errors.UNKNOWN_TOPIC_OR_PARTITION)]),
    ]
    r = client.call(
        "OffsetCommit",
        8,
        group_id=group,
        generation_id_or_member_epoch=gen + 1,
        member_id=member,
        topics=[T(name="wt", partitions=[P(partition_index=0, committed_offset=9, committed_metadata="")])],
    )
    assert r.topics[0].partitions[0].error_code == errors.ILLEGAL_GENERATION
    r = client.call(
        "OffsetCommit",
        9,
        group_id="ghost-group",
        generation_id_or_member_epoch=3,
        member_id="m",
        topics=[T(name="wt", partitions=[P(partition_index=0, committed_offset=9, committed_metadata="")])],
    )
    assert r.topics[0].partitions[0].error_code == errors.GROUP_ID_NOT_FOUND
    # every OffsetFetch version reads the commit back, metadata string included
    for v in range(1, 8):
        r = client.call(
            "OffsetFetch",
            v,
            group_id=group,
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="wt", partition_indexes=[0, 2])],
        )
        rows = [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in r.topics[0].partitions]
        assert rows == [(0, 5, "m0", 0), (2, -1, "", 0)], (v, rows)
    G, GT = OffsetFetchRequest.OffsetFetchRequestGroup, OffsetFetchRequest.OffsetFetchRequestTopics
    r = client.call(
        "OffsetFetch",
        8,
        groups=[G(group_id=group, topics=None), G(group_id="unknown-g", topics=[GT(name="wt", partition_indexes=[0])])],
        require_stable=True,
    )
    assert [g.group_id for g in r.groups] == [group, "unknown-g"]
    assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in r.groups[0].topics] == [
        ("wt", [(0, 5)])
    ]
    assert r.groups[1].topics[0].partitions[0].committed_offset == -1
    # v10: topic ids
    topic_id = (
        client.call(
            "Metadata",
            12,
            topics=[
                __import__(
                    "kafkawire.protocol.messages", fromlist=["MetadataRequest"]
                ).MetadataRequest.MetadataRequestTopic(name="wt")
            ],
        )
        .topics[0]
        .topic_id
    )
    r = client.call(
        "OffsetFetch", 10, groups=[G(group_id=group, topics=[GT(topic_id=topic_id, partition_indexes=[0])])]
    )
    assert r.groups[0].topics[0].topic_id == topic_id and r.groups[0].topics[0].partitions[0].committed_offset == 5
    # OffsetDelete: the group's members subscribe to the topic
    D = OffsetDeleteRequest
    r = client.call(
        "OffsetDelete",
        0,
        group_id=group,
        topics=[D.OffsetDeleteRequestTopic(name="wt", partitions=[D.OffsetDeleteRequestPartition(partition_index=0)])],
    )
    assert r.error_code == 0 and r.topics[0].partitions[0].error_code == errors.GROUP_SUBSCRIBED_TO_TOPIC
    r = client.call("OffsetDelete", 0, group_id="never", topics=[])
    assert r.error_code == errors.GROUP_ID_NOT_FOUND


def test_list_describe_delete_groups(client):
    member, gen = stable_member(client, "adm")
    r = client.call("ListGroups", 5, states_filter=["stable"], types_filter=["classic"])
    assert "adm" in [g.group_id for g in r.groups]
    assert all(g.group_state == "Stable" and g.group_type == "classic" for g in r.groups)
    r = client.call("ListGroups", 5, states_filter=[], types_filter=["consumer"])
    assert "adm" not in [g.group_id for g in r.groups]
    r = client.call("DescribeGroups", 5, groups=["adm", "no-such"], include_authorized_operations=True)
    d = r.groups[0]
    assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
    assert d.members[0].member_id == member and d.members[0].member_assignment
    assert d.members[0].client_host.startswith("/127.0.0.1")
    assert r.groups[1].error_code == 0 and r.groups[1].group_state == "Dead"
    r = client.call("DescribeGroups", 6, groups=["no-such"])
    assert r.groups[0].error_code == errors.GROUP_ID_NOT_FOUND
    r = client.call("DeleteGroups", 2, groups_names=["adm", "no-such"])
    assert [(x.group_id, x.error_code) for x in r.results] == [
        ("adm", errors.NON_EMPTY_GROUP),
        ("no-such", errors.GROUP_ID_NOT_FOUND),
    ]
    client.call("LeaveGroup", 5, group_id="adm", members=[LeaveGroupRequest.MemberIdentity(member_id=member)])
    r = client.call("DeleteGroups", 2, groups_names=["adm"])
    assert r.results[0].error_code == 0


def test_second_member_during_rebalance_and_static_fencing(node):
    a, b = WireClient("127.0.0.1", node.port), WireClient("127.0.0.1", node.port)
    try:
        ma, gen = stable_member(a, "dup")
        # b joins: it waits in the rebalance; a learns about it from its heartbeat and rejoins
        r = join(b, "dup")
        assert r.error_code == errors.MEMBER_ID_REQUIRED
        pending = b.send(
            "JoinGroup",
            9,
            group_id="dup",
            session_timeout_ms=6000,
            rebalance_timeout_ms=10000,
            member_id=r.member_id,
            protocol_type="consumer",
            protocols=protocols(),
        )
        # pipelined behind the pending JoinGroup on the same connection: answered after it, in order
        behind = b.send("Metadata", 12, topics=None)
        for _ in range(50):  # b's JoinGroup travels on another connection
            code = a.call("Heartbeat", 4, group_id="dup", generation_id=gen, member_id=ma).error_code
            if code:
                break
            time.sleep(0.02)
        assert code == errors.REBALANCE_IN_PROGRESS
        ra = join(a, "dup", ma)
        rb = b.receive(pending)
        assert b.receive(behind).brokers[0].node_id == 1
        assert ra.error_code == rb.error_code == 0 and ra.generation_id == rb.generation_id == gen + 1
        assert len(ra.members) == 2 and rb.members == []
        # the follower's SyncGroup waits for the leader's, then gets its own bytes
        token = b.send(
            "SyncGroup",
            5,
            group_id="dup",
            generation_id=rb.generation_id,
            member_id=rb.member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[],
        )
        A = SyncGroupRequest.SyncGroupRequestAssignment
        sa = a.call(
            "SyncGroup",
            5,
            group_id="dup",
            generation_id=ra.generation_id,
            member_id=ma,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[A(member_id=ma, assignment=b"for-a"), A(member_id=rb.member_id, assignment=b"for-b")],
        )
        sb = b.receive(token)
        assert (sa.error_code, sa.assignment, sb.error_code, sb.assignment) == (0, b"for-a", 0, b"for-b")
        assert sb.protocol_name == "range" and sb.protocol_type == "consumer"
        bad = a.call(
            "SyncGroup",
            5,
            group_id="dup",
            generation_id=ra.generation_id,
            member_id=ma,
            protocol_type="connect",
            protocol_name="range",
            assignments=[],
        )
        assert bad.error_code == errors.INCONSISTENT_GROUP_PROTOCOL
    finally:
        a.close()
        b.close()


def test_consumer_group_heartbeat_and_describe(client, node):
    r = client.call(
        "ConsumerGroupHeartbeat",
        1,
        group_id="kip848",
        member_id="m-1",
        member_epoch=0,
        rebalance_timeout_ms=10000,
        subscribed_topic_names=["wt"],
        topic_partitions=[],
    )
    assert r.error_code == 0 and r.member_epoch >= 1 and r.heartbeat_interval_ms == 500
    assert sorted(r.assignment.topic_partitions[0].partitions) == [0, 1, 2]
    d = client.call("ConsumerGroupDescribe", 1, group_ids=["kip848", "nope"])
    g = d.groups[0]
    assert g.group_state == "Stable" and g.members[0].member_id == "m-1"
    assert g.members[0].assignment.topic_partitions[0].topic_name == "wt"
    assert d.groups[1].error_code == errors.GROUP_ID_NOT_FOUND
    bad = client.call(
        "ConsumerGroupHeartbeat",
        1,
        group_id="kip848",
        member_id="",
        member_epoch=0,
        rebalance_timeout_ms=10000,
        subscribed_topic_names=["wt"],
    )
    assert bad.error_code == errors.INVALID_REQUEST
    fenced = client.call(
        "ConsumerGroupHeartbeat", 1, group_id="kip848", member_id="m-1", member_epoch=r.member_epoch + 5
    )
    assert fenced.error_code == errors.FENCED_MEMBER_EPOCH
    left = client.call("ConsumerGroupHeartbeat", 1, group_id="kip848", member_id="m-1", member_epoch=-1)
    assert left.error_code == 0 and left.member_epoch == -1


def _cg_heartbeat(client, group, member_id, epoch, topics=None, owned=None):
    fields = dict(group_id=group, member_id=member_id, member_epoch=epoch)
    if epoch == 0:
        fields.update(rebalance_timeout_ms=10000, topic_partitions=[])
    if topics is not None:
        fields["subscribed_topic_names"] = topics
    if owned is not None:
        fields["topic_partitions"] = owned
    r = client.call("ConsumerGroupHeartbeat", 1, **fields)
    assert r.error_code == 0, r
    return r


def _cg_epochs(client, group):
    g = client.call("ConsumerGroupDescribe", 0, group_ids=[group]).groups[0]
    assert g.error_code == 0
    return g.group_epoch, g.assignment_epoch, g.group_state, {m.member_id: m.member_epoch for m in g.members}


def test_consumer_group_epochs_step_by_step(client):
    """Kafka 4.4's epoch sequence: a new group is at epoch 1, a first subscription bumps it once (existing
    topic or not), an empty one not at all; every later change adds one."""
    r = _cg_heartbeat(client, "ep-empty", "m-1", 0, topics=[])
    assert r.member_epoch == 1 and _cg_epochs(client, "ep-empty") == (1, 1, "Stable", {"m-1": 1})
    r = _cg_heartbeat(client, "ep-empty", "m-1", 1, topics=["wt"])
    assert r.member_epoch == 2 and sorted(r.assignment.topic_partitions[0].partitions) == [0, 1, 2]
    assert _cg_epochs(client, "ep-empty") == (2, 2, "Stable", {"m-1": 2})
    r = _cg_heartbeat(client, "ep-empty", "m-1", 2, topics=["wt"])  # the same topics: no new epoch
    assert r.member_epoch == 2 and _cg_epochs(client, "ep-empty")[:2] == (2, 2)
    _cg_heartbeat(client, "ep-empty", "m-1", 2, topics=["wt", "ep-no-such-topic"])
    assert _cg_epochs(client, "ep-empty")[0] == 3
    r = _cg_heartbeat(client, "ep-missing", "m-1", 0, topics=["ep-no-such-topic"])
    assert r.member_epoch == 2 and r.assignment.topic_partitions == []
    assert _cg_epochs(client, "ep-missing") == (2, 2, "Stable", {"m-1": 2})
    for group in ("ep-empty", "ep-missing"):
        left = client.call("ConsumerGroupHeartbeat", 1, group_id=group, member_id="m-1", member_epoch=-1)
        assert left.error_code == 0
        epoch = _cg_epochs(client, group)
        assert epoch[2] == "Empty" and epoch[0] == epoch[1]  # leaving bumps; the assignment epoch catches up


def test_consumer_group_second_member_waits_for_the_assignment_interval(client):
    """A second member bumps the epoch, but the target is computed only a second (Kafka's default
    group.consumer.assignment.interval.ms) after the previous one: until then the group is Assigning and the
    new member is at the old target's epoch with nothing."""
    r1 = _cg_heartbeat(client, "ep-two", "m-1", 0, topics=["wt"])
    started = time.monotonic()
    assert r1.member_epoch == 2
    topic_id = r1.assignment.topic_partitions[0].topic_id
    owned = [ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=topic_id, partitions=[0, 1, 2])]
    r2 = _cg_heartbeat(client, "ep-two", "m-2", 0, topics=["wt"])
    assert r2.member_epoch == 2 and r2.assignment.topic_partitions == []
    if time.monotonic() - started < 0.8:
        assert _cg_epochs(client, "ep-two") == (3, 2, "Assigning", {"m-1": 2, "m-2": 2})
    try:
        deadline = time.monotonic() + 10
        while True:
            r1 = _cg_heartbeat(client, "ep-two", "m-1", 2, owned=owned)
            epochs = _cg_epochs(client, "ep-two")
            if epochs[1] == 3:
                break
            assert epochs[:3] == (3, 2, "Assigning") and time.monotonic() < deadline
            time.sleep(0.1)
        assert time.monotonic() - started >= 0.9  # not before the interval
        # m-1 must first give up what m-2 gets: it keeps epoch 2 until it reports the revocation
        assert r1.member_epoch == 2 and epochs == (3, 3, "Reconciling", {"m-1": 2, "m-2": 2})
        kept = sorted(r1.assignment.topic_partitions[0].partitions)
        assert len(kept) in (1, 2)
        owned = [ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=topic_id, partitions=kept)]
        assert _cg_heartbeat(client, "ep-two", "m-1", 2, owned=owned).member_epoch == 3
        r2 = _cg_heartbeat(client, "ep-two", "m-2", 2, owned=[])
        assert r2.member_epoch == 3
        got = sorted(r2.assignment.topic_partitions[0].partitions)
        assert sorted(kept + got) == [0, 1, 2]
        assert _cg_epochs(client, "ep-two") == (3, 3, "Stable", {"m-1": 3, "m-2": 3})
    finally:
        for m in ("m-1", "m-2"):
            client.call("ConsumerGroupHeartbeat", 1, group_id="ep-two", member_id=m, member_epoch=-1)


def test_classic_member_joins_a_consumer_group(client):
    r = client.call(
        "ConsumerGroupHeartbeat",
        1,
        group_id="kip848-mixed",
        member_id="m-1",
        member_epoch=0,
        rebalance_timeout_ms=10000,
        subscribed_topic_names=["wt"],
        topic_partitions=[],
    )
    assert r.error_code == 0 and r.member_epoch >= 1
    try:
        j = join(client, "kip848-mixed")
        assert j.error_code == errors.MEMBER_ID_REQUIRED and j.member_id
    finally:
        client.call("ConsumerGroupHeartbeat", 1, group_id="kip848-mixed", member_id="m-1", member_epoch=-1)


def test_internal_topic_listed_as_internal_in_metadata(client):
    from kafkawire.protocol.messages import MetadataRequest

    stable_member(client, "meta-check")
    everything = client.call("Metadata", 12, topics=None)
    internal = {t.name: t.is_internal for t in everything.topics}
    assert internal.get("__consumer_offsets") is True
    # the coordinators' logs are the only internal topics (Kafka also has __transaction_state once a
    # transaction coordinator was looked up)
    assert {name for name, flag in internal.items() if flag} <= {"__consumer_offsets", "__transaction_state"}
    assert internal.get("wt") is False
    named = client.call("Metadata", 12, topics=[MetadataRequest.MetadataRequestTopic(name="__consumer_offsets")])
    assert named.topics[0].error_code == 0 and named.topics[0].is_internal


def test_every_version_of_the_admin_and_offset_apis(client, advertised, peer_target):
    from kafkawire.protocol.messages import MetadataRequest

    def versions(api, lo, hi):
        return served(advertised, peer_target, api, range(lo, hi + 1))

    member, gen = stable_member(client, "allv")
    topic_id = client.call("Metadata", 12, topics=[MetadataRequest.MetadataRequestTopic(name="wt")]).topics[0].topic_id
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestPartition
    if versions("OffsetCommit", 0, 0):
        # v0 carries no member: Kafka accepts it only for a group without members
        r = client.call(
            "OffsetCommit",
            0,
            group_id="allv",
            topics=[T(name="wt", partitions=[P(partition_index=1, committed_offset=1, committed_metadata="")])],
        )
        assert r.topics[0].partitions[0].error_code == errors.UNKNOWN_MEMBER_ID
        r = client.call(
            "OffsetCommit",
            0,
            group_id="allv-simple",
            topics=[T(name="wt", partitions=[P(partition_index=1, committed_offset=1, committed_metadata="")])],
        )
        assert r.topics[0].partitions[0].error_code == 0
    for v in versions("OffsetCommit", 1, 10):
        topic = T(topic_id=topic_id) if v >= 10 else T(name="wt")
        topic.partitions = [P(partition_index=1, committed_offset=100 + v, committed_metadata=f"v{v}")]
        fields = dict(group_id="allv", topics=[topic])
        if v >= 1:
            fields.update(generation_id_or_member_epoch=gen, member_id=member)
        r = client.call("OffsetCommit", v, **fields)
        assert r.topics[0].partitions[0].error_code == 0, (v, r)
        if v >= 10:
            assert r.topics[0].topic_id == topic_id
        got = (
            client.call(
                "OffsetFetch",
                7,
                group_id="allv",
                topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="wt", partition_indexes=[1])],
            )
            .topics[0]
            .partitions[0]
        )
        assert (got.committed_offset, got.metadata) == (100 + v, f"v{v}")
    for v in versions("DescribeGroups", 0, 6):
        fields = {"groups": ["allv"]}
        if v >= 3:
            fields["include_authorized_operations"] = True
        d = client.call("DescribeGroups", v, **fields).groups[0]
        assert d.group_state == "Stable" and d.members[0].member_id == member
    for v in versions("ListGroups", 0, 5):
        groups = client.call("ListGroups", v).groups
        assert "allv" in [g.group_id for g in groups]
    if versions("LeaveGroup", 0, 0):
        assert client.call("LeaveGroup", 0, group_id="allv", member_id=member).error_code == 0
    else:
        assert (
            client.call(
                "LeaveGroup", 5, group_id="allv", members=[LeaveGroupRequest.MemberIdentity(member_id=member)]
            ).error_code
            == 0
        )
    commit_v = versions("OffsetCommit", 2, 10)[0]
    for v in versions("DeleteGroups", 0, 3):
        client.call(
            "OffsetCommit",
            commit_v,
            group_id=f"del{v}",
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[T(name="wt", partitions=[P(partition_index=0, committed_offset=1, committed_metadata="")])],
        )
        r = client.call("DeleteGroups", v, groups_names=[f"del{v}"])
        assert r.results[0].error_code == 0
