"""``__consumer_offsets`` itself: when it appears, the configs it has, and the groups after it is deleted.

Runs on kafkawire and on Apache Kafka 4.4 (a private node: the test deletes the offsets topic)."""

from __future__ import annotations

import time

import pytest

from kafkawire.protocol import errors
from kafkawire.protocol.messages import (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)

from .test_wire_groups import COORDINATOR_NOT_READY, stable_member
from .wire import WireClient

TOPIC = "__consumer_offsets"


def _metadata(c):
    t = c.call(
        "Metadata", 12, topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False
    ).topics[0]
    return t.error_code, len(t.partitions), t.is_internal


def _find(c, group, timeout=60.0):
    """FindCoordinator until it answers (Kafka: COORDINATOR_NOT_AVAILABLE while it creates the topic)."""
    deadline = time.monotonic() + timeout
    while True:
        r = c.call("FindCoordinator", 4, key_type=0, coordinator_keys=[group]).coordinators[0]
        if r.error_code == 0:
            return
        assert r.error_code == errors.COORDINATOR_NOT_AVAILABLE and time.monotonic() < deadline, r
        time.sleep(0.2)


def _retry(fn, timeout=60.0):
    """fn() -> (error, value) until the coordinator is loaded; returns (error, value)."""
    deadline = time.monotonic() + timeout
    while True:
        err, value = fn()
        if err not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
            return err, value
        time.sleep(0.2)


def _commit(c, group, topic, offset):
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestPartition
    r = c.call(
        "OffsetCommit",
        8,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[T(name=topic, partitions=[P(partition_index=0, committed_offset=offset, committed_metadata="")])],
    )
    return r.topics[0].partitions[0].error_code, None


def _fetch(c, group, topic):
    r = c.call(
        "OffsetFetch",
        7,
        group_id=group,
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])],
    )
    return r.error_code, (r.topics[0].partitions[0].committed_offset if r.topics else None)


def _topic_overrides(c):
    r = c.call(
        "DescribeConfigs",
        4,
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=2, resource_name=TOPIC, configuration_keys=None
            )
        ],
        include_synonyms=False,
        include_documentation=False,
    ).results[0]
    assert r.error_code == 0
    return {cf.name: cf.value for cf in r.configs if cf.config_source == 1}  # 1: DYNAMIC_TOPIC_CONFIG


@pytest.mark.restarts_broker  # a private Kafka node: the offsets topic is deleted
def test_offsets_topic_created_by_find_coordinator_and_recreated_after_deletion(broker):
    c = WireClient("127.0.0.1", broker.port)
    try:
        c.call(
            "CreateTopics",
            7,
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name="wt", num_partitions=3, replication_factor=1, assignments=[], configs=[]
                )
            ],
            timeout_ms=30000,
        )
        # a fresh broker has no offsets topic until a client looks for a group coordinator
        assert _metadata(c)[0] == errors.UNKNOWN_TOPIC_OR_PARTITION
        _find(c, "offsets-topic-g")
        err, partitions, internal = _metadata(c)
        assert err == 0 and partitions >= 1 and internal
        # Kafka's configs for it, as topic overrides (compacted: retention.ms does not apply)
        assert _topic_overrides(c) == {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": "104857600",
        }
        assert _retry(lambda: _commit(c, "offsets-topic-g", "wt", 42))[0] == 0
        assert _retry(lambda: _fetch(c, "offsets-topic-g", "wt")) == (0, 42)
        member, generation = stable_member(c, "offsets-topic-classic")

        # Both brokers let an admin delete it; the groups and their offsets go with it
        r = c.call("DeleteTopics", 6, topics=[DeleteTopicsRequest.DeleteTopicState(name=TOPIC)], timeout_ms=30000)
        assert [x.error_code for x in r.responses] == [0]
        deadline = time.monotonic() + 30
        while _metadata(c)[0] == 0:  # Kafka deletes asynchronously
            assert time.monotonic() < deadline
            time.sleep(0.2)
        # ...and the coordinator keeps serving: the topic comes back with the next FindCoordinator
        _find(c, "offsets-topic-g")
        assert _metadata(c)[0] == 0
        assert _retry(lambda: _fetch(c, "offsets-topic-g", "wt")) == (0, -1)
        hb = _retry(
            lambda: (
                c.call(
                    "Heartbeat", 4, group_id="offsets-topic-classic", generation_id=generation, member_id=member
                ).error_code,
                None,
            )
        )
        assert hb[0] == errors.UNKNOWN_MEMBER_ID
        listed = c.call("ListGroups", 4, states_filter=[]).groups
        assert not {"offsets-topic-g", "offsets-topic-classic"} & {g.group_id for g in listed}
        assert _retry(lambda: _commit(c, "offsets-topic-g", "wt", 43))[0] == 0
        assert _retry(lambda: _fetch(c, "offsets-topic-g", "wt")) == (0, 43)
        assert stable_member(c, "offsets-topic-classic")[0]
        assert _topic_overrides(c) == {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": "104857600",
        }
    finally:
        c.close()
