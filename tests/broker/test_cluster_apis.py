"""Cluster-level APIs a 4.x client expects (DescribeQuorum, ListConfigResources, AlterReplicaLogDirs,
DescribeCluster), answered as Kafka 4.4 answers them on a single node."""

from __future__ import annotations

import time

import pytest

from kafkawire.broker import features
from kafkawire.protocol import errors
from kafkawire.protocol.messages import (
    AlterReplicaLogDirsRequest,
    DescribeClusterRequest,
    DescribeLogDirsRequest,
    DescribeQuorumRequest,
    ListConfigResourcesRequest,
)

from .helpers import create_topic
from .reference import normalized, reference_client, unique, wait_for_topic

Q = DescribeQuorumRequest
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


def quorum_request(topics):
    return Q(
        topics=[
            Q.TopicData(topic_name=n, partitions=[Q.PartitionData(partition_index=p) for p in ps]) for n, ps in topics
        ]
    )


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_one_voter_led_by_this_node(client, broker, version):
    before = int(time.time() * 1000)
    res = client.call(quorum_request([("__cluster_metadata", [0])]), version)
    (topic,) = res.topics
    (p,) = topic.partitions
    node = broker.config.node_id
    assert (res.error_code, topic.topic_name, p.error_code, p.leader_id, p.leader_epoch) == (
        0,
        "__cluster_metadata",
        0,
        node,
        1,
    )
    (voter,) = p.current_voters
    assert voter.replica_id == node and voter.log_end_offset == p.high_watermark > features.FINALIZED_EPOCH
    assert p.observers == []
    if version >= 1:
        assert voter.last_fetch_timestamp >= before and voter.last_caught_up_timestamp >= before
    if version >= 2:
        assert [(n.node_id, [(lst.name, lst.host, lst.port) for lst in n.listeners]) for n in res.nodes] == [
            (node, [("CONTROLLER", *broker.address)])
        ]  # the listener named as Kafka names its voter's


@pytest.mark.parametrize(
    "topics",
    [
        [("other", [0])],
        [("__cluster_metadata", [1])],
        [("__cluster_metadata", [0, 0])],
        [("__cluster_metadata", [0]), ("x", [0])],
    ],
)
def test_describe_quorum_anything_but_the_metadata_partition_is_not_hosted(client, topics):
    res = client.call(quorum_request(topics), 2)
    assert res.error_code == 0 and res.nodes == []
    assert [
        (t.topic_name, [(p.partition_index, p.error_code, p.leader_id, p.current_voters) for p in t.partitions])
        for t in res.topics
    ] == [(n, [(p, errors.UNKNOWN_TOPIC_OR_PARTITION, 0, []) for p in ps]) for n, ps in topics]
    assert client.call(quorum_request([]), 2).topics == []


def list_resources(client, types, version=1):
    res = client.call(
        ListConfigResourcesRequest(resource_types=types) if version >= 1 else ListConfigResourcesRequest(), version
    )
    return res.error_code, sorted((r.resource_type, r.resource_name) for r in res.config_resources)


def test_list_config_resources_by_type(client, broker):
    create_topic(client, "lcr-a")
    create_topic(client, "lcr-b")
    node = str(broker.config.node_id)
    assert list_resources(client, [TOPIC]) == (0, [(TOPIC, "lcr-a"), (TOPIC, "lcr-b")])
    assert list_resources(client, [BROKER, BROKER_LOGGER]) == (0, [(BROKER, node), (BROKER_LOGGER, node)])
    assert list_resources(client, [GROUP, CLIENT_METRICS]) == (0, [])
    assert list_resources(client, []) == (
        0,
        [(TOPIC, "lcr-a"), (TOPIC, "lcr-b"), (BROKER, node), (BROKER_LOGGER, node)],
    )
    assert list_resources(client, None, version=0) == (0, [])  # v0 lists client-metrics resources only


@pytest.mark.parametrize("types", [[99], [0], [1, TOPIC]])
def test_list_config_resources_unknown_type_is_unsupported_version(client, types):
    create_topic(client, "lcr-c")
    assert list_resources(client, types) == (errors.UNSUPPORTED_VERSION, [])


def alter_dirs(client, dirs, version=2):
    A = AlterReplicaLogDirsRequest
    res = client.call(
        A(
            dirs=[
                A.AlterReplicaLogDir(
                    path=path, topics=[A.AlterReplicaLogDirTopic(name=n, partitions=ps) for n, ps in topics]
                )
                for path, topics in dirs
            ]
        ),
        version,
    )
    return [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in res.results]


@pytest.mark.parametrize("version", [1, 2])
def test_alter_replica_log_dirs_single_dir(client, version):
    create_topic(client, "mv", partitions=2)
    log_dir = client.call(DescribeLogDirsRequest(topics=None), 4).results[0].log_dir
    assert alter_dirs(client, [(log_dir, [("mv", [0, 1, 9]), ("nosuch", [0])])], version) == [
        ("mv", [(0, 0), (1, 0), (9, errors.UNKNOWN_TOPIC_OR_PARTITION)]),
        ("nosuch", [(0, errors.UNKNOWN_TOPIC_OR_PARTITION)]),
    ]
    for other in ("/tmp/elsewhere", "logs", log_dir + "/"):
        assert alter_dirs(client, [(other, [("mv", [0])])], version) == [("mv", [(0, errors.LOG_DIR_NOT_FOUND)])]
    assert alter_dirs(client, [(log_dir, [("mv", [0, 0]), ("mv", [1])]), ("/x", [("mv", [1])])], version) == [
        ("mv", [(0, 0), (1, errors.LOG_DIR_NOT_FOUND)])
    ]
    assert alter_dirs(client, [], version) == []


def test_describe_cluster_endpoint_types(client):
    for version in (1, 2):
        res = client.call(DescribeClusterRequest(endpoint_type=2), version)
        assert (res.error_code, res.endpoint_type, res.cluster_id, res.controller_id, res.brokers) == (
            errors.MISMATCHED_ENDPOINT_TYPE,
            1,
            "",
            -1,
            [],
        )
        res = client.call(DescribeClusterRequest(endpoint_type=7), version)
        assert (res.error_code, res.error_message, res.endpoint_type, res.cluster_id) == (
            errors.UNSUPPORTED_ENDPOINT_TYPE,
            "Unsupported endpoint type 7",
            1,
            "",
        )


def test_cluster_authorized_operations_are_kafkas_without_an_authorizer(client):
    """CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE."""
    res = client.call(DescribeClusterRequest(include_cluster_authorized_operations=True), 0)
    assert res.cluster_authorized_operations == 8096
    from kafkawire.protocol.messages import MetadataRequest

    res = client.call(MetadataRequest(topics=[], include_cluster_authorized_operations=True), 8)
    assert res.cluster_authorized_operations == 8096


def test_same_answers_as_the_reference_kafka(client, broker, reference_kafka):
    ref = reference_client(reference_kafka)
    try:
        ours_topic, ref_topic = "cl", unique("cl")
        create_topic(client, ours_topic, partitions=2)
        create_topic(ref, ref_topic, partitions=2)
        wait_for_topic(ref, ref_topic)
        labels_ours, labels_ref = {ours_topic: "T"}, {ref_topic: "T"}
        # DescribeQuorum: all but the metadata log offsets, timestamps and the listener (see broker/handlers/quorum.py)
        drop = ("high_watermark", "log_end_offset", "last_fetch_timestamp", "last_caught_up_timestamp", "nodes")
        for version in (0, 1, 2):
            for topics in ([("__cluster_metadata", [0])], [("other", [0])], [("__cluster_metadata", [0, 0])], []):
                assert normalized(client.call(quorum_request(topics), version), drop=drop) == normalized(
                    ref.call(quorum_request(topics), version), drop=drop
                ), (version, topics)
        # ListConfigResources: brokers and loggers, error answers; topics: ours is among theirs
        for types in ([BROKER, BROKER_LOGGER], [CLIENT_METRICS], [99], [1, TOPIC]):
            assert list_resources(client, types) == list_resources(ref, types), types
        assert list_resources(client, None, 0) == list_resources(ref, None, 0)
        assert (TOPIC, ref_topic) in list_resources(ref, [TOPIC])[1]
        # AlterReplicaLogDirs
        ours_dir = client.call(DescribeLogDirsRequest(topics=None), 4).results[0].log_dir
        ref_dir = ref.call(DescribeLogDirsRequest(topics=None), 4).results[0].log_dir
        for version in (1, 2):
            for dirs in (
                [("LD", [("T", [0, 1, 9]), ("nosuch", [0])])],
                [("/tmp/elsewhere", [("T", [0])])],
                [("LD/", [("T", [0])])],
                [("LD", [("T", [0, 0])]), ("/x", [("T", [1])])],
                [],
            ):

                def spell(log_dir, topic):
                    return [
                        (p.replace("LD", log_dir), [(topic if n == "T" else n, ps) for n, ps in ts]) for p, ts in dirs
                    ]

                # Kafka's order of topics and partitions is a hash map's: compared as sets
                ours = normalized(alter_dirs(client, spell(ours_dir, ours_topic), version), labels_ours)
                theirs = normalized(alter_dirs(ref, spell(ref_dir, ref_topic), version), labels_ref)
                assert sorted((t, sorted(ps)) for t, ps in ours) == sorted((t, sorted(ps)) for t, ps in theirs), (
                    version,
                    dirs,
                )
        # DescribeCluster and DescribeLogDirs
        for version in (0, 1, 2):
            for body in (
                DescribeClusterRequest(include_cluster_authorized_operations=True),
                DescribeClusterRequest(endpoint_type=2),
                DescribeClusterRequest(endpoint_type=7),
            ):
                if version == 0 and body.endpoint_type != 1:
                    continue
                assert normalized(client.call(body, version)) == normalized(ref.call(body, version)), (version, body)
        D = DescribeLogDirsRequest
        for version in (1, 2, 3, 4):
            for topics in ([("T", [0, 5]), ("nosuch", [0])], []):
                body_ours = D(
                    topics=[
                        D.DescribableLogDirTopic(topic=ours_topic if n == "T" else n, partitions=ps) for n, ps in topics
                    ]
                )
                body_ref = D(
                    topics=[
                        D.DescribableLogDirTopic(topic=ref_topic if n == "T" else n, partitions=ps) for n, ps in topics
                    ]
                )
                drop = ("log_dir", "total_bytes", "usable_bytes")
                assert normalized(client.call(body_ours, version), labels_ours, drop) == normalized(
                    ref.call(body_ref, version), labels_ref, drop
                ), (version, topics)
    finally:
        ref.close()


def test_describe_quorum_nodes_name_the_listener_as_the_reference_kafka(client, reference_kafka):
    from .reference import reference_client

    theirs = reference_client(reference_kafka)
    try:
        answers = [c.call(quorum_request([("__cluster_metadata", [0])]), 2) for c in (client, theirs)]
    finally:
        theirs.close()
    ours, ref = ([[lst.name for lst in n.listeners] for n in r.nodes] for r in answers)
    assert ours == ref == [["CONTROLLER"]]
