"""The group coordinator: every group of this node, their committed offsets and their durable log.

``GroupCoordinator`` is a plain object driven by method calls and ``Scheduler``
timers (no sockets): the broker creates and starts it, its handlers
(``broker/handlers/groups.py``) translate requests into calls and results into
responses; tests drive it directly with a ``FakeScheduler``.

It is composed of parts, each given what it uses when constructed:

- ``GroupStore`` (store.py): the group table, committed offsets, ``__consumer_offsets``;
- ``ClassicProtocol`` (classic.py): rebalances of classic groups;
- ``Conversions`` (mixed.py): classic group <-> consumer group, by the migration policy;
- ``ConsumerProtocol`` (consumer.py): KIP-848 heartbeats, assignment, reconciliation;
- ``ClassicMembers`` (mixed.py): classic-protocol members of consumer groups.

The coordinator routes each classic-protocol request by the kind of its group,
and keeps offsets, listing, deletion, replay and unloading itself. States
change only through ``states.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec

from kafkawire.protocol import errors

from .classic import ClassicGroup, ClassicMember, ClassicProtocol, JoinRequest, JoinResult, SyncResult, deliver
from .config import GroupConfig
from .consumer import ConsumerGroup, ConsumerProtocol, HeartbeatResult
from .mixed import ClassicMembers, Conversions
from .offsets import OffsetEntry
from .persistence import (
    TOPIC,
    GroupLog,
    GroupLogError,
    GroupRecord,
    OffsetRecord,
    StagedOffset,
    offset_key,
    offset_value,
)
from .states import GroupEvent, GroupState, move_group, settle_consumer_group
from .store import GroupStore

log = logging.getLogger("kafkawire.groups")


class CommitPartition(msgspec.Struct):
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


class GroupCoordinator:
    def __init__(self, storage, config: GroupConfig | None = None, scheduler=None, leader_epochs=None):
        from .timers import FakeScheduler

        self.storage = storage
        self.config = config or GroupConfig()
        self.scheduler = scheduler or FakeScheduler()
        group_log = (
            GroupLog(
                storage,
                partitions=self.config.offsets_topic_partitions,
                fsync=self.config.offsets_fsync,
                leader_epochs=leader_epochs,
            )
            if storage is not None
            else None
        )
        self.store = GroupStore(group_log, self.config)
        self.groups = self.store.groups  # the same dict: group id -> ClassicGroup | ConsumerGroup
        self.offsets = self.store.offsets
        self.classic = ClassicProtocol(self.store, self.scheduler, self.config)
        self.conversions = Conversions(self.store, self.scheduler, self.config, self.classic, self.topics)
        self.consumer = ConsumerProtocol(self.store, self.scheduler, self.config, self.conversions, self.topics)
        self.classic_members = ClassicMembers(self.store, self.scheduler, self.config, self.consumer, self.topics)
        # fn(group, topic, partition) -> True while a transaction holds uncommitted offsets for it (OffsetFetch
        # with require_stable then answers UNSTABLE_OFFSET_COMMIT)
        self.pending_txn_offsets = self.store.txn_offset_pending
        self.unloaded = False  # True once __consumer_offsets was deleted under it (see unload)

    # -- topics -------------------------------------------------------------------------
    def topics(self) -> dict:
        if self.storage is None:
            return {}
        return self.storage.topics()

    # -- durability -----------------------------------------------------------------------
    def start(self) -> None:
        """Replay ``__consumer_offsets`` and start expiring offsets (the broker calls it once, on its loop)."""
        self.load()
        self.start_housekeeping()

    def load(self) -> None:
        """Replay ``__consumer_offsets`` (call once, before serving)."""
        if self.store.log is None:
            return
        group_docs: dict[str, dict | None] = {}
        n = 0
        for item in self.store.log.replay():
            n += 1
            if isinstance(item, OffsetRecord):
                if item.entry is None:
                    self.offsets.delete(item.group, item.topic, item.partition)
                else:
                    self.offsets.put(item.group, item.topic, item.partition, item.entry)
            elif isinstance(item, GroupRecord):
                group_docs[item.group] = item.doc
            elif isinstance(item, StagedOffset):
                e = item.entry
                self.store.stage_txn_offset(
                    item.producer_id,
                    item.group,
                    item.topic,
                    item.partition,
                    CommitPartition(item.topic, item.partition, e.offset, e.leader_epoch, e.metadata),
                )
        now = self.scheduler.now_ms()
        for gid, doc in group_docs.items():
            if doc is None:
                continue
            if doc.get("type") == "consumer":
                group = ConsumerGroup.from_json(gid, doc, now)
                self.store.written_members[gid] = set(group.members) | set(group.target)
                settle_consumer_group(group, GroupEvent.LOADED, now)
                self.groups[gid] = group
                for m in group.members.values():
                    self.consumer.schedule_session(group, m)
            else:
                group = ClassicGroup(gid, now)
                group.protocol_type = doc.get("protocol_type")
                group.generation_id = int(doc.get("generation", 0))
                group.protocol_name = doc.get("protocol")
                group.leader_id = doc.get("leader")
                for md in doc.get("members", []):
                    m = ClassicMember.from_json(md, group.protocol_type)
                    group.members[m.member_id] = m
                    if m.instance_id is not None:
                        group.static_members[m.instance_id] = m.member_id
                if group.members:  # a group with members was last written Stable; they rejoin or time out
                    move_group(group, GroupState.STABLE, GroupEvent.LOADED, now)
                if group.leader_id not in group.members:
                    group.leader_id = next(iter(group.members), None)
                self.groups[gid] = group
                for m in group.members.values():
                    self.classic.schedule_heartbeat(group, m)
        for gid in self.offsets.groups():
            if gid not in self.groups:
                self.groups[gid] = ClassicGroup(gid, now)
        self.store.migrate_legacy()
        log.info(
            "loaded %d groups and %d committed offsets from %d records of %s",
            len(self.groups),
            self.offsets.count(),
            n,
            TOPIC,
        )
        self.store.maybe_compact()

    # -- offsets retention ----------------------------------------------------------------------
    def start_housekeeping(self) -> None:
        """Expire old offsets every ``offsets.retention.check.interval.ms`` (call once, with a running clock)."""
        self.scheduler.call_later(self.config.offsets_retention_check_interval_ms, self._housekeeping_tick)

    def _housekeeping_tick(self) -> None:
        if self.unloaded:
            return
        try:
            self.expire_offsets()
        except Exception:  # pragma: no cover - never let a timer kill the coordinator
            log.exception("offset expiration failed")
        self.start_housekeeping()

    def expire_offsets(self) -> int:
        """Kafka's rule (KIP-211): the offsets of a group without members expire ``offsets.retention.minutes``
        after the later of their commit and the moment the group became empty; an empty group left with no
        offsets is then forgotten. Groups with members keep their offsets. Offsets of deleted topics go too."""
        now = self.scheduler.now_ms()
        retention = self.config.offsets_retention_minutes * 60_000
        records: dict[str, list] = {}
        expired = 0
        existing = self.topics() if self.storage is not None else None
        for gid, topic, partition, _ in list(self.offsets.items()):
            if existing is not None and topic not in existing:  # offsets of deleted topics
                self.offsets.delete(gid, topic, partition)
                records.setdefault(gid, []).append((offset_key(gid, topic, partition), None))
        for gid in self.offsets.groups():
            group = self.groups.get(gid)
            if group is not None and not group.is_empty():
                continue
            became_empty = group.state_timestamp if group is not None else 0
            for (topic, partition), entry in self.offsets.group(gid).items():
                if now - max(entry.commit_timestamp, became_empty) >= retention:
                    self.offsets.delete(gid, topic, partition)
                    records.setdefault(gid, []).append((offset_key(gid, topic, partition), None))
                    expired += 1
        for gid, group in list(self.groups.items()):
            if group.is_empty() and not self.offsets.has_group(gid) and now - group.state_timestamp >= retention:
                del self.groups[gid]
                records.setdefault(gid, []).extend(self.store.tombstones(gid))
        for gid, group_records in records.items():
            self.store.write(gid, group_records)
        if expired:
            log.info("expired %d committed offsets", expired)
        return expired

    # -- the offsets topic ------------------------------------------------------------------------
    def ensure_offsets_topic(self) -> bool:
        """Create ``__consumer_offsets`` if missing (Kafka does on FindCoordinator for a group); False when
        it cannot be created (a failed disk)."""
        if self.store.log is None:
            return True
        try:
            self.store.log.ensure_topic()
        except GroupLogError as exc:
            log.warning("cannot create %s: %s", TOPIC, exc)
            return False
        return True

    def unload(self) -> None:
        """``__consumer_offsets`` was deleted: this coordinator stops (as Kafka unloads the partitions it loses).
        Requests waiting in a rebalance are answered NOT_COORDINATOR, its timers are cancelled and it writes
        nothing more; the broker starts a new coordinator from the (recreated) topic."""
        self.unloaded = True
        self.store.log = None
        for group in self.groups.values():
            timers = [
                getattr(group, "join_timer", None),
                getattr(group, "sync_timer", None),
                *getattr(group, "pending_members", {}).values(),
            ]
            for m in group.members.values():
                timers += [
                    getattr(m, "heartbeat_timer", None),
                    getattr(m, "session_timer", None),
                    getattr(m, "revocation_timer", None),
                ]
                join_cb, sync_cb = getattr(m, "join_cb", None), getattr(m, "sync_cb", None)
                if join_cb is not None:
                    m.join_cb = None
                    deliver(join_cb, JoinResult(errors.NOT_COORDINATOR, m.member_id))
                if sync_cb is not None:
                    m.sync_cb = None
                    deliver(sync_cb, SyncResult(errors.NOT_COORDINATOR))
            for timer in timers:
                if timer is not None:
                    timer.cancel()
        log.info(
            "%s was deleted: %d groups and %d committed offsets unloaded", TOPIC, len(self.groups), self.offsets.count()
        )

    def connection_closed(self, conn) -> None:
        pass  # group membership outlives connections (sessions time out instead)

    # -- the classic protocol's requests, routed by the kind of group -------------------------------
    def join_group(self, join: JoinRequest, cb: Callable[[JoinResult], None]) -> None:
        """Answers through ``cb``, at once or when the rebalance completes."""
        if join.rebalance_timeout_ms is None or join.rebalance_timeout_ms < 0:
            join = msgspec.structs.replace(join, rebalance_timeout_ms=join.session_timeout_ms)
        if not join.group_id:
            return cb(JoinResult(errors.INVALID_GROUP_ID, join.member_id))
        cfg = self.config
        if not cfg.min_session_timeout_ms <= join.session_timeout_ms <= cfg.max_session_timeout_ms:
            return cb(JoinResult(errors.INVALID_SESSION_TIMEOUT, join.member_id))
        group = self.groups.get(join.group_id)
        if group is not None and group.kind != "classic":
            if not group.is_empty():
                return self.classic_members.join(group, join, cb)
            self.store.drop(group)  # an empty group of the other kind is simply replaced
        self.classic.join_group(join, cb)

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
        group = self.groups.get(group_id)
        if group is not None and group.kind == "consumer":
            return self.classic_members.sync(
                group, generation_id, member_id, instance_id, protocol_type, protocol_name, cb
            )
        self.classic.sync_group(
            group_id, generation_id, member_id, instance_id, protocol_type, protocol_name, assignments, cb
        )

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> int:
        if not group_id:
            return errors.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is not None and group.kind == "consumer":
            return self.classic_members.heartbeat(group, generation_id, member_id, instance_id)
        return self.classic.heartbeat(group_id, generation_id, member_id, instance_id)

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """(top-level error, per-member errors) for [(member_id, group_instance_id)]; the empty group id is
        INVALID_GROUP_ID with no member answers, as Kafka answers."""
        if not group_id:
            return errors.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is not None and group.kind == "consumer":
            return self.classic_members.leave(group, members)
        return self.classic.leave_group(group_id, members)

    # -- the consumer protocol -------------------------------------------------------------------
    def consumer_heartbeat(self, **request) -> HeartbeatResult:
        """ConsumerGroupHeartbeat (``ConsumerProtocol.consumer_heartbeat`` has the arguments)."""
        return self.consumer.consumer_heartbeat(**request)

    # -- OffsetCommit -------------------------------------------------------------------------
    def _commit_error(self, group_id, generation, member_id, instance_id, version) -> tuple[int, object]:
        group = self.groups.get(group_id)
        if group is None:
            if generation < 0:
                group = ClassicGroup(group_id, self.scheduler.now_ms())  # a "simple" group of manual commits
                self.groups[group_id] = group
                return 0, group
            return (errors.GROUP_ID_NOT_FOUND if version >= 9 else errors.ILLEGAL_GENERATION), None
        if group.kind == "consumer":
            if generation < 0 and not group.members:
                return 0, group
            member = group.members.get(member_id)
            if member is None:
                return errors.UNKNOWN_MEMBER_ID, group
            if member.classic is not None:
                # a classic member commits with its member epoch as the generation, at any version
                return (errors.ILLEGAL_GENERATION if generation != member.member_epoch else 0), group
            if version < 9:
                return errors.UNSUPPORTED_VERSION, group
            if generation > member.member_epoch:
                return errors.FENCED_MEMBER_EPOCH, group
            if generation < member.member_epoch:
                return errors.STALE_MEMBER_EPOCH, group
            return 0, group
        if group.state == GroupState.DEAD:
            return errors.COORDINATOR_NOT_AVAILABLE, group
        if generation < 0 and group.state == GroupState.EMPTY:
            return 0, group
        if generation >= 0 or member_id or instance_id is not None:
            err = self.classic.validate_member(group, member_id, instance_id)
            if err:
                return err, group
            if generation != group.generation_id:
                return errors.ILLEGAL_GENERATION, group
        elif group.state != GroupState.EMPTY:
            return errors.UNKNOWN_MEMBER_ID, group
        if group.state == GroupState.COMPLETING_REBALANCE:
            return errors.REBALANCE_IN_PROGRESS, group
        if group.state == GroupState.STABLE and member_id in group.members:
            self.classic.schedule_heartbeat(group, group.members[member_id])  # a commit counts as a heartbeat
        return 0, group

    def offset_commit(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        version: int,
        partitions: list[CommitPartition],
    ) -> list[int]:
        """Per-partition error codes, in the order given. The empty group id is a group like any other
        here (Kafka accepts commits to it, for old clients)."""
        err, group = self._commit_error(group_id, generation, member_id, instance_id, version)
        if err:
            return [err] * len(partitions)
        now = self.scheduler.now_ms()
        topics = self.topics()
        limit = self.config.offset_metadata_max_bytes
        out, records, previous = [], [], []
        for cp in partitions:
            meta = topics.get(cp.topic)
            if meta is None or not 0 <= cp.partition < meta.partitions:
                out.append(errors.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            metadata = cp.metadata if cp.metadata is not None else ""
            if len(metadata) * 4 > limit and len(metadata.encode("utf-8")) > limit:
                out.append(errors.OFFSET_METADATA_TOO_LARGE)
                continue
            previous.append((cp.topic, cp.partition, self.offsets.get(group_id, cp.topic, cp.partition)))
            self.offsets.put(group_id, cp.topic, cp.partition, OffsetEntry(cp.offset, cp.leader_epoch, metadata, now))
            records.append(
                (offset_key(group_id, cp.topic, cp.partition), offset_value(cp.offset, cp.leader_epoch, metadata, now))
            )
            out.append(0)
        try:
            self.store.write(group_id, records)
        except GroupLogError as exc:  # not written, so not committed: Kafka answers NOT_COORDINATOR
            log.warning("offset commit of group %s failed: %s", group_id, exc)
            for topic, partition, entry in reversed(previous):
                if entry is None:
                    self.offsets.delete(group_id, topic, partition)
                else:
                    self.offsets.put(group_id, topic, partition, entry)
            return [errors.NOT_COORDINATOR if code == 0 else code for code in out]
        return out

    # -- for the transaction coordinator (TxnOffsetCommit / EndTxn) ---------------------------------
    def validate_txn_offset_commit(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> int:
        """The group/member/generation error TxnOffsetCommit v3+ returns (0 when the commit may be staged)."""
        group = self.groups.get(group_id)
        if group is None or generation < 0:
            return 0
        if group.kind == "consumer":
            member = group.members.get(member_id)
            if member is None:
                return errors.UNKNOWN_MEMBER_ID
            return errors.ILLEGAL_GENERATION if generation != member.member_epoch else 0
        err = self.classic.validate_member(group, member_id, instance_id)
        if err:
            return err
        return errors.ILLEGAL_GENERATION if generation != group.generation_id else 0

    def commit_transactional_offsets(self, group_id: str, partitions: list[CommitPartition]) -> None:
        """Make offsets staged by a committed transaction visible (EndTxn COMMIT); no membership checks. Nothing
        is written: the transaction's COMMIT marker in the group's partition commits its staged records."""
        if group_id not in self.groups:
            self.groups[group_id] = ClassicGroup(group_id, self.scheduler.now_ms())
        now = self.scheduler.now_ms()
        for cp in partitions:
            metadata = cp.metadata if cp.metadata is not None else ""
            self.offsets.put(group_id, cp.topic, cp.partition, OffsetEntry(cp.offset, cp.leader_epoch, metadata, now))

    def stage_txn_offsets(
        self, producer_id: int, group_id: str, partitions: list[CommitPartition], producer_epoch: int = -1
    ) -> int:
        """TxnOffsetCommit: offsets held for the producer's transaction, invisible until it commits, and written
        to ``__consumer_offsets`` as the producer's transactional batch (its marker, written there by the
        transaction coordinator, commits or aborts them), so that a restart keeps them; 0, or NOT_COORDINATOR
        when they could not be written (nothing staged). A group that does not exist is created empty, as for
        a manual OffsetCommit."""
        staged = [
            CommitPartition(
                cp.topic, cp.partition, cp.offset, cp.leader_epoch, cp.metadata if cp.metadata is not None else ""
            )
            for cp in partitions
        ]
        now = self.scheduler.now_ms()
        try:
            self.store.write_staged(
                producer_id,
                producer_epoch,
                group_id,
                [
                    (
                        offset_key(group_id, cp.topic, cp.partition),
                        offset_value(cp.offset, cp.leader_epoch, cp.metadata, now),
                    )
                    for cp in staged
                ],
            )
        except GroupLogError as exc:
            log.warning("transactional offset commit of group %s failed: %s", group_id, exc)
            return errors.NOT_COORDINATOR
        if group_id not in self.groups:
            self.groups[group_id] = ClassicGroup(group_id, self.scheduler.now_ms())
        for cp in staged:
            self.store.stage_txn_offset(producer_id, group_id, cp.topic, cp.partition, cp)
        return 0

    def complete_transaction(self, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended (its markers are written, in ``__consumer_offsets`` too): its staged
        offsets become committed offsets (commit) or are dropped (abort)."""
        done = self.store.take_txn_offsets(producer_id)
        for group_id, staged in done.items():
            if commit:
                self.commit_transactional_offsets(group_id, list(staged.values()))

    # -- OffsetFetch --------------------------------------------------------------------------
    def offset_fetch(
        self,
        group_id: str,
        topics: list[tuple[str, list[int]]] | None,
        *,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
    ):
        """(group error, [(topic, [(partition, offset, leader_epoch, metadata, error)])])."""
        group = self.groups.get(group_id)
        if group is not None and group.kind == "consumer" and not (member_id is None and member_epoch < 0):
            member = group.members.get(member_id or "")
            if member is None:
                return errors.UNKNOWN_MEMBER_ID, []
            if member_epoch != member.member_epoch:
                return errors.STALE_MEMBER_EPOCH, []
        committed = self.offsets.group(group_id)
        pending = self.pending_txn_offsets
        out = []
        if topics is None:
            by_topic: dict[str, list] = {}
            existing = self.topics() if self.storage is not None else None
            for (t, p), e in committed.items():
                if existing is not None and t not in existing:
                    continue  # the topic was deleted: its offsets go with it (dropped by housekeeping)
                by_topic.setdefault(t, []).append((p, e.offset, e.leader_epoch, e.metadata, 0))
            return 0, sorted(by_topic.items())
        for topic, parts in topics:
            rows = []
            for p in parts:
                if require_stable and pending is not None and pending(group_id, topic, p):
                    rows.append((p, -1, -1, "", errors.UNSTABLE_OFFSET_COMMIT))
                    continue
                e = committed.get((topic, p))
                if e is None:
                    rows.append((p, -1, -1, "", 0))
                else:
                    rows.append((p, e.offset, e.leader_epoch, e.metadata, 0))
            out.append((topic, rows))
        return 0, out

    # -- OffsetDelete -------------------------------------------------------------------------
    def offset_delete(self, group_id: str, topics: list[tuple[str, list[int]]]):
        """(group error, [(topic, [(partition, error)])]).

        A classic group of the consumer protocol whose members' subscriptions cannot be read counts as
        subscribed to every topic (as Kafka: it cannot tell which offsets are in use)."""
        if not group_id:
            return errors.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            return errors.GROUP_ID_NOT_FOUND, []
        if group.kind == "classic":
            if group.members and group.protocol_type != "consumer":
                return errors.NON_EMPTY_GROUP, []
            subscribed = group.subscribed_topics() if group.members else set()
        else:
            subscribed = group.subscribed_topics(self.topics())
        out, records = [], []
        for topic, parts in topics:
            rows = []
            for p in parts:
                if subscribed is None or topic in subscribed:
                    rows.append((p, errors.GROUP_SUBSCRIBED_TO_TOPIC))
                    continue
                if self.offsets.delete(group_id, topic, p):
                    records.append((offset_key(group_id, topic, p), None))
                rows.append((p, 0))
            out.append((topic, rows))
        self.store.write(group_id, records)
        return 0, out

    # -- ListGroups / DescribeGroups / DeleteGroups ----------------------------------------------------
    def list_groups(self, states: list[str] | None = None, types: list[str] | None = None):
        """[(group_id, protocol_type, state, type)]."""
        states_l = {s.lower() for s in states} if states else None
        types_l = {t.lower() for t in types} if types else None
        out = []
        for gid, g in sorted(self.groups.items()):
            state = g.state
            if states_l is not None and state.lower() not in states_l:
                continue
            if types_l is not None and g.type_name not in types_l:
                continue
            out.append((gid, g.protocol_type or "", state.value, g.type_name))
        return out

    def delete_groups(self, group_ids: list[str]) -> list[int]:
        out = []
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None:
                out.append(errors.GROUP_ID_NOT_FOUND if not self.offsets.has_group(gid) else 0)
                if self.offsets.has_group(gid):
                    self.store.delete_offsets(gid)
                continue
            if not group.is_empty():
                out.append(errors.NON_EMPTY_GROUP)
                continue
            move_group(group, GroupState.DEAD, GroupEvent.DELETED, self.scheduler.now_ms())
            if group.kind == "classic":
                if group.join_timer is not None:
                    group.join_timer.cancel()
                for timer in group.pending_members.values():
                    timer.cancel()
            del self.groups[gid]
            self.store.delete_offsets(gid)
            self.store.write(gid, self.store.tombstones(gid))
            log.info("group %s deleted", gid)
            out.append(0)
        return out
