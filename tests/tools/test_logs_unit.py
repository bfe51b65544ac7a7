"""``kafkawire logs``: decoding of segments, indexes, snapshots and checkpoints built here, and damaged
input (truncated at every byte, flipped at every byte, garbage) reported with its position, never raised."""

from __future__ import annotations

import json
import os
import random
import struct
import uuid

import pytest
from crc32c import crc32c

from kafkawire.cli.main import main
from kafkawire.protocol.messages import message_class
from kafkawire.protocol.records import build_batch, build_control_batch
from kafkawire.protocol.records.model import ControlRecordType
from kafkawire.tools import logdump

TS = 1_700_000_000_000


def _segment() -> tuple[bytes, list[int]]:
    """Four batches (none, gzip with headers and a null key, zstd from an idempotent producer, a commit
    marker) and the position of each."""
    parts = [
        build_batch([(b"k0", b"v0", [], TS), (b"k1", b"v1", [], TS + 1)], base_offset=0),
        build_batch(
            [(None, b"\x00\xff binary", [("h", b"hv"), ("n", None)], TS + 2), (b"k3", "héllo".encode(), [], TS + 3)],
            base_offset=2,
            compression="gzip",
        ),
        build_batch(
            [(b"k4", b"v4" * 200, [], TS + 4)],
            base_offset=4,
            compression="zstd",
            producer_id=7,
            producer_epoch=1,
            base_sequence=0,
        ),
        build_control_batch(
            ControlRecordType.COMMIT,
            producer_id=7,
            producer_epoch=1,
            coordinator_epoch=3,
            base_offset=5,
            timestamp=TS + 5,
        ),
    ]
    positions, pos = [], 0
    for p in parts:
        positions.append(pos)
        pos += len(p)
    return b"".join(parts), positions


def _errors(items):
    return [i for i in items if i["kind"] == "error"]


def test_every_batch_and_record_of_a_segment():
    data, positions = _segment()
    items = list(logdump.dump_batches(data))
    assert not _errors(items)
    assert [
        (b["position"], b["base_offset"], b["last_offset"], b["count"], b["codec"], b["crc_valid"]) for b in items
    ] == [
        (positions[0], 0, 1, 2, "none", True),
        (positions[1], 2, 3, 2, "gzip", True),
        (positions[2], 4, 4, 1, "zstd", True),
        (positions[3], 5, 5, 1, "none", True),
    ]
    recs = [r for b in items for r in b["records"]]
    assert [r["offset"] for r in recs] == [0, 1, 2, 3, 4, 5]
    assert recs[0]["key"] == {"text": "k0"} and recs[2]["key"] is None and recs[2]["key_size"] == -1
    assert recs[2]["value"] == {"hex": b"\x00\xff binary".hex()}
    assert recs[2]["headers"] == [["h", {"text": "hv"}], ["n", None]]
    assert recs[3]["value"] == {"text": "héllo"}
    assert items[2]["producer_id"] == 7 and items[2]["producer_epoch"] == 1 and items[2]["base_sequence"] == 0
    assert items[3]["control"] and items[3]["transactional"]
    assert recs[5]["decoded"] == {"control": "COMMIT", "coordinator_epoch": 3}
    long = logdump.dump_batches(data, max_bytes=10)
    rec4 = [r for b in long for r in b["records"]][4]
    assert rec4["value"] == {"text": "v4v4v4v4v4", "truncated": 390} and rec4["value_size"] == 400


def test_metadata_and_offsets_records_are_decoded_by_their_schemas():
    topic_id = uuid.uuid4()
    body = message_class("TopicRecord")(name="orders", topic_id=topic_id).encode(0)
    value = bytes([1, 2, 0]) + body  # frame version 1, record type 2 (TopicRecord), version 0
    dec = logdump.decode_metadata_record(value)
    assert dec == {"type": "TopicRecord", "version": 0, "data": {"name": "orders", "topic_id": str(topic_id)}}
    key = struct.pack(">h", 1) + message_class("OffsetCommitKey")(group="g", topic="t", partition=3).encode(0)
    val = struct.pack(">h", 3) + message_class("OffsetCommitValue")(
        offset=42, leader_epoch=1, metadata="", commit_timestamp=TS
    ).encode(3)
    dec = logdump.decode_offsets_record(key, val)
    assert dec["type"] == "OffsetCommit" and dec["key"] == {"group": "g", "topic": "t", "partition": 3}
    assert dec["value"]["offset"] == 42 and dec["value_version"] == 3
    assert logdump.decode_offsets_record(key, None)["value"] is None  # a tombstone
    kw = logdump.decode_offsets_record(b'["offset","g","t",0]', b'{"offset":5}')
    assert kw == {"type": "kafkawire", "key": ["offset", "g", "t", 0], "value": {"offset": 5}}
    with pytest.raises(logdump.RecordDecodeError, match="frame version"):
        logdump.decode_metadata_record(bytes([9, 2, 0]) + body)
    with pytest.raises(logdump.RecordDecodeError, match="record type 999"):
        logdump.decode_offsets_record(struct.pack(">h", 999), None)
    # a record that does not parse is shown raw, with why, and the walk goes on
    seg = build_batch([(None, bytes([1, 2, 0]) + b"\xff", [], TS), (None, value, [], TS)])
    (batch,) = logdump.dump_batches(seg, decoder="metadata")
    assert "decode_error" in batch["records"][0] and batch["records"][1]["decoded"]["type"] == "TopicRecord"


def test_a_transaction_log_value_names_its_state_as_kafkas_dump_log_segments_prints_it():
    key = struct.pack(">h", 0) + message_class("TransactionLogKey")(transactional_id="tx").encode(0)

    def value(status: int) -> bytes:
        body = message_class("TransactionLogValue")(
            producer_id=7,
            producer_epoch=1,
            transaction_timeout_ms=60000,
            transaction_status=status,
            transaction_partitions=[],
            transaction_last_update_timestamp_ms=TS,
            transaction_start_timestamp_ms=-1,
        )
        return struct.pack(">h", 1) + body.encode(1)

    names = [
        logdump.decode_offsets_record(key, value(s), "transaction")["value"]["transaction_status"] for s in range(8)
    ]
    assert names == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]
    # a byte no state has is shown as it is, not refused
    assert logdump.decode_offsets_record(key, value(42), "transaction")["value"]["transaction_status"] == 42


def test_a_cut_at_every_byte_is_reported_where_the_torn_batch_starts():
    data, positions = _segment()
    for cut in range(len(data)):
        items = list(logdump.dump_batches(data[:cut]))
        whole = [p for p in positions[1:] + [len(data)] if p <= cut]
        batches = [i for i in items if i["kind"] == "batch"]
        assert len(batches) == len(whole), cut
        if cut in positions:
            assert not _errors(items), cut
        else:
            (err,) = _errors(items)
            assert err["position"] == max(p for p in positions if p <= cut), cut
            assert "truncated" in err["reason"]


def test_a_flip_at_every_byte_the_crc_or_framing_covers_is_reported():
    data, positions = _segment()
    for where in range(len(data)):
        start = max(p for p in positions if p <= where)
        rel = where - start
        for bit in (0x01, 0x80):
            flipped = bytearray(data)
            flipped[where] ^= bit
            items = list(logdump.dump_batches(bytes(flipped)))  # must not raise
            errors = _errors(items)
            if rel < 8 or 12 <= rel < 16:
                continue  # base offset and leader epoch: outside the CRC by Kafka's design
            assert errors, (where, bit)
            assert errors[0]["position"] <= where, (where, bit, errors)
            if rel >= 16:  # magic, CRC or covered bytes: this batch is the first one reported
                assert errors[0]["position"] == start or start == positions[0] and errors[0]["position"] == 0, (
                    where,
                    bit,
                    errors,
                )
            # batches before the damaged one are intact
            assert [i["base_offset"] for i in items if i["kind"] == "batch"][: positions.index(start)] == [0, 2, 4, 5][
                : positions.index(start)
            ], where


def test_garbage_never_raises_and_is_reported_at_byte_zero():
    rng = random.Random(1234)
    for n in range(200):
        size = rng.randrange(0, 400)
        data = bytes(rng.randrange(256) for _ in range(size))
        items = list(logdump.dump_batches(data))
        if size:
            errors = _errors(items)
            assert errors and errors[0]["position"] == 0, n
        for name in (
            "00000000000000000000.index",
            "00000000000000000000.timeindex",
            "00000000000000000001.snapshot",
            "00000000000000000000.txnindex",
            "leader-epoch-checkpoint",
            "quorum-state",
            "meta.properties",
            "partition.metadata",
        ):
            list(logdump.dump_file(name, data))  # any result, never an exception


def _cli(capsys, *argv):
    code = main(["logs", *argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return code, captured.out, captured.err


def test_cli_reports_damage_with_position_and_exit_status(tmp_path, capsys):
    data, positions = _segment()
    part = tmp_path / "t-0"
    part.mkdir()
    clean = part / "00000000000000000000.log"
    clean.write_bytes(data)
    code, out, _ = _cli(capsys, "--dump", str(clean))
    assert code == 0 and "4 batches, 6 records" in out and "control COMMIT coordinator epoch 3" in out
    torn = part / "00000000000000000010.log"
    torn.write_bytes(data[:-5])
    code, out, _ = _cli(capsys, "--dump", str(torn))
    assert code == 1 and f"ERROR at byte {positions[3]}: truncated" in out
    flipped = bytearray(data)
    flipped[positions[1] + 40] ^= 0xFF
    bad = part / "00000000000000000020.log"
    bad.write_bytes(bytes(flipped))
    code, out, _ = _cli(capsys, "--dump", "--json", str(bad))
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 1
    assert [(i["kind"], i.get("crc_valid")) for i in lines] == [
        ("batch", True),
        ("batch", False),
        ("error", None),
        ("batch", True),
        ("batch", True),
    ]
    assert lines[2]["position"] == positions[1] and "CRC" in lines[2]["reason"]
    garbage = part / "00000000000000000030.log"
    garbage.write_bytes(b"\xff" * 100)
    code, out, _ = _cli(capsys, "--dump", str(garbage))
    assert code == 1 and "ERROR at byte 0" in out
    code, _, err = _cli(capsys, "--dump", str(part / "missing.log"))
    assert code == 2 and "no such file" in err
    (part / "notes.txt").write_text("x")
    code, _, err = _cli(capsys, "--dump", str(part / "notes.txt"))
    assert code == 2 and "not a file" in err


def test_indexes_snapshots_and_checkpoints(tmp_path):
    index = struct.pack(">iiii", 3, 0, 9, 4000) + bytes(16)  # two entries, then preallocated zeros
    items = list(logdump.dump_offset_index(index, 100))
    assert [(i["offset"], i["position"]) for i in items if i["kind"] == "index_entry"] == [(103, 0), (109, 4000)]
    assert items[-1] == {"kind": "index_summary", "entries": 2, "preallocated_bytes": 16}
    backwards = list(logdump.dump_offset_index(struct.pack(">iiii", 9, 4000, 3, 10) + b"\x01", 0))
    assert [(e["position"], "does not follow" in e["reason"]) for e in _errors(backwards)][0] == (8, True)
    assert _errors(backwards)[-1]["position"] == 16  # the odd byte after the last whole entry
    times = list(logdump.dump_time_index(struct.pack(">qi", TS, 5) + struct.pack(">qi", TS - 1, 6), 0))
    assert _errors(times)[0]["position"] == 12
    snap = message_class("ProducerSnapshot")(crc=0, producer_entries=[]).encode(1)
    body = snap[4:]
    good = struct.pack(">hI", 1, crc32c(body)) + body
    (item,) = logdump.dump_producer_snapshot(good)
    assert item["crc_valid"] and item["producers"] == []
    bad = good[:6] + bytes([good[6] ^ 1]) + good[7:]
    assert _errors(logdump.dump_producer_snapshot(bad))
    txn = struct.pack(">hqqqq", 0, 7, 4, 7, 8) + struct.pack(">hqqqq", 0, 9, 10, 12, 13)
    items = list(logdump.dump_txn_index(txn + b"\x00"))
    assert [
        (i["producer_id"], i["first_offset"], i["last_offset"], i["last_stable_offset"])
        for i in items
        if i["kind"] == "aborted_txn"
    ] == [(7, 4, 7, 8), (9, 10, 12, 13)]
    assert _errors(items) == [{"kind": "error", "position": 68, "reason": "1 bytes after the last whole entry"}]
    assert _errors(logdump.dump_txn_index(struct.pack(">hqqqq", 3, 7, 4, 7, 8)))[0]["position"] == 0
    entries, errors = logdump.parse_checkpoint("0\n2\nt 0 5\nt 1 7\n")
    assert entries == [["t", "0", "5"], ["t", "1", "7"]] and not errors
    _, errors = logdump.parse_checkpoint("0\n3\nt 0 5\n")
    assert errors[0]["line"] == 2 and "3 entries announced, 1 found" in errors[0]["reason"]


def test_summary_of_a_kafkawire_data_dir(tmp_path, capsys):
    from kafkawire.broker.storage.segments import SegmentStorage

    data_dir = tmp_path / "data"
    storage = SegmentStorage(data_dir, {})
    storage.create_topic("orders", 2, {"retention.ms": "1000"})
    storage.create_topic("__consumer_offsets", 1)
    storage.partition("orders", 1).append(build_batch([(b"k", b"v", [], TS), (b"k2", b"v2", [], TS)]))
    storage.partition("__consumer_offsets", 0).append(
        build_batch([(b'["offset","g1","orders",1]', b'{"offset":2,"leader_epoch":-1}', [], TS)])
    )
    storage.close()
    (data_dir / "something-else").mkdir()
    code, out, _ = _cli(capsys, "--json", str(data_dir))
    assert code == 0
    items = [json.loads(line) for line in out.splitlines()]
    assert items[0]["layout"] == "kafka"  # kafkawire keeps its topics in Kafka's metadata log
    topics = {i["name"]: i for i in items if i["kind"] == "topic"}
    assert {t["source"] for t in topics.values()} == {"__cluster_metadata-0"}
    assert topics["orders"]["partitions"] == 2 and topics["orders"]["configs"] == {"retention.ms": "1000"}
    parts = {i["name"]: i for i in items if i["kind"] == "partition"}
    assert parts["orders-1"]["records"] == 2 and parts["orders-0"]["first_offset"] is None
    assert [i for i in items if i["kind"] == "consumer_offsets"][0]["groups"] == {"g1": {"orders-1": 2}}
    assert [i for i in items if i["kind"] == "unknown_entries"][0]["names"] == ["something-else/"]
    code, out, _ = _cli(capsys, str(data_dir))
    assert code == 0 and "kafka data directory" in out and "g1: orders-1=2" in out
    assert "not kafkawire's or Kafka's (left alone): something-else/" in out
    seg = data_dir / "orders-1" / "00000000000000000000.log"
    seg.write_bytes(seg.read_bytes()[:-3])
    code, out, _ = _cli(capsys, str(data_dir))
    assert code == 1 and f"{seg} at byte 0: truncated" in out
    assert os.path.isdir(data_dir / "something-else")


def test_summary_of_a_directory_of_garbage_reports_and_never_raises(tmp_path, capsys):
    rng = random.Random(99)

    def junk(n=300):
        return bytes(rng.randrange(256) for _ in range(n))

    root = tmp_path / "data"
    (root / "__kafkawire_meta").mkdir(parents=True)
    (root / "__kafkawire_meta" / "topics.json").write_bytes(junk())
    (root / "meta.properties").write_bytes(junk())
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        (root / name).write_bytes(junk())
    for part in ("__cluster_metadata-0", "__consumer_offsets-0", "t-0"):
        d = root / part
        d.mkdir()
        for f in (
            "00000000000000000000.log",
            "00000000000000000000.index",
            "00000000000000000000.timeindex",
            "00000000000000000000.snapshot",
            "00000000000000000000-0000000000.checkpoint",
            "leader-epoch-checkpoint",
            "partition.metadata",
            "quorum-state",
        ):
            (d / f).write_bytes(junk())
        (d / "00000000000000000005.log").mkdir()  # a directory where a segment should be
    code, out, _ = _cli(capsys, str(root))
    assert code == 1 and "problems:" in out
    code, out, _ = _cli(capsys, "--json", str(root))
    errors = [json.loads(line) for line in out.splitlines() if json.loads(line)["kind"] == "error"]
    assert code == 1
    assert any(e["file"].endswith("t-0/00000000000000000000.log") and e["position"] == 0 for e in errors)
    assert any(e["file"].endswith("t-0/00000000000000000005.log") for e in errors)
    assert any(e["file"].endswith("topics.json") for e in errors)


def _metadata_value(schema: str, record_type: int, **fields) -> bytes:
    return bytes([1, record_type, 0]) + message_class(schema)(**fields).encode(0)


def test_the_metadata_log_is_replayed_from_its_newest_snapshot(tmp_path):
    a, b = uuid.uuid4(), uuid.uuid4()
    meta = tmp_path / "__cluster_metadata-0"
    meta.mkdir()
    # the log from offset 0: topic a made, then removed at offset 1; the snapshot ending at offset 2 says
    # otherwise (a exists), so the log's records before offset 2 must not be applied after it
    (meta / "00000000000000000000.log").write_bytes(
        build_batch(
            [
                (None, _metadata_value("TopicRecord", 2, name="a", topic_id=a), [], TS),
                (None, _metadata_value("RemoveTopicRecord", 9, topic_id=a), [], TS),
                (None, _metadata_value("TopicRecord", 2, name="b", topic_id=b), [], TS),
            ]
        )
    )
    (meta / "00000000000000000002-0000000001.checkpoint").write_bytes(
        build_batch([(None, _metadata_value("TopicRecord", 2, name="a", topic_id=a), [], TS)])
    )
    (meta / "00000000000000000000-0000000000.checkpoint").write_bytes(b"older, never read")
    topics, count, problems = logdump.metadata_topics(str(meta))
    assert sorted(topics) == ["a", "b"] and count == 2 and not problems
    assert topics["a"]["topic_id"] == logdump.kafka_uuid(a)


def test_values_are_text_when_printable_utf8_and_cut_at_whole_characters():
    assert logdump.render_bytes("héllo".encode(), 2) == {"text": "h", "truncated": 5}  # é is two bytes
    assert logdump.render_bytes(b"line\n\ttab", 0) == {"text": "line\n\ttab"}
    assert logdump.render_bytes(b"\x00abc", 2) == {"hex": "0061", "truncated": 2}
    assert logdump.render_bytes(b"\xc3", 10) == {"hex": "c3"}  # a cut-off character is not text
    assert logdump.render_bytes(b"", 10) == {"text": ""} and logdump.render_bytes(None) is None
    assert logdump.bytes_label({"text": 'a"b', "truncated": 3}) == '"a\\"b"... (+3 bytes)'
