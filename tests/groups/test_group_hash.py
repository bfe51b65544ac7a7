"""``ConsumerGroupMetadataValue.metadataHash`` (KIP-1101), computed as Kafka 4.4's group coordinator does.

A consumer-protocol group subscribed to two topics on Kafka 4.4 (``broker.rack`` set) gets a metadata hash in
Kafka's ``__consumer_offsets``; kafkawire's hash of the same topics (ids, names, partition counts, racks) is that
number, and
kafkawire serving the same directory afterwards writes it for the same group.
"""

from __future__ import annotations

import struct
import sys
import time
import uuid
from pathlib import Path

import pytest

from kafkawire.broker.groups.metadata_hash import group_hash, subscription_hash, topic_hash
from kafkawire.broker.groups.persistence import TOPIC
from kafkawire.broker.storage.metadata import read_partition_topic_id
from kafkawire.protocol import message_class
from kafkawire.protocol.records import iter_batches

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "storage"))  # kafka_dir, beside its own tests

from kafka_dir import create_topics, kafka_on, kafkawire_on  # noqa: E402

GROUP = "hashed"
RACK = "rack-1"  # every partition's replica is on a broker of this rack: part of the hash
TOPICS = {"hash-a": 3, "hash-b": 1}
_KEY = message_class("ConsumerGroupMetadataKey")
_VALUE = message_class("ConsumerGroupMetadataValue")


def test_topic_and_group_hashes_are_hash4js_xxh3_streams():
    """Values hash4j 0.22 (the library Kafka 4.4 ships) gives for the same stream of puts, with two racks on
    partition 1, a non-ASCII one among them."""
    tid = uuid.UUID(int=(0x0123456789ABCDEF << 64) | 0x1122334455667788)
    t = topic_hash(tid, "orders", 3, lambda p: ["r\u00e9x", "r1"] if p == 1 else [])
    assert t == -5847012604790168003
    assert group_hash({"b": 42, "a": t}) == 4495292121761264320  # by topic name, not insertion order
    assert group_hash({}) == 0
    assert topic_hash(tid, "orders", 3) != topic_hash(tid, "orders", 4)


def _metadata_hashes(log_dir: Path) -> list[int]:
    """Every ConsumerGroupMetadataValue's metadataHash for GROUP in the directory's __consumer_offsets, in
    log order per partition."""
    out = []
    for part in sorted(log_dir.glob(f"{TOPIC}-*")):
        for segment in sorted(part.glob("*.log")):
            for batch in iter_batches(segment.read_bytes()):
                if batch.is_control:
                    continue
                for rec in batch.records():
                    key = bytes(rec.key or b"")
                    if len(key) < 2 or struct.unpack_from(">h", key)[0] != 3 or rec.value is None:
                        continue
                    if _KEY.decode(memoryview(key)[2:], 0).group_id != GROUP:
                        continue
                    value = bytes(rec.value)
                    out.append(_VALUE.decode(memoryview(value)[2:], struct.unpack_from(">h", value)[0]).metadata_hash)
    return out


def _join(bootstrap: str) -> None:
    """A KIP-848 consumer of GROUP subscribed to TOPICS, until it holds all their partitions."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(sorted(TOPICS))
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < sum(TOPICS.values()) and time.monotonic() < deadline:
            consumer.poll(0.5)
        assert len(consumer.assignment()) == sum(TOPICS.values()), consumer.assignment()
    finally:
        consumer.close()


def test_kafkawire_writes_the_metadata_hash_kafka_4_4_writes(tmp_path):
    kafka = kafka_on(tmp_path, **{"broker.rack": RACK})
    try:
        create_topics(kafka.bootstrap, {name: (n, {}) for name, n in TOPICS.items()})
        _join(kafka.bootstrap)
    finally:
        kafka.stop()
    logs = tmp_path / "logs"
    kafkas = _metadata_hashes(logs)
    ids = {name: read_partition_topic_id(str(logs / f"{name}-0")) for name in TOPICS}
    ours = subscription_hash({name: (ids[name], n) for name, n in TOPICS.items()}, lambda _t, _p: [RACK])
    assert ours != 0 and ours in kafkas, (kafkas, ours)

    written = len(_metadata_hashes(logs))
    broker = kafkawire_on(tmp_path, **{"broker.rack": RACK})
    try:
        _join(broker.bootstrap)
    finally:
        broker.stop()
    kafkawires = _metadata_hashes(logs)[written:]
    # the same member joining and leaving: the same hashes in the same order (0 once nothing is subscribed)
    assert kafkawires == kafkas, (kafkawires, kafkas)
