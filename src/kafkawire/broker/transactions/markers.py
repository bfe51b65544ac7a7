"""Writing transaction markers in the broker (Kafka's WriteTxnMarkers, done in process).

Each partition's marker goes through ``Storage.append_txn_marker`` in that partition's order of storage work:
inline for engines that do not block, else queued behind the partition's appends in the storage threads
(``Broker.submit_append``), so the event loop never waits on a file. Fetch waiters are woken, as after a
Produce, since a marker moves the partition's end and its last stable offset.
"""

from __future__ import annotations

import asyncio
import logging
import time

from .coordinator import COORDINATOR_EPOCH, MarkerWriter

log = logging.getLogger("kafkawire.transactions")


class BrokerMarkerWriter(MarkerWriter):
    def __init__(self, broker):
        self.broker = broker

    def write(self, producer_id, producer_epoch, commit, partitions, done) -> None:
        broker = self.broker
        storage = broker.storage
        topics = storage.topics()
        # a partition whose topic was deleted since it joined the transaction has nothing left to end
        live = [(t, p) for t, p in partitions if t in topics and 0 <= p < topics[t].partitions]

        def append(topic, partition):
            offset = storage.append_txn_marker(
                topic,
                partition,
                producer_id,
                producer_epoch,
                commit,
                COORDINATOR_EPOCH,
                leader_epoch=broker.leader_epochs.current(topic, partition),  # stamped as the leader's batches are
            )
            # the partition's producer state takes the marker's epoch, as Kafka's does (DescribeProducers, and
            # the sequence restarting after a transaction version 2 epoch bump)
            broker.producers.record_marker(
                topic, partition, producer_id, producer_epoch, COORDINATOR_EPOCH, int(time.time() * 1000)
            )
            return offset

        if not broker.storage_in_thread:
            try:
                for t, p in live:
                    append(t, p)
                    broker.waiters.notify(t, p)
            except Exception as exc:
                return done(exc)
            return done(None)
        futures = []
        for t, p in live:
            plog = storage.partition(t, p)
            futures.append(broker.submit_append(t, p, plog, lambda _sync, t=t, p=p: (append(t, p), True), False))

        async def wait():
            failure = None
            for (t, p), fut in zip(live, futures):
                try:
                    await fut
                    broker.waiters.notify(t, p)
                except Exception as exc:
                    failure = failure or exc
            done(failure)

        asyncio.ensure_future(wait())
