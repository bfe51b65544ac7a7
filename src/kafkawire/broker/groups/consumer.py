"""The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat): server-side assignment.

The coordinator keeps, per group, a *group epoch*, a *target assignment*
computed by a server-side assignor (``uniform`` or ``range``) at an
*assignment epoch*, and per member its current assignment and *member epoch*.

Epochs, as Kafka 4.4 counts them: a new group starts at group and assignment
epoch 1 (so a member joining with no topics is at epoch 1 at once). A
heartbeat bumps the group epoch by one (never more) when

* the member's set of subscribed topic names changes (a new member
  subscribing to anything counts: it had none), or its regex changes;
* the group's preferred server assignor (the one most members ask for, else
  the default) changes;
* the metadata of the subscribed topics that exist changed: a topic created,
  deleted or recreated, or its partition count changed (Kafka compares a hash
  of it; kafkawire compares the topic ids and partition counts themselves).

A member leaving or being fenced always bumps it. A classic member joining
(JoinGroup, see mixed.py) bumps it when it is new or its topics changed.

The target assignment follows the group epoch in batches: a heartbeat (or a
classic JoinGroup) that finds the group epoch ahead computes it only when
``group.consumer.assignment.interval.ms`` (1 s) has passed since the last one
(the first one, and the first after the group emptied, at once); until then
the group is ``Assigning`` and members reconcile towards the last target,
new members at its epoch with nothing. Leaving members do not compute it;
when the last one goes, the assignment epoch catches up with the group epoch.

Members converge on the target one heartbeat at a time, revoking before
assigning: a member first loses the partitions it must give up (it keeps its
epoch until it reports, in a later heartbeat, that it no longer owns them);
only then does it move to the assignment epoch, getting the new partitions
that no other member still holds ("unreleased" partitions come in a later
heartbeat).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from kafkawire.protocol import errors

from .assignors import ASSIGNORS
from .config import GroupConfig
from .states import (
    CONSUMER_GROUP,
    GroupEvent,
    GroupState,
    MemberEvent,
    MemberState,
    move_member,
    settle_consumer_group,
)
from .store import GroupStore
from .timers import Scheduler

if TYPE_CHECKING:  # mixed.py builds on this module
    from .mixed import Conversions

log = logging.getLogger("kafkawire.groups")

STABLE, UNREVOKED, UNRELEASED = MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS, MemberState.UNRELEASED_PARTITIONS
LEAVE_EPOCH, LEAVE_STATIC_EPOCH = -1, -2


def _tp_key(tp):
    return (str(tp[0]), tp[1])


def tps_to_json(tps) -> list:
    return [[str(t), p] for t, p in sorted(tps, key=_tp_key)]


def tps_from_json(items) -> set:
    return {(uuid.UUID(t), int(p)) for t, p in items}


def topic_ids(topics: dict) -> dict[str, tuple[uuid.UUID, int]]:
    """Topic name -> (topic id, partition count)."""
    return {name: (meta.topic_id, meta.partitions) for name, meta in topics.items()}


def cancel_timers(member) -> None:
    """Stop every timer of a member leaving its group (the last two only classic members have)."""
    for attr in ("session_timer", "revocation_timer", "join_timer", "sync_timer"):
        t = getattr(member, attr, None)
        if t is not None:
            t.cancel()
            setattr(member, attr, None)


class ConsumerMember:
    def __init__(self, member_id: str):
        self.member_id = member_id
        self.instance_id: str | None = None
        self.rack_id: str | None = None
        self.client_id = ""
        self.client_host = ""
        self.rebalance_timeout_ms = 300000
        self.subscribed_names: list[str] = []
        self.subscribed_regex: str | None = None
        self.server_assignor: str | None = None
        self.member_epoch = 0
        self.previous_epoch = -1
        self._state = STABLE  # written only by states.move_member
        self.assigned: set = set()
        self.pending_revocation: set = set()
        self.session_timer = None
        self.revocation_timer = None
        self.last_sent: frozenset | None = None
        self.static_left = False  # left with epoch -2: keeps its partitions until its session expires
        # a member using the classic protocol (JoinGroup/SyncGroup/Heartbeat): its ``mixed.ClassicMetadata``,
        # and its deadlines to rejoin when told to and to sync after joining
        self.classic = None
        self.join_timer = None
        self.sync_timer = None

    @property
    def state(self) -> MemberState:
        return self._state

    def to_json(self) -> dict:
        return {
            "member_id": self.member_id,
            "instance_id": self.instance_id,
            "rack_id": self.rack_id,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "subscribed_names": self.subscribed_names,
            "subscribed_regex": self.subscribed_regex,
            "server_assignor": self.server_assignor,
            "member_epoch": self.member_epoch,
            "previous_epoch": self.previous_epoch,
            "state": self.state.value,
            "static_left": self.static_left,
            "classic": self.classic.to_json() if self.classic is not None else None,
            "assigned": tps_to_json(self.assigned),
            "pending_revocation": tps_to_json(self.pending_revocation),
        }

    @classmethod
    def from_json(cls, group, d: dict) -> ConsumerMember:
        m = cls(d["member_id"])
        for k in (
            "instance_id",
            "rack_id",
            "client_id",
            "client_host",
            "rebalance_timeout_ms",
            "subscribed_names",
            "subscribed_regex",
            "server_assignor",
            "member_epoch",
            "previous_epoch",
            "static_left",
        ):
            if k in d:
                setattr(m, k, d[k])
        state = MemberState(d.get("state", STABLE))
        if state != m.state:
            move_member(group, m, state, MemberEvent.LOADED)
        m.assigned = tps_from_json(d.get("assigned", []))
        m.pending_revocation = tps_from_json(d.get("pending_revocation", []))
        if d.get("classic"):
            from .mixed import ClassicMetadata

            m.classic = ClassicMetadata.from_json(d["classic"])
        return m


class ConsumerGroup:
    kind = "consumer"
    protocol_type = "consumer"
    transitions = CONSUMER_GROUP

    def __init__(self, group_id: str, now_ms: int):
        self.group_id = group_id
        self._state = GroupState.EMPTY  # written only by states.move_group
        # Kafka's new groups start at epoch 1, with an assignment at epoch 1 that was never computed
        self.group_epoch = 1
        self.assignment_epoch = 1
        self.assignment_timestamp = 0  # when the target was last computed; 0: never (compute at once)
        self.members: dict[str, ConsumerMember] = {}
        self.target: dict[str, set] = {}
        self.assignor: str | None = None
        self.subscription_metadata: dict[str, list] = {}  # topic -> [topic id str, partitions]
        self.state_timestamp = now_ms

    @property
    def type_name(self) -> str:
        return "consumer"

    def is_empty(self) -> bool:
        return not self.members

    @property
    def state(self) -> GroupState:
        return self._state

    def derived_state(self) -> GroupState:
        """The state the group's members and epochs give (``states.settle_consumer_group`` moves it there)."""
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != STABLE:
                return GroupState.RECONCILING
        return GroupState.STABLE

    def holders(self, exclude: str) -> set:
        held = set()
        for m in self.members.values():
            if m.member_id != exclude:
                held |= m.assigned
                held |= m.pending_revocation
        return held

    def subscribed_topics(self, all_topics) -> set[str]:
        out: set[str] = set()
        for m in self.members.values():
            out.update(member_topics(m, all_topics))
        return out

    def to_json(self) -> dict:
        return {
            "type": "consumer",
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "assignment_timestamp": self.assignment_timestamp,
            "assignor": self.assignor,
            "subscription_metadata": self.subscription_metadata,
            "members": [m.to_json() for m in self.members.values()],
            "target": {mid: tps_to_json(t) for mid, t in self.target.items()},
        }

    @classmethod
    def from_json(cls, group_id: str, d: dict, now_ms: int) -> ConsumerGroup:
        g = cls(group_id, now_ms)
        g.group_epoch = int(d.get("group_epoch", 0))
        g.assignment_epoch = int(d.get("assignment_epoch", 0))
        g.assignment_timestamp = int(d.get("assignment_timestamp", 0))
        g.assignor = d.get("assignor")
        g.subscription_metadata = d.get("subscription_metadata", {})
        for md in d.get("members", []):
            m = ConsumerMember.from_json(g, md)
            g.members[m.member_id] = m
        g.target = {mid: tps_from_json(t) for mid, t in d.get("target", {}).items()}
        return g


def member_topics(member: ConsumerMember, all_topics) -> set[str]:
    topics = set(member.subscribed_names or ())
    if member.subscribed_regex:
        try:
            rx = re.compile(member.subscribed_regex)
        except re.error:
            rx = None
        if rx is not None:
            topics.update(t for t in all_topics if not t.startswith("__") and rx.fullmatch(t))
    return topics


class HeartbeatResult(msgspec.Struct):
    error: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: list | None = None  # [(topic_id, [partitions])] or None when unchanged
    extra: dict = msgspec.field(default_factory=dict)


class ConsumerProtocol(msgspec.Struct, eq=False):
    """The consumer protocol's part of the coordinator: ConsumerGroupHeartbeat, members' sessions, target
    assignments and reconciliation, and removing members. Groups come from and are written to ``store``;
    ``conversions`` upgrades classic groups and downgrades consumer groups whose last
    consumer-protocol member left; ``topics()`` gives the broker's topics by name."""

    store: GroupStore
    scheduler: Scheduler
    config: GroupConfig
    conversions: Conversions
    topics: Callable[[], dict]

    def _settle(self, group: ConsumerGroup, event: GroupEvent) -> None:
        settle_consumer_group(group, event, self.scheduler.now_ms())

    def schedule_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        mid = member.member_id
        timeout = (
            member.classic.session_timeout_ms if member.classic is not None else self.config.consumer_session_timeout_ms
        )
        member.session_timer = self.scheduler.call_later(timeout, lambda: self._session_expired(group, mid))

    def _session_expired(self, group: ConsumerGroup, member_id: str) -> None:
        if self.store.groups.get(group.group_id) is not group or member_id not in group.members:
            return
        log.info("consumer group %s: member %s session expired", group.group_id, member_id)
        self.fence(group, [group.members[member_id]])

    def _revocation_expired(self, group: ConsumerGroup, member_id: str) -> None:
        m = group.members.get(member_id)
        if self.store.groups.get(group.group_id) is not group or m is None or m.state != UNREVOKED:
            return
        log.info(
            "consumer group %s: member %s did not revoke its partitions within %d ms; fencing it",
            group.group_id,
            member_id,
            m.rebalance_timeout_ms,
        )
        self.fence(group, [m])

    def refresh_target(self, group: ConsumerGroup, bumped: bool = False, assign: bool = True) -> None:
        """Recompute the subscription metadata (bumping the group epoch once when it changed and the caller
        has not bumped it already) and, with ``assign``, the target assignment when the group epoch is ahead
        of it and the assignment interval allows."""
        topics = topic_ids(self.topics())
        subscribed = group.subscribed_topics(topics)
        metadata = {t: [str(topics[t][0]), topics[t][1]] for t in sorted(subscribed) if t in topics}
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            if not bumped:
                group.group_epoch += 1
                group.state_timestamp = self.scheduler.now_ms()
                log.info(
                    "consumer group %s: subscribed topic metadata changed; group epoch %d",
                    group.group_id,
                    group.group_epoch,
                )
        if not assign or group.group_epoch <= group.assignment_epoch:
            return
        now = self.scheduler.now_ms()
        interval = self.config.consumer_assignment_interval_ms
        if group.assignment_timestamp and interval and now < group.assignment_timestamp + interval:
            return  # batched: computed by the first heartbeat after the interval
        assignor_name = self._pick_assignor(group)
        group.assignor = assignor_name
        member_subs = {
            mid: {topics[t][0] for t in member_topics(m, topics) if t in topics} for mid, m in group.members.items()
        }
        parts = {topics[t][0]: topics[t][1] for t in metadata}
        group.target = ASSIGNORS[assignor_name](member_subs, parts, group.target)
        group.assignment_epoch = group.group_epoch
        group.assignment_timestamp = now
        log.info(
            "consumer group %s: target assignment at epoch %d (%s) for %d members",
            group.group_id,
            group.assignment_epoch,
            assignor_name,
            len(group.members),
        )

    def _pick_assignor(self, group: ConsumerGroup) -> str:
        votes: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor in ASSIGNORS:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if votes:
            return max(sorted(votes), key=lambda n: votes[n])
        return self.config.consumer_assignors[0] if self.config.consumer_assignors else "uniform"

    def reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: set | None) -> None:
        if member.state == UNREVOKED:
            if owned is None or owned & member.pending_revocation:
                return  # still revoking
            member.pending_revocation = set()
            if member.revocation_timer is not None:
                member.revocation_timer.cancel()
                member.revocation_timer = None
            move_member(group, member, STABLE, MemberEvent.REVOKED)
        target = group.target.get(member.member_id, set())
        if member.member_epoch == group.assignment_epoch and member.state == STABLE and member.assigned == target:
            return
        keep = member.assigned & target
        revoke = member.assigned - target
        if revoke:
            member.assigned = keep
            member.pending_revocation = revoke
            move_member(group, member, UNREVOKED, MemberEvent.RECONCILED)
            mid = member.member_id
            if member.revocation_timer is not None:
                member.revocation_timer.cancel()
            member.revocation_timer = self.scheduler.call_later(
                member.rebalance_timeout_ms, lambda: self._revocation_expired(group, mid)
            )
            return
        held = group.holders(member.member_id)
        wanted = target - member.assigned
        free = {tp for tp in wanted if tp not in held}
        if member.member_epoch != group.assignment_epoch:
            member.previous_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        member.assigned = keep | free
        state = STABLE if free == wanted else UNRELEASED
        if state != member.state:
            move_member(group, member, state, MemberEvent.RECONCILED)

    def consumer_heartbeat(
        self,
        *,
        version: int,
        group_id: str,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        subscribed_topic_names: list[str] | None,
        subscribed_topic_regex: str | None,
        server_assignor: str | None,
        topic_partitions,
        client_id: str = "",
        client_host: str = "",
    ) -> HeartbeatResult:
        interval = self.config.consumer_heartbeat_interval_ms

        def fail(code, msg=None):  # Kafka's error answers carry no member id and epoch 0
            return HeartbeatResult(code, msg, None, 0, 0)

        if "consumer" not in self.config.protocols:
            return fail(errors.UNSUPPORTED_VERSION, "the consumer group protocol is disabled")
        if not group_id:
            return fail(errors.INVALID_REQUEST, "GroupId can't be empty.")
        if version >= 1 and not member_id:
            return fail(errors.INVALID_REQUEST, "MemberId can't be empty.")
        if member_epoch < LEAVE_STATIC_EPOCH:
            return fail(errors.INVALID_REQUEST, f"MemberEpoch {member_epoch} is invalid.")
        if member_epoch != 0 and not member_id:
            return fail(errors.INVALID_REQUEST, "MemberId can't be empty.")
        if member_epoch == LEAVE_STATIC_EPOCH and instance_id is None:
            return fail(errors.INVALID_REQUEST, "InstanceId can't be null.")
        if member_epoch == 0:
            if rebalance_timeout_ms is None or rebalance_timeout_ms < 0:
                return fail(errors.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if topic_partitions is None:
                return fail(errors.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if subscribed_topic_names is None and subscribed_topic_regex is None:
                return fail(errors.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        if server_assignor is not None and server_assignor not in ASSIGNORS:
            return fail(errors.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {server_assignor} is not supported.")
        if subscribed_topic_regex:
            try:
                re.compile(subscribed_topic_regex)
            except re.error as exc:
                return fail(errors.INVALID_REGULAR_EXPRESSION, str(exc))

        group = self.store.groups.get(group_id)
        if group is not None and group.kind != "consumer":
            if group.is_empty():
                self.store.drop(group)
                group = None
            elif member_epoch == 0 and self.conversions.may_upgrade(group):
                group = self.conversions.to_consumer(group)
                if group is None:
                    return fail(
                        errors.GROUP_ID_NOT_FOUND,
                        f"Cannot upgrade the classic group {group_id} to a "
                        "consumer group: its embedded protocol is malformed.",
                    )
                for m in group.members.values():
                    self.schedule_session(group, m)
            else:
                return fail(errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

        if member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            if group is None:
                return fail(errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            member = group.members.get(member_id)
            if member is None and instance_id is not None:
                member = next((m for m in group.members.values() if m.instance_id == instance_id), None)
            if member is None:
                return fail(errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not in group {group_id}.")
            if member_epoch == LEAVE_STATIC_EPOCH and member.instance_id is not None:
                # a static member going away for a while: it keeps its partitions until its session
                # expires, so that the same instance rejoining gets them back without a rebalance
                log.info(
                    "consumer group %s: static member %s (%s) left temporarily",
                    group_id,
                    member.member_id,
                    member.instance_id,
                )
                member.static_left = True
                self.schedule_session(group, member)
                self.store.persist(group)
                return HeartbeatResult(0, None, member.member_id, member_epoch, 0)
            log.info("consumer group %s: member %s left", group_id, member.member_id)
            self.fence(group, [member])
            return HeartbeatResult(0, None, member.member_id, member_epoch, 0)

        if group is None:
            if member_epoch != 0:
                return fail(errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            group = ConsumerGroup(group_id, self.scheduler.now_ms())
            self.store.groups[group_id] = group

        bumped = False
        member = group.members.get(member_id) if member_id else None
        if member_epoch == 0:
            if not member_id:
                member_id = str(uuid.uuid4())
            replaced = False
            if instance_id is not None:
                other = next(
                    (m for m in group.members.values() if m.instance_id == instance_id and m.member_id != member_id),
                    None,
                )
                if other is not None and not other.static_left:
                    return fail(
                        errors.UNRELEASED_INSTANCE_ID,
                        f"Static member {instance_id} is still in use by member {other.member_id}.",
                    )
                if other is not None and member is None:
                    # the static member is back under a new member id: it takes over the old one's state
                    log.info(
                        "consumer group %s: static member %s rejoined as %s (was %s)",
                        group_id,
                        instance_id,
                        member_id,
                        other.member_id,
                    )
                    for t in (other.session_timer, other.revocation_timer):
                        if t is not None:
                            t.cancel()
                    old_id = other.member_id
                    del group.members[old_id]
                    group.target[member_id] = group.target.pop(old_id, set())
                    other.member_id = member_id
                    other.static_left = False
                    other.last_sent = None
                    group.members[member_id] = other
                    member = other
                    replaced = True
            if replaced:
                pass  # keeps its assignment and epoch: no rebalance
            elif member is None:
                if len(group.members) >= self.config.consumer_max_size:
                    return fail(errors.GROUP_MAX_SIZE_REACHED)
                member = ConsumerMember(member_id)
                group.members[member_id] = member
                log.info("consumer group %s: member %s joined", group_id, member_id)
            else:
                # the member lost its state (fenced, restarted): it starts over and releases what it had
                member.assigned = set()
                member.pending_revocation = set()
                if member.state != STABLE:
                    move_member(group, member, STABLE, MemberEvent.REJOINED)
                member.member_epoch = 0
                member.static_left = False
        else:
            if member is None:
                return fail(errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not in group {group_id}.")
            if member_epoch != member.member_epoch:
                owned = _owned(topic_partitions)
                if not (member_epoch == member.previous_epoch and owned is not None and owned <= member.assigned):
                    return fail(
                        errors.FENCED_MEMBER_EPOCH,
                        f"The member epoch {member_epoch} does not match {member.member_epoch}.",
                    )
        member.client_id, member.client_host = client_id, client_host
        if rebalance_timeout_ms is not None and rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if instance_id is not None:
            member.instance_id = instance_id
        if rack_id is not None:
            member.rack_id = rack_id
        if subscribed_topic_names is not None and set(subscribed_topic_names) != set(member.subscribed_names):
            bumped = True
        if subscribed_topic_names is not None:
            member.subscribed_names = list(subscribed_topic_names)
        if subscribed_topic_regex is not None and (subscribed_topic_regex or None) != member.subscribed_regex:
            member.subscribed_regex = subscribed_topic_regex or None
            bumped = True
        if server_assignor is not None and server_assignor != member.server_assignor:
            preferred = self._pick_assignor(group)
            member.server_assignor = server_assignor
            if self._pick_assignor(group) != preferred:  # only the group's preferred assignor counts
                bumped = True
        if bumped:
            group.group_epoch += 1
            group.state_timestamp = self.scheduler.now_ms()
        before = (
            group.group_epoch,
            group.assignment_epoch,
            member.member_epoch,
            frozenset(member.assigned),
            member.state,
        )
        self.refresh_target(group, bumped)
        self.reconcile(group, member, _owned(topic_partitions))
        self.schedule_session(group, member)
        self._settle(group, GroupEvent.HEARTBEAT)
        after = (
            group.group_epoch,
            group.assignment_epoch,
            member.member_epoch,
            frozenset(member.assigned),
            member.state,
        )
        if bumped or before != after:
            self.store.persist(group)
        assigned = frozenset(member.assigned)
        owned = _owned(topic_partitions)
        send = member_epoch == 0 or assigned != member.last_sent or (owned is not None and owned != assigned)
        assignment = None
        if send:
            member.last_sent = assigned
            by_topic: dict = {}
            for tid, p in assigned:
                by_topic.setdefault(tid, []).append(p)
            assignment = [(tid, sorted(ps)) for tid, ps in sorted(by_topic.items(), key=lambda kv: str(kv[0]))]
        return HeartbeatResult(0, None, member.member_id, member.member_epoch, interval, assignment)

    # -- members leaving ------------------------------------------------------------------------------------
    def fence(self, group: ConsumerGroup, members: list) -> None:
        """Remove members (left, timed out, fenced); downgrade when only classic members remain."""
        leaving = {m.member_id for m in members}
        if self.conversions.can_downgrade(group, leaving):
            self.conversions.to_classic(group, leaving)
            return
        for m in members:
            cancel_timers(m)
            group.members.pop(m.member_id, None)
            group.target.pop(m.member_id, None)
        group.group_epoch += 1  # always, as Kafka; the target waits for the next heartbeat
        group.state_timestamp = self.scheduler.now_ms()
        self.refresh_target(group, bumped=True, assign=False)
        if not group.members:  # the assignment epoch catches up; the next member gets a target at once
            group.target = {}
            group.assignment_epoch = group.group_epoch
            group.assignment_timestamp = 0
        self._settle(group, GroupEvent.MEMBERS_REMOVED)
        self.store.persist(group)


def _owned(topic_partitions) -> set | None:
    if topic_partitions is None:
        return None
    return {(t.topic_id, p) for t in topic_partitions for p in t.partitions}
