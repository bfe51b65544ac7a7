"""Group and member states: the tables of legal transitions, and that replay, deletion, rebalances and
KIP-848 heartbeats all move states through them."""

from __future__ import annotations

import itertools

import pytest

from kafkawire.broker.groups import FakeScheduler, GroupCoordinator
from kafkawire.broker.groups.classic import ClassicGroup
from kafkawire.broker.groups.consumer import ConsumerGroup, ConsumerMember
from kafkawire.broker.groups.states import (
    CLASSIC_GROUP,
    CONSUMER_GROUP,
    CONSUMER_MEMBER,
    GroupEvent,
    GroupState,
    MemberEvent,
    MemberState,
    move_group,
    move_member,
)
from kafkawire.broker.transitions import IllegalTransition

from .test_coordinator_unit import _stable_pair, env, flat, hb  # noqa: F401  (env: a fixture)

NOW = 1_700_000_123_456


def _group(table, state):
    group = ClassicGroup("g1", 0) if table is CLASSIC_GROUP else ConsumerGroup("g1", 0)
    group._state = state  # the state under test, set up without a move
    return group


@pytest.mark.parametrize("table", [CLASSIC_GROUP, CONSUMER_GROUP], ids=["classic", "consumer"])
def test_every_legal_group_move_is_applied(table):
    assert table.legal
    for from_state, event, to_state in sorted(table.legal):
        group = _group(table, from_state)
        move_group(group, to_state, event, NOW)
        assert (group.state, group.state_timestamp) == (to_state, NOW), (from_state, event, to_state)


def test_every_legal_member_move_is_applied():
    group = ConsumerGroup("g1", 0)
    for from_state, event, to_state in sorted(CONSUMER_MEMBER.legal):
        member = ConsumerMember("m1")
        member._state = from_state
        move_member(group, member, to_state, event)
        assert member.state == to_state


@pytest.mark.parametrize(
    "table, from_state, event, to_state",
    [
        (CLASSIC_GROUP, GroupState.STABLE, GroupEvent.ASSIGNED, GroupState.COMPLETING_REBALANCE),
        (CLASSIC_GROUP, GroupState.EMPTY, GroupEvent.ASSIGNED, GroupState.STABLE),
        (CLASSIC_GROUP, GroupState.PREPARING_REBALANCE, GroupEvent.REBALANCE, GroupState.PREPARING_REBALANCE),
        (CLASSIC_GROUP, GroupState.COMPLETING_REBALANCE, GroupEvent.LOADED, GroupState.STABLE),
        (CLASSIC_GROUP, GroupState.DEAD, GroupEvent.REBALANCE, GroupState.PREPARING_REBALANCE),
        (CLASSIC_GROUP, GroupState.STABLE, GroupEvent.HEARTBEAT, GroupState.ASSIGNING),
        (CONSUMER_GROUP, GroupState.STABLE, GroupEvent.HEARTBEAT, GroupState.EMPTY),
        (CONSUMER_GROUP, GroupState.RECONCILING, GroupEvent.MEMBERS_REMOVED, GroupState.STABLE),
        (CONSUMER_GROUP, GroupState.STABLE, GroupEvent.LOADED, GroupState.RECONCILING),
        (CONSUMER_GROUP, GroupState.DEAD, GroupEvent.HEARTBEAT, GroupState.STABLE),
        (CONSUMER_GROUP, GroupState.STABLE, GroupEvent.REBALANCE, GroupState.PREPARING_REBALANCE),
    ],
)
def test_illegal_group_moves_are_refused_naming_group_states_and_event(table, from_state, event, to_state):
    group = _group(table, from_state)
    with pytest.raises(IllegalTransition) as info:
        move_group(group, to_state, event, NOW)
    message = str(info.value)
    assert "'g1'" in message and from_state.value in message and to_state.value in message
    assert event.value in message and table.machine in message
    assert group.state == from_state and group.state_timestamp == 0  # nothing written


@pytest.mark.parametrize(
    "from_state, event, to_state",
    [
        (MemberState.UNREVOKED_PARTITIONS, MemberEvent.RECONCILED, MemberState.UNRELEASED_PARTITIONS),
        (MemberState.STABLE, MemberEvent.REVOKED, MemberState.UNREVOKED_PARTITIONS),
        (MemberState.UNRELEASED_PARTITIONS, MemberEvent.LOADED, MemberState.STABLE),
    ],
)
def test_illegal_member_moves_are_refused_naming_group_member_and_event(from_state, event, to_state):
    member = ConsumerMember("m1")
    member._state = from_state
    with pytest.raises(IllegalTransition) as info:
        move_member(ConsumerGroup("g1", 0), member, to_state, event)
    assert "'g1/m1'" in str(info.value) and event.value in str(info.value)
    assert member.state == from_state


def test_dead_is_final_and_every_live_state_can_be_deleted():
    for table, live in (
        (
            CLASSIC_GROUP,
            {GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE},
        ),
        (CONSUMER_GROUP, {GroupState.EMPTY, GroupState.ASSIGNING, GroupState.RECONCILING, GroupState.STABLE}),
    ):
        assert not [move for move in table.legal if move[0] == GroupState.DEAD]
        assert {f for f, e, t in table.legal if e == GroupEvent.DELETED and t == GroupState.DEAD} == live
        # a table uses only its own kind's states
        assert {s for move in table.legal for s in (move[0], move[2])} == live | {GroupState.DEAD}


def test_states_are_not_written_outside_the_tables():
    with pytest.raises(AttributeError):
        ClassicGroup("g1", 0).state = GroupState.STABLE  # type: ignore[misc]
    with pytest.raises(AttributeError):
        ConsumerGroup("g1", 0).state = GroupState.STABLE  # type: ignore[misc]
    with pytest.raises(AttributeError):
        ConsumerMember("m1").state = MemberState.UNREVOKED_PARTITIONS  # type: ignore[misc]


# -- the coordinator moves states through the tables ------------------------------------------------------
def _without(monkeypatch, table, *moves):
    for move in moves:
        assert move in table.legal
    monkeypatch.setattr(table, "legal", table.legal - set(moves))


def test_replayed_classic_group_goes_through_the_table(env, monkeypatch):
    coord, clock, storage = env
    _stable_pair(coord, clock)
    replayed = GroupCoordinator(storage, coord.config, FakeScheduler(NOW))
    replayed.load()
    group = replayed.groups["g"]
    assert (group.state, group.state_timestamp) == (GroupState.STABLE, NOW)
    _without(monkeypatch, CLASSIC_GROUP, (GroupState.EMPTY, GroupEvent.LOADED, GroupState.STABLE))
    with pytest.raises(
        IllegalTransition,
        match="classic group 'g': illegal transition from Empty to Stable on replay of __consumer_offsets",
    ):
        GroupCoordinator(storage, coord.config, FakeScheduler()).load()


def test_replayed_consumer_group_goes_through_the_table(env, monkeypatch):
    coord, clock, storage = env
    r1 = hb(coord, "m1", 0)
    hb(coord, "m1", r1.member_epoch, owned=flat(r1.assignment))
    assert coord.groups["cg"].state == GroupState.STABLE
    replayed = GroupCoordinator(storage, coord.config, FakeScheduler(NOW))
    replayed.load()
    assert (replayed.groups["cg"].state, replayed.groups["cg"].state_timestamp) == (GroupState.STABLE, NOW)
    _without(monkeypatch, CONSUMER_GROUP, (GroupState.EMPTY, GroupEvent.LOADED, GroupState.STABLE))
    with pytest.raises(IllegalTransition, match="consumer group 'cg': illegal transition from Empty to Stable"):
        GroupCoordinator(storage, coord.config, FakeScheduler()).load()


def test_delete_goes_through_the_table(env, monkeypatch):
    coord, clock, _ = env
    ida, idb = _stable_pair(coord, clock)
    assert coord.leave_group("g", [(ida, None), (idb, None)]) == (0, [0, 0])
    classic = coord.groups["g"]
    assert classic.state == GroupState.EMPTY
    hb(coord, "m1", 0)
    hb(coord, "m1", -1)
    consumer = coord.groups["cg"]
    assert consumer.state == GroupState.EMPTY
    assert coord.delete_groups(["g", "cg"]) == [0, 0]
    assert classic.state == consumer.state == GroupState.DEAD and not coord.groups
    coord.offset_commit("g2", -1, "", None, 8, [])  # a new, empty group
    _without(monkeypatch, CLASSIC_GROUP, (GroupState.EMPTY, GroupEvent.DELETED, GroupState.DEAD))
    with pytest.raises(
        IllegalTransition, match="classic group 'g2': illegal transition from Empty to Dead on DeleteGroups"
    ):
        coord.delete_groups(["g2"])


def test_classic_rebalance_goes_through_the_table(env, monkeypatch):
    coord, clock, _ = env
    _without(monkeypatch, CLASSIC_GROUP, (GroupState.COMPLETING_REBALANCE, GroupEvent.ASSIGNED, GroupState.STABLE))
    with pytest.raises(IllegalTransition, match="from CompletingRebalance to Stable on the leader's SyncGroup"):
        _stable_pair(coord, clock)


def test_consumer_group_state_follows_its_epochs_through_every_change(env):
    """After each heartbeat, leave and timeout the stored state is the one the epochs give, and the group
    passes through every live state."""
    coord, clock, _ = env
    coord.config.consumer_assignment_interval_ms = 1000
    seen = []

    def check():
        group = coord.groups["cg"]
        assert group.state == group.derived_state()
        seen.append(group.state)

    r1 = hb(coord, "m1", 0)
    check()
    a1 = flat(r1.assignment)
    hb(coord, "m1", r1.member_epoch, owned=a1)
    check()
    r2 = hb(coord, "m2", 0)
    check()
    clock.advance(1000)
    assert r2.error == 0
    members = coord.groups["cg"].members
    owned1 = a1
    for _ in itertools.repeat(None, 6):  # m1 revokes, m2 gets the released partitions
        r = hb(coord, "m1", members["m1"].member_epoch, owned=owned1)
        assert r.error == 0
        check()
        if r.assignment is not None:
            owned1 = flat(r.assignment)
        assert hb(coord, "m2", members["m2"].member_epoch, owned=set(members["m2"].assigned)).error == 0
        check()
    assert coord.groups["cg"].members["m2"].assigned
    clock.advance(coord.config.consumer_session_timeout_ms + 1)  # neither heartbeats again: both are fenced
    check()
    assert not coord.groups["cg"].members
    assert set(seen) == {GroupState.ASSIGNING, GroupState.RECONCILING, GroupState.STABLE, GroupState.EMPTY}


def test_listed_and_described_states_are_kafkas_strings(env):
    coord, clock, _ = env
    _stable_pair(coord, clock)
    hb(coord, "m1", 0)
    listed = {gid: state for gid, _, state, _ in coord.list_groups()}
    assert listed == {"g": "Stable", "cg": "Stable"}
    assert all(type(state) is str for state in listed.values())
