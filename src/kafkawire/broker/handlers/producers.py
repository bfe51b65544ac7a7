"""Idempotent producers: InitProducerId (without a transactional id), sequence checks, DescribeProducers.

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
from kafkawire.protocol.messages import DescribeProducersResponse, InitProducerIdResponse

from ..dispatch import handles
from ._common import find_topic

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

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


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
                if b.magic != 2 or b.producer_id < 0 or b.is_control:
                    continue
                self._issued.add(b.producer_id)
                ts = b.max_timestamp
                self.record(topic, partition, b.producer_id, b.producer_epoch,
                            BatchMeta(b.base_sequence, b.last_sequence, b.base_offset, b.last_offset, ts,
                                      ts if b.timestamp_type == 1 else -1))

    def check(self, topic: str, partition: int, pid: int, epoch: int, first_seq: int, last_seq: int):
        """(error code, message, duplicate BatchMeta or None) for a batch about to be appended."""
        entry = self.partitions.get((topic, partition), {}).get(pid)
        if entry is None or entry.epoch < 0:
            # no state (a new producer, or one whose state is gone): any sequence starts it, as Kafka 4.4
            # accepts it, also from a producer id this broker never issued
            return 0, None, None
        if epoch < entry.epoch:
            return (errors.INVALID_PRODUCER_EPOCH,
                    f"Epoch of producer {pid} at partition {topic}-{partition} is {epoch}, which is smaller than "
                    f"the last seen epoch {entry.epoch}", None)
        if epoch > entry.epoch:
            if first_seq != 0:
                return (errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                        f"Invalid sequence number for new epoch of producer {pid} at partition {topic}-{partition}: "
                        f"{epoch} (request epoch), {first_seq} (seq. number), {entry.epoch} (current producer epoch)",
                        None)
            return 0, None, None
        for meta in entry.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return 0, None, meta
        expected = 0 if entry.last_seq == INT32_MAX else entry.last_seq + 1
        if first_seq != expected:
            return (errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Out of order sequence number for producer {pid} at partition {topic}-{partition}: "
                    f"{first_seq} (incoming seq. number), {entry.last_seq} (current end sequence number)", None)
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

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self.partitions if k[0] == topic]:
            del self.partitions[key]
        self._loaded = {k for k in self._loaded if k[0] != topic}

    def active(self, topic: str, partition: int) -> list[ProducerEntry]:
        return list(self.partitions.get((topic, partition), {}).values())


@handles("InitProducerId", 0, 5)
def init_producer_id(broker, ctx, body):
    if body.transactional_id is not None:
        # Transactions need a transaction coordinator; kafkawire has none yet.
        coordinator = broker.txn_coordinator
        if coordinator is not None:
            return coordinator.init_producer_id(ctx, body)
        return InitProducerIdResponse(throttle_time_ms=0, error_code=errors.COORDINATOR_NOT_AVAILABLE,
                                      producer_id=-1, producer_epoch=-1)
    # Without a transactional id Kafka always hands out a new producer id at epoch 0 (also when the client
    # passes its current id and epoch, KIP-360).
    pid, epoch = broker.producers.allocate()
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch)


@handles("DescribeProducers", 0, 0)
def describe_producers(broker, ctx, body):
    R = DescribeProducersResponse
    topics = []
    for t in body.topics:
        meta = find_topic(broker, t.name)
        parts = []
        for p in t.partition_indexes:
            if meta is None or not 0 <= p < meta.partitions:
                # as Kafka answers: a message for a topic it does not know, none for a partition it does not
                message = f"topic {t.name} does not exist on this broker" if meta is None else None
                parts.append(R.PartitionResponse(partition_index=p, error_code=errors.UNKNOWN_TOPIC_OR_PARTITION,
                                                 error_message=message, active_producers=[]))
                continue
            active = [R.ProducerState(producer_id=e.producer_id, producer_epoch=e.epoch, last_sequence=e.last_seq,
                                      last_timestamp=e.last_timestamp, coordinator_epoch=-1,
                                      current_txn_start_offset=-1)
                      for e in broker.producers.active(meta.name, p)]
            parts.append(R.PartitionResponse(partition_index=p, error_code=0, error_message=None,
                                             active_producers=active))
        topics.append(R.TopicResponse(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)
