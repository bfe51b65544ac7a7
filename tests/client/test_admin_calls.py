"""The admin calls a user moving to a cluster needs (create_partitions, elect_leaders, delete_records, config
changes, log dirs, producers), asked of kafkawire's broker and of Kafka 4.4 (one node): the same answers.

Their routing among several brokers is proved on the three-node cluster (tests/cluster/test_admin.py); the
retries on NOT_CONTROLLER and NOT_LEADER_OR_FOLLOWER with two scripted brokers (tests/client/fakebroker.py),
which can answer what a real cluster answers only in a race.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from kafkawire.client import Admin, AsyncAdmin, KafkaError, NewTopic, Producer
from kafkawire.client.admin import (
    APPEND,
    HIGH_WATERMARK,
    PREFERRED,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    UNCLEAN,
    AlterConfigOp,
    ConfigResource,
)
from kafkawire.protocol import errors as kerrors, message_class

from .fakebroker import FakeBroker


def _name(err):
    return None if err is None else err.name if isinstance(err, KafkaError) else err


def described(admin, topic: str, keys: list[str], settled: dict, timeout: float = 15.0) -> dict:
    """The topic's ``keys`` as described once they read ``settled`` (or at the deadline, as they read then).
    Kafka answers an AlterConfigs once its controller has committed the change, and a broker applies it
    from the metadata log a moment later: a DescribeConfigs right after can still read the old values (seen
    at CI's load). kafkawire applies it before answering, so it reads ``settled`` at the first try."""
    deadline = time.monotonic() + timeout
    while True:
        configs = dict(sorted(admin.describe_configs(topic, keys=keys).items()))
        if configs == settled or time.monotonic() > deadline:
            return configs
        time.sleep(0.1)


def scenario(bootstrap: str, topic: str) -> dict:
    """The answers of one broker to the new admin calls, with the topic's name replaced by ``T``."""
    out: dict = {}
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
        with Producer(bootstrap) as producer:
            for i in range(10):
                producer.produce(topic, b"%d" % i, partition=0)
            for i in range(5):
                producer.produce(topic, b"%d" % i, partition=1)
            producer.flush(30)

        out["grow"] = _name(admin.create_partitions({topic: 4})[topic])
        out["partitions after grow"] = admin.describe_topics([topic])[topic].num_partitions
        shrink = admin.create_partitions({topic: 3, topic + "-missing": 2}, raise_errors=False)
        out["shrink"] = _name(shrink[topic])
        out["grow missing"] = _name(shrink[topic + "-missing"])

        for kind, label in ((PREFERRED, "preferred"), (UNCLEAN, "unclean")):
            got = admin.elect_leaders(kind, [(topic, 0), (topic, 9)])
            out[f"elect {label}"] = {p: _name(e) for (t, p), e in sorted(got.items())}
        with pytest.raises(KafkaError) as bad:
            admin.elect_leaders(5, [(topic, 0)])
        out["elect type 5"] = bad.value.name

        deleted = admin.delete_records({(topic, 0): 4, (topic, 1): HIGH_WATERMARK})
        out["delete"] = {p: v for (t, p), v in sorted(deleted.items())}
        earliest = admin.list_offsets({(topic, 0): "earliest", (topic, 1): "earliest"})
        out["log start"] = {p: v.offset for (t, p), v in sorted(earliest.items())}
        past = admin.delete_records({(topic, 0): 11}, raise_errors=False)
        out["delete past the end"] = _name(past[(topic, 0)])
        # an unknown topic or partition may just not have reached this broker's metadata yet: like Kafka's Admin,
        # delete_records and describe_producers look it up again until the call's time runs out
        with Admin(bootstrap, default_api_timeout=1.0) as impatient:
            with pytest.raises(KafkaError) as unknown:
                impatient.delete_records({(topic + "-missing", 0): 1})
            out["delete unknown topic"] = unknown.value.name
            with pytest.raises(KafkaError) as no_partition:
                impatient.delete_records({(topic, 7): 1})
            out["delete unknown partition"] = no_partition.value.name
            with pytest.raises(KafkaError) as missing:
                impatient.describe_producers([(topic + "-missing", 0)])
            out["producers of unknown topic"] = missing.value.name
            with pytest.raises(KafkaError) as offsets_missing:
                impatient.list_offsets({(topic + "-missing", 0): "earliest"})
            out["offsets of unknown topic"] = offsets_missing.value.name

        resource = ConfigResource(RESOURCE_TOPIC, topic)
        out["set"] = _name(admin.incremental_alter_configs({resource: {"retention.ms": "123456"}})[resource])
        out["append"] = _name(
            admin.incremental_alter_configs({resource: [AlterConfigOp("cleanup.policy", "compact", APPEND)]})[resource]
        )
        out["after set"] = described(
            admin,
            topic,
            ["retention.ms", "cleanup.policy"],
            {"cleanup.policy": "delete,compact", "retention.ms": "123456"},
        )
        out["delete config"] = _name(admin.incremental_alter_configs({resource: {"retention.ms": None}})[resource])
        out["after delete"] = described(admin, topic, ["retention.ms"], {"retention.ms": "604800000"})
        out["alter (replace)"] = _name(admin.alter_configs({resource: {"segment.ms": "3600000"}})[resource])
        out["after replace"] = described(
            admin, topic, ["segment.ms", "cleanup.policy"], {"cleanup.policy": "delete", "segment.ms": "3600000"}
        )
        bad_value = admin.incremental_alter_configs({resource: {"retention.ms": "soon"}}, raise_errors=False)
        out["bad value"] = _name(bad_value[resource])

        node = admin.describe_cluster()["brokers"][0].node_id
        broker = ConfigResource(RESOURCE_BROKER, str(node))
        out["broker validate"] = _name(
            admin.incremental_alter_configs({broker: {"log.cleaner.threads": "2"}}, validate_only=True)[broker]
        )
        out["broker config"] = admin.describe_configs(
            str(node), resource_type=RESOURCE_BROKER, keys=["log.cleaner.threads"]
        )

        dirs = admin.describe_log_dirs()
        assert list(dirs) == [node]
        (only,) = dirs[node].values()
        out["log dir error"] = _name(only.error)
        out["log dir replicas"] = sorted(p for (t, p) in only.replicas if t == topic)

        producers = admin.describe_producers([(topic, 0), (topic, 1)])
        out["producers"] = {
            p: [(s.producer_epoch, s.last_sequence, s.current_txn_start_offset) for s in states]
            for (t, p), states in sorted(producers.items())
        }
    return out


def test_new_calls_answer_as_on_kafka(bootstrap, broker_kind_name, reference_kafka):
    if broker_kind_name != "kafkawire":
        pytest.skip("compares kafkawire's broker with Kafka")
    ours = scenario(bootstrap, f"admin-calls-{uuid.uuid4().hex[:8]}")
    theirs = scenario(reference_kafka.bootstrap, f"admin-calls-{uuid.uuid4().hex[:8]}")
    assert ours == theirs
    # and what both said is what Kafka's Admin documents, not an agreement on something else
    assert theirs["grow"] is None and theirs["partitions after grow"] == 4
    assert theirs["shrink"] == "INVALID_PARTITIONS" and theirs["grow missing"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert theirs["elect preferred"] == {0: "ELECTION_NOT_NEEDED", 9: "UNKNOWN_TOPIC_OR_PARTITION"}
    assert theirs["elect type 5"] == "INVALID_REQUEST"
    assert theirs["delete"] == {0: 4, 1: 5} and theirs["log start"] == {0: 4, 1: 5}
    assert theirs["delete past the end"] == "OFFSET_OUT_OF_RANGE"
    assert theirs["delete unknown topic"] == theirs["delete unknown partition"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert theirs["producers of unknown topic"] == theirs["offsets of unknown topic"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert theirs["after set"] == {"cleanup.policy": "delete,compact", "retention.ms": "123456"}
    assert theirs["after delete"] == {"retention.ms": "604800000"}
    assert theirs["after replace"] == {"cleanup.policy": "delete", "segment.ms": "3600000"}
    assert theirs["log dir replicas"] == [0, 1, 2, 3]
    assert theirs["producers"] == {0: [(0, 9, -1)], 1: [(0, 4, -1)]}


# -- retries, with two scripted brokers ----------------------------------------------------------------------


def _metadata(brokers: list[FakeBroker], *, controller: int, leaders: dict[tuple[str, int], int]):
    """A Metadata answer naming ``brokers`` as nodes 1, 2...; ``leaders``: {(topic, partition): node}."""
    cls = message_class("MetadataResponse")
    topics: dict[str, list] = {}
    for (topic, index), leader in sorted(leaders.items()):
        topics.setdefault(topic, []).append(
            cls.MetadataResponsePartition(
                error_code=0,
                partition_index=index,
                leader_id=leader,
                leader_epoch=0,
                replica_nodes=[1, 2],
                isr_nodes=[1, 2],
                offline_replicas=[],
            )
        )
    return cls(
        brokers=[
            cls.MetadataResponseBroker(node_id=i, host="127.0.0.1", port=b.port) for i, b in enumerate(brokers, 1)
        ],
        cluster_id="fake",
        controller_id=controller,
        topics=[
            cls.MetadataResponseTopic(error_code=0, name=t, topic_id=uuid.uuid4(), partitions=ps)
            for t, ps in topics.items()
        ],
    )


async def _two_brokers():
    brokers = [await FakeBroker().start(), await FakeBroker().start()]
    return brokers


def test_not_controller_asks_the_new_controller():
    """The first controller answers CreatePartitions NOT_CONTROLLER; the admin refreshes its metadata (which
    now names node 2) and asks node 2, as Kafka's Admin does."""

    async def run():
        one, two = await _two_brokers()
        state = {"controller": 1}

        def metadata(header, body, version):
            return _metadata([one, two], controller=state["controller"], leaders={("t", 0): 1})

        def create_partitions(node, code):
            def answer(header, body, version):
                if code == kerrors.NOT_CONTROLLER:
                    state["controller"] = 2  # the controller moved: the next Metadata names node 2
                R = message_class("CreatePartitionsResponse")
                return R(
                    throttle_time_ms=0,
                    results=[R.CreatePartitionsTopicResult(name=t.name, error_code=code) for t in body.topics],
                )

            return answer

        for b in (one, two):
            b.handlers[3] = metadata
        one.handlers[37] = create_partitions(1, kerrors.NOT_CONTROLLER)
        two.handlers[37] = create_partitions(2, 0)
        try:
            async with AsyncAdmin(one.bootstrap) as admin:
                assert await admin.create_partitions({"t": 3}, wait=False) == {"t": None}
        finally:
            await one.close()
            await two.close()
        return one.count(37), two.count(37)

    assert asyncio.run(run()) == (1, 1)


def test_not_controller_in_elect_leaders_fails_the_call_as_kafkas_admin():
    """Kafka's Admin does not look for NOT_CONTROLLER in an ElectLeaders answer: a top-level error fails it."""

    async def run():
        (one,) = [await FakeBroker().start()]
        one.handlers[3] = lambda h, b, v: _metadata([one], controller=1, leaders={("t", 0): 1})
        R = message_class("ElectLeadersResponse")
        one.handlers[43] = lambda h, b, v: R(
            throttle_time_ms=0, error_code=kerrors.NOT_CONTROLLER, replica_election_results=[]
        )
        try:
            async with AsyncAdmin(one.bootstrap) as admin:
                with pytest.raises(KafkaError) as exc:
                    await admin.elect_leaders(PREFERRED, [("t", 0)])
        finally:
            await one.close()
        return exc.value.name, one.count(43)

    assert asyncio.run(run()) == ("NOT_CONTROLLER", 1)


def test_delete_records_follows_a_moved_leader():
    """Node 1 leads t-0 and t-1, then answers t-0 NOT_LEADER_OR_FOLLOWER: the metadata, asked again, names
    node 2, which deletes; t-1 is done by node 1 in the first request and not asked again."""

    async def run():
        one, two = await _two_brokers()
        leaders = {("t", 0): 1, ("t", 1): 1}
        asked: list[tuple[int, list]] = []

        def metadata(header, body, version):
            return _metadata([one, two], controller=1, leaders=leaders)

        def delete_records(node):
            def answer(header, body, version):
                R = message_class("DeleteRecordsResponse")
                asked.append((node, sorted((t.name, p.partition_index) for t in body.topics for p in t.partitions)))
                results = []
                for t in body.topics:
                    parts = []
                    for p in t.partitions:
                        moved = node == 1 and p.partition_index == 0
                        if moved:
                            leaders[("t", 0)] = 2
                        parts.append(
                            R.DeleteRecordsPartitionResult(
                                partition_index=p.partition_index,
                                low_watermark=-1 if moved else p.offset,
                                error_code=kerrors.NOT_LEADER_OR_FOLLOWER if moved else 0,
                            )
                        )
                    results.append(R.DeleteRecordsTopicResult(name=t.name, partitions=parts))
                return R(throttle_time_ms=0, topics=results)

            return answer

        for node, b in ((1, one), (2, two)):
            b.handlers[3] = metadata
            b.handlers[21] = delete_records(node)
        try:
            async with AsyncAdmin(one.bootstrap) as admin:
                result = await admin.delete_records({("t", 0): 7, ("t", 1): 3})
        finally:
            await one.close()
            await two.close()
        return result, asked

    result, asked = asyncio.run(run())
    assert result == {("t", 0): 7, ("t", 1): 3}
    assert asked == [(1, [("t", 0), ("t", 1)]), (2, [("t", 0)])]


def test_leader_errors_are_retried_only_until_the_api_timeout():
    """A leader that keeps answering LEADER_NOT_AVAILABLE: the partition fails with it once
    ``default_api_timeout`` has run out, after more than one attempt."""

    async def run():
        (one,) = [await FakeBroker().start()]
        one.handlers[3] = lambda h, b, v: _metadata([one], controller=1, leaders={("t", 0): 1})
        R = message_class("DeleteRecordsResponse")
        one.handlers[21] = lambda h, b, v: R(
            throttle_time_ms=0,
            topics=[
                R.DeleteRecordsTopicResult(
                    name="t",
                    partitions=[
                        R.DeleteRecordsPartitionResult(
                            partition_index=0, low_watermark=-1, error_code=kerrors.LEADER_NOT_AVAILABLE
                        )
                    ],
                )
            ],
        )
        try:
            async with AsyncAdmin(one.bootstrap, default_api_timeout=0.5) as admin:
                result = await admin.delete_records({("t", 0): 1}, raise_errors=False)
        finally:
            await one.close()
        return result, one.count(21)

    result, tries = asyncio.run(run())
    assert result[("t", 0)].name == "LEADER_NOT_AVAILABLE"
    assert tries >= 2


def test_a_controller_that_cannot_be_reached_is_looked_up_again():
    """Metadata names a broker that is gone as controller (a killed node stays in Kafka's metadata until its
    session times out): the admin looks the controller up again and asks the one named next."""

    async def run():
        one, gone = await _two_brokers()
        await gone.close()
        metadata_asked = []

        def metadata(header, body, version):
            metadata_asked.append(1)
            return _metadata([one, gone], controller=2 if len(metadata_asked) == 1 else 1, leaders={("t", 0): 1})

        R = message_class("ElectLeadersResponse")
        one.handlers[3] = metadata
        one.handlers[43] = lambda h, b, v: R(
            throttle_time_ms=0,
            error_code=0,
            replica_election_results=[
                R.ReplicaElectionResult(
                    topic="t", partition_result=[R.PartitionResult(partition_id=0, error_code=0, error_message=None)]
                )
            ],
        )
        try:
            async with AsyncAdmin(one.bootstrap) as admin:
                result = await admin.elect_leaders(UNCLEAN, [("t", 0)])
        finally:
            await one.close()
        return result, one.count(43)

    assert asyncio.run(run()) == ({("t", 0): None}, 1)


def test_delete_records_waits_for_a_topic_the_metadata_does_not_know_yet():
    """Kafka's Admin tolerates an unknown topic in a DeleteRecords leader lookup (it may not have reached the
    broker yet): the topic appears in the third Metadata answer and the deletion goes through."""

    async def run():
        (one,) = [await FakeBroker().start()]
        answers = []

        def metadata(header, body, version):
            answers.append(1)
            return _metadata([one], controller=1, leaders={("t", 0): 1} if len(answers) >= 3 else {})

        R = message_class("DeleteRecordsResponse")
        one.handlers[3] = metadata
        one.handlers[21] = lambda h, b, v: R(
            throttle_time_ms=0,
            topics=[
                R.DeleteRecordsTopicResult(
                    name="t",
                    partitions=[R.DeleteRecordsPartitionResult(partition_index=0, low_watermark=2, error_code=0)],
                )
            ],
        )
        try:
            async with AsyncAdmin(one.bootstrap) as admin:
                return await admin.delete_records({("t", 0): 2})
        finally:
            await one.close()

    assert asyncio.run(run()) == {("t", 0): 2}
