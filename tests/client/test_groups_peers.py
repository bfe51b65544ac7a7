"""kafkawire's group consumer in one group with other clients: librdkafka (confluent-kafka) and Java's
KafkaConsumer, with the classic protocol (the same assignor on both sides, either may be the leader) and
with KIP-848 (``group.protocol=consumer``), on kafkawire's broker and on Apache Kafka 4.4.

The peer runs in its own process (tests/groups/workers/ck_worker.py, tests/client/java/GroupMember.java)
and logs its assignment and records as JSON lines. Each scenario: the peer and a kafkawire member split
four partitions, every record is read by one of them, then the peer leaves and the kafkawire member takes
over its partitions and reads what was produced meanwhile (nothing read twice when the peer's commits
succeeded).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from groups.harness import read_events
from groups.test_confluent_kafka_groups import consumed_values, current_assignment, start_worker

from .groups_support import Members, create_topics, group_broker, names, produce, wait_for  # noqa: F401
from support.java import JavaProgram

JAVA_MEMBER = Path(__file__).parent / "java" / "GroupMember.java"
PARTITIONS = 4

# peer, its protocol setting, kafkawire's options
SCENARIOS = {
    "librdkafka-classic-range": (
        "ck",
        "classic",
        dict(group_protocol="classic", partition_assignment_strategy="range"),
    ),
    "librdkafka-classic-cooperative-sticky": (
        "ck",
        "cooperative",
        dict(group_protocol="classic", partition_assignment_strategy="cooperative-sticky"),
    ),
    "librdkafka-consumer": ("ck", "consumer", dict(group_protocol="consumer")),
    "java-classic-range": (
        "java",
        "classic:range",
        dict(group_protocol="classic", partition_assignment_strategy="range"),
    ),
    "java-classic-roundrobin": (
        "java",
        "classic:roundrobin",
        dict(group_protocol="classic", partition_assignment_strategy="roundrobin"),
    ),
    "java-classic-cooperative-sticky": (
        "java",
        "classic:cooperative-sticky",
        dict(group_protocol="classic", partition_assignment_strategy="cooperative-sticky"),
    ),
    "java-consumer": ("java", "consumer:uniform", dict(group_protocol="consumer")),
}


def start_java(broker, topic, group, setting, tmp_path, name):
    program = JavaProgram.require(JAVA_MEMBER)
    protocol, assignor = setting.split(":")
    events, stop = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.stop"
    log = open(tmp_path / f"{name}.log", "wb")
    proc = subprocess.Popen(
        program.command("GroupMember", broker.bootstrap, topic, group, protocol, assignor, events, stop),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    return {"proc": proc, "events": events, "stop": stop, "name": name}


@pytest.mark.parametrize("first", ["peer-first", "kafkawire-first"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_mixed_group(group_broker, names, scenario, first, tmp_path):
    """The member that joins first leads a classic group: with "kafkawire-first" kafkawire's assignor computes
    the peer's assignment too (which the peer must decode), with "peer-first" the peer's assignor computes
    kafkawire's. (KIP-848: the coordinator assigns either way.)"""
    peer_kind, setting, options = SCENARIOS[scenario]
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=PARTITIONS)
    m = Members()

    def start_peer():
        if peer_kind == "ck":
            return start_worker(group_broker, topic, group, setting, tmp_path, "peer")
        return start_java(group_broker, topic, group, setting, tmp_path, "peer")

    peer = None
    try:
        if first == "kafkawire-first":
            m.add("kw", bs, [topic], group_id=group, **options)
            m.poll_until(lambda: len(m.consumers["kw"].assignment()) == PARTITIONS, 60, "kafkawire owning all")
            peer = start_peer()
        else:
            peer = start_peer()
            wait_for(lambda: current_assignment(peer) or peer["proc"].poll() is not None, 90, "the peer's assignment")
            assert peer["proc"].poll() is None, f"the peer exited: {read_events(peer['events'])[-5:]}"
            m.add("kw", bs, [topic], group_id=group, **options)

        def split():
            theirs = current_assignment(peer) or []
            mine = sorted(p for _, p in m.consumers["kw"].assignment())
            return len(theirs) == 2 and len(mine) == 2 and sorted(theirs + mine) == list(range(PARTITIONS))

        m.poll_until(split, 90, "two partitions each")
        mine = sorted(p for _, p in m.consumers["kw"].assignment())
        if options["group_protocol"] == "classic":
            assert m.consumers["kw"].group_metadata()["leader"] is (first == "kafkawire-first")
        if options.get("partition_assignment_strategy") == "range":
            assert mine in ([0, 1], [2, 3]), mine  # contiguous ranges, whoever led the group
        if options.get("partition_assignment_strategy") == "roundrobin":
            assert mine in ([0, 2], [1, 3]), mine  # dealt out in turn
        # records produced now go to both: each reads its own partitions' (value v is in partition v % 4)
        produce(bs, topic, range(200), PARTITIONS)
        m.poll_until(
            lambda: set(m.seen()) | consumed_values([peer]) >= set(range(200)),
            60,
            "every record read by one of the two",
        )
        assert set(m.seen()) == {v for v in range(200) if v % PARTITIONS in mine}
        assert consumed_values([peer]) == {v for v in range(200) if v % PARTITIONS not in mine}
        # the peer leaves cleanly: kafkawire takes over its partitions and what arrives meanwhile
        peer["stop"].touch()
        peer["proc"].wait(60)
        assert "closed" in [e["k"] for e in read_events(peer["events"])]
        produce(bs, topic, range(200, 300), PARTITIONS)
        m.poll_until(lambda: len(m.consumers["kw"].assignment()) == PARTITIONS, 60, "every partition")
        m.poll_until(lambda: set(m.seen()) >= set(range(200, 300)), 60, "the records produced after the peer left")
        peer_values = [e["v"] for e in read_events(peer["events"]) if e["k"] == "rec"]
        commit_errors = [e for e in read_events(peer["events"]) if e["k"] == "commit_error"]
        if not commit_errors:
            # both commit what they read before giving partitions up: nothing is read twice
            both = list(m.seen().elements()) + peer_values
            assert len(both) == len(set(both)), f"read twice: {sorted(v for v in set(both) if both.count(v) > 1)[:20]}"
        print(
            f"{scenario} {first} on {group_broker.target}: kafkawire read {len(m.seen())}, the peer {len(peer_values)}, "
            f"peer commit errors {len(commit_errors)}"
        )
    finally:
        if peer is not None and peer["proc"].poll() is None:
            peer["proc"].kill()
            peer["proc"].wait(10)
        m.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_three_clients_one_group_and_a_kill(group_broker, names, protocol, tmp_path):
    """kafkawire, librdkafka and Java in one group of six partitions (two each; classic: range everywhere);
    the Java member is SIGKILLed (no leave): after the session timeout kafkawire and librdkafka share its
    partitions and every record, before and after the kill, is read by someone."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=6)
    ck = start_worker(group_broker, topic, group, protocol, tmp_path, "ck")
    java = start_java(
        group_broker, topic, group, "classic:range" if protocol == "classic" else "consumer:uniform", tmp_path, "java"
    )
    peers = [ck, java]
    options = dict(group_protocol=protocol, partition_assignment_strategy="range")
    m = Members()
    try:
        wait_for(
            lambda: all(current_assignment(p) is not None or p["proc"].poll() is not None for p in peers),
            90,
            "both peers in the group",
        )
        m.add("kw", bs, [topic], group_id=group, **options)

        def sizes():
            return sorted([len(current_assignment(p) or []) for p in peers] + [len(m.consumers["kw"].assignment())])

        m.poll_until(lambda: sizes() == [2, 2, 2], 90, "two partitions each")
        produce(bs, topic, range(300), 6)
        m.poll_until(lambda: set(m.seen()) | consumed_values(peers) >= set(range(300)), 60, "the first 300")
        java["proc"].kill()
        java["proc"].wait(10)
        produce(bs, topic, range(300, 600), 6)
        m.poll_until(
            lambda: len(m.consumers["kw"].assignment()) == 3 and len(current_assignment(ck) or []) == 3,
            60,
            "the survivors with three partitions each",
        )
        m.poll_until(lambda: set(m.seen()) | consumed_values(peers) >= set(range(600)), 60, "all 600 records")
        mine = {p for _, p in m.consumers["kw"].assignment()}
        assert mine | set(current_assignment(ck)) == set(range(6))
    finally:
        for p in peers:
            if p["proc"].poll() is None:
                p["proc"].kill()
                p["proc"].wait(10)
        m.close()
