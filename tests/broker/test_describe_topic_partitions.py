"""DescribeTopicPartitions (KIP-966) answered as Kafka 4.4 answers it: paging, cursors, errors."""

from __future__ import annotations

import uuid

import pytest

from kafkawire.protocol import errors
from kafkawire.protocol.messages import DescribeTopicPartitionsRequest as R

from .helpers import create_topic
from .reference import normalized, reference_client, unique, wait_for_topic

TOPIC_OPERATIONS = 3576  # READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
INT32_MIN = -2147483648
ZERO = uuid.UUID(int=0)


def request(names, limit=2000, cursor=None):
    return R(
        topics=[R.TopicRequest(name=n) for n in names],
        response_partition_limit=limit,
        cursor=None if cursor is None else R.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )


def summary(res):
    return (
        [
            (t.error_code, t.name, [p.partition_index for p in t.partitions], t.topic_authorized_operations)
            for t in res.topics
        ],
        None if res.next_cursor is None else (res.next_cursor.topic_name, res.next_cursor.partition_index),
    )


def test_unknown_topic_carries_the_authorized_operations(client):
    res = client.call(request(["nope"]), 0)
    assert summary(res) == ([(errors.UNKNOWN_TOPIC_OR_PARTITION, "nope", [], TOPIC_OPERATIONS)], None)
    assert res.topics[0].topic_id == ZERO and res.topics[0].is_internal is False


def test_invalid_names_and_a_missing_internal_topic(client):
    res = client.call(request(["bad name!", ".", "__consumer_offsets"]), 0)
    assert [(t.error_code, t.name, t.is_internal, t.topic_authorized_operations) for t in res.topics] == [
        (errors.INVALID_TOPIC_EXCEPTION, ".", False, TOPIC_OPERATIONS),
        (errors.UNKNOWN_TOPIC_OR_PARTITION, "__consumer_offsets", True, TOPIC_OPERATIONS),
        (errors.INVALID_TOPIC_EXCEPTION, "bad name!", False, TOPIC_OPERATIONS),
    ]


def test_an_empty_name_fails_the_whole_request(client):
    create_topic(client, "real")
    res = client.call(request(["", "real"]), 0)
    assert summary(res) == (
        [(errors.UNKNOWN_SERVER_ERROR, "", [], INT32_MIN), (errors.UNKNOWN_SERVER_ERROR, "real", [], INT32_MIN)],
        None,
    )


def test_names_sorted_and_answered_once(client):
    create_topic(client, "t-a", partitions=2)
    create_topic(client, "t-c")
    res = client.call(request(["t-c", "zz-missing", "t-a", "t-c"]), 0)
    assert summary(res)[0] == [
        (0, "t-a", [0, 1], TOPIC_OPERATIONS),
        (0, "t-c", [0], TOPIC_OPERATIONS),
        (errors.UNKNOWN_TOPIC_OR_PARTITION, "zz-missing", [], TOPIC_OPERATIONS),
    ]


@pytest.mark.parametrize(
    "limit,expected",
    [
        (2, ([(0, "p-a", [0, 1])], ("p-a", 2))),
        (5, ([(0, "p-a", [0, 1, 2, 3, 4])], ("p-b", 0))),
        (6, ([(0, "p-a", [0, 1, 2, 3, 4]), (0, "p-b", [0])], ("p-b", 1))),
        (0, ([(0, "p-a", [0])], ("p-a", 1))),  # at least one partition
        (-3, ([(0, "p-a", [0])], ("p-a", 1))),
    ],
)
def test_response_partition_limit_and_next_cursor(client, limit, expected):
    create_topic(client, "p-a", partitions=5)
    create_topic(client, "p-b", partitions=3)
    topics, cursor = summary(client.call(request(["p-a", "p-b"], limit=limit), 0))
    assert ([t[:3] for t in topics], cursor) == expected


def test_the_limit_is_capped_at_2000_partitions(client):
    create_topic(client, "wide", partitions=2100)
    topics, cursor = summary(client.call(request(["wide"], limit=5000), 0))
    assert len(topics[0][2]) == 2000 and cursor == ("wide", 2000)
    topics, cursor = summary(client.call(request(["wide"], limit=5000, cursor=cursor), 0))
    assert topics[0][2] == list(range(2000, 2100)) and cursor is None


@pytest.mark.parametrize(
    "cursor,expected",
    [
        (("c-a", 3), ([(0, "c-a", [3, 4]), (0, "c-b", [0])], ("c-b", 1))),
        (("c-a", 9), ([(0, "c-a", []), (0, "c-b", [0, 1, 2])], None)),  # past the end: the topic with no partitions
        (("c-a", -1), ([(errors.INVALID_REQUEST, "c-a", []), (errors.INVALID_REQUEST, "c-b", [])], None)),
        (("other", 0), ([(errors.INVALID_REQUEST, "c-a", []), (errors.INVALID_REQUEST, "c-b", [])], None)),
    ],
)
def test_cursor(client, cursor, expected):
    create_topic(client, "c-a", partitions=5)
    create_topic(client, "c-b", partitions=3)
    topics, next_cursor = summary(client.call(request(["c-a", "c-b"], limit=3, cursor=cursor), 0))
    assert ([t[:3] for t in topics], next_cursor) == expected


def test_all_topics_from_a_cursor_between_names(client):
    create_topic(client, "all-a", partitions=2)
    create_topic(client, "all-c", partitions=2)
    topics, cursor = summary(client.call(request([], limit=3, cursor=("all-b", 0)), 0))
    assert ([t[:3] for t in topics], cursor) == ([(0, "all-c", [0, 1])], None)


CASES = [
    (["NOPE"], 2000, None),
    ([""], 2000, None),
    (["X-a"], 2000, None),
    (["X-c", "NOPE", "X-a", "X-c"], 2000, None),
    (["X-a", "X-b"], 2, None),
    (["X-a", "X-b"], 5, None),
    (["X-a"], 0, None),
    (["X-a", "X-b"], 3, ("X-a", 3)),
    (["X-a", "X-b"], 3, ("X-a", 9)),
    (["X-a", "X-b"], 3, ("X-a", -1)),
    (["X-a", "X-b"], 3, ("X-c", 0)),
    (["X-a", "NOPE"], 3, ("NOPE", 0)),
    (["bad name!", "__consumer_offsets"], 10, None),
]


@pytest.fixture
def broker_config():
    """The reference's offsets topic has Kafka's 50 partitions; kafkawire's default is 1 (README)."""
    from kafkawire.broker.config import BrokerConfig

    return BrokerConfig(port=0, storage="memory", properties={"offsets.topic.num.partitions": "50"})


def find_group_coordinator(client, timeout: float = 30.0) -> None:
    """FindCoordinator for a group until it is answered without error (a fresh Kafka first creates its
    offsets topic and says COORDINATOR_NOT_AVAILABLE meanwhile)."""
    import time

    from kafkawire.protocol import message_class

    F = message_class("FindCoordinatorRequest")
    deadline = time.monotonic() + timeout
    while True:
        res = client.call(F(key_type=0, coordinator_keys=["dtp-coordinator-probe"]), 4)
        if res.coordinators[0].error_code == 0:
            return
        assert time.monotonic() < deadline, f"no group coordinator: {res.coordinators[0]}"
        time.sleep(0.2)


def test_same_answers_as_the_reference_kafka(client, reference_kafka):
    ref = reference_client(reference_kafka)
    try:
        prefix = unique("dtp")
        ids = {}
        for suffix, n in (("a", 5), ("b", 3), ("c", 1)):
            create_topic(client, f"ours-{suffix}", partitions=n)
            create_topic(ref, f"{prefix}-{suffix}", partitions=n)
            ids[f"{prefix}-{suffix}"] = wait_for_topic(ref, f"{prefix}-{suffix}")
        ours_ids = {f"ours-{s}": client.call(request([f"ours-{s}"]), 0).topics[0].topic_id for s in "abc"}
        # The internal topic exists on both or on neither, whichever tests ran before on the session-wide
        # reference: both brokers create it at the first group coordinator lookup, as Kafka does.
        offsets_ids = []
        for broker in (client, ref):
            find_group_coordinator(broker)
            offsets_ids.append(wait_for_topic(broker, "__consumer_offsets"))
        for names, limit, cursor in CASES:

            def spell(n, x):
                return n.replace("X-", f"{x}-").replace("NOPE", f"{x}-nope")

            ours = client.call(
                request([spell(n, "ours") for n in names], limit, cursor and (spell(cursor[0], "ours"), cursor[1])), 0
            )
            theirs = ref.call(
                request([spell(n, prefix) for n in names], limit, cursor and (spell(cursor[0], prefix), cursor[1])), 0
            )
            ours_labels = {
                offsets_ids[0]: "ID-offsets",
                **{v: "ID-" + k[-1] for k, v in ours_ids.items()},
                **{f"ours-{s}": s for s in ("a", "b", "c", "nope")},
            }
            ref_labels = {
                offsets_ids[1]: "ID-offsets",
                **{v: "ID-" + k[-1] for k, v in ids.items()},
                **{f"{prefix}-{s}": s for s in ("a", "b", "c", "nope")},
            }
            assert normalized(ours, ours_labels) == normalized(theirs, ref_labels), (names, limit, cursor)
    finally:
        ref.close()
