"""Group answers that depend on the group id and on what the coordinator knows: the empty id, unknown groups,
unknown topics and partitions, subscribed topics. Each runs on kafkawire and on Apache Kafka 4.4 and asserts
the same answer on both (found different by the conformance suite)."""

from __future__ import annotations

import time
import uuid

import pytest

from kafkawire.protocol import errors
from kafkawire.protocol.messages import (
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

from .test_wire_groups import COORDINATOR_NOT_READY, advertised, client, node, served  # noqa: F401 (fixtures)


def ready(client, groups, timeout=60.0):
    """Until the coordinator of every group answers (Kafka loads its offsets partitions after creating them)."""
    deadline = time.monotonic() + timeout
    while True:
        found = client.call("FindCoordinator", 4, key_type=0, coordinator_keys=groups).coordinators
        described = client.call("DescribeGroups", 5, groups=groups).groups
        if not any(f.error_code for f in found) and not any(g.error_code in COORDINATOR_NOT_READY for g in described):
            return
        assert time.monotonic() < deadline, "group coordinators not ready"
        time.sleep(0.2)


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_offset_commit_to_the_empty_group_id_is_accepted(client, advertised, peer_target):
    """Kafka accepts commits (and fetches) for the group id "" at every version, for old clients."""
    ready(client, [""])
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestPartition
    for v in served(advertised, peer_target, "OffsetCommit", range(0, 9)):
        fields = dict(
            group_id="",
            topics=[
                T(name="wt", partitions=[P(partition_index=2, committed_offset=100 + v, committed_metadata="empty-id")])
            ],
        )
        if v >= 1:
            fields.update(generation_id_or_member_epoch=-1, member_id="")
        r = client.call("OffsetCommit", v, **fields)
        assert [(p.partition_index, p.error_code) for p in r.topics[0].partitions] == [(2, 0)], v
        f = client.call(
            "OffsetFetch",
            5,
            group_id="",
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="wt", partition_indexes=[2])],
        )
        assert (f.error_code, f.topics[0].partitions[0].committed_offset) == (0, 100 + v), v


def test_heartbeat_with_the_empty_group_id_is_invalid(client, advertised, peer_target):
    ready(client, [""])
    for v in served(advertised, peer_target, "Heartbeat", range(0, 5)):
        fields = dict(group_id="", generation_id=1, member_id="somebody")
        assert client.call("Heartbeat", v, **fields).error_code == errors.INVALID_GROUP_ID, v


def test_leave_unknown_group_and_empty_group_id(client, advertised, peer_target):
    """An unknown group: from v3 no top-level error and each member UNKNOWN_MEMBER_ID (v0-2 carry the member's
    error at the top); the empty group id: INVALID_GROUP_ID and no member answers."""
    group = unique("leave-nobody")
    ready(client, [group, ""])
    M = LeaveGroupRequest.MemberIdentity
    for v in served(advertised, peer_target, "LeaveGroup", range(0, 6)):
        if v < 3:
            assert (
                client.call("LeaveGroup", v, group_id=group, member_id="m1").error_code == errors.UNKNOWN_MEMBER_ID
            ), v
            assert client.call("LeaveGroup", v, group_id="", member_id="m1").error_code == errors.INVALID_GROUP_ID
            continue
        r = client.call(
            "LeaveGroup", v, group_id=group, members=[M(member_id="m1"), M(member_id="", group_instance_id="i1")]
        )
        assert r.error_code == 0, v
        assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == [
            ("m1", None, errors.UNKNOWN_MEMBER_ID),
            ("", "i1", errors.UNKNOWN_MEMBER_ID),
        ], v
        r = client.call("LeaveGroup", v, group_id="", members=[M(member_id="m1")])
        assert (r.error_code, r.members) == (errors.INVALID_GROUP_ID, []), v


def _offset_delete(client, group, topics):
    D = OffsetDeleteRequest
    r = client.call(
        "OffsetDelete",
        0,
        group_id=group,
        topics=[
            D.OffsetDeleteRequestTopic(
                name=t, partitions=[D.OffsetDeleteRequestPartition(partition_index=p) for p in ps]
            )
            for t, ps in topics
        ],
    )
    return r.error_code, {t.name: sorted((p.partition_index, p.error_code) for p in t.partitions) for t in r.topics}


def _commit(client, group, partitions):
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestPartition
    r = client.call(
        "OffsetCommit",
        8,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            T(
                name="wt",
                partitions=[P(partition_index=p, committed_offset=7, committed_metadata="") for p in partitions],
            )
        ],
    )
    assert [p.error_code for p in r.topics[0].partitions] == [0] * len(partitions)


def _stable_with_metadata(client, group, metadata):
    f = dict(
        group_id=group,
        session_timeout_ms=10000,
        rebalance_timeout_ms=10000,
        member_id="",
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=metadata)],
    )
    r = client.call("JoinGroup", 9, **f)
    if r.error_code == errors.MEMBER_ID_REQUIRED:
        r = client.call("JoinGroup", 9, **dict(f, member_id=r.member_id))
    assert r.error_code == 0
    s = client.call(
        "SyncGroup",
        5,
        group_id=group,
        generation_id=r.generation_id,
        member_id=r.member_id,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=r.member_id, assignment=b"")],
    )
    assert s.error_code == 0


def test_offset_delete_unknown_topics_partitions_and_group_errors(client):
    """Unknown topics and partitions: UNKNOWN_TOPIC_OR_PARTITION beside the known partitions' answers; an
    unknown group GROUP_ID_NOT_FOUND and the empty id INVALID_GROUP_ID, without partition answers."""
    group, nobody = unique("od-known"), unique("od-nobody")
    ready(client, [group, nobody, ""])
    _commit(client, group, [0, 1])
    assert _offset_delete(client, group, [("wt", [0, 7]), ("od-missing-topic", [0, 1])]) == (
        0,
        {
            "wt": [(0, 0), (7, errors.UNKNOWN_TOPIC_OR_PARTITION)],
            "od-missing-topic": [(0, errors.UNKNOWN_TOPIC_OR_PARTITION), (1, errors.UNKNOWN_TOPIC_OR_PARTITION)],
        },
    )
    assert _offset_delete(client, nobody, [("wt", [0, 7]), ("od-missing-topic", [0])]) == (
        errors.GROUP_ID_NOT_FOUND,
        {},
    )
    assert _offset_delete(client, "", [("wt", [0]), ("od-missing-topic", [0])]) == (errors.INVALID_GROUP_ID, {})
    assert _offset_delete(client, "", []) == (errors.INVALID_GROUP_ID, {})


@pytest.mark.parametrize(
    "subscription, subscribed_to_all",
    [
        (b"\x00\x01" + b"\x00\x00\x00\x00" + b"\x00\x00", True),  # no room for the user data: unreadable
        (b"\x00", True),  # not even a version
        (b"\x00\x00" + b"\x00\x00\x00\x01\x00\x02wt" + b"\xff\xff\xff\xff", False),  # v0: topics, null user data
        (b"\x00\x01" + b"\x00\x00\x00\x01\x00\x02wt" + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x00", False),  # v1
    ],
    ids=["truncated", "no-version", "v0", "v1"],
)
def test_offset_delete_when_the_subscription_cannot_be_read(client, subscription, subscribed_to_all):
    """A consumer-protocol group whose member subscription is unreadable is taken as subscribed to every
    topic (GROUP_SUBSCRIBED_TO_TOPIC everywhere); readable ones protect only their topics."""
    group = unique("od-sub")
    ready(client, [group])
    _commit(client, group, [0])  # committed while the group is empty, then a member joins
    other = unique("od-other")
    client.call(
        "CreateTopics",
        7,
        topics=[
            __import__("kafkawire.protocol.messages", fromlist=["x"]).CreateTopicsRequest.CreatableTopic(
                name=other, num_partitions=1, replication_factor=1, assignments=[], configs=[]
            )
        ],
        timeout_ms=10000,
    )
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestPartition
    deadline = time.monotonic() + 10
    while True:  # Kafka knows a new topic a moment after creating it
        r = client.call(
            "OffsetCommit",
            8,
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[T(name=other, partitions=[P(partition_index=0, committed_offset=1, committed_metadata="")])],
        )
        if r.topics[0].partitions[0].error_code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert r.topics[0].partitions[0].error_code == 0
    _stable_with_metadata(client, group, subscription)
    err, topics = _offset_delete(client, group, [("wt", [0]), (other, [0])])
    assert err == 0
    assert topics["wt"] == [(0, errors.GROUP_SUBSCRIBED_TO_TOPIC)]
    assert topics[other] == [(0, errors.GROUP_SUBSCRIBED_TO_TOPIC if subscribed_to_all else 0)]


def _cgh(client, v, group, member, epoch, *, topics=("wt",), owned=(), instance=None, assignor=None):
    r = client.call(
        "ConsumerGroupHeartbeat",
        v,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        instance_id=instance,
        rack_id=None,
        rebalance_timeout_ms=10000 if epoch == 0 else -1,
        subscribed_topic_names=list(topics) if topics is not None else None,
        subscribed_topic_regex=None,
        server_assignor=assignor,
        topic_partitions=None if owned is None else list(owned),
    )
    return r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms, r.assignment


def test_consumer_group_heartbeat_error_answers(client, advertised, peer_target):
    """Error answers carry no member id, epoch 0, no interval and no assignment; a join must send an (empty)
    owned list; a non-zero epoch needs a member id and an existing group; -2 needs an instance id."""
    versions = served(advertised, peer_target, "ConsumerGroupHeartbeat", [0, 1])
    if not versions:
        pytest.skip("no ConsumerGroupHeartbeat")
    group, missing = unique("cgh-err"), unique("cgh-missing")
    ready(client, [group, missing])
    none = (None, 0, 0, None)
    for v in versions:
        member = f"cgh-member-{v}-{uuid.uuid4().hex[:6]}" if v >= 1 else ""
        assert _cgh(client, v, group, member, 0, owned=None) == (errors.INVALID_REQUEST, *none), v
        assert _cgh(client, v, group, "", 5) == (errors.INVALID_REQUEST, *none), v
        assert _cgh(client, v, missing, "somebody", 5) == (errors.GROUP_ID_NOT_FOUND, *none), v
        assert _cgh(client, v, missing, "somebody", -1) == (errors.GROUP_ID_NOT_FOUND, *none), v
        assert _cgh(client, v, missing, "somebody", -2) == (errors.INVALID_REQUEST, *none), v
        assert _cgh(client, v, group, member or "x", 0, assignor="no-such-assignor") == (
            errors.UNSUPPORTED_ASSIGNOR,
            *none,
        ), v
        joined = _cgh(client, v, group, member, 0)
        assert joined[0] == 0 and joined[1], v
        mid, epoch = joined[1], joined[2]
        assert _cgh(client, v, group, mid, epoch + 7, topics=None) == (errors.FENCED_MEMBER_EPOCH, *none), v
        assert _cgh(client, v, group, "nobody-" + mid, 3, topics=None) == (errors.UNKNOWN_MEMBER_ID, *none), v
        assert _cgh(client, v, group, mid, -1, topics=None)[:3] == (0, mid, -1), v
        assert _cgh(client, v, group, mid, -1, topics=None) == (errors.UNKNOWN_MEMBER_ID, *none), v
