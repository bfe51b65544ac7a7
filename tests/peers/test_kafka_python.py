"""kafka-python 3.x against the broker: KafkaProducer, KafkaConsumer with assign, KafkaAdminClient."""

from __future__ import annotations

import time

import pytest

from .peer_harness import Rec, assert_readback, confluent_consume, make_records

kafka = pytest.importorskip("kafka")
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import ConfigResource, ConfigResourceType  # noqa: E402
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError  # noqa: E402

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="peers-admin")
    yield client
    client.close()


def create(admin, topic, partitions, configs=None):
    result = admin.create_topics(
        {topic: {"num_partitions": partitions, "replication_factor": 1, "configs": configs or {}}},
        wait_for_metadata=True,
    )
    (entry,) = result["topics"]
    assert (entry["name"], entry["error_code"]) == (topic, 0)
    return entry


def produce(bootstrap, topic, records, **config):
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **config)
    try:
        futures = [
            producer.send(
                topic,
                value=r.value,
                key=r.key,
                headers=list(r.headers),
                partition=r.partition,
                timestamp_ms=r.timestamp,
            )
            for r in records
        ]
        producer.flush(60)
        delivered = []
        for r, fut in zip(records, futures):
            meta = fut.get(timeout=30)
            assert (meta.topic, meta.partition) == (topic, r.partition)
            delivered.append((meta.partition, meta.offset))
        return delivered
    finally:
        producer.close(timeout=10)


def consume(bootstrap, topic, partitions, count, timeout=60.0):
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        consumer_timeout_ms=1000,
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        got: list[tuple[int, Rec]] = []
        deadline = time.monotonic() + timeout
        extra_polls = 2  # after the expected count, poll a little more: surplus records are a failure too
        while time.monotonic() < deadline and extra_polls:
            batch = consumer.poll(timeout_ms=200, max_records=1000)
            for tp, messages in batch.items():
                for m in messages:
                    assert m.timestamp_type == 0, f"timestamp type {m.timestamp_type} at {tp}/{m.offset}"
                    got.append((m.offset, Rec(m.partition, m.key, m.value, tuple(m.headers), m.timestamp)))
            if len(got) >= count:
                extra_polls -= 1
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize(
    "codec,idempotent",
    [
        (None, False),
        (None, True),
        ("gzip", True),
        ("snappy", True),
        ("lz4", True),
        ("zstd", True),
        ("lz4", False),
    ],
)
def test_producer_then_assigned_consumer(broker, admin, topic, codec, idempotent):
    partitions = 3
    create(admin, topic, partitions)
    # kafka-python refuses null header values on send.
    records = make_records(250, partitions, seed=100 + len(str(codec)) * 2 + idempotent, null_header_values=False)
    config = {"compression_type": codec, "enable_idempotence": idempotent, "acks": "all" if idempotent else 1}
    delivered = produce(broker.bootstrap, topic, records, **config)
    got = consume(broker.bootstrap, topic, partitions, len(records))
    assert_readback(records, got, delivered=delivered)
    # librdkafka reads the same bytes back identically.
    assert_readback(records, confluent_consume(broker.bootstrap, topic, partitions, len(records)), delivered=delivered)


def test_admin_create_describe_delete(broker, admin, topic):
    node_id = admin.describe_cluster()["controller_id"]
    entry = create(admin, topic, 3, {"retention.ms": "7200000"})
    assert (entry["num_partitions"], entry["replication_factor"]) in {(3, 1), (-1, -1)}

    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}})

    assert topic in admin.list_topics()
    (desc,) = admin.describe_topics([topic])
    assert (desc["name"], desc["error_code"], desc["is_internal"]) == (topic, 0, False)
    assert [p["partition_index"] for p in sorted(desc["partitions"], key=lambda p: p["partition_index"])] == [0, 1, 2]
    for p in desc["partitions"]:
        assert (p["error_code"], p["leader_id"], p["replica_nodes"], p["isr_nodes"]) == (
            0,
            node_id,
            [node_id],
            [node_id],
        )

    cluster = admin.describe_cluster()
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(node_id, broker.host, broker.port)]
    assert cluster["cluster_id"]

    admin.delete_topics([topic])
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and topic in admin.list_topics():
        time.sleep(0.1)
    assert topic not in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics([topic])


@pytest.mark.tansu_gap("DescribeConfigs reports topic configs set at creation as DEFAULT_CONFIG")
def test_admin_describe_configs(broker, admin, topic):
    create(admin, topic, 1, {"retention.ms": "7200000", "segment.bytes": "16777216"})
    resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    modified = admin.describe_configs([resource])["topic"][topic]
    assert modified["retention.ms"]["value"] == "7200000"
    assert modified["segment.bytes"]["value"] == "16777216"
    assert modified["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    everything = admin.describe_configs([resource], config_filter="all")["topic"][topic]
    assert set(modified) <= set(everything)
    assert everything["cleanup.policy"]["value"] == "delete"
    assert everything["cleanup.policy"]["config_source"] != "DYNAMIC_TOPIC_CONFIG"

    node_id = admin.describe_cluster()["controller_id"]
    broker_configs = admin.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER, str(node_id))], config_filter="all"
    )["broker"][str(node_id)]
    assert broker_configs, "the broker describes no configs"


@pytest.mark.tansu_gap("ListOffsets latest is the last batch's base offset + 1")
def test_consumer_offset_lookups(broker, admin, topic):
    """beginning_offsets / end_offsets / offsets_for_times agree with what was produced."""
    partitions = 2
    create(admin, topic, partitions)
    records = make_records(120, partitions, seed=150, null_header_values=False)
    delivered = produce(broker.bootstrap, topic, records, compression_type="lz4")
    counts = {p: sum(1 for r in records if r.partition == p) for p in range(partitions)}
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        assert consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert consumer.end_offsets(tps) == {tp: counts[tp.partition] for tp in tps}
        for i in (0, 17, 60, len(records) - 1):
            r = records[i]
            found = consumer.offsets_for_times({TopicPartition(topic, r.partition): r.timestamp})
            hit = found[TopicPartition(topic, r.partition)]
            assert (hit.offset, hit.timestamp) == (delivered[i][1], r.timestamp), f"record #{i}"
        beyond = consumer.offsets_for_times({tps[0]: records[-1].timestamp + 1})
        assert beyond[tps[0]] is None
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", ["snappy", "zstd"])
def test_consumer_reads_what_librdkafka_produced(broker, topic, codec):
    """Batches built by librdkafka (including null header values, which kafka-python cannot send)."""
    from .peer_harness import confluent_create_topic, confluent_produce

    partitions = 3
    confluent_create_topic(broker.bootstrap, topic, partitions)
    records = make_records(250, partitions, seed=160 + len(codec))
    delivered = confluent_produce(broker.bootstrap, topic, records, {"compression.type": codec})
    assert_readback(records, consume(broker.bootstrap, topic, partitions, len(records)), delivered=delivered)
