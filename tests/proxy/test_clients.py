"""Real clients through the proxy, to kafkawire's broker and to the reference Apache Kafka 4.4: librdkafka
(confluent-kafka), kafka-python and kafkawire's own client produce and consume; a group consumer finds
its coordinator through a rewritten FindCoordinator. The clients only ever learn the proxy's addresses,
so every Produce and Fetch the upstream answers passed through the proxy and is in its report."""

from __future__ import annotations

import time

from .harness import ProxyThread

N = 20


def _values(prefix: str) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(N)]


def _assert_went_through(proxy: ProxyThread, upstream: str) -> None:
    r = proxy.reporter
    assert proxy.proxy.broker_ports, "no broker port was handed out"
    metadata = r.named("Metadata")
    assert metadata and all(e.rewritten for e in metadata if not e.problem)
    for e in metadata:
        for _node, _before, after in e.rewritten:
            assert after.startswith("127.0.0.1:") and int(after.rsplit(":", 1)[1]) in proxy.proxy.broker_ports.values()
    assert r.named("Produce") and r.named("Fetch")
    assert not [e.problem for e in r.exchanges if e.problem and "no response before" not in e.problem]


def test_confluent_kafka_produces_and_consumes_through_the_proxy(upstream, new_topic):
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = new_topic()
    with ProxyThread(upstream) as proxy:
        producer = Producer({"bootstrap.servers": proxy.bootstrap, "linger.ms": 5})
        for v in _values("ck"):
            producer.produce(topic, v)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": "unused", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < N and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        consumer.close()
        assert got == _values("ck")
    _assert_went_through(proxy, upstream)


def test_kafka_python_produces_and_consumes_through_the_proxy(upstream, new_topic):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = new_topic()
    with ProxyThread(upstream) as proxy:
        producer = KafkaProducer(bootstrap_servers=proxy.bootstrap)
        for v in _values("kp"):
            producer.send(topic, v)
        producer.flush(30)
        producer.close()
        consumer = KafkaConsumer(
            bootstrap_servers=proxy.bootstrap, consumer_timeout_ms=10_000, enable_auto_commit=False
        )
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        got = []
        for m in consumer:
            got.append(m.value)
            if len(got) == N:
                break
        consumer.close()
        assert got == _values("kp")
    _assert_went_through(proxy, upstream)


def test_kafkawire_client_produces_and_consumes_through_the_proxy(upstream, new_topic):
    from kafkawire.client import Consumer, Producer

    topic = new_topic()
    with ProxyThread(upstream) as proxy:
        with Producer(proxy.bootstrap) as producer:
            for v in _values("kw"):
                producer.produce(topic, v)
            producer.flush()
        got: list[bytes] = []
        with Consumer(proxy.bootstrap) as consumer:
            consumer.assign([(topic, 0)], offset="earliest")
            deadline = time.monotonic() + 30
            while len(got) < N and time.monotonic() < deadline:
                got.extend(r.value for r in consumer.poll(timeout=0.5))
        assert got == _values("kw")
    _assert_went_through(proxy, upstream)


def test_group_consumer_finds_its_coordinator_through_the_proxy(upstream, new_topic):
    from confluent_kafka import Consumer, Producer

    topic = new_topic()
    with ProxyThread(upstream) as proxy:
        producer = Producer({"bootstrap.servers": proxy.bootstrap})
        for v in _values("g"):
            producer.produce(topic, v)
        assert producer.flush(30) == 0
        consumer = Consumer(
            {"bootstrap.servers": proxy.bootstrap, "group.id": f"group-{topic}", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < N and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        consumer.commit(asynchronous=False)
        consumer.close()
        assert sorted(got) == sorted(_values("g"))
        found = [e for e in proxy.reporter.named("FindCoordinator") if e.rewritten]
        assert found, [(e.api_version, e.response_summary) for e in proxy.reporter.named("FindCoordinator")]
        # the group's requests went to the coordinator's local port, through the proxy
        assert (
            proxy.reporter.named("OffsetCommit")
            or proxy.reporter.named("ConsumerGroupHeartbeat")
            or proxy.reporter.named("JoinGroup")
        )
    _assert_went_through(proxy, upstream)
