"""Group answers that depend on the group id and on what the coordinator knows: the empty id, unknown groups,
unknown topics and partitions, subscribed topics. Each runs on kafkawire and on Apache Kafka 4.4 and asserts
the same answer on both (found different by the conformance suite)."""
from __future__ import annotations

import time
import uuid

import pytest

from kafkawire.protocol import errors
from kafkawire.protocol.messages import (JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
                                         OffsetDeleteRequest, OffsetFetchRequest, SyncGroupRequest)

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
        fields = dict(group_id="", topics=[T(name="wt", partitions=[
            P(partition_index=2, committed_offset=100 + v, committed_metadata="empty-id")])])
        if v >= 1:
            fields.update(generation_id_or_member_epoch=-1, member_id="")
        r = client.call("OffsetCommit", v, **fields)
        assert [(p.partition_index, p.error_code) for p in r.topics[0].partitions] == [(2, 0)], v
        f = client.call("OffsetFetch", 5, group_id="", topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name="wt", partition_indexes=[2])])
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
            assert client.call("LeaveGroup", v, group_id=group, member_id="m1").error_code == \
                errors.UNKNOWN_MEMBER_ID, v
            assert client.call("LeaveGroup", v, group_id="", member_id="m1").error_code == errors.INVALID_GROUP_ID
            continue
        r = client.call("LeaveGroup", v, group_id=group, members=[M(member_id="m1"),
                                                                   M(member_id="", group_instance_id="i1")])
        assert r.error_code == 0, v
        assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == [
            ("m1", None, errors.UNKNOWN_MEMBER_ID), ("", "i1", errors.UNKNOWN_MEMBER_ID)], v
        r = client.call("LeaveGroup", v, group_id="", members=[M(member_id="m1")])
        assert (r.error_code, r.members) == (errors.INVALID_GROUP_ID, []), v
