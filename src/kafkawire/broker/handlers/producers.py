"""InitProducerId and DescribeProducers: thin handlers over the broker's producer state
(``kafkawire.broker.producer_state``, reached as ``broker.producers``) and, for a transactional id, the
transaction coordinator (``kafkawire.broker.transactions``, ``broker.txn_coordinator``)."""

from __future__ import annotations

from kafkawire.protocol import errors
from kafkawire.protocol.messages import DescribeProducersResponse, InitProducerIdResponse

from ..dispatch import handles
from ._common import find_topic


@handles("InitProducerId", 0, 5)
def init_producer_id(broker, ctx, body):
    if body.transactional_id is not None:
        coordinator = broker.txn_coordinator
        if coordinator is None:
            return InitProducerIdResponse(
                throttle_time_ms=0, error_code=errors.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1
            )
        v = ctx.api_version
        result = coordinator.init_producer_id(
            body.transactional_id,
            body.transaction_timeout_ms,
            body.producer_id if v >= 3 else -1,
            body.producer_epoch if v >= 3 else -1,
        )
        code = result.error
        if code == errors.PRODUCER_FENCED and v < 4:  # KIP-588: older clients know it as INVALID_PRODUCER_EPOCH
            code = errors.INVALID_PRODUCER_EPOCH
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=code, producer_id=result.producer_id, producer_epoch=result.producer_epoch
        )
    # Without a transactional id Kafka always hands out a new producer id at epoch 0 (also when the client
    # passes its current id and epoch, KIP-360).
    pid, epoch = broker.producers.allocate()
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch)


async def _load_producers(broker, topic: str, partition: int, plog) -> None:
    """The partition's producer state, loaded once since the start: a producer snapshot read and the log
    after it replayed (file I/O, up to a segment after a crash), so for engines that block it runs in the
    partition's turn of the storage threads, after the appends queued before it, never on the event loop."""
    producers = broker.producers
    if producers.loaded(topic, partition):
        return
    if not broker.storage_in_thread:
        producers.ensure_loaded(topic, partition, plog)
        return
    await broker.submit_append(
        topic, partition, plog, lambda _durable: (producers.ensure_loaded(topic, partition, plog), False), False
    )


@handles("DescribeProducers", 0, 0)
async def describe_producers(broker, ctx, body):
    R = DescribeProducersResponse
    topics = []
    for t in body.topics:
        meta = find_topic(broker, t.name)
        parts = []
        for p in t.partition_indexes:
            if meta is None or not 0 <= p < meta.partitions:
                # as Kafka answers: a message for a topic it does not know, none for a partition it does not
                message = f"topic {t.name} does not exist on this broker" if meta is None else None
                parts.append(
                    R.PartitionResponse(
                        partition_index=p,
                        error_code=errors.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=message,
                        active_producers=[],
                    )
                )
                continue
            # the first offset of each producer's open transaction, as the partition's log tracks it; the
            # producers themselves as Produce sees them (from the producer snapshot once after a restart)
            plog = broker.storage.partition(meta.name, p)
            await _load_producers(broker, meta.name, p, plog)
            open_txns = plog.open_transactions()
            active = [
                R.ProducerState(
                    producer_id=e.producer_id,
                    producer_epoch=e.epoch,
                    last_sequence=e.last_seq,
                    last_timestamp=e.last_timestamp,
                    coordinator_epoch=e.coordinator_epoch,
                    current_txn_start_offset=open_txns.get(e.producer_id, -1),
                )
                for e in broker.producers.active(meta.name, p)
            ]
            parts.append(
                R.PartitionResponse(partition_index=p, error_code=0, error_message=None, active_producers=active)
            )
        topics.append(R.TopicResponse(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)
