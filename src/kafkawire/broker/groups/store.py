"""The group table: every group of the coordinator by id, their committed offsets, and writing both to
``__consumer_offsets`` (``persistence.GroupLog``), compacting it as it grows.

The coordinator's parts (classic protocol, consumer protocol, conversions)
receive this object and change groups only through it or their own state
functions (``states.py``); only the coordinator replays it (``load``).
"""

from __future__ import annotations

import logging
import time

from .config import GroupConfig
from .offsets import OffsetStore
from .persistence import (
    GroupLog,
    consumer_member_tombstones,
    group_records,
    group_tombstones,
    offset_key,
    offset_value,
)

log = logging.getLogger("kafkawire.groups")


class GroupStore:
    def __init__(self, log: GroupLog | None, config: GroupConfig):
        self.groups: dict = {}
        self.offsets = OffsetStore()
        self.log = log  # None: nothing is written (no storage, or __consumer_offsets was deleted)
        self.config = config  # read at each write: compact_after_records may change (tests)
        # offsets staged by ongoing transactions (TxnOffsetCommit): producer id -> group -> (topic, partition)
        # -> entry; they become committed offsets when the transaction commits, and vanish when it aborts
        self.txn_offsets: dict[int, dict[str, dict[tuple[str, int], object]]] = {}
        self._txn_pending: dict[tuple[str, str, int], int] = {}  # (group, topic, partition) -> producers staging
        # consumer group id -> the member ids whose records are in the log (a member gone gets tombstones)
        self.written_members: dict[str, set[str]] = {}

    def stage_txn_offset(self, producer_id: int, group: str, topic: str, partition: int, entry) -> None:
        staged = self.txn_offsets.setdefault(producer_id, {}).setdefault(group, {})
        if (topic, partition) not in staged:
            key = (group, topic, partition)
            self._txn_pending[key] = self._txn_pending.get(key, 0) + 1
        staged[(topic, partition)] = entry

    def take_txn_offsets(self, producer_id: int) -> dict[str, dict[tuple[str, int], object]]:
        """The producer's staged offsets, no longer pending."""
        staged = self.txn_offsets.pop(producer_id, {})
        for group, parts in staged.items():
            for topic, partition in parts:
                key = (group, topic, partition)
                left = self._txn_pending[key] - 1
                if left:
                    self._txn_pending[key] = left
                else:
                    del self._txn_pending[key]
        return staged

    def take_txn_offset(self, producer_id: int, group: str, topic: str, partition: int) -> None:
        """Forget one staged offset (replay of its deletion)."""
        parts = self.txn_offsets.get(producer_id, {}).get(group, {})
        if parts.pop((topic, partition), None) is None:
            return
        key = (group, topic, partition)
        left = self._txn_pending[key] - 1
        if left:
            self._txn_pending[key] = left
        else:
            del self._txn_pending[key]
        if not parts:
            del self.txn_offsets[producer_id][group]
            if not self.txn_offsets[producer_id]:
                del self.txn_offsets[producer_id]

    def txn_offset_pending(self, group: str, topic: str, partition: int) -> bool:
        return (group, topic, partition) in self._txn_pending

    def write(self, group_id: str, records) -> None:
        """Append one group's records to its partition of ``__consumer_offsets``."""
        if self.log is None or not records:
            return
        self.log.append(group_id, records)
        self.maybe_compact()

    def write_staged(self, producer_id: int, producer_epoch: int, group_id: str, records) -> None:
        """Append a transaction's offsets (TxnOffsetCommit) as the producer's transactional batch."""
        if self.log is None or not records:
            return
        self.log.append(group_id, records, producer_id=producer_id, producer_epoch=producer_epoch)

    def persist(self, group) -> None:
        gid = group.group_id
        records = group_records(group, self.config.rack)
        if group.kind == "consumer":
            members = set(group.members) | set(group.target)
            gone = self.written_members.get(gid, set()) - members
            records = [t for mid in sorted(gone) for t in consumer_member_tombstones(gid, mid)] + records
            self.written_members[gid] = members
        elif gid in self.written_members:  # it was a consumer group: its records go
            records = self.tombstones(gid) + records
        self.write(gid, records)

    def tombstones(self, gid: str) -> list:
        """Tombstones for every record of the group's metadata (either kind)."""
        return group_tombstones(gid, sorted(self.written_members.pop(gid, ())))

    def drop(self, group) -> None:
        """Forget a group's membership state (its offsets stay)."""
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        self.write(group.group_id, self.tombstones(group.group_id))

    def delete_offsets(self, gid: str) -> None:
        self.write(gid, [(offset_key(gid, t, p), None) for t, p in self.offsets.delete_group(gid)])

    def live_records(self) -> list[tuple[str, bytes, bytes | None]]:
        """(group id, key, value) of every committed offset and group with state worth keeping."""
        out = [
            (g, offset_key(g, t, p), offset_value(e.offset, e.leader_epoch, e.metadata, e.commit_timestamp))
            for g, t, p, e in self.offsets.items()
        ]
        for gid, group in self.groups.items():
            if group.kind == "consumer" or group.members or group.generation_id:
                out += [(gid, key, value) for key, value in group_records(group, self.config.rack)]
        return out

    def maybe_compact(self) -> None:
        if self.log is None:
            return
        threshold = self.config.compact_after_records
        if self.log.records_written < threshold:
            return
        live = self.live_records()
        if self.log.records_written > len(live) + threshold // 2:
            self.log.compact(live)

    def migrate_legacy(self) -> None:
        """The last replay met kafkawire's JSON layout: write the live state in Kafka's records once and move
        the log start past the JSON. Offsets staged by a transaction still open are carried over as Kafka holds
        pending transactional offsets: each producer's as its transactional batch in the group's partition,
        which the transaction's COMMIT or ABORT marker resolves there as for any TxnOffsetCommit. They are
        written before the compaction, so it keeps the log from the first of them (an open transaction), and
        a crash in between replays the JSON and the batch to the same pending offsets. The old layout kept no
        producer epoch with them: the batches carry none (-1); markers are matched by producer id."""
        if self.log is None or not self.log.legacy_records:
            return
        legacy = self.log.legacy_records
        now = int(time.time() * 1000)
        carried = 0
        for producer_id, groups in sorted(self.txn_offsets.items()):
            for group_id, parts in sorted(groups.items()):
                records = [
                    (offset_key(group_id, t, p), offset_value(e.offset, e.leader_epoch, e.metadata or "", now))
                    for (t, p), e in sorted(parts.items())
                ]
                self.log.append(group_id, records, producer_id=producer_id, producer_epoch=-1)
                carried += len(records)
        if carried:
            log.info("carried %d offsets of open transactions over from kafkawire JSON records", carried)
        self.log.compact(self.live_records(), reason=f"rewrote {legacy} kafkawire JSON records of")
