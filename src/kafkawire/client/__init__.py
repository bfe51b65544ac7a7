"""kafkawire.client: a Kafka client in Python, for kafkawire's broker and real Kafka alike.

Synchronous API (the async core runs on a private event loop in a daemon
thread; see ``kafkawire.client.sync``)::

    from kafkawire.client import Producer, Consumer, Admin, NewTopic

    with Admin("127.0.0.1:9092") as admin:
        admin.create_topics([NewTopic("events", num_partitions=3)])
    with Producer("127.0.0.1:9092", compression="zstd") as p:
        fut = p.produce("events", b"value", key=b"k", headers=[("h", b"v")])
        p.produce_many("events", [b"a", b"b"], keys=[None, b"k"])   # one call, one DeliveryGroup
        p.flush()
        fut.result()                            # RecordMetadata(topic, partition, offset, timestamp)
    with Consumer("127.0.0.1:9092", group_id="readers", auto_offset_reset="earliest") as c:
        c.subscribe(["events"])                # the group assigns partitions; commits on close
        for record in c.poll(timeout=1.0): ...
        c.commit()                             # or commit_async(); auto-commit every 5 s by default
    with Consumer("127.0.0.1:9092") as c:
        c.assign([("events", 0)], offset="earliest")   # or {tp: offset}; seek_to_timestamp(ms)
        c.stop_at(("events", 0), 1000)                # optional: read an offset range, fetch no further
        records = c.poll(timeout=1.0)          # [ConsumerRecord]
        batches = c.poll_arrow(timeout=1.0)    # [pyarrow.RecordBatch], no per-record objects

asyncio API: ``AsyncProducer``, ``AsyncConsumer``, ``AsyncAdmin`` (same
options, ``await``-able methods). Errors a broker returns are raised as
``kafkawire.protocol.KafkaError`` (``.name``, ``.code``, ``.retriable``).

Modules: ``connection`` (one broker connection: framing, correlation ids,
pipelining, ApiVersions negotiation, timeouts), ``cluster`` (bootstrap,
metadata cache, leaders), ``retry`` (backoff), ``partitioner`` (Java's
murmur2), ``producer``, ``consumer``, ``arrow`` (Arrow decoding), ``offsets``
(ListOffsets), ``admin``, ``sync``, ``groups`` (consumer group membership:
classic and KIP-848 protocols, assignors, commits).
"""

from __future__ import annotations

from ..protocol import KafkaError
from .admin import AsyncAdmin, NewTopic
from .cluster import Cluster
from .connection import Connection, ConnectionClosed, RequestTimeout
from .consumer import AsyncConsumer, ConsumerRecord
from .groups import CommitFailedError, GroupError
from .offsets import EARLIEST, LATEST, OffsetAndTimestamp
from .partitioner import DefaultPartitioner, RoundRobinPartitioner, murmur2, partition_for_key
from .producer import AsyncProducer, DeliveryGroup, RecordFuture, RecordMetadata
from .sync import Admin, Consumer, LoopThread, Producer

__all__ = [
    "Admin",
    "AsyncAdmin",
    "AsyncConsumer",
    "AsyncProducer",
    "Cluster",
    "CommitFailedError",
    "Connection",
    "ConnectionClosed",
    "GroupError",
    "Consumer",
    "ConsumerRecord",
    "DefaultPartitioner",
    "DeliveryGroup",
    "EARLIEST",
    "KafkaError",
    "LATEST",
    "LoopThread",
    "NewTopic",
    "OffsetAndTimestamp",
    "Producer",
    "RecordFuture",
    "RecordMetadata",
    "RequestTimeout",
    "RoundRobinPartitioner",
    "murmur2",
    "partition_for_key",
]
