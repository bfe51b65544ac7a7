"""The group coordinator: every group of this node, their committed offsets and their durable log.

``GroupCoordinator`` is a plain object driven by method calls and ``Scheduler``
timers (no sockets): the broker's handlers (``broker/handlers/groups.py``)
translate requests into calls and results into responses; tests drive it
directly with a ``FakeScheduler``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from kafkawire.protocol import errors

from .classic import EMPTY, STABLE, ClassicGroup, ClassicMember, ClassicOps, JoinResult, SyncResult
from .config import GroupConfig
from .consumer import ConsumerGroup, ConsumerOps
from .mixed import MixedOps
from .offsets import OffsetEntry, OffsetStore
from .persistence import TOPIC, GroupLog, GroupLogError, encode_value, group_key, offset_key, offset_value

log = logging.getLogger("kafkawire.groups")


@dataclass
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


class GroupCoordinator(ClassicOps, ConsumerOps, MixedOps):
    def __init__(self, storage, config: GroupConfig | None = None, scheduler=None):
        from .timers import FakeScheduler

        self.storage = storage
        self.config = config or GroupConfig()
        self.scheduler = scheduler or FakeScheduler()
        self.groups: dict = {}
        self.offsets = OffsetStore()
        self.log = GroupLog(storage, partitions=self.config.offsets_topic_partitions,
                            fsync=self.config.offsets_fsync) if storage is not None else None
        # set by the transaction coordinator: fn(group, topic, partition) -> True while a transaction holds
        # uncommitted offsets for it (OffsetFetch with require_stable then answers UNSTABLE_OFFSET_COMMIT)
        self.pending_txn_offsets = None
        self.unloaded = False  # True once __consumer_offsets was deleted under it (see unload)

    # -- topics -------------------------------------------------------------------------
    def topics(self) -> dict:
        if self.storage is None:
            return {}
        return self.storage.topics()

    def _partition_exists(self, topic: str, partition: int) -> bool:
        meta = self.topics().get(topic)
        return meta is not None and 0 <= partition < meta.partitions

    # -- durability -----------------------------------------------------------------------
    def start(self) -> None:
        """Replay ``__consumer_offsets`` and start expiring offsets (the broker calls it once, on its loop)."""
        self.load()
        self.start_housekeeping()

    def load(self) -> None:
        """Replay ``__consumer_offsets`` (call once, before serving)."""
        if self.log is None:
            return
        group_docs: dict[str, dict | None] = {}
        n = 0
        for key, value in self.log.replay():
            n += 1
            if not isinstance(key, list) or not key:
                continue
            if key[0] == "offset" and len(key) == 4:
                _, g, t, p = key
                if value is None:
                    self.offsets.delete(g, t, int(p))
                else:
                    self.offsets.put(g, t, int(p), OffsetEntry.from_json(value))
            elif key[0] == "group" and len(key) == 2:
                group_docs[key[1]] = value
        now = self.scheduler.now_ms()
        for gid, doc in group_docs.items():
            if doc is None:
                continue
            if doc.get("type") == "consumer":
                group = ConsumerGroup.from_json(gid, doc, now)
                self.groups[gid] = group
                for m in group.members.values():
                    self._consumer_session(group, m)
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
                group.state = STABLE if group.members else EMPTY
                if group.leader_id not in group.members:
                    group.leader_id = next(iter(group.members), None)
                self.groups[gid] = group
                for m in group.members.values():
                    self._schedule_heartbeat(group, m)
        for gid in self.offsets.groups():
            if gid not in self.groups:
                self.groups[gid] = ClassicGroup(gid, now)
        log.info("loaded %d groups and %d committed offsets from %d records of %s", len(self.groups),
                 self.offsets.count(), n, TOPIC)
        self._maybe_compact()

    def _write(self, records) -> None:
        if self.log is None or not records:
            return
        self.log.append(records)
        self._maybe_compact()

    def _live_records(self):
        out = [(offset_key(g, t, p), encode_value(e.to_json())) for g, t, p, e in self.offsets.items()]
        for gid, group in self.groups.items():
            if group.kind == "consumer" or group.members or group.generation_id:
                out.append((group_key(gid), encode_value(group.to_json())))
        return out

    def _maybe_compact(self) -> None:
        if self.log is None:
            return
        threshold = self.config.compact_after_records
        if self.log.records_written < threshold:
            return
        live = self._live_records()
        if self.log.records_written > len(live) + threshold // 2:
            self.log.compact(live)

    def persist_group(self, group) -> None:
        self._write([(group_key(group.group_id), encode_value(group.to_json()))])

    def _drop_group(self, group) -> None:
        """Forget a group's membership state (its offsets stay)."""
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        self._write([(group_key(group.group_id), None)])

    def _maybe_forget_group(self, group) -> None:
        pass  # empty groups stay listed (as Kafka's do until their offsets expire)

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
        records, expired = [], 0
        existing = self.topics() if self.storage is not None else None
        for gid, topic, partition, _ in list(self.offsets.items()):
            if existing is not None and topic not in existing:  # offsets of deleted topics
                self.offsets.delete(gid, topic, partition)
                records.append((offset_key(gid, topic, partition), None))
        for gid in self.offsets.groups():
            group = self.groups.get(gid)
            if group is not None and not group.is_empty():
                continue
            became_empty = group.state_timestamp if group is not None else 0
            for (topic, partition), entry in self.offsets.group(gid).items():
                if now - max(entry.commit_timestamp, became_empty) >= retention:
                    self.offsets.delete(gid, topic, partition)
                    records.append((offset_key(gid, topic, partition), None))
                    expired += 1
        for gid, group in list(self.groups.items()):
            if group.is_empty() and not self.offsets.has_group(gid) and \
                    now - group.state_timestamp >= retention:
                del self.groups[gid]
                records.append((group_key(gid), None))
        self._write(records)
        if expired:
            log.info("expired %d committed offsets", expired)
        return expired

    # -- the offsets topic ------------------------------------------------------------------------
    def ensure_offsets_topic(self) -> bool:
        """Create ``__consumer_offsets`` if missing (Kafka does on FindCoordinator for a group); False when
        it cannot be created (a failed disk)."""
        if self.log is None:
            return True
        try:
            self.log.ensure_topic()
        except GroupLogError as exc:
            log.warning("cannot create %s: %s", TOPIC, exc)
            return False
        return True

    def unload(self) -> None:
        """``__consumer_offsets`` was deleted: this coordinator stops (as Kafka unloads the partitions it loses).
        Requests waiting in a rebalance are answered NOT_COORDINATOR, its timers are cancelled and it writes
        nothing more; the broker starts a new coordinator from the (recreated) topic."""
        self.unloaded = True
        self.log = None
        for group in self.groups.values():
            timers = [getattr(group, "join_timer", None), getattr(group, "sync_timer", None),
                      *getattr(group, "pending_members", {}).values()]
            for m in group.members.values():
                timers += [getattr(m, "heartbeat_timer", None), getattr(m, "session_timer", None),
                           getattr(m, "revocation_timer", None)]
                join_cb, sync_cb = getattr(m, "join_cb", None), getattr(m, "sync_cb", None)
                if join_cb is not None:
                    m.join_cb = None
                    self._invoke(join_cb, JoinResult(errors.NOT_COORDINATOR, m.member_id))
                if sync_cb is not None:
                    m.sync_cb = None
                    self._invoke(sync_cb, SyncResult(errors.NOT_COORDINATOR))
            for timer in timers:
                if timer is not None:
                    timer.cancel()
        log.info("%s was deleted: %d groups and %d committed offsets unloaded", TOPIC, len(self.groups),
                 self.offsets.count())

    def connection_closed(self, conn) -> None:
        pass  # group membership outlives connections (sessions time out instead)

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
        if group.state == "Dead":
            return errors.COORDINATOR_NOT_AVAILABLE, group
        if generation < 0 and group.state == EMPTY:
            return 0, group
        if generation >= 0 or member_id or instance_id is not None:
            err = self._validate_member(group, member_id, instance_id)
            if err:
                return err, group
            if generation != group.generation_id:
                return errors.ILLEGAL_GENERATION, group
        elif group.state != EMPTY:
            return errors.UNKNOWN_MEMBER_ID, group
        if group.state == "CompletingRebalance":
            return errors.REBALANCE_IN_PROGRESS, group
        if group.state == STABLE and member_id in group.members:
            self._schedule_heartbeat(group, group.members[member_id])  # a commit counts as a heartbeat
        return 0, group

    def offset_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                      version: int, partitions: list[CommitPartition]) -> list[int]:
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
            records.append((offset_key(group_id, cp.topic, cp.partition),
                            offset_value(cp.offset, cp.leader_epoch, metadata, now)))
            out.append(0)
        try:
            self._write(records)
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
    def validate_txn_offset_commit(self, group_id: str, generation: int, member_id: str,
                                   instance_id: str | None) -> int:
        """The group/member/generation error TxnOffsetCommit v3+ returns (0 when the commit may be staged)."""
        group = self.groups.get(group_id)
        if group is None or generation < 0:
            return 0
        if group.kind == "consumer":
            member = group.members.get(member_id)
            if member is None:
                return errors.UNKNOWN_MEMBER_ID
            return errors.ILLEGAL_GENERATION if generation != member.member_epoch else 0
        err = self._validate_member(group, member_id, instance_id)
        if err:
            return err
        return errors.ILLEGAL_GENERATION if generation != group.generation_id else 0

    def commit_transactional_offsets(self, group_id: str, partitions: list[CommitPartition]) -> None:
        """Make offsets staged by a committed transaction visible (EndTxn COMMIT); no membership checks."""
        if group_id not in self.groups:
            self.groups[group_id] = ClassicGroup(group_id, self.scheduler.now_ms())
        now = self.scheduler.now_ms()
        records = []
        for cp in partitions:
            metadata = cp.metadata if cp.metadata is not None else ""
            self.offsets.put(group_id, cp.topic, cp.partition, OffsetEntry(cp.offset, cp.leader_epoch, metadata, now))
            records.append((offset_key(group_id, cp.topic, cp.partition),
                            offset_value(cp.offset, cp.leader_epoch, metadata, now)))
        self._write(records)

    # -- OffsetFetch --------------------------------------------------------------------------
    def offset_fetch(self, group_id: str, topics: list[tuple[str, list[int]]] | None, *,
                     member_id: str | None = None, member_epoch: int = -1, require_stable: bool = False):
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
        if group is None or getattr(group, "state", None) == "Dead":
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
        self._write(records)
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
            out.append((gid, g.protocol_type or "", state, g.type_name))
        return out

    def delete_groups(self, group_ids: list[str]) -> list[int]:
        out = []
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None:
                out.append(errors.GROUP_ID_NOT_FOUND if not self.offsets.has_group(gid) else 0)
                if self.offsets.has_group(gid):
                    self._delete_offsets(gid)
                continue
            if not group.is_empty():
                out.append(errors.NON_EMPTY_GROUP)
                continue
            if group.kind == "classic":
                group.state = "Dead"
                if group.join_timer is not None:
                    group.join_timer.cancel()
                for timer in group.pending_members.values():
                    timer.cancel()
            del self.groups[gid]
            self._delete_offsets(gid)
            self._write([(group_key(gid), None)])
            log.info("group %s deleted", gid)
            out.append(0)
        return out

    def _delete_offsets(self, gid: str) -> None:
        self._write([(offset_key(gid, t, p), None) for t, p in self.offsets.delete_group(gid)])
