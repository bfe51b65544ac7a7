"""Group and member states, their legal transitions, and the one place that writes them.

State names are Kafka's (ListGroups, DescribeGroups and ConsumerGroupDescribe
answer them as they are). A classic group moves through a rebalance:

    Empty / Stable / CompletingRebalance --rebalance--> PreparingRebalance
    PreparingRebalance --join completed--> CompletingRebalance (members) or Empty (none left)
    CompletingRebalance --leader's SyncGroup--> Stable

A consumer (KIP-848) group's state follows from its epochs (``ConsumerGroup
.derived_state``): Empty without members, Assigning while the group epoch is
ahead of the target assignment, Reconciling while a member has not reached the
target, else Stable. ``settle_consumer_group`` moves it there after each
change, through its own table. Either kind ends Dead, when deleted or
converted to the other kind. A consumer group's member revokes before it
gets new partitions: stable, unrevoked_partitions, unreleased_partitions.

``move_group`` and ``move_member`` are the only writers of ``group.state`` and
``member.state`` (read-only properties elsewhere): a move missing from the
table raises ``IllegalTransition`` naming group, states and event.
"""

from __future__ import annotations

from enum import StrEnum

from ..transitions import Transitions


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    DEAD = "Dead"


class GroupEvent(StrEnum):
    LOADED = "replay of __consumer_offsets"
    REBALANCE = "rebalance (a member joined, left, changed its protocols or timed out)"
    JOIN_COMPLETED = "join phase completed"
    ASSIGNED = "the leader's SyncGroup"
    HEARTBEAT = "ConsumerGroupHeartbeat"
    CLASSIC_JOIN = "JoinGroup of a classic member"
    MEMBERS_REMOVED = "members left, timed out or were fenced"
    CONVERTED = "conversion between the classic and consumer protocols"
    DELETED = "DeleteGroups"


class MemberState(StrEnum):
    """A consumer group member's reconciliation (the values are kafkawire's persisted ones)."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class MemberEvent(StrEnum):
    LOADED = "replay of __consumer_offsets"
    RECONCILED = "reconciliation towards the target assignment"
    REVOKED = "the member no longer owns the partitions it had to revoke"
    REJOINED = "the member rejoined at epoch 0"


S, E = GroupState, GroupEvent
CLASSIC_LIVE = (S.EMPTY, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE)
CONSUMER_LIVE = (S.EMPTY, S.ASSIGNING, S.RECONCILING, S.STABLE)
CONSUMER_MEMBERS = (S.ASSIGNING, S.RECONCILING, S.STABLE)  # the states of a consumer group with members

CLASSIC_GROUP = Transitions(
    "classic group",
    [
        ((S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE), E.REBALANCE, (S.PREPARING_REBALANCE,)),
        ((S.PREPARING_REBALANCE,), E.JOIN_COMPLETED, (S.COMPLETING_REBALANCE, S.EMPTY)),
        ((S.COMPLETING_REBALANCE,), E.ASSIGNED, (S.STABLE,)),
        ((S.EMPTY,), E.LOADED, (S.STABLE,)),  # a group replayed with members: it was Stable when written
        ((S.EMPTY,), E.CONVERTED, (S.STABLE,)),  # made from a consumer group's classic members (then rebalances)
        (CLASSIC_LIVE, E.CONVERTED, (S.DEAD,)),  # became a consumer group
        (CLASSIC_LIVE, E.DELETED, (S.DEAD,)),
    ],
)

CONSUMER_GROUP = Transitions(
    "consumer group",
    [
        (CONSUMER_LIVE, E.HEARTBEAT, CONSUMER_MEMBERS),  # a heartbeat never removes the last member
        (CONSUMER_LIVE, E.CLASSIC_JOIN, CONSUMER_MEMBERS),
        # removing members bumps the group epoch without computing a target: Assigning, or Empty when none is left
        (CONSUMER_MEMBERS, E.MEMBERS_REMOVED, (S.EMPTY, S.ASSIGNING)),
        ((S.EMPTY,), E.LOADED, CONSUMER_MEMBERS),
        ((S.EMPTY,), E.CONVERTED, CONSUMER_MEMBERS),  # made from a classic group with members
        (CONSUMER_LIVE, E.CONVERTED, (S.DEAD,)),  # became a classic group
        (CONSUMER_LIVE, E.DELETED, (S.DEAD,)),
    ],
)

M, ME = MemberState, MemberEvent
CONSUMER_MEMBER = Transitions(
    "consumer group member",
    [
        ((M.STABLE, M.UNRELEASED_PARTITIONS), ME.RECONCILED, (M.UNREVOKED_PARTITIONS,)),
        ((M.STABLE,), ME.RECONCILED, (M.UNRELEASED_PARTITIONS,)),
        ((M.UNRELEASED_PARTITIONS,), ME.RECONCILED, (M.STABLE,)),
        ((M.UNREVOKED_PARTITIONS,), ME.REVOKED, (M.STABLE,)),
        ((M.UNREVOKED_PARTITIONS, M.UNRELEASED_PARTITIONS), ME.REJOINED, (M.STABLE,)),
        ((M.STABLE,), ME.LOADED, (M.UNREVOKED_PARTITIONS, M.UNRELEASED_PARTITIONS)),
    ],
)


def move_group(group, to: GroupState, event: GroupEvent, now_ms: int) -> None:
    """The one writer of ``group.state`` (and of when it last changed)."""
    group.transitions.check(group.group_id, group.state, event, to)
    group._state = to
    group.state_timestamp = now_ms


def settle_consumer_group(group, event: GroupEvent, now_ms: int) -> None:
    """Move a consumer group to the state its epochs and members give, if that changed."""
    to = group.derived_state()
    if to != group.state:
        move_group(group, to, event, now_ms)


def move_member(group, member, to: MemberState, event: MemberEvent) -> None:
    """The one writer of a consumer group member's ``state``."""
    CONSUMER_MEMBER.check(f"{group.group_id}/{member.member_id}", member.state, event, to)
    member._state = to
