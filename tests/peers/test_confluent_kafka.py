"""confluent-kafka (librdkafka) against the broker: produce, read back, administer, list offsets."""

from __future__ import annotations

import json
import time

import pytest

from .peer_harness import (
    Rec,
    assert_readback,
    by_partition,
    confluent_consume,
    confluent_create_topic,
    confluent_produce,
    end_offsets,
    make_records,
    wait_for_topic,
)

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec, ResourceType  # noqa: E402

pytestmark = pytest.mark.timeout(120)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
def test_produce_then_assign_reads_everything(broker, topic, codec, idempotent):
    partitions = 3
    confluent_create_topic(broker.bootstrap, topic, partitions)
    records = make_records(300, partitions, seed=len(codec) * 10 + idempotent)
    config = {"compression.type": codec, "enable.idempotence": idempotent, "acks": "all"}
    if not idempotent:
        config["acks"] = "1"
    delivered = confluent_produce(broker.bootstrap, topic, records, config)
    got = confluent_consume(broker.bootstrap, topic, partitions, len(records))
    assert_readback(records, got, delivered=delivered)


def test_auto_created_topic_on_produce(broker, topic):
    """A producer's Metadata request for an unknown topic creates it (auto.create.topics.enable)."""
    from confluent_kafka import Producer

    records = make_records(50, 1, seed=3)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 30000})
    reports: list = [None] * len(records)

    def on_delivery(index):
        return lambda err, msg: reports.__setitem__(index, (err, msg.partition(), msg.offset()))

    for i, r in enumerate(records):
        producer.produce(
            topic,
            value=r.value,
            key=r.key,
            headers=list(r.headers) or None,
            timestamp=r.timestamp,
            on_delivery=on_delivery(i),
        )
    assert producer.flush(30) == 0
    assert [rep for rep in reports if rep is None or rep[0] is not None] == []
    # The auto-created topic may have several partitions; the partitioner spread the records by key.
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(topic, timeout=10)
    partitions = len(md.topics[topic].partitions)
    assert partitions >= 1
    placed = [r.__class__(p, r.key, r.value, r.headers, r.timestamp) for r, (_, p, _) in zip(records, reports)]
    got = confluent_consume(broker.bootstrap, topic, partitions, len(records))
    assert_readback(placed, got, delivered=[(p, o) for _, p, o in reports])


def _result(future, timeout=30):
    return future.result(timeout)


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _node_id(admin) -> int:
    md = admin.list_topics(timeout=10)
    assert len(md.brokers) == 1, md.brokers
    return next(iter(md.brokers))


def test_admin_create_topics_and_metadata(broker, admin, topic):
    other = topic + "-b"
    futures = admin.create_topics([NewTopic(topic, 4, 1), NewTopic(other, 1, 1)], operation_timeout=10)
    for name, fut in futures.items():
        assert _result(fut) is None, name
    wait_for_topic(broker.bootstrap, topic, 4)
    wait_for_topic(broker.bootstrap, other, 1)

    # Creating it again is refused with TOPIC_ALREADY_EXISTS.
    again = admin.create_topics([NewTopic(topic, 4, 1)], operation_timeout=10)[topic]
    with pytest.raises(KafkaException) as info:
        _result(again)
    assert info.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    md = admin.list_topics(timeout=10)
    node_id = _node_id(admin)
    assert {topic, other} <= set(md.topics)
    assert sorted(md.topics[topic].partitions) == [0, 1, 2, 3]
    assert sorted(md.topics[other].partitions) == [0]
    for p in md.topics[topic].partitions.values():
        assert (p.leader, list(p.replicas), list(p.isrs)) == (node_id, [node_id], [node_id])


def test_admin_describe_topics_and_cluster(broker, admin, topic):
    confluent_create_topic(broker.bootstrap, topic, 3)
    node_id = _node_id(admin)
    from confluent_kafka import TopicCollection

    desc = _result(admin.describe_topics(TopicCollection([topic]))[topic])
    assert desc.name == topic and not desc.is_internal
    assert [p.id for p in desc.partitions] == [0, 1, 2]
    for p in desc.partitions:
        assert p.leader.id == node_id
        assert [r.id for r in p.replicas] == [node_id] and [r.id for r in p.isr] == [node_id]

    cluster = _result(admin.describe_cluster())
    assert [n.id for n in cluster.nodes] == [node_id]
    assert (cluster.nodes[0].host, cluster.nodes[0].port) == (broker.host, broker.port)
    assert cluster.controller is not None and cluster.controller.id == node_id


@pytest.mark.tansu_gap("DescribeConfigs reports topic configs set at creation as defaults")
def test_admin_topic_configs(broker, admin, topic):
    futures = admin.create_topics(
        [NewTopic(topic, 1, 1, config={"retention.ms": "3600000", "max.message.bytes": "2097152"})],
        operation_timeout=10,
    )
    assert _result(futures[topic]) is None
    wait_for_topic(broker.bootstrap, topic, 1)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = _result(admin.describe_configs([resource])[resource])
    assert configs["retention.ms"].value == "3600000"
    assert configs["max.message.bytes"].value == "2097152"
    assert not configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "delete"

    node_id = _node_id(admin)
    broker_res = ConfigResource(ResourceType.BROKER, str(node_id))
    broker_configs = _result(admin.describe_configs([broker_res])[broker_res])
    assert broker_configs, "the broker describes no configs"
    assert all(name == entry.name for name, entry in broker_configs.items())


def test_admin_delete_topics(broker, admin, topic):
    other = topic + "-b"
    confluent_create_topic(broker.bootstrap, topic, 2)
    confluent_create_topic(broker.bootstrap, other, 1)
    deleted = admin.delete_topics([topic, other], operation_timeout=10)
    for name, fut in deleted.items():
        assert _result(fut) is None, name
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and {topic, other} & set(admin.list_topics(timeout=10).topics):
        time.sleep(0.1)
    assert not {topic, other} & set(admin.list_topics(timeout=10).topics)

    gone = admin.delete_topics([topic], operation_timeout=10)[topic]
    with pytest.raises(KafkaException) as info:
        _result(gone)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # A topic created again under the same name starts empty.
    confluent_create_topic(broker.bootstrap, topic, 1)
    records = make_records(20, 1, seed=9)
    delivered = confluent_produce(broker.bootstrap, topic, records)
    assert_readback(records, confluent_consume(broker.bootstrap, topic, 1, len(records)), delivered=delivered)


@pytest.mark.tansu_gap("ListOffsets latest is the last batch's base offset + 1, not the last record's + 1")
def test_list_offsets_earliest_latest_by_timestamp(broker, topic):
    partitions = 2
    confluent_create_topic(broker.bootstrap, topic, partitions)
    records = make_records(200, partitions, seed=42)
    delivered = confluent_produce(broker.bootstrap, topic, records, {"compression.type": "lz4", "linger.ms": 20})
    ends = end_offsets(records, partitions)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def list_offsets(spec_for):
        request = {TopicPartition(topic, p): spec_for(p) for p in range(partitions)}
        futures = admin.list_offsets(request, request_timeout=10)
        return {tp.partition: _result(f) for tp, f in futures.items()}

    earliest = list_offsets(lambda p: OffsetSpec.earliest())
    latest = list_offsets(lambda p: OffsetSpec.latest())
    assert {p: r.offset for p, r in earliest.items()} == {p: 0 for p in range(partitions)}
    assert {p: r.offset for p, r in latest.items()} == ends

    # By timestamp: the first offset whose timestamp is >= the target. Targets: every record's own
    # timestamp and one less (inside batches, not only at their start), one before all, one past all (-1).
    groups = by_partition(records)
    index_of = {id(r): i for i, r in enumerate(records)}
    offsets = {p: [delivered[index_of[id(r)]][1] for r in recs] for p, recs in groups.items()}

    def expected(p, target):
        for r, off in zip(groups[p], offsets[p]):
            if r.timestamp >= target:
                return off, r.timestamp
        return -1, -1

    for p, recs in groups.items():
        for target in (
            recs[len(recs) // 2].timestamp,
            recs[len(recs) // 2].timestamp - 1,
            recs[7].timestamp + 1,
            recs[0].timestamp - 1000,
            recs[-1].timestamp,
            recs[-1].timestamp + 1,
        ):
            found = list_offsets(lambda q: OffsetSpec.for_timestamp(target))[p]
            assert (found.offset, found.timestamp) == expected(p, target), f"partition {p}, target {target}"

    # The consumer-side APIs agree with the admin's.
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "peers-offsets", "enable.auto.commit": False}
    )
    try:
        for p in range(partitions):
            assert consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) == (0, ends[p])
        targets = [TopicPartition(topic, p, groups[p][5].timestamp) for p in range(partitions)]
        answers = consumer.offsets_for_times(targets, timeout=10)
        for tp in answers:
            assert tp.error is None
            assert tp.offset == offsets[tp.partition][5]
    finally:
        consumer.close()


def test_small_fetch_limits_still_read_everything(broker, topic):
    """Fetch limits far below the batch sizes: the broker still returns a whole first batch so the
    consumer makes progress, and cut-short trailing batches are re-fetched, never lost or garbled."""
    partitions = 2
    confluent_create_topic(broker.bootstrap, topic, partitions)
    records = make_records(400, partitions, seed=77, big_every=23)  # many 64 KiB records
    # Batches of up to ~100 KB, fetched 1 KiB per partition and 4 KiB per response.
    delivered = confluent_produce(
        broker.bootstrap, topic, records, {"linger.ms": 20, "compression.type": "none", "batch.size": 100_000}
    )
    got = confluent_consume(
        broker.bootstrap,
        topic,
        partitions,
        len(records),
        config={
            "fetch.max.bytes": 4096,
            "message.max.bytes": 4096,
            "max.partition.fetch.bytes": 1024,
            "receive.message.max.bytes": 1_000_000,
        },
    )
    assert_readback(records, got, delivered=delivered)


@pytest.mark.tansu_gap("max.message.bytes is not enforced on produce")
def test_oversized_record_is_refused_and_the_rest_kept(broker, topic):
    from confluent_kafka import Producer

    confluent_create_topic(broker.bootstrap, topic, 1, {"max.message.bytes": "4096"})
    small = make_records(30, 1, seed=78, big_every=0)
    small = [r for r in small if r.value is None or len(r.value) < 1000]
    # max.message.bytes bounds a whole batch: keep the producer's batches under it.
    fits = {"linger.ms": 0, "batch.size": 2500}
    before = confluent_produce(broker.bootstrap, topic, small[:10], fits)

    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "message.timeout.ms": 20000, "retries": 0}
    )
    outcome = []
    producer.produce(
        topic, value=b"x" * 20_000, key=b"too-big", partition=0, on_delivery=lambda err, msg: outcome.append(err)
    )
    assert producer.flush(20) == 0
    assert len(outcome) == 1 and outcome[0] is not None, "a record over max.message.bytes was accepted"
    assert outcome[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, outcome[0]

    after = confluent_produce(broker.bootstrap, topic, small[10:], fits)
    got = confluent_consume(broker.bootstrap, topic, 1, len(small))
    assert_readback(small, got, delivered=before + after)


@pytest.mark.tansu_gap("a fetch past the log end gets no OFFSET_OUT_OF_RANGE, so no reset happens")
def test_out_of_range_offsets_follow_auto_offset_reset(broker, topic):
    """A fetch past the log end is OFFSET_OUT_OF_RANGE; the consumer then resets as configured."""
    from confluent_kafka import Consumer

    partitions = 2
    confluent_create_topic(broker.bootstrap, topic, partitions)
    records = make_records(100, partitions, seed=79)
    delivered = confluent_produce(broker.bootstrap, topic, records)

    # earliest: from an offset far past the end back to 0, and everything is read.
    got = confluent_consume(
        broker.bootstrap,
        topic,
        partitions,
        len(records),
        start={p: 1_000_000 for p in range(partitions)},
        config={"auto.offset.reset": "earliest"},
    )
    assert_readback(records, got, delivered=delivered)

    # error: the consumer is told, with the partition, instead of silently skipping.
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"peers-reset-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 1_000_000)])
        deadline = time.monotonic() + 20
        error = None
        while error is None and time.monotonic() < deadline:
            for m in consumer.consume(10, 0.2):
                assert m.error() is not None, f"read a record at {m.partition()}/{m.offset()} past the log end"
                error = m.error()
        assert error is not None and error.code() == KafkaError._AUTO_OFFSET_RESET, error
    finally:
        consumer.close()

    # latest: only what is produced after the reset is read.
    ends = end_offsets(records, partitions)
    more = make_records(40, partitions, seed=80)
    fetching_from = {}

    def stats(text):  # librdkafka's view of each partition: where its fetcher stands after the reset
        for p, st in json.loads(text).get("topics", {}).get(topic, {}).get("partitions", {}).items():
            if int(p) >= 0 and st.get("fetch_state") == "active":
                fetching_from[int(p)] = st.get("next_offset")

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"peers-reset2-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
            "statistics.interval.ms": 100,
            "stats_cb": stats,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 1_000_000) for p in range(partitions)])
        # Produce the new records only once both partitions were reset to their end and are being fetched.
        deadline = time.monotonic() + 20
        while fetching_from != ends and time.monotonic() < deadline:
            assert consumer.consume(10, 0.1) == []
        assert fetching_from == ends
        more_delivered = confluent_produce(broker.bootstrap, topic, more)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(more) and time.monotonic() < deadline:
            for m in consumer.consume(100, 0.2):
                assert m.error() is None, m.error()
                got.append(
                    (m.offset(), Rec(m.partition(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]))
                )
    finally:
        consumer.close()
    assert_readback(more, got, delivered=more_delivered, start_offsets=ends)


def test_acks_zero_records_arrive_and_later_requests_still_pair(broker, topic):
    """acks=0 gets no Produce response; records still land, and an acks=all producer on the same
    broker afterwards gets its answers (responses stay paired with their requests)."""
    from confluent_kafka import Producer

    partitions = 2
    confluent_create_topic(broker.bootstrap, topic, partitions)
    records = make_records(300, partitions, seed=81)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "0", "linger.ms": 5})
    errors = []
    for r in records:
        producer.produce(
            topic,
            value=r.value,
            key=r.key,
            partition=r.partition,
            headers=list(r.headers) or None,
            timestamp=r.timestamp,
            on_delivery=lambda err, msg: err and errors.append(err),
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []
    # The same client then asks for metadata on that connection: it must get a proper answer.
    assert sorted(producer.list_topics(topic, timeout=10).topics[topic].partitions) == list(range(partitions))
    # acks=0 promises no order against another producer: wait until those records are all in the log.
    from confluent_kafka import Consumer

    ends = end_offsets(records, partitions)
    watcher = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"peers-acks0-{topic}"})
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(
            watcher.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] < ends[p] for p in range(partitions)
        ):
            time.sleep(0.05)
    finally:
        watcher.close()
    more = make_records(50, partitions, seed=82)
    more_delivered = confluent_produce(broker.bootstrap, topic, more, {"acks": "all"})
    got = confluent_consume(broker.bootstrap, topic, partitions, len(records) + len(more))
    assert_readback(records + more, got)
    found = {(r.partition, o): r for o, r in got}
    assert [found[d] for d in more_delivered] == more


def test_auto_create_disabled_by_override(peer_target, broker_factory, topic):
    """With auto.create.topics.enable=false a producer to an unknown topic fails and nothing is created."""
    if peer_target == "tansu":
        pytest.skip("Tansu takes no broker settings here")
    from confluent_kafka import Producer

    broker = broker_factory("memory", config={"auto.create.topics.enable": "false"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(topic, timeout=10)
    assert md.topics[topic].error is not None
    assert md.topics[topic].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 3000})
    outcome = []
    producer.produce(topic, value=b"v", key=b"k", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(15)
    assert len(outcome) == 1 and outcome[0] is not None
    assert outcome[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._MSG_TIMED_OUT), outcome[0]
    assert topic not in admin.list_topics(timeout=10).topics

    # Explicitly created topics still work there.
    confluent_create_topic(broker.bootstrap, topic, 1)
    records = make_records(30, 1, seed=83)
    delivered = confluent_produce(broker.bootstrap, topic, records)
    assert_readback(records, confluent_consume(broker.bootstrap, topic, 1, len(records)), delivered=delivered)
