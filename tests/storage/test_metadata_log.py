"""The KRaft metadata log as kafkawire reads and writes it (storage/kraft): replay of snapshots and log
batches, metadata transactions, a torn append, the migration of an older kafkawire's ``topics.json``.
Kafka 4.4 reading what kafkawire writes, and the reverse, is test_kafka_dir.py."""

from __future__ import annotations

import json
import logging
import os
import uuid

from kafkawire.broker.storage import metadata
from kafkawire.broker.storage.kraft import MetadataLog, parse_uuid, records, uuid_text
from kafkawire.broker.storage.kraft.log import METADATA_DIR, decode_batch_records
from kafkawire.broker.storage.segments import SegmentStorage
from kafkawire.protocol.records import build_batch, iter_batches
from kafkawire.protocol.records.control import build_control_batch
from kafkawire.protocol.records.model import ControlRecordType

TOPIC_ID = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")


def _topic(name, topic_id, partitions):
    out = [records.new("TopicRecord", name=name, topic_id=topic_id)]
    out += [
        records.new("PartitionRecord", partition_id=p, topic_id=topic_id, replicas=[1], isr=[1], leader=1)
        for p in range(partitions)
    ]
    return out


def _batch(messages, base_offset, epoch=3):
    return build_batch(
        [(None, records.encode(m)) for m in messages], base_offset=base_offset, partition_leader_epoch=epoch
    )


def test_uuid_text_is_kafkas_base64():
    assert uuid_text(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"  # Kafka's Uuid.METADATA_TOPIC_ID.toString()
    assert parse_uuid("AAAAAAAAAAAAAAAAAAAAAQ") == uuid.UUID(int=1)
    assert parse_uuid(str(TOPIC_ID)) == TOPIC_ID  # what older kafkawire wrote in partition.metadata


def test_a_snapshot_then_the_log_after_it(tmp_path):
    """Records at offsets the snapshot covers are in it; replay starts there; an aborted metadata
    transaction leaves nothing; appends continue at the log end in the log's epoch."""
    d = tmp_path / METADATA_DIR
    d.mkdir()
    snapshot = b"".join(
        (
            build_control_batch(
                ControlRecordType.SNAPSHOT_HEADER,
                producer_id=-1,
                producer_epoch=-1,
                value=records.new("SnapshotHeaderRecord", version=0, last_contained_log_timestamp=0).encode(0),
            ),
            _batch(_topic("old", TOPIC_ID, 2), 1),
        )
    )
    (d / "00000000000000000005-0000000002.checkpoint").write_bytes(snapshot)
    other = uuid.uuid4()
    log = b"".join(
        (
            _batch(_topic("covered-by-the-snapshot", uuid.uuid4(), 1) + [records.new("NoOpRecord")], 2),  # 2..4
            _batch(
                [
                    records.new("ConfigRecord", resource_type=2, resource_name="old", name="retention.ms", value="9"),
                    records.new("PartitionRecord", partition_id=2, topic_id=TOPIC_ID, replicas=[1], isr=[1], leader=1),
                ],
                5,
            ),
            _batch(
                [
                    records.new("BeginTransactionRecord", name="x"),
                    *_topic("aborted", other, 1),
                    records.new("AbortTransactionRecord"),
                ],
                7,
            ),
            _batch(
                [
                    records.new("BeginTransactionRecord", name="y"),
                    *_topic("kept", other, 1),
                    records.new("EndTransactionRecord"),
                ],
                11,
            ),
        )
    )
    (d / "00000000000000000002.log").write_bytes(log + b"\x00\x00\x00\x00\x00\x00\x00\x10\x00\x00")  # a torn append
    mlog = MetadataLog(str(tmp_path), 1, uuid.uuid4()).load()
    topics = mlog.topics()
    assert sorted(topics) == ["kept", "old"]
    assert topics["old"].partitions == 3 and topics["old"].configs == {"retention.ms": "9"}
    assert (mlog.end_offset, mlog.epoch) == (15, 3)
    assert (d / "00000000000000000002.log").read_bytes() == log  # the torn tail is gone
    mlog.save_topics({**topics, "new": metadata.TopicMeta("new", uuid.uuid4(), 1, {})})
    *_, last = iter_batches((d / "00000000000000000002.log").read_bytes(), check_crc=True)
    assert (last.base_offset, last.partition_leader_epoch) == (15, 3)
    assert [n for _, n, _ in decode_batch_records(last)] == ["TopicRecord", "PartitionRecord"]
    assert sorted(MetadataLog(str(tmp_path), 1, uuid.uuid4()).load().topics()) == ["kept", "new", "old"]


def test_topics_json_of_an_older_kafkawire_is_migrated_once(tmp_path, caplog):
    data_dir = tmp_path / "data"
    (data_dir / "__kafkawire_meta").mkdir(parents=True)
    doc = {
        "version": 1,
        "topics": [{"name": "t", "topic_id": str(TOPIC_ID), "partitions": 2, "configs": {"retention.ms": "5"}}],
    }
    (data_dir / "__kafkawire_meta" / "topics.json").write_text(json.dumps(doc))
    (data_dir / "meta.properties").write_text("cluster.id=abc\nnode.id=1\nversion=1\n")  # no directory.id
    (data_dir / "t-0").mkdir()
    (data_dir / "t-0" / "partition.metadata").write_text(f"version: 0\ntopic_id: {TOPIC_ID}\n")
    caplog.set_level(logging.INFO)
    storage = SegmentStorage(data_dir, {})
    assert storage.topics()["t"] == metadata.TopicMeta("t", TOPIC_ID, 2, {"retention.ms": "5"})
    storage.close()
    assert [r for r in caplog.records if "moved from" in r.getMessage()]
    # set aside at the top (Kafka 4.4 refuses a directory that is not a partition's, such as __kafkawire_meta)
    assert not (data_dir / "__kafkawire_meta").exists()
    assert json.loads((data_dir / "kafkawire-topics.json.migrated").read_text()) == doc
    props = metadata.parse_properties((data_dir / "meta.properties").read_text())
    assert props["cluster.id"] == "abc" and len(props["directory.id"]) == 22
    # partition.metadata in Kafka's form (Kafka cannot parse the dashed UUID)
    assert (data_dir / "t-0" / "partition.metadata").read_text() == f"version: 0\ntopic_id: {uuid_text(TOPIC_ID)}\n"
    caplog.clear()
    storage = SegmentStorage(data_dir, {})
    assert storage.topics()["t"].partitions == 2
    storage.close()
    assert not [r for r in caplog.records if "moved from" in r.getMessage()]
    mlog = MetadataLog(str(data_dir), 1, parse_uuid(props["directory.id"])).load()
    assert mlog.image.features["metadata.version"] == 33  # the log a new Kafka 4.4 node starts with


def test_scram_credentials_are_user_scram_credential_records(tmp_path):
    """SCRAM credentials live in the metadata log as Kafka keeps them (UserScramCredentialRecord, mechanism
    ids 1 and 2; RemoveUserScramCredentialRecord); an older kafkawire's JSON file is moved in once."""
    from kafkawire.security.scram import CredentialStore, ScramServer, make_credential

    data_dir = tmp_path / "data"
    legacy = CredentialStore(str(data_dir / "__kafkawire_meta" / "scram-credentials.json"))
    legacy.apply({("old", "SCRAM-SHA-256"): make_credential("SCRAM-SHA-256", "pw-old", 4096)}, set())
    SegmentStorage(data_dir, {}).close()
    storage = SegmentStorage(data_dir, {})
    store = CredentialStore(legacy.path, metadata_log=metadata.metadata_log_of(str(data_dir)))
    assert store.users() == {"old": {"SCRAM-SHA-256": 4096}}
    assert not (data_dir / "__kafkawire_meta").exists()
    assert (data_dir / "kafkawire-scram-credentials.json.migrated").exists()
    store.apply(
        {("alice", "SCRAM-SHA-512"): make_credential("SCRAM-SHA-512", "pw-alice", 8192)},
        {("old", "SCRAM-SHA-256")},
    )
    storage.close()
    mlog = MetadataLog(str(data_dir), 1, uuid.uuid4()).load()
    assert set(mlog.scram_credentials()) == {("alice", 2)}
    batches = list(iter_batches((data_dir / METADATA_DIR / "00000000000000000000.log").read_bytes()))
    assert [n for _, n, _ in decode_batch_records(batches[-1])] == [
        "RemoveUserScramCredentialRecord",
        "UserScramCredentialRecord",
    ]
    again = CredentialStore(legacy.path, metadata_log=mlog)
    server = ScramServer("SCRAM-SHA-512", again)
    server.step(b"n,,n=alice,r=abc")
    assert server.user == "alice" and again.get("alice", "SCRAM-SHA-512").iterations == 8192


def test_a_reader_changes_nothing(tmp_path):
    """``kafkawire check`` (metadata.read_topics) may look at a directory a broker is appending to: a tail it
    cannot read yet is skipped, not truncated, and nothing is migrated."""
    data_dir = tmp_path / "data"
    storage = SegmentStorage(data_dir, {})
    storage.create_topic("t", 1)
    storage.close()
    log_file = data_dir / METADATA_DIR / "00000000000000000000.log"
    torn = log_file.read_bytes() + _batch(_topic("later", uuid.uuid4(), 1), 100)[:30]
    log_file.write_bytes(torn)
    assert list(metadata.read_topics(str(data_dir))) == ["t"]
    assert log_file.read_bytes() == torn


def test_kafkawire_logs_replays_metadata_transactions_as_the_broker_does(tmp_path):
    """``kafkawire logs DIR`` lists the topics the broker would serve: an aborted metadata transaction's
    topic is not one of them, a committed one's is."""
    from kafkawire.tools.logdump import metadata_topics

    d = tmp_path / METADATA_DIR
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(
        _batch([records.new("BeginTransactionRecord", name="x"), *_topic("aborted", uuid.uuid4(), 1)], 0)
        + _batch([records.new("AbortTransactionRecord")], 3)
        + _batch([records.new("BeginTransactionRecord", name="y"), *_topic("kept", TOPIC_ID, 2)], 4)
        + _batch([records.new("EndTransactionRecord")], 8)
    )
    topics, _, problems = metadata_topics(str(d))
    assert not problems and list(topics) == ["kept"] and len(topics["kept"]["partitions"]) == 2
    assert sorted(MetadataLog(str(tmp_path), 1, uuid.uuid4()).load().topics()) == ["kept"]


def test_the_metadata_logs_files_are_durable_before_what_relies_on_them_with_one_directory_fsync_each(
    tmp_path, monkeypatch
):
    """A new metadata log: its snapshot and partition.metadata renamed durably before the log file exists (a
    directory with a log is loaded as a metadata log); each leadership: quorum-state and leader-epoch-checkpoint
    renamed durably before the LeaderChange opening the epoch. One fsync of the directory covers both renames of
    each pair (two a start on a new directory, one a restart, instead of four and two)."""
    from kafkawire.broker.storage.kraft import log as kraft_log

    data_dir = tmp_path / "data"
    directory = data_dir / METADATA_DIR
    pending: set[str] = set()  # renamed in the metadata directory, not yet made durable by an fsync of it
    syncs: list[str] = []
    real_replace, real_fsync_dir = os.replace, metadata.fsync_dir

    def replace(src, dst, *args, **kwargs):
        real_replace(src, dst, *args, **kwargs)
        if os.path.dirname(os.fspath(dst)) == str(directory):
            pending.add(os.path.basename(dst))

    def fsync_dir(path):
        real_fsync_dir(path)
        if os.fspath(path) == str(directory):
            pending.clear()
            syncs.append("sync")

    def log_file_open(path, mode="r", *args, **kwargs):
        if os.fspath(path).endswith(".log") and "w" in mode:
            assert not pending, f"the log file is created before {sorted(pending)} are durable"
        return open(path, mode, *args, **kwargs)

    real_write = MetadataLog._write

    def write(self, batch):
        assert not pending, f"a batch is written before {sorted(pending)} are durable"
        return real_write(self, batch)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(metadata, "fsync_dir", fsync_dir)
    monkeypatch.setattr(kraft_log, "open", log_file_open, raising=False)
    monkeypatch.setattr(MetadataLog, "_write", write)
    for start, directory_syncs in (("new", 2), ("restart", 1)):
        syncs.clear()
        storage = SegmentStorage(data_dir, {})
        mlog = metadata.metadata_log_of(str(data_dir))
        mlog.become_leader()
        assert len(syncs) == directory_syncs, start
        storage.close()
        metadata._logs.clear()  # the next start opens the directory afresh, as a new process would
    assert {"quorum-state", "leader-epoch-checkpoint", "partition.metadata"} <= set(os.listdir(directory))
