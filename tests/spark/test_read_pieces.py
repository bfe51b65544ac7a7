"""``kafka_access.read_range`` reads a partition in small fetches, one fetched piece per poll (no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kafkawire.spark import kafka_access
from kafkawire.spark.schema import arrow_read_schema


@pytest.fixture(scope="module")
def big_partition(broker):
    from confluent_kafka import Producer

    topic = broker.new_topic("pieces", partitions=1)
    p = Producer(dict(broker.producer_conf(), **{"batch.size": 16384, "linger.ms": 5}))
    values = [(b"%06d" % i) * 50 for i in range(4000)]  # 300 bytes each: ~55 records per producer batch
    for i, v in enumerate(values):
        p.produce(topic, v, b"k%d" % (i % 10), partition=0)
    assert p.flush(60) == 0
    return topic, values


def _read(broker, topic, start, end, **conf):
    return list(
        kafka_access.read_range(
            dict({"bootstrap.servers": broker.bootstrap}, **conf),
            topic,
            0,
            start,
            end,
            include_headers=False,
            fail_on_data_loss=True,
        )
    )


@pytest.mark.parametrize("fetch_bytes", [None, "20000"])
def test_range_read_in_pieces_is_exact(broker, big_partition, fetch_bytes):
    topic, values = big_partition
    conf = {} if fetch_bytes is None else {"max.partition.fetch.bytes": fetch_bytes}
    start, end = 123, 3877  # both inside producer batches
    batches = _read(broker, topic, start, end, **conf)
    schema = arrow_read_schema(False)
    assert all(b.schema.equals(schema) for b in batches)
    table = pa.Table.from_batches(batches, schema=schema)
    assert table.column("offset").to_pylist() == list(range(start, end))
    assert table.column("value").to_pylist() == values[start:end]
    assert table.column("key").to_pylist() == [b"k%d" % (i % 10) for i in range(start, end)]
    assert set(table.column("partition").to_pylist()) == {0}
    assert set(table.column("topic").to_pylist()) == {topic}
    if fetch_bytes is not None:
        # one small fetch per yielded batch: many batches, none much larger than a fetch
        assert len(batches) > 20
        assert max(b.num_rows for b in batches) < 200


def test_default_fetch_size_is_bounded_but_overridable():
    _, kwargs = kafka_access.client_kwargs({"bootstrap.servers": "x:1"}, "consumer")
    assert "max_partition_fetch_bytes" not in kwargs  # the reader sets its own default
    assert kafka_access.READ_PARTITION_FETCH_BYTES <= 8 << 20
    _, kwargs = kafka_access.client_kwargs(
        {"bootstrap.servers": "x:1", "max.partition.fetch.bytes": "4096"}, "consumer"
    )
    assert kwargs["max_partition_fetch_bytes"] == 4096


def test_a_deleted_topic_is_named_as_gone_by_list_offsets(broker):
    """A topic deleted under a query: when the driver's ListOffsets is the call that finds it gone (a broker's
    metadata may still list it), the query fails as the metadata's absence fails it (UnknownTopicError, "do
    not exist"), as Spark's connector fails with UnknownTopicOrPartitionException whichever call sees it."""
    from confluent_kafka.admin import AdminClient

    topic = broker.new_topic("gone", partitions=1)
    access = kafka_access.Admin({"bootstrap.servers": broker.bootstrap})
    try:
        assert access.latest([(topic, 0)]) == {(topic, 0): 0}
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.delete_topics([topic]).values():
            future.result(30)
        with pytest.raises(kafka_access.UnknownTopicError, match="do not exist"):
            access.latest([(topic, 0)])
    finally:
        access.close()
