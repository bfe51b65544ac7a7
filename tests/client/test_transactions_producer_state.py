"""The producer state a partition reports after transaction version 2 commits, on kafkawire and Kafka 4.4.

With TV2 each EndTxn bumps the producer's epoch and the COMMIT/ABORT marker carries the new epoch; Kafka's
partition takes the epoch from the marker (and its sequence restarts, -1), so DescribeProducers reports the
epoch of the last marker. Three transactions from a new transactional id: epoch 3, last sequence -1.

Kafka's EndTxn answers once the outcome is in the transaction log; the coordinator writes the markers to the
partitions afterwards, so right after a commit Kafka may still report the epoch of the marker before. The test
reads the state until it settles (bounded), then asserts it.
"""

from __future__ import annotations

import asyncio
import time

from kafkawire.client import Producer
from kafkawire.client.connection import Connection
from kafkawire.protocol.messages import message_class

from .groups_support import create_topics, group_broker, names  # noqa: F401


def describe_producers(bootstrap: str, topic: str, partition: int) -> list[tuple[int, int]]:
    async def run():
        host, port = bootstrap.rsplit(":", 1)
        conn = await Connection.open(host, int(port))
        try:
            cls = message_class("DescribeProducersRequest")
            resp = await conn.request(cls(topics=[cls.TopicRequest(name=topic, partition_indexes=[partition])]))
            p = resp.topics[0].partitions[0]
            assert p.error_code == 0
            return [(s.producer_epoch, s.last_sequence) for s in p.active_producers]
        finally:
            await conn.close()

    return asyncio.run(run())


def test_marker_epoch_is_the_producers_epoch(group_broker, names):
    topic, _ = names
    create_topics(group_broker.bootstrap, topic, partitions=1)
    with Producer(group_broker.bootstrap, transactional_id=f"tx-{topic}") as p:
        p.init_transactions(60)
        for commit in (True, False, True):
            p.begin_transaction()
            p.produce(topic, b"x", partition=0)
            p.flush(30)
            (p.commit_transaction if commit else p.abort_transaction)(60)
        assert p._core._txn.version == 2 and p._core.producer_epoch == 3
    deadline = time.monotonic() + 20
    state = describe_producers(group_broker.bootstrap, topic, 0)
    while state != [(3, -1)] and time.monotonic() < deadline:
        time.sleep(0.1)
        state = describe_producers(group_broker.bootstrap, topic, 0)
    assert state == [(3, -1)]
