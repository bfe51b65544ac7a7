"""Classic-protocol members in consumer (KIP-848) groups, and converting a group between the two kinds.

With ``group.consumer.migration.policy`` (``bidirectional`` by default,
``upgrade``, ``downgrade`` or ``disabled``) a group moves between protocols
while it has members, as Kafka 4.4 does:

- A consumer group with members takes classic members too (JoinGroup,
  SyncGroup, Heartbeat, LeaveGroup with the ``consumer`` protocol type) unless
  the policy is ``disabled`` (JoinGroup: INCONSISTENT_GROUP_PROTOCOL). Such a member is a ``ConsumerMember`` with ``classic`` set (its
  session timeout and the protocols of its JoinGroup). The server-side assignor
  assigns it partitions like any member; its subscription and owned partitions
  come from the embedded ``ConsumerProtocolSubscription`` of its first protocol.
  Its JoinGroup is answered at once with its member epoch as the generation
  (no leader, no member list); its SyncGroup answers its current assignment as a
  ``ConsumerProtocolAssignment``. When it must move (the group epoch passed its
  epoch, it has partitions to revoke, or partitions it waits for were
  released), its Heartbeat answers REBALANCE_IN_PROGRESS and it has its
  rebalance timeout to rejoin; a JoinGroup must be followed by a SyncGroup
  within the rebalance timeout; its session timeout is its own. Revocation
  comes before assignment: a member keeps its epoch until the partitions it
  gives up are no longer in the owned partitions of its next JoinGroup.
- Upgrade: a ConsumerGroupHeartbeat to a classic group whose members use the
  ``consumer`` protocol type turns it into a consumer group (generation ->
  group epoch and member epochs, last assignments -> current and target
  assignments); pending JoinGroup/SyncGroup requests get REBALANCE_IN_PROGRESS.
  Refused (GROUP_ID_NOT_FOUND) when the policy does not allow upgrades, the
  group uses another protocol type, or it has more than
  ``group.consumer.max.size`` members.
- Downgrade: when the last member using the consumer protocol leaves (leave
  heartbeat, LeaveGroup, session or rebalance timeout) and classic members
  remain, the group becomes a classic group at generation = group epoch with
  each member's target assignment, and starts a rebalance. Not when the policy
  does not allow downgrades or more than ``group.max.size`` members remain.

An empty group of either kind is simply replaced by a new group of the other
kind, whatever the policy.

Two parts of the coordinator live here: ``Conversions`` (upgrade, downgrade,
the policy) and ``ClassicMembers`` (the classic requests of members of
consumer groups, which the coordinator routes to it).
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable

import msgspec

from kafkawire.protocol import errors

from .classic import ClassicGroup, ClassicMember, ClassicProtocol, JoinRequest, JoinResult, SyncResult, deliver
from .config import GroupConfig
from .consumer import (
    UNRELEASED,
    UNREVOKED,
    ConsumerGroup,
    ConsumerMember,
    ConsumerProtocol,
    cancel_timers,
    topic_ids,
)
from .states import GroupEvent, GroupState, move_group, settle_consumer_group
from .store import GroupStore
from .timers import Scheduler

log = logging.getLogger("kafkawire.groups")

POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


class ClassicMetadata(msgspec.Struct):
    """What a classic member of a consumer group told in its last JoinGroup."""

    session_timeout_ms: int
    protocols: list  # [(name, metadata bytes)], in the member's order of preference

    @property
    def protocol_name(self) -> str:
        return self.protocols[0][0] if self.protocols else ""

    def to_json(self) -> dict:
        return {
            "session_timeout_ms": self.session_timeout_ms,
            "protocols": [[n, base64.b64encode(m).decode()] for n, m in self.protocols],
        }

    @classmethod
    def from_json(cls, d: dict) -> ClassicMetadata:
        return cls(int(d["session_timeout_ms"]), [(n, base64.b64decode(b)) for n, b in d.get("protocols", [])])


# -- the embedded consumer protocol -----------------------------------------------------------------------
def decode_subscription(meta: bytes):
    """(version, ConsumerProtocolSubscription); raises ValueError when malformed."""
    from kafkawire.protocol.messages import ConsumerProtocolSubscription

    if len(meta) < 2:
        raise ValueError("subscription too short")
    version = int.from_bytes(meta[:2], "big", signed=True)
    if version < 0:
        raise ValueError(f"subscription version {version}")
    try:
        return version, ConsumerProtocolSubscription.decode(memoryview(meta)[2:], min(version, 3))
    except Exception as exc:
        raise ValueError(str(exc)) from exc


def protocol_version(meta: bytes) -> int:
    return max(0, int.from_bytes(meta[:2], "big", signed=True)) if len(meta) >= 2 else 0


def encode_assignment(tps, names: dict, version: int) -> bytes:
    """``tps`` {(topic_id, partition)} as a ConsumerProtocolAssignment (version capped at 3)."""
    from kafkawire.protocol.messages import ConsumerProtocolAssignment as A

    version = min(max(version, 0), 3)
    by_topic: dict[str, list[int]] = {}
    for tid, p in tps:
        name = names.get(tid)
        if name is not None:
            by_topic.setdefault(name, []).append(p)
    body = A(assigned_partitions=[A.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in by_topic.items()])
    return version.to_bytes(2, "big") + body.encode(version)


def decode_assignment(data: bytes, ids: dict) -> set:
    """A ConsumerProtocolAssignment as {(topic_id, partition)} (topics unknown here are left out)."""
    from kafkawire.protocol.messages import ConsumerProtocolAssignment

    if not data:
        return set()
    if len(data) < 2:
        raise ValueError("assignment too short")
    version = int.from_bytes(data[:2], "big", signed=True)
    try:
        a = ConsumerProtocolAssignment.decode(memoryview(data)[2:], min(max(version, 0), 3))
    except Exception as exc:
        raise ValueError(str(exc)) from exc
    return {(ids[t.topic], p) for t in a.assigned_partitions if t.topic in ids for p in t.partitions}


def topic_names(topics: dict) -> dict:
    """Topic id -> name."""
    return {meta.topic_id: name for name, meta in topics.items()}


class Conversions(msgspec.Struct, eq=False):
    """Turning a classic group into a consumer group and back, as ``group.consumer.migration.policy`` allows.
    Groups come from and are written to ``store``; ``classic`` rebalances a group made classic; ``topics()``
    gives the broker's topics by name."""

    store: GroupStore
    scheduler: Scheduler
    config: GroupConfig
    classic: ClassicProtocol
    topics: Callable[[], dict]

    # -- policy ---------------------------------------------------------------------------------------------
    def _upgrade_enabled(self) -> bool:
        return self.config.migration_policy in ("bidirectional", "upgrade")

    def _downgrade_enabled(self) -> bool:
        return self.config.migration_policy in ("bidirectional", "downgrade")

    def may_upgrade(self, group: ClassicGroup) -> bool:
        """Whether a ConsumerGroupHeartbeat may turn this classic group with members into a consumer group."""
        if not self._upgrade_enabled():
            log.info("classic group %s stays classic: upgrades are disabled", group.group_id)
            return False
        if group.protocol_type != "consumer":
            return False
        return len(group.members) <= self.config.consumer_max_size

    def can_downgrade(self, group: ConsumerGroup, leaving: set) -> bool:
        """Whether the group becomes classic when ``leaving`` go: only classic members would remain."""
        remaining = [m for mid, m in group.members.items() if mid not in leaving]
        if not remaining or any(m.classic is None for m in remaining):
            return False
        if not any(group.members[mid].classic is None for mid in leaving if mid in group.members):
            return False  # the group already had only classic members (it was not downgraded before: keep it)
        if not self._downgrade_enabled():
            log.info("consumer group %s keeps the consumer protocol: downgrades are disabled", group.group_id)
            return False
        if len(remaining) > self.config.max_size:
            return False
        return True

    # -- conversions --------------------------------------------------------------------------------------------
    def to_consumer(self, group: ClassicGroup) -> ConsumerGroup | None:
        """The consumer group a classic group becomes (None when its embedded protocol cannot be read); the
        caller starts its members' sessions."""
        ids = {name: meta.topic_id for name, meta in self.topics().items()}
        now = self.scheduler.now_ms()
        new = ConsumerGroup(group.group_id, now)
        new.group_epoch = new.assignment_epoch = group.generation_id
        try:
            for cm in group.members.values():
                protocol = group.protocol_name or (cm.protocols[0][0] if cm.protocols else None)
                _, sub = decode_subscription(cm.metadata(protocol))
                m = ConsumerMember(cm.member_id)
                m.instance_id = cm.instance_id
                m.rack_id = sub.rack_id
                m.client_id, m.client_host = cm.client_id, cm.client_host
                m.rebalance_timeout_ms = cm.rebalance_timeout_ms
                m.subscribed_names = list(sub.topics)
                m.member_epoch = m.previous_epoch = group.generation_id
                m.assigned = decode_assignment(cm.assignment, ids)
                m.classic = ClassicMetadata(cm.session_timeout_ms, list(cm.protocols))
                new.members[m.member_id] = m
                new.target[m.member_id] = set(m.assigned)
        except ValueError as exc:
            log.warning(
                "classic group %s cannot become a consumer group: malformed embedded protocol (%s)", group.group_id, exc
            )
            return None
        # the classic group ends here: its pending requests learn about the new rebalance
        for cm in group.members.values():
            if cm.heartbeat_timer is not None:
                cm.heartbeat_timer.cancel()
                cm.heartbeat_timer = None
            if cm.join_cb is not None:
                cb, cm.join_cb = cm.join_cb, None
                deliver(cb, JoinResult(errors.REBALANCE_IN_PROGRESS, cm.member_id))
            if cm.sync_cb is not None:
                cb, cm.sync_cb = cm.sync_cb, None
                deliver(cb, SyncResult(errors.REBALANCE_IN_PROGRESS))
        for timer in (group.join_timer, group.sync_timer, *group.pending_members.values()):
            if timer is not None:
                timer.cancel()
        group.pending_members.clear()
        move_group(group, GroupState.DEAD, GroupEvent.CONVERTED, now)
        self.store.groups[group.group_id] = new
        by_name = topic_ids(self.topics())
        new.subscription_metadata = {
            t: [str(meta[0]), meta[1]] for t, meta in by_name.items() if t in new.subscribed_topics(by_name)
        }
        settle_consumer_group(new, GroupEvent.CONVERTED, now)
        log.info(
            "classic group %s upgraded to a consumer group at epoch %d with %d members",
            group.group_id,
            new.group_epoch,
            len(new.members),
        )
        return new

    def to_classic(self, group: ConsumerGroup, leaving: set) -> ClassicGroup:
        """The classic group a consumer group becomes when ``leaving`` go; it starts a rebalance at once."""
        now = self.scheduler.now_ms()
        names = topic_names(self.topics())
        new = ClassicGroup(group.group_id, now)
        new.generation_id = group.group_epoch
        new.protocol_type = "consumer"
        for m in list(group.members.values()):
            cancel_timers(m)
            if m.member_id in leaving:
                continue
            cm = ClassicMember(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.classic.session_timeout_ms,
                m.rebalance_timeout_ms,
                "consumer",
                list(m.classic.protocols),
            )
            new.members[cm.member_id] = cm
            if cm.instance_id is not None:
                new.static_members[cm.instance_id] = cm.member_id
        new.protocol_name = new.select_protocol()
        for cm in new.members.values():
            cm.assignment = encode_assignment(
                group.target.get(cm.member_id, set()), names, protocol_version(cm.metadata(new.protocol_name))
            )
        new.leader_id = next(iter(new.members))
        move_group(new, GroupState.STABLE, GroupEvent.CONVERTED, now)
        move_group(group, GroupState.DEAD, GroupEvent.CONVERTED, now)
        self.store.groups[group.group_id] = new
        log.info(
            "consumer group %s downgraded to a classic group at generation %d with %d members",
            group.group_id,
            new.generation_id,
            len(new.members),
        )
        for cm in new.members.values():
            self.classic.schedule_heartbeat(new, cm)
        self.classic.prepare_rebalance(new, "downgraded from a consumer group")
        self.store.persist(new)
        return new


class ClassicMembers(msgspec.Struct, eq=False):
    """Members using the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) in consumer groups: the
    coordinator routes their requests here. ``consumer`` assigns and reconciles them like any member."""

    store: GroupStore
    scheduler: Scheduler
    config: GroupConfig
    consumer: ConsumerProtocol
    topics: Callable[[], dict]

    # -- timers -------------------------------------------------------------------------------------------------
    def _schedule_join_timeout(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """The member was told to rejoin: it has its rebalance timeout to do so (kept if already running)."""
        if member.join_timer is not None:
            return
        mid = member.member_id
        member.join_timer = self.scheduler.call_later(
            member.rebalance_timeout_ms, lambda: self._timed_out(group, mid, "join")
        )

    def _schedule_sync_timeout(self, group: ConsumerGroup, member: ConsumerMember, timeout_ms: int) -> None:
        if member.sync_timer is not None:
            member.sync_timer.cancel()
        mid = member.member_id
        member.sync_timer = self.scheduler.call_later(timeout_ms, lambda: self._timed_out(group, mid, "sync"))

    def _timed_out(self, group: ConsumerGroup, member_id: str, what: str) -> None:
        member = group.members.get(member_id)
        if self.store.groups.get(group.group_id) is not group or member is None:
            return
        setattr(member, f"{what}_timer", None)
        log.info(
            "consumer group %s: classic member %s did not %s within its rebalance timeout; removing it",
            group.group_id,
            member_id,
            what,
        )
        self.consumer.fence(group, [member])

    # -- JoinGroup ------------------------------------------------------------------------------------------------
    def join(self, group: ConsumerGroup, join: JoinRequest, cb) -> None:
        member_id, instance_id, protocols = join.member_id, join.instance_id, join.protocols
        if self.config.migration_policy == "disabled":
            log.info("consumer group %s: a classic member cannot join, group migration is disabled", group.group_id)
            return cb(JoinResult(errors.INCONSISTENT_GROUP_PROTOCOL, ""))
        unknown = not member_id
        if unknown:
            member_id = str(uuid.uuid4())
        if unknown and len(group.members) >= self.config.consumer_max_size:
            return cb(JoinResult(errors.GROUP_MAX_SIZE_REACHED, member_id))
        if not self._supports_classic(group, join.protocol_type, protocols):
            return cb(JoinResult(errors.INCONSISTENT_GROUP_PROTOCOL, member_id))
        if unknown and instance_id is None and join.require_known_member_id:
            log.info("consumer group %s: a classic member joins; it gets the member id %s", group.group_id, member_id)
            return cb(JoinResult(errors.MEMBER_ID_REQUIRED, member_id))
        try:
            _, sub = decode_subscription(protocols[0][1])
        except ValueError:
            return cb(JoinResult(errors.UNKNOWN_SERVER_ERROR, member_id))
        member = group.members.get(member_id)
        bumped = False
        if instance_id is not None:
            other = next((m for m in group.members.values() if m.instance_id == instance_id), None)
            if other is not None and other.member_id != member_id:
                if not unknown:
                    return cb(JoinResult(errors.FENCED_INSTANCE_ID, member_id))
                # the same instance under a new member id takes over the old one's assignment
                log.info(
                    "consumer group %s: static member %s rejoined as %s (was %s)",
                    group.group_id,
                    instance_id,
                    member_id,
                    other.member_id,
                )
                cancel_timers(other)
                del group.members[other.member_id]
                group.target[member_id] = group.target.pop(other.member_id, set())
                other.member_id = member_id
                other.static_left = False
                group.members[member_id] = other
                member = other
            elif other is None and not unknown and member is None:
                return cb(JoinResult(errors.UNKNOWN_MEMBER_ID, member_id))
        if member is None:
            member = ConsumerMember(member_id)
            group.members[member_id] = member
            bumped = True
            log.info("consumer group %s: classic member %s joined", group.group_id, member_id)
        elif member.classic is None:
            return cb(JoinResult(errors.UNKNOWN_MEMBER_ID, member_id))
        member.instance_id = instance_id if instance_id is not None else member.instance_id
        if sub.rack_id is not None:
            member.rack_id = sub.rack_id
        if join.rebalance_timeout_ms is not None and join.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = join.rebalance_timeout_ms
        member.server_assignor = None
        member.client_id, member.client_host = join.client_id, join.client_host
        member.classic = ClassicMetadata(join.session_timeout_ms, list(protocols))
        if set(sub.topics) != set(member.subscribed_names) or member.subscribed_regex is not None:
            member.subscribed_names = list(sub.topics)
            member.subscribed_regex = None
            bumped = True
        if bumped:
            group.group_epoch += 1
            group.state_timestamp = self.scheduler.now_ms()
        ids = {name: meta.topic_id for name, meta in self.topics().items()}
        owned = {(ids[t.topic], p) for t in (sub.owned_partitions or ()) if t.topic in ids for p in t.partitions}
        self.consumer.refresh_target(group, bumped)
        self.consumer.reconcile(group, member, owned)
        if member.join_timer is not None:
            member.join_timer.cancel()
            member.join_timer = None
        self.consumer.schedule_session(group, member)
        self._schedule_sync_timeout(group, member, member.rebalance_timeout_ms)
        settle_consumer_group(group, GroupEvent.CLASSIC_JOIN, self.scheduler.now_ms())
        self.store.persist(group)
        cb(JoinResult(0, member_id, member.member_epoch, "consumer", member.classic.protocol_name, ""))

    @staticmethod
    def _supports_classic(group: ConsumerGroup, protocol_type: str, protocols) -> bool:
        if protocol_type != "consumer" or not protocols:
            return False
        classic = [m for m in group.members.values() if m.classic is not None]
        names = {n for n, _ in protocols}
        return any(all(any(n == p for p, _ in m.classic.protocols) for m in classic) for n in names)

    def _validate_consumer_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None):
        """(error, member): a classic member of ``group`` by its identity."""
        member = group.members.get(member_id)
        if instance_id is not None:
            static = next((m for m in group.members.values() if m.instance_id == instance_id), None)
            if static is None:
                return errors.UNKNOWN_MEMBER_ID, None
            if static.member_id != member_id:
                return errors.FENCED_INSTANCE_ID, None
            member = static
        if member is None or member.classic is None:
            return errors.UNKNOWN_MEMBER_ID, None
        return 0, member

    # -- SyncGroup ------------------------------------------------------------------------------------------------
    def sync(
        self, group: ConsumerGroup, generation_id, member_id, instance_id, protocol_type, protocol_name, cb
    ) -> None:
        err, member = self._validate_consumer_member(group, member_id, instance_id)
        if err:
            return cb(SyncResult(err))
        if generation_id != member.member_epoch:
            return cb(SyncResult(errors.ILLEGAL_GENERATION))
        if (protocol_type is not None and protocol_type != "consumer") or (
            protocol_name is not None and protocol_name != member.classic.protocol_name
        ):
            return cb(SyncResult(errors.INCONSISTENT_GROUP_PROTOCOL))
        if group.assignment_epoch > member.member_epoch and member.state != UNREVOKED:
            self._schedule_join_timeout(group, member)
            return cb(SyncResult(errors.REBALANCE_IN_PROGRESS))
        if member.sync_timer is not None:
            member.sync_timer.cancel()
            member.sync_timer = None
        self.consumer.schedule_session(group, member)
        version = protocol_version(member.classic.protocols[0][1]) if member.classic.protocols else 0
        cb(
            SyncResult(
                0,
                encode_assignment(member.assigned, topic_names(self.topics()), version),
                protocol_type if protocol_type is not None else "consumer",
                protocol_name if protocol_name is not None else member.classic.protocol_name,
            )
        )

    # -- Heartbeat -------------------------------------------------------------------------------------------------
    def heartbeat(self, group: ConsumerGroup, generation_id, member_id, instance_id) -> int:
        err, member = self._validate_consumer_member(group, member_id, instance_id)
        if err:
            return err
        if generation_id != member.member_epoch:
            return errors.ILLEGAL_GENERATION
        self.consumer.schedule_session(group, member)
        if (
            member.member_epoch < group.assignment_epoch
            or member.state == UNREVOKED
            or (member.state == UNRELEASED and not self._waiting_on_unreleased(group, member))
        ):
            self._schedule_join_timeout(group, member)
            return errors.REBALANCE_IN_PROGRESS
        return 0

    @staticmethod
    def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerMember) -> bool:
        wanted = group.target.get(member.member_id, set()) - member.assigned
        return bool(wanted & group.holders(member.member_id))

    # -- LeaveGroup -------------------------------------------------------------------------------------------------
    def leave(self, group: ConsumerGroup, members) -> tuple[int, list[int]]:
        results, leaving = [], []
        for member_id, instance_id in members:
            if instance_id is None:
                member = group.members.get(member_id)
                if member is None:
                    results.append(errors.UNKNOWN_MEMBER_ID)
                    continue
            else:
                member = next((m for m in group.members.values() if m.instance_id == instance_id), None)
                if member is None:
                    results.append(errors.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member.member_id != member_id:
                    results.append(errors.FENCED_INSTANCE_ID)
                    continue
            log.info("consumer group %s: member %s left (LeaveGroup)", group.group_id, member.member_id)
            if member not in leaving:
                leaving.append(member)
            results.append(0)
        if leaving:
            self.consumer.fence(group, leaving)
        return 0, results
