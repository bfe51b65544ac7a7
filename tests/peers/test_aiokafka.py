"""aiokafka against the broker: AIOKafkaProducer, AIOKafkaConsumer with assign."""

from __future__ import annotations

import asyncio

import pytest

from .peer_harness import Rec, assert_readback, confluent_consume, confluent_create_topic, make_records

aiokafka = pytest.importorskip("aiokafka")
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402

pytestmark = pytest.mark.timeout(120)


async def produce(bootstrap, topic, records, **config):
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **config)
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                value=r.value,
                key=r.key,
                partition=r.partition,
                timestamp_ms=r.timestamp,
                headers=list(r.headers),
            )
            for r in records
        ]
        metas = await asyncio.wait_for(asyncio.gather(*futures), 60)
    finally:
        await producer.stop()
    for r, meta in zip(records, metas):
        assert (meta.topic, meta.partition) == (topic, r.partition)
    return [(m.partition, m.offset) for m in metas]


async def consume(bootstrap, topic, partitions, count, timeout=60.0):
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    await consumer.start()
    got: list[tuple[int, Rec]] = []
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        await consumer.seek_to_beginning()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        extra_polls = 2  # surplus records are a failure too
        while loop.time() < deadline and extra_polls:
            batches = await consumer.getmany(timeout_ms=200, max_records=1000)
            for tp, messages in batches.items():
                for m in messages:
                    assert m.timestamp_type == 0, f"{tp}/{m.offset}: {m.timestamp_type}"
                    got.append((m.offset, Rec(m.partition, m.key, m.value, tuple(m.headers), m.timestamp)))
            if len(got) >= count:
                extra_polls -= 1
    finally:
        await consumer.stop()
    return got


_INIT_PID_GAP = pytest.mark.tansu_gap("InitProducerId from aiokafka answers UNKNOWN_SERVER_ERROR")


@pytest.mark.parametrize(
    "codec,idempotent",
    [
        (None, False),
        pytest.param(None, True, marks=_INIT_PID_GAP),
        ("gzip", False),
        pytest.param("snappy", True, marks=_INIT_PID_GAP),
        pytest.param("lz4", True, marks=_INIT_PID_GAP),
        ("zstd", False),
    ],
)
def test_producer_then_assigned_consumer(broker, topic, codec, idempotent):
    partitions = 3
    confluent_create_topic(broker.bootstrap, topic, partitions)
    # aiokafka refuses null header values on send.
    records = make_records(250, partitions, seed=200 + len(str(codec)) * 2 + idempotent, null_header_values=False)
    config = {"compression_type": codec, "enable_idempotence": idempotent, "acks": "all" if idempotent else 1}

    async def scenario():
        delivered = await produce(broker.bootstrap, topic, records, **config)
        got = await consume(broker.bootstrap, topic, partitions, len(records))
        return delivered, got

    delivered, got = asyncio.run(scenario())
    assert_readback(records, got, delivered=delivered)
    assert_readback(records, confluent_consume(broker.bootstrap, topic, partitions, len(records)), delivered=delivered)


@pytest.mark.tansu_gap("ListOffsets latest is the last batch's base offset + 1")
def test_consumer_offset_lookups(broker, topic):
    partitions = 2
    confluent_create_topic(broker.bootstrap, topic, partitions)
    records = make_records(120, partitions, seed=250, null_header_values=False)

    async def scenario():
        delivered = await produce(broker.bootstrap, topic, records, compression_type="gzip")
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            begin = await consumer.beginning_offsets(tps)
            end = await consumer.end_offsets(tps)
            hits = {}
            for i in (0, 33, len(records) - 1):
                r = records[i]
                tp = TopicPartition(topic, r.partition)
                hits[i] = (await consumer.offsets_for_times({tp: r.timestamp}))[tp]
            beyond = (await consumer.offsets_for_times({tps[0]: records[-1].timestamp + 1}))[tps[0]]
        finally:
            await consumer.stop()
        return delivered, tps, begin, end, hits, beyond

    delivered, tps, begin, end, hits, beyond = asyncio.run(scenario())
    counts = {p: sum(1 for r in records if r.partition == p) for p in range(partitions)}
    assert begin == {tp: 0 for tp in tps}
    assert end == {tp: counts[tp.partition] for tp in tps}
    for i, hit in hits.items():
        assert (hit.offset, hit.timestamp) == (delivered[i][1], records[i].timestamp), f"record #{i}"
    assert beyond is None


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_consumer_reads_what_librdkafka_produced(broker, topic, codec):
    """Batches built by librdkafka (including null header values, which aiokafka cannot send)."""
    from .peer_harness import confluent_produce

    partitions = 3
    confluent_create_topic(broker.bootstrap, topic, partitions)
    records = make_records(250, partitions, seed=260 + len(codec))
    delivered = confluent_produce(broker.bootstrap, topic, records, {"compression.type": codec})
    got = asyncio.run(consume(broker.bootstrap, topic, partitions, len(records)))
    assert_readback(records, got, delivered=delivered)
