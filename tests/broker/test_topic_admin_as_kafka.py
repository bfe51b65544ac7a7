"""Topic admin answers the conformance suite found different from Kafka 4.4's (fixed here): DeleteTopics
duplicates and messages, CreatePartitions and AlterPartitionReassignments null messages, ElectLeaders
with an unknown election type."""

from __future__ import annotations

import uuid

from kafkawire.protocol import errors, message_class

from .helpers import create_topic
from .reference import reference_client, unique, wait_for_topic

ZERO = uuid.UUID(int=0)
DT = message_class("DeleteTopicsRequest")


def _exists(client, name) -> bool:
    R = message_class("MetadataRequest")
    res = client.call(R(topics=[R.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False), 12)
    return res.topics[0].error_code == 0


def _delete_answers(client, name, topic_id):
    """DeleteTopics answers, each as sorted (name given?, id given?, code, message null?), for requests
    naming one existing topic twice in each way, and unknown topics."""
    asks = [
        (5, DT(topic_names=[name, name], timeout_ms=5000)),
        (6, DT(topics=[DT.DeleteTopicState(name=None, topic_id=topic_id)] * 2, timeout_ms=5000)),
        (
            6,
            DT(
                topics=[
                    DT.DeleteTopicState(name=None, topic_id=topic_id),
                    DT.DeleteTopicState(name=name, topic_id=ZERO),
                ],
                timeout_ms=5000,
            ),
        ),
        (
            6,
            DT(
                topics=[
                    DT.DeleteTopicState(name=name, topic_id=topic_id),
                    DT.DeleteTopicState(name=None, topic_id=ZERO),
                ],
                timeout_ms=5000,
            ),
        ),
        (5, DT(topic_names=["no-such-topic-x", "bad name!"], timeout_ms=5000)),
        (6, DT(topics=[DT.DeleteTopicState(name=None, topic_id=uuid.UUID(int=7))], timeout_ms=5000)),
        (4, DT(topic_names=[name, name], timeout_ms=5000)),
    ]
    out = []
    for version, body in asks:
        res = client.call(body, version)
        out.append(
            sorted(
                (r.name == name, r.topic_id == topic_id, r.error_code, r.error_message is None) for r in res.responses
            )
        )
    return out


def test_delete_topics_named_twice_deletes_nothing(client):
    t = create_topic(client, "dt-twice")
    answers = _delete_answers(client, "dt-twice", t.topic_id)
    assert answers == [
        [(True, False, errors.INVALID_REQUEST, False)],
        [(False, True, errors.INVALID_REQUEST, False)],
        [(True, True, errors.INVALID_REQUEST, False)],  # the name answers for both
        [(False, False, errors.INVALID_REQUEST, False), (True, True, errors.INVALID_REQUEST, False)],
        [(False, False, errors.UNKNOWN_TOPIC_OR_PARTITION, False)] * 2,
        [(False, False, errors.UNKNOWN_TOPIC_ID, False)],
        [(True, False, errors.INVALID_REQUEST, True)],  # v4 has no message field
    ]
    assert _exists(client, "dt-twice")


def test_delete_topics_as_the_reference_kafka(client, reference_kafka):
    theirs = reference_client(reference_kafka)
    try:
        ours_topic = create_topic(client, "dt-ref")
        name = unique("dt-ref")
        their_id = create_topic(theirs, name).topic_id
        wait_for_topic(theirs, name)
        ours = _delete_answers(client, "dt-ref", ours_topic.topic_id)
        assert ours == _delete_answers(theirs, name, their_id)
        assert _exists(theirs, name) and _exists(client, "dt-ref")
    finally:
        theirs.close()


def _other_answers(client, topic):
    P = message_class("CreatePartitionsRequest")
    grow = client.call(
        P(
            topics=[P.CreatePartitionsTopic(name=f"{topic}-missing", count=3, assignments=None)],
            timeout_ms=5000,
            validate_only=False,
        ),
        3,
    ).results[0]
    A = message_class("AlterPartitionReassignmentsRequest")
    cancel = (
        client.call(
            A(
                timeout_ms=5000,
                topics=[
                    A.ReassignableTopic(
                        name=topic, partitions=[A.ReassignablePartition(partition_index=0, replicas=None)]
                    )
                ],
            ),
            0,
        )
        .responses[0]
        .partitions[0]
    )
    E = message_class("ElectLeadersRequest")
    elect = client.call(
        E(election_type=5, timeout_ms=5000, topic_partitions=[E.TopicPartitions(topic=topic, partitions=[0, 9])]), 2
    )
    every = client.call(E(election_type=2, timeout_ms=5000, topic_partitions=None), 1)
    return [
        (grow.error_code, grow.error_message),
        (cancel.error_code, cancel.error_message),
        (
            elect.error_code,
            [
                (p.error_code, p.error_message is None)
                for r in elect.replica_election_results
                for p in r.partition_result
            ],
        ),
        (every.error_code, every.replica_election_results),
    ]


def test_create_partitions_reassignments_and_elections(client):
    create_topic(client, "other-admin")
    assert _other_answers(client, "other-admin") == [
        (errors.UNKNOWN_TOPIC_OR_PARTITION, None),
        (errors.NO_REASSIGNMENT_IN_PROGRESS, None),
        (errors.INVALID_REQUEST, [(errors.INVALID_REQUEST, False)] * 2),
        (errors.INVALID_REQUEST, []),
    ]


def test_create_partitions_reassignments_and_elections_as_the_reference_kafka(client, reference_kafka):
    theirs = reference_client(reference_kafka)
    try:
        create_topic(client, "other-admin")
        name = unique("other-admin")
        create_topic(theirs, name)
        wait_for_topic(theirs, name)
        assert _other_answers(client, "other-admin") == _other_answers(theirs, name)
    finally:
        theirs.close()
