"""Durable transaction state: the internal topic ``__transaction_state``, in Kafka's record format.

Each change of a transactional id's metadata is appended as one record whose key is a big-endian int16
version (0) followed by ``TransactionLogKey`` v0, and whose value is an int16 version followed by
``TransactionLogValue`` at that version (kafkawire writes v1, which carries the previous/next producer id
and epoch and the client's transaction version as tagged fields, as Kafka 4.x does for TV2 clients; it
reads v0 too). A null value (tombstone) means the id expired.

A transactional id lives in one partition of the topic, ``Utils.abs(transactionalId.hashCode()) %
partitions`` as Kafka's ``TransactionStateManager.partitionFor`` picks it (the group coordinator's
``partition_for``), the partition count being the topic's own once it exists
(``transaction.state.log.num.partitions`` only sizes a new topic, as in Kafka). Kafka looks for an id's state
in that partition only, so a directory the two brokers share must keep it there.

On start the coordinator replays every partition from its log start, the last record per key winning, as
Kafka's ``TransactionStateManager`` loads its partitions. An older kafkawire wrote every id to partition 0; on
a topic of more partitions such a record is a stray: it is still loaded (the newest record of an id wins,
by record timestamp, its own partition winning a tie), and an id whose newest state was a stray is written
to its own partition and tombstoned in the stray one (a log line says so), so that Kafka, which loads a
partition's records whatever their id, finds it where it looks and nowhere else.

The log is compacted by rewriting, as kafkawire does ``__consumer_offsets`` (``groups/persistence.py``):
once it holds ``compact_after_records`` more records than live ids, a snapshot of the live records is
appended and the log start moved past everything before it; a crash in between replays to the same state.
"""

from __future__ import annotations

import logging
import struct

from kafkawire.protocol import message_class
from kafkawire.protocol.records import build_batch, iter_batches

from ..groups.persistence import InternalTopicPartitions, partition_for
from ..storage import base as sb
from .metadata import TxnMetadata
from .states import TxnState

log = logging.getLogger("kafkawire.transactions")

TOPIC = "__transaction_state"
# Kafka's transaction.state.log.* defaults for the topic's own configs. A new topic gets one partition where
# Kafka creates 50 (transaction.state.log.num.partitions, kafkawire's default 1): as with __consumer_offsets,
# a single node gains nothing from spreading transactional ids over partitions, and each costs files and
# replay at start. A topic that exists keeps its count (Kafka's 50 on a directory Kafka made).
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "compression.type": "uncompressed",
    "segment.bytes": "104857600",
    "unclean.leader.election.enable": "false",
}
KEY_VERSION = 0
VALUE_VERSION = 1
READ_CHUNK = 4 * 1024 * 1024
_Key = message_class("TransactionLogKey")
_Value = message_class("TransactionLogValue")


class TxnLogError(sb.StorageError):
    """Transaction state could not be written (the disk failed); the change was not acknowledged."""

    log_dir_failure = True


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + _Key(transactional_id=transactional_id).encode(KEY_VERSION)


def encode_value(txn: TxnMetadata) -> bytes:
    value = _Value(
        producer_id=txn.producer_id,
        previous_producer_id=txn.last_producer_id,
        next_producer_id=txn.next_producer_id,
        producer_epoch=txn.producer_epoch,
        next_producer_epoch=-1,
        transaction_timeout_ms=txn.timeout_ms,
        transaction_status=txn.state.status,
        transaction_partitions=[
            _Value.PartitionsSchema(topic=t, partition_ids=ps) for t, ps in txn.sorted_partitions()
        ],
        transaction_last_update_timestamp_ms=txn.last_update_ms,
        transaction_start_timestamp_ms=txn.start_ms,
        client_transaction_version=txn.client_tv,
    )
    return struct.pack(">h", VALUE_VERSION) + value.encode(VALUE_VERSION)


def decode_key(data: bytes) -> str | None:
    """The transactional id of a key record, or None for a key of another kind."""
    (version,) = struct.unpack_from(">h", data)
    if version != KEY_VERSION:
        return None
    return _Key.decode(data[2:], KEY_VERSION).transactional_id


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    (version,) = struct.unpack_from(">h", data)
    v = _Value.decode(data[2:], version)
    txn = TxnMetadata(
        transactional_id,
        v.producer_id,
        v.producer_epoch,
        v.transaction_timeout_ms,
        TxnState.from_status(v.transaction_status),
    )
    if version >= 1:
        txn.last_producer_id, txn.next_producer_id = v.previous_producer_id, v.next_producer_id
        txn.client_tv = v.client_transaction_version
    txn.partitions = {(p.topic, i) for p in v.transaction_partitions or () for i in p.partition_ids}
    txn.start_ms, txn.last_update_ms = v.transaction_start_timestamp_ms, v.transaction_last_update_timestamp_ms
    return txn


class TxnLog(InternalTopicPartitions):
    """Appends and replays transaction metadata records, each id in its partition of ``__transaction_state``."""

    topic = TOPIC

    def __init__(
        self,
        storage: sb.Storage,
        *,
        fsync: bool = True,
        compact_after_records: int = 50000,
        leader_epochs=None,
        partitions: int = 1,
    ):
        self.storage = storage
        # the broker's LeaderEpochs: batches carry the partition's current leader epoch, as Kafka's leader stamps
        # every batch it appends (None: no broker around them, the batches carry -1)
        self.leader_epochs = leader_epochs
        self.fsync = fsync
        self.compact_after_records = compact_after_records
        self.configured_partitions = max(1, partitions)
        self.records_written = 0  # since the last load or compaction
        self.strays_moved = 0  # ids the last replay found outside their partition and wrote to it
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
        except sb.InvalidConfigError:  # an engine without these settings
            self.storage.create_topic(TOPIC, self.configured_partitions, {})

    def _partition(self, index: int):
        plog = self._logs.get(index)
        if plog is not None:
            return plog
        try:
            self._create()
            plog = self._logs[index] = self.storage.partition(TOPIC, index)
        except (OSError, sb.StorageError) as exc:
            if isinstance(exc, (sb.TopicExistsError, TxnLogError)):
                raise
            raise TxnLogError(f"cannot open {TOPIC}-{index}: {exc}") from exc
        return plog

    def exists(self) -> bool:
        return bool(self._logs) or TOPIC in self.storage.topics()

    def ensure_topic(self) -> None:
        """Create the topic if it is missing (Kafka does at the first FindCoordinator for a transaction)."""
        self._partition(0)

    # -- replay ------------------------------------------------------------------------------------------
    def _read(self, index: int):
        """Yield (record timestamp, transactional id, TxnMetadata or None) of one partition, in log order."""
        plog = self._partition(index)
        offset, end = plog.log_start_offset, plog.log_end_offset
        while offset < end:
            data = b"".join(bytes(c) for c in plog.read(offset, READ_CHUNK, min_one=True).chunks)
            progressed = False
            for batch in iter_batches(data) if data else ():
                if batch.is_control:
                    offset = batch.last_offset + 1
                    progressed = True
                    continue
                for rec in batch.records():
                    if rec.offset < offset:
                        continue
                    offset = rec.offset + 1
                    progressed = True
                    self.records_written += 1
                    try:
                        tid = decode_key(bytes(rec.key))
                        if tid is None:
                            continue
                        txn = None if rec.value is None else decode_value(tid, bytes(rec.value))
                    except Exception as exc:  # one bad record costs that record only
                        log.warning("skipping unreadable %s-%d record at offset %d: %s", TOPIC, index, rec.offset, exc)
                        continue
                    yield rec.timestamp, tid, txn
            if not progressed:
                break

    def replay(self):
        """Yield (transactional id, TxnMetadata or None for a tombstone): each id's own partition in log order,
        after any newer state a stray record held (see the module's docstring)."""
        self.records_written = 0
        self.strays_moved = 0
        if TOPIC not in self.storage.topics():
            return
        count = self.partitions
        # per id: the newest stray (record timestamp, partition, metadata); a stray tombstone drops it
        strays: dict[str, tuple[int, int, TxnMetadata]] = {}
        newest_home: dict[str, int] = {}  # per id: the timestamp of its last record in its own partition
        for index in range(count):
            for ts, tid, txn in self._read(index):
                if partition_for(tid, count) == index:
                    newest_home[tid] = ts
                    yield tid, txn
                elif txn is None:
                    strays.pop(tid, None)
                else:
                    strays[tid] = (ts, index, txn)
        moved, tombstones = [], {}
        for tid, (ts, index, txn) in strays.items():
            tombstones.setdefault(index, []).append((encode_key(tid), None))
            if tid in newest_home and newest_home[tid] >= ts:
                continue  # its own partition has the newer state
            moved.append(txn)
            yield tid, txn
        if not strays:
            return
        log.warning(
            "%s: %d transactional ids had records outside their partition (written by an older kafkawire); "
            "%d of them newer than their own partition's, now written there",
            TOPIC,
            len(strays),
            len(moved),
        )
        # the newest state first, in its own partition, then the strays' tombstones: a crash in between
        # replays to the same state
        by_home: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for txn in moved:
            by_home.setdefault(self.partition_for(txn.transactional_id), []).append(
                (encode_key(txn.transactional_id), encode_value(txn))
            )
        try:
            for index, records in sorted(by_home.items()) + sorted(tombstones.items()):
                self.append(records, index)
        except TxnLogError as exc:  # loaded all the same; the next start moves them
            log.warning("cannot move the stray records of %s: %s", TOPIC, exc)
            return
        self.strays_moved = len(moved)

    # -- writes ------------------------------------------------------------------------------------------
    def append(self, records: list[tuple[bytes, bytes | None]], partition: int | None = None) -> None:
        """Append ``records`` to ``partition`` (by default: the first record's id's partition, the one all of
        them must share)."""
        if not records:
            return
        if partition is None:
            partition = self.partition_for(decode_key(records[0][0]))
        plog = self._partition(partition)

        def batch(epoch: int) -> bytes:
            return build_batch(records, partition_leader_epoch=epoch)

        try:
            if self.leader_epochs is not None:
                self.leader_epochs.append(TOPIC, partition, plog, batch, durable=self.fsync)
            else:  # no broker's epochs (a coordinator on its own): the batch names no leader epoch
                plog.append(batch(-1), durable=self.fsync)
        except OSError as exc:
            raise TxnLogError(f"appending to {TOPIC}-{partition} failed: {exc}") from exc
        except sb.StorageError as exc:
            if getattr(exc, "log_dir_failure", False) or isinstance(exc.__cause__, OSError):
                raise TxnLogError(f"appending to {TOPIC}-{partition} failed: {exc}") from exc
            raise
        self.records_written += len(records)

    def append_by_partition(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Append records of any ids, one batch per partition."""
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for rec in records:
            by_partition.setdefault(self.partition_for(decode_key(rec[0])), []).append(rec)
        for index, recs in sorted(by_partition.items()):
            self.append(recs, index)

    def compaction_due(self, live: int) -> bool:
        """Whether the log holds enough records beyond the ``live`` ids to be rewritten (cheap: per change)."""
        threshold = self.compact_after_records
        return self.records_written >= threshold and self.records_written > live + threshold // 2

    def compact(self, live: list[TxnMetadata]) -> None:
        """Append a snapshot of the live ids, each to its partition, and drop everything before it."""
        count = self.partitions
        starts = {index: self._partition(index).log_end_offset for index in range(count)}
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for t in live:
            by_partition.setdefault(self.partition_for(t.transactional_id), []).append(
                (encode_key(t.transactional_id), encode_value(t))
            )
        self.records_written = 0
        for index, records in sorted(by_partition.items()):
            for i in range(0, len(records), 1000):
                self.append(records[i : i + 1000], index)
        for index, start in starts.items():
            self._partition(index).delete_records_before(start)
        log.info("compacted %s: %d live transactional ids", TOPIC, len(live))
