"""kafka-python and aiokafka group consumers: subscribe, commit, rebalance between two members."""

from __future__ import annotations

import asyncio
import threading
import time

from .harness import create_topic, produce, wait_for

PARTITIONS = 6


def test_kafka_python_two_members(broker, topic):
    from kafka import KafkaAdminClient, KafkaConsumer

    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce(broker.bootstrap, topic, list(range(120)), PARTITIONS)
    group = f"kp-{topic}"
    seen: list[int] = []
    assignments: dict[int, set] = {}
    stop = threading.Event()
    errors: list[BaseException] = []

    def run(idx):
        try:
            c = KafkaConsumer(
                topic,
                bootstrap_servers=broker.bootstrap,
                group_id=group,
                client_id=f"kp{idx}",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=500,
                max_poll_interval_ms=20000,
            )
            while not stop.is_set():
                batch = c.poll(timeout_ms=200)
                assignments[idx] = {tp.partition for tp in c.assignment()}
                for records in batch.values():
                    seen.extend(int(r.value) for r in records)
                if batch:
                    c.commit()
            c.close()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t1 = threading.Thread(target=run, args=(1,), daemon=True)
    t1.start()
    wait_for(lambda: len(assignments.get(1, ())) == PARTITIONS, 30, "the first member to own every partition")
    wait_for(lambda: set(seen) >= set(range(120)), 30, "the first 120 records")
    t2 = threading.Thread(target=run, args=(2,), daemon=True)
    t2.start()
    wait_for(
        lambda: (
            len(assignments.get(1, ())) == 3
            and len(assignments.get(2, ())) == 3
            and not (assignments[1] & assignments[2])
        ),
        40,
        "a rebalance to 3 + 3 partitions",
    )
    produce(broker.bootstrap, topic, list(range(120, 240)), PARTITIONS)
    wait_for(lambda: set(seen) >= set(range(240)), 30, "all 240 records")
    time.sleep(1.0)
    stop.set()
    t1.join(30)
    t2.join(30)
    assert not errors, errors
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        offsets = admin.list_group_offsets({group: None})
        got = offsets[group] if group in offsets else offsets
        assert {tp.partition: om.offset for tp, om in got.items() if tp.topic == topic} == {
            p: 40 for p in range(PARTITIONS)
        }
        listed = admin.list_groups()
        assert group in str(listed)
        described = admin.describe_groups([group])
        assert "Empty" in str(described)
        admin.delete_groups([group])
        assert group not in str(admin.list_groups())
    finally:
        admin.close()


def test_aiokafka_two_members(broker, topic):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce(broker.bootstrap, topic, list(range(120)), PARTITIONS)
    group = f"aio-{topic}"

    async def main():
        seen: list[int] = []
        stop = asyncio.Event()
        consumers = {}

        async def run(idx):
            c = AIOKafkaConsumer(
                topic,
                bootstrap_servers=broker.bootstrap,
                group_id=group,
                client_id=f"aio{idx}",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=500,
            )
            consumers[idx] = c
            await c.start()
            try:
                while not stop.is_set():
                    batch = await c.getmany(timeout_ms=200)
                    for records in batch.values():
                        seen.extend(int(r.value) for r in records)
                    if batch:
                        await c.commit()
            finally:
                await c.stop()

        async def until(pred, timeout, what):
            deadline = time.monotonic() + timeout
            while not pred():
                if time.monotonic() > deadline:
                    raise AssertionError(f"timed out waiting for {what}")
                await asyncio.sleep(0.1)

        def parts(idx):
            c = consumers.get(idx)
            return {tp.partition for tp in c.assignment()} if c is not None else set()

        t1 = asyncio.ensure_future(run(1))
        await until(lambda: len(parts(1)) == PARTITIONS, 30, "member 1 owning every partition")
        await until(lambda: set(seen) >= set(range(120)), 30, "120 records")
        t2 = asyncio.ensure_future(run(2))
        await until(
            lambda: len(parts(1)) == 3 and len(parts(2)) == 3 and not (parts(1) & parts(2)), 40, "a 3 + 3 rebalance"
        )
        await asyncio.get_running_loop().run_in_executor(
            None, produce, broker.bootstrap, topic, list(range(120, 240)), PARTITIONS
        )
        await until(lambda: set(seen) >= set(range(240)), 30, "all 240 records")
        await asyncio.sleep(1.0)
        c1 = consumers[1]
        committed = {}
        for p in range(PARTITIONS):
            committed[p] = await c1.committed(TopicPartition(topic, p))
        stop.set()
        await asyncio.gather(t1, t2)
        assert committed == {p: 40 for p in range(PARTITIONS)}

    asyncio.run(asyncio.wait_for(main(), 120))
