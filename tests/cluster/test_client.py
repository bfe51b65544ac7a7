"""kafkawire's client against a three-broker Kafka 4.4 cluster: metadata, failover, no loss, no duplicates.

The cluster (``conftest.kafka_cluster``) has replication factor 3 and ``min.insync.replicas=2``, so
one node may stop at any time without losing a record acknowledged with ``acks=all``; the tests stop
or kill the leader of a partition while the client is using it.
"""

from __future__ import annotations

import threading
import time

import pytest

from kafkawire.client import Admin, Consumer, NewTopic, Producer
from kafkawire.client.admin import RESOURCE_BROKER

from .conftest import node_down, wait_until

pytestmark = pytest.mark.kafka_cluster


def create(cluster, name: str, partitions: int = 6) -> dict:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 3, {"min.insync.replicas": "2"})])
        return wait_until(
            lambda: (
                (info := admin.describe_topics([name])[name])
                and len(info.partitions) == partitions
                and all(len(p.isr) == 3 for p in info.partitions.values())
                and info
            ),
            60,
            f"{name} fully replicated",
        )


def read_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60.0) -> list:
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, p) for p in range(partitions)], offset="earliest")
        records: list = []
        deadline = time.monotonic() + timeout
        while len(records) < expected and time.monotonic() < deadline:
            records += consumer.poll(timeout=1.0)
        records += consumer.poll(timeout=1.0)  # anything beyond ``expected`` is a duplicate the test must see
        return records


def test_metadata_lists_every_broker_and_spreads_leaders(kafka_cluster, topic_name):
    info = create(kafka_cluster, topic_name)
    with Admin(kafka_cluster.bootstrap) as admin:
        described = admin.describe_cluster()
    assert [b.node_id for b in described["brokers"]] == [1, 2, 3]
    assert {(b.host, b.port) for b in described["brokers"]} == {(n.host, n.port) for n in kafka_cluster.nodes}
    assert described["controller_id"] in (1, 2, 3)
    assert {p.leader for p in info.partitions.values()} == {1, 2, 3}
    assert all(sorted(p.replicas) == [1, 2, 3] for p in info.partitions.values())


def test_admin_describes_config_on_the_broker_that_owns_it(kafka_cluster, topic_name):
    create(kafka_cluster, topic_name, partitions=1)
    with Admin(kafka_cluster.bootstrap) as admin:
        assert admin.describe_configs(topic_name)["min.insync.replicas"] == "2"
        for node in kafka_cluster.nodes:  # a broker's config is answered by that broker only
            broker = admin.describe_configs(str(node.node_id), resource_type=RESOURCE_BROKER)
            assert f"PLAINTEXT://{node.host}:{node.port}" in broker["listeners"]


@pytest.mark.parametrize("kill", [False, True], ids=["stopped", "killed"])
def test_idempotent_producer_across_a_leader_restart(kafka_cluster, topic_name, kill):
    """Every acknowledged record is there once, in order, though the leader of partition 0 went away."""
    partitions = 3
    info = create(kafka_cluster, topic_name, partitions)
    leader = info.partitions[0].leader
    acked = threading.Event()
    failover_over = threading.Event()
    failures: list = []
    futures: list = []

    def produce():
        # records flow before, during and after the failover (bounded: 60 s, 30,000 records)
        with Producer(kafka_cluster.bootstrap, enable_idempotence=True, linger_ms=2, delivery_timeout=90) as p:
            deadline = time.monotonic() + 60
            after = None
            for i in range(30000):
                futures.append(p.produce(topic_name, b"%d" % i, key=b"%d" % i, partition=i % partitions))
                if i == 300:
                    futures[0].result(30)
                    acked.set()
                if i % 100 == 0:
                    time.sleep(0.05)
                    if failover_over.is_set() and after is None:
                        after = i + 1000
                if i == after or time.monotonic() > deadline:
                    break
            p.flush(120)
        failures.extend(f.exception() for f in futures if f.exception() is not None)

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        assert acked.wait(60), "nothing acknowledged before the failover"
        with node_down(kafka_cluster, leader, kill=kill):
            time.sleep(2)
    finally:
        failover_over.set()
        producer.join(180)
    assert not producer.is_alive()
    assert failures == []
    total = len(futures)
    assert total > 1300
    records = read_all(kafka_cluster.bootstrap, topic_name, partitions, total)
    values = [int(r.value) for r in records]
    assert len(values) == total and set(values) == set(range(total))
    for p in range(partitions):  # in each partition, in the order they were produced
        ours = [int(r.value) for r in records if r.partition == p]
        assert ours == sorted(ours)


def test_consumer_follows_the_new_leader(kafka_cluster, topic_name):
    """A consumer reading a partition whose leader stops goes on from the new leader without a gap."""
    info = create(kafka_cluster, topic_name, partitions=1)
    leader = info.partitions[0].leader
    with Producer(kafka_cluster.bootstrap) as producer:
        for i in range(2000):
            producer.produce(topic_name, b"%d" % i, partition=0)
        producer.flush(60)
    with Consumer(kafka_cluster.bootstrap, max_partition_fetch_bytes=4096) as consumer:
        consumer.assign([(topic_name, 0)], offset="earliest")
        seen: list[int] = []
        while len(seen) < 500:
            seen += [int(r.value) for r in consumer.poll(timeout=1.0)]
        with node_down(kafka_cluster, leader):
            deadline = time.monotonic() + 60
            while len(seen) < 2000 and time.monotonic() < deadline:
                seen += [int(r.value) for r in consumer.poll(timeout=1.0)]
    assert seen == list(range(2000))
