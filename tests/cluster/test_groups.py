"""A consumer group of kafkawire's client follows its coordinator when the broker hosting it stops."""

from __future__ import annotations

import asyncio
import time

import pytest

from kafkawire.client import AsyncAdmin, Consumer, Producer
from kafkawire.protocol import message_class

from .conftest import node_down
from .test_client import create

pytestmark = pytest.mark.kafka_cluster


def coordinator_of(bootstrap: str, group: str) -> int:
    async def ask() -> int:
        async with AsyncAdmin(bootstrap) as admin:
            request = message_class("FindCoordinatorRequest")(key_type=0, coordinator_keys=[group])
            answer = await (await admin.cluster.any_connection()).request(request, version=4)
            (found,) = answer.coordinators
            assert found.error_code == 0, found
            return found.node_id

    return asyncio.run(ask())


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_commits_reach_a_moved_coordinator(kafka_cluster, topic_name, protocol):
    create(kafka_cluster, topic_name, partitions=3)
    total = 1500
    with Producer(kafka_cluster.bootstrap) as producer:
        for i in range(total):
            producer.produce(topic_name, b"%d" % i, key=b"%d" % i)
        producer.flush(60)
    group = f"{topic_name}-group"
    seen: list[int] = []
    with Consumer(
        kafka_cluster.bootstrap,
        group_id=group,
        group_protocol=protocol,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_partition_fetch_bytes=2048,
    ) as consumer:
        consumer.subscribe([topic_name])
        deadline = time.monotonic() + 60
        while len(seen) < 300 and time.monotonic() < deadline:
            seen += [int(r.value) for r in consumer.poll(timeout=1.0)]
        consumer.commit(timeout=30)
        coordinator = coordinator_of(kafka_cluster.bootstrap, group)
        with node_down(kafka_cluster, coordinator):
            assert coordinator_of(kafka_cluster.bootstrap, group) != coordinator
            deadline = time.monotonic() + 90
            while len(seen) < total and time.monotonic() < deadline:
                seen += [int(r.value) for r in consumer.poll(timeout=1.0)]
            consumer.commit(timeout=60)
            ends = consumer.end_offsets([(topic_name, p) for p in range(3)])
            committed = consumer.committed([(topic_name, p) for p in range(3)], timeout=30)
    assert sorted(seen) == list(range(total))
    assert {tp: getattr(o, "offset", o) for tp, o in committed.items()} == ends
