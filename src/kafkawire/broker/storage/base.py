"""The one interface between the broker's protocol handlers and where records live.

Handlers speak only to ``Storage`` and ``PartitionLog``. The default engine
keeps log segments on local disk (``segments``); ``memory`` keeps everything
in RAM (tests, throw-away brokers). Another engine plugs in by implementing
these two classes, without touching a handler.

Contract every engine keeps:
- ``append`` takes validated v2 record batches (bytes the producer sent, CRC
  already checked), assigns offsets by rewriting each batch's base offset (the
  CRC does not cover it), and returns only once the batches are readable; with
  ``durable=True`` also only once they are on stable storage.
- Offsets are dense and monotonic; the log end offset is the last record's
  offset + 1. On a single node the high watermark equals the log end offset.
- ``read`` returns whole batches starting with the one that contains
  ``offset``; it returns at least one whole batch when ``min_one`` even if it
  is larger than ``max_bytes`` (so a consumer always makes progress), and never
  more than ``max_bytes`` otherwise.
- Transactions (``txn``): a transactional batch opens its producer's transaction
  in the partition, its COMMIT/ABORT marker (``Storage.append_txn_marker``)
  closes it; ``last_stable_offset`` stays at the first offset of the oldest open
  one; ``read_committed`` returns only batches below it, with the aborted
  transactions overlapping what it returns. Engines with files keep both across
  restarts, an open transaction staying open.
"""

from __future__ import annotations

import abc
import mmap
import os
import uuid
from collections.abc import Sequence
from typing import Any

import msgspec

from kafkawire.protocol import errors


class StorageError(Exception):
    """Base of storage errors. ``error_code`` is the Kafka error code a handler answers with, so the broker
    looks it up on the class instead of knowing every engine's exceptions. ``log_dir_failure`` marks an
    error the disk caused (the log directory goes offline for writes: KAFKA_STORAGE_ERROR)."""

    error_code: int = errors.UNKNOWN_SERVER_ERROR
    log_dir_failure: bool = False


class UnknownTopicError(StorageError):
    """No topic of that name or id, or no such partition of it."""

    error_code = errors.UNKNOWN_TOPIC_OR_PARTITION


class TopicExistsError(StorageError):
    """``create_topic`` of a name already taken (also the second of a name twice in one batch)."""

    error_code = errors.TOPIC_ALREADY_EXISTS


class InvalidTopicError(StorageError):
    """The name cannot be a topic (Kafka's legal characters are ASCII letters, digits, '.', '_', '-')."""

    error_code = errors.INVALID_TOPIC_EXCEPTION


class InvalidPartitionsError(StorageError):
    """A partition count outside [1, MAX_PARTITIONS], ``add_partitions`` to no more than the topic has, or a
    topic another request is changing."""

    error_code = errors.INVALID_PARTITIONS


class InvalidConfigError(StorageError):
    """A config value that does not parse or is out of range, or a topic id that cannot be one (the message
    says which and why)."""

    error_code = errors.INVALID_CONFIG


class CorruptBatchError(StorageError):
    """``append`` was given bytes that are not whole v2 record batches."""

    error_code = errors.CORRUPT_MESSAGE


class EngineUnavailableError(StorageError):
    """The configured engine cannot be opened (its module or a library it needs is missing). The broker
    refuses to start rather than serve from another engine: a durable broker that quietly became in-memory
    would acknowledge writes it then loses."""

    error_code = errors.KAFKA_STORAGE_ERROR


class OffsetOutOfRangeError(StorageError):
    error_code = errors.OFFSET_OUT_OF_RANGE

    def __init__(self, offset: int, log_start: int, log_end: int):
        self.offset, self.log_start, self.log_end = offset, log_start, log_end
        super().__init__(f"offset {offset} is outside [{log_start}, {log_end}]")


class TopicMeta(msgspec.Struct):
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = msgspec.field(default_factory=dict)  # only explicitly set ones; defaults live in config


class NewTopic(msgspec.Struct, frozen=True):
    """One topic of a ``Storage.create_topics`` batch."""

    name: str
    partitions: int
    configs: dict[str, str] | None = None
    topic_id: uuid.UUID | None = None


class AppendResult(msgspec.Struct, frozen=True):
    base_offset: int  # offset of the first appended record
    last_offset: int
    log_append_time: int  # ms, -1 unless the topic uses LogAppendTime
    log_start_offset: int


class FileRegion(msgspec.Struct, frozen=True, eq=False):
    """``length`` bytes at ``position`` of an open file: hand it to ``os.sendfile`` /
    ``loop.sock_sendfile`` instead of copying it through Python.

    ``file`` is the engine's open file object; holding the region keeps it open even if
    retention deletes the segment meanwhile (the data stays readable until released).
    """

    file: Any  # has fileno()
    position: int
    length: int
    #: the whole file mapped, when the engine keeps such a mapping: ``view`` slices it instead of mapping the
    #: range anew (a fresh mapping costs a page fault per page on every use)
    mapping: Any = None

    def fileno(self) -> int:
        return self.file.fileno()

    def __len__(self) -> int:
        return self.length

    def __bytes__(self) -> bytes:
        return self.tobytes()

    def view(self) -> memoryview:
        """The region mapped read-only, without copying (for a transport that buffers it until the socket
        takes it); the mapping lives as long as the view."""
        if self.length == 0:
            return memoryview(b"")
        if self.mapping is not None:
            return memoryview(self.mapping)[self.position : self.position + self.length]
        start = self.position - self.position % mmap.ALLOCATIONGRANULARITY
        mapped = mmap.mmap(self.fileno(), self.position + self.length - start, access=mmap.ACCESS_READ, offset=start)
        return memoryview(mapped)[self.position - start :]

    def tobytes(self) -> bytes:
        """Copy the region into memory."""
        parts, pos, end = [], self.position, self.position + self.length
        while pos < end:
            chunk = os.pread(self.fileno(), end - pos, pos)
            if not chunk:
                raise EOFError(f"file ends before {end} (read to {pos})")
            parts.append(chunk)
            pos += len(chunk)
        return b"".join(parts)


class ReadResult(msgspec.Struct):
    """Batches as a list of buffers (memoryviews or bytes) to write to a socket as they are."""

    chunks: list
    size: int
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
    #: ``read_committed`` only: the aborted transactions (``txn.AbortedTxn``) overlapping what was read, as
    #: Kafka collects them for a read_committed Fetch; None for plain reads
    aborted: list | None = None


class PartitionInfo(msgspec.Struct, frozen=True):
    topic: str
    partition: int
    log_start_offset: int
    log_end_offset: int
    size_bytes: int


class PartitionLog(abc.ABC):
    topic: str
    partition: int

    @property
    @abc.abstractmethod
    def log_start_offset(self) -> int: ...

    @property
    @abc.abstractmethod
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, or the high watermark when none is open
        (read_committed consumers read below it). Engines that track transactions override it."""
        return self.high_watermark

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction in this partition."""
        return {}

    def read_committed(self, offset: int, max_bytes: int, *, min_one: bool = True, regions: bool = False) -> ReadResult:
        """``read`` (``read_regions`` when ``regions``) of whole batches below the last stable offset only,
        with ``aborted`` set to the aborted transactions overlapping the range read (Kafka's
        ``collectAbortedTransactions``); past the last stable offset nothing, and an empty list. Engines
        that track no transactions read as usual: their last stable offset is the high watermark."""
        result = (
            self.read_regions(offset, max_bytes, min_one=min_one)
            if regions
            else self.read(offset, max_bytes, min_one=min_one)
        )
        result.aborted = []
        return result

    def producer_snapshot(self):
        """(offset, [snapshot.Entry]) of the newest producer snapshot at or below the log end that reads
        back whole, or None: the state of every producer as of that offset, so that rebuilding the
        idempotence state replays only the log after it. Engines without snapshot files: None."""
        return None

    def has_producer_snapshot(self, offset: int) -> bool:
        """Whether a producer snapshot at ``offset`` is on disk (not read)."""
        return False

    #: True when the engine opened this log after an unclean stop (its files may hold batches whose
    #: leader epoch no checkpoint names yet); engines without files never do
    started_unclean: bool = False

    def batch_epochs(self, from_offset: int) -> list[tuple[int, int]]:
        """(leader epoch, first offset) each time the batches' partitionLeaderEpoch rises, walking the batch
        headers from the batch holding ``from_offset`` to the log end (rebuilding an epoch history after a
        crash, as Kafka's recovery assigns epochs from the batches it reads). Engines without files: []."""
        return []

    def last_batch_epoch(self) -> int:
        """The partitionLeaderEpoch of the last batch in the log, -1 when it has none."""
        return -1

    @property
    @abc.abstractmethod
    def size_bytes(self) -> int: ...

    @abc.abstractmethod
    def append(
        self, batches: bytes | bytearray | memoryview, *, log_append_time: int | None = None, durable: bool = False
    ) -> AppendResult:
        """Append whole v2 batches; ``log_append_time`` (ms) rewrites their max timestamp and sets the
        LogAppendTime attribute (the engine recomputes the CRC in that case only)."""

    @abc.abstractmethod
    def read(self, offset: int, max_bytes: int, *, min_one: bool = True) -> ReadResult:
        """Raises OffsetOutOfRangeError outside [log_start_offset, log_end_offset]."""

    def read_regions(self, offset: int, max_bytes: int, *, min_one: bool = True) -> ReadResult:
        """Like ``read`` but chunks may also be ``FileRegion``s (for ``os.sendfile``).

        Engines without files return exactly what ``read`` returns.
        """
        return self.read(offset, max_bytes, min_one=min_one)

    @abc.abstractmethod
    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp_ms``, or None."""

    @abc.abstractmethod
    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp, or None when empty."""

    @abc.abstractmethod
    def delete_records_before(self, offset: int) -> int:
        """Move the log start offset forward to ``offset`` (DeleteRecords); returns the new log start."""

    @abc.abstractmethod
    def flush(self) -> None: ...


class Storage(abc.ABC):
    """Topics, partitions and broker-level state (cluster id) of one node."""

    #: Whether calls may block on I/O (files, a network): the broker then runs appends, flushes and retention
    #: in its storage threads, in order per partition, instead of on the event loop. An engine that only
    #: touches memory says False. True by default: assuming a new engine blocks is the safe mistake.
    blocking: bool = True

    #: Where an engine that writes producer snapshots gets every producer's state of a partition (the
    #: broker's ``ProducerStateManager``, set by the broker): ``snapshot_entries(topic, partition, log,
    #: offset)`` returns the entries as of ``offset``, or None when the snapshot on disk there is current.
    #: None: the engine writes only the open transactions it tracks itself.
    producer_state = None

    @property
    @abc.abstractmethod
    def cluster_id(self) -> str: ...

    @abc.abstractmethod
    def topics(self) -> dict[str, TopicMeta]: ...

    def topic(self, name: str) -> TopicMeta:
        meta = self.topics().get(name)
        if meta is None:
            raise UnknownTopicError(name)
        return meta

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMeta:
        for meta in self.topics().values():
            if meta.topic_id == topic_id:
                return meta
        raise UnknownTopicError(str(topic_id))

    @abc.abstractmethod
    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str] | None = None, topic_id: uuid.UUID | None = None
    ) -> TopicMeta: ...

    @abc.abstractmethod
    def delete_topic(self, name: str) -> None: ...

    @abc.abstractmethod
    def add_partitions(self, name: str, total: int) -> TopicMeta: ...

    def create_topics(self, new: Sequence[NewTopic]) -> list[TopicMeta | StorageError]:
        """Create several topics as one change: for each, in order, its ``TopicMeta`` or the
        ``StorageError`` that refused it (the others are still created). A name twice in the batch is
        refused the second time (``TopicExistsError``). Engines with files write their topic metadata
        once for the whole batch; a topic is visible (``topics()``, ``partition()``) only once all of
        its partitions are ready, and all topics of the batch become visible together."""
        out: list[TopicMeta | StorageError] = []
        for t in new:
            try:
                out.append(self.create_topic(t.name, t.partitions, t.configs, t.topic_id))
            except StorageError as exc:
                out.append(exc)
        return out

    def delete_topics(self, names: Sequence[str]) -> list[StorageError | None]:
        """Delete several topics as one change: for each, None or the ``StorageError`` that refused it."""
        out: list[StorageError | None] = []
        for name in names:
            try:
                self.delete_topic(name)
                out.append(None)
            except StorageError as exc:
                out.append(exc)
        return out

    def add_partitions_batch(self, totals: Sequence[tuple[str, int]]) -> list[TopicMeta | StorageError]:
        """Grow several topics as one change, each to its new total: its ``TopicMeta`` or the error."""
        out: list[TopicMeta | StorageError] = []
        for name, total in totals:
            try:
                out.append(self.add_partitions(name, total))
            except StorageError as exc:
                out.append(exc)
        return out

    @abc.abstractmethod
    def set_topic_configs(self, name: str, configs: dict[str, str | None]) -> TopicMeta:
        """Set (value) or remove (None) explicit topic configs; persisted."""

    @abc.abstractmethod
    def partition(self, topic: str, partition: int) -> PartitionLog:
        """UnknownTopicError if the topic or partition does not exist."""

    def append_txn_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        *,
        timestamp: int | None = None,
        leader_epoch: int = 0,
    ) -> int:
        """End producer ``producer_id``'s transaction in one partition (WriteTxnMarkers, done in-process):
        append a control batch as Kafka's leaders write it (transactional + control attributes, that
        producer's id and epoch, base sequence -1, one control record: key version 0 type ABORT 0 or
        COMMIT 1, value EndTxnMarker version 0 with ``coordinator_epoch``), durably (the coordinator
        reports the transaction complete only once its markers are written). Returns the marker's
        offset. ``timestamp`` defaults to now (ms), as Kafka stamps markers."""
        from kafkawire.protocol.records.control import build_end_txn_marker

        marker = build_end_txn_marker(
            commit,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            timestamp=timestamp,
            partition_leader_epoch=leader_epoch,
        )
        return self.partition(topic, partition).append(marker, durable=True).base_offset

    @abc.abstractmethod
    def enforce_retention(self, now_ms: int) -> int:
        """Apply retention.ms / retention.bytes; returns the number of segments deleted."""

    @abc.abstractmethod
    def flush(self) -> None: ...

    def flush_due(self, now_ms: int) -> int:
        """Flush partitions whose ``flush.ms`` / ``log.flush.interval.ms`` has elapsed; returns how
        many were flushed. The broker calls it on a timer; engines without files do nothing."""
        return 0

    @abc.abstractmethod
    def close(self) -> None: ...

    def partitions_info(self) -> list[PartitionInfo]:
        out = []
        for meta in self.topics().values():
            for p in range(meta.partitions):
                log = self.partition(meta.name, p)
                out.append(PartitionInfo(meta.name, p, log.log_start_offset, log.log_end_offset, log.size_bytes))
        return out
