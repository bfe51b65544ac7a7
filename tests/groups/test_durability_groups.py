"""Committed offsets and group state survive a broker that is SIGKILLed (no clean shutdown)."""

from __future__ import annotations

import confluent_kafka as ck
import pytest

from .harness import create_topic, produce, wait_for

COORDINATOR_NOT_READY = (
    ck.KafkaError.NOT_COORDINATOR,
    ck.KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    ck.KafkaError.COORDINATOR_NOT_AVAILABLE,
)


@pytest.mark.restarts_broker
def test_offsets_survive_broker_sigkill(broker, topic):
    create_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, list(range(30)), 3)
    group = f"dur-{topic}"
    c = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    c.subscribe([topic])
    seen = []

    def consume():
        m = c.poll(0.2)
        if m is not None and not m.error():
            seen.append(m)
        return len(seen) >= 30

    wait_for(consume, 30, "30 records")
    c.commit(asynchronous=False, offsets=[ck.TopicPartition(topic, p, 10 - p, "meta-%d" % p) for p in range(3)])
    c.close()
    broker.kill()
    broker.start()
    c2 = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:

        def committed():
            # Kafka's coordinator answers NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS while it replays
            # __consumer_offsets after the restart: retriable errors in Kafka's protocol (librdkafka does not
            # flag them retriable on committed()), so the scenario retries them as a client must.
            try:
                return c2.committed([ck.TopicPartition(topic, p) for p in range(3)], timeout=5)
            except ck.KafkaException as exc:
                if exc.args[0].retriable() or exc.args[0].code() in COORDINATOR_NOT_READY:
                    return None
                raise

        got = wait_for(committed, 30, "the committed offsets after the restart")
        assert [(tp.partition, tp.offset, tp.metadata) for tp in got] == [(p, 10 - p, "meta-%d" % p) for p in range(3)]
    finally:
        c2.close()
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups().result(20)
    assert group in [g.group_id for g in listed.valid]
    # the coordinator's log is listed, as Kafka lists it
    assert "__consumer_offsets" in admin.list_topics(timeout=10).topics
