"""Snapshots of the KRaft metadata log, and its retention, as Kafka 4.4 writes and reads them.

kafkawire writes ``<end offset>-<epoch>.checkpoint`` once enough bytes were appended since the last snapshot
(``metadata.log.max.record.bytes.between.snapshots``), holding every record that rebuilds the image (those it only
carries too: broker registrations, producer id blocks, client quotas, delegation tokens, types it cannot decode),
starts from the newest snapshot and the log after it, and deletes what Kafka's retention would
(``metadata.max.retention.bytes``). Kafka 4.4 starts on such a directory and finds everything; kafkawire starts
from the snapshots Kafka writes.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from kafka_dir import create_topics, kafka_on, kafkawire_on, produce, read_all, topic_configs
from test_kafka_dir_acls import AUTHORIZER, _acls, _binding, _create

from kafkawire.broker.storage.kraft import MetadataLog, records
from kafkawire.broker.storage.kraft.log import METADATA_DIR, decode_batch_records
from kafkawire.broker.storage.metadata import TopicMeta
from kafkawire.protocol import message_class
from kafkawire.protocol.primitives import uvarint_bytes
from kafkawire.protocol.records import build_batch, iter_batches

DIRECTORY_ID = uuid.UUID(int=7)
SMALL = {  # a snapshot every few batches, 4 KB segments, and no more kept than the newest snapshot needs
    "metadata.log.max.record.bytes.between.snapshots": "3000",
    "metadata.log.segment.bytes": "4096",
    "metadata.max.retention.bytes": "1",
}
# a record of a type no schema of kafkawire's knows (a newer Kafka's): frame 1, type 200, version 0, a body
UNKNOWN = uvarint_bytes(1) + uvarint_bytes(200) + uvarint_bytes(0) + b"\x00opaque"


def _files(root: Path, suffix: str) -> list[str]:
    return sorted(p.name for p in (root / METADATA_DIR).iterdir() if p.name.endswith(suffix))


def _carried_records(log: MetadataLog) -> None:
    """Records of Kafka's that kafkawire keeps no state of, appended as Kafka's controller would."""
    broker = message_class("RegisterBrokerRecord")
    quota = message_class("ClientQuotaRecord")
    log.append(
        [
            records.new(
                "RegisterBrokerRecord",
                broker_id=1,
                is_migrating_zk_broker=False,
                incarnation_id=uuid.UUID(int=3),
                broker_epoch=9,
                end_points=[broker.BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092, security_protocol=0)],
                features=[],
                rack=None,
                fenced=True,
                in_controlled_shutdown=False,
                log_dirs=[DIRECTORY_ID],
            ),
            records.new(
                "BrokerRegistrationChangeRecord",
                broker_id=1,
                broker_epoch=9,
                fenced=-1,
                in_controlled_shutdown=0,
                log_dirs=[],
            ),
            records.new("ProducerIdsRecord", broker_id=1, broker_epoch=9, next_producer_id=1000),
            records.new("ProducerIdsRecord", broker_id=1, broker_epoch=9, next_producer_id=2000),
            records.new(
                "ClientQuotaRecord",
                entity=[quota.EntityData(entity_type="user", entity_name="alice")],
                key="producer_byte_rate",
                value=1024.0,
                remove=False,
            ),
            records.new(
                "DelegationTokenRecord",
                owner="User:alice",
                requester="User:alice",
                renewers=[],
                issue_timestamp=1,
                max_timestamp=2,
                expiration_timestamp=2,
                token_id="token-1",
            ),
        ]
    )
    with log._lock:  # the unknown record, framed as any other
        log._write(build_batch([(None, UNKNOWN)], base_offset=log.end_offset, partition_leader_epoch=log.epoch))
        log.end_offset += 1


def _state(log: MetadataLog) -> list[bytes]:
    return log.image.snapshot_records()


def test_a_snapshot_holds_the_image_and_loading_it_gives_the_same(tmp_path):
    log = MetadataLog(str(tmp_path), 1, DIRECTORY_ID).load()
    log.configure({"metadata.log.max.record.bytes.between.snapshots": str(1 << 30)})  # only the explicit one
    log.save_topics({"t": TopicMeta("t", uuid.UUID(int=11), 3, {"retention.ms": "1000"})})
    log.save_configs(4, "", {"log.retention.ms": "7200000"})
    log.save_scram({("alice", 1): (b"salt", 4096, b"stored", b"server")}, [])
    log.save_acls(
        {
            uuid.UUID(int=12): dict(
                resource_type=2,
                resource_name="t",
                pattern_type=3,
                principal="User:alice",
                host="*",
                operation=3,
                permission_type=3,
            )
        },
        [],
    )
    _carried_records(log)
    log.resign_leaders()  # a clean stop: every partition leaderless, epoch 0 -> 1
    replayed = MetadataLog(str(tmp_path), 1, DIRECTORY_ID).load()
    whole = _state(replayed)
    assert UNKNOWN in whole and len([v for v in whole if v[1] == 15]) == 1  # the last producer id block only

    path = Path(replayed.snapshot())
    assert path.name == f"{replayed.end_offset:020d}-{replayed.epoch:010d}.checkpoint"
    batches = list(iter_batches(path.read_bytes()))
    names = [name for b in batches for _o, name, _m in decode_batch_records(b)]
    assert names[0] == "SnapshotHeaderRecord" and names[-1] == "SnapshotFooterRecord"
    assert names[1] == "FeatureLevelRecord" and "PartitionRecord" in names and "RegisterBrokerRecord" in names

    # only the snapshot and nothing after it: the segments are not read
    for segment in (tmp_path / METADATA_DIR).glob("*.log"):
        segment.write_bytes(b"")
    from_snapshot = MetadataLog(str(tmp_path), 1, DIRECTORY_ID).load(repair=False)
    assert from_snapshot.snapshot_offset == replayed.end_offset
    assert _state(from_snapshot) == whole
    assert from_snapshot.image.partition("t", 2).leader_epoch == 1


def test_snapshots_by_bytes_then_retention_deletes_old_segments_and_snapshots(tmp_path, capsys):
    log = MetadataLog(str(tmp_path), 1, DIRECTORY_ID).load()
    log.configure(SMALL)
    for i in range(40):
        log.save_topics({f"t{j}": TopicMeta(f"t{j}", uuid.UUID(int=100 + j), 2, {}) for j in range(i + 1)})
    log.close()  # the snapshot thread's work done
    snapshots, segments = _files(tmp_path, ".checkpoint"), _files(tmp_path, ".log")
    assert len(snapshots) == 1 and snapshots[0] != f"{0:020d}-{0:010d}.checkpoint"
    assert f"{0:020d}.log" not in segments and len(segments) >= 1
    assert int(segments[0][:20]) <= int(snapshots[0][:20])  # the log starts at or before the snapshot
    again = MetadataLog(str(tmp_path), 1, DIRECTORY_ID).load()
    assert sorted(again.topics()) == sorted(f"t{j}" for j in range(40))
    assert _state(again) == _state(log)
    # kafkawire logs lists the snapshot with what it covers
    from kafkawire.cli.main import main

    (tmp_path / "meta.properties").write_text("node.id=1\ncluster.id=c\nversion=1\n")
    main(["logs", str(tmp_path)])
    shown = capsys.readouterr().out
    end = int(snapshots[0][:20])
    assert f"    {snapshots[0]}: snapshot of offsets ..{end - 1} (epoch 1)" in shown


def test_kafka_and_kafkawire_start_from_each_others_snapshots(tmp_path):
    pytest.importorskip("confluent_kafka")
    # Kafka writes a snapshot after every few records
    kafka = kafka_on(tmp_path, **AUTHORIZER, **{"metadata.log.max.record.bytes.between.snapshots": "1024"})
    try:
        create_topics(kafka.bootstrap, {"k": (2, {"retention.ms": "86400000"})})
        _create(kafka.bootstrap, _binding("k", "User:alice", "READ"))
        landed = produce(kafka.bootstrap, "k", 2, tag="kafka")
    finally:
        kafka.stop()
    kafka_snapshots = [n for n in _files(tmp_path / "logs", ".checkpoint") if not n.startswith(f"{0:020d}")]
    assert kafka_snapshots, "Kafka wrote no snapshot"
    loaded = MetadataLog(str(tmp_path / "logs"), 1, DIRECTORY_ID).load(repair=False)
    assert loaded.snapshot_offset == int(kafka_snapshots[-1][:20])  # kafkawire starts from Kafka's newest

    wire = kafkawire_on(tmp_path, **AUTHORIZER, **SMALL)
    try:
        assert topic_configs(wire.bootstrap, "k") == {"retention.ms": "86400000"}
        assert _acls(wire.bootstrap) == {("k", "LITERAL", "User:alice", "READ")}
        assert read_all(wire.bootstrap, "k", 2, len(landed)) == landed
        topics = {f"w{i}": (1, {"cleanup.policy": "compact"}) for i in range(12)}
        for name, spec in topics.items():  # one metadata batch each: several snapshots and segments
            create_topics(wire.bootstrap, {name: spec})
        _create(wire.bootstrap, _binding("w", "User:bob", "WRITE", "PREFIXED"))
    finally:
        wire.stop()
    segments = _files(tmp_path / "logs", ".log")
    assert f"{0:020d}.log" not in segments, "retention left the first segment"
    assert f"{0:020d}-{0:010d}.checkpoint" not in _files(tmp_path / "logs", ".checkpoint")

    kafka = kafka_on(tmp_path, **AUTHORIZER)
    try:
        from confluent_kafka.admin import AdminClient

        names = set(AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=30).topics)
        assert {"k", *topics} <= names
        assert topic_configs(kafka.bootstrap, "w11") == {"cleanup.policy": "compact"}
        assert topic_configs(kafka.bootstrap, "k") == {"retention.ms": "86400000"}
        assert _acls(kafka.bootstrap) == {
            ("k", "LITERAL", "User:alice", "READ"),
            ("w", "PREFIXED", "User:bob", "WRITE"),
        }
        assert read_all(kafka.bootstrap, "k", 2, len(landed)) == landed
    finally:
        kafka.stop()


def test_a_snapshot_by_time_and_retention_by_age(tmp_path):
    log = MetadataLog(str(tmp_path), 1, DIRECTORY_ID).load()
    log.configure(
        {
            "metadata.log.max.record.bytes.between.snapshots": str(1 << 30),
            "metadata.log.max.snapshot.interval.ms": "60000",
            "metadata.max.retention.ms": "60000",
        }
    )
    log.save_topics({"a": TopicMeta("a", uuid.UUID(int=21), 1, {})})
    now = int(time.time() * 1000)
    assert not log.maybe_snapshot(now)  # not due yet: a minute since the log was opened
    assert log.maybe_snapshot(now + 61_000)
    log.close()
    first = [n for n in _files(tmp_path, ".checkpoint") if not n.startswith(f"{0:020d}")]
    assert len(first) == 1
    assert not log.maybe_snapshot(now + 200_000)  # nothing appended since: no snapshot
    log.save_topics({"a": TopicMeta("a", uuid.UUID(int=21), 1, {}), "b": TopicMeta("b", uuid.UUID(int=22), 1, {})})
    assert log.maybe_snapshot(now + 200_000)
    log.close()
    bootstrap, *written = _files(tmp_path, ".checkpoint")
    assert bootstrap.startswith(f"{0:020d}") and written[0] == first[0] and len(written) == 2
    # the bootstrap snapshot and the first one hold records of "now": two minutes on, both are past 60 s; the
    # newest stays whatever its age
    assert log.clean(now + 120_000) == 2
    assert _files(tmp_path, ".checkpoint") == [written[1]]
    assert sorted(MetadataLog(str(tmp_path), 1, DIRECTORY_ID).load().topics()) == ["a", "b"]


def test_an_append_during_a_snapshot_does_not_wait_for_its_encoding(tmp_path, monkeypatch):
    """A snapshot takes the image under the metadata log's lock and encodes and writes it outside: an append
    (a request that changes metadata) made while the snapshot is being encoded finishes before the encoding
    does, and the snapshot holds the log as it was at its offset, without that append (new topics or changed
    partitions)."""
    from kafkawire.broker.storage.kraft.image import MetadataImage

    log = MetadataLog(str(tmp_path), 1, DIRECTORY_ID).load()
    log.configure({"metadata.log.max.record.bytes.between.snapshots": str(1 << 30)})  # only the explicit one
    log.save_topics({"before": TopicMeta("before", uuid.UUID(int=21), 2, {})})
    encoding, release = threading.Event(), threading.Event()
    encode = MetadataImage.snapshot_records

    def held_encoding(image):
        encoding.set()
        release.wait(60)  # bounded: a broken lock shows as the append below not finishing, not as a hang
        return encode(image)

    monkeypatch.setattr(MetadataImage, "snapshot_records", held_encoding)
    snapshot_end = log.end_offset
    written: list = []
    snapshotter = threading.Thread(target=lambda: written.append(log.snapshot()))
    snapshotter.start()
    try:
        assert encoding.wait(30), "the snapshot never started encoding"

        def changes():
            wanted = {"before": TopicMeta("before", uuid.UUID(int=21), 2, {})}
            log.save_topics({**wanted, "during": TopicMeta("during", uuid.UUID(int=22), 1, {})})
            log.resign_leaders()  # the partitions the snapshot holds change too

        appender = threading.Thread(target=changes)
        appender.start()
        appender.join(30)
        assert not appender.is_alive(), "the append waited for the snapshot's encoding"
        assert not written, "the snapshot finished before it was let go"
    finally:
        release.set()
        snapshotter.join(60)
    path = Path(written[0])
    assert path.name == f"{snapshot_end:020d}-{log.epoch:010d}.checkpoint"
    held = [(name, m) for b in iter_batches(path.read_bytes()) for _o, name, m in decode_batch_records(b)]
    assert [m.name for name, m in held if name == "TopicRecord"] == ["before"]
    # as led when the snapshot was taken, not as the append during its encoding left them
    assert [(m.leader, m.leader_epoch) for name, m in held if name == "PartitionRecord"] == [(1, 0), (1, 0)]
    assert log.image.partition("before", 0).leader == -1
    assert sorted(MetadataLog(str(tmp_path), 1, DIRECTORY_ID).load().topics()) == ["before", "during"]
