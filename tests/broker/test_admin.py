"""Topics, configs, offsets and cluster APIs."""

from __future__ import annotations

import time
import uuid

import pytest

from kafkawire.broker import config as C
from kafkawire.protocol import errors, message_class
from kafkawire.protocol.records import build_batch

from .helpers import batch, create_topic, fetch_request, produce_request

CT = message_class("CreateTopicsRequest")


def create(client, name, partitions=1, rf=1, configs=None, validate_only=False, version=7, assignments=()):
    body = CT(
        topics=[
            CT.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=rf,
                assignments=[CT.CreatableReplicaAssignment(partition_index=i, broker_ids=b) for i, b in assignments],
                configs=[CT.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
            )
        ],
        timeout_ms=1000,
        validate_only=validate_only,
    )
    return client.call(body, version).topics[0]


def metadata(client, *names):
    R = message_class("MetadataRequest")
    return client.call(R(topics=[R.MetadataRequestTopic(name=n) for n in names], allow_auto_topic_creation=False), 12)


def test_create_topics_checks(client, broker):
    assert create(client, "rf3", rf=3).error_code == errors.INVALID_REPLICATION_FACTOR
    assert create(client, "p0", partitions=0).error_code == errors.INVALID_PARTITIONS
    assert create(client, "bad/name").error_code == errors.INVALID_TOPIC_EXCEPTION
    assert create(client, "cfg", configs={"no.such.config": "1"}).error_code == errors.INVALID_CONFIG
    assert create(client, "cfg", configs={"retention.ms": "soon"}).error_code == errors.INVALID_CONFIG
    r = create(client, "vo", partitions=3, validate_only=True)
    assert r.error_code == 0 and r.num_partitions == 3
    assert metadata(client, "vo").topics[0].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    r = create(client, "defaults", partitions=-1, rf=-1)
    assert r.error_code == 0 and r.num_partitions == broker.config.num_partitions and r.replication_factor == 1
    configs = {c.name: c for c in r.configs}
    assert configs["retention.ms"].value == "604800000" and configs["retention.ms"].config_source == C.DEFAULT_CONFIG
    r = create(client, "withcfg", partitions=2, configs={"retention.ms": "1000"})
    assert r.topic_id != uuid.UUID(int=0)
    configs = {c.name: c for c in r.configs}
    assert configs["retention.ms"].value == "1000" and configs["retention.ms"].config_source == C.TOPIC_CONFIG
    assert create(client, "withcfg").error_code == errors.TOPIC_ALREADY_EXISTS
    r = create(
        client,
        "assigned",
        partitions=-1,
        rf=-1,
        assignments=[(0, [broker.config.node_id]), (1, [broker.config.node_id])],
    )
    assert r.error_code == 0 and r.num_partitions == 2
    r = create(client, "assigned2", partitions=-1, rf=-1, assignments=[(0, [99])])
    assert r.error_code == errors.INVALID_REPLICA_ASSIGNMENT


@pytest.mark.parametrize("version", range(0, 8))
def test_create_topics_every_version(client, version):
    r = create(client, f"cv{version}", partitions=2, version=version)
    assert r.error_code == 0


def test_delete_topics_by_name_and_id(client):
    a = create_topic(client, "del-a")
    create_topic(client, "del-b")
    R = message_class("DeleteTopicsRequest")
    res = client.call(R(topic_names=["del-b", "nope"], timeout_ms=1000), 5)
    assert [(r.name, r.error_code) for r in res.responses] == [
        ("del-b", 0),
        ("nope", errors.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    res = client.call(
        R(
            topics=[
                R.DeleteTopicState(name=None, topic_id=a.topic_id),
                R.DeleteTopicState(name=None, topic_id=uuid.uuid4()),
            ],
            timeout_ms=1000,
        ),
        6,
    )
    assert res.responses[0].error_code == 0 and res.responses[0].name == "del-a"
    assert res.responses[1].error_code == errors.UNKNOWN_TOPIC_ID
    md = metadata(client, "del-a", "del-b")
    assert all(t.error_code == errors.UNKNOWN_TOPIC_OR_PARTITION for t in md.topics)


def test_create_partitions(client):
    create_topic(client, "grow", partitions=2)
    R = message_class("CreatePartitionsRequest")

    def grow(count, validate_only=False):
        return client.call(
            R(
                topics=[R.CreatePartitionsTopic(name="grow", count=count, assignments=None)],
                timeout_ms=1000,
                validate_only=validate_only,
            ),
            3,
        ).results[0]

    assert grow(1).error_code == errors.INVALID_PARTITIONS
    assert grow(2).error_code == errors.INVALID_PARTITIONS
    assert grow(5, validate_only=True).error_code == 0
    assert len(metadata(client, "grow").topics[0].partitions) == 2
    assert grow(5).error_code == 0
    assert len(metadata(client, "grow").topics[0].partitions) == 5
    res = client.call(produce_request("grow", 4, batch([b"x"])), 9)
    assert res.responses[0].partition_responses[0].error_code == 0


def test_describe_topic_partitions_cursor(client):
    create_topic(client, "dtp-a", partitions=3)
    create_topic(client, "dtp-b", partitions=2)
    R = message_class("DescribeTopicPartitionsRequest")
    res = client.call(R(topics=[], response_partition_limit=2, cursor=None), 0)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in res.topics] == [("dtp-a", [0, 1])]
    assert (res.next_cursor.topic_name, res.next_cursor.partition_index) == ("dtp-a", 2)
    res = client.call(
        R(topics=[], response_partition_limit=2, cursor=R.Cursor(topic_name="dtp-a", partition_index=2)), 0
    )
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in res.topics] == [("dtp-a", [2]), ("dtp-b", [0])]
    assert (res.next_cursor.topic_name, res.next_cursor.partition_index) == ("dtp-b", 1)
    res = client.call(
        R(topics=[], response_partition_limit=2, cursor=R.Cursor(topic_name="dtp-b", partition_index=1)), 0
    )
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in res.topics] == [("dtp-b", [1])]
    assert res.next_cursor is None
    res = client.call(
        R(topics=[R.TopicRequest(name="dtp-b"), R.TopicRequest(name="zz")], response_partition_limit=100), 0
    )
    assert [(t.name, t.error_code) for t in res.topics] == [("dtp-b", 0), ("zz", errors.UNKNOWN_TOPIC_OR_PARTITION)]
    assert res.topics[0].partitions[0].leader_epoch == 0


def list_offsets(client, topic, timestamp, version=9, partition=0):
    R = message_class("ListOffsetsRequest")
    body = R(
        replica_id=-1,
        isolation_level=0,
        topics=[
            R.ListOffsetsTopic(
                name=topic,
                partitions=[
                    R.ListOffsetsPartition(
                        partition_index=partition, timestamp=timestamp, current_leader_epoch=-1, max_num_offsets=1
                    )
                ],
            )
        ],
    )
    return client.call(body, version).topics[0].partitions[0]


def test_list_offsets(client):
    create_topic(client, "lo")
    now = int(time.time() * 1000)
    for i, ts in enumerate([now - 3000, now - 1000, now - 2000]):
        client.call(produce_request("lo", 0, build_batch([(None, b"%d" % i, [], ts)])), 9)
    p = list_offsets(client, "lo", -1)
    assert (p.offset, p.leader_epoch, p.error_code) == (3, 0, 0)
    assert list_offsets(client, "lo", -2).offset == 0
    p = list_offsets(client, "lo", -3)
    assert (p.offset, p.timestamp) == (1, now - 1000)
    p = list_offsets(client, "lo", now - 2500)
    assert (p.offset, p.timestamp) == (1, now - 1000)
    assert list_offsets(client, "lo", now + 10_000).offset == -1
    assert list_offsets(client, "lo", -1, version=0).old_style_offsets == [3]
    for v in range(1, 11):
        assert list_offsets(client, "lo", -1, version=v).offset == 3
    assert list_offsets(client, "nope", -1).error_code == errors.UNKNOWN_TOPIC_OR_PARTITION


def test_offset_for_leader_epoch_and_delete_records(client):
    create_topic(client, "ofle")
    client.call(produce_request("ofle", 0, batch([b"a", b"b", b"c"])), 9)
    R = message_class("OffsetForLeaderEpochRequest")
    body = R(
        replica_id=-1,
        topics=[
            R.OffsetForLeaderTopic(
                topic="ofle",
                partitions=[R.OffsetForLeaderPartition(partition=0, current_leader_epoch=0, leader_epoch=0)],
            )
        ],
    )
    p = client.call(body, 4).topics[0].partitions[0]
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 3)
    body.topics[0].partitions[0].current_leader_epoch = 5
    assert client.call(body, 4).topics[0].partitions[0].error_code == errors.UNKNOWN_LEADER_EPOCH
    D = message_class("DeleteRecordsRequest")
    res = client.call(
        D(
            topics=[
                D.DeleteRecordsTopic(name="ofle", partitions=[D.DeleteRecordsPartition(partition_index=0, offset=2)])
            ],
            timeout_ms=1000,
        ),
        2,
    )
    p = res.topics[0].partitions[0]
    assert (p.error_code, p.low_watermark) == (0, 2)
    assert list_offsets(client, "ofle", -2).offset == 2
    f = client.call(fetch_request([("ofle", 0, 0)]), 12)
    assert f.responses[0].partitions[0].error_code == errors.OFFSET_OUT_OF_RANGE
    assert f.responses[0].partitions[0].log_start_offset == -1  # Kafka 4.4 reports no offsets with an error
    res = client.call(
        D(
            topics=[
                D.DeleteRecordsTopic(name="ofle", partitions=[D.DeleteRecordsPartition(partition_index=0, offset=10)])
            ],
            timeout_ms=1000,
        ),
        2,
    )
    assert res.topics[0].partitions[0].error_code == errors.OFFSET_OUT_OF_RANGE


DC = message_class("DescribeConfigsRequest")


def describe(client, rtype, name, keys=None, version=4, synonyms=True):
    body = DC(
        resources=[DC.DescribeConfigsResource(resource_type=rtype, resource_name=name, configuration_keys=keys)],
        include_synonyms=synonyms and version >= 1,
        include_documentation=version >= 3,
    )
    return client.call(body, version).results[0]


def test_describe_configs_topic_and_broker(client, broker):
    create_topic(client, "dc", configs={"cleanup.policy": "compact"})
    r = describe(client, 2, "dc")
    assert r.error_code == 0
    entries = {c.name: c for c in r.configs}
    assert entries["cleanup.policy"].value == "compact" and entries["cleanup.policy"].config_source == C.TOPIC_CONFIG
    assert [(s.name, s.source) for s in entries["cleanup.policy"].synonyms] == [
        ("cleanup.policy", C.TOPIC_CONFIG),
        ("log.cleanup.policy", C.DEFAULT_CONFIG),
    ]
    ret = entries["retention.ms"]
    assert (ret.value, ret.config_source) == ("604800000", C.DEFAULT_CONFIG)
    # as Kafka 4.4: only the default of the first broker synonym is listed, and log.retention.ms has none
    assert [(s.name, s.value) for s in ret.synonyms] == []
    assert entries["max.message.bytes"].value == "1048588" and entries["max.message.bytes"].config_type == C.INT
    r = describe(client, 2, "dc", keys=["segment.bytes"], version=0, synonyms=False)
    assert [(c.name, c.is_default) for c in r.configs] == [("segment.bytes", True)]
    assert describe(client, 2, "nope").error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    b = describe(client, 4, str(broker.config.node_id))
    entries = {c.name: c for c in b.configs}
    assert entries["num.partitions"].value == "1" and entries["log.segment.bytes"].value == "1073741824"
    assert entries["node.id"].value == str(broker.config.node_id)
    assert describe(client, 4, "42").error_code == errors.INVALID_REQUEST
    for v in range(0, 5):
        assert describe(client, 2, "dc", version=v).error_code == 0


def test_alter_configs_and_incremental(client, broker):
    create_topic(client, "ac", configs={"retention.ms": "1000", "cleanup.policy": "delete"})
    A = message_class("AlterConfigsRequest")
    res = client.call(
        A(
            resources=[
                A.AlterConfigsResource(
                    resource_type=2,
                    resource_name="ac",
                    configs=[A.AlterableConfig(name="segment.bytes", value="2097152")],
                )
            ],
            validate_only=False,
        ),
        2,
    )
    assert res.responses[0].error_code == 0
    entries = {c.name: c for c in describe(client, 2, "ac").configs}
    assert entries["segment.bytes"].value == "2097152" and entries["retention.ms"].config_source == C.DEFAULT_CONFIG
    bad = client.call(
        A(
            resources=[
                A.AlterConfigsResource(
                    resource_type=2, resource_name="ac", configs=[A.AlterableConfig(name="segment.bytes", value="x")]
                )
            ],
            validate_only=False,
        ),
        2,
    )
    assert bad.responses[0].error_code == errors.INVALID_CONFIG
    I = message_class("IncrementalAlterConfigsRequest")

    def inc(*ops, rtype=2, name="ac"):
        body = I(
            resources=[
                I.AlterConfigsResource(
                    resource_type=rtype,
                    resource_name=name,
                    configs=[I.AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops],
                )
            ],
            validate_only=False,
        )
        return client.call(body, 1).responses[0]

    assert inc(("message.timestamp.type", 0, "LogAppendTime")).error_code == 0
    assert inc(("cleanup.policy", 2, "compact")).error_code == 0
    entries = {c.name: c for c in describe(client, 2, "ac").configs}
    assert entries["cleanup.policy"].value == "delete,compact"
    assert entries["message.timestamp.type"].value == "LogAppendTime"
    assert inc(("segment.bytes", 1, None)).error_code == 0
    entries = {c.name: c for c in describe(client, 2, "ac").configs}
    assert entries["segment.bytes"].config_source == C.DEFAULT_CONFIG
    assert inc(("retention.ms", 2, "5")).error_code == errors.INVALID_CONFIG
    assert inc(("retention.ms", 0, "5"), ("retention.ms", 0, "6")).error_code == errors.INVALID_REQUEST
    assert inc(("x.y", 0, "1"), name="nope").error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    # LogAppendTime now applies to produce (a keyed record: the topic is compacted now, and Kafka refuses a
    # record without a key there with INVALID_RECORD)
    keyed = build_batch([(b"k", b"x")])
    pr = client.call(produce_request("ac", 0, keyed), 9).responses[0].partition_responses[0]
    assert pr.log_append_time_ms > 0
    # a dynamic broker config is reported with its source and becomes the topic default
    node = str(broker.config.node_id)
    assert inc(("log.retention.ms", 0, "7200000"), rtype=4, name=node).error_code == 0
    create_topic(client, "after")
    ret = {c.name: c for c in describe(client, 2, "after").configs}["retention.ms"]
    assert (ret.value, ret.config_source) == ("7200000", C.DYNAMIC_BROKER_CONFIG)
    assert ("log.retention.ms", C.DYNAMIC_BROKER_CONFIG) in [(s.name, s.source) for s in ret.synonyms]
    assert inc(("listeners", 0, "PLAINTEXT://:1"), rtype=4, name=node).error_code == errors.INVALID_REQUEST
    # read-only in Kafka 4.4 (not dynamically updatable), per broker and cluster-wide
    for name in ("", node):
        res = inc(("num.partitions", 0, "3"), rtype=4, name=name)
        assert (res.error_code, res.error_message) == (
            errors.INVALID_REQUEST,
            "Cannot update these configs dynamically: [num.partitions]",
        )
    assert broker.config.num_partitions == 1


def test_describe_cluster_and_log_dirs(client, broker):
    R = message_class("DescribeClusterRequest")
    for v in range(0, 3):
        res = client.call(R(include_cluster_authorized_operations=True, endpoint_type=1), v)
        assert res.error_code == 0 and res.controller_id == broker.config.node_id
        assert [(b.broker_id, b.host, b.port) for b in res.brokers] == [(broker.config.node_id, *broker.address)]
        assert res.cluster_id == broker.broker.cluster_id
    res = client.call(R(endpoint_type=2), 1)
    assert res.error_code == errors.MISMATCHED_ENDPOINT_TYPE  # as Kafka 4.4 answers on a broker listener
    create_topic(client, "ld", partitions=2)
    client.call(produce_request("ld", 1, batch([b"x" * 100])), 9)
    L = message_class("DescribeLogDirsRequest")
    for v in range(0, 5):
        res = client.call(L(topics=None), v)
        (result,) = res.results
        sizes = {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}
        assert sizes[("ld", 0)] == 0 and sizes[("ld", 1)] > 100
    res = client.call(L(topics=[L.DescribableLogDirTopic(topic="ld", partitions=[1])]), 4)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in res.results[0].topics] == [("ld", [1])]


def test_describe_topic_partitions_cursor_outside_the_request(client):
    create_topic(client, "dtp-c")
    R = message_class("DescribeTopicPartitionsRequest")
    res = client.call(
        R(
            topics=[R.TopicRequest(name="dtp-c")],
            response_partition_limit=10,
            cursor=R.Cursor(topic_name="other", partition_index=0),
        ),
        0,
    )
    assert [(t.name, t.error_code) for t in res.topics] == [("dtp-c", errors.INVALID_REQUEST)]


@pytest.mark.parametrize("version", range(0, 4))
def test_acl_apis_answer_security_disabled(client, version):
    D = message_class("DescribeAclsRequest")
    res = client.call(D(resource_type_filter=1, operation=1, permission_type=1), version)
    assert res.error_code == errors.SECURITY_DISABLED and res.error_message == "No Authorizer is configured."
    C = message_class("CreateAclsRequest")
    res = client.call(
        C(
            creations=[
                C.AclCreation(
                    resource_type=2, resource_name="t", principal="User:a", host="*", operation=3, permission_type=3
                )
            ]
        ),
        version,
    )
    assert [r.error_code for r in res.results] == [errors.SECURITY_DISABLED]
    X = message_class("DeleteAclsRequest")
    res = client.call(X(filters=[X.DeleteAclsFilter(resource_type_filter=1, operation=1, permission_type=1)]), version)
    assert [r.error_code for r in res.filter_results] == [errors.SECURITY_DISABLED]


def test_broker_logger_configs(client, broker):
    node = str(broker.config.node_id)
    r = describe(client, 8, node)
    levels = {c.name: c.value for c in r.configs}
    assert r.error_code == 0 and "root" in levels and "kafkawire.broker" in levels
    I = message_class("IncrementalAlterConfigsRequest")
    res = client.call(
        I(
            resources=[
                I.AlterConfigsResource(
                    resource_type=8,
                    resource_name=node,
                    configs=[I.AlterableConfig(name="kafkawire.broker", config_operation=0, value="DEBUG")],
                )
            ],
            validate_only=False,
        ),
        1,
    )
    assert res.responses[0].error_code == 0
    assert {c.name: c.value for c in describe(client, 8, node).configs}["kafkawire.broker"] == "DEBUG"
    import logging

    logging.getLogger("kafkawire.broker").setLevel(logging.NOTSET)


def test_single_node_replica_apis(client, broker):
    create_topic(client, "pl", partitions=2)
    E = message_class("ElectLeadersRequest")
    for v in range(0, 3):
        res = client.call(
            E(election_type=0, topic_partitions=[E.TopicPartitions(topic="pl", partitions=[0, 5])], timeout_ms=1000), v
        )
        codes = [r.error_code for r in res.replica_election_results[0].partition_result]
        assert codes == [errors.ELECTION_NOT_NEEDED, errors.UNKNOWN_TOPIC_OR_PARTITION]
        assert client.call(E(election_type=0, topic_partitions=None), v).replica_election_results == []
    L = message_class("ListPartitionReassignmentsRequest")
    res = client.call(L(topics=None), 0)
    assert res.error_code == 0 and res.topics == []
    A = message_class("AlterPartitionReassignmentsRequest")
    node = broker.config.node_id
    res = client.call(
        A(
            topics=[
                A.ReassignableTopic(
                    name="pl",
                    partitions=[
                        A.ReassignablePartition(partition_index=0, replicas=[node]),
                        A.ReassignablePartition(partition_index=1, replicas=[node, node + 1]),
                        A.ReassignablePartition(partition_index=1, replicas=None),
                    ],
                )
            ]
        ),
        0,
    )
    assert [p.error_code for p in res.responses[0].partitions] == [
        0,
        errors.INVALID_REPLICA_ASSIGNMENT,
        errors.NO_REASSIGNMENT_IN_PROGRESS,
    ]


def test_sasl_on_a_plaintext_listener_is_illegal_state(client):
    for v in (0, 1):
        res = client.call(message_class("SaslHandshakeRequest")(mechanism="PLAIN"), v)
        assert res.error_code == errors.ILLEGAL_SASL_STATE and res.mechanisms == []
    for v in (0, 1, 2):
        res = client.call(message_class("SaslAuthenticateRequest")(auth_bytes=b"\x00u\x00p"), v)
        assert res.error_code == errors.ILLEGAL_SASL_STATE
    from .conftest import msg

    assert client.call(msg("ApiVersionsRequest"), 0).error_code == 0


def test_describe_client_quotas_is_empty(client):
    Q = message_class("DescribeClientQuotasRequest")
    for v in (0, 1):
        res = client.call(Q(components=[], strict=False), v)
        assert res.error_code == 0 and res.entries == []
