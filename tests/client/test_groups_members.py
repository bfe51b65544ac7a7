"""kafkawire's group consumer on the wire, against kafkawire's broker and Apache Kafka 4.4.

Every scenario runs on both brokers (``group_broker``). Waits are bounded; the
members poll from this thread while their heartbeats run in the client's loop.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from kafkawire.client import AsyncConsumer, Consumer

from .groups_support import (  # noqa: F401
    FAST,
    Members,
    covers,
    create_topics,
    group_broker,
    names,
    private_group_broker,
    produce,
    wait_for,
)

PROTOCOLS = {
    "classic-range": dict(group_protocol="classic", partition_assignment_strategy="range"),
    "classic-roundrobin": dict(group_protocol="classic", partition_assignment_strategy="roundrobin"),
    "classic-cooperative-sticky": dict(group_protocol="classic", partition_assignment_strategy="cooperative-sticky"),
    "consumer": dict(group_protocol="consumer"),
}


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_two_members_share_partitions_exactly_once_across_a_rebalance(group_broker, names, protocol):
    """One member reads alone, a second joins while records keep coming: the partitions end up split, and
    every record is returned exactly once across both (revoked partitions are committed first)."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=6)
    produce(bs, topic, range(0, 300), 6)
    m = Members()
    try:
        m.add("a", bs, [topic], group_id=group, **PROTOCOLS[protocol])
        m.poll_until(lambda: len(m.seen()) >= 100, 60, "the first member's first 100 records")
        assert sorted(m.consumers["a"].assignment()) == [(topic, p) for p in range(6)]
        m.add("b", bs, [topic], group_id=group, **PROTOCOLS[protocol])
        produce(bs, topic, range(300, 600), 6)
        m.poll_until(lambda: all(len(a) == 3 for a in m.assignments().values()), 60, "three partitions each")
        assert covers(m.assignments().values(), topic, 6)
        produce(bs, topic, range(600, 700), 6)
        m.poll_until(lambda: set(m.seen()) >= set(range(700)), 60, "all 700 records")
        seen = m.seen()
        assert set(seen) == set(range(700))
        dups = {v: n for v, n in seen.items() if n > 1}
        assert not dups, f"returned more than once: {sorted(dups)[:20]}"
        assert m.records["b"], "the second member read nothing"
        if protocol != "consumer":
            meta = m.consumers["a"].group_metadata()
            assert meta["assignor"] == PROTOCOLS[protocol]["partition_assignment_strategy"]
    finally:
        m.close()


def _two_topics(group_broker, names, partitions=3):
    topic, group = names
    t1, t2 = f"{topic}-x", f"{topic}-y"
    create_topics(group_broker.bootstrap, t1, t2, partitions=partitions)
    return t1, t2, group


# Two static members over two topics of three partitions: what each eager assignor deals out ("x" and "y" stand
# for the two topics). Range: per topic, contiguous ranges in member order (the instance ids order the members).
# Roundrobin: all partitions of all topics, sorted, dealt out in turn.
EAGER_ASSIGNMENTS = {
    "range": {"a": [("x", 0), ("x", 1), ("y", 0), ("y", 1)], "b": [("x", 2), ("y", 2)]},
    "roundrobin": {"a": [("x", 0), ("x", 2), ("y", 1)], "b": [("x", 1), ("y", 0), ("y", 2)]},
}


@pytest.mark.parametrize("strategy", sorted(EAGER_ASSIGNMENTS))
def test_eager_assignor_on_the_wire(group_broker, names, strategy):
    t1, t2, group = _two_topics(group_broker, names)
    topic = {"x": t1, "y": t2}
    m = Members()
    try:
        opts = dict(group_id=group, partition_assignment_strategy=strategy)
        m.add("a", group_broker.bootstrap, [t1, t2], group_instance_id="inst-a", **opts)
        m.add("b", group_broker.bootstrap, [t1, t2], group_instance_id="inst-b", **opts)
        m.poll_until(
            lambda: all(m.assignments().values()) and sum(map(len, m.assignments().values())) == 6,
            60,
            "six partitions assigned",
        )
        expected = {name: [(topic[t], p) for t, p in tps] for name, tps in EAGER_ASSIGNMENTS[strategy].items()}
        assert m.assignments() == expected
    finally:
        m.close()


def test_cooperative_sticky_keeps_owned_partitions(group_broker, names):
    """Cooperative-sticky: when a second member joins, the first keeps half of what it owned and revokes
    only the partitions that move (never everything, as an eager rebalance would), which the newcomer gets."""
    t1, t2, group = _two_topics(group_broker, names)
    m = Members()
    try:
        opts = dict(group_id=group, partition_assignment_strategy="cooperative-sticky")
        m.add("a", group_broker.bootstrap, [t1, t2], **opts)
        m.poll_until(lambda: len(m.assignments()["a"]) == 6, 60, "the first member owning all six")
        before = set(m.assignments()["a"])
        m.add("b", group_broker.bootstrap, [t1, t2], **opts)
        m.poll_until(lambda: sorted(map(len, m.assignments().values())) == [3, 3], 60, "three partitions each")
        after_a, after_b = set(m.assignments()["a"]), set(m.assignments()["b"])
        assert after_a < before, "the first member kept partitions it did not own before"
        revoked = [set(tps) for name, kind, tps in m.events if name == "a" and kind == "revoked"]
        assert revoked and set().union(*revoked) == after_b, (revoked, after_b)
        assert all(not (r & after_a) for r in revoked), "a partition it kept was revoked"
        assert not [e for e in m.events if e[1] == "lost"]
        assert m.consumers["a"].group_metadata()["assignor"] == "cooperative-sticky"
    finally:
        m.close()


def test_pattern_subscription(group_broker, names):
    """subscribe(pattern=...): the topics whose whole name matches, including one created later."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, f"{topic}-1", f"{topic}-2", f"other-{topic}", partitions=2)
    m = Members()
    try:
        m.add("a", bs, pattern=re.compile(re.escape(topic) + r"-\d"), group_id=group)
        m.poll_until(lambda: len(m.assignments()["a"]) == 4, 60, "both matching topics")
        assert {t for t, _ in m.assignments()["a"]} == {f"{topic}-1", f"{topic}-2"}
        create_topics(bs, f"{topic}-3", partitions=2)
        m.poll_until(lambda: len(m.assignments()["a"]) == 6, 60, "the new matching topic")
    finally:
        m.close()


@pytest.mark.parametrize("protocol", ["classic-range", "consumer"])
def test_manual_commits_resume_at_the_committed_offset(group_broker, names, protocol):
    """enable_auto_commit=False: commit() and commit_async() store positions; the next member resumes there."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=2)
    produce(bs, topic, range(200), 2)
    opts = dict(FAST, group_id=group, enable_auto_commit=False, **PROTOCOLS[protocol])
    with Consumer(bs, **opts) as c:
        c.subscribe([topic])
        got: list = []
        deadline = time.monotonic() + 60
        while len(got) < 60 and time.monotonic() < deadline:
            got += c.poll(0.5, max_records=60 - len(got))
        assert len(got) == 60
        c.commit()
        expected = {}
        for r in got:
            expected[(r.topic, r.partition)] = r.offset + 1
        assert {tp: o for tp, o in c.committed(list(expected)).items()} == expected
        # commit_async of explicit offsets: the callback sees them, committed() reads them back
        results = []
        target = {(topic, 0): 70, (topic, 1): 40}
        fut = c.commit_async(target, callback=lambda offsets, err: results.append((offsets, err)))
        fut.result(30)
        wait_for(lambda: results, 10, "the commit callback")
        assert results == [(target, None)]
        assert c.committed(list(target)) == target
    # without auto-commit, close commits nothing more: the next member starts at 70 and 40
    with Consumer(bs, **opts) as c2:
        c2.subscribe([topic])
        first: dict = {}
        deadline = time.monotonic() + 60
        while len(first) < 2 and time.monotonic() < deadline:
            for r in c2.poll(0.5):
                first.setdefault(r.partition, r.offset)
        assert first == {0: 70, 1: 40}


@pytest.mark.parametrize("protocol", ["classic-range", "consumer"])
def test_auto_commit_on_close(group_broker, names, protocol):
    """With auto-commit (an interval longer than the test), close() commits what polls returned."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=3)
    produce(bs, topic, range(90), 3)
    opts = dict(FAST, group_id=group, auto_commit_interval_ms=600_000, **PROTOCOLS[protocol])
    c = Consumer(bs, **opts)
    c.subscribe([topic])
    got: list = []
    deadline = time.monotonic() + 60
    while len(got) < 45 and time.monotonic() < deadline:
        got += c.poll(0.5, max_records=45 - len(got))
    positions = {}
    for r in got:
        positions[(r.topic, r.partition)] = r.offset + 1
    c.close()
    with Consumer(bs, **dict(opts, enable_auto_commit=False)) as probe:
        committed = probe.committed([(topic, p) for p in range(3)])
    # a partition that returned records: committed after its last one; one that returned none (its fetched
    # records were held back by max_records) is committed at its start, 0, or not at all, as Kafka's client does
    assert positions and all(committed[tp] == o for tp, o in positions.items())
    assert all(committed[tp] in (None, 0) for tp in committed if tp not in positions)


@pytest.mark.parametrize("protocol", ["classic-range", "consumer"])
def test_static_member_restart_keeps_its_assignment(group_broker, names, protocol):
    """group_instance_id: a static member that closes and comes back within the session timeout gets the same
    partitions; the other member is not rebalanced (no revocation, same generation or epoch)."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=4)
    produce(bs, topic, range(40), 4)
    m = Members()
    try:
        opts = dict(group_id=group, **PROTOCOLS[protocol])
        m.add("a", bs, [topic], group_instance_id="static-a", **opts)
        m.add("b", bs, [topic], group_instance_id="static-b", **opts)
        m.poll_until(lambda: sorted(map(len, m.assignments().values())) == [2, 2], 60, "two partitions each")
        before = m.assignments()
        b_meta = m.consumers["b"].group_metadata()
        m.events.clear()
        m.close("a")  # static: commits, but does not leave the group
        m.add("a2", bs, [topic], group_instance_id="static-a", **opts)
        m.poll_until(lambda: m.assignments()["a2"], 30, "the restarted static member's partitions")
        m.poll_round()
        assert m.assignments()["a2"] == before["a"]
        assert m.assignments()["b"] == before["b"]
        assert not [e for e in m.events if e[0] == "b"], m.events
        if protocol != "consumer":
            assert m.consumers["b"].group_metadata()["generation"] == b_meta["generation"]
    finally:
        m.close()


def _cli_member(bootstrap, topic, group, protocol, tmp_path, name):
    out = open(tmp_path / f"{name}.out", "wb")
    err = open(tmp_path / f"{name}.err", "wb")
    cmd = [
        sys.executable,
        "-m",
        "kafkawire",
        "consume",
        topic,
        "--bootstrap",
        bootstrap,
        "--group",
        group,
        "--group-protocol",
        protocol,
        "--from-beginning",
        "--print-offset",
        "--verbose",
        "--consumer-property",
        "session.timeout.ms=6000",
        "--consumer-property",
        "heartbeat.interval.ms=500",
    ]
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=dict(os.environ))
    out.close()
    err.close()
    return proc


def _cli_assignment(path) -> list | None:
    last = None
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(("assigned: ", "revoked: ", "lost: ")):
            last = line
    return last


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_killed_member_partitions_move_after_session_timeout(group_broker, names, protocol, tmp_path):
    """A member in another process (``kafkawire consume --group``) is SIGKILLed: no LeaveGroup, its
    connections just drop. The surviving member owns every partition once the session times out (6 s)."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=4)
    produce(bs, topic, range(200), 4)
    proc = _cli_member(bs, topic, group, protocol, tmp_path, "victim")
    m = Members()
    try:
        wait_for(
            lambda: _cli_assignment(tmp_path / "victim.err") or proc.poll() is not None,
            60,
            "the CLI member's first assignment",
        )
        assert proc.poll() is None, (tmp_path / "victim.err").read_text()
        m.add("survivor", bs, [topic], group_id=group, group_protocol=protocol, partition_assignment_strategy="range")
        m.poll_until(lambda: len(m.assignments()["survivor"]) == 2, 60, "the partitions split two and two")
        wait_for(
            lambda: (_cli_assignment(tmp_path / "victim.err") or "").count(f"{topic}-") == 2,
            30,
            "the CLI member down to two partitions",
        )
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        killed = time.monotonic()
        m.poll_until(lambda: len(m.assignments()["survivor"]) == 4, 40, "the survivor owning every partition")
        took = time.monotonic() - killed
        print(f"{protocol}: the survivor owned every partition {took:.1f}s after the SIGKILL")
        assert took < 6.0 + 10.0
        # the survivor reads what the victim did not commit (at least once: nothing is lost)
        printed = {
            int(line.split("\t")[1]) for line in (tmp_path / "victim.out").read_text().splitlines() if "\t" in line
        }
        m.poll_until(lambda: set(m.seen()) | printed >= set(range(200)), 60, "every record read by someone")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        m.close()


def test_cli_group_consumer_resumes_where_it_left(group_broker, names):
    """``kafkawire consume --group``: a second run continues after what the first printed (committed on exit)."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=2)
    produce(bs, topic, range(40), 2)

    def run(n):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "kafkawire",
                "consume",
                topic,
                "--bootstrap",
                bs,
                "--group",
                group,
                "--from-beginning",
                "--max-messages",
                str(n),
                "--timeout",
                "30",
            ],
            capture_output=True,
            timeout=90,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        return [int(v) for v in proc.stdout.decode().split()]

    first = run(25)
    second = run(15)
    assert len(first) == 25 and len(second) == 15
    assert sorted(first + second) == list(range(40))


def test_async_group_consumer(group_broker, names):
    """The asyncio twin: AsyncConsumer(group_id=...), async rebalance callbacks, await commit()."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=3)
    produce(bs, topic, range(60), 3)

    async def main():
        assigned = []

        async def on_assigned(tps):
            assigned.append(tps)

        async with AsyncConsumer(bs, group_id=group, enable_auto_commit=False, **FAST) as c:
            c.subscribe([topic], on_partitions_assigned=on_assigned)
            assert await c.wait_for_assignment(60) == [(topic, p) for p in range(3)]
            got = []
            deadline = time.monotonic() + 60
            while len(got) < 60 and time.monotonic() < deadline:
                got += await c.records(0.5)
            await c.commit()
            committed = await c.committed([(topic, p) for p in range(3)])
            batches = await c.poll_arrow(0.2)
        return assigned, got, committed, batches

    assigned, got, committed, batches = asyncio.run(main())
    assert assigned == [[(topic, 0), (topic, 1), (topic, 2)]]
    assert sorted(int(r.value) for r in got) == list(range(60))
    assert committed == {(topic, p): 20 for p in range(3)}
    assert batches == []


@pytest.mark.parametrize("protocol", ["classic-range", "classic-cooperative-sticky", "consumer"])
def test_member_that_stops_polling_leaves_and_rejoins(group_broker, names, protocol):
    """max_poll_interval_ms: heartbeats alone do not keep partitions of an application that stopped polling.
    The member leaves the group (the other member gets its partitions) and joins again at its next poll,
    which first runs on_partitions_lost: as in Kafka's client, no callback runs outside a poll."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=4)
    m = Members()
    try:
        opts = dict(group_id=group, max_poll_interval_ms=3000, **PROTOCOLS[protocol])
        m.add("a", bs, [topic], **opts)
        m.add("b", bs, [topic], **opts)
        m.poll_until(lambda: sorted(map(len, m.assignments().values())) == [2, 2], 60, "two partitions each")
        stalled = m.consumers.pop("a")  # not polled from now on
        stalled_from = len(m.events)
        try:
            m.poll_until(lambda: len(m.consumers["b"].assignment()) == 4, 30, "b owning every partition")
            assert not [e for e in m.events[stalled_from:] if e[0] == "a"], "a callback ran while a did not poll"
        finally:
            m.consumers["a"] = stalled
        m.poll_until(lambda: sorted(map(len, m.assignments().values())) == [2, 2], 60, "a back with two partitions")
        after = [e[1] for e in m.events[stalled_from:] if e[0] == "a"]
        assert "lost" in after and after.index("lost") < len(after) - 1 - after[::-1].index("assigned"), after
    finally:
        m.close()


def test_unsubscribe_and_subscribe_again(group_broker, names):
    """unsubscribe() commits, revokes and leaves; subscribe() joins again and resumes at the commit."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=2)
    produce(bs, topic, range(20), 2)
    m = Members()
    try:
        c = m.add("a", bs, [topic], group_id=group)
        m.poll_until(lambda: len(m.seen()) == 20, 60, "all 20 records")
        c.unsubscribe()
        assert c.assignment() == [] and c.subscription() == []
        assert c.committed([(topic, 0), (topic, 1)]) == {(topic, 0): 10, (topic, 1): 10}
        assert [e[1] for e in m.events] == ["assigned", "revoked"]
        produce(bs, topic, range(20, 30), 2)
        c.subscribe([topic])
        m.poll_until(lambda: len(m.seen()) == 30, 60, "the 10 new records")
        assert set(m.seen()) == set(range(30)) and max(m.seen().values()) == 1
    finally:
        m.close()


@pytest.mark.parametrize("protocol", ["classic-range", "consumer"])
def test_members_survive_a_broker_restart(private_group_broker, names, protocol):
    """The coordinator goes away and comes back (the broker restarts): the members find it again, keep or
    regain their partitions, and read what is produced afterwards from their committed offsets, once."""
    topic, group = names
    broker = private_group_broker
    create_topics(broker.bootstrap, topic, partitions=4)
    produce(broker.bootstrap, topic, range(100), 4)
    m = Members()
    try:
        m.add("a", broker.bootstrap, [topic], group_id=group, **PROTOCOLS[protocol])
        m.add("b", broker.bootstrap, [topic], group_id=group, **PROTOCOLS[protocol])
        m.poll_until(
            lambda: sorted(map(len, m.assignments().values())) == [2, 2] and len(m.seen()) == 100,
            60,
            "two partitions each and all 100 records",
        )
        for c in m.consumers.values():
            c.commit()
        broker.restart()
        produce(broker.bootstrap, topic, range(100, 200), 4)
        m.poll_until(lambda: set(m.seen()) >= set(range(200)), 120, "the 100 records produced after the restart")
        m.poll_until(lambda: covers(m.assignments().values(), topic, 4), 60, "every partition owned once")
        seen = m.seen()
        assert max(seen.values()) == 1, sorted(v for v, n in seen.items() if n > 1)[:20]
    finally:
        m.close()


@pytest.mark.parametrize("protocol", ["classic-range", "classic-cooperative-sticky", "consumer"])
def test_partitions_added_to_a_subscribed_topic_are_assigned(group_broker, names, protocol):
    """A topic of the subscription grows from 2 to 4 partitions: the group rebalances and hands them out
    (classic: the members notice in their metadata and rejoin; KIP-848: the coordinator does)."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=2)
    m = Members()
    try:
        m.add("a", bs, [topic], group_id=group, **PROTOCOLS[protocol])
        m.add("b", bs, [topic], group_id=group, **PROTOCOLS[protocol])
        m.poll_until(lambda: sorted(map(len, m.assignments().values())) == [1, 1], 60, "one partition each")
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_partitions([NewPartitions(topic, 4)]).values():
            f.result(30)
        m.poll_until(
            lambda: covers(m.assignments().values(), topic, 4) and sorted(map(len, m.assignments().values())) == [2, 2],
            60,
            "two partitions each",
        )
        produce(bs, topic, range(40), 4)
        m.poll_until(lambda: set(m.seen()) == set(range(40)), 60, "records of the new partitions")
    finally:
        m.close()


def test_poll_arrow_in_a_group(group_broker, names):
    """poll_arrow() of a group member: Arrow batches of its partitions only, and commit() covers what they held."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=3)
    produce(bs, topic, range(90), 3)
    with Consumer(bs, group_id=group, enable_auto_commit=False, **FAST) as c:
        c.subscribe([topic])
        values = []
        deadline = time.monotonic() + 60
        while len(values) < 90 and time.monotonic() < deadline:
            for batch in c.poll_arrow(0.5):
                assert set(batch.column("topic").to_pylist()) == {topic}
                values += [int(v) for v in batch.column("value").to_pylist()]
        assert sorted(values) == list(range(90))
        c.commit()
        assert c.committed([(topic, p) for p in range(3)]) == {(topic, p): 30 for p in range(3)}


def test_cli_member_leaves_the_group_on_sigterm(group_broker, names, tmp_path):
    """SIGTERM to ``kafkawire consume --group`` (classic, session timeout 30 s) commits and sends LeaveGroup:
    the other member owns every partition long before the session timeout would have expired."""
    topic, group = names
    bs = group_broker.bootstrap
    create_topics(bs, topic, partitions=2)
    produce(bs, topic, range(20), 2)
    err = open(tmp_path / "cli.err", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kafkawire",
            "consume",
            topic,
            "--bootstrap",
            bs,
            "--group",
            group,
            "--from-beginning",
            "-v",
            "--consumer-property",
            "session.timeout.ms=30000",
            "--consumer-property",
            "heartbeat.interval.ms=500",
        ],
        stdout=subprocess.DEVNULL,
        stderr=err,
        stdin=subprocess.DEVNULL,
    )
    err.close()
    m = Members()
    try:
        wait_for(lambda: _cli_assignment(tmp_path / "cli.err") or proc.poll() is not None, 60, "the CLI's assignment")
        m.add("other", bs, [topic], group_id=group, partition_assignment_strategy="range", session_timeout_ms=30000)
        m.poll_until(lambda: len(m.assignments()["other"]) == 1, 60, "one partition each")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        stopped = time.monotonic()
        m.poll_until(lambda: len(m.assignments()["other"]) == 2, 20, "every partition after the LeaveGroup")
        assert time.monotonic() - stopped < 20
        assert "Processed a total of" in (tmp_path / "cli.err").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        m.close()


def test_cli_group_option_errors(tmp_path):
    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "kafkawire", "consume", *args, "--bootstrap", "127.0.0.1:1"],
            capture_output=True,
            text=True,
            timeout=60,
        )

    bad = run("t", "--group", "g", "--consumer-property", "no.such.option=1")
    assert bad.returncode == 2 and "no_such_option" in bad.stderr
    both = run("t", "--group", "g", "--include", "x.*")
    assert both.returncode == 2 and "one of them" in both.stderr
    partition = run("t", "--group", "g", "--partition", "0")
    assert partition.returncode == 2 and "--partition" in partition.stderr
    include = run("--include", "x.*")
    assert include.returncode == 2 and "--include needs --group" in include.stderr
