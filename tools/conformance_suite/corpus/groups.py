"""Consumer groups: the classic protocol, KIP-848, committed offsets."""

from __future__ import annotations

from . import INTERNAL, RANDOM_ID, case, for_each

SESSION_MS = 10000
PROTOCOLS = [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x00\x00\x00"}]
ASSIGNMENT = b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"


def _coordinator(s):
    s.coordinator_ready(s.name("g"))


def _join_data(s, group, member="", instance=None, protocols=PROTOCOLS, session=SESSION_MS, ptype="consumer"):
    return {
        "group_id": group,
        "session_timeout_ms": session,
        "rebalance_timeout_ms": SESSION_MS,
        "member_id": member,
        "group_instance_id": instance,
        "protocol_type": ptype,
        "protocols": protocols,
        "reason": None,
    }


def join(s, group, *, version=None, probe=False, label="join", **kw):
    """A one-member classic group: join (rejoining with the member id when asked), then sync as leader."""
    v = s.top("JoinGroup") if version is None else version
    send = (
        (lambda data, lab: s.probe("JoinGroup", v, data, label=lab))
        if probe
        else (lambda data, lab: s.call("JoinGroup", v, data))
    )
    answer = send(_join_data(s, group, **kw), label)
    if answer.error_code == 79:  # MEMBER_ID_REQUIRED
        answer = send(_join_data(s, group, member=answer.member_id, **kw), label + "-again")
    return answer


def sync(
    s,
    group,
    joined,
    *,
    probe=False,
    version=None,
    label="sync",
    generation=None,
    member=None,
    assignments=True,
    ptype="consumer",
    pname="range",
):
    v = s.top("SyncGroup") if version is None else version
    member = joined.member_id if member is None else member
    data = {
        "group_id": group,
        "generation_id": joined.generation_id if generation is None else generation,
        "member_id": member,
        "group_instance_id": None,
        "protocol_type": ptype,
        "protocol_name": pname,
        "assignments": [{"member_id": member, "assignment": ASSIGNMENT}] if assignments else [],
    }
    return s.probe("SyncGroup", v, data, label=label) if probe else s.call("SyncGroup", v, data)


def stable(s, group, **kw):
    joined = join(s, group, **kw)
    sync(s, group, joined)
    return joined


# -- FindCoordinator ---------------------------------------------------------------


def _find(s, v, key, key_type=0, keys=None):
    return s.probe(
        "FindCoordinator", v, {"key": key, "key_type": key_type, "coordinator_keys": [key] if keys is None else keys}
    )


for_each(
    "FindCoordinator",
    {
        "group": lambda s, v: _find(s, v, s.name("g")),
        "new-group": lambda s, v: _find(s, v, s.name(f"new{v}")),
        # Kafka answers COORDINATOR_NOT_AVAILABLE for a transaction key until it has created
        # __transaction_state; the runner's warm-up has both brokers create it before any case.
        "transaction-key": lambda s, v: _find(s, v, s.name("tx"), key_type=1) if v >= 1 else None,
        "share-key": lambda s, v: _find(s, v, s.name("g") + ":topicid:0", key_type=2) if v >= 1 else None,
        "invalid-key-type": lambda s, v: _find(s, v, s.name("g"), key_type=7) if v >= 1 else None,
        "empty-key": lambda s, v: _find(s, v, ""),
        "several-keys": lambda s, v: _find(s, v, "", keys=[s.name("g"), s.name("g2"), ""]) if v >= 4 else None,
        "no-keys": lambda s, v: _find(s, v, "", keys=[]) if v >= 4 else None,
    },
    setup=_coordinator,
)


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ---------------------------------------


def _g(s, v):
    return s.name(f"g{v}")


for_each(
    "JoinGroup",
    {
        "new-member": lambda s, v: join(s, _g(s, v), version=v, probe=True),
        "and-sync": lambda s, v: sync(s, _g(s, v), join(s, _g(s, v), version=v, probe=True), probe=True),
        "rejoin-known-member": lambda s, v: (
            lambda j: join(s, _g(s, v), version=v, probe=True, member=j.member_id, label="rejoin")
        )(stable(s, _g(s, v))),
        "unknown-member": lambda s, v: (
            stable(s, _g(s, v)),
            join(s, _g(s, v), version=v, probe=True, member="nobody-1"),
        ),
        "session-timeout-too-small": lambda s, v: join(s, _g(s, v), version=v, probe=True, session=1),
        "session-timeout-too-large": lambda s, v: join(s, _g(s, v), version=v, probe=True, session=1 << 30),
        "no-protocols": lambda s, v: join(s, _g(s, v), version=v, probe=True, protocols=[]),
        "empty-group-id": lambda s, v: join(s, "", version=v, probe=True),
        "empty-protocol-type": lambda s, v: join(s, _g(s, v), version=v, probe=True, ptype=""),
        "inconsistent-protocol-type": lambda s, v: (
            stable(s, _g(s, v)),
            join(s, _g(s, v), version=v, probe=True, ptype="connect"),
        ),
        "static-member": lambda s, v: (
            join(s, _g(s, v), version=v, probe=True, instance="instance-1") if v >= 5 else None
        ),
    },
    setup=_coordinator,
)


def _hb(s, v, group, generation, member, instance=None, label=""):
    return s.probe(
        "Heartbeat",
        v,
        {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance},
        label=label,
    )


def _heartbeats(s, v):
    g = _g(s, v)
    j = stable(s, g)
    _hb(s, v, g, j.generation_id, j.member_id, label="ok")
    _hb(s, v, g, j.generation_id + 3, j.member_id, label="wrong-generation")
    _hb(s, v, g, j.generation_id, "nobody-1", label="unknown-member")
    _hb(s, v, s.name(f"none{v}"), 1, "nobody-1", label="unknown-group")
    _hb(s, v, "", 1, "nobody-1", label="empty-group")


case("Heartbeat", "states", setup=_coordinator)(_heartbeats)


def _heartbeat_during_rebalance(s, v):
    g = _g(s, v)
    j = join(s, g)  # joined, not yet synced: the group waits for the leader's SyncGroup
    _hb(s, v, g, j.generation_id, j.member_id, label="awaiting-sync")


case("Heartbeat", "awaiting-sync", setup=_coordinator)(_heartbeat_during_rebalance)


def _syncs(s, v):
    g = _g(s, v)
    j = join(s, g)
    sync(s, g, j, probe=True, version=v, generation=j.generation_id + 1, label="wrong-generation")
    sync(s, g, j, probe=True, version=v, member="nobody-1", label="unknown-member")
    if v >= 5:
        sync(s, g, j, probe=True, version=v, ptype="connect", label="wrong-protocol-type")
        sync(s, g, j, probe=True, version=v, pname="roundrobin", label="wrong-protocol-name")
    sync(s, g, j, probe=True, version=v, label="leader")
    sync(s, g, j, probe=True, version=v, assignments=False, label="again-no-assignments")
    sync(s, s.name(f"none{v}"), j, probe=True, version=v, label="unknown-group")


case("SyncGroup", "states", setup=_coordinator)(_syncs)


def _leave(s, v, group, members, label=""):
    return s.probe(
        "LeaveGroup",
        v,
        {
            "group_id": group,
            "member_id": members[0][0] if members else "",
            "members": [{"member_id": m, "group_instance_id": i, "reason": None} for m, i in members],
        },
        label=label,
    )


def _leaves(s, v):
    g = _g(s, v)
    j = stable(s, g)
    _leave(s, v, g, [("nobody-1", None)], label="unknown-member")
    _leave(s, v, g, [(j.member_id, None)], label="member")
    _leave(s, v, g, [(j.member_id, None)], label="again")
    _leave(s, v, s.name(f"none{v}"), [("nobody-1", None)], label="unknown-group")
    if v >= 3:
        gs = s.name(f"static{v}")
        stable(s, gs, instance="inst-1")
        _leave(s, v, gs, [("", "inst-1")], label="by-instance")
        _leave(s, v, gs, [("", "inst-unknown")], label="unknown-instance")
        _leave(s, v, gs, [], label="no-members")


case("LeaveGroup", "states", setup=_coordinator)(_leaves)


# -- DescribeGroups / ListGroups / DeleteGroups -------------------------------------------------


def _describe(s, v, groups, ops=False, label=""):
    return s.probe("DescribeGroups", v, {"groups": groups, "include_authorized_operations": ops}, label=label)


def _groups_setup(s):
    _coordinator(s)
    stable(s, s.name("stable"))
    j = stable(s, s.name("left"))
    s.call(
        "LeaveGroup",
        None,
        {"group_id": s.name("left"), "member_id": j.member_id, "members": [{"member_id": j.member_id}]},
    )
    _commit(s, s.top("OffsetCommit"), s.name("simple"), [(s.name("t"), 0, 3)], probe=False, fresh_topic=True)


for_each(
    "DescribeGroups",
    {
        "stable": lambda s, v: _describe(s, v, [s.name("stable")]),
        "stable-with-operations": lambda s, v: _describe(s, v, [s.name("stable")], ops=True),
        "empty-after-leave": lambda s, v: _describe(s, v, [s.name("left")]),
        "offsets-only": lambda s, v: _describe(s, v, [s.name("simple")]),
        "unknown": lambda s, v: _describe(s, v, [s.name("missing")]),
        "empty-id": lambda s, v: _describe(s, v, [""]),
        "none": lambda s, v: _describe(s, v, []),
        "several": lambda s, v: _describe(s, v, [s.name("stable"), s.name("missing")]),
    },
    setup=_groups_setup,
)


def _list(s, v, states=(), types=()):
    return s.probe(
        "ListGroups",
        v,
        {"states_filter": list(states), "types_filter": list(types)},
        keep_names=lambda n: n.startswith(s.prefix),
    )


for_each(
    "ListGroups",
    {
        "all": lambda s, v: _list(s, v),
        "stable": lambda s, v: _list(s, v, states=["Stable"]) if v >= 4 else None,
        "empty": lambda s, v: _list(s, v, states=["Empty"]) if v >= 4 else None,
        "unknown-state": lambda s, v: _list(s, v, states=["Sleeping"]) if v >= 4 else None,
        "classic": lambda s, v: _list(s, v, types=["classic"]) if v >= 5 else None,
        "consumer-type": lambda s, v: _list(s, v, types=["consumer"]) if v >= 5 else None,
        "unknown-type": lambda s, v: _list(s, v, types=["bogus"]) if v >= 5 else None,
    },
    setup=_groups_setup,
)


def _delete_groups(s, v):
    g = s.name(f"simple{v}")
    _commit(s, s.top("OffsetCommit"), g, [(s.name("t"), 0, 3)], probe=False)
    s.probe("DeleteGroups", v, {"groups_names": [g]}, label="empty-group")
    s.probe("DeleteGroups", v, {"groups_names": [g]}, label="again")
    s.probe("DeleteGroups", v, {"groups_names": [s.name("stable"), s.name("missing"), ""]}, label="mixed")
    s.probe("DeleteGroups", v, {"groups_names": []}, label="none")


case("DeleteGroups", "states", setup=_groups_setup)(_delete_groups)


# -- OffsetCommit / OffsetFetch / OffsetDelete -------------------------------------------------


def _commit(
    s, v, group, parts, *, generation=-1, member="", instance=None, probe=True, label="", fresh_topic=False, metadata=""
):
    if fresh_topic:
        for name in sorted({t for t, _, _ in parts}):
            s.create_topic(name, partitions=2)
    topics = {}
    for t, p, o in parts:
        topics.setdefault(t, []).append(
            {
                "partition_index": p,
                "committed_offset": o,
                "committed_leader_epoch": -1,
                "committed_metadata": metadata,
                "commit_timestamp": -1,
            }
        )
    data = {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member,
        "group_instance_id": instance,
        "retention_time_ms": -1,
        "topics": [{"name": t, "topic_id": _known_id(s, t), "partitions": ps} for t, ps in topics.items()],
    }
    return s.probe("OffsetCommit", v, data, label=label) if probe else s.call("OffsetCommit", v, data)


def _known_id(s, name):
    try:
        return s.tid(name)
    except Exception:  # noqa: BLE001 - unknown here: an id no broker has
        return RANDOM_ID


def _offsets_setup(s):
    _coordinator(s)
    s.create_topic(s.name("t"), partitions=2)
    s.produce(s.name("t"), 0, 5)


def _commit_in_group(s, v, *, generation_delta=0, member=None):
    g = _g(s, v)
    j = stable(s, g)
    _commit(
        s,
        v,
        g,
        [(s.name("t"), 0, 2)],
        generation=j.generation_id + generation_delta,
        member=j.member_id if member is None else member,
    )


for_each(
    "OffsetCommit",
    {
        "standalone": lambda s, v: _commit(s, v, _g(s, v), [(s.name("t"), 0, 2), (s.name("t"), 1, 0)]),
        "beyond-high-watermark": lambda s, v: _commit(s, v, _g(s, v), [(s.name("t"), 0, 99)]),
        "negative-offset": lambda s, v: _commit(s, v, _g(s, v), [(s.name("t"), 0, -5)]),
        "unknown-partition": lambda s, v: _commit(s, v, _g(s, v), [(s.name("t"), 0, 1), (s.name("t"), 8, 1)]),
        "unknown-topic": lambda s, v: _commit(s, v, _g(s, v), [(s.name("missing"), 0, 1)]),
        "internal-topic": lambda s, v: _commit(s, v, _g(s, v), [(INTERNAL, 0, 1)]),
        "metadata-too-large": lambda s, v: _commit(s, v, _g(s, v), [(s.name("t"), 0, 1)], metadata="m" * 5000),
        "null-metadata": lambda s, v: _commit(s, v, _g(s, v), [(s.name("t"), 0, 1)], metadata=None),
        "empty-group-id": lambda s, v: _commit(s, v, "", [(s.name("t"), 0, 1)]),
        "member-of-stable-group": lambda s, v: _commit_in_group(s, v),
        "wrong-generation": lambda s, v: _commit_in_group(s, v, generation_delta=5),
        "unknown-member": lambda s, v: _commit_in_group(s, v, member="nobody-1"),
        "no-member-in-stable-group": lambda s, v: _commit_in_group(s, v, generation_delta=0, member=""),
        "no-topics": lambda s, v: s.probe(
            "OffsetCommit",
            v,
            {"group_id": _g(s, v), "topics": [], "generation_id_or_member_epoch": -1, "member_id": ""},
        ),
    },
    setup=_offsets_setup,
)


def _fetch_offsets(s, v, group, topics, *, stable=False, label="", member=None, epoch=-1):
    """``topics``: None (all) or [(name, [partitions])]."""
    old = None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics]
    new = (
        None
        if topics is None
        else [{"name": t, "topic_id": _known_id(s, t), "partition_indexes": ps} for t, ps in topics]
    )
    return s.probe(
        "OffsetFetch",
        v,
        {
            "group_id": group,
            "topics": old,
            "require_stable": stable,
            "groups": [{"group_id": group, "member_id": member, "member_epoch": epoch, "topics": new}],
        },
        label=label,
    )


def _committed(s):
    _offsets_setup(s)
    _commit(s, s.top("OffsetCommit"), s.name("c"), [(s.name("t"), 0, 3), (s.name("t"), 1, 0)], probe=False)


for_each(
    "OffsetFetch",
    {
        "committed": lambda s, v: _fetch_offsets(s, v, s.name("c"), [(s.name("t"), [0, 1])]),
        "all-topics": lambda s, v: _fetch_offsets(s, v, s.name("c"), None) if v >= 2 else None,
        "uncommitted-partition": lambda s, v: _fetch_offsets(s, v, s.name("c"), [(s.name("t"), [0, 5])]),
        "unknown-topic": lambda s, v: _fetch_offsets(s, v, s.name("c"), [(s.name("missing"), [0])]),
        "unknown-group": lambda s, v: _fetch_offsets(s, v, s.name("none"), [(s.name("t"), [0])]),
        "unknown-group-all-topics": lambda s, v: _fetch_offsets(s, v, s.name("none"), None) if v >= 2 else None,
        "require-stable": lambda s, v: _fetch_offsets(s, v, s.name("c"), [(s.name("t"), [0])], stable=True),
        "empty-group-id": lambda s, v: _fetch_offsets(s, v, "", [(s.name("t"), [0])]),
        "unknown-member": lambda s, v: (
            _fetch_offsets(s, v, s.name("c"), [(s.name("t"), [0])], member="nobody", epoch=3) if v >= 9 else None
        ),
    },
    setup=_committed,
)


def _offset_delete(s, v, group, parts, label=""):
    topics = {}
    for t, p in parts:
        topics.setdefault(t, []).append({"partition_index": p})
    return s.probe(
        "OffsetDelete",
        v,
        {"group_id": group, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
        label=label,
    )


def _offset_deletes(s, v):
    _offset_delete(s, v, s.name("c"), [(s.name("t"), 0)], label="committed")
    _offset_delete(s, v, s.name("c"), [(s.name("t"), 0)], label="again")
    _offset_delete(s, v, s.name("c"), [(s.name("t"), 7)], label="unknown-partition")
    _offset_delete(s, v, s.name("c"), [(s.name("missing"), 0)], label="unknown-topic")
    _offset_delete(s, v, s.name("none"), [(s.name("t"), 0)], label="unknown-group")
    _offset_delete(s, v, "", [(s.name("t"), 0)], label="empty-group-id")
    g = s.name("busy")
    stable(s, g)
    _commit(s, s.top("OffsetCommit"), g, [(s.name("t"), 1, 1)], probe=False)
    _offset_delete(s, v, g, [(s.name("t"), 1)], label="group-with-members")


case("OffsetDelete", "states", setup=_committed)(_offset_deletes)


# -- KIP-848: ConsumerGroupHeartbeat / ConsumerGroupDescribe ------------------------------------------


def _cgh(
    s,
    v,
    group,
    *,
    member="",
    epoch=0,
    topics=None,
    regex=None,
    assignor=None,
    owned=(),
    label="",
    instance=None,
    rebalance=SESSION_MS,
):
    return s.probe(
        "ConsumerGroupHeartbeat",
        v,
        {
            "group_id": group,
            "member_id": member,
            "member_epoch": epoch,
            "instance_id": instance,
            "rack_id": None,
            "rebalance_timeout_ms": rebalance,
            "subscribed_topic_names": topics,
            "subscribed_topic_regex": regex,
            "server_assignor": assignor,
            "topic_partitions": None if owned is None else list(owned),
        },
        label=label,
    )


MEMBER = "AAAAAAAAAAAAAAAAAAAAAA"


def _member_id(v, n=1):
    # v1 members choose their id (a uuid text); v0 members get one from the broker
    return f"conformance-member-{n:04d}-xxxx" if v >= 1 else ""


def _cgh_flow(s, v):
    g = s.name(f"cg{v}")
    first = _cgh(s, v, g, member=_member_id(v), topics=[s.name("t")], assignor="uniform", label="join")
    member = first.member_id or _member_id(v)
    _cgh(s, v, g, member=member, epoch=first.member_epoch + 7, label="fenced-epoch")
    _cgh(s, v, g, member="nobody-member-id-0000", epoch=1, label="unknown-member")
    _cgh(s, v, g, member=member, epoch=-1, label="leave")
    _cgh(s, v, g, member=member, epoch=-1, label="leave-again")


def _cgh_errors(s, v):
    g = s.name(f"cge{v}")
    _cgh(s, v, g, member=_member_id(v, 2), topics=None, label="join-without-subscription")
    _cgh(s, v, g, member=_member_id(v, 3), topics=[s.name("t")], assignor="nonsense", label="unknown-assignor")
    _cgh(s, v, "", member=_member_id(v, 4), topics=[s.name("t")], label="empty-group")
    _cgh(s, v, g, member=_member_id(v, 5), topics=[s.name("t")], rebalance=-1, label="negative-rebalance-timeout")
    _cgh(s, v, g, member=_member_id(v, 6), epoch=5, topics=[s.name("t")], label="join-with-epoch")
    stable(s, s.name(f"classic{v}"))
    _cgh(s, v, s.name(f"classic{v}"), member=_member_id(v, 7), topics=[s.name("t")], label="classic-group")
    _cgh(s, v, g, member=_member_id(v, 9), topics=[s.name("t")], owned=None, label="join-with-null-owned")
    if v >= 1:
        _cgh(s, v, g, member=_member_id(v, 8), topics=None, regex="(", label="invalid-regex")


case("ConsumerGroupHeartbeat", "flow", setup=_offsets_setup)(_cgh_flow)
case("ConsumerGroupHeartbeat", "errors", setup=_offsets_setup)(_cgh_errors)


def _cgd_setup(s):
    _offsets_setup(s)
    stable(s, s.name("classic"))
    s.call(
        "ConsumerGroupHeartbeat",
        None,
        {
            "group_id": s.name("cg"),
            "member_id": "conformance-member-0001-xxxx",
            "member_epoch": 0,
            "rebalance_timeout_ms": SESSION_MS,
            "subscribed_topic_names": [s.name("t")],
            "server_assignor": "uniform",
            "topic_partitions": [],
        },
    )


for_each(
    "ConsumerGroupDescribe",
    {
        "unknown": lambda s, v: s.probe("ConsumerGroupDescribe", v, {"group_ids": [s.name("missing")]}),
        "classic-group": lambda s, v: s.probe("ConsumerGroupDescribe", v, {"group_ids": [s.name("classic")]}),
        "empty-id": lambda s, v: s.probe("ConsumerGroupDescribe", v, {"group_ids": [""]}),
        "none": lambda s, v: s.probe("ConsumerGroupDescribe", v, {"group_ids": []}),
        "consumer-group-error-paths": lambda s, v: s.probe(
            "ConsumerGroupDescribe",
            v,
            {"group_ids": [s.name("missing"), s.name("classic")], "include_authorized_operations": True},
        ),
    },
    setup=_cgd_setup,
)
