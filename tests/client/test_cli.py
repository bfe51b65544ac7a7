"""The client sub-commands of ``kafkawire``, run as subprocesses."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .helpers import confluent_consume_all, confluent_produce


def kw(bootstrap, *args, input: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafkawire", *args, "--bootstrap", bootstrap],
        input=input,
        capture_output=True,
        timeout=timeout,
    )


def test_topics_create_list_describe_delete(bootstrap, topic):
    r = kw(bootstrap, "topics", "create", topic, "--partitions", "3")
    assert r.returncode == 0, r.stderr
    assert f"Created topic {topic}." in r.stdout.decode()
    r = kw(bootstrap, "topics", "create", topic)
    assert r.returncode == 1 and b"TOPIC_ALREADY_EXISTS (36)" in r.stderr
    assert kw(bootstrap, "topics", "create", topic, "--if-not-exists").returncode == 0
    r = kw(bootstrap, "topics", "list")
    assert topic in r.stdout.decode().split()
    r = kw(bootstrap, "topics", "describe", topic)
    out = r.stdout.decode()
    assert r.returncode == 0 and "PartitionCount: 3" in out and out.count("Partition: ") == 3
    r = kw(bootstrap, "topics", "delete", topic)
    assert r.returncode == 0 and f"Deleted topic {topic}." in r.stdout.decode()
    r = kw(bootstrap, "topics", "describe", topic)
    assert r.returncode == 1 and b"UNKNOWN_TOPIC_OR_PARTITION (3)" in r.stderr


def test_topics_alter_partitions(bootstrap, topic):
    assert kw(bootstrap, "topics", "create", topic, "--partitions", "2").returncode == 0
    r = kw(bootstrap, "topics", "alter", topic, "--partitions", "5")
    assert r.returncode == 0, r.stderr
    assert f"Altered topic {topic}.".encode() in r.stdout
    assert b"PartitionCount: 5" in kw(bootstrap, "topics", "describe", topic).stdout
    r = kw(bootstrap, "topics", "alter", topic, "--partitions", "3")
    assert r.returncode == 1 and b"INVALID_PARTITIONS" in r.stderr
    assert kw(bootstrap, "topics", "alter", topic).returncode == 2


def test_produce_lines_with_keys(bootstrap, make_topic, topic):
    make_topic(topic, 4)
    lines = [b"user-%d:value %d" % (i, i) for i in range(50)] + [b"no separator here"]
    r = kw(bootstrap, "produce", topic, "--key-separator", ":", "--header", "src=cli", input=b"\n".join(lines) + b"\n")
    assert r.returncode == 0, r.stderr
    got = confluent_consume_all(bootstrap, topic, [0, 1, 2, 3], len(lines))
    records = {r["value"]: r for rs in got.values() for r in rs}
    assert len(records) == len(lines)
    from kafkawire.client.partitioner import partition_for_key

    for p, rs in got.items():
        for rec in rs:
            assert rec["headers"] == [("src", b"cli")]
            if rec["key"] is not None:
                assert partition_for_key(rec["key"], 4) == p
    assert records[b"value 7"]["key"] == b"user-7"
    assert records[b"no separator here"]["key"] is None


def test_consume_options(bootstrap, make_topic, topic):
    make_topic(topic, 2)
    recs = [{"key": b"k%d" % i, "value": b"v%d" % i, "headers": []} for i in range(10)]
    confluent_produce(bootstrap, topic, recs, partition=1)
    r = kw(bootstrap, "consume", topic, "--from-beginning", "--timeout", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == [f"v{i}" for i in range(10)]
    assert b"Processed a total of 10 messages" in r.stderr
    r = kw(
        bootstrap,
        "consume",
        topic,
        "--partition",
        "1",
        "--offset",
        "4",
        "--max-messages",
        "3",
        "--print-key",
        "--print-offset",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines() == [f"1:{i}\tk{i}\tv{i}" for i in (4, 5, 6)]
    r = kw(bootstrap, "consume", topic, "--partition", "9", "--timeout", "1")
    assert r.returncode == 1


def test_consume_starts_at_the_end_by_default(bootstrap, make_topic, topic, tansu_gap):
    tansu_gap("ListOffsets latest is the last batch's base offset + 1")
    make_topic(topic, 1)
    confluent_produce(bootstrap, topic, [{"key": None, "value": b"old%d" % i, "headers": []} for i in range(5)])
    r = kw(bootstrap, "consume", topic, "--timeout", "1")
    assert r.returncode == 0 and r.stdout == b""


def test_produce_then_consume_roundtrip(bootstrap, topic, make_topic):
    make_topic(topic, 1)
    payload = b"".join(b"line %d\n" % i for i in range(500))
    assert kw(bootstrap, "produce", topic, "--compression", "zstd", input=payload).returncode == 0
    r = kw(bootstrap, "consume", topic, "--from-beginning", "--max-messages", "500")
    assert r.returncode == 0 and r.stdout == payload


def test_apis(bootstrap):
    r = kw(bootstrap, "apis")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "Produce(0): " in out and "ApiVersions(18): 0 to " in out and "[usable: " in out


@pytest.mark.parametrize("command", [["apis"], ["topics", "list"], ["consume", "x", "--timeout", "1"]])
def test_unreachable_broker_is_an_error(command):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = kw(f"127.0.0.1:{port}", *command, timeout=60)
    assert r.returncode == 1 and b"error:" in r.stderr


def test_consume_prints_headers_and_reads_committed(bootstrap, make_topic, topic):
    make_topic(topic, 1)
    confluent_produce(bootstrap, topic, [{"key": b"k", "value": b"v", "headers": [("a", b"1"), ("b", b"2")]}])
    r = kw(
        bootstrap,
        "consume",
        topic,
        "--from-beginning",
        "--max-messages",
        "1",
        "--print-headers",
        "--isolation-level",
        "read_committed",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"a=1,b=2\tv\n"
