"""The versions Kafka 4.0 removed (KIP-896) that kafkawire still serves, for old clients.

Kafka 4.4 advertises these APIs from a higher min_version; kafkawire advertises them from v0 (the
conformance suite's explained.toml records the difference). Each removed version is exercised here
with a request that must succeed, so that advertising it stays true. Produce v0-2, Fetch v0-3,
ListOffsets v0, CreateTopics v0-1, DescribeConfigs v0, DescribeLogDirs v0, the ACL APIs v0 and
OffsetCommit v0-1 have their own tests as well (test_produce_fetch.py, test_admin.py, tests/groups)."""

from __future__ import annotations

import pytest

from kafkawire.protocol import errors, message_class

from .conftest import msg
from .helpers import batch, create_topic, fetch_request, produce_request, values_of

# API -> Kafka 4.4's advertised min_version
KAFKA_MIN = {
    "Fetch": 4,
    "ListOffsets": 1,
    "OffsetCommit": 2,
    "OffsetFetch": 1,
    "CreateTopics": 2,
    "DeleteTopics": 1,
    "OffsetForLeaderEpoch": 2,
    "DescribeAcls": 1,
    "CreateAcls": 1,
    "DeleteAcls": 1,
    "DescribeConfigs": 1,
    "DescribeLogDirs": 1,
}
REMOVED = [(name, v) for name, lo in KAFKA_MIN.items() for v in range(lo)]


def test_removed_versions_are_advertised(client):
    from kafkawire.protocol import api_by_name

    res = client.call(msg("ApiVersionsRequest", client_software_name="t", client_software_version="1"), 3)
    mins = {k.api_key: k.min_version for k in res.api_keys}
    assert {name: mins[api_by_name(name).key] for name in KAFKA_MIN} == dict.fromkeys(KAFKA_MIN, 0)


@pytest.mark.parametrize("name,version", REMOVED, ids=lambda x: str(x))
def test_removed_version_is_served(client, name, version):
    topic = f"rv-{name.lower()}-{version}"
    create_topic(client, topic)
    client.call(produce_request(topic, 0, batch([b"a", b"b"])), 9)
    if name == "Fetch":
        res = client.call(fetch_request([(topic, 0, 0)]), version)
        p = res.responses[0].partitions[0]
        assert p.error_code == 0 and p.high_watermark == 2 and values_of(p.records) == [b"a", b"b"]
    elif name == "ListOffsets":
        R = message_class("ListOffsetsRequest")
        res = client.call(
            R(
                replica_id=-1,
                topics=[
                    R.ListOffsetsTopic(
                        name=topic,
                        partitions=[R.ListOffsetsPartition(partition_index=0, timestamp=-1, max_num_offsets=1)],
                    )
                ],
            ),
            version,
        )
        p = res.topics[0].partitions[0]
        assert (p.error_code, p.old_style_offsets) == (0, [2])
    elif name == "OffsetCommit":
        R = message_class("OffsetCommitRequest")
        res = client.call(
            R(
                group_id=f"{topic}-g",
                generation_id_or_member_epoch=-1,
                member_id="",
                topics=[
                    R.OffsetCommitRequestTopic(
                        name=topic, partitions=[R.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)]
                    )
                ],
            ),
            version,
        )
        assert res.topics[0].partitions[0].error_code == 0
        F = message_class("OffsetFetchRequest")
        got = client.call(
            F(group_id=f"{topic}-g", topics=[F.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]), 1
        )
        assert got.topics[0].partitions[0].committed_offset == 1
    elif name == "OffsetFetch":
        C = message_class("OffsetCommitRequest")
        client.call(
            C(
                group_id=f"{topic}-g",
                generation_id_or_member_epoch=-1,
                member_id="",
                topics=[
                    C.OffsetCommitRequestTopic(
                        name=topic, partitions=[C.OffsetCommitRequestPartition(partition_index=0, committed_offset=2)]
                    )
                ],
            ),
            2,
        )
        F = message_class("OffsetFetchRequest")
        res = client.call(
            F(group_id=f"{topic}-g", topics=[F.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]), version
        )
        p = res.topics[0].partitions[0]
        assert (p.error_code, p.committed_offset) == (0, 2)
    elif name == "CreateTopics":
        R = message_class("CreateTopicsRequest")
        res = client.call(
            R(topics=[R.CreatableTopic(name=f"{topic}-new", num_partitions=2, replication_factor=1)], timeout_ms=5000),
            version,
        )
        assert res.topics[0].error_code == 0
    elif name == "DeleteTopics":
        R = message_class("DeleteTopicsRequest")
        res = client.call(R(topic_names=[topic, f"{topic}-missing"], timeout_ms=5000), version)
        assert [(r.name, r.error_code) for r in res.responses] == [
            (topic, 0),
            (f"{topic}-missing", errors.UNKNOWN_TOPIC_OR_PARTITION),
        ]
    elif name == "OffsetForLeaderEpoch":
        R = message_class("OffsetForLeaderEpochRequest")
        res = client.call(
            R(
                topics=[
                    R.OffsetForLeaderTopic(
                        topic=topic, partitions=[R.OffsetForLeaderPartition(partition=0, leader_epoch=0)]
                    )
                ]
            ),
            version,
        )
        p = res.topics[0].partitions[0]
        assert (p.error_code, p.end_offset) == (0, 2)
    elif name == "DescribeAcls":
        R = message_class("DescribeAclsRequest")
        res = client.call(R(resource_type_filter=1, operation=1, permission_type=1), version)
        assert res.error_code == errors.SECURITY_DISABLED  # as Kafka answers without an authorizer
    elif name == "CreateAcls":
        R = message_class("CreateAclsRequest")
        res = client.call(
            R(
                creations=[
                    R.AclCreation(
                        resource_type=2, resource_name="t", principal="User:a", host="*", operation=3, permission_type=3
                    )
                ]
            ),
            version,
        )
        assert res.results[0].error_code == errors.SECURITY_DISABLED
    elif name == "DeleteAcls":
        R = message_class("DeleteAclsRequest")
        res = client.call(
            R(
                filters=[
                    R.DeleteAclsFilter(
                        resource_type_filter=2,
                        resource_name_filter="t",
                        principal_filter=None,
                        host_filter=None,
                        operation=3,
                        permission_type=3,
                    )
                ]
            ),
            version,
        )
        assert res.filter_results[0].error_code == errors.SECURITY_DISABLED
    elif name == "DescribeConfigs":
        R = message_class("DescribeConfigsRequest")
        res = client.call(
            R(
                resources=[
                    R.DescribeConfigsResource(
                        resource_type=2, resource_name=topic, configuration_keys=["cleanup.policy"]
                    )
                ]
            ),
            version,
        )
        r = res.results[0]
        assert r.error_code == 0 and [(c.name, c.value) for c in r.configs] == [("cleanup.policy", "delete")]
    elif name == "DescribeLogDirs":
        R = message_class("DescribeLogDirsRequest")
        res = client.call(R(topics=[R.DescribableLogDirTopic(topic=topic, partitions=[0])]), version)
        (result,) = res.results
        assert result.error_code == 0
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [(topic, [0])]
    else:
        raise AssertionError(name)
