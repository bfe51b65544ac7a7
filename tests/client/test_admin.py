"""Admin operations against the broker; errors surface as KafkaError with Kafka's names and codes."""

from __future__ import annotations

import pytest

from kafkawire.client import KafkaError, NewTopic
from kafkawire.client.admin import RESOURCE_BROKER

from .helpers import T0, confluent_produce


def test_create_describe_list_delete(admin, topic):
    results = admin.create_topics([NewTopic(topic, 3, 1, {"cleanup.policy": "compact"})])
    assert results == {topic: None}
    assert topic in admin.list_topics()
    info = admin.describe_topics([topic])[topic]
    assert info.num_partitions == 3
    assert sorted(info.partitions) == [0, 1, 2]
    assert all(p.leader >= 0 and p.leader in p.replicas for p in info.partitions.values())
    assert info.topic_id.int != 0

    with pytest.raises(KafkaError) as exc:
        admin.create_topics([NewTopic(topic, 1)])
    assert exc.value.name == "TOPIC_ALREADY_EXISTS" and exc.value.code == 36 and not exc.value.retriable

    assert admin.delete_topics([topic]) == {topic: None}
    assert topic not in admin.list_topics()
    with pytest.raises(KafkaError) as exc:
        admin.describe_topics([topic])
    assert exc.value.name == "UNKNOWN_TOPIC_OR_PARTITION" and exc.value.code == 3


def test_per_topic_results_without_raising(admin, topic):
    admin.create_topics([topic + "-a"])
    results = admin.create_topics([topic + "-a", topic + "-b"], raise_errors=False)
    assert results[topic + "-a"].name == "TOPIC_ALREADY_EXISTS"
    assert results[topic + "-b"] is None
    results = admin.delete_topics([topic + "-b", topic + "-missing"], raise_errors=False)
    assert results[topic + "-b"] is None
    assert results[topic + "-missing"].code == 3


def test_invalid_partition_count_is_reported(admin, topic, tansu_gap):
    tansu_gap("accepts a topic with 0 partitions")
    with pytest.raises(KafkaError) as exc:
        admin.create_topics([NewTopic(topic, 0)])
    assert exc.value.name == "INVALID_PARTITIONS"


def test_describe_configs(admin, topic, tansu_gap):
    tansu_gap("DescribeConfigs answers no configs")
    admin.create_topics([NewTopic(topic, 1, -1, {"retention.ms": "123456"})])
    configs = admin.describe_configs(topic)
    assert configs["retention.ms"] == "123456"
    assert "cleanup.policy" in configs
    some = admin.describe_configs(topic, keys=["retention.ms"])
    assert some == {"retention.ms": "123456"}
    brokers = admin.describe_cluster()["brokers"]
    assert admin.describe_configs(str(brokers[0].node_id), resource_type=RESOURCE_BROKER)


def test_list_offsets(admin, bootstrap, topic, tansu_gap):
    tansu_gap("ListOffsets latest is the last batch's base offset + 1")
    admin.create_topics([NewTopic(topic, 2)])
    records = [{"key": None, "value": b"x", "headers": [], "timestamp": T0 + 100 * i} for i in range(10)]
    confluent_produce(bootstrap, topic, records, partition=1)
    offsets = admin.list_offsets({(topic, 0): "earliest", (topic, 1): "earliest"})
    assert offsets[(topic, 0)].offset == 0 and offsets[(topic, 1)].offset == 0
    offsets = admin.list_offsets({(topic, 0): "latest", (topic, 1): "latest"})
    assert offsets[(topic, 0)].offset == 0 and offsets[(topic, 1)].offset == 10
    found = admin.list_offsets({(topic, 1): T0 + 250})[(topic, 1)]
    assert (found.offset, found.timestamp) == (3, T0 + 300)
    assert admin.list_offsets({(topic, 1): T0 + 10_000})[(topic, 1)].offset == -1
    assert admin.list_offsets({(topic, 1): "max_timestamp"})[(topic, 1)].offset == 9
    with pytest.raises(KafkaError) as exc:
        admin.list_offsets({(topic, 7): "earliest"})
    assert exc.value.name == "UNKNOWN_TOPIC_OR_PARTITION"


def test_api_versions_and_cluster(admin):
    versions = admin.api_versions()
    assert 18 in versions and versions[18][0] == 0
    assert {0, 1, 2, 3} <= set(versions)
    cluster = admin.describe_cluster()
    assert cluster["brokers"] and cluster["cluster_id"]
