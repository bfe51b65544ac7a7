"""One data directory, two brokers: Kafka 4.4 (the reference) and ``kafkawire serve`` taking turns on it.

For the round-trip tests of test_kafka_dir.py and for anyone who extends them (committed group offsets,
transactions, SCRAM users): ``kafka_on(root)`` is a reference Kafka whose ``log.dirs`` is ``root/logs``,
``kafkawire_on(root)`` a kafkawire broker serving the same ``root/logs``; ``produce`` and ``read_all``
speak librdkafka to either and return what landed where, as {(partition, offset): (key, value)}.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def kafka_on(root: Path, **config):
    """A started Kafka 4.4 node on ``root/logs`` (formatted on the first start only), with ``config`` added to
    its server.properties; fails in CI when Kafka cannot run, skips elsewhere."""
    from conftest import reference_unavailable
    from kafka_reference import KafkaUnavailable, ReferenceKafka

    kafka = ReferenceKafka(root, heap="384m", config=config)
    try:
        return kafka.start()
    except KafkaUnavailable as exc:
        tail = kafka.log_tail()
        kafka.close()
        if (root / "logs" / "meta.properties").exists() and "Address already in use" not in str(exc):
            raise AssertionError(f"Kafka 4.4 did not start on the directory: {exc}\n{tail}") from exc
        reference_unavailable(str(exc))


def kafkawire_on(root: Path, **config):
    from kafkawire.testing import KafkaBroker

    return KafkaBroker(storage="segments", data_dir=root / "logs", config={"node.id": "1", **config}).start()


def create_topics(bootstrap: str, topics: dict[str, tuple[int, dict[str, str]]]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, partitions, 1, config=configs) for name, (partitions, configs) in topics.items()]
    )
    for future in futures.values():
        future.result(30)
    # Kafka answers CreateTopics once the controller has the topic; its broker takes the leadership a moment
    # later and answers NOT_LEADER_OR_FOLLOWER to a Produce until then. Wait as a client would.
    deadline = time.monotonic() + 30
    while True:
        listed = admin.list_topics(timeout=10).topics
        waiting = [
            (name, p)
            for name, (partitions, _) in topics.items()
            for p in range(partitions)
            if name not in listed or p not in listed[name].partitions or listed[name].partitions[p].leader < 0
        ]
        if not waiting:
            return
        assert time.monotonic() < deadline, f"no leader for {waiting} on {bootstrap}"
        time.sleep(0.1)


def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    """The topic's explicitly set configs (DescribeConfigs, source DYNAMIC_TOPIC_CONFIG)."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
    entries = future.result(30)
    return {k: e.value for k, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def produce(bootstrap: str, topic: str, count: int, *, tag: str) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    """``count`` keyed records per codec from librdkafka's idempotent producer; where each landed."""
    from confluent_kafka import Producer

    landed: dict[tuple[int, int], tuple[bytes, bytes]] = {}
    for codec in CODECS:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "compression.codec": codec,
                "linger.ms": 5,
            }
        )
        errors = []

        def delivered(err, msg):
            if err is not None:
                errors.append(err)
            else:
                landed[(msg.partition(), msg.offset())] = (msg.key(), msg.value())

        for i in range(count):
            producer.produce(
                topic, key=f"{tag}-{codec}-{i}".encode(), value=f"{codec}:{i}".encode() * 3, on_delivery=delivered
            )
        assert producer.flush(30) == 0, "records left undelivered"
        assert not errors, errors
    return landed


def read_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60.0):
    """Every record of the topic from the beginning, {(partition, offset): (key, value)}."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: dict[tuple[int, int], tuple[bytes, bytes]] = {}
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                pytest.fail(f"consumer error: {msg.error()}")
            out[(msg.partition(), msg.offset())] = (msg.key(), msg.value())
        return out
    finally:
        consumer.close()


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``offsets`` ({(topic, partition): offset}) for ``group`` (librdkafka, synchronous)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    loading = {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    }

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                done = consumer.commit(
                    offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
                )
                break
            except KafkaException as exc:  # the coordinator of a new __consumer_offsets is still loading
                if exc.args[0].code() not in loading or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        assert all(tp.error is None for tp in done), done
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The group's committed offsets (OffsetFetch) of ``partitions``; -1001 where none."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=30)
        return {(tp.topic, tp.partition): tp.offset for tp in found}
    finally:
        consumer.close()


def set_broker_default(bootstrap: str, key: str, value: str) -> None:
    """IncrementalAlterConfigs SET of a cluster-wide dynamic broker default (resource "", which librdkafka's
    admin client does not send), over kafkawire's protocol codecs."""
    import socket
    import struct

    from kafkawire.protocol import decode_response, encode_request, message_class, request_header

    R = message_class("IncrementalAlterConfigsRequest")
    body = R(
        resources=[
            R.AlterConfigsResource(
                resource_type=4,
                resource_name="",
                configs=[R.AlterableConfig(name=key, config_operation=0, value=value)],
            )
        ],
        validate_only=False,
    )
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(encode_request(request_header(body.api_key, 1, 1, "kafka-dir"), body))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        data = s.recv(size, socket.MSG_WAITALL)
    (result,) = decode_response(data, body.api_key, 1, framed=False).body.responses
    assert result.error_code == 0, result


def broker_config(bootstrap: str, key: str) -> tuple[str, str]:
    """(value, source name) of a config of broker 1 (DescribeConfigs)."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource("broker", "1")]).values()
    entry = future.result(30)[key]
    return entry.value, ConfigSource(entry.source).name
