"""The classic group protocol (JoinGroup / SyncGroup / Heartbeat / LeaveGroup), as Kafka's coordinator runs it.

States (``states.py`` has the table of legal moves): Empty ->
PreparingRebalance -> CompletingRebalance -> Stable, and Dead (deleted or
converted). A rebalance starts when a member joins, leaves, changes its
protocols or times out; it completes when every known member has rejoined
(or the rebalance timeout expires, removing those that did not). A group
that was Empty first waits ``group.initial.rebalance.delay.ms`` (extended
while members keep arriving, up to the rebalance timeout). The leader's
SyncGroup carries the assignments; every member's pending SyncGroup is then
answered with its own assignment bytes.

Pending JoinGroup / SyncGroup requests are callbacks the state machine calls
once (the broker's handler turns them into futures it awaits). Everything here
is driven by method calls and ``Scheduler`` timers: no sockets, no loop.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable

import msgspec

from kafkawire.protocol import errors

from .config import GroupConfig
from .states import CLASSIC_GROUP, GroupEvent, GroupState, move_group
from .store import GroupStore
from .timers import Scheduler

log = logging.getLogger("kafkawire.groups")

EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)


class JoinResult(msgspec.Struct):
    error: int
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list = msgspec.field(default_factory=list)  # [(member_id, group_instance_id, metadata)] for the leader
    skip_assignment: bool = False


class JoinRequest(msgspec.Struct, frozen=True):
    """What a JoinGroup asks, read from the request by its handler (version-dependent fields already decided):
    one value handed through the coordinator and the protocol's steps instead of twelve arguments."""

    group_id: str
    member_id: str
    instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool = True  # JoinGroup v4+ (KIP-394)
    supports_skip_assignment: bool = False  # JoinGroup v9+ (KIP-814)
    reason: str | None = None  # JoinGroup v8+


class SyncResult(msgspec.Struct):
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


class ClassicMember:
    __slots__ = (
        "member_id",
        "instance_id",
        "client_id",
        "client_host",
        "session_timeout_ms",
        "rebalance_timeout_ms",
        "protocol_type",
        "protocols",
        "assignment",
        "join_cb",
        "sync_cb",
        "heartbeat_timer",
        "is_new",
        "last_heartbeat_ms",
        "supports_skip_assignment",
    )

    def __init__(
        self,
        member_id,
        instance_id,
        client_id,
        client_host,
        session_timeout_ms,
        rebalance_timeout_ms,
        protocol_type,
        protocols,
    ):
        self.member_id = member_id
        self.instance_id = instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.protocol_type = protocol_type
        self.protocols: list[tuple[str, bytes]] = protocols
        self.assignment = b""
        self.join_cb: Callable | None = None
        self.sync_cb: Callable | None = None
        self.heartbeat_timer = None
        self.is_new = False
        self.last_heartbeat_ms = 0
        self.supports_skip_assignment = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols) -> bool:
        return list(self.protocols) == list(protocols)

    def to_json(self) -> dict:
        return {
            "member_id": self.member_id,
            "instance_id": self.instance_id,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "protocols": [[n, base64.b64encode(m).decode()] for n, m in self.protocols],
            "assignment": base64.b64encode(self.assignment).decode(),
        }

    @classmethod
    def from_json(cls, d: dict, protocol_type) -> ClassicMember:
        m = cls(
            d["member_id"],
            d.get("instance_id"),
            d.get("client_id", ""),
            d.get("client_host", ""),
            int(d["session_timeout_ms"]),
            int(d["rebalance_timeout_ms"]),
            protocol_type,
            [(n, base64.b64decode(b)) for n, b in d.get("protocols", [])],
        )
        m.assignment = base64.b64decode(d.get("assignment", ""))
        return m


class ClassicGroup:
    kind = "classic"
    transitions = CLASSIC_GROUP

    def __init__(self, group_id: str, now_ms: int):
        self.group_id = group_id
        self._state = EMPTY  # written only by states.move_group
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicMember] = {}
        self.pending_members: dict[str, object] = {}  # member id -> expiry timer (MEMBER_ID_REQUIRED issued)
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_sync: set[str] = set()
        self.join_timer = None
        self.sync_timer = None
        self.initial_delay_active = False
        self.new_member_added = False
        self.state_timestamp = now_ms

    # -- queries --------------------------------------------------------------------
    @property
    def state(self) -> GroupState:
        return self._state

    @property
    def type_name(self) -> str:
        return "classic"

    def is_empty(self) -> bool:
        return not self.members

    def candidate_protocols(self) -> set[str]:
        sets = [set(n for n, _ in m.protocols) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols) -> bool:
        names = [n for n, _ in protocols]
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(set(names) & self.candidate_protocols())

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        order: list[str] = []
        for m in self.members.values():
            for name, _ in m.protocols:
                if name in candidates:
                    votes[name] = votes.get(name, 0) + 1
                    if name not in order:
                        order.append(name)
                    break
        return max(order, key=lambda n: (votes[n], -order.index(n)))

    def all_awaiting_join(self) -> bool:
        return all(m.join_cb is not None for m in self.members.values()) and not self.pending_members

    def max_rebalance_timeout(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol type only), or None when unknown."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        from kafkawire.protocol.messages import ConsumerProtocolSubscription

        topics: set[str] = set()
        for m in self.members.values():
            meta = m.metadata(self.protocol_name)
            try:
                # read as version 0 (topics, user data), the prefix of every later version, as Kafka does:
                # a subscription that does not even hold that is unreadable whatever version it claims
                if len(meta) < 2:
                    raise ValueError("no version")
                sub = ConsumerProtocolSubscription.decode(memoryview(meta)[2:], 0, strict=False)
            except Exception:
                return None
            topics.update(sub.topics)
        return topics

    def to_json(self) -> dict:
        return {
            "type": "classic",
            "protocol_type": self.protocol_type,
            "generation": self.generation_id,
            "protocol": self.protocol_name,
            "leader": self.leader_id,
            "members": [m.to_json() for m in self.members.values()],
        }


def deliver(cb, result) -> None:
    """Answer a pending JoinGroup/SyncGroup (a callback must never break the state machine)."""
    if cb is not None:
        try:
            cb(result)
        except Exception:  # pragma: no cover - a callback must never break the state machine
            log.exception("group response callback failed")


class ClassicProtocol(msgspec.Struct, eq=False):
    """The classic protocol's part of the coordinator: the rebalances of classic groups (the coordinator routes
    requests for consumer groups elsewhere). Groups come from and are written to ``store``; timers run on
    ``scheduler``; ``config`` is read at each use."""

    store: GroupStore
    scheduler: Scheduler
    config: GroupConfig

    # -- helpers ----------------------------------------------------------------------
    def _move(self, group: ClassicGroup, state: GroupState, event: GroupEvent) -> None:
        move_group(group, state, event, self.scheduler.now_ms())

    def _new_member_id(self, client_id: str, instance_id: str | None) -> str:
        return f"{instance_id or client_id}-{uuid.uuid4()}"

    def schedule_heartbeat(self, group: ClassicGroup, member: ClassicMember) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        member.last_heartbeat_ms = self.scheduler.now_ms()
        mid = member.member_id
        member.heartbeat_timer = self.scheduler.call_later(
            member.session_timeout_ms, lambda: self._heartbeat_expired(group, mid)
        )

    def _heartbeat_expired(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None or self.store.groups.get(group.group_id) is not group:
            return
        member.heartbeat_timer = None
        if member.join_cb is not None or member.sync_cb is not None:
            self.schedule_heartbeat(group, member)  # a member with a pending request is alive
            return
        log.info(
            "group %s: member %s failed to heartbeat within %d ms; removing it",
            group.group_id,
            member_id,
            member.session_timeout_ms,
        )
        self._remove_member_and_update(group, member, "session timeout")

    def _join_result_for(
        self, group: ClassicGroup, member: ClassicMember, *, error=0, skip_assignment=False, with_members=None
    ) -> JoinResult:
        leader = group.leader_id == member.member_id
        members = []
        if with_members if with_members is not None else leader:
            members = [(m.member_id, m.instance_id, m.metadata(group.protocol_name)) for m in group.members.values()]
        return JoinResult(
            error=error,
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=members,
            skip_assignment=skip_assignment,
        )

    # -- JoinGroup --------------------------------------------------------------------
    def join_group(self, join: JoinRequest, cb: Callable[[JoinResult], None]) -> None:
        """A JoinGroup the coordinator validated, for a classic group or none."""
        group = self.store.groups.get(join.group_id)
        if not join.member_id:
            if group is None:
                group = ClassicGroup(join.group_id, self.scheduler.now_ms())
                self.store.groups[join.group_id] = group
            self._join_unknown_member(group, join, cb)
        else:
            if group is None:
                return cb(JoinResult(errors.UNKNOWN_MEMBER_ID, join.member_id))
            self._join_known_member(group, join, cb)

    def _join_unknown_member(self, group, join: JoinRequest, cb):
        if group.state == DEAD:
            return cb(JoinResult(errors.COORDINATOR_NOT_AVAILABLE, ""))
        if not group.supports(join.protocol_type, join.protocols):
            return cb(JoinResult(errors.INCONSISTENT_GROUP_PROTOCOL, ""))
        instance_id = join.instance_id
        new_id = self._new_member_id(join.client_id, instance_id)
        if instance_id is not None and instance_id in group.static_members:
            return self._replace_static_member(group, new_id, join, cb)
        if len(group.members) + len(group.pending_members) >= self.config.max_size:
            return cb(JoinResult(errors.GROUP_MAX_SIZE_REACHED, ""))
        if instance_id is None and join.require_known_member_id:
            # KIP-394: hand out the member id and make the client come back with it
            timer = self.scheduler.call_later(
                join.session_timeout_ms, lambda: self._pending_member_expired(group, new_id)
            )
            group.pending_members[new_id] = timer
            return cb(JoinResult(errors.MEMBER_ID_REQUIRED, new_id))
        self._add_member_and_rebalance(group, new_id, join, cb, join.reason or "new member joined")

    def _pending_member_expired(self, group, member_id) -> None:
        if group.pending_members.pop(member_id, None) is not None:
            log.info("group %s: pending member %s did not rejoin in time", group.group_id, member_id)
            if group.state == PREPARING_REBALANCE:
                self._try_complete_join(group)

    def _join_known_member(self, group, join: JoinRequest, cb):
        member_id = join.member_id
        if group.state == DEAD:
            return cb(JoinResult(errors.COORDINATOR_NOT_AVAILABLE, member_id))
        if not group.supports(join.protocol_type, join.protocols):
            return cb(JoinResult(errors.INCONSISTENT_GROUP_PROTOCOL, member_id))
        if member_id in group.pending_members:
            group.pending_members.pop(member_id).cancel()
            return self._add_member_and_rebalance(group, member_id, join, cb, join.reason or "pending member joined")
        err = self.validate_member(group, member_id, join.instance_id)
        if err:
            return cb(JoinResult(err, member_id))
        member = group.members[member_id]
        if group.state == PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, join, cb, join.reason or "member rejoined")
        elif group.state == COMPLETING_REBALANCE:
            if member.matches(join.protocols):
                # the member did not see the JoinGroup response: send it again
                self.schedule_heartbeat(group, member)
                cb(self._join_result_for(group, member))
            else:
                reason = join.reason or "member changed its protocols"
                self._update_member_and_rebalance(group, member, join, cb, reason)
        elif group.state == STABLE:
            if group.leader_id == member_id or not member.matches(join.protocols):
                reason = join.reason or "leader or changed member rejoined"
                self._update_member_and_rebalance(group, member, join, cb, reason)
            else:
                self.schedule_heartbeat(group, member)
                cb(self._join_result_for(group, member))
        else:  # Empty
            cb(JoinResult(errors.UNKNOWN_MEMBER_ID, member_id))

    def validate_member(self, group, member_id, instance_id) -> int:
        """0, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID (Kafka's validation of a member's identity)."""
        if instance_id is not None:
            existing = group.static_members.get(instance_id)
            if existing is None:
                return errors.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return errors.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return errors.UNKNOWN_MEMBER_ID
        return 0

    def _add_member_and_rebalance(self, group, member_id: str, join: JoinRequest, cb, reason):
        instance_id = join.instance_id
        member = ClassicMember(
            member_id,
            instance_id,
            join.client_id,
            join.client_host,
            join.session_timeout_ms,
            join.rebalance_timeout_ms,
            join.protocol_type,
            list(join.protocols),
        )
        member.is_new = True
        member.join_cb = cb
        member.supports_skip_assignment = join.supports_skip_assignment
        if not group.members:
            group.protocol_type = join.protocol_type
        group.members[member_id] = member
        if instance_id is not None:
            group.static_members[instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        if group.state == PREPARING_REBALANCE and group.initial_delay_active:
            group.new_member_added = True
        self.schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(group, reason)
        if group.state == PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _update_member_and_rebalance(self, group, member, join: JoinRequest, cb, reason):
        member.protocols = list(join.protocols)
        member.session_timeout_ms = join.session_timeout_ms
        member.rebalance_timeout_ms = join.rebalance_timeout_ms
        member.supports_skip_assignment = join.supports_skip_assignment
        if member.join_cb is not None and member.join_cb is not cb:
            deliver(member.join_cb, JoinResult(errors.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_cb = cb
        self.schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(group, reason)
        if group.state == PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _replace_static_member(self, group, new_id: str, join: JoinRequest, cb):
        instance_id = join.instance_id
        old_id = group.static_members[instance_id]
        member = group.members.pop(old_id)
        log.info(
            "group %s: static member %s rejoined; member id %s replaces %s", group.group_id, instance_id, new_id, old_id
        )
        # fence the old incarnation's pending requests
        if member.join_cb is not None:
            old_cb, member.join_cb = member.join_cb, None
            deliver(old_cb, JoinResult(errors.FENCED_INSTANCE_ID, old_id))
        if member.sync_cb is not None:
            old_cb, member.sync_cb = member.sync_cb, None
            deliver(old_cb, SyncResult(errors.FENCED_INSTANCE_ID))
        member.member_id = new_id
        member.client_id, member.client_host = join.client_id, join.client_host
        group.members[new_id] = member
        group.static_members[instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        if group.state == STABLE and member.matches(join.protocols):
            member.session_timeout_ms = join.session_timeout_ms
            member.rebalance_timeout_ms = join.rebalance_timeout_ms
            self.schedule_heartbeat(group, member)
            leader = group.leader_id == new_id
            if leader and not join.supports_skip_assignment:
                return self._update_member_and_rebalance(group, member, join, cb, "static leader rejoined")
            self.store.persist(group)
            return cb(self._join_result_for(group, member, skip_assignment=leader))
        self._update_member_and_rebalance(group, member, join, cb, "static member rejoined")

    # -- rebalancing -----------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group, reason) -> None:
        if group.state in (STABLE, COMPLETING_REBALANCE, EMPTY):
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group, reason) -> None:
        if group.state == COMPLETING_REBALANCE:
            for m in group.members.values():
                if m.sync_cb is not None:
                    cb, m.sync_cb = m.sync_cb, None
                    deliver(cb, SyncResult(errors.REBALANCE_IN_PROGRESS))
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        group.pending_sync.clear()
        if group.join_timer is not None:
            group.join_timer.cancel()
        was_empty = group.state == EMPTY
        self._move(group, PREPARING_REBALANCE, GroupEvent.REBALANCE)
        log.info("group %s: preparing to rebalance (generation %d): %s", group.group_id, group.generation_id, reason)
        delay = self.config.initial_rebalance_delay_ms
        timeout = group.max_rebalance_timeout()
        if was_empty and delay > 0:
            group.initial_delay_active = True
            group.new_member_added = False
            first = min(delay, timeout) if timeout > 0 else delay
            remaining = max(timeout - delay, 0)
            group.join_timer = self.scheduler.call_later(first, lambda: self._initial_delay_expired(group, remaining))
        else:
            group.initial_delay_active = False
            group.join_timer = self.scheduler.call_later(timeout, lambda: self._join_timeout(group))

    def _initial_delay_expired(self, group, remaining) -> None:
        group.join_timer = None
        if group.state != PREPARING_REBALANCE:
            return
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.join_timer = self.scheduler.call_later(
                delay, lambda: self._initial_delay_expired(group, max(remaining - delay, 0))
            )
            return
        group.initial_delay_active = False
        self._complete_join(group)

    def _join_timeout(self, group) -> None:
        group.join_timer = None
        if group.state == PREPARING_REBALANCE:
            self._complete_join(group)

    def _try_complete_join(self, group) -> None:
        if group.state == PREPARING_REBALANCE and not group.initial_delay_active and group.all_awaiting_join():
            self._complete_join(group)

    def _complete_join(self, group) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_delay_active = False
        if group.state == DEAD:
            return
        # dynamic members that did not rejoin are removed; static ones stay until their session expires
        for m in [m for m in group.members.values() if m.join_cb is None and m.instance_id is None]:
            log.info("group %s: member %s did not rejoin in time", group.group_id, m.member_id)
            self._remove_member(group, m)
        for _mid, timer in list(group.pending_members.items()):
            timer.cancel()
        group.pending_members.clear()
        if group.members and not any(m.join_cb is not None for m in group.members.values()):
            # nobody rejoined: wait again until the sessions of the absent members expire
            group.join_timer = self.scheduler.call_later(
                group.max_rebalance_timeout(), lambda: self._join_timeout(group)
            )
            return
        if group.leader_id not in group.members or group.members[group.leader_id].join_cb is None:
            joined = [m.member_id for m in group.members.values() if m.join_cb is not None]
            group.leader_id = joined[0] if joined else None
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            self._move(group, EMPTY, GroupEvent.JOIN_COMPLETED)
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            self.store.persist(group)  # and it stays listed, as Kafka's empty groups do until their offsets expire
            return
        group.protocol_name = group.select_protocol()
        self._move(group, COMPLETING_REBALANCE, GroupEvent.JOIN_COMPLETED)
        log.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        for m in list(group.members.values()):
            m.assignment = b""
            cb, m.join_cb = m.join_cb, None
            m.is_new = False
            self.schedule_heartbeat(group, m)
            group.pending_sync.add(m.member_id)
            if cb is not None:
                deliver(cb, self._join_result_for(group, m))
        if group.state == COMPLETING_REBALANCE:
            timeout = group.max_rebalance_timeout()
            gen = group.generation_id
            group.sync_timer = self.scheduler.call_later(timeout, lambda: self._sync_timeout(group, gen))

    def _sync_timeout(self, group, generation) -> None:
        group.sync_timer = None
        if group.generation_id != generation or group.state not in (COMPLETING_REBALANCE, STABLE):
            return
        missing = [group.members[mid] for mid in group.pending_sync if mid in group.members]
        group.pending_sync.clear()
        if missing:
            log.info(
                "group %s: members %s did not send SyncGroup in time", group.group_id, [m.member_id for m in missing]
            )
            for m in missing:
                self._remove_member(group, m)
            self.prepare_rebalance(group, "members failed to sync")
            self._try_complete_join(group)

    def _remove_member(self, group, member) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None
        if member.join_cb is not None:
            cb, member.join_cb = member.join_cb, None
            deliver(cb, JoinResult(errors.UNKNOWN_MEMBER_ID, ""))
        if member.sync_cb is not None:
            cb, member.sync_cb = member.sync_cb, None
            deliver(cb, SyncResult(errors.UNKNOWN_MEMBER_ID))
        group.members.pop(member.member_id, None)
        if member.instance_id is not None and group.static_members.get(member.instance_id) == member.member_id:
            del group.static_members[member.instance_id]
        group.pending_sync.discard(member.member_id)
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _remove_member_and_update(self, group, member, reason) -> None:
        self._remove_member(group, member)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self.prepare_rebalance(group, f"member {member.member_id} left: {reason}")
            self._try_complete_join(group)
        elif group.state == PREPARING_REBALANCE:
            self._try_complete_join(group)

    # -- SyncGroup ------------------------------------------------------------------------
    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: list[tuple[str, bytes]],
        cb: Callable[[SyncResult], None],
    ) -> None:
        group = self.store.groups.get(group_id)
        if group is None or group.kind != "classic":
            return cb(SyncResult(errors.UNKNOWN_MEMBER_ID))
        if group.state == DEAD:
            return cb(SyncResult(errors.COORDINATOR_NOT_AVAILABLE))
        err = self.validate_member(group, member_id, instance_id)
        if err:
            return cb(SyncResult(err))
        if generation_id != group.generation_id:
            return cb(SyncResult(errors.ILLEGAL_GENERATION))
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return cb(SyncResult(errors.INCONSISTENT_GROUP_PROTOCOL))
        member = group.members[member_id]
        if group.state == EMPTY:
            return cb(SyncResult(errors.UNKNOWN_MEMBER_ID))
        if group.state == PREPARING_REBALANCE:
            return cb(SyncResult(errors.REBALANCE_IN_PROGRESS))
        group.pending_sync.discard(member_id)
        self.schedule_heartbeat(group, member)
        if group.state == STABLE:
            return cb(SyncResult(0, member.assignment, group.protocol_type, group.protocol_name))
        # CompletingRebalance
        if member.sync_cb is not None and member.sync_cb is not cb:
            deliver(member.sync_cb, SyncResult(errors.REBALANCE_IN_PROGRESS))
        member.sync_cb = cb
        if group.leader_id == member_id:
            given = {mid: bytes(a) for mid, a in assignments}
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            self._move(group, STABLE, GroupEvent.ASSIGNED)
            self.store.persist(group)
            for m in group.members.values():
                if m.sync_cb is not None:
                    scb, m.sync_cb = m.sync_cb, None
                    deliver(scb, SyncResult(0, m.assignment, group.protocol_type, group.protocol_name))
            if not group.pending_sync and group.sync_timer is not None:
                group.sync_timer.cancel()
                group.sync_timer = None

    # -- Heartbeat ----------------------------------------------------------------------------
    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> int:
        group = self.store.groups.get(group_id)
        if group is None or group.kind != "classic":
            return errors.UNKNOWN_MEMBER_ID
        if group.state == DEAD:
            return errors.COORDINATOR_NOT_AVAILABLE
        err = self.validate_member(group, member_id, instance_id)
        if err:
            return err
        if group.state == EMPTY:
            return errors.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return errors.ILLEGAL_GENERATION
        member = group.members[member_id]
        self.schedule_heartbeat(group, member)
        if group.state == PREPARING_REBALANCE:
            return errors.REBALANCE_IN_PROGRESS
        return 0

    # -- LeaveGroup ----------------------------------------------------------------------------
    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """(top-level error, per-member errors) for [(member_id, group_instance_id)].

        As Kafka answers: a group this coordinator does not know has no top-level error, each member
        UNKNOWN_MEMBER_ID."""
        group = self.store.groups.get(group_id)
        if group is None or group.kind != "classic":
            return 0, [errors.UNKNOWN_MEMBER_ID] * len(members)
        if group.state == DEAD:
            return errors.COORDINATOR_NOT_AVAILABLE, [errors.COORDINATOR_NOT_AVAILABLE] * len(members)
        results = []
        for member_id, instance_id in members:
            if not member_id and instance_id is not None:
                found = group.static_members.get(instance_id)
                if found is None:
                    results.append(errors.UNKNOWN_MEMBER_ID)
                    continue
                member_id = found
            elif instance_id is not None and group.static_members.get(instance_id) not in (None, member_id):
                results.append(errors.FENCED_INSTANCE_ID)
                continue
            if member_id in group.pending_members:
                group.pending_members.pop(member_id).cancel()
                results.append(0)
                if group.state == PREPARING_REBALANCE:
                    self._try_complete_join(group)
                continue
            member = group.members.get(member_id)
            if member is None:
                results.append(errors.UNKNOWN_MEMBER_ID)
                continue
            log.info("group %s: member %s left", group.group_id, member_id)
            self._remove_member_and_update(group, member, "LeaveGroup")
            results.append(0)
        return 0, results
