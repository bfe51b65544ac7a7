"""Nothing in a data directory is moved or deleted because kafkawire does not understand it.

A Kafka data directory's metadata log, topics and checkpoints are kafkawire's too (it reads the KRaft
metadata log; test_kafka_dir.py has both brokers take turns on one directory). Entries no topic of the
metadata log owns (a partition of a topic the log does not have, another tool's files) are left in place
byte for byte, listed once in the log per start, and listed by ``kafkawire check``; a topic whose partition
directory is taken by one is refused rather than moving it. kafkawire's own repairs (quarantine of damaged segments, ``-delete`` directories of its own
deletions) are tested in test_segment_damage.py and test_segment_storage.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
from pathlib import Path

import pytest
from storage_batches import build_batch

from kafkawire.broker.storage.base import TopicExistsError
from kafkawire.broker.storage.kraft import uuid_text
from kafkawire.broker.storage.recovery import DirectoryTakenError
from kafkawire.broker.storage.segments import SegmentStorage
from kafkawire.cli.main import main

from conftest import reference_unavailable

# what the metadata log of kafka_like_dir does not account for
KAFKA_ENTRIES = [
    "__consumer_offsets-7/",
    "bootstrap.checkpoint",
    "tool-notes.txt",
]
ORDERS_ID = "H7FPGHPKTY6BWwlboUewwQ"


def metadata_log_batch() -> bytes:
    """A metadata log as Kafka's controller writes one: a topic ``orders`` of one partition."""
    from kafkawire.broker.storage.kraft import parse_uuid, records

    topic_id = parse_uuid(ORDERS_ID)
    body = [
        records.new("TopicRecord", name="orders", topic_id=topic_id),
        records.new(
            "PartitionRecord",
            partition_id=0,
            topic_id=topic_id,
            replicas=[1],
            isr=[1],
            leader=1,
            directories=[parse_uuid("uxxIj45-vFcYPiw2sh_ATA")],
        ),
    ]
    return build_batch([records.encode(m) for m in body])


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path) with the SHA-256 of its bytes; directories as ``name/``."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for d in dirnames:
            out[os.path.normpath(os.path.join(rel, d)) + "/"] = "dir"
        for f in filenames:
            with open(os.path.join(dirpath, f), "rb") as fh:
                out[os.path.normpath(os.path.join(rel, f))] = hashlib.sha256(fh.read()).hexdigest()
    return out


def kafka_like_dir(root: Path) -> Path:
    """The layout Kafka 4.4 leaves (names and kinds of files as a stopped node has them)."""
    root.mkdir()
    (root / "meta.properties").write_text(
        "#\n#Mon Nov 23 17:59:07 UTC 2026\nnode.id=1\ndirectory.id=uxxIj45-vFcYPiw2sh_ATA\nversion=1\ncluster.id=abc\n"
    )
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        (root / name).write_text("0\n2\norders 0 3\n__consumer_offsets 7 0\n")
    (root / "log-start-offset-checkpoint").write_text("0\n1\norders 0 1\n")
    (root / "cleaner-offset-checkpoint").write_text("")
    (root / "bootstrap.checkpoint").write_bytes(build_batch([b"bootstrap"]))
    (root / "tool-notes.txt").write_text("someone else's file\n")
    for part, records in (
        ("__cluster_metadata-0", None),
        ("orders-0", [b"a", b"b", b"c"]),
        ("__consumer_offsets-7", []),
    ):
        d = root / part
        d.mkdir()
        (d / "00000000000000000000.log").write_bytes(
            metadata_log_batch() if records is None else build_batch(records) if records else b""
        )
        (d / "00000000000000000000.index").write_bytes(bytes(80))  # preallocated, as a running Kafka has it
        (d / "00000000000000000000.timeindex").write_bytes(struct.pack(">qi", 1_700_000_000_000, 0))
        (d / "00000000000000000003.snapshot").write_bytes(bytes(10))
        (d / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
        (d / "partition.metadata").write_text(f"version: 0\ntopic_id: {ORDERS_ID}\n")
    (root / "__cluster_metadata-0" / "quorum-state").write_text('{"leaderId":1,"leaderEpoch":1}')
    return root


def unknown_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "not kafkawire's" in r.getMessage()]


def test_a_kafka_data_dir_survives_a_kafkawire_start_byte_for_byte(tmp_path, caplog):
    root = kafka_like_dir(tmp_path / "kafka")
    before = tree(root)
    caplog.set_level(logging.INFO, logger="kafkawire.storage")
    storage = SegmentStorage(root, {"node.id": "1"})
    (line,) = unknown_lines(caplog)  # one line for all of them
    assert line.endswith("left in place, untouched: " + " ".join(KAFKA_ENTRIES)), line
    assert list(storage.topics()) == ["orders"]
    assert storage.partition("orders", 0).log_end_offset == 3
    storage.create_topic("mine", 1)
    storage.partition("mine", 0).append(build_batch([b"x"]))
    with pytest.raises(TopicExistsError):
        storage.create_topic("orders", 1)
    with pytest.raises(DirectoryTakenError, match="__consumer_offsets-7"):
        storage.create_topic("__consumer_offsets", 8)
    storage.close()
    after = tree(root)
    # kafkawire appended its topic to the metadata log and rebuilt what it derives from orders-0's records
    # (indexes, producer snapshot: the fixture's are placeholders); nothing else that was there changed
    derived = (".index", ".timeindex", ".snapshot")
    changed = sorted(k for k in before if after.get(k) != before[k])
    assert [k for k in changed if not (k.startswith("orders-0/") and k.endswith(derived))] == [
        "__cluster_metadata-0/00000000000000000000.log",
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
    ], changed
    # a clean stop leaves Kafka's recovery points and high watermarks at the log ends; the recovery points
    # Kafka left were dropped on start (a partition without one is recovered whole: safe), the rest kept
    assert (root / "recovery-point-offset-checkpoint").read_text() == "0\n2\nmine 0 1\norders 0 3\n"
    assert (
        root / "replication-offset-checkpoint"
    ).read_text() == "0\n3\n__consumer_offsets 7 0\nmine 0 1\norders 0 3\n"
    assert all(
        k in (".lock", ".kafka_cleanshutdown") or k.startswith(("mine-0/", "__kafkawire_meta/"))
        for k in set(after) - set(before)
    ), sorted(set(after) - set(before))
    # the clean stop's marker, as Kafka's (no broker registration of node 1 in this metadata log)
    assert json.loads((root / ".kafka_cleanshutdown").read_text()) == {"version": 0, "brokerEpoch": -1}
    caplog.clear()
    storage = SegmentStorage(root, {"node.id": "1"})  # and again, once more, once
    assert len(unknown_lines(caplog)) == 1
    assert sorted(storage.topics()) == ["mine", "orders"]
    storage.close()
    assert {k: tree(root).get(k) for k in KAFKA_ENTRIES if not k.endswith("/")} == {
        k: before[k] for k in KAFKA_ENTRIES if not k.endswith("/")
    }


def test_log_start_entries_of_partitions_left_in_place_are_kept(tmp_path):
    root = kafka_like_dir(tmp_path / "kafka")
    storage = SegmentStorage(root, {"node.id": "1"})
    storage.create_topic("mine", 1)
    storage.partition("mine", 0).append(build_batch([b"x", b"y"]))
    storage.partition("mine", 0).delete_records_before(1)
    storage.close()
    assert (root / "log-start-offset-checkpoint").read_text() == "0\n2\nmine 0 1\norders 0 1\n"


def test_an_empty_partition_of_kafkawire_left_by_a_failed_creation_is_replaced(tmp_path):
    data_dir = tmp_path / "data"
    SegmentStorage(data_dir, {}).close()
    leftover = data_dir / "t-0"
    leftover.mkdir()
    (leftover / "partition.metadata").write_text("version: 0\ntopic_id: 00000000-0000-0000-0000-000000000001\n")
    (leftover / "00000000000000000000.log").write_bytes(b"")
    storage = SegmentStorage(data_dir, {})
    meta = storage.create_topic("t", 1)
    assert (leftover / "partition.metadata").read_text() == f"version: 0\ntopic_id: {uuid_text(meta.topic_id)}\n"
    (leftover2 := data_dir / "t-1").mkdir()
    (leftover2 / "00000000000000000000.log").write_bytes(build_batch([b"data"]))
    with pytest.raises(DirectoryTakenError, match="t-1"):
        storage.add_partitions("t", 2)  # this one holds a record: refused, kept
    assert (leftover2 / "00000000000000000000.log").read_bytes() == build_batch([b"data"])
    assert storage.topics()["t"].partitions == 1
    storage.close()


def test_a_topic_directory_of_another_topic_id_refuses_the_start_and_stays(tmp_path):
    data_dir = tmp_path / "data"
    storage = SegmentStorage(data_dir, {})
    storage.create_topic("t", 1)
    storage.close()
    pm = data_dir / "t-0" / "partition.metadata"
    pm.write_text("version: 0\ntopic_id: 00000000-0000-0000-0000-000000000009\n")
    before = tree(data_dir)
    with pytest.raises(Exception, match="another topic"):
        SegmentStorage(data_dir, {})
    assert {k: tree(data_dir).get(k) for k in before} == before


def test_check_lists_entries_that_are_not_kafkawire_s(tmp_path, capsys):
    root = kafka_like_dir(tmp_path / "kafka")
    storage = SegmentStorage(root, {"node.id": "1"})
    storage.create_topic("mine", 1)
    storage.close()
    assert main(["check", str(root)]) == 0
    out = capsys.readouterr().out
    assert "not kafkawire's (left alone): " + " ".join(KAFKA_ENTRIES) in out
    assert "2 partitions checked, 0 damaged" in out
    assert main(["check", "--json", str(root)]) == 0
    assert json.loads(capsys.readouterr().out)["unknown"] == KAFKA_ENTRIES


def _write_orders(bootstrap: str) -> None:
    """Ten keyed records on a topic of two partitions (the clients are gone when this returns)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("orders", 2, 1)])["orders"].result(60)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(10):
        p.produce("orders", key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(60) == 0


def _produce_own(bootstrap: str) -> None:
    """A record to a topic kafkawire creates on the fly, beside Kafka's."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    p.produce("kafkawire-own", value=b"mine")
    assert p.flush(30) == 0


def test_a_data_dir_written_by_kafka_4_4_survives_kafkawire_serve(tmp_path):
    """The real thing: Kafka's own directory, and ``kafkawire serve`` on it, taking writes of its own."""
    from kafkawire.testing import KafkaBroker

    from kafka_reference import KafkaUnavailable, ReferenceKafka

    kafka = ReferenceKafka(tmp_path / "kafka")
    try:
        kafka.start()
    except KafkaUnavailable as exc:
        kafka.close()
        reference_unavailable(str(exc))
    try:
        _write_orders(kafka.bootstrap)
    finally:
        kafka.stop()
    log_dir = kafka.log_dir
    before = tree(log_dir)
    kafkas_marker = (log_dir / ".kafka_cleanshutdown").read_text()
    assert "__cluster_metadata-0/00000000000000000000.log" in before and "orders-1/" in before
    broker = KafkaBroker(storage="segments", data_dir=log_dir, config={"node.id": "1"})
    broker.start()
    try:
        _produce_own(broker.bootstrap)
        log_text = broker.log_path.read_text(errors="replace")
    finally:
        broker.stop()
    # everything Kafka left is accounted for: the metadata log, its topics' partitions, its checkpoints
    assert not [line for line in log_text.splitlines() if "not kafkawire's" in line], log_text[-3000:]
    after = tree(log_dir)
    changed = sorted(k for k in before if after.get(k) != before[k])
    # the records Kafka wrote stay byte for byte; kafkawire appended its topic to the metadata log, rewrote
    # the directory's checkpoints and, on its clean stop, the clean-shutdown marker: the same as Kafka's, with
    # the broker epoch of Kafka's registration of node 1 (kafkawire carries it in the metadata log)
    kept = [k for k in before if k.endswith(".log") and not k.startswith("__cluster_metadata-0/")]
    assert kept and not [k for k in kept if k in changed], changed
    assert "__cluster_metadata-0/00000000000000000000.log" in changed
    assert json.loads((log_dir / ".kafka_cleanshutdown").read_text()) == json.loads(kafkas_marker), kafkas_marker
    assert json.loads(kafkas_marker)["brokerEpoch"] > 0
    assert all(
        k == ".lock" or k.startswith(("kafkawire-own-0/", "__kafkawire_meta/")) for k in set(after) - set(before)
    ), sorted(set(after) - set(before))
    kafka.close()
