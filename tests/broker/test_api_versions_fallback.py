"""Real clients negotiate through the UNSUPPORTED_VERSION fallback of ApiVersions.

The broker here serves ApiVersions up to v2 only, so the first ApiVersions request of librdkafka
(v3), kafka-python (v3/v4) is answered with the fallback body, which lists ApiVersions' own range
only (as Kafka 4.4's does). Each client must retry at v2 on the same connection and then work."""

from __future__ import annotations

import time

import msgspec
import pytest

from kafkawire.broker.server import start_in_thread


@pytest.fixture
def old_api_versions_broker():
    b = start_in_thread()
    handlers = dict(b.broker.handlers)
    handlers[18] = msgspec.structs.replace(handlers[18], max_version=2)
    b.broker.handlers = handlers
    try:
        yield b
    finally:
        b.stop()


def _fell_back(caplog) -> bool:
    return any("ApiVersions v" in r.getMessage() and "not supported" in r.getMessage() for r in caplog.records)


def test_librdkafka_negotiates_after_the_fallback(old_api_versions_broker, caplog):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = old_api_versions_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("fallback-rd", num_partitions=1, replication_factor=1)])["fallback-rd"].result(10)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "api.version.request": True})
    errors = []
    producer.produce("fallback-rd", value=b"x", on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(10) == 0
    assert errors == [None]
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "fallback-rd", "auto.offset.reset": "earliest"}
    )
    consumer.assign([confluent_kafka.TopicPartition("fallback-rd", 0, 0)])
    got, deadline = None, time.time() + 10
    while got is None and time.time() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got = m.value()
    consumer.close()
    assert got == b"x"
    assert _fell_back(caplog)


def test_kafka_python_negotiates_after_the_fallback(old_api_versions_broker, caplog):
    kafka = pytest.importorskip("kafka")

    bootstrap = old_api_versions_broker.bootstrap
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    producer.send("fallback-kp", b"y").get(timeout=10)  # auto-created
    producer.close()
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10_000
    )
    consumer.assign([kafka.TopicPartition("fallback-kp", 0)])
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [b"y"]
    assert _fell_back(caplog)
