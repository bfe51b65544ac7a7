"""Consumer group APIs: FindCoordinator, the classic group protocol, KIP-848, committed offsets, group admin.

The state lives in ``kafkawire.broker.groups.GroupCoordinator``, which the
broker creates and starts (it replays ``__consumer_offsets`` before the
broker serves) and these handlers reach through
``broker.current_group_coordinator()``. JoinGroup and SyncGroup wait for the
rest of the group: their handlers await a future the coordinator completes,
which the connection layer allows (responses still go out in request order).
"""

from __future__ import annotations

import asyncio

from kafkawire.protocol import errors
from kafkawire.protocol.messages import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    FindCoordinatorResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListGroupsResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)

from ..dispatch import handles
from ..groups import CommitPartition, JoinRequest
from ..groups.consumer import UNREVOKED
from ..groups.states import GroupState
from ._common import INT32_MIN, ZERO_UUID, find_topic

# READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: what Kafka 4.4 reports for a group without an authorizer
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)


def client_host(ctx) -> str:
    peer = getattr(ctx.connection, "peer", None) or ""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]") if host else ""


async def _await(register):
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def done(result):
        if not fut.done():
            fut.set_result(result)

    register(done)
    return await fut


# -- FindCoordinator -------------------------------------------------------------------------------------
@handles("FindCoordinator", 0, 6)
def find_coordinator(broker, ctx, body):
    v = ctx.api_version
    coord = broker.current_group_coordinator()
    host, port = broker.advertised_for(ctx.connection)
    key_type = body.key_type if v >= 1 else 0
    # Kafka creates __consumer_offsets when a client first looks for a group coordinator
    offsets_ok = True
    if key_type == 0 and (v < 4 or body.coordinator_keys):
        offsets_ok = coord.ensure_offsets_topic()
    elif key_type == 1 and (v < 4 or body.coordinator_keys):  # and __transaction_state for a transactional id
        txn = broker.txn_coordinator
        offsets_ok = txn is not None and txn.ensure_topic()

    def answer(key):
        if key_type not in (0, 1):
            return errors.INVALID_REQUEST, f"Unsupported key type {key_type}"
        if not offsets_ok:
            return errors.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
        return 0, None

    # Kafka's success answers carry a message too: "NONE" up to v3, "" per key from v4 (never null).
    if v < 4:
        err, msg = answer(body.key)
        if err:
            return FindCoordinatorResponse(error_code=err, error_message=msg, node_id=-1, host="", port=-1)
        return FindCoordinatorResponse(error_code=0, error_message="NONE", node_id=broker.node_id, host=host, port=port)
    out = []
    for key in body.coordinator_keys:
        err, msg = answer(key)
        if err:
            out.append(
                FindCoordinatorResponse.Coordinator(
                    key=key, node_id=-1, host="", port=-1, error_code=err, error_message=msg
                )
            )
        else:
            out.append(
                FindCoordinatorResponse.Coordinator(
                    key=key, node_id=broker.node_id, host=host, port=port, error_code=0, error_message=""
                )
            )
    return FindCoordinatorResponse(coordinators=out)


# -- classic protocol --------------------------------------------------------------------------------------
@handles("JoinGroup", 0, 9)
async def join_group(broker, ctx, body):
    v = ctx.api_version
    coord = broker.current_group_coordinator()
    rebalance_timeout = body.rebalance_timeout_ms if v >= 1 else body.session_timeout_ms
    instance = body.group_instance_id if v >= 5 else None
    protocols = [(p.name, bytes(p.metadata)) for p in body.protocols]
    join = JoinRequest(
        body.group_id,
        body.member_id,
        instance,
        body.protocol_type,
        protocols,
        body.session_timeout_ms,
        rebalance_timeout,
        ctx.client_id,
        client_host(ctx),
        require_known_member_id=v >= 4,
        supports_skip_assignment=v >= 9,
        reason=body.reason if v >= 8 else None,
    )
    res = await _await(lambda cb: coord.join_group(join, cb))
    protocol_name = res.protocol_name
    if protocol_name is None and v < 7:
        protocol_name = ""
    members = [
        JoinGroupResponse.JoinGroupResponseMember(member_id=mid, group_instance_id=iid, metadata=meta)
        for mid, iid, meta in res.members
    ]
    if res.error:
        return JoinGroupResponse(
            error_code=res.error,
            generation_id=-1,
            member_id=res.member_id or "",
            protocol_type=None,
            protocol_name=None if v >= 7 else "",
            leader="",
            members=[],
        )
    return JoinGroupResponse(
        error_code=0,
        generation_id=res.generation_id,
        protocol_type=res.protocol_type,
        protocol_name=protocol_name,
        leader=res.leader,
        skip_assignment=res.skip_assignment,
        member_id=res.member_id,
        members=members,
    )


@handles("SyncGroup", 0, 5)
async def sync_group(broker, ctx, body):
    v = ctx.api_version
    if v >= 5 and (body.protocol_type is None or body.protocol_name is None):
        # From v5 both are mandatory: Kafka refuses a SyncGroup without them before looking at the group.
        return SyncGroupResponse(
            error_code=errors.INCONSISTENT_GROUP_PROTOCOL, protocol_type=None, protocol_name=None, assignment=b""
        )
    coord = broker.current_group_coordinator()
    res = await _await(
        lambda cb: coord.sync_group(
            body.group_id,
            body.generation_id,
            body.member_id,
            body.group_instance_id if v >= 3 else None,
            body.protocol_type if v >= 5 else None,
            body.protocol_name if v >= 5 else None,
            [(a.member_id, bytes(a.assignment)) for a in body.assignments],
            cb,
        )
    )
    return SyncGroupResponse(
        error_code=res.error,
        protocol_type=res.protocol_type if not res.error else None,
        protocol_name=res.protocol_name if not res.error else None,
        assignment=res.assignment if not res.error else b"",
    )


@handles("Heartbeat", 0, 4)
def heartbeat(broker, ctx, body):
    coord = broker.current_group_coordinator()
    err = coord.heartbeat(
        body.group_id, body.generation_id, body.member_id, body.group_instance_id if ctx.api_version >= 3 else None
    )
    return HeartbeatResponse(error_code=err)


@handles("LeaveGroup", 0, 5)
def leave_group(broker, ctx, body):
    v = ctx.api_version
    coord = broker.current_group_coordinator()
    if v < 3:
        top, per = coord.leave_group(body.group_id, [(body.member_id, None)])
        return LeaveGroupResponse(error_code=top or per[0])
    identities = [(m.member_id, m.group_instance_id) for m in body.members]
    top, per = coord.leave_group(body.group_id, identities)
    return LeaveGroupResponse(
        error_code=top,
        members=[
            LeaveGroupResponse.MemberResponse(member_id=mid, group_instance_id=iid, error_code=e)
            for (mid, iid), e in zip(identities, per)
        ],
    )


# -- offsets ------------------------------------------------------------------------------------------------
@handles("OffsetCommit", 0, 10)
def offset_commit(broker, ctx, body):
    v = ctx.api_version
    coord = broker.current_group_coordinator()
    commits, slots = [], []  # slots: (topic name, topic id, partition index, error or None)
    for t in body.topics:
        name, tid = (t.name, ZERO_UUID) if v < 10 else (None, t.topic_id)
        missing_id = False
        if v >= 10:
            meta = find_topic(broker, topic_id=t.topic_id)
            if meta is None:
                missing_id = True
            else:
                name = meta.name
        for p in t.partitions:
            if missing_id:
                slots.append((name, tid, p.partition_index, errors.UNKNOWN_TOPIC_ID))
                continue
            slots.append((name, tid, p.partition_index, None))
            commits.append(
                CommitPartition(
                    name,
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch if v >= 6 else -1,
                    p.committed_metadata,
                )
            )
    results = iter(
        coord.offset_commit(
            body.group_id,
            body.generation_id_or_member_epoch if v >= 1 else -1,
            body.member_id if v >= 1 else "",
            body.group_instance_id if v >= 7 else None,
            v,
            commits,
        )
    )
    topics: dict = {}
    for name, tid, index, err in slots:
        code = err if err is not None else next(results)
        key = (name, tid)
        if key not in topics:
            topics[key] = OffsetCommitResponse.OffsetCommitResponseTopic(name=name or "", topic_id=tid, partitions=[])
        topics[key].partitions.append(
            OffsetCommitResponse.OffsetCommitResponsePartition(partition_index=index, error_code=code)
        )
    return OffsetCommitResponse(topics=list(topics.values()))


def _fetch_group(broker, coord, group_id, topics, by_id, member_id, member_epoch, require_stable):
    """(group error, [(name, topic_id, rows)]) with rows [(partition, offset, epoch, metadata, error)]."""
    names = None
    unknown_ids = []
    if topics is not None:
        names = []
        for t in topics:
            if by_id:
                meta = find_topic(broker, topic_id=t.topic_id)
                if meta is None:
                    unknown_ids.append((t.topic_id, list(t.partition_indexes)))
                    continue
                names.append((meta.name, list(t.partition_indexes)))
            else:
                names.append((t.name, list(t.partition_indexes)))
    err, rows = coord.offset_fetch(
        group_id, names, member_id=member_id, member_epoch=member_epoch, require_stable=require_stable
    )
    out = []
    for name, parts in rows:
        tid = ZERO_UUID
        if by_id:
            meta = find_topic(broker, name)
            if meta is None:
                continue
            tid = meta.topic_id
        out.append((name, tid, parts))
    for tid, parts in unknown_ids:
        out.append(("", tid, [(p, -1, -1, "", errors.UNKNOWN_TOPIC_ID) for p in parts]))
    return err, out


@handles("OffsetFetch", 0, 10)
def offset_fetch(broker, ctx, body):
    v = ctx.api_version
    coord = broker.current_group_coordinator()
    R = OffsetFetchResponse
    require_stable = bool(body.require_stable) if v >= 7 else False
    if v < 8:
        topics = body.topics if (v >= 2 or body.topics) else body.topics
        err, rows = _fetch_group(broker, coord, body.group_id, topics, False, None, -1, require_stable)
        out = []
        for name, _tid, parts in rows:
            out.append(
                R.OffsetFetchResponseTopic(
                    name=name,
                    partitions=[
                        R.OffsetFetchResponsePartition(
                            partition_index=p,
                            committed_offset=o,
                            committed_leader_epoch=e,
                            metadata=m,
                            error_code=pe or (err if v < 2 else 0),
                        )
                        for p, o, e, m, pe in parts
                    ],
                )
            )
        return R(topics=out, error_code=err)
    groups = []
    for g in body.groups:
        member_id = g.member_id if v >= 9 else None
        member_epoch = g.member_epoch if v >= 9 else -1
        err, rows = _fetch_group(broker, coord, g.group_id, g.topics, v >= 10, member_id, member_epoch, require_stable)
        topics = (
            [
                R.OffsetFetchResponseTopics(
                    name=name,
                    topic_id=tid,
                    partitions=[
                        R.OffsetFetchResponsePartitions(
                            partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m, error_code=pe
                        )
                        for p, o, e, m, pe in parts
                    ],
                )
                for name, tid, parts in rows
            ]
            if not err
            else []
        )
        groups.append(R.OffsetFetchResponseGroup(group_id=g.group_id, topics=topics, error_code=err))
    return R(groups=groups)


@handles("OffsetDelete", 0, 0)
def offset_delete(broker, ctx, body):
    coord = broker.current_group_coordinator()
    R = OffsetDeleteResponse
    # As Kafka: partitions of unknown topics, and unknown partitions, are answered UNKNOWN_TOPIC_OR_PARTITION
    # before the group is asked (listed first); a group error replaces every partition answer.
    refused: dict[str, list] = {}
    asked = []
    for t in body.topics:
        meta = find_topic(broker, t.name)
        known = [
            p.partition_index for p in t.partitions if meta is not None and 0 <= p.partition_index < meta.partitions
        ]
        for p in t.partitions:
            if p.partition_index not in known:
                refused.setdefault(t.name, []).append((p.partition_index, errors.UNKNOWN_TOPIC_OR_PARTITION))
        if known:
            asked.append((t.name, known))
    err, rows = coord.offset_delete(body.group_id, asked)
    if err:
        return R(error_code=err, topics=[])
    merged = {name: list(parts) for name, parts in refused.items()}
    for name, parts in rows:
        merged.setdefault(name, []).extend(parts)
    return R(
        error_code=0,
        topics=[
            R.OffsetDeleteResponseTopic(
                name=name,
                partitions=[R.OffsetDeleteResponsePartition(partition_index=p, error_code=e) for p, e in parts],
            )
            for name, parts in merged.items()
        ],
    )


# -- group admin ---------------------------------------------------------------------------------------------
@handles("ListGroups", 0, 5)
def list_groups(broker, ctx, body):
    v = ctx.api_version
    coord = broker.current_group_coordinator()
    states = list(body.states_filter) if v >= 4 and body.states_filter else None
    types = list(body.types_filter) if v >= 5 and body.types_filter else None
    return ListGroupsResponse(
        error_code=0,
        groups=[
            ListGroupsResponse.ListedGroup(group_id=gid, protocol_type=ptype, group_state=state, group_type=gtype)
            for gid, ptype, state, gtype in coord.list_groups(states, types)
        ],
    )


@handles("DescribeGroups", 0, 6)
def describe_groups(broker, ctx, body):
    v = ctx.api_version
    coord = broker.current_group_coordinator()
    R = DescribeGroupsResponse
    ops = GROUP_OPERATIONS if v >= 3 and body.include_authorized_operations else INT32_MIN
    out = []
    for gid in body.groups:
        group = coord.groups.get(gid)
        if group is None or group.kind != "classic":
            msg = f"Group {gid} not found." if group is None else f"Group {gid} is not a classic group."
            out.append(
                R.DescribedGroup(
                    error_code=errors.GROUP_ID_NOT_FOUND if v >= 6 else 0,
                    error_message=msg if v >= 6 else None,
                    group_id=gid,
                    group_state=GroupState.DEAD.value,
                    protocol_type="",
                    protocol_data="",
                    members=[],
                    authorized_operations=ops,
                )
            )
            continue
        stable = group.state == GroupState.STABLE
        members = [
            R.DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(group.protocol_name) if stable else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        out.append(
            R.DescribedGroup(
                error_code=0,
                group_id=gid,
                group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=(group.protocol_name or "") if stable else "",
                members=members,
                authorized_operations=ops,
            )
        )
    return R(groups=out)


@handles("DeleteGroups", 0, 3)
def delete_groups(broker, ctx, body):
    """v3 adds a per-group ErrorMessage. Kafka 4.4 fills it only for share groups whose persisted state
    could not be deleted; kafkawire has no share groups, so it stays null, as Kafka's does for every
    classic or consumer group outcome (deleted, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP)."""
    coord = broker.current_group_coordinator()
    ids = list(body.groups_names)
    return DeleteGroupsResponse(
        results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=e)
            for g, e in zip(ids, coord.delete_groups(ids))
        ]
    )


# -- KIP-848 ---------------------------------------------------------------------------------------------------
@handles("ConsumerGroupHeartbeat", 0, 1)
def consumer_group_heartbeat(broker, ctx, body):
    v = ctx.api_version
    coord = broker.current_group_coordinator()
    res = coord.consumer_heartbeat(
        version=v,
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        subscribed_topic_names=body.subscribed_topic_names,
        subscribed_topic_regex=body.subscribed_topic_regex if v >= 1 else None,
        server_assignor=body.server_assignor,
        topic_partitions=body.topic_partitions,
        client_id=ctx.client_id,
        client_host=client_host(ctx),
    )
    R = ConsumerGroupHeartbeatResponse
    assignment = None
    if res.assignment is not None and not res.error:
        assignment = R.Assignment(
            topic_partitions=[R.TopicPartitions(topic_id=tid, partitions=ps) for tid, ps in res.assignment]
        )
    return R(
        error_code=res.error,
        error_message=res.error_message,
        member_id=res.member_id,
        member_epoch=res.member_epoch,
        heartbeat_interval_ms=res.heartbeat_interval_ms,
        assignment=assignment,
    )


@handles("ConsumerGroupDescribe", 0, 1)
def consumer_group_describe(broker, ctx, body):
    coord = broker.current_group_coordinator()
    R = ConsumerGroupDescribeResponse
    names = {meta.topic_id: meta.name for meta in broker.storage.topics().values()}
    ops = GROUP_OPERATIONS if body.include_authorized_operations else INT32_MIN

    def assignment(tps):
        by: dict = {}
        for tid, p in tps:
            by.setdefault(tid, []).append(p)
        return R.Assignment(
            topic_partitions=[
                R.TopicPartitions(topic_id=tid, topic_name=names.get(tid, ""), partitions=sorted(ps))
                for tid, ps in sorted(by.items(), key=lambda kv: str(kv[0]))
            ]
        )

    out = []
    for gid in body.group_ids:
        group = coord.groups.get(gid)
        # Kafka's error entries: no state, no authorized operations (even when asked), INVALID_GROUP_ID
        # without a message for the empty id.
        if gid == "":
            out.append(
                R.DescribedGroup(
                    error_code=errors.INVALID_GROUP_ID,
                    error_message=None,
                    group_id=gid,
                    group_state="",
                    authorized_operations=INT32_MIN,
                )
            )
            continue
        if group is None or group.kind != "consumer":
            msg = f"Group {gid} not found." if group is None else f"Group {gid} is not a consumer group."
            out.append(
                R.DescribedGroup(
                    error_code=errors.GROUP_ID_NOT_FOUND,
                    error_message=msg,
                    group_id=gid,
                    group_state="",
                    authorized_operations=INT32_MIN,
                )
            )
            continue
        members = []
        for m in group.members.values():
            current = set(m.assigned) | (set(m.pending_revocation) if m.state == UNREVOKED else set())
            members.append(
                R.Member(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed_names),
                    subscribed_topic_regex=m.subscribed_regex or "",
                    assignment=assignment(current),
                    target_assignment=assignment(group.target.get(m.member_id, set())),
                    member_type=0 if m.classic is not None else 1,
                )
            )  # 0: classic protocol, 1: consumer protocol
        out.append(
            R.DescribedGroup(
                error_code=0,
                group_id=gid,
                group_state=group.state.value,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=group.assignor or coord.config.consumer_assignors[0],
                members=members,
                authorized_operations=ops,
            )
        )
    return R(groups=out)
