"""Idle producers expire while the broker runs, as Kafka's periodic producer expiration check removes them: every
``producer.id.expiration.check.interval.ms`` (an internal config of Kafka's, default 10 minutes) each partition
drops the producers whose last batch is ``producer.id.expiration.ms`` old and that have no transaction open there.
A later batch of an expired producer starts it again at any sequence."""

from __future__ import annotations

import time

from broker.conftest import RawClient
from idempotent_producer import TOPIC, produce, segments_broker, write_old_and_fresh

from kafkawire.broker.producer_state import BatchMeta, ProducerStateManager
from kafkawire.protocol import errors, message_class


def _meta(seq: int, offset: int, timestamp: int) -> BatchMeta:
    return BatchMeta(seq, seq, offset, offset, timestamp, -1)


def test_remove_expired_drops_only_idle_producers_without_an_open_transaction():
    state = ProducerStateManager(expiration_ms=1000)
    state.record("t", 0, 1, 0, _meta(0, 0, timestamp=5_000))  # idle since 5 s
    state.record("t", 0, 2, 0, _meta(0, 1, timestamp=5_000))  # as idle, but its transaction is open here
    state.record("t", 0, 3, 0, _meta(0, 2, timestamp=9_500))  # recent
    state.record("t", 1, 4, 0, _meta(0, 0, timestamp=5_000))  # another partition: not this call's
    assert state.remove_expired("t", 0, 9_999, open_transactions={2}) == 1
    assert sorted(e.producer_id for e in state.active("t", 0)) == [2, 3]
    assert state.remove_expired("t", 0, 10_500, open_transactions={2}) == 1  # exactly expiration_ms idle
    assert [e.producer_id for e in state.active("t", 0)] == [2]
    assert [e.producer_id for e in state.active("t", 1)] == [4]
    assert state.check("t", 0, 1, 0, 7, 7)[0] == 0  # no state left: any sequence starts it again


def _described(c) -> set[int]:
    D = message_class("DescribeProducersRequest")
    res = c.call(D(topics=[D.TopicRequest(name=TOPIC, partition_indexes=[0])]), 0)
    partition = res.topics[0].partitions[0]
    assert partition.error_code == 0, partition
    return {p.producer_id for p in partition.active_producers}


def test_the_broker_expires_idle_producers_while_running(tmp_path):
    with segments_broker(tmp_path, **{"producer.id.expiration.check.interval.ms": "1000"}) as b:
        c = RawClient(b.address)
        (old, e_old), (fresh, e_fresh) = write_old_and_fresh(c)
        described = _described(c)
        assert {old, fresh} <= described, described  # recorded as appended
        deadline = time.monotonic() + 60  # bounded wait for the check (every second here), not a timing test
        while old in described and time.monotonic() < deadline:
            time.sleep(0.5)
            described = _described(c)
        assert old not in described and fresh in described, described
        assert produce(c, old, e_old, 9, 1).error_code == 0  # its state is gone: any sequence starts it
        assert produce(c, fresh, e_fresh, 9, 1).error_code == errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        c.close()
