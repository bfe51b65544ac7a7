"""Kafka 4.4 serves a log kafkawire's cleaner compacted, on one data directory (``kafka_dir.py``'s brokers):
librdkafka reads from the start exactly what kafkawire served after compaction, record for record, offsets
included. kafkawire's cleaner checkpoint is Kafka's ``cleaner-offset-checkpoint``, which Kafka starts with."""

from __future__ import annotations

import time

import pytest
from kafka_dir import create_topics, kafka_on, kafkawire_on, read_all

confluent_kafka = pytest.importorskip("confluent_kafka")

# segments roll by time (Kafka 4.4 refuses a segment.bytes below 1 MiB)
CONFIGS = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"}


def _produce_updates(bootstrap: str, topic: str, rounds: int, keys: int) -> dict[bytes, bytes]:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    last = {}
    for r in range(rounds):
        for k in range(keys):
            key, value = f"key-{k}".encode(), f"value-{r}-{k}".encode()
            producer.produce(topic, value, key)
            last[key] = value
        assert producer.flush(30) == 0
        time.sleep(0.15)  # the next round's batch starts a new segment (segment.ms)
    return last


def test_kafka_serves_what_the_cleaner_kept(tmp_path):
    wire = kafkawire_on(tmp_path, **{"log.cleaner.backoff.ms": "100"})
    try:
        create_topics(wire.bootstrap, {"kept": (1, CONFIGS)})
        last = _produce_updates(wire.bootstrap, "kept", 40, 25)  # 1,000 records over 25 keys
        deadline = time.monotonic() + 60
        while True:  # until the cleaner has run: fewer records than were written
            served = read_all(wire.bootstrap, "kept", 1, 1000, timeout=3)
            if len(served) < 1000 or time.monotonic() > deadline:
                break
        assert len(served) < 1000, "kafkawire's cleaner never ran"
        assert {k: v for (_, _), (k, v) in sorted(served.items())} == last
    finally:
        wire.stop()

    kafka = kafka_on(tmp_path)
    try:
        assert read_all(kafka.bootstrap, "kept", 1, len(served)) == served
    finally:
        kafka.stop()
