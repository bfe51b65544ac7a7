"""Idempotent producers' state: producer ids and, per partition, each producer's epoch and last batches.

Per producer and partition the broker keeps the producer epoch and the last
five batches appended (first/last sequence, offsets), like Kafka's
ProducerStateManager: a retried batch that matches one of them is answered
with the original offsets, a batch that does not continue the sequence gets
OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch gets INVALID_PRODUCER_EPOCH, and a
new epoch must start at sequence 0. A producer the partition has no state for may start at any sequence.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from kafkawire.protocol import errors

WINDOW = 5  # batches remembered per producer and partition (max.in.flight.requests.per.connection)
REPLAY_OFFSETS = 20_000  # how far back the log tail is read to rebuild producer state
REPLAY_BYTES = 16 * 1024 * 1024
INT32_MAX = 2147483647


@dataclass
class BatchMeta:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    timestamp: int
    log_append_time: int


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int = -1
    batches: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    last_timestamp: int = -1
    coordinator_epoch: int = -1  # of the last transaction marker (DescribeProducers reports it)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


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
    def __init__(self):
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

    def ensure_loaded(self, topic: str, partition: int, plog) -> None:
        """Rebuild the state of one partition from the tail of its log, once (after a restart Kafka replays
        its producer snapshots; kafkawire reads the last batches), so retried batches stay duplicates."""
        key = (topic, partition)
        if key in self._loaded:
            return
        self._loaded.add(key)
        end, start = plog.log_end_offset, plog.log_start_offset
        if end <= start:
            return
        from kafkawire.protocol.records import iter_batches

        try:
            result = plog.read(max(start, end - REPLAY_OFFSETS), REPLAY_BYTES, min_one=True)
        except Exception:
            return
        for chunk in result.chunks:
            data = chunk.tobytes() if hasattr(chunk, "tobytes") and not isinstance(chunk, memoryview) else chunk
            for b in iter_batches(data):
                if b.magic != 2 or b.producer_id < 0:
                    continue
                if b.is_control:
                    marker = read_end_txn_marker(b)
                    if marker is not None:
                        self.record_marker(topic, partition, b.producer_id, b.producer_epoch, marker, b.max_timestamp)
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

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self.partitions if k[0] == topic]:
            del self.partitions[key]
        self._loaded = {k for k in self._loaded if k[0] != topic}

    def active(self, topic: str, partition: int) -> list[ProducerEntry]:
        return list(self.partitions.get((topic, partition), {}).values())
