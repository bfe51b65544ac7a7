"""An idempotent producer's batches on a segments broker, in raw protocol: the set-up that the producer snapshot,
expiry and clean-shutdown tests share.

``segments_broker(data_dir)`` is a kafkawire broker (segments engine, in this process) on ``data_dir``;
``write_two_batches`` creates TOPIC and has one idempotent producer write offsets 0..2 and 3..4;
``write_old_and_fresh`` two producers, one whose batch is two days old; ``check_continues`` is what a broker that
kept (or loaded) the producer's state answers to its retry, its next sequence and a gap.
"""

from __future__ import annotations

import os
import time

from broker.conftest import msg
from broker.helpers import batch, create_topic, produce_request

from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.server import start_in_thread
from kafkawire.protocol import errors
from kafkawire.protocol.records import build_batch

TOPIC = "idem"


def segments_broker(data_dir, **props):
    config = BrokerConfig(port=0, storage="segments", data_dir=str(data_dir), properties={"node.id": "1", **props})
    return start_in_thread(config)


def produce(c, pid, epoch, seq, count, *, timestamp=None, deadline=60.0):
    """Produce ``count`` records from ``pid`` at ``seq``; the partition's answer (retried while a broker that
    has just started takes the partition's leadership)."""
    values = [f"{pid}-{seq + i}".encode() for i in range(count)]
    records = (
        batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        if timestamp is None
        else build_batch(
            [(None, v, [], timestamp) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq
        )
    )
    until = time.monotonic() + deadline
    while True:
        res = c.call(produce_request(TOPIC, 0, records), 9)
        pr = res.responses[0].partition_responses[0]
        retriable = (errors.NOT_LEADER_OR_FOLLOWER, errors.UNKNOWN_TOPIC_OR_PARTITION, errors.LEADER_NOT_AVAILABLE)
        if pr.error_code not in retriable or time.monotonic() > until:
            return pr
        time.sleep(0.5)


def init_producer(c, deadline=60.0):
    """An idempotent producer's id and epoch (retried while a broker that has just started loads)."""
    until = time.monotonic() + deadline
    while True:
        res = c.call(msg("InitProducerIdRequest", transactional_id=None, transaction_timeout_ms=60000), 4)
        if res.error_code == 0 or time.monotonic() > until:
            assert res.error_code == 0 and res.producer_id >= 0 and res.producer_epoch == 0, res
            return res.producer_id, res.producer_epoch
        time.sleep(0.5)


def write_two_batches(c) -> tuple[int, int]:
    """TOPIC created, and one idempotent producer's batches at offsets 0..2 (seq 0..2) and 3..4 (seq 3..4), all
    in the active segment; the producer's id and epoch."""
    create_topic(c, TOPIC)
    pid, epoch = init_producer(c)
    assert produce(c, pid, epoch, 0, 3).base_offset == 0
    assert produce(c, pid, epoch, 3, 2).base_offset == 3
    return pid, epoch


def write_old_and_fresh(c) -> tuple[tuple[int, int], tuple[int, int]]:
    """TOPIC created, and two producers' batches of two records: the first producer's timestamped two days ago
    (idle past the default producer.id.expiration.ms of a day), the second's now; (id, epoch) of each."""
    two_days_ago = int(time.time() * 1000) - 2 * 86_400_000
    create_topic(c, TOPIC)
    old, e_old = init_producer(c)
    fresh, e_fresh = init_producer(c)
    assert produce(c, old, e_old, 0, 2, timestamp=two_days_ago).error_code == 0
    assert produce(c, fresh, e_fresh, 0, 2).error_code == 0
    return (old, e_old), (fresh, e_fresh)


def partition_dir(data_dir):
    return os.path.join(str(data_dir), f"{TOPIC}-0")


def host_port(bootstrap: str):
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def check_continues(c, pid, epoch, *, dup_seq, dup_count, dup_offset, next_seq, next_offset):
    """The retry of the producer's last batch is answered as a duplicate (its first offset, nothing
    appended), its next sequence is appended at the log end, and a gap is refused."""
    dup = produce(c, pid, epoch, dup_seq, dup_count)
    assert (dup.error_code, dup.base_offset) == (0, dup_offset)
    taken = produce(c, pid, epoch, next_seq, 1)
    assert (taken.error_code, taken.base_offset) == (0, next_offset)
    gap = produce(c, pid, epoch, next_seq + 5, 1)
    assert gap.error_code == errors.OUT_OF_ORDER_SEQUENCE_NUMBER
