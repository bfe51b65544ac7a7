"""Smoke check with a real client (librdkafka via confluent-kafka); the full matrix lives in tests/peers."""

from __future__ import annotations

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")


def test_confluent_produce_and_consume(broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic("smoke", num_partitions=2, replication_factor=1)])
    futures["smoke"].result(10)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, "compression.type": "lz4"}
    )
    delivered = []
    for i in range(100):
        producer.produce(
            "smoke", value=b"v%d" % i, key=b"k%d" % (i % 7), on_delivery=lambda err, msg: delivered.append(err)
        )
    assert producer.flush(15) == 0
    assert delivered == [None] * 100
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "smoke",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("smoke", 0, 0), TopicPartition("smoke", 1, 0)])
    got = []
    deadline = time.time() + 15
    while len(got) < 100 and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        got.append(msg.value())
    low, high = consumer.get_watermark_offsets(TopicPartition("smoke", 0), timeout=5)
    consumer.close()
    assert sorted(got) == sorted(b"v%d" % i for i in range(100))
    assert low == 0 and high > 0
