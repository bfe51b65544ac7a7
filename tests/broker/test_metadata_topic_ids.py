"""Metadata requests that carry topic ids (v10+), answered as Kafka 4.4 answers them.

The Java Admin's describeTopics(TopicCollection.ofTopicIds(...)) sends v12 with the id and Name "".
v10/v11 have the TopicId field but do not serve it. Each case is also put to the reference Kafka.
"""

from __future__ import annotations

import uuid

import pytest

from kafkawire.protocol import errors
from kafkawire.protocol.messages import MetadataRequest

from .helpers import create_topic
from .reference import normalized, reference_client, unique, wait_for_topic

T = MetadataRequest.MetadataRequestTopic
UNKNOWN_ID = uuid.UUID("6a1b2c3d-0000-4000-8000-00000000abcd")
ZERO = uuid.UUID(int=0)


def request(topics, auto_create=False):
    return MetadataRequest(topics=topics, allow_auto_topic_creation=auto_create)


def topic_id(client, name, version=12):
    return client.call(request([T(name=name)]), version).topics[0].topic_id


def summary(res):
    return [(t.error_code, t.name, t.topic_id, len(t.partitions)) for t in res.topics]


@pytest.mark.parametrize("version", [12, 13])
def test_id_with_empty_name_resolves_by_id(client, version):
    create_topic(client, "by-id", partitions=3)
    tid = topic_id(client, "by-id")
    res = client.call(request([T(topic_id=tid, name="")]), version)
    assert summary(res) == [(0, "by-id", tid, 3)]
    assert res.brokers and res.controller_id == 1


@pytest.mark.parametrize("version", [12, 13])
def test_id_wins_over_any_name(client, version):
    create_topic(client, "winner")
    tid = topic_id(client, "winner")
    for names in (["other"], [None], ["winner"]):
        res = client.call(request([T(topic_id=tid, name=names[0])]), version)
        assert summary(res) == [(0, "winner", tid, 1)], names
    # a name without an id next to an id is ignored, and nothing is auto-created for it
    res = client.call(request([T(name="never-created"), T(topic_id=tid, name="")], auto_create=True), version)
    assert summary(res) == [(0, "winner", tid, 1)]
    assert (
        client.call(request([T(name="never-created")]), version).topics[0].error_code
        == errors.UNKNOWN_TOPIC_OR_PARTITION
    )


def test_unknown_ids_first_with_null_name_and_repeats_answered_once(client):
    create_topic(client, "known")
    tid = topic_id(client, "known")
    other = uuid.UUID(int=7)
    res = client.call(
        request([T(topic_id=UNKNOWN_ID), T(topic_id=tid), T(topic_id=other), T(topic_id=UNKNOWN_ID), T(topic_id=tid)]),
        12,
    )
    assert summary(res) == [
        (errors.UNKNOWN_TOPIC_ID, None, UNKNOWN_ID, 0),
        (errors.UNKNOWN_TOPIC_ID, None, other, 0),
        (0, "known", tid, 1),
    ]


def test_repeated_names_answered_once_found_topics_first(client):
    create_topic(client, "present")
    res = client.call(request([T(name="absent"), T(name="present"), T(name="absent")]), 12)
    assert [(t.error_code, t.name) for t in res.topics] == [
        (0, "present"),
        (errors.UNKNOWN_TOPIC_OR_PARTITION, "absent"),
    ]


@pytest.mark.parametrize("version", [10, 11])
@pytest.mark.parametrize("case", ["id", "null name", "unknown id", "id and a name"])
def test_v10_v11_topic_ids_are_an_invalid_request_not_a_dropped_connection(client, version, case):
    create_topic(client, "old-style")
    tid = topic_id(client, "old-style")
    topics = {
        "id": [T(topic_id=tid, name="")],
        "null name": [T(name=None)],
        "unknown id": [T(topic_id=UNKNOWN_ID, name=None)],
        "id and a name": [T(name="old-style"), T(topic_id=tid, name=None)],
    }[case]
    res = client.call(request(topics), version)
    assert [(t.error_code, t.name, t.topic_id, t.partitions) for t in res.topics] == [
        (errors.INVALID_REQUEST, t.name if t.name is not None else "", t.topic_id, []) for t in topics
    ]
    assert (res.brokers, res.cluster_id, res.controller_id) == ([], None, -1)
    # the connection is still open
    assert client.call(request([T(name="old-style")]), version).topics[0].error_code == 0


@pytest.mark.parametrize("version", [12, 13])
def test_v12_null_name_without_ids_fails_the_request_as_kafka_does(client, version):
    res = client.call(request([T(name=None)]), version)
    assert [(t.error_code, t.name) for t in res.topics] == [(errors.UNKNOWN_SERVER_ERROR, "")]
    assert res.brokers == [] and res.error_code == (errors.UNKNOWN_SERVER_ERROR if version >= 13 else 0)


def test_v12_zero_id_and_empty_name_is_an_invalid_topic(client):
    res = client.call(request([T(name="")]), 12)
    assert [(t.error_code, t.name, t.topic_id) for t in res.topics] == [(errors.INVALID_TOPIC_EXCEPTION, "", ZERO)]


CASES = {
    "id+empty": lambda tid: [T(topic_id=tid, name="")],
    "id+null": lambda tid: [T(topic_id=tid, name=None)],
    "id+other name": lambda tid: [T(topic_id=tid, name="other")],
    "unknown id": lambda tid: [T(topic_id=UNKNOWN_ID, name="")],
    "zero id+null": lambda tid: [T(name=None)],
    "zero id+empty": lambda tid: [T(name="")],
    "name and id": lambda tid: [T(name="X"), T(topic_id=tid, name=None)],
    "ids repeated": lambda tid: [T(topic_id=UNKNOWN_ID), T(topic_id=tid), T(topic_id=tid), T(topic_id=UNKNOWN_ID)],
}


@pytest.mark.parametrize("version", [10, 11, 12, 13])
def test_same_answers_as_the_reference_kafka(client, reference_kafka, version):
    ref = reference_client(reference_kafka)
    try:
        ours_name, ref_name = "ids-topic", unique("ids-topic")
        create_topic(client, ours_name, partitions=2)
        create_topic(ref, ref_name, partitions=2)
        ours_id, ref_id = topic_id(client, ours_name), wait_for_topic(ref, ref_name)
        for case, build in CASES.items():
            ours = client.call(
                request([T(name=ours_name if t.name == "X" else t.name, topic_id=t.topic_id) for t in build(ours_id)]),
                version,
            )
            theirs = ref.call(
                request([T(name=ref_name if t.name == "X" else t.name, topic_id=t.topic_id) for t in build(ref_id)]),
                version,
            )
            assert normalized(ours, {ours_id: "ID", ours_name: "T"}) == normalized(
                theirs, {ref_id: "ID", ref_name: "T"}
            ), case
    finally:
        ref.close()
