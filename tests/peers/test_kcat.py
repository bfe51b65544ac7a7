"""kcat (Debian's, on librdkafka 2.0.x) against the broker: -L, -P, -C -e, -Q.

kcat's JSON envelope carries keys, values and headers as text, so these
scenarios use printable record sets.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from .peer_harness import Rec, assert_readback, confluent_consume, confluent_create_topic, confluent_produce, now_ms

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.tansu_gap("librdkafka 2.0.x cannot read its ApiVersions response (Read underflow)"),
    pytest.mark.skipif(
        shutil.which("kcat") is None,
        reason="kcat not installed (Debian package 'kcat'; tools/run-tests installs it as root)",
    ),
]


def kcat(broker, *args, input: bytes | None = None, timeout: float = 60) -> str:
    proc = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-m", "10", *args], input=input, capture_output=True, timeout=timeout
    )
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}:\n{proc.stderr.decode()}"
    return proc.stdout.decode()


def text_records(count: int, partitions: int, base_ts: int) -> list[Rec]:
    records = []
    for i in range(count):
        key = None if i % 7 == 3 else f"key-{i}".encode()
        value = f"value {i} ".encode() + b"x" * (i * 37 % 900)
        headers = () if i % 3 == 0 else (("h1", f"v{i}".encode()), ("h2", b"second"))
        records.append(Rec(i % partitions, key, value, headers, base_ts + i * 3))
    return records


def kcat_json_records(output: str) -> list[tuple[int, Rec]]:
    got = []
    for line in output.splitlines():
        if not line.strip():
            continue
        m = json.loads(line)
        flat = m.get("headers") or []
        headers = tuple(
            (flat[i], None if flat[i + 1] is None else flat[i + 1].encode()) for i in range(0, len(flat), 2)
        )
        assert m["tstype"] == "create", m
        key = None if m["key"] is None else m["key"].encode()
        value = None if m["payload"] is None else m["payload"].encode()
        got.append((m["offset"], Rec(m["partition"], key, value, headers, m["ts"])))
    return got


def test_metadata_list(broker, topic):
    confluent_create_topic(broker.bootstrap, topic, 3)
    md = json.loads(kcat(broker, "-L", "-J", "-t", topic))
    assert len(md["brokers"]) == 1
    node = md["brokers"][0]
    assert node["name"] == f"{broker.host}:{broker.port}"
    (t,) = md["topics"]
    assert t["topic"] == topic and "error" not in t
    assert sorted(p["partition"] for p in t["partitions"]) == [0, 1, 2]
    for p in t["partitions"]:
        assert p["leader"] == node["id"]
        assert [r["id"] for r in p["replicas"]] == [node["id"]]
        assert [r["id"] for r in p["isrs"]] == [node["id"]]


def test_consume_to_end(broker, topic):
    """Records produced by confluent-kafka, read back by `kcat -C -e` from the beginning."""
    confluent_create_topic(broker.bootstrap, topic, 2)
    records = text_records(400, 2, now_ms() - 60_000)
    delivered = confluent_produce(broker.bootstrap, topic, records, {"compression.type": "zstd"})
    out = kcat(broker, "-C", "-t", topic, "-o", "beginning", "-e", "-J", "-q")
    assert_readback(records, kcat_json_records(out), delivered=delivered)

    # One partition from an absolute offset (inside a batch): the records before it are not returned.
    out = kcat(broker, "-C", "-t", topic, "-p", "1", "-o", "50", "-e", "-J", "-q")
    tail = [r for r in records if r.partition == 1][50:]
    assert_readback(tail, kcat_json_records(out), start_offsets={1: 50})


def test_query_offset_by_timestamp(broker, topic):
    confluent_create_topic(broker.bootstrap, topic, 2)
    records = text_records(120, 2, now_ms() - 60_000)  # partition 1 holds records 1, 3, 5, ... at ts base+3i
    confluent_produce(broker.bootstrap, topic, records, {"linger.ms": 50})
    # Record 81 is partition 1's 41st (offset 40); a target just above record 79's timestamp finds it.
    target = records[79].timestamp + 1
    answer = json.loads(kcat(broker, "-Q", "-t", f"{topic}:1:{target}", "-J"))
    assert answer == {topic: {"topic": topic, "1": {"partition": 1, "offset": 40}}}
    after_all = records[-1].timestamp + 1
    answer = json.loads(kcat(broker, "-Q", "-t", f"{topic}:0:{after_all}", "-J"))
    assert answer[topic]["0"]["offset"] == -1

    # Consuming from a timestamp (-o s@) starts at the same record.
    out = kcat(broker, "-C", "-t", topic, "-p", "1", "-o", f"s@{target}", "-e", "-J", "-q")
    assert_readback([r for r in records if r.partition == 1][40:], kcat_json_records(out), start_offsets={1: 40})


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_then_read_back(broker, topic, codec):
    """`kcat -P` with keys and headers; read back by kcat and by confluent-kafka."""
    confluent_create_topic(broker.bootstrap, topic, 2)
    lines = []
    for i in range(300):
        lines.append(f"key-{i}|value {i} {'y' * (i * 13 % 500)}")
    before = now_ms()
    args = ["-P", "-t", topic, "-p", "1", "-K", "|", "-H", "origin=kcat", "-H", "run=peers"]
    if codec != "none":  # kcat's -z knows snappy, gzip and lz4; zstd goes through librdkafka's own setting
        args += ["-z", codec] if codec != "zstd" else ["-X", "compression.codec=zstd"]
    kcat(broker, *args, input=("\n".join(lines) + "\n").encode())
    after = now_ms()

    got = kcat_json_records(kcat(broker, "-C", "-t", topic, "-o", "beginning", "-e", "-J", "-q"))
    assert len(got) == 300
    for _, rec in got:
        assert before - 1000 <= rec.timestamp <= after + 1000, "timestamps must be the producer's create times"
    expected = [
        Rec(
            1,
            f"key-{i}".encode(),
            line.split("|", 1)[1].encode(),
            (("origin", b"kcat"), ("run", b"peers")),
            got[i][1].timestamp,
        )
        for i, line in enumerate(lines)
    ]
    assert_readback(expected, got)
    assert [r.timestamp for _, r in got] == sorted(r.timestamp for _, r in got)
    assert_readback(expected, confluent_consume(broker.bootstrap, topic, 2, len(expected)))
