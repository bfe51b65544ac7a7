"""Behaviour specific to the on-disk engine: files, indexes, restart, crash recovery, fsync."""

from __future__ import annotations

import logging
import os
import shutil
import struct

import pytest
from storage_batches import batch_attributes, build_batch, padded_batch, parse_batches

from kafkawire.broker.storage import base
from kafkawire.broker.storage.recovery import DirectoryTakenError
from kafkawire.broker.storage.segments import SegmentStorage


def files(directory, suffix):
    return sorted(name for name in os.listdir(directory) if name.endswith(suffix))


def read_bytes(log, offset, max_bytes=1 << 30):
    return b"".join(bytes(c) for c in log.read(offset, max_bytes).chunks)


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


@pytest.fixture
def open_storage(data_dir):
    opened = []

    def open_(props=None, **kwargs):
        storage = SegmentStorage(data_dir, props, **kwargs)
        opened.append(storage)
        return storage

    yield open_
    for storage in opened:
        storage.close()


def crash(storage):
    """Drop a storage without a clean close: release the directory lock only (as process death would)."""
    storage._closed = True
    storage._release()


def test_log_file_is_the_batches_back_to_back(open_storage, data_dir):
    storage = open_storage()
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    sent = [build_batch([b"a", b"b"]), build_batch([b"c"]), build_batch([b"d"] * 3)]
    for batch in sent:
        log.append(batch)
    with open(data_dir / "t-0" / "00000000000000000000.log", "rb") as f:
        on_disk = f.read()
    expected = b"".join(struct.pack(">q", off) + b[8:] for off, b in zip((0, 2, 3), sent))
    assert on_disk == expected
    assert [(b[0], b[1]) for b in parse_batches(on_disk)] == [(0, 1), (2, 2), (3, 5)]


def test_segments_roll_at_segment_bytes(open_storage, data_dir):
    storage = open_storage({"log.segment.bytes": "1000"})
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    for _ in range(10):
        log.append(padded_batch(300, records=2))
    names = files(data_dir / "t-0", ".log")
    assert names == [f"{base_offset:020d}.log" for base_offset in (0, 6, 12, 18)]
    sizes = [os.path.getsize(data_dir / "t-0" / n) for n in names]
    assert sizes == [900, 900, 900, 300]
    assert files(data_dir / "t-0", ".index") == [n.replace(".log", ".index") for n in names]
    assert files(data_dir / "t-0", ".timeindex") == [n.replace(".log", ".timeindex") for n in names]
    # a topic override wins over the broker default
    storage.create_topic("u", 1, {"segment.bytes": "650"})
    for _ in range(4):
        storage.partition("u", 0).append(padded_batch(300))
    assert len(files(data_dir / "u-0", ".log")) == 2


def test_oversized_batch_gets_a_segment_of_its_own(open_storage, data_dir):
    storage = open_storage({"log.segment.bytes": "500"})
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    log.append(padded_batch(100))
    log.append(padded_batch(2000))
    log.append(padded_batch(100))
    assert files(data_dir / "t-0", ".log") == [f"{o:020d}.log" for o in (0, 1, 2)]
    assert log.read(1, 10).size == 2000


def test_segment_ms_rolls_by_record_time(open_storage, data_dir):
    storage = open_storage()
    storage.create_topic("t", 1, {"segment.ms": "1000"})
    log = storage.partition("t", 0)
    for ts in (0, 500, 1000, 1001, 1500, 2002):
        log.append(build_batch([b"x"], timestamps=[10_000 + ts]))
    # rolls when a batch is more than segment.ms after the segment's first batch
    assert files(data_dir / "t-0", ".log") == [f"{o:020d}.log" for o in (0, 3, 5)]


def test_offset_index_follows_kafkas_interval_and_format(open_storage, data_dir):
    storage = open_storage({"log.index.interval.bytes": "4096"})
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    positions, pos = [], 0
    for _ in range(50):
        log.append(padded_batch(1000, records=3))
        positions.append(pos)
        pos += 1000
    storage.close()  # index files are written when a segment is sealed or the storage closes
    with open(data_dir / "t-0" / "00000000000000000000.index", "rb") as f:
        entries = list(struct.iter_unpack(">ii", f.read()))
    # an entry whenever more than 4096 bytes were appended since the last: every 5th batch from the 6th
    assert entries == [(3 * i + 2, positions[i]) for i in range(5, 50, 5)]
    with open(data_dir / "t-0" / "00000000000000000000.timeindex", "rb") as f:
        times = list(struct.iter_unpack(">qi", f.read()))
    assert times and all(a[0] < b[0] for a, b in zip(times, times[1:]))


@pytest.mark.parametrize("interval", ["0", "4096", "100000"])
def test_every_offset_of_many_batches_is_found(open_storage, interval):
    storage = open_storage({"log.index.interval.bytes": interval, "log.segment.bytes": "40000"})
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    expected = {}
    for i in range(120):
        records = 1 + i % 7
        result = log.append(build_batch([b"v" * (i % 13 * 40)] * records))
        for offset in range(result.base_offset, result.last_offset + 1):
            expected[offset] = (result.base_offset, result.last_offset)
    assert len(log.segments) > 3
    for offset, (first, last) in expected.items():
        got = parse_batches(read_bytes(log, offset, 1))
        assert (got[0][0], got[0][1]) == (first, last)
    assert log.read(log.log_end_offset, 100).chunks == []


def test_read_spans_segments_and_hands_out_mmap_views(open_storage):
    storage = open_storage({"log.segment.bytes": "1000"})
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    for _ in range(9):
        log.append(padded_batch(300))
    result = log.read(1, 2000)
    assert result.size == 1800 and len(result.chunks) == 3  # rest of segment 0, all of 1, part of 2
    assert all(isinstance(c, memoryview) and c.readonly for c in result.chunks)
    regions = log.read_regions(1, 2000)
    assert [type(c) for c in regions.chunks] == [base.FileRegion] * 3
    assert [(r.position, r.length) for r in regions.chunks] == [(300, 600), (0, 900), (0, 300)]


def test_restart_reloads_topics_offsets_configs_and_cluster_id(open_storage, data_dir):
    storage = open_storage({"log.segment.bytes": "1000"})
    meta = storage.create_topic("orders", 2, {"retention.ms": "86400000"})
    storage.create_topic("events", 1)
    storage.set_topic_configs("events", {"cleanup.policy": "compact"})
    for p in range(2):
        for i in range(7):
            storage.partition("orders", p).append(padded_batch(300, base_timestamp=1000 * i))
    before = read_bytes(storage.partition("orders", 1), 0)
    cluster_id = storage.cluster_id
    storage.close()
    props = (data_dir / "meta.properties").read_text()
    assert f"cluster.id={cluster_id}" in props and "node.id=" in props and "version=1" in props

    again = open_storage({"log.segment.bytes": "1000"})
    assert again.cluster_id == cluster_id
    assert again.topics()["orders"] == meta
    assert again.topics()["events"].configs == {"cleanup.policy": "compact"}
    log = again.partition("orders", 1)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 7, 2100)
    assert read_bytes(log, 0) == before
    assert log.max_timestamp() == (6, 6000)
    assert log.offset_for_timestamp(2500) == (3, 3000)
    assert log.append(padded_batch(300)).base_offset == 7


def test_node_id_mismatch_and_second_broker_are_refused(open_storage, data_dir):
    storage = open_storage({"node.id": "3"})
    with pytest.raises(base.StorageError, match="in use"):
        SegmentStorage(data_dir)
    storage.close()
    with pytest.raises(base.StorageError, match="node.id"):
        SegmentStorage(data_dir, {"node.id": "4"})
    open_storage({"node.id": "3"})


def _three_batches(open_storage, props=None):
    storage = open_storage(props)
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    for values in ([b"a", b"b"], [b"c"], [b"d", b"e", b"f"]):
        log.append(build_batch(values), durable=True)
    return storage, log


def test_torn_tail_is_truncated_on_restart(open_storage, data_dir, caplog):
    storage, log = _three_batches(open_storage)
    intact = read_bytes(log, 0)
    log.append(build_batch([b"g" * 100, b"h"]))
    crash(storage)
    path = data_dir / "t-0" / "00000000000000000000.log"
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 30)  # the last batch is cut mid-way, as by a crash
    with caplog.at_level(logging.WARNING, logger="kafkawire.storage"):
        again = open_storage()
    log = again.partition("t", 0)
    assert log.log_end_offset == 6 and os.path.getsize(path) == len(intact)
    assert read_bytes(log, 0) == intact
    assert any("truncating" in r.getMessage() for r in caplog.records)
    assert log.append(build_batch([b"i"])).base_offset == 6


def test_torn_header_is_truncated_on_restart(open_storage, data_dir):
    storage, log = _three_batches(open_storage)
    intact = read_bytes(log, 0)
    crash(storage)
    with open(data_dir / "t-0" / "00000000000000000000.log", "ab") as f:
        f.write(build_batch([b"z"])[:40])
    log = open_storage().partition("t", 0)
    assert (log.log_end_offset, read_bytes(log, 0)) == (6, intact)


def test_corrupt_crc_in_the_last_batch_is_truncated(open_storage, data_dir, caplog):
    storage, log = _three_batches(open_storage)
    intact = read_bytes(log, 0, 10_000)[: -len(build_batch([b"d", b"e", b"f"]))]
    crash(storage)
    path = data_dir / "t-0" / "00000000000000000000.log"
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) - 2)
        f.write(b"\xff\xfe")  # flip bytes inside the last record: the CRC no longer matches
    with caplog.at_level(logging.WARNING, logger="kafkawire.storage"):
        log = open_storage().partition("t", 0)
    assert log.log_end_offset == 3
    assert read_bytes(log, 0) == intact
    assert any("CRC" in r.getMessage() for r in caplog.records)


def test_missing_or_garbage_indexes_are_rebuilt(open_storage, data_dir):
    props = {"log.segment.bytes": "5000", "log.index.interval.bytes": "500"}
    storage = open_storage(props)
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    for i in range(40):
        log.append(padded_batch(400, records=2, base_timestamp=100 * i))
    expected = {o: parse_batches(read_bytes(log, o, 1))[0][:2] for o in range(80)}
    index_files = files(data_dir / "t-0", ".index")
    with open(data_dir / "t-0" / index_files[0], "rb") as f:
        good_index = f.read()
    storage.close()
    os.unlink(data_dir / "t-0" / index_files[0])
    os.unlink(data_dir / "t-0" / index_files[1].replace(".index", ".timeindex"))
    with open(data_dir / "t-0" / index_files[2], "r+b") as f:
        f.write(b"\x7f" * 13)
    again = open_storage(props)
    log = again.partition("t", 0)
    assert {o: parse_batches(read_bytes(log, o, 1))[0][:2] for o in range(80)} == expected
    with open(data_dir / "t-0" / index_files[0], "rb") as f:
        assert f.read() == good_index
    assert log.max_timestamp() == (79, 3901)  # second record of the last batch
    assert log.offset_for_timestamp(1250) == (26, 1300)


def test_sealed_segment_timeindex_records_its_max_timestamp(open_storage, data_dir):
    storage = open_storage({"log.segment.bytes": "1000"})
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    for ts in (5, 900, 7, 8):  # the largest timestamp is not in the last batch
        log.append(padded_batch(300, base_timestamp=ts))
    with open(data_dir / "t-0" / "00000000000000000000.timeindex", "rb") as f:
        assert list(struct.iter_unpack(">qi", f.read()))[-1] == (900, 1)


def test_durable_append_fsyncs_before_returning(open_storage, monkeypatch):
    storage = open_storage()
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    calls = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd)))
    log.append(build_batch([b"a"]))
    assert calls == []  # Kafka's default flush policy: not per append
    log.append(build_batch([b"b"]), durable=True)
    assert len(calls) == 1
    assert log.flushed_offset == 2
    log.flush()  # nothing new: no second fsync
    assert len(calls) == 1


def test_flush_messages_forces_periodic_fsync(open_storage, monkeypatch):
    storage = open_storage({"log.flush.interval.messages": "5"})
    storage.create_topic("t", 1)
    storage.create_topic("u", 1, {"flush.messages": "2"})
    calls = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd)))
    log = storage.partition("t", 0)
    for _ in range(4):
        log.append(build_batch([b"x"]))
    assert calls == []
    log.append(build_batch([b"x"]))
    assert len(calls) == 1 and log.flushed_offset == 5
    other = storage.partition("u", 0)
    other.append(build_batch([b"x"]))
    other.append(build_batch([b"x"]))
    assert len(calls) == 2


def test_flush_due_honours_flush_ms(data_dir, monkeypatch):
    now = [1_000_000]
    storage = SegmentStorage(data_dir, {"log.flush.interval.ms": "1000"}, clock=lambda: now[0])
    try:
        storage.create_topic("t", 2)
        storage.partition("t", 0).append(build_batch([b"x"]))
        calls = []
        real_fsync = os.fsync
        monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd)))
        assert storage.flush_due(now[0] + 999) == 0
        assert storage.flush_due(now[0] + 1000) == 1  # only the partition with unflushed data
        assert len(calls) == 1
        assert storage.flush_due(now[0] + 5000) == 0
    finally:
        storage.close()


def test_delete_records_survives_restart(open_storage, data_dir):
    storage = open_storage({"log.segment.bytes": "1000"})
    storage.create_topic("t", 2)
    log = storage.partition("t", 1)
    for _ in range(7):
        log.append(padded_batch(300))
    assert log.delete_records_before(4) == 4
    assert "t 1 4" in (data_dir / "log-start-offset-checkpoint").read_text()
    crash(storage)
    log = open_storage({"log.segment.bytes": "1000"}).partition("t", 1)
    assert log.log_start_offset == 4 and log.log_end_offset == 7
    with pytest.raises(base.OffsetOutOfRangeError):
        log.read(3, 100)


def test_retention_deletes_segment_files_and_moves_log_start(open_storage, data_dir):
    storage = open_storage({"log.segment.bytes": "1000"})
    storage.create_topic("t", 1, {"retention.ms": "10000"})
    log = storage.partition("t", 0)
    for i in range(9):  # three segments of three batches, timestamps 0..8 seconds
        log.append(padded_batch(300, base_timestamp=1000 * i))
    assert storage.enforce_retention(now_ms=12_500) == 1  # only segment 0 (max ts 2000) is > 10 s old
    assert files(data_dir / "t-0", ".log") == [f"{o:020d}.log" for o in (3, 6)]
    assert (log.log_start_offset, log.size_bytes) == (3, 1800)
    held = log.read(3, 300).chunks[0]  # a reader holding a view of a segment about to go
    storage.set_topic_configs("t", {"retention.ms": None, "retention.bytes": "900"})
    assert storage.enforce_retention(now_ms=12_500) == 1
    assert parse_batches(bytes(held))[0][0] == 3  # still readable after the unlink
    assert files(data_dir / "t-0", ".log") == [f"{6:020d}.log"]
    assert files(data_dir / "t-0", ".index") == [f"{6:020d}.index"]
    assert files(data_dir / "t-0", ".timeindex") == [f"{6:020d}.timeindex"]


def test_retention_rolls_and_deletes_an_expired_active_segment(open_storage, data_dir):
    storage = open_storage()
    storage.create_topic("t", 1, {"retention.ms": "1000"})
    log = storage.partition("t", 0)
    for i in range(3):
        log.append(build_batch([b"x"], timestamps=[i]))
    assert storage.enforce_retention(now_ms=10_000) == 1
    assert files(data_dir / "t-0", ".log") == [f"{3:020d}.log"]
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (3, 3, 0)
    assert log.append(build_batch([b"y"])).base_offset == 3
    assert storage.enforce_retention(now_ms=10_000) == 0  # the new record is not old
    assert (log.log_start_offset, log.log_end_offset) == (3, 4)


def test_delete_records_then_retention_drops_segments_below_log_start(open_storage, data_dir):
    storage = open_storage({"log.segment.bytes": "1000"})
    storage.create_topic("t", 1, {"retention.ms": "-1"})
    log = storage.partition("t", 0)
    for _ in range(9):
        log.append(padded_batch(300))
    log.delete_records_before(7)
    assert storage.enforce_retention(now_ms=0) == 2
    assert files(data_dir / "t-0", ".log") == [f"{6:020d}.log"]
    assert log.log_start_offset == 7


def test_log_append_time_is_on_disk_after_restart(open_storage):
    storage = open_storage()
    storage.create_topic("t", 1, {"message.timestamp.type": "LogAppendTime"})
    storage.partition("t", 0).append(build_batch([b"a"], timestamps=[1]), log_append_time=42_000)
    storage.close()
    log = open_storage().partition("t", 0)
    ((_, _, max_ts, batch),) = parse_batches(read_bytes(log, 0))
    assert max_ts == 42_000 and batch_attributes(batch) & 0x08
    assert log.offset_for_timestamp(41_000) == (0, 42_000)


def test_delete_topic_removes_its_directories_and_a_recreated_topic_starts_empty(open_storage, data_dir):
    storage = open_storage()
    storage.create_topic("t", 2)
    storage.partition("t", 0).append(build_batch([b"a"]))
    storage.partition("t", 0).delete_records_before(1)
    storage.delete_topic("t")
    assert not any(name.startswith("t-") for name in os.listdir(data_dir))
    storage.create_topic("t", 1)
    storage.close()
    log = open_storage().partition("t", 0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)


def test_directories_of_no_topic_are_left_in_place_not_loaded(open_storage, data_dir):
    storage = open_storage()
    storage.create_topic("t", 1)
    storage.close()
    stray = data_dir / "ghost-0"
    stray.mkdir()
    (stray / "00000000000000000000.log").write_bytes(build_batch([b"boo"]))
    storage = open_storage()
    assert set(storage.topics()) == {"t"}
    assert (stray / "00000000000000000000.log").read_bytes() == build_batch([b"boo"])  # not moved, not read
    with pytest.raises(DirectoryTakenError, match="ghost-0"):
        storage.create_topic("ghost", 1)  # its directory is taken: refused, the directory stays
    assert stray.exists() and "ghost" not in storage.topics()
    storage.close()
    shutil.rmtree(stray)
    storage = open_storage()
    storage.create_topic("ghost", 1)
    assert storage.partition("ghost", 0).log_end_offset == 0


def test_a_topic_change_is_one_batch_appended_to_the_metadata_log(open_storage, data_dir):
    """Topics live in the KRaft metadata log: a creation appends one batch (all its records or none after a
    crash), nothing is rewritten in place."""
    from kafkawire.broker.storage.kraft.log import decode_batch_records
    from kafkawire.protocol.records import iter_batches

    storage = open_storage()
    storage.create_topic("t", 1)
    log_file = data_dir / "__cluster_metadata-0" / "00000000000000000000.log"
    before = log_file.read_bytes()
    storage.create_topic("u", 2, {"retention.ms": "1000"})
    after = log_file.read_bytes()
    assert after.startswith(before)
    (batch,) = iter_batches(after[len(before) :], check_crc=True)
    decoded = [(name, m) for _, name, m in decode_batch_records(batch)]
    assert [(n, m.partition_id if n == "PartitionRecord" else m.name) for n, m in decoded] == [
        ("TopicRecord", "u"),
        ("ConfigRecord", "retention.ms"),
        ("PartitionRecord", 0),
        ("PartitionRecord", 1),
    ]


def test_a_torn_sealed_segment_loses_only_its_tail(open_storage, data_dir, caplog):
    storage = open_storage({"log.segment.bytes": "1000"})
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    for _ in range(9):
        log.append(padded_batch(300))
    before = {o: read_bytes(log, o, 300) for o in range(9)}
    crash(storage)
    with open(data_dir / "t-0" / f"{3:020d}.log", "r+b") as f:
        f.truncate(450)  # offset 3 whole, offset 4 torn, offset 5 gone
    with caplog.at_level(logging.WARNING, logger="kafkawire.storage"):
        log = open_storage({"log.segment.bytes": "1000"}).partition("t", 0)
    assert log.log_end_offset == 9
    assert files(data_dir / "t-0", ".log") == [f"{b:020d}.log" for b in (0, 3, 6)]
    for o in (0, 1, 2, 3, 6, 7, 8):
        assert read_bytes(log, o, 300) == before[o]
    assert read_bytes(log, 4, 300) == before[6]  # the gap: the next batch, as a compacted log answers
    [quarantine] = (data_dir / "t-0").glob("*.quarantine")
    assert quarantine.name.startswith(f"{3:020d}.300.") and quarantine.stat().st_size == 150
    assert any("quarantined 150 damaged bytes" in r.getMessage() for r in caplog.records)
    assert log.append(padded_batch(300)).base_offset == 9


def test_restart_does_not_hold_a_file_open_per_segment(open_storage):
    props = {"log.segment.bytes": "1000"}
    storage = open_storage(props)
    storage.create_topic("t", 3)
    for p in range(3):
        for _ in range(60):
            storage.partition("t", p).append(padded_batch(300))
    assert len(storage.partition("t", 0).segments) == 20
    storage.close()
    before = len(os.listdir("/proc/self/fd"))
    storage = open_storage(props)
    assert len(os.listdir("/proc/self/fd")) - before <= 2  # the data-dir lock (sealed segments open on first read)
    assert storage.partition("t", 2).read(0, 10).size == 300


def test_short_writes_and_many_batches_in_one_append(open_storage, monkeypatch):
    storage = open_storage()
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    real_pwritev = os.pwritev
    # the kernel may write less than asked: take at most 1000 bytes per call
    monkeypatch.setattr(os, "pwritev", lambda fd, bufs, pos: real_pwritev(fd, [bytes(b"".join(bufs))[:1000]], pos))
    many = b"".join(build_batch([b"%d" % i]) for i in range(1500))  # 3000 buffers: more than IOV_MAX
    assert log.append(many).last_offset == 1499
    batches = parse_batches(read_bytes(log, 0))
    assert [b[0] for b in batches] == list(range(1500))


def test_failed_write_leaves_no_garbage(open_storage, data_dir, monkeypatch):
    storage = open_storage()
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    log.append(build_batch([b"kept"]))
    real_pwritev = os.pwritev

    def disk_full(fd, bufs, pos):
        real_pwritev(fd, [bytes(bufs[0])[:20]], pos)  # part of it lands, then the disk fills
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwritev", disk_full)
    with pytest.raises(base.StorageError, match="No space"):
        log.append(build_batch([b"lost"]))
    monkeypatch.setattr(os, "pwritev", real_pwritev)
    assert log.log_end_offset == 1
    assert log.append(build_batch([b"next"])).base_offset == 1
    storage.close()
    log = open_storage().partition("t", 0)
    assert [b[0] for b in parse_batches(read_bytes(log, 0))] == [0, 1]


def test_segment_ms_falls_back_to_wall_clock_without_timestamps(data_dir):
    now = [5_000_000]
    storage = SegmentStorage(data_dir, {"log.roll.ms": "1000"}, clock=lambda: now[0])
    try:
        storage.create_topic("t", 1)
        log = storage.partition("t", 0)
        no_ts = build_batch([b"x"], timestamps=[-1])
        log.append(no_ts)
        now[0] += 1000
        log.append(no_ts)
        assert len(log.segments) == 1
        now[0] += 1
        log.append(no_ts)
        assert [s.base_offset for s in log.segments] == [0, 2]
    finally:
        storage.close()


def test_file_regions_outlive_retention(open_storage):
    storage = open_storage({"log.segment.bytes": "1000"})
    storage.create_topic("t", 1, {"retention.bytes": "0"})
    log = storage.partition("t", 0)
    for _ in range(6):
        log.append(padded_batch(300))
    region = log.read_regions(0, 300).chunks[0]
    expected = region.tobytes()
    assert storage.enforce_retention(now_ms=0) == 2
    assert log.log_start_offset == 6
    assert bytes(region) == expected and os.pread(region.fileno(), 12, region.position) == expected[:12]
