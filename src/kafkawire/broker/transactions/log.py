"""Durable transaction state: the internal topic ``__transaction_state``, in Kafka's record format.

Each change of a transactional id's metadata is appended as one record whose key is a big-endian int16
version (0) followed by ``TransactionLogKey`` v0, and whose value is an int16 version followed by
``TransactionLogValue`` at that version (kafkawire writes v1, which carries the previous/next producer id
and epoch and the client's transaction version as tagged fields, as Kafka 4.x does for TV2 clients; it
reads v0 too). A null value (tombstone) means the id expired. On start the coordinator replays the
partition from its log start, the last record per key winning, as Kafka's ``TransactionStateManager``
loads its partitions.

The log is compacted by rewriting, as kafkawire does ``__consumer_offsets`` (``groups/persistence.py``):
once it holds ``compact_after_records`` more records than live ids, a snapshot of the live records is
appended and the log start moved past everything before it; a crash in between replays to the same state.
"""

from __future__ import annotations

import logging
import struct

from kafkawire.protocol import message_class
from kafkawire.protocol.records import build_batch, iter_batches

from ..storage import base as sb
from .metadata import TxnMetadata
from .states import TxnState

log = logging.getLogger("kafkawire.transactions")

TOPIC = "__transaction_state"
# Kafka's transaction.state.log.* defaults for the topic's own configs. One partition where Kafka has 50
# (transaction.state.log.num.partitions): as with __consumer_offsets, a single node gains nothing from
# spreading transactional ids over partitions, and each costs files and replay at start.
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


class TxnLog:
    """Appends and replays transaction metadata records in partition 0 of ``__transaction_state``."""

    def __init__(
        self, storage: sb.Storage, *, fsync: bool = True, compact_after_records: int = 50000, leader_epochs=None
    ):
        self.storage = storage
        # the broker's LeaderEpochs: batches carry the partition's current leader epoch, as Kafka's leader stamps
        # every batch it appends (None: no broker around them, the batches carry -1)
        self.leader_epochs = leader_epochs
        self.fsync = fsync
        self.compact_after_records = compact_after_records
        self.records_written = 0  # since the last load or compaction
        self._log = None

    def _partition(self):
        if self._log is None:
            try:
                if TOPIC not in self.storage.topics():
                    try:
                        self.storage.create_topic(TOPIC, 1, dict(TOPIC_CONFIGS))
                    except sb.TopicExistsError:
                        pass
                    except sb.InvalidConfigError:  # an engine without these settings
                        self.storage.create_topic(TOPIC, 1, {})
                self._log = self.storage.partition(TOPIC, 0)
            except (OSError, sb.StorageError) as exc:
                if isinstance(exc, sb.TopicExistsError):
                    raise
                raise TxnLogError(f"cannot open {TOPIC}: {exc}") from exc
        return self._log

    def exists(self) -> bool:
        return self._log is not None or TOPIC in self.storage.topics()

    def ensure_topic(self) -> None:
        """Create the topic if it is missing (Kafka does at the first FindCoordinator for a transaction)."""
        self._partition()

    def replay(self):
        """Yield (transactional id, TxnMetadata or None for a tombstone), in log order."""
        self.records_written = 0
        if TOPIC not in self.storage.topics():
            return
        plog = self._partition()
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
                        yield tid, None if rec.value is None else decode_value(tid, bytes(rec.value))
                    except Exception as exc:  # one bad record costs that record only
                        log.warning("skipping unreadable %s record at offset %d: %s", TOPIC, rec.offset, exc)
            if not progressed:
                break

    def append(self, records: list[tuple[bytes, bytes | None]]) -> None:
        if not records:
            return
        plog = self._partition()
        epochs, epoch = self.leader_epochs, -1
        if epochs is not None:
            epoch = epochs.current(TOPIC, 0)
            epochs.cache(TOPIC, 0, plog)  # the epoch history names the epoch before a batch of it is kept
        try:
            plog.append(build_batch(records, partition_leader_epoch=epoch), durable=self.fsync)
            if epochs is not None:
                epochs.save(TOPIC, 0, plog)
        except OSError as exc:
            raise TxnLogError(f"appending to {TOPIC} failed: {exc}") from exc
        except sb.StorageError as exc:
            if getattr(exc, "log_dir_failure", False) or isinstance(exc.__cause__, OSError):
                raise TxnLogError(f"appending to {TOPIC} failed: {exc}") from exc
            raise
        self.records_written += len(records)

    def compaction_due(self, live: int) -> bool:
        """Whether the log holds enough records beyond the ``live`` ids to be rewritten (cheap: per change)."""
        threshold = self.compact_after_records
        return self.records_written >= threshold and self.records_written > live + threshold // 2

    def compact(self, live: list[TxnMetadata]) -> None:
        """Append a snapshot of the live ids and drop everything before it."""
        plog = self._partition()
        start = plog.log_end_offset
        records = [(encode_key(t.transactional_id), encode_value(t)) for t in live]
        for i in range(0, len(records), 1000):
            self.append(records[i : i + 1000])
        plog.delete_records_before(start)
        self.records_written = len(records)
        log.info("compacted %s: %d live transactional ids from offset %d", TOPIC, len(records), start)
