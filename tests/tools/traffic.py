"""Real client traffic for the capture tests: confluent-kafka and kafka-python against one broker.

Each scenario produces to and consumes from its own topic and returns what it
read, so that a capture that decodes is also a capture of traffic that worked.
kafka-python also runs pinned to old protocol versions (``api_version``), the
ones Wireshark's Kafka dissector decodes field by field.
"""

from __future__ import annotations

import time

N_RECORDS = 6


def _values(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() * (1 + 40 * (i % 2)) for i in range(N_RECORDS)]  # some compress well


def confluent(bootstrap: str, topic: str, compression: str = "lz4") -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "ck-admin"})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(10)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "client.id": "ck-producer", "linger.ms": 5, "compression.type": compression}
    )
    for i, value in enumerate(_values("ck")):
        producer.produce(topic, key=b"key-%d" % i, value=value, partition=i % 2, headers=[("h", b"%d" % i)])
    assert producer.flush(15) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ck-group-{topic}",
            "client.id": "ck-consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < N_RECORDS and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    return got


def kafka_python(bootstrap: str, topic: str, api_version=None, compression: str | None = "gzip") -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    pinned = {} if api_version is None else {"api_version": api_version}
    tag = "kp" if api_version is None else "kp" + "".join(map(str, api_version))
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, client_id=f"{tag}-producer", compression_type=compression, linger_ms=5, **pinned
    )
    futures = [
        producer.send(topic, key=b"key-%d" % i, value=value, partition=0) for i, value in enumerate(_values(tag))
    ]
    for f in futures:
        f.get(timeout=15)
    producer.close(timeout=10)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        client_id=f"{tag}-consumer",
        group_id=f"{tag}-group-{topic}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=15000,
        **pinned,
    )
    got = []
    deadline = time.monotonic() + 30
    while len(got) < N_RECORDS and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
    consumer.commit()
    consumer.close()
    return got


def error_round_trips(bootstrap: str, existing_topic: str, missing_topic: str) -> dict[str, str]:
    """Admin requests the broker answers with error codes; returns what each client reported."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.admin import KafkaAdminClient, NewTopic as KpNewTopic
    from kafka.errors import KafkaError as KpError

    seen = {}
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "ck-errors"})
    for name, future in (
        ("ck create existing", admin.create_topics([NewTopic(existing_topic, 1, 1)])[existing_topic]),
        ("ck delete missing", admin.delete_topics([missing_topic], operation_timeout=5)[missing_topic]),
    ):
        try:
            future.result(10)
            seen[name] = "no error"
        except Exception as exc:  # the client's exception carries the broker's error code
            seen[name] = str(exc)
    kp = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp10-errors", api_version=(1, 0))
    try:
        kp.create_topics([KpNewTopic(existing_topic, 1, 1)])
        seen["kp create existing"] = "no error"
    except KpError as exc:
        seen["kp create existing"] = type(exc).__name__
    finally:
        kp.close()
    return seen
