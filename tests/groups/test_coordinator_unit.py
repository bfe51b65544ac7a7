"""The group coordinator as a state machine: method calls, a fake clock, no sockets."""

from __future__ import annotations

import pytest

from kafkawire.broker.groups import CommitPartition, FakeScheduler, GroupConfig, GroupCoordinator, JoinRequest
from kafkawire.broker.storage.memory import MemoryStorage
from kafkawire.protocol import errors

PROTO = [("range", b"meta-r"), ("roundrobin", b"meta-rr")]


class Call:
    def __init__(self):
        self.results = []

    def __call__(self, result):
        self.results.append(result)

    @property
    def done(self):
        return bool(self.results)

    @property
    def result(self):
        assert len(self.results) == 1, self.results
        return self.results[0]


@pytest.fixture
def env():
    storage = MemoryStorage()
    storage.create_topic("t", 6)
    clock = FakeScheduler()
    # consumer groups compute every target at once here (group.consumer.assignment.interval.ms=0), so that the
    # reconciliation tests need no clock steps; the batching of Kafka's 1 s default has its own tests
    cfg = GroupConfig(
        initial_rebalance_delay_ms=100,
        min_session_timeout_ms=1000,
        consumer_heartbeat_interval_ms=500,
        consumer_session_timeout_ms=3000,
        consumer_assignment_interval_ms=0,
    )
    coord = GroupCoordinator(storage, cfg, clock)
    coord.load()
    return coord, clock, storage


def join(
    coord, member_id="", group="g", protocols=PROTO, instance=None, session=6000, rebalance=10000, version=9, client="c"
):
    call = Call()
    coord.join_group(
        JoinRequest(
            group,
            member_id,
            instance,
            "consumer",
            protocols,
            session,
            rebalance,
            client,
            "/127.0.0.1",
            require_known_member_id=version >= 4,
            supports_skip_assignment=version >= 9,
        ),
        call,
    )
    return call


def join_new(coord, clock, **kw):
    first = join(coord, **kw)
    if kw.get("instance") is None:
        assert first.result.error == errors.MEMBER_ID_REQUIRED
        return join(coord, member_id=first.result.member_id, **kw)
    return first


def sync(coord, member_id, generation, assignments=(), group="g"):
    call = Call()
    coord.sync_group(group, generation, member_id, None, "consumer", "range", list(assignments), call)
    return call


def test_member_id_required_then_initial_delay_then_stable(env):
    coord, clock, _ = env
    a = join_new(coord, clock)
    assert not a.done  # waits for the initial rebalance delay
    b = join_new(coord, clock)
    clock.advance(99)
    assert not a.done and not b.done
    clock.advance(200)
    ra, rb = a.result, b.result
    assert ra.error == rb.error == 0
    assert ra.generation_id == rb.generation_id == 1
    assert ra.leader == rb.leader == ra.member_id
    assert ra.protocol_name == "range"
    assert sorted(m[0] for m in ra.members) == sorted([ra.member_id, rb.member_id])
    assert all(m[2] == b"meta-r" for m in ra.members)
    assert rb.members == []
    sb = sync(coord, rb.member_id, 1)
    assert not sb.done
    sa = sync(coord, ra.member_id, 1, [(ra.member_id, b"A"), (rb.member_id, b"B")])
    assert sa.result.error == 0 and sa.result.assignment == b"A"
    assert sb.result.error == 0 and sb.result.assignment == b"B"
    assert coord.groups["g"].state == "Stable"
    assert coord.heartbeat("g", 1, rb.member_id, None) == 0
    assert coord.heartbeat("g", 0, rb.member_id, None) == errors.ILLEGAL_GENERATION
    assert coord.heartbeat("g", 1, "nobody", None) == errors.UNKNOWN_MEMBER_ID


def _stable_pair(coord, clock):
    a = join_new(coord, clock)
    b = join_new(coord, clock)
    clock.advance(200)
    ra, rb = a.result, b.result
    sb = sync(coord, rb.member_id, 1)
    sync(coord, ra.member_id, 1, [(ra.member_id, b"A"), (rb.member_id, b"B")])
    assert sb.result.error == 0
    return ra.member_id, rb.member_id


def test_second_member_joining_during_rebalance_is_not_unknown(env):
    coord, clock, _ = env
    a = join_new(coord, clock)
    clock.advance(200)
    ida = a.result.member_id
    sync(coord, ida, 1, [(ida, b"A")])
    # a new member arrives: the group rebalances; the old member learns it from its heartbeat
    b = join_new(coord, clock)
    assert coord.groups["g"].state == "PreparingRebalance"
    assert coord.heartbeat("g", 1, ida, None) == errors.REBALANCE_IN_PROGRESS
    # a third member joins while the rebalance is in progress
    c = join_new(coord, clock)
    assert c.results == [] and b.results == []
    a2 = join(coord, member_id=ida)
    for call in (a2, b, c):
        assert call.result.error == 0 and call.result.generation_id == 2
    assert len(a2.result.members) == 3


def test_session_timeout_removes_member_and_rebalances(env):
    coord, clock, _ = env
    ida, idb = _stable_pair(coord, clock)
    for _ in range(2):
        clock.advance(2000)
        assert coord.heartbeat("g", 1, ida, None) == 0
    assert idb in coord.groups["g"].members
    clock.advance(2100)
    # b stopped heartbeating: after 6 s it is gone and a must rejoin
    assert idb not in coord.groups["g"].members
    assert coord.heartbeat("g", 1, ida, None) == errors.REBALANCE_IN_PROGRESS
    a2 = join(coord, member_id=ida)
    assert a2.result.error == 0 and a2.result.generation_id == 2 and len(a2.result.members) == 1


def test_rebalance_timeout_drops_members_that_do_not_rejoin(env):
    coord, clock, _ = env
    ida, idb = _stable_pair(coord, clock)
    c = join_new(coord, clock)  # triggers a rebalance, b never rejoins (but keeps heartbeating)
    a2 = join(coord, member_id=ida)
    for _ in range(6):
        clock.advance(1900)
        coord.heartbeat("g", 1, idb, None)
    assert a2.result.error == 0 and c.result.error == 0
    assert a2.result.generation_id == 2
    assert idb not in coord.groups["g"].members
    assert coord.heartbeat("g", 1, idb, None) == errors.UNKNOWN_MEMBER_ID


def test_leave_group_batched_and_empty(env):
    coord, clock, _ = env
    ida, idb = _stable_pair(coord, clock)
    top, per = coord.leave_group("g", [(idb, None), ("ghost", None)])
    assert top == 0 and per == [0, errors.UNKNOWN_MEMBER_ID]
    a2 = join(coord, member_id=ida)
    assert a2.result.error == 0 and a2.result.generation_id == 2
    assert coord.leave_group("g", [(ida, None)]) == (0, [0])
    assert coord.groups["g"].state == "Empty"
    # an unknown group: no top-level error, every member unknown (as Kafka 4.4 answers)
    assert coord.leave_group("nogroup", [(ida, None), ("", "i-x")]) == (
        0,
        [errors.UNKNOWN_MEMBER_ID, errors.UNKNOWN_MEMBER_ID],
    )
    assert coord.leave_group("", [(ida, None)]) == (errors.INVALID_GROUP_ID, [])


def test_protocol_selection_and_inconsistent_protocol(env):
    coord, clock, _ = env
    a = join_new(coord, clock, protocols=[("roundrobin", b"x"), ("range", b"y")])
    b = join_new(coord, clock, protocols=[("range", b"y"), ("roundrobin", b"x")])
    c = join_new(coord, clock, protocols=[("range", b"y")])
    clock.advance(200)
    assert a.result.protocol_name == "range"  # the only protocol all support
    bad = join(coord, protocols=[("sticky", b"z")])
    assert bad.result.error == errors.INCONSISTENT_GROUP_PROTOCOL
    other_type = Call()
    coord.join_group(JoinRequest("g", "", None, "connect", [("range", b"")], 6000, 6000, "c", "h"), other_type)
    assert other_type.result.error == errors.INCONSISTENT_GROUP_PROTOCOL
    del b, c


def test_invalid_session_timeout_and_group_id(env):
    coord, clock, _ = env
    assert join(coord, session=10).result.error == errors.INVALID_SESSION_TIMEOUT
    assert join(coord, group="").result.error == errors.INVALID_GROUP_ID


def test_sync_errors(env):
    coord, clock, _ = env
    ida, idb = _stable_pair(coord, clock)
    assert sync(coord, ida, 7).result.error == errors.ILLEGAL_GENERATION
    assert sync(coord, "ghost", 1).result.error == errors.UNKNOWN_MEMBER_ID
    assert sync(coord, ida, 1, group="nope").result.error == errors.UNKNOWN_MEMBER_ID
    # Stable: a repeated SyncGroup gets the member's assignment again
    assert sync(coord, idb, 1).result.assignment == b"B"
    join_new(coord, clock)
    assert sync(coord, ida, 1).result.error == errors.REBALANCE_IN_PROGRESS


def test_static_membership_replaces_and_fences(env):
    coord, clock, _ = env
    a = join(coord, instance="i-a")
    assert not a.done  # static members skip MEMBER_ID_REQUIRED
    clock.advance(200)
    ida = a.result.member_id
    assert ida.startswith("i-a-")
    sync(coord, ida, 1, [(ida, b"A")])
    # the same instance restarts: new member id, same generation and assignment, no rebalance
    a2 = join(coord, instance="i-a")
    r = a2.result
    assert r.error == 0 and r.member_id != ida and r.generation_id == 1
    assert coord.groups["g"].state == "Stable"
    assert coord.heartbeat("g", 1, ida, "i-a") == errors.FENCED_INSTANCE_ID
    assert coord.heartbeat("g", 1, r.member_id, "i-a") == 0
    assert sync(coord, r.member_id, 1).result.assignment == b"A"
    top, per = coord.leave_group("g", [(ida, "i-a")])
    assert per == [errors.FENCED_INSTANCE_ID]
    assert coord.leave_group("g", [("", "i-a")]) == (0, [0])


def test_pending_member_that_never_returns_does_not_block_rebalance(env):
    coord, clock, _ = env
    ida, idb = _stable_pair(coord, clock)
    first = join(coord)
    assert first.result.error == errors.MEMBER_ID_REQUIRED
    a2 = join(coord, member_id=ida)  # a rejoins (e.g. changed metadata): rebalance
    b2 = join(coord, member_id=idb)
    clock.advance(6001)  # the pending member expires
    assert a2.result.error == 0 and b2.result.error == 0


def test_sync_timeout_removes_members_that_never_sync(env):
    coord, clock, _ = env
    a = join_new(coord, clock)
    b = join_new(coord, clock)
    clock.advance(200)
    ra, rb = a.result, b.result
    sync(coord, ra.member_id, 1, [(ra.member_id, b"A"), (rb.member_id, b"B")])
    for _ in range(6):
        clock.advance(1900)
        coord.heartbeat("g", 1, ra.member_id, None)
    assert rb.member_id not in coord.groups["g"].members


def test_offsets_commit_fetch_and_errors(env):
    coord, clock, storage = env
    ida, idb = _stable_pair(coord, clock)
    res = coord.offset_commit(
        "g",
        1,
        ida,
        None,
        8,
        [
            CommitPartition("t", 0, 10, 3, "meta"),
            CommitPartition("t", 9, 1),
            CommitPartition("nope", 0, 1),
            CommitPartition("t", 1, 5, -1, "x" * 4097),
            CommitPartition("t", 2, 7, -1, None),
        ],
    )
    assert res == [
        0,
        errors.UNKNOWN_TOPIC_OR_PARTITION,
        errors.UNKNOWN_TOPIC_OR_PARTITION,
        errors.OFFSET_METADATA_TOO_LARGE,
        0,
    ]
    assert coord.offset_commit("g", 0, ida, None, 8, [CommitPartition("t", 0, 1)]) == [errors.ILLEGAL_GENERATION]
    assert coord.offset_commit("g", 1, "ghost", None, 8, [CommitPartition("t", 0, 1)]) == [errors.UNKNOWN_MEMBER_ID]
    assert coord.offset_commit("g", -1, "", None, 8, [CommitPartition("t", 0, 1)]) == [errors.UNKNOWN_MEMBER_ID]
    assert coord.offset_commit("new", 3, "m", None, 8, [CommitPartition("t", 0, 1)]) == [errors.ILLEGAL_GENERATION]
    assert coord.offset_commit("new", 3, "m", None, 9, [CommitPartition("t", 0, 1)]) == [errors.GROUP_ID_NOT_FOUND]
    assert coord.offset_commit("simple", -1, "", None, 8, [CommitPartition("t", 3, 42)]) == [0]
    err, topics = coord.offset_fetch("g", [("t", [0, 1, 2])])
    assert err == 0 and topics == [("t", [(0, 10, 3, "meta", 0), (1, -1, -1, "", 0), (2, 7, -1, "", 0)])]
    assert coord.offset_fetch("g", None)[1] == [("t", [(0, 10, 3, "meta", 0), (2, 7, -1, "", 0)])]
    assert coord.offset_fetch("unknown", [("t", [0])]) == (0, [("t", [(0, -1, -1, "", 0)])])
    # offsets and group state survive a restart (a new coordinator replaying the same storage)
    coord2 = GroupCoordinator(storage, coord.config, FakeScheduler())
    coord2.load()
    assert coord2.offset_fetch("g", None) == coord.offset_fetch("g", None)
    assert coord2.offset_fetch("simple", [("t", [3])])[1] == [("t", [(3, 42, -1, "", 0)])]
    g2 = coord2.groups["g"]
    assert g2.state == "Stable" and g2.generation_id == 1 and set(g2.members) == {ida, idb}
    assert coord2.heartbeat("g", 1, ida, None) == 0


def test_list_describe_delete(env):
    coord, clock, _ = env
    ida, idb = _stable_pair(coord, clock)
    coord.offset_commit("simple", -1, "", None, 8, [CommitPartition("t", 0, 1)])
    assert coord.list_groups() == [("g", "consumer", "Stable", "classic"), ("simple", "", "Empty", "classic")]
    assert coord.list_groups(states=["empty"]) == [("simple", "", "Empty", "classic")]
    assert coord.list_groups(types=["consumer"]) == []
    assert coord.delete_groups(["g", "simple", "nope"]) == [errors.NON_EMPTY_GROUP, 0, errors.GROUP_ID_NOT_FOUND]
    assert coord.offset_fetch("simple", None) == (0, [])
    # g's member metadata (b"meta-r") is no consumer subscription: Kafka takes such a group as subscribed to
    # every topic, so none of its offsets may go
    err, rows = coord.offset_delete("g", [("t", [0])])
    assert err == 0 and rows == [("t", [(0, errors.GROUP_SUBSCRIBED_TO_TOPIC)])]
    assert coord.offset_delete("nope", [("t", [0])])[0] == errors.GROUP_ID_NOT_FOUND
    assert coord.offset_delete("", [("t", [0])]) == (errors.INVALID_GROUP_ID, [])


def test_compaction_keeps_state(env):
    coord, clock, storage = env
    coord.config.compact_after_records = 100
    for i in range(500):
        coord.offset_commit("simple", -1, "", None, 8, [CommitPartition("t", i % 3, i)])
    plog = storage.partition("__consumer_offsets", 0)
    assert plog.log_start_offset > 0
    coord2 = GroupCoordinator(storage, coord.config, FakeScheduler())
    coord2.load()
    assert coord2.offset_fetch("simple", None) == coord.offset_fetch("simple", None)


# -- KIP-848 ------------------------------------------------------------------------------------------


class TP:
    def __init__(self, topic_id, partitions):
        self.topic_id, self.partitions = topic_id, partitions


def hb(coord, member_id, epoch, owned=None, topics=("t",), version=1, assignor=None):
    owned_tps = [] if epoch == 0 else None  # a join owns nothing yet (Kafka refuses a null list then)
    if owned is not None:
        by = {}
        for tid, p in owned:
            by.setdefault(tid, []).append(p)
        owned_tps = [TP(t, ps) for t, ps in by.items()]
    return coord.consumer_heartbeat(
        version=version,
        group_id="cg",
        member_id=member_id,
        member_epoch=epoch,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=5000 if epoch == 0 else -1,
        subscribed_topic_names=list(topics) if epoch == 0 else None,
        subscribed_topic_regex=None,
        server_assignor=assignor,
        topic_partitions=owned_tps,
    )


def flat(assignment):
    return {(t, p) for t, ps in assignment for p in ps}


def test_consumer_protocol_revoke_before_assign(env):
    coord, clock, storage = env
    coord.config.consumer_assignment_interval_ms = 1000  # Kafka's default
    r1 = hb(coord, "m1", 0)
    # a new group is at epoch 1; m1 subscribing bumps it to 2, the first target is computed at once
    assert r1.error == 0 and r1.member_epoch == 2 and len(flat(r1.assignment)) == 6
    a1 = flat(r1.assignment)
    assert hb(coord, "m1", 2, owned=a1).assignment is None
    r2 = hb(coord, "m2", 0)
    # epoch 3, but the next target waits for the assignment interval: m2 is at the current target's epoch
    # with nothing, and m1 keeps everything
    assert r2.error == 0 and r2.member_epoch == 2 and flat(r2.assignment) == set()
    g = coord.groups["cg"]
    assert (g.group_epoch, g.assignment_epoch, g.state) == (3, 2, "Assigning")
    clock.advance(999)
    assert hb(coord, "m1", 2, owned=a1).assignment is None and g.state == "Assigning"
    clock.advance(1)
    # m1 is asked to give up 3 partitions, keeping its epoch until it reports the revocation
    r1 = hb(coord, "m1", 2, owned=a1)
    assert (g.assignment_epoch, g.state) == (3, "Reconciling")
    kept = flat(r1.assignment)
    assert len(kept) == 3 and r1.member_epoch == 2
    r1 = hb(coord, "m1", 2, owned=kept)
    assert r1.member_epoch == 3
    r2 = hb(coord, "m2", 2, owned=set())
    got = flat(r2.assignment)
    assert len(got) == 3 and not (got & kept)
    hb(coord, "m2", r2.member_epoch, owned=got)
    assert coord.groups["cg"].state == "Stable"
    # fencing and unknown members
    assert hb(coord, "m1", 9, owned=kept).error == errors.FENCED_MEMBER_EPOCH
    assert hb(coord, "zz", 3, owned=set()).error == errors.UNKNOWN_MEMBER_ID
    assert hb(coord, "", 0).error == errors.INVALID_REQUEST
    assert hb(coord, "m3", 0, assignor="nope").error == errors.UNSUPPORTED_ASSIGNOR
    # m2 leaves (epoch 4, no target computed on leaving); m1 gets everything back a second after epoch 3's
    assert hb(coord, "m2", -1).member_epoch == -1
    assert (g.group_epoch, g.assignment_epoch, g.state) == (4, 3, "Assigning")
    clock.advance(1000)
    r1 = hb(coord, "m1", r1.member_epoch, owned=kept)
    assert len(flat(r1.assignment)) == 6 and r1.member_epoch == 4
    # commits are checked against member epochs
    assert coord.offset_commit("cg", r1.member_epoch, "m1", None, 9, [CommitPartition("t", 0, 5)]) == [0]
    assert coord.offset_commit("cg", 1, "m1", None, 9, [CommitPartition("t", 0, 5)]) == [errors.STALE_MEMBER_EPOCH]
    assert coord.offset_commit("cg", 99, "m1", None, 9, [CommitPartition("t", 0, 5)]) == [errors.FENCED_MEMBER_EPOCH]
    assert coord.offset_fetch("cg", [("t", [0])], member_id="m1", member_epoch=1)[0] == errors.STALE_MEMBER_EPOCH
    # a silent member is removed after the session timeout
    clock.advance(3001)
    assert coord.groups["cg"].state == "Empty"
    assert coord.list_groups(types=["consumer"]) == [("cg", "consumer", "Empty", "consumer")]


def test_consumer_group_survives_restart(env):
    coord, clock, storage = env
    r1 = hb(coord, "m1", 0)
    coord2 = GroupCoordinator(storage, coord.config, FakeScheduler())
    coord2.load()
    g = coord2.groups["cg"]
    assert g.members["m1"].member_epoch == r1.member_epoch
    r = hb(coord2, "m1", r1.member_epoch, owned=flat(r1.assignment))
    assert r.error == 0


def test_assignors_balanced_and_sticky():
    import uuid

    from kafkawire.broker.groups.assignors import range_, uniform

    t1, t2 = uuid.uuid4(), uuid.uuid4()
    members = {f"m{i}": {t1, t2} for i in range(3)}
    a = uniform(members, {t1: 6, t2: 4}, {})
    assert sorted(len(v) for v in a.values()) == [3, 3, 4]
    assert set().union(*a.values()) == {(t1, p) for p in range(6)} | {(t2, p) for p in range(4)}
    members["m3"] = {t1, t2}
    b = uniform(members, {t1: 6, t2: 4}, a)
    assert sorted(len(v) for v in b.values()) == [2, 2, 3, 3]
    moved = sum(len(a[m] - b[m]) for m in a)
    assert moved <= 3
    r = range_({"a": {t1}, "b": {t1}}, {t1: 5}, {})
    assert r["a"] == {(t1, p) for p in range(3)} and r["b"] == {(t1, 3), (t1, 4)}


def test_initial_delay_extends_while_members_arrive(env):
    coord, clock, _ = env  # delay 100 ms, rebalance timeout 10 s
    a = join_new(coord, clock)
    for _ in range(5):
        clock.advance(90)
        join_new(coord, clock)  # each newcomer extends the wait by another delay
    assert not a.done
    clock.advance(100)
    clock.advance(100)
    assert a.result.error == 0 and len(a.result.members) == 6 and a.result.generation_id == 1


def test_initial_delay_bounded_by_rebalance_timeout(env):
    coord, clock, _ = env
    a = join_new(coord, clock, rebalance=300)
    for _ in range(20):
        clock.advance(50)
        join_new(coord, clock, rebalance=300)
        if a.done:
            break
    assert a.done and a.result.error == 0


def test_old_versions_join_without_member_id_round_trip(env):
    coord, clock, _ = env
    a = join(coord, version=3)
    assert not a.done  # no MEMBER_ID_REQUIRED before v4
    clock.advance(200)
    assert a.result.error == 0 and a.result.member_id


def test_heartbeat_in_completing_rebalance_and_group_max_size(env):
    coord, clock, _ = env
    coord.config.max_size = 2
    a = join_new(coord, clock)
    b = join_new(coord, clock)
    clock.advance(200)
    assert coord.groups["g"].state == "CompletingRebalance"
    assert coord.heartbeat("g", 1, b.result.member_id, None) == 0
    assert join(coord).result.error == errors.GROUP_MAX_SIZE_REACHED
    del a


def test_static_leader_rejoin_on_old_version_triggers_rebalance(env):
    coord, clock, _ = env
    a = join(coord, instance="i-a", version=5)
    clock.advance(200)
    ida = a.result.member_id
    sync(coord, ida, 1, [(ida, b"A")])
    a2 = join(coord, instance="i-a", version=5)  # the leader cannot skip assignment before v9
    clock.advance(200)
    assert a2.result.error == 0 and a2.result.generation_id == 2 and a2.result.members


def test_consumer_protocol_member_that_never_revokes_is_fenced(env):
    coord, clock, _ = env
    r1 = hb(coord, "m1", 0)
    owned = flat(r1.assignment)
    hb(coord, "m2", 0)
    r1b = hb(coord, "m1", r1.member_epoch, owned=owned)  # asked to revoke 3 partitions
    assert len(flat(r1b.assignment)) == 3
    for _ in range(12):  # m1 keeps heartbeating but never revokes; m2 heartbeats too
        clock.advance(500)
        hb(coord, "m1", r1.member_epoch, owned=owned)
        r2 = hb(coord, "m2", coord.groups["cg"].members["m2"].member_epoch, owned=set())
    assert "m1" not in coord.groups["cg"].members  # fenced after its 5 s rebalance timeout
    assert len(flat(r2.assignment)) == 6 or len(coord.groups["cg"].members["m2"].assigned) == 6
    assert hb(coord, "m1", r1.member_epoch, owned=owned).error == errors.UNKNOWN_MEMBER_ID


def test_consumer_group_new_topic_partitions_bump_epoch(env):
    coord, clock, storage = env
    r1 = hb(coord, "m1", 0, topics=("t", "later"))
    assert len(flat(r1.assignment)) == 6
    epoch = coord.groups["cg"].group_epoch
    storage.create_topic("later", 2)
    r = hb(coord, "m1", r1.member_epoch, owned=flat(r1.assignment))
    assert coord.groups["cg"].group_epoch == epoch + 1
    assert len(flat(r.assignment)) == 8


def _sub_hb(coord, member_id, epoch, topics=None, assignor=None, owned=None):
    """A heartbeat that may change the subscription (``topics``) or the server assignor."""
    return coord.consumer_heartbeat(
        version=1,
        group_id="cg",
        member_id=member_id,
        member_epoch=epoch,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=5000 if epoch == 0 else -1,
        subscribed_topic_names=list(topics) if topics is not None else None,
        subscribed_topic_regex=None,
        server_assignor=assignor,
        topic_partitions=[] if epoch == 0 else owned,
    )


def _epochs(coord):
    g = coord.groups["cg"]
    return g.group_epoch, g.assignment_epoch, g.state


def test_consumer_group_epoch_sequence(env):
    """Kafka 4.4's group epochs: a new group is at 1; joining with no topics keeps it there; a subscription
    change (including the first one) bumps it once, whether or not its topics exist; the target follows."""
    coord, clock, storage = env
    coord.config.consumer_assignment_interval_ms = 1000
    r = _sub_hb(coord, "m1", 0, topics=[])
    assert r.error == 0 and r.member_epoch == 1 and _epochs(coord) == (1, 1, "Stable")
    r2 = _sub_hb(coord, "m2", 0, topics=[])  # a member with no topics: no rebalance
    assert r2.member_epoch == 1 and _epochs(coord) == (1, 1, "Stable")
    r = _sub_hb(coord, "m1", 1, topics=["t"])  # the first target assignment is computed at once
    assert r.member_epoch == 2 and len(flat(r.assignment)) == 6 and _epochs(coord) == (2, 2, "Reconciling")
    r = _sub_hb(coord, "m1", 2, topics=["t"], owned=None)  # the same subscription again: nothing changes
    assert r.member_epoch == 2 and _epochs(coord)[0] == 2
    r = _sub_hb(coord, "m1", 2, topics=["t", "missing"])  # a topic that does not exist still changes it
    assert r.member_epoch == 2 and _epochs(coord) == (3, 2, "Assigning")  # within the assignment interval
    clock.advance(1000)
    r = _sub_hb(coord, "m1", 2)
    assert r.member_epoch == 3 and _epochs(coord) == (3, 3, "Reconciling")  # m2 is still at epoch 1
    r2 = _sub_hb(coord, "m2", 1)
    assert r2.member_epoch == 3 and _epochs(coord) == (3, 3, "Stable")
    # the missing topic appears: its metadata bumps the epoch once, at the next heartbeat
    storage.create_topic("missing", 2)
    clock.advance(1000)
    r = _sub_hb(coord, "m1", 3)
    assert r.member_epoch == 4 and len(flat(r.assignment)) == 8 and _epochs(coord) == (4, 4, "Reconciling")
    # more partitions: one bump
    storage.add_partitions("missing", 3)
    r = _sub_hb(coord, "m1", 4)
    assert _epochs(coord)[:2] == (5, 4)  # batched: the last target was computed less than a second ago
    assert _sub_hb(coord, "m1", 4).member_epoch == 4 and _epochs(coord)[0] == 5  # no further bump
    # the topic is deleted: one bump
    clock.advance(1000)
    storage.delete_topic("missing")
    r = _sub_hb(coord, "m1", 4)
    assert _epochs(coord)[:2] == (6, 6)
    t_id = coord.topics()["t"].topic_id
    assert r.member_epoch == 4 and flat(r.assignment) == {(t_id, p) for p in range(6)}  # revokes the deleted topic
    assert _sub_hb(coord, "m1", 4, owned=[TP(t_id, list(range(6)))]).member_epoch == 6


def test_consumer_group_epoch_on_leaving_and_server_assignor(env):
    """Leaving always bumps the epoch and computes no target; when the group empties, the assignment epoch
    catches up and the next join gets a target at once. Only a change of the group's preferred server
    assignor (the one most members name, else the default) bumps the epoch."""
    coord, clock, storage = env
    coord.config.consumer_assignment_interval_ms = 1000
    assert _sub_hb(coord, "m1", 0, topics=["t"], assignor="uniform").member_epoch == 2  # uniform is the default
    assert _sub_hb(coord, "m2", 0, topics=["t"]).member_epoch == 2 and _epochs(coord)[:2] == (3, 2)
    assert _sub_hb(coord, "m2", 2, assignor="uniform").error == 0 and _epochs(coord)[0] == 3  # still uniform
    assert _sub_hb(coord, "m3", 0, topics=[], assignor="range").member_epoch == 2
    assert _epochs(coord)[0] == 3  # uniform 2, range 1
    assert _sub_hb(coord, "m1", 2, assignor="range").error == 0 and _epochs(coord)[0] == 4  # range 2, uniform 1
    assert _sub_hb(coord, "m3", -1).member_epoch == -1 and _epochs(coord) == (5, 2, "Assigning")
    assert _sub_hb(coord, "m2", -1).member_epoch == -1 and _epochs(coord) == (6, 2, "Assigning")
    assert _sub_hb(coord, "m1", -1).member_epoch == -1 and _epochs(coord) == (7, 7, "Empty")
    r = _sub_hb(coord, "m1", 0, topics=["t"])  # at once, though the last target is less than a second old
    assert r.member_epoch == 8 and len(flat(r.assignment)) == 6 and _epochs(coord) == (8, 8, "Stable")


def test_consumer_group_batched_assignment_survives_restart(env):
    coord, clock, storage = env
    coord.config.consumer_assignment_interval_ms = 1000
    _sub_hb(coord, "m1", 0, topics=["t"])
    _sub_hb(coord, "m2", 0, topics=["t"])
    assert _epochs(coord) == (3, 2, "Assigning")
    coord2 = GroupCoordinator(storage, coord.config, clock)
    coord2.load()
    assert _epochs(coord2) == (3, 2, "Assigning")
    assert _sub_hb(coord2, "m2", 2).member_epoch == 2 and _epochs(coord2)[:2] == (3, 2)
    clock.advance(1000)
    assert _sub_hb(coord2, "m2", 2).member_epoch == 3 and _epochs(coord2)[:2] == (3, 3)


def test_consumer_protocol_static_member_rejoins_with_its_partitions(env):
    coord, clock, _ = env

    def hbs(member_id, epoch, instance, owned=None):
        return coord.consumer_heartbeat(
            version=1,
            group_id="cg",
            member_id=member_id,
            member_epoch=epoch,
            instance_id=instance,
            rack_id=None,
            rebalance_timeout_ms=5000 if epoch == 0 else -1,
            subscribed_topic_names=["t"] if epoch == 0 else None,
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=([] if epoch == 0 else None) if owned is None else [TP(t, [p]) for t, p in owned],
        )

    a = hbs("a1", 0, "ia")
    b = hbs("b1", 0, "ib")
    for _ in range(4):  # converge
        a = hbs("a1", a.member_epoch, "ia", coord.groups["cg"].members["a1"].assigned)
        b = hbs("b1", b.member_epoch, "ib", coord.groups["cg"].members["b1"].assigned)
    assert coord.groups["cg"].state == "Stable"
    mine = set(coord.groups["cg"].members["a1"].assigned)
    epoch = coord.groups["cg"].group_epoch
    assert hbs("a1", -2, "ia").member_epoch == -2
    assert hbs("a2", 0, "ib").error == errors.UNRELEASED_INSTANCE_ID  # b is still there
    back = hbs("a2", 0, "ia")
    assert back.error == 0 and flat(back.assignment) == mine
    assert coord.groups["cg"].group_epoch == epoch  # no rebalance
    assert "a1" not in coord.groups["cg"].members
    # a static member that does not come back is removed when its session expires
    hbs("a2", -2, "ia")
    for _ in range(8):
        clock.advance(500)
        hbs("b1", coord.groups["cg"].members["b1"].member_epoch, "ib", coord.groups["cg"].members["b1"].assigned)
    assert set(coord.groups["cg"].members) == {"b1"}


def test_offsets_of_empty_groups_expire_after_retention(env):
    coord, clock, _ = env
    coord.config.offsets_retention_minutes = 1
    coord.config.offsets_retention_check_interval_ms = 10_000
    coord.start_housekeeping()
    ida, idb = _stable_pair(coord, clock)
    assert coord.offset_commit("g", 1, ida, None, 8, [CommitPartition("t", 0, 3)]) == [0]
    assert coord.offset_commit("simple", -1, "", None, 8, [CommitPartition("t", 1, 4)]) == [0]
    for _ in range(16):  # the live group keeps heartbeating for 80 s: its offsets stay
        clock.advance(5_000)
        for m in (ida, idb):
            coord.heartbeat("g", 1, m, None)
    assert coord.offset_fetch("g", [("t", [0])])[1][0][1][0][1] == 3
    assert not coord.offsets.has_group("simple") and "simple" not in coord.groups
    coord.leave_group("g", [(ida, None), (idb, None)])
    clock.advance(50_000)
    assert coord.offsets.has_group("g")
    clock.advance(20_000)
    assert not coord.offsets.has_group("g")


def test_transaction_hooks(env):
    coord, clock, _ = env
    ida, idb = _stable_pair(coord, clock)
    assert coord.validate_txn_offset_commit("g", 1, ida, None) == 0
    assert coord.validate_txn_offset_commit("g", 2, ida, None) == errors.ILLEGAL_GENERATION
    assert coord.validate_txn_offset_commit("g", 1, "ghost", None) == errors.UNKNOWN_MEMBER_ID
    coord.commit_transactional_offsets("txg", [CommitPartition("t", 0, 9, -1, "tx")])
    assert coord.offset_fetch("txg", [("t", [0])])[1] == [("t", [(0, 9, -1, "tx", 0)])]
    coord.pending_txn_offsets = lambda g, t, p: (g, t, p) == ("txg", "t", 0)
    assert coord.offset_fetch("txg", [("t", [0])], require_stable=True)[1][0][1][0][4] == errors.UNSTABLE_OFFSET_COMMIT


def test_offsets_of_deleted_topics_disappear(env):
    coord, clock, storage = env
    storage.create_topic("gone", 1)
    coord.offset_commit("s", -1, "", None, 8, [CommitPartition("gone", 0, 1), CommitPartition("t", 0, 2)])
    storage.delete_topic("gone")
    assert coord.offset_fetch("s", None)[1] == [("t", [(0, 2, -1, "", 0)])]
    coord.expire_offsets()
    assert coord.offsets.get("s", "gone", 0) is None and coord.offsets.get("s", "t", 0) is not None


def test_compaction_and_replay_on_the_disk_engine(tmp_path):
    from kafkawire.broker.storage.config import StorageConfig
    from kafkawire.broker.storage.segments import SegmentStorage

    cfg = GroupConfig(compact_after_records=200)
    storage = SegmentStorage(str(tmp_path), StorageConfig.from_properties({"log.segment.bytes": "16384"}))
    storage.create_topic("t", 3)
    coord = GroupCoordinator(storage, cfg, FakeScheduler())
    coord.load()
    for i in range(2000):
        coord.offset_commit(f"g{i % 4}", -1, "", None, 8, [CommitPartition("t", i % 3, i, -1, f"m{i}")])
    expected = {g: coord.offset_fetch(g, None) for g in ("g0", "g1", "g2", "g3")}
    assert storage.partition("__consumer_offsets", 0).log_start_offset > 0
    storage.close()
    storage = SegmentStorage(str(tmp_path), StorageConfig.from_properties({"log.segment.bytes": "16384"}))
    coord2 = GroupCoordinator(storage, cfg, FakeScheduler())
    coord2.load()
    assert {g: coord2.offset_fetch(g, None) for g in expected} == expected
    storage.close()


# -- classic members in consumer groups (groups/mixed.py) -------------------------------------------------------
def _sub(topics=("t",)) -> bytes:
    from kafkawire.protocol.messages import ConsumerProtocolSubscription

    return (0).to_bytes(2, "big") + ConsumerProtocolSubscription(topics=list(topics)).encode(0)


def _mixed(coord, clock):
    """A consumer group with one consumer-protocol member (m-1) and one classic member; returns its JoinResult."""
    r = coord.consumer_heartbeat(
        version=1,
        group_id="mx",
        member_id="m-1",
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=5000,
        subscribed_topic_names=["t"],
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=[],
    )
    assert r.error == 0
    first = join(coord, group="mx", protocols=[("range", _sub())])
    assert first.result.error == errors.MEMBER_ID_REQUIRED
    j = join(coord, member_id=first.result.member_id, group="mx", protocols=[("range", _sub())], rebalance=4000)
    assert j.result.error == 0 and j.result.generation_id == coord.groups["mx"].group_epoch
    return j.result


def _advance_keeping_m1(coord, clock, ms):
    """Advance the clock while the consumer-protocol member m-1 heartbeats every second."""
    while ms > 0:
        step = min(ms, 1000)
        clock.advance(step)
        ms -= step
        m1 = coord.groups["mx"].members["m-1"]
        r = coord.consumer_heartbeat(
            version=1,
            group_id="mx",
            member_id="m-1",
            member_epoch=m1.member_epoch,
            instance_id=None,
            rack_id=None,
            rebalance_timeout_ms=None,
            subscribed_topic_names=None,
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=None,
        )
        assert r.error == 0


def test_classic_member_of_a_consumer_group_must_sync_within_its_rebalance_timeout(env):
    coord, clock, _ = env
    j = _mixed(coord, clock)
    _advance_keeping_m1(coord, clock, 3999)
    assert j.member_id in coord.groups["mx"].members
    _advance_keeping_m1(coord, clock, 2)  # no SyncGroup after its JoinGroup: removed
    assert list(coord.groups["mx"].members) == ["m-1"]


def test_classic_member_of_a_consumer_group_must_rejoin_within_its_rebalance_timeout(env):
    coord, clock, _ = env
    j = _mixed(coord, clock)
    s = Call()
    coord.sync_group("mx", j.generation_id, j.member_id, None, "consumer", "range", [], s)
    assert s.result.error == 0
    group = coord.groups["mx"]
    group.group_epoch += 1  # a new epoch alone is no rebalance for the classic member (as Kafka: the target
    assert coord.heartbeat("mx", j.generation_id, j.member_id, None) == 0  # may still be batched)...
    group.assignment_epoch = group.group_epoch  # ...a target at it that the member has not caught up with is
    assert coord.heartbeat("mx", j.generation_id, j.member_id, None) == errors.REBALANCE_IN_PROGRESS
    _advance_keeping_m1(coord, clock, 2000)
    assert coord.heartbeat("mx", j.generation_id, j.member_id, None) == errors.REBALANCE_IN_PROGRESS
    _advance_keeping_m1(coord, clock, 2001)  # the deadline runs from the first REBALANCE_IN_PROGRESS
    assert list(coord.groups["mx"].members) == ["m-1"]


def test_upgrade_policy_keeps_a_consumer_group_when_only_classic_members_remain(env):
    coord, clock, _ = env
    coord.config.migration_policy = "upgrade"
    j = _mixed(coord, clock)
    r = coord.consumer_heartbeat(
        version=1,
        group_id="mx",
        member_id="m-1",
        member_epoch=-1,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=None,
        subscribed_topic_names=None,
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=None,
    )
    assert r.error == 0
    group = coord.groups["mx"]
    assert group.kind == "consumer" and list(group.members) == [j.member_id]
    coord.config.migration_policy = "bidirectional"
    coord.groups.clear()
    coord.load()  # replayed from __consumer_offsets: still the same consumer group with its classic member
    again = coord.groups["mx"]
    assert again.kind == "consumer" and again.members[j.member_id].classic.session_timeout_ms == 6000
