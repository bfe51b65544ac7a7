"""Durable group state: the internal topic ``__consumer_offsets``, in Kafka's record format.

A group lives in one partition of the topic, ``Utils.abs(groupId.hashCode()) % partitions`` as Kafka
picks it (``partition_for``), the partition count being the topic's own once it exists
(``offsets.topic.num.partitions`` only sizes a new topic, as in Kafka). Each record's key is a
big-endian int16 record type followed by that type's key schema at version 0; its value is an int16
version followed by the value schema (the group coordinator's records in the generated spec):

- type 1, ``OffsetCommitKey``/``OffsetCommitValue`` (kafkawire writes value v3, Kafka's version for
  an offset without an expire timestamp): a committed offset; a null value deletes it;
- type 2, ``GroupMetadataKey``/``GroupMetadataValue`` (v3): a classic group's generation, protocol,
  leader and members; a null value deletes the group.

Transactional offset commits (TxnOffsetCommit) are written as Kafka's coordinator writes them: the
producer's ``OffsetCommit`` records in a transactional batch (its producer id and epoch), resolved by
the transaction marker the transaction coordinator appends to the same partition: a COMMIT makes them
committed offsets, an ABORT drops them. Replay resolves them per partition, as Kafka's loader does.

Consumer-protocol groups (KIP-848) are written as Kafka's ``ConsumerGroup*`` records (types 3 to 8, v0):
the group's epoch with the subscribed topics' metadata hash (``metadata_hash.py``), the subscribed topics'
metadata, the target assignment's epoch, and per member its
metadata, target assignment and current assignment (a member gone gets tombstones for its three; a group
deleted or changing kind, for all of them). A static member that left for a while is at epoch -2, as in
Kafka, with its own epoch kept in ``previousMemberEpoch``. Replay assembles a partition's records into each
group's last state (the last kind written wins). Share and streams groups' records are skipped.

Before this layout kafkawire wrote JSON records (keys ``["offset", group, topic, partition]``,
``["group", group]`` with a classic or consumer group's document, ``["txn-offset", pid, group, topic,
partition]``) to partition 0. Replay reads them too; ``GroupStore`` then rewrites the live state in
Kafka's records once (a log line says so) and moves the log start past the JSON.

The log is compacted by rewriting: when it holds ``compact_after_records`` records more than the live
state, the coordinator appends a snapshot of every live key and then moves each partition's log start
past everything before the snapshot (``delete_records_before``). A crash in between leaves a log that
still replays to the same state (the snapshot records only repeat values). Staged transactional offsets
are not part of the snapshot: a partition's start moves no further than its first open transaction. On
the segments engine the log cleaner (``storage/cleaner.py``) also compacts the topic (cleanup.policy=compact),
as Kafka's does.
"""

from __future__ import annotations

import base64
import json
import logging
import struct
import uuid

import msgspec

from kafkawire.protocol import message_class
from kafkawire.protocol.records import build_batch, iter_batches
from kafkawire.protocol.records.model import ControlRecordType

from ..storage import base as sb
from .metadata_hash import subscription_hash
from .offsets import OffsetEntry

log = logging.getLogger("kafkawire.groups")

TOPIC = "__consumer_offsets"
# The topic's own configs, as Kafka creates it (DescribeConfigs shows them as topic overrides). Compacted, so
# retention.ms does not apply: nothing is deleted by age.
TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"}

OFFSET_COMMIT = 1  # record types: the int16 that starts a key
GROUP_METADATA = 2
CONSUMER_GROUP = 3  # the consumer protocol's (KIP-848) records, all at version 0
CONSUMER_PARTITION_METADATA = 4
CONSUMER_MEMBER = 5
CONSUMER_TARGET = 6
CONSUMER_TARGET_MEMBER = 7
CONSUMER_CURRENT_ASSIGNMENT = 8
# Kafka's MemberState bytes (org.apache.kafka.coordinator.group.modern.MemberState)
MEMBER_STATES = {"stable": 0, "unrevoked_partitions": 1, "unreleased_partitions": 2}
LEAVE_STATIC_EPOCH = -2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3
READ_CHUNK = 4 * 1024 * 1024

_OffsetKey = message_class("OffsetCommitKey")
_OffsetValue = message_class("OffsetCommitValue")
_GroupKey = message_class("GroupMetadataKey")
_GroupValue = message_class("GroupMetadataValue")
_TYPE = struct.Struct(">h")
_CONSUMER = {
    t: (message_class(f"ConsumerGroup{n}Key"), message_class(f"ConsumerGroup{n}Value"))
    for t, n in (
        (CONSUMER_GROUP, "Metadata"),
        (CONSUMER_PARTITION_METADATA, "PartitionMetadata"),
        (CONSUMER_MEMBER, "MemberMetadata"),
        (CONSUMER_TARGET, "TargetAssignmentMetadata"),
        (CONSUMER_TARGET_MEMBER, "TargetAssignmentMember"),
        (CONSUMER_CURRENT_ASSIGNMENT, "CurrentMemberAssignment"),
    )
}
_MEMBER_RECORDS = (CONSUMER_MEMBER, CONSUMER_TARGET_MEMBER, CONSUMER_CURRENT_ASSIGNMENT)


class GroupLogError(sb.StorageError):
    """Group state could not be written (the disk failed: KAFKA_STORAGE_ERROR, which the coordinator
    answers as Kafka does, NOT_COORDINATOR); nothing of the change was acknowledged."""

    log_dir_failure = True


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    data = text.encode("utf-16-be")
    h = 0
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % partitions`` (``abs(MIN_VALUE)`` is 0 there)."""
    h = java_string_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % partitions


class InternalTopicPartitions:
    """An internal topic keyed as Kafka keys it (``__consumer_offsets`` by group id, ``__transaction_state`` by
    transactional id): its partition count is the topic's own once it exists, the configured one until then."""

    topic: str
    storage: sb.Storage
    configured_partitions: int
    _count: int | None

    @property
    def partitions(self) -> int:
        if self._count is None:
            meta = self.storage.topics().get(self.topic)
            if meta is None:
                return self.configured_partitions
            self._count = meta.partitions
        return self._count

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.partitions)


# -- records -------------------------------------------------------------------------------------------
def offset_key(group: str, topic: str, partition: int) -> bytes:
    return _TYPE.pack(OFFSET_COMMIT) + _OffsetKey(group=group, topic=topic, partition=int(partition)).encode(0)


def offset_value(offset: int, leader_epoch: int, metadata: str | None, commit_timestamp: int) -> bytes:
    value = _OffsetValue(
        offset=int(offset),
        leader_epoch=int(leader_epoch),
        metadata=metadata if metadata is not None else "",
        commit_timestamp=int(commit_timestamp),
    )
    return _TYPE.pack(OFFSET_VALUE_VERSION) + value.encode(OFFSET_VALUE_VERSION)


def group_key(group: str) -> bytes:
    return _TYPE.pack(GROUP_METADATA) + _GroupKey(group=group).encode(0)


def classic_group_value(group) -> bytes:
    """``GroupMetadataValue`` of a classic group: each member's subscription is its metadata for the group's
    chosen protocol, as Kafka stores it."""
    members = []
    for m in group.members.values():
        subscription = next((meta for name, meta in m.protocols if name == group.protocol_name), b"")
        members.append(
            _GroupValue.MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=subscription,
                assignment=m.assignment or b"",
            )
        )
    value = _GroupValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=group.protocol_name,
        leader=group.leader_id,
        current_state_timestamp=getattr(group, "state_timestamp", -1),
        members=members,
    )
    return _TYPE.pack(GROUP_VALUE_VERSION) + value.encode(GROUP_VALUE_VERSION)


def _ckey(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    key_class = _CONSUMER[record_type][0]
    fields = {"group_id": group_id} if member_id is None else {"group_id": group_id, "member_id": member_id}
    return _TYPE.pack(record_type) + key_class(**fields).encode(0)


def _cvalue(record_type: int, **fields) -> bytes:
    return _TYPE.pack(0) + _CONSUMER[record_type][1](**fields).encode(0)


def _topic_partitions(struct_class, tps) -> list:
    by_topic: dict = {}
    for topic_id, partition in tps:
        by_topic.setdefault(topic_id, []).append(partition)
    return [
        struct_class(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items(), key=lambda x: str(x[0]))
    ]


def consumer_member_records(group_id: str, member, target) -> list[tuple[bytes, bytes]]:
    """A consumer group member's three records: its metadata, its target assignment, its current assignment."""
    member_value = _CONSUMER[CONSUMER_MEMBER][1]
    classic = None
    if member.classic is not None:
        classic = member_value.ClassicMemberMetadata(
            session_timeout_ms=member.classic.session_timeout_ms,
            supported_protocols=[member_value.ClassicProtocol(name=n, metadata=m) for n, m in member.classic.protocols],
        )
    current = _CONSUMER[CONSUMER_CURRENT_ASSIGNMENT][1]
    target_value = _CONSUMER[CONSUMER_TARGET_MEMBER][1]
    # a static member gone for a while is at Kafka's epoch -2; its own epoch goes in previousMemberEpoch
    epoch, previous = member.member_epoch, member.previous_epoch
    if member.static_left:
        epoch, previous = LEAVE_STATIC_EPOCH, member.member_epoch
    mid = member.member_id
    return [
        (
            _ckey(CONSUMER_MEMBER, group_id, mid),
            _cvalue(
                CONSUMER_MEMBER,
                instance_id=member.instance_id,
                rack_id=member.rack_id,
                client_id=member.client_id or "",
                client_host=member.client_host or "",
                subscribed_topic_names=list(member.subscribed_names or ()),
                subscribed_topic_regex=member.subscribed_regex,
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                server_assignor=member.server_assignor,
                classic_member_metadata=classic,
            ),
        ),
        (
            _ckey(CONSUMER_TARGET_MEMBER, group_id, mid),
            _cvalue(CONSUMER_TARGET_MEMBER, topic_partitions=_topic_partitions(target_value.TopicPartition, target)),
        ),
        (
            _ckey(CONSUMER_CURRENT_ASSIGNMENT, group_id, mid),
            _cvalue(
                CONSUMER_CURRENT_ASSIGNMENT,
                member_epoch=epoch,
                previous_member_epoch=previous,
                state=MEMBER_STATES.get(str(member.state.value), 0),
                assigned_partitions=_topic_partitions(current.TopicPartitions, member.assigned),
                partitions_pending_revocation=_topic_partitions(current.TopicPartitions, member.pending_revocation),
            ),
        ),
    ]


def consumer_group_records(group, rack: str | None = None) -> list[tuple[bytes, bytes]]:
    """Kafka's records of a consumer-protocol group: every member's, the subscribed topics' metadata, the target
    assignment's epoch and the group's epoch (``rack``: this broker's, the one replica of every partition)."""
    gid = group.group_id
    out = []
    for mid, member in group.members.items():
        out += consumer_member_records(gid, member, group.target.get(mid, set()))
    partition_value = _CONSUMER[CONSUMER_PARTITION_METADATA][1]
    topics = [
        partition_value.TopicMetadata(
            topic_id=uuid.UUID(str(topic_id)), topic_name=name, num_partitions=int(count), partition_metadata=[]
        )
        for name, (topic_id, count) in sorted(group.subscription_metadata.items())
    ]
    out.append((_ckey(CONSUMER_PARTITION_METADATA, gid), _cvalue(CONSUMER_PARTITION_METADATA, topics=topics)))
    out.append(
        (
            _ckey(CONSUMER_TARGET, gid),
            _cvalue(
                CONSUMER_TARGET,
                assignment_epoch=group.assignment_epoch,
                assignment_timestamp=group.assignment_timestamp,
            ),
        )
    )
    # metadataHash: what Kafka 4.4 writes, so that Kafka loading the group sees unchanged topics as unchanged
    racks = None if rack is None else (lambda _topic, _partition: (rack,))
    metadata_hash = subscription_hash(group.subscription_metadata, racks)
    out.append(
        (_ckey(CONSUMER_GROUP, gid), _cvalue(CONSUMER_GROUP, epoch=group.group_epoch, metadata_hash=metadata_hash))
    )
    return out


def consumer_member_tombstones(group_id: str, member_id: str) -> list[tuple[bytes, None]]:
    return [(_ckey(t, group_id, member_id), None) for t in _MEMBER_RECORDS]


def group_records(group, rack: str | None = None) -> list[tuple[bytes, bytes | None]]:
    if group.kind == "classic":
        return [(group_key(group.group_id), classic_group_value(group))]
    return consumer_group_records(group, rack)


def group_tombstones(group_id: str, member_ids=()) -> list[tuple[bytes, None]]:
    """Every key a group's metadata may be under (a group can change kind): its consumer members' first, as
    Kafka deletes a consumer group."""
    out = [t for mid in member_ids for t in consumer_member_tombstones(group_id, mid)]
    out += [(_ckey(t, group_id), None) for t in (CONSUMER_PARTITION_METADATA, CONSUMER_TARGET, CONSUMER_GROUP)]
    return out + [(group_key(group_id), None)]


def classic_group_doc(value: bytes) -> dict:
    """A ``GroupMetadataValue`` as the document ``ClassicGroup`` is rebuilt from (``coordinator.load``)."""
    (version,) = _TYPE.unpack_from(value)
    v = _GroupValue.decode(memoryview(value)[2:], version)
    members = []
    for m in v.members or ():
        members.append(
            {
                "member_id": m.member_id,
                "instance_id": m.group_instance_id if version >= 3 else None,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "session_timeout_ms": m.session_timeout,
                "rebalance_timeout_ms": m.rebalance_timeout if version >= 1 else m.session_timeout,
                "protocols": [[v.protocol, base64.b64encode(m.subscription or b"").decode()]] if v.protocol else [],
                "assignment": base64.b64encode(m.assignment or b"").decode(),
            }
        )
    return {
        "type": "classic",
        "protocol_type": v.protocol_type or None,
        "generation": v.generation,
        "protocol": v.protocol,
        "leader": v.leader,
        "members": members,
    }


# -- replay -------------------------------------------------------------------------------------------
class OffsetRecord(msgspec.Struct, frozen=True):
    """A committed offset (entry None: deleted)."""

    group: str
    topic: str
    partition: int
    entry: OffsetEntry | None


class StagedOffset(msgspec.Struct, frozen=True):
    """An offset of a transaction still open at the end of its partition (TxnOffsetCommit)."""

    producer_id: int
    producer_epoch: int
    group: str
    topic: str
    partition: int
    entry: OffsetEntry


class GroupRecord(msgspec.Struct, frozen=True):
    """A group's metadata document (``ClassicGroup``/``ConsumerGroup`` JSON form; None: deleted)."""

    group: str
    doc: dict | None


class ConsumerPart(msgspec.Struct, frozen=True):
    """One of a consumer group's records (value None: a tombstone); replay assembles them per group."""

    record_type: int
    group: str
    member_id: str | None
    value: object


def _tps_json(items) -> list:
    return [[str(tp.topic_id), p] for tp in items or () for p in tp.partitions]


class _ConsumerRecords:
    """A consumer group's live records during replay: record type -> value, and per member the same."""

    def __init__(self):
        self.group: dict[int, object] = {}
        self.members: dict[str, dict[int, object]] = {}


def _consumer_group_doc(parts: _ConsumerRecords) -> dict | None:
    """The ``ConsumerGroup.to_json`` form of a consumer group's records, or None if its group record is gone."""
    meta = parts.group.get(CONSUMER_GROUP)
    if meta is None:
        return None
    target_meta = parts.group.get(CONSUMER_TARGET)
    partition_meta = parts.group.get(CONSUMER_PARTITION_METADATA)
    states = {b: name for name, b in MEMBER_STATES.items()}
    members, target = [], {}
    for mid, records in parts.members.items():
        if CONSUMER_TARGET_MEMBER in records:
            target[mid] = _tps_json(records[CONSUMER_TARGET_MEMBER].topic_partitions)
        md, cur = records.get(CONSUMER_MEMBER), records.get(CONSUMER_CURRENT_ASSIGNMENT)
        if md is None:
            continue
        epoch = cur.member_epoch if cur is not None else 0
        previous = cur.previous_member_epoch if cur is not None else -1
        static_left = epoch == LEAVE_STATIC_EPOCH
        if static_left:
            epoch = previous
        classic = md.classic_member_metadata
        members.append(
            {
                "member_id": mid,
                "instance_id": md.instance_id,
                "rack_id": md.rack_id,
                "client_id": md.client_id,
                "client_host": md.client_host,
                "rebalance_timeout_ms": md.rebalance_timeout_ms,
                "subscribed_names": list(md.subscribed_topic_names or ()),
                "subscribed_regex": md.subscribed_topic_regex,
                "server_assignor": md.server_assignor,
                "member_epoch": epoch,
                "previous_epoch": previous,
                "state": states.get(cur.state if cur is not None else 0, "stable"),
                "static_left": static_left,
                "classic": None
                if classic is None
                else {
                    "session_timeout_ms": classic.session_timeout_ms,
                    "protocols": [[p.name, base64.b64encode(p.metadata).decode()] for p in classic.supported_protocols],
                },
                "assigned": _tps_json(cur.assigned_partitions if cur is not None else ()),
                "pending_revocation": _tps_json(cur.partitions_pending_revocation if cur is not None else ()),
            }
        )
    return {
        "type": "consumer",
        "group_epoch": meta.epoch,
        "assignment_epoch": target_meta.assignment_epoch if target_meta is not None else 0,
        "assignment_timestamp": target_meta.assignment_timestamp if target_meta is not None else 0,
        "assignor": None,
        "subscription_metadata": {
            t.topic_name: [str(t.topic_id), t.num_partitions] for t in (partition_meta.topics if partition_meta else ())
        },
        "members": members,
        "target": target,
    }


def _decode_offset_value(value) -> OffsetEntry:
    (version,) = _TYPE.unpack_from(value)
    v = _OffsetValue.decode(memoryview(value)[2:], version)
    return OffsetEntry(v.offset, v.leader_epoch if version >= 3 else -1, v.metadata, v.commit_timestamp)


def _legacy_entry(value: dict) -> OffsetEntry:
    entry = OffsetEntry.from_json(value)
    # Kafka's OffsetCommitValue has no null metadata: the JSON layout's null is read as "", as it is written
    return (
        entry
        if entry.metadata is not None
        else OffsetEntry(entry.offset, entry.leader_epoch, "", entry.commit_timestamp)
    )


def _decode_legacy(key: bytes, value: bytes | None):
    """kafkawire's JSON records (before Kafka's layout, and consumer groups' documents still)."""
    k = json.loads(key)
    v = None if value is None else json.loads(value)
    if not isinstance(k, list) or not k:
        return None
    if k[0] == "offset" and len(k) == 4:
        return OffsetRecord(k[1], k[2], int(k[3]), None if v is None else _legacy_entry(v))
    if k[0] == "group" and len(k) == 2:
        return GroupRecord(k[1], v)
    if k[0] == "txn-offset" and len(k) == 5:
        pid, g, t, p = int(k[1]), k[2], k[3], int(k[4])
        return ("txn-offset", pid, g, t, p, None if v is None else _legacy_entry(v))
    return None


class GroupLog(InternalTopicPartitions):
    """Appends and replays coordinator records in ``__consumer_offsets``."""

    topic = TOPIC

    def __init__(self, storage: sb.Storage, *, partitions: int = 1, fsync: bool = False, leader_epochs=None):
        self.storage = storage
        self.fsync = fsync
        # the broker's LeaderEpochs: batches carry their partition's current leader epoch, as Kafka's leader
        # stamps every batch it appends (None: no broker around them, the batches carry -1)
        self.leader_epochs = leader_epochs
        self.configured_partitions = max(1, partitions)
        self.records_written = 0  # since the last load or compaction
        self.legacy_records = 0  # kafkawire JSON records of the old layout met by the last replay
        self._logs: dict[int, sb.PartitionLog] = {}
        self._count: int | None = None

    # -- the topic ---------------------------------------------------------------------------------------
    def _create(self) -> None:
        if TOPIC in self.storage.topics():
            return
        try:
            self.storage.create_topic(TOPIC, self.configured_partitions, dict(TOPIC_CONFIGS))
        except sb.TopicExistsError:
            pass
        except sb.InvalidConfigError:  # an engine without compaction settings
            self.storage.create_topic(TOPIC, self.configured_partitions, {})

    def _partition(self, index: int):
        plog = self._logs.get(index)
        if plog is not None:
            return plog
        try:
            self._create()
            plog = self._logs[index] = self.storage.partition(TOPIC, index)
        except OSError as exc:
            raise GroupLogError(f"cannot open {TOPIC}: {exc}") from exc
        except sb.StorageError as exc:
            if isinstance(exc, GroupLogError):
                raise
            raise GroupLogError(f"cannot open {TOPIC}-{index}: {exc}") from exc
        return plog

    def ensure_topic(self) -> None:
        """Create the topic now if it is missing (Kafka does on the first FindCoordinator for a group)."""
        self._partition(0)

    # -- replay --------------------------------------------------------------------------------------------
    def replay(self):
        """Yield ``OffsetRecord``, ``GroupRecord`` and ``StagedOffset`` for every partition from its log start,
        in log order within a partition; transactional offsets come out as ``OffsetRecord`` where their
        transaction committed, nothing where it aborted, ``StagedOffset`` where it is still open.

        The topic is not created here: a broker nobody asked about groups has none."""
        self.records_written = 0
        self.legacy_records = 0
        self._count = None
        if TOPIC not in self.storage.topics():
            return
        for index in range(self.partitions):
            yield from self._replay_partition(index)

    def _replay_partition(self, index: int):
        plog = self._partition(index)
        offset, end = plog.log_start_offset, plog.log_end_offset
        open_txns: dict[int, list[StagedOffset]] = {}  # producer id -> its offsets in this partition
        groups: dict[str, object] = {}  # group id -> its last metadata: a document, consumer records, None
        while offset < end:
            data = b"".join(bytes(c) for c in plog.read(offset, READ_CHUNK, min_one=True).chunks)
            progressed = False
            for batch in iter_batches(data) if data else ():
                if batch.last_offset < offset:
                    continue
                if batch.is_control:
                    offset, progressed = batch.last_offset + 1, True
                    staged = open_txns.pop(batch.producer_id, [])
                    if self._marker_type(batch) == ControlRecordType.COMMIT:
                        for s in staged:
                            yield OffsetRecord(s.group, s.topic, s.partition, s.entry)
                    continue
                for rec in batch.records():
                    if rec.offset < offset:
                        continue
                    offset, progressed = rec.offset + 1, True
                    self.records_written += 1
                    try:
                        item = self._decode(rec.key, rec.value)
                    except Exception as exc:  # one bad record costs that record only
                        log.warning("skipping unreadable %s-%d record at offset %d: %s", TOPIC, index, rec.offset, exc)
                        continue
                    if item is None:
                        continue
                    if batch.is_transactional and isinstance(item, OffsetRecord) and item.entry is not None:
                        open_txns.setdefault(batch.producer_id, []).append(
                            StagedOffset(
                                batch.producer_id,
                                batch.producer_epoch,
                                item.group,
                                item.topic,
                                item.partition,
                                item.entry,
                            )
                        )
                    elif isinstance(item, GroupRecord):  # a classic group's (or the old layout's document)
                        if item.doc is not None or not isinstance(groups.get(item.group), _ConsumerRecords):
                            groups[item.group] = item.doc
                    elif isinstance(item, ConsumerPart):
                        self._take_consumer_part(groups, item)
                    elif isinstance(item, tuple):  # the old layout's staged offsets, keyed by producer id
                        _, pid, g, t, p, entry = item
                        staged = [s for s in open_txns.get(pid, []) if (s.group, s.topic, s.partition) != (g, t, p)]
                        if entry is not None:
                            staged.append(StagedOffset(pid, -1, g, t, p, entry))
                        open_txns[pid] = staged
                    else:
                        yield item
            if not progressed:
                break
        for staged in open_txns.values():
            yield from staged
        for gid, state in groups.items():
            yield GroupRecord(gid, _consumer_group_doc(state) if isinstance(state, _ConsumerRecords) else state)

    @staticmethod
    def _take_consumer_part(groups: dict, part: ConsumerPart) -> None:
        state = groups.get(part.group)
        if not isinstance(state, _ConsumerRecords):
            if part.value is None:
                return  # a tombstone of a consumer group this partition does not hold (it changed kind)
            state = groups[part.group] = _ConsumerRecords()  # replaces a classic group's document
        if part.member_id is None:
            if part.value is None:
                state.group.pop(part.record_type, None)
            else:
                state.group[part.record_type] = part.value
            return
        records = state.members.setdefault(part.member_id, {})
        if part.value is None:
            records.pop(part.record_type, None)
            if not records:
                del state.members[part.member_id]
        else:
            records[part.record_type] = part.value

    @staticmethod
    def _marker_type(batch) -> int | None:
        for rec in batch.records():
            if rec.key is not None and len(rec.key) >= 4:
                return struct.unpack_from(">h", bytes(rec.key), 2)[0]
        return None

    def _decode(self, key, value):
        if key is None or len(key) < 2:
            return None
        key, value = bytes(key), None if value is None else bytes(value)
        if key[:1] == b"[":  # JSON: kafkawire's own layout
            self.legacy_records += 1
            return _decode_legacy(key, value)
        (record_type,) = _TYPE.unpack_from(key)
        if record_type in (0, OFFSET_COMMIT):  # 0: Kafka's legacy offset key, the same fields
            k = _OffsetKey.decode(memoryview(key)[2:], 0)
            return OffsetRecord(k.group, k.topic, k.partition, None if value is None else _decode_offset_value(value))
        if record_type == GROUP_METADATA:
            k = _GroupKey.decode(memoryview(key)[2:], 0)
            return GroupRecord(k.group, None if value is None else classic_group_doc(value))
        classes = _CONSUMER.get(record_type)
        if classes is not None:
            k = classes[0].decode(memoryview(key)[2:], 0)
            v = None
            if value is not None:
                (version,) = _TYPE.unpack_from(value)
                v = classes[1].decode(memoryview(value)[2:], version)
            return ConsumerPart(record_type, k.group_id, getattr(k, "member_id", None), v)
        return None  # share and streams groups' records: kafkawire has no such groups

    # -- writing -------------------------------------------------------------------------------------------
    def append(
        self,
        group_id: str,
        records: list[tuple[bytes, bytes | None]],
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> None:
        """Append the records of one group to its partition; with a producer id, as a transactional batch of
        that producer (TxnOffsetCommit), resolved later by the transaction's marker."""
        if not records:
            return
        self._append_to(self.partition_for(group_id), records, producer_id, producer_epoch)

    def _append_to(self, index: int, records, producer_id: int = -1, producer_epoch: int = -1) -> None:
        plog = self._partition(index)

        def batch(epoch: int) -> bytes:
            if producer_id >= 0:
                return build_batch(
                    records,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    transactional=True,
                    partition_leader_epoch=epoch,
                )
            return build_batch(records, partition_leader_epoch=epoch)

        try:
            if self.leader_epochs is not None:
                self.leader_epochs.append(TOPIC, index, plog, batch, durable=self.fsync)
            else:  # no broker's epochs (a coordinator on its own): the batch names no leader epoch
                plog.append(batch(-1), durable=self.fsync)
        except OSError as exc:
            raise GroupLogError(f"appending to {TOPIC}-{index} failed: {exc}") from exc
        except sb.StorageError as exc:
            if getattr(exc, "log_dir_failure", False) or isinstance(exc.__cause__, OSError):
                raise GroupLogError(f"appending to {TOPIC}-{index} failed: {exc}") from exc
            raise
        self.records_written += len(records)

    def compact(self, live: list[tuple[str, bytes, bytes | None]], *, reason: str = "compacted") -> None:
        """Append a snapshot of the live (group, key, value) records and drop everything before it, in each
        partition; a partition with an open transaction keeps its log from that transaction's first batch."""
        by_partition: dict[int, list] = {i: [] for i in range(self.partitions)}
        for group_id, key, value in live:
            by_partition[self.partition_for(group_id)].append((key, value))
        for index, records in by_partition.items():
            plog = self._partition(index)
            start = plog.log_end_offset
            for i in range(0, len(records), 1000):
                self._append_to(index, records[i : i + 1000])
            first_open = min(plog.open_transactions().values(), default=start)
            plog.delete_records_before(min(start, first_open))
        self.records_written = len(live)
        log.info("%s %s: %d live records in %d partitions", reason, TOPIC, len(live), len(by_partition))

    def flush(self) -> None:
        for plog in self._logs.values():
            plog.flush()
