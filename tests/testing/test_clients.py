"""confluent-kafka, kafka-python, aiokafka and kafkawire's own client, each producing and consuming through the
plugin's fixtures, in a test file run with ``pytester`` (the same code as the README's "Testing with kafkawire")."""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

CONFLUENT = """
    from confluent_kafka import Consumer, Producer, TopicPartition

    def test_round_trip(kafka_broker, kafka_topic):
        p = Producer({"bootstrap.servers": kafka_broker.bootstrap})
        for i in range(10):
            p.produce(kafka_topic, key=b"k", value=b"v%d" % i)
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "t",
                      "auto.offset.reset": "earliest"})
        c.assign([TopicPartition(kafka_topic, 0, 0)])
        got = []
        for _ in range(20):
            got += [m.value() for m in c.consume(10, 1.0) if m.error() is None]
            if len(got) >= 10:
                break
        c.close()
        assert got == [b"v%d" % i for i in range(10)]
"""

KAFKA_PYTHON = """
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    def test_round_trip(kafka_broker, kafka_topic):
        p = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
        for i in range(10):
            p.send(kafka_topic, key=b"k", value=b"v%d" % i)
        p.flush(30)
        p.close()
        c = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, auto_offset_reset="earliest")
        c.assign([TopicPartition(kafka_topic, 0)])
        got = []
        for _ in range(20):
            got += [r.value for recs in c.poll(1000).values() for r in recs]
            if len(got) >= 10:
                break
        c.close()
        assert got == [b"v%d" % i for i in range(10)]
"""

AIOKAFKA = """
    import asyncio
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    def test_round_trip(kafka_broker, kafka_topic):
        async def main():
            async with AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap) as p:
                for i in range(10):
                    await p.send_and_wait(kafka_topic, b"v%d" % i, key=b"k")
            async with AIOKafkaConsumer(bootstrap_servers=kafka_broker.bootstrap,
                                        auto_offset_reset="earliest") as c:
                c.assign([TopicPartition(kafka_topic, 0)])
                got = []
                for _ in range(20):
                    batch = await c.getmany(timeout_ms=1000)
                    got += [r.value for recs in batch.values() for r in recs]
                    if len(got) >= 10:
                        break
            return got

        assert asyncio.run(main()) == [b"v%d" % i for i in range(10)]
"""

KAFKAWIRE = """
    from kafkawire.client import Consumer, Producer

    def test_round_trip(kafka_broker, kafka_topic):
        with Producer(kafka_broker.bootstrap) as p:
            for i in range(10):
                p.produce(kafka_topic, b"v%d" % i, key=b"k")
            p.flush(30)
        with Consumer(kafka_broker.bootstrap) as c:
            c.assign([(kafka_topic, 0)], offset="earliest")
            got = []
            for _ in range(20):
                got += [r.value for r in c.poll(1.0)]
                if len(got) >= 10:
                    break
        assert got == [b"v%d" % i for i in range(10)]
"""


@pytest.mark.parametrize(
    "client,source",
    [("confluent_kafka", CONFLUENT), ("kafka", KAFKA_PYTHON), ("aiokafka", AIOKAFKA), ("kafkawire", KAFKAWIRE)],
    ids=["confluent-kafka", "kafka-python", "aiokafka", "kafkawire"],
)
def test_client_round_trip_through_the_fixtures(pytester, client, source):
    pytest.importorskip(client)
    pytester.makepyfile(test_it=textwrap.dedent(source))
    # a process of its own, as a user's test run (and no asyncio state left by the other clients' runs)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
