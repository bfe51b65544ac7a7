"""confluent-kafka (librdkafka) consumer groups against the real broker: classic and KIP-848 protocols.

Three consumers in their own processes share a 6-partition topic. One closes cleanly, one is SIGKILLed;
the survivor must get every partition within the session timeout and, with the others, consume every
record. After a broker restart a new consumer resumes at the committed offsets.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .harness import create_topic, produce, read_events, wait_for

WORKER = Path(__file__).parent / "workers" / "ck_worker.py"
PARTITIONS = 6


def start_worker(broker, topic, group, protocol, tmp_path, name, instance=None):
    events, stop = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.stop"
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), broker.bootstrap, topic, group, protocol, str(events), str(stop)]
        + ([instance] if instance else []),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return {"proc": proc, "events": events, "stop": stop, "name": name}


def current_assignment(w):
    parts = None
    for e in read_events(w["events"]):
        if e["k"] == "assigned":
            parts = e["parts"]
    return parts


def consumed_values(workers):
    return {e["v"] for w in workers for e in read_events(w["events"]) if e["k"] == "rec"}


@pytest.mark.restarts_broker
@pytest.mark.parametrize("protocol", ["classic", "cooperative", "consumer"])
def test_three_consumers_close_kill_restart(broker, topic, tmp_path, protocol):
    create_topic(broker.bootstrap, topic, PARTITIONS)
    group = f"g-{topic}"
    produce(broker.bootstrap, topic, list(range(300)), PARTITIONS)
    workers = [start_worker(broker, topic, group, protocol, tmp_path, f"w{i}") for i in range(3)]
    try:
        # every partition assigned exactly once across the three members
        def balanced():
            assignments = [current_assignment(w) for w in workers]
            if any(a is None or len(a) != 2 for a in assignments):
                return False
            return sorted(p for a in assignments for p in a) == list(range(PARTITIONS))

        wait_for(balanced, 40, "three members with two partitions each")
        wait_for(lambda: consumed_values(workers) >= set(range(300)), 40, "the first 300 records")

        # one closes cleanly ...
        workers[0]["stop"].touch()
        workers[0]["proc"].wait(30)
        wait_for(
            lambda: all(len(current_assignment(w) or []) == 3 for w in workers[1:]),
            30,
            "two members with three partitions each",
        )
        # ... another is killed without leaving the group
        workers[1]["proc"].send_signal(signal.SIGKILL)
        workers[1]["proc"].wait(10)
        killed_at = time.time()
        produce(broker.bootstrap, topic, list(range(300, 600)), PARTITIONS)
        wait_for(
            lambda: current_assignment(workers[2]) == list(range(PARTITIONS)), 30, "the survivor to own every partition"
        )
        took = time.time() - killed_at
        print(f"{protocol}: the survivor owned every partition {took:.1f}s after the SIGKILL")
        assert took < 6.0 + 6.0, f"rebalance after the kill took {took:.1f}s (session timeout 6s)"
        wait_for(lambda: consumed_values(workers) >= set(range(600)), 40, "all 600 records")
        time.sleep(1.0)  # let the survivor commit its last batch
        workers[2]["stop"].touch()
        workers[2]["proc"].wait(30)
        assert "closed" in [e["k"] for e in read_events(workers[2]["events"])]
    finally:
        for w in workers:
            if w["proc"].poll() is None:
                w["proc"].kill()
                w["proc"].wait(10)

    # committed offsets survive a broker restart: a new member starts where the group left off
    broker.restart()
    produce(broker.bootstrap, topic, list(range(600, 700)), PARTITIONS)
    fresh = start_worker(broker, topic, group, protocol, tmp_path, "fresh")
    try:
        wait_for(lambda: consumed_values([fresh]) >= set(range(600, 700)), 60, "the 100 new records")
        time.sleep(1.0)
        got = [e for e in read_events(fresh["events"]) if e["k"] == "rec"]
        assert {e["v"] for e in got} == set(range(600, 700)), "re-read records that were committed before restart"
        first = {}
        for e in got:
            first.setdefault(e["p"], e["o"])
        assert all(o == 100 for o in first.values()), first  # 100 records per partition were committed
    finally:
        fresh["stop"].touch()
        try:
            fresh["proc"].wait(30)
        except subprocess.TimeoutExpired:
            fresh["proc"].kill()


def test_static_members_restart_without_rebalance(broker, topic, tmp_path):
    """group.instance.id: a static member that restarts within the session timeout gets its partitions back
    without a rebalance (the other member keeps its assignment and generation)."""
    from .wire import WireClient

    create_topic(broker.bootstrap, topic, 4)
    group = f"static-{topic}"
    produce(broker.bootstrap, topic, list(range(40)), 4)
    a = start_worker(broker, topic, group, "classic", tmp_path, "a", instance="inst-a")
    b = start_worker(broker, topic, group, "classic", tmp_path, "b", instance="inst-b")
    workers = [a, b]
    try:
        wait_for(lambda: all(len(current_assignment(w) or []) == 2 for w in workers), 40, "2 + 2 partitions")
        before_a = current_assignment(a)
        host, port = broker.bootstrap.split(":")
        wire = WireClient(host, int(port))

        def describe():
            return wire.call("DescribeGroups", 5, groups=[group]).groups[0]

        members_before = {m.group_instance_id: m.member_id for m in describe().members}
        assert set(members_before) == {"inst-a", "inst-b"}
        a["proc"].send_signal(signal.SIGKILL)
        a["proc"].wait(10)
        a2 = start_worker(broker, topic, group, "classic", tmp_path, "a2", instance="inst-a")
        workers.append(a2)
        wait_for(lambda: current_assignment(a2) == before_a, 30, "the restarted static member's partitions")
        d = describe()
        members_after = {m.group_instance_id: m.member_id for m in d.members}
        assert d.group_state == "Stable"
        assert members_after["inst-b"] == members_before["inst-b"]
        assert members_after["inst-a"] != members_before["inst-a"]  # a new member id for the same instance
        # b never lost its partitions: it logged a single assignment
        assert [e["parts"] for e in read_events(b["events"]) if e["k"] == "assigned" and e["parts"]] == [
            current_assignment(b)
        ]
        wire.close()
    finally:
        for w in workers:
            if w["proc"].poll() is None:
                w["stop"].touch()
        for w in workers:
            try:
                w["proc"].wait(20)
            except subprocess.TimeoutExpired:
                w["proc"].kill()


def test_consumer_protocol_regex_subscription_picks_up_new_topics(broker, topic):
    """group.protocol=consumer with a regex subscription: the coordinator resolves it, including topics created
    after the member joined (their partition counts bump the group epoch)."""
    import confluent_kafka as ck

    create_topic(broker.bootstrap, f"{topic}-a", 2)
    produce(broker.bootstrap, f"{topic}-a", list(range(10)), 2)
    c = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"rx-{topic}",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    c.subscribe([f"^{topic}-.*"])
    seen = set()

    def poll_until(n):
        def step():
            m = c.poll(0.2)
            if m is not None and not m.error():
                seen.add(int(m.value()))
            return len(seen) >= n

        return step

    try:
        wait_for(poll_until(10), 30, "the first topic's records")
        create_topic(broker.bootstrap, f"{topic}-b", 2)
        produce(broker.bootstrap, f"{topic}-b", list(range(10, 20)), 2)
        wait_for(poll_until(20), 40, "the new topic's records")
        assert seen == set(range(20))
        assert {tp.topic for tp in c.assignment()} == {f"{topic}-a", f"{topic}-b"}
    finally:
        c.close()


def test_admin_client_classic_and_consumer_groups(broker, topic):
    """confluent-kafka AdminClient: list (state, type), describe (ConsumerGroupDescribe for KIP-848 groups),
    list/alter offsets and delete groups."""
    import confluent_kafka as ck
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, list(range(10)), 2)
    consumers = []
    for proto in ("classic", "consumer"):
        conf = {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"{proto}-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        if proto == "consumer":
            conf["group.protocol"] = "consumer"
        c = ck.Consumer(conf)
        c.subscribe([topic])
        seen = []

        def step(c=c, seen=seen):
            m = c.poll(0.2)
            if m is not None and not m.error():
                seen.append(m)
            return len(seen) >= 10

        wait_for(step, 30, f"{proto} consumer")
        c.commit(asynchronous=False)
        consumers.append(c)
    classic, consumer = f"classic-{topic}", f"consumer-{topic}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        listed = {g.group_id: (g.state.name, g.type.name) for g in admin.list_consumer_groups().result(20).valid}
        assert listed[classic] == ("STABLE", "CLASSIC") and listed[consumer] == ("STABLE", "CONSUMER")
        for _gid, f in admin.describe_consumer_groups([classic, consumer]).items():
            g = f.result(20)
            assert g.state.name == "STABLE" and len(g.members) == 1
            assert sorted(tp.partition for tp in g.members[0].assignment.topic_partitions) == [0, 1]
        offs = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(classic)])[classic].result(20)
        assert sorted((tp.partition, tp.offset) for tp in offs.topic_partitions) == [(0, 5), (1, 5)]
        for c in consumers:
            c.close()
        consumers = []
        altered = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(classic, [TopicPartition(topic, 0, 2)])]
        )[classic].result(20)
        assert [(tp.partition, tp.offset, tp.error) for tp in altered.topic_partitions] == [(0, 2, None)]
        results = admin.delete_consumer_groups([classic, consumer, f"nope-{topic}"])
        assert results[classic].result(20) is None and results[consumer].result(20) is None
        with pytest.raises(ck.KafkaException, match="GROUP_ID_NOT_FOUND"):
            results[f"nope-{topic}"].result(20)
    finally:
        for c in consumers:
            c.close()
