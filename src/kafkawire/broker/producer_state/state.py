"""Idempotent producers' state: producer ids and, per partition, each producer's epoch and last batches.

Per producer and partition the broker keeps the producer epoch and the last
five batches appended (first/last sequence, offsets), like Kafka's
ProducerStateManager: a retried batch that matches one of them is answered
with the original offsets, a batch that does not continue the sequence gets
OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch gets INVALID_PRODUCER_EPOCH, and a
new epoch must start at sequence 0. A producer the partition has no state for may start at any sequence.

Producers idle for ``producer.id.expiration.ms`` are dropped when a partition's state loads and, while
running, by the broker's check every ``producer.id.expiration.check.interval.ms`` (``remove_expired``).

Across restarts the state lives in the log's producer snapshots (``broker.storage.snapshot``, Kafka's
``.snapshot`` files): the storage asks ``snapshot_entries`` for every producer when a segment rolls and on a
clean stop, and ``ensure_loaded`` starts from the newest snapshot and replays only the log after it.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

import msgspec

from kafkawire.broker.storage.snapshot import Entry
from kafkawire.protocol import errors

log = logging.getLogger("kafkawire.producers")

WINDOW = 5  # batches remembered per producer and partition (max.in.flight.requests.per.connection)
REPLAY_OFFSETS = 20_000  # how far back the log tail is read to rebuild producer state
REPLAY_BYTES = 16 * 1024 * 1024
INT32_MAX = 2147483647
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # Kafka's producer.id.expiration.ms default


class BatchMeta(msgspec.Struct):
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    timestamp: int
    log_append_time: int


class ProducerEntry(msgspec.Struct):
    producer_id: int
    epoch: int = -1
    batches: deque = msgspec.field(default_factory=lambda: deque(maxlen=WINDOW))
    last_timestamp: int = -1
    coordinator_epoch: int = -1  # of the last transaction marker (DescribeProducers reports it)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _from_snapshot(e: Entry) -> ProducerEntry | None:
    """A producer of a snapshot as Kafka loads it: its epoch, coordinator epoch, timestamp and its last batch
    (first sequence and offset from the offset delta), the one a retry after the restart must match. An
    entry with no batch but an open transaction is what kafkawire's storage wrote without producer state
    (open transactions only): it says nothing of sequences, so it is not loaded as a producer."""
    if e.last_sequence < 0 and e.txn_first_offset >= 0:
        return None
    entry = ProducerEntry(e.producer_id, e.epoch, last_timestamp=e.timestamp, coordinator_epoch=e.coordinator_epoch)
    if e.last_offset >= 0 and e.last_sequence >= 0:
        first_seq = e.last_sequence - e.offset_delta
        if first_seq < 0:  # the batch wrapped around INT32_MAX
            first_seq += INT32_MAX + 1
        entry.batches.append(
            BatchMeta(first_seq, e.last_sequence, e.last_offset - e.offset_delta, e.last_offset, e.timestamp, -1)
        )
    return entry


def read_end_txn_marker(batch) -> int | None:
    """The coordinator epoch of a control batch's COMMIT/ABORT marker; None for another control record or one
    that does not parse (replay skips it, as it skipped every control batch before)."""
    from kafkawire.protocol.records.control import decode_control_record

    try:
        record = next(iter(batch.records()))
        return decode_control_record(record).coordinator_epoch
    except Exception:
        return None


class ProducerStateManager:
    def __init__(self, expiration_ms: int | Callable[[], int] = PRODUCER_ID_EXPIRATION_MS):
        # producer.id.expiration.ms, a dynamic config: read when a partition's state is loaded and by each
        # periodic expiry check (``remove_expired``)
        self._expiration_ms = expiration_ms if callable(expiration_ms) else (lambda: expiration_ms)
        self.replayed_batches = 0  # batches read to rebuild partitions' state (``ensure_loaded``)
        # Producer ids are unique across restarts of this node: they start from the clock.
        self._ids = itertools.count(int(time.time() * 1000) * 16)
        self._issued: set[int] = set()
        self._lock = threading.Lock()
        self.partitions: dict[tuple[str, int], dict[int, ProducerEntry]] = {}
        self._loaded: set[tuple[str, int]] = set()

    def allocate(self) -> tuple[int, int]:
        with self._lock:
            pid = next(self._ids)
            self._issued.add(pid)
        return pid, 0

    def issued(self, pid: int) -> bool:
        return pid in self._issued

    def loaded(self, topic: str, partition: int) -> bool:
        """Whether the partition's state was loaded since the start (``ensure_loaded`` then reads nothing)."""
        return (topic, partition) in self._loaded

    def ensure_loaded(self, topic: str, partition: int, plog) -> None:
        """Rebuild the state of one partition, once: from the newest producer snapshot the log has (every
        producer as of its offset, Kafka's ``.snapshot``; producers idle for ``producer.id.expiration.ms``
        with no open transaction left out, as Kafka loads them) and the log after it, so retried batches stay
        duplicates. After a clean stop the snapshot is at the log end and nothing is replayed. A log with no
        snapshot (a memory engine, or files written before there were any) is read for its last batches."""
        key = (topic, partition)
        if key not in self._loaded:
            self._load(key, plog, plog.producer_snapshot())

    def _load(self, key: tuple[str, int], plog, found) -> None:
        self._loaded.add(key)
        end, start = plog.log_end_offset, plog.log_start_offset
        table: dict[int, ProducerEntry] = {}
        if found is not None:
            offset, entries = found
            now, expiration_ms = int(time.time() * 1000), self._expiration_ms()
            for e in entries:
                if e.txn_first_offset < 0 and now - e.timestamp >= expiration_ms:
                    continue
                loaded = _from_snapshot(e)
                if loaded is not None:
                    table[e.producer_id] = loaded
                    self._issued.add(e.producer_id)
            replay_from, whole = max(offset, start), True
        else:
            replay_from, whole = max(start, end - REPLAY_OFFSETS), False
        # what was recorded before the load (a marker) is in the log as well, and replayed from it
        self.partitions[key] = table
        if end > replay_from:
            self._replay(key, plog, replay_from, end, whole)

    def _replay(self, key: tuple[str, int], plog, offset: int, end: int, whole: bool) -> None:
        """Apply the batches of [offset, end) to the state (``whole``: all of them, in reads of REPLAY_BYTES;
        else one read). ``replayed_batches`` counts them: the work a start did to rebuild the state."""
        from kafkawire.protocol.records import iter_batches

        topic, partition = key
        while offset < end:
            try:
                result = plog.read(offset, REPLAY_BYTES, min_one=True)
            except Exception as exc:
                log.warning(
                    "cannot rebuild the producer state of %s-%d from offset %d: %s", topic, partition, offset, exc
                )
                return
            progressed = False
            for chunk in result.chunks:
                data = chunk.tobytes() if hasattr(chunk, "tobytes") and not isinstance(chunk, memoryview) else chunk
                for b in iter_batches(data):
                    if b.last_offset < offset or b.base_offset >= end:
                        continue
                    offset, progressed = b.last_offset + 1, True
                    self.replayed_batches += 1
                    if b.magic != 2 or b.producer_id < 0:
                        continue
                    if b.is_control:
                        marker = read_end_txn_marker(b)
                        if marker is not None:
                            self.record_marker(
                                topic, partition, b.producer_id, b.producer_epoch, marker, b.max_timestamp
                            )
                        continue
                    self._issued.add(b.producer_id)
                    ts = b.max_timestamp
                    self.record(
                        topic,
                        partition,
                        b.producer_id,
                        b.producer_epoch,
                        BatchMeta(
                            b.base_sequence,
                            b.last_sequence,
                            b.base_offset,
                            b.last_offset,
                            ts,
                            ts if b.timestamp_type == 1 else -1,
                        ),
                    )
            if not progressed or not whole:
                return

    def snapshot_entries(self, topic: str, partition: int, plog, offset: int) -> list[Entry] | None:
        """Every producer of the partition for its snapshot at ``offset`` (the log end: the storage calls this
        when a segment rolls and on a clean close, in the partition's order of appends), or None when the
        state was never loaded since the start and the log's newest snapshot is already at ``offset``."""
        key = (topic, partition)
        if key not in self._loaded:
            if plog.has_producer_snapshot(offset):  # nothing appended since it was written (a clean stop)
                return None
            self._load(key, plog, plog.producer_snapshot())
        out = []
        for entry in list(self.partitions.get(key, {}).values()):
            last = entry.batches[-1] if entry.batches else None
            out.append(
                Entry(
                    entry.producer_id,
                    entry.epoch,
                    last.last_seq if last else -1,
                    last.last_offset if last else -1,
                    last.last_offset - last.base_offset if last else 0,
                    entry.last_timestamp,
                    entry.coordinator_epoch,
                )
            )
        out.sort()
        return out

    def check(self, topic: str, partition: int, pid: int, epoch: int, first_seq: int, last_seq: int):
        """(error code, message, duplicate BatchMeta or None) for a batch about to be appended."""
        entry = self.partitions.get((topic, partition), {}).get(pid)
        if entry is None or entry.epoch < 0:
            # no state (a new producer, or one whose state is gone): any sequence starts it, as Kafka 4.4
            # accepts it, also from a producer id this broker never issued
            return 0, None, None
        if epoch < entry.epoch:
            return (
                errors.INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {pid} at partition {topic}-{partition} is {epoch}, which is smaller than "
                f"the last seen epoch {entry.epoch}",
                None,
            )
        if epoch > entry.epoch:
            if first_seq != 0:
                return (
                    errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Invalid sequence number for new epoch of producer {pid} at partition {topic}-{partition}: "
                    f"{epoch} (request epoch), {first_seq} (seq. number), {entry.epoch} (current producer epoch)",
                    None,
                )
            return 0, None, None
        for meta in entry.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return 0, None, meta
        expected = 0 if entry.last_seq == INT32_MAX else entry.last_seq + 1
        if first_seq != expected:
            return (
                errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Out of order sequence number for producer {pid} at partition {topic}-{partition}: "
                f"{first_seq} (incoming seq. number), {entry.last_seq} (current end sequence number)",
                None,
            )
        return 0, None, None

    def record(self, topic: str, partition: int, pid: int, epoch: int, meta: BatchMeta) -> None:
        producers = self.partitions.setdefault((topic, partition), {})
        entry = producers.get(pid)
        if entry is None:
            entry = producers[pid] = ProducerEntry(pid)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.batches.append(meta)
        entry.last_timestamp = meta.timestamp

    def record_marker(
        self, topic: str, partition: int, pid: int, epoch: int, coordinator_epoch: int, timestamp: int
    ) -> None:
        """A COMMIT/ABORT marker of ``pid`` appended: as Kafka's appendEndTxnMarker, the partition takes the
        marker's epoch (with transaction version 2 each EndTxn bumps it, and the batches of the old epoch are
        forgotten, so the sequence restarts), its coordinator epoch and its timestamp."""
        producers = self.partitions.setdefault((topic, partition), {})
        entry = producers.get(pid)
        if entry is None:
            entry = producers[pid] = ProducerEntry(pid)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp

    def loaded_partitions(self) -> list[tuple[str, int]]:
        """The partitions whose state is in memory (the periodic expiry looks at these only: the others drop
        their idle producers when they load)."""
        return sorted(self._loaded)

    def remove_expired(self, topic: str, partition: int, now_ms: int, open_transactions=()) -> int:
        """Drop the partition's producers idle for ``producer.id.expiration.ms`` (their last batch's or
        marker's timestamp that long before ``now_ms``) with no transaction open here (``open_transactions``:
        their producer ids), as Kafka's periodic producer expiration check does; a later batch of such a
        producer starts it again at any sequence. Runs in the partition's turn of the storage work, so it
        never races an append; costs one pass over the partition's producers. Returns how many went."""
        producers = self.partitions.get((topic, partition))
        if not producers:
            return 0
        expiration_ms = self._expiration_ms()
        gone = [
            pid
            for pid, entry in producers.items()
            if pid not in open_transactions and now_ms - entry.last_timestamp >= expiration_ms
        ]
        for pid in gone:
            del producers[pid]
        return len(gone)

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self.partitions if k[0] == topic]:
            del self.partitions[key]
        self._loaded = {k for k in self._loaded if k[0] != topic}

    def active(self, topic: str, partition: int) -> list[ProducerEntry]:
        return list(self.partitions.get((topic, partition), {}).values())
