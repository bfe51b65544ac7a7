"""KIP-320 in kafkawire's consumer: a log truncated under it by an unclean leader election is detected with
OffsetForLeaderEpoch and the consumer goes back to where the logs diverge, as the Java consumer does.

Replicas A and B, ``unclean.leader.election.enable``: B stops, A takes records 0-99 alone (``min.insync.replicas=1``)
and the consumer reads them; A is killed, B comes back and is elected uncleanly with an empty log, and takes 50
new records at offsets 0-49. The consumer's position (100) is past B's log end: without the epoch check Kafka
answers OFFSET_OUT_OF_RANGE and ``auto_offset_reset="latest"`` would skip the 50 new records; with it the
consumer learns the epoch it read ended at offset 0 on B, and reads them.
"""

from __future__ import annotations

import time

import pytest

from kafkawire.client import Admin, Consumer, NewTopic, Producer
from kafkawire.client.admin import UNCLEAN

from .conftest import wait_until

pytestmark = pytest.mark.kafka_cluster


def partition(bootstrap: str, topic: str):
    with Admin(bootstrap) as admin:
        return admin.describe_topics([topic])[topic].partitions[0]


def elect_unclean(bootstrap: str, topic: str) -> str:
    """The unclean election's answer for the partition: "elected", or its error's name."""
    with Admin(bootstrap) as admin:
        error = admin.elect_leaders(UNCLEAN, [(topic, 0)])[(topic, 0)]
    return "elected" if error is None else error.name


def test_consumer_goes_back_to_the_divergence_point(kafka_cluster, topic_name):
    with Admin(kafka_cluster.bootstrap) as admin:
        admin.create_topics(
            [NewTopic(topic_name, 1, 2, {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})]
        )
    first = wait_until(lambda: (p := partition(kafka_cluster.bootstrap, topic_name)).leader >= 0 and p, 30, "a leader")
    a, b = first.leader, next(r for r in first.replicas if r != first.leader)
    node_a, node_b = kafka_cluster.node(a), kafka_cluster.node(b)
    others = [n for n in kafka_cluster.nodes if n.node_id not in (a, b)]
    bootstrap_rest = ",".join(n.bootstrap for n in others)
    try:
        node_b.stop()
        wait_until(lambda: partition(bootstrap_rest, topic_name).isr == [a], 60, f"ISR shrunk to [{a}]")
        with Producer(kafka_cluster.bootstrap) as producer:
            for i in range(100):
                producer.produce(topic_name, b"old-%d" % i, partition=0)
            producer.flush(60)
        with Consumer(kafka_cluster.bootstrap, auto_offset_reset="latest") as consumer:
            consumer.assign([(topic_name, 0)], offset="earliest")
            seen: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(seen) < 100 and time.monotonic() < deadline:
                seen += [r.value for r in consumer.poll(timeout=1.0)]
            assert len(seen) == 100

            node_a.kill()
            node_b.restart()
            wait_until(
                lambda: elect_unclean(bootstrap_rest, topic_name) in ("elected", "ELECTION_NOT_NEEDED"),
                60,
                "an unclean election",
            )
            wait_until(lambda: partition(bootstrap_rest, topic_name).leader == b, 60, f"{b} leading")
            with Producer(bootstrap_rest) as producer:
                for i in range(50):
                    producer.produce(topic_name, b"new-%d" % i, partition=0)
                producer.flush(60)
            after: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(after) < 50 and time.monotonic() < deadline:
                after += [r.value for r in consumer.poll(timeout=1.0)]
        assert after == [b"new-%d" % i for i in range(50)]
    finally:
        for node in (node_a, node_b):
            if node.proc is None:
                node.restart()
        kafka_cluster.wait_all_brokers()
