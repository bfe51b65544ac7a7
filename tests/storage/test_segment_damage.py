"""Damage in the middle of a log costs only the damaged batch: recovery and the scrubber quarantine it,
keep every later batch and segment at its offsets, and never serve a batch whose CRC is known bad."""

from __future__ import annotations

import logging
import os

import pytest
from storage_batches import build_batch, parse_batches

from kafkawire.broker.storage import segment as segment_mod
from kafkawire.broker.storage.segments import SegmentStorage

PROPS = {"log.segment.bytes": "1200", "log.index.interval.bytes": "200"}
RECORDS = 4  # per batch


def _fill(data_dir, batches=117):
    """39 segments of 3 batches of 4 records each (offsets 0..467); returns {base offset: batch bytes}."""
    storage = SegmentStorage(data_dir, PROPS)
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    stored = {}
    for i in range(batches):
        r = log.append(
            build_batch([b"batch-%03d-record-%d-" % (i, j) + b"x" * 40 for j in range(RECORDS)]), durable=True
        )
        stored[r.base_offset] = None
    assert len(log.segments) == batches // 3
    for base in stored:
        stored[base] = b"".join(bytes(c) for c in log.read(base, 1).chunks)
    storage.close()
    return stored


def _segment_file(data_dir, n):
    return sorted((data_dir / "t-0").glob("*.log"))[n]


def _flip_in_batch(path, which):
    """Flip a byte inside the records of the ``which``-th batch of the segment; returns its base offset."""
    data = path.read_bytes()
    pos = 0
    for i, (base, _last, _ts, batch) in enumerate(parse_batches(data)):
        if i == which:
            where = pos + len(batch) - 20  # inside the last record: only the CRC notices
            with open(path, "r+b") as f:
                f.seek(where)
                f.write(bytes([data[where] ^ 0x10]))
            return base
        pos += len(batch)
    raise AssertionError("no such batch")


def _every_batch(log):
    """{base offset: batch bytes} of everything the log serves, read offset by offset."""
    out, offset = {}, log.log_start_offset
    while offset < log.log_end_offset:
        data = b"".join(bytes(c) for c in log.read(offset, 1).chunks)
        [(base, last, _ts, batch)] = parse_batches(data)
        assert base >= offset
        out[base] = batch
        offset = last + 1
    return out


def _assert_only_lost(log, stored, lost_base):
    served = _every_batch(log)
    assert set(served) == set(stored) - {lost_base}
    for base, batch in served.items():
        assert batch == stored[base], base
    # an offset inside the quarantined batch reads as the next batch (a gap, as in a compacted log)
    nxt = min(b for b in stored if b > lost_base)
    assert b"".join(bytes(c) for c in log.read(lost_base + 1, 1).chunks) == stored[nxt]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_middle_segment_damage_with_its_index_missing_loses_only_that_batch(tmp_path, caplog, which):
    data_dir = tmp_path / "data"
    stored = _fill(data_dir)
    seg = _segment_file(data_dir, 3)
    lost = _flip_in_batch(seg, which)
    seg.with_suffix(".index").unlink()
    with caplog.at_level(logging.WARNING, logger="kafkawire.storage"):
        storage = SegmentStorage(data_dir, PROPS)
    try:
        log = storage.partition("t", 0)
        assert len(log.segments) == 39
        assert log.log_end_offset == 117 * RECORDS
        _assert_only_lost(log, stored, lost)
        [quarantine] = (data_dir / "t-0").glob("*.quarantine")
        assert quarantine.name.startswith(seg.stem + ".")
        assert len(quarantine.read_bytes()) == len(stored[lost])
        assert any("quarantined" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)
        assert seg.with_suffix(".index").exists()
        end = log.append(build_batch([b"after"])).base_offset
        stored[end] = b"".join(bytes(c) for c in log.read(end, 1).chunks)
    finally:
        storage.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kafkawire.storage"):
        storage = SegmentStorage(data_dir, PROPS)  # the repaired log loads as it is, gap and all, cheaply
    assert not [r.getMessage() for r in caplog.records], "a repaired sealed segment is checked again"
    try:
        log = storage.partition("t", 0)
        assert log.log_end_offset == 117 * RECORDS + 1
        _assert_only_lost(log, stored, lost)
        assert len(list((data_dir / "t-0").glob("*.quarantine"))) == 1
    finally:
        storage.close()


def test_middle_segment_damage_with_its_index_intact_is_found_and_never_served_after(tmp_path, caplog):
    data_dir = tmp_path / "data"
    stored = _fill(data_dir)
    seg = _segment_file(data_dir, 3)
    lost = _flip_in_batch(seg, 1)
    storage = SegmentStorage(data_dir, PROPS)
    try:
        log = storage.partition("t", 0)
        held = log.read(0, 1 << 20)  # a reader holding views of the old file keeps them valid
        with caplog.at_level(logging.ERROR, logger="kafkawire.storage"):
            report = storage.verify()
        assert report["damaged"] == [str(seg)]
        assert report["segments"] == 38
        _assert_only_lost(log, stored, lost)
        assert b"".join(bytes(c) for c in held.chunks)[: len(stored[0])] == stored[0]
        assert storage.verify()["damaged"] == []  # repaired: a second pass finds nothing
        assert any("quarantined" in r.getMessage() for r in caplog.records)
    finally:
        storage.close()


def test_scrubber_thread_repairs_at_a_bounded_rate(tmp_path):
    data_dir = tmp_path / "data"
    stored = _fill(data_dir)
    lost = _flip_in_batch(_segment_file(data_dir, 20), 2)
    storage = SegmentStorage(data_dir, PROPS)
    slept = []
    try:
        report = storage.verify(sleep=slept.append, bytes_per_sec=1000)
        assert len(report["damaged"]) == 1
        # every byte read is paid for in sleep at the configured rate
        assert sum(slept) == pytest.approx(report["bytes"] / 1000, rel=0.01)
        _assert_only_lost(storage.partition("t", 0), stored, lost)
    finally:
        storage.close()


def test_damage_in_the_first_batch_of_a_segment_and_its_index_is_rebuilt(tmp_path):
    data_dir = tmp_path / "data"
    stored = _fill(data_dir)
    seg = _segment_file(data_dir, 5)
    lost = _flip_in_batch(seg, 0)
    seg.with_suffix(".timeindex").write_bytes(b"garbage")
    storage = SegmentStorage(data_dir, PROPS)
    try:
        _assert_only_lost(storage.partition("t", 0), stored, lost)
    finally:
        storage.close()


def test_segments_beyond_the_open_file_limit_are_served(tmp_path):
    data_dir = tmp_path / "data"
    stored = _fill(data_dir)
    storage = SegmentStorage(data_dir, PROPS, open_segments=4)
    try:
        before = len(os.listdir("/proc/self/fd"))
        log = storage.partition("t", 0)
        for _ in range(2):
            assert _every_batch(log) == {b: parse_batches(v)[0][3] for b, v in stored.items()}
        assert len(segment_mod.open_handles) <= 4
        assert len(os.listdir("/proc/self/fd")) - before <= 8  # file + mapping of at most 4 segments
        log.append(build_batch([b"more"]))
    finally:
        storage.close()


def test_a_segment_deleted_while_the_scrubber_reaches_it_is_skipped(tmp_path):
    data_dir = tmp_path / "data"
    _fill(data_dir, batches=9)
    storage = SegmentStorage(data_dir, PROPS)
    try:
        log = storage.partition("t", 0)
        doomed = log.segments[0]
        os.unlink(doomed.log_path)  # as retention does, between the scrubber's listing and its read
        assert log.verify_segment(doomed) is None
        assert storage.verify()["segments"] == 1  # the other sealed segment is still checked
    finally:
        storage.close()


def test_a_rebuilt_sealed_segment_gets_its_seal_entry_back(tmp_path, caplog):
    data_dir = tmp_path / "data"
    props = {"log.segment.bytes": "200"}  # one batch per segment: no index entries but the seal's
    storage = SegmentStorage(data_dir, props)
    storage.create_topic("t", 1)
    for i in range(4):
        storage.partition("t", 0).append(build_batch([b"v%d-" % i + b"x" * 150]))
    storage.close()
    timeindex = _segment_file(data_dir, 1).with_suffix(".timeindex")
    sealed_entry = timeindex.read_bytes()
    assert len(sealed_entry) == 12
    timeindex.unlink()
    SegmentStorage(data_dir, props).close()
    assert timeindex.read_bytes() == sealed_entry
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kafkawire.storage"):
        SegmentStorage(data_dir, props).close()
    assert not caplog.records


def test_one_read_across_more_segments_than_the_limit_holds_few_descriptors(tmp_path):
    data_dir = tmp_path / "data"
    stored = _fill(data_dir)
    storage = SegmentStorage(data_dir, PROPS, open_segments=6)
    try:
        before = len(os.listdir("/proc/self/fd"))
        result = storage.partition("t", 0).read(0, 1 << 30)  # every segment, held until "sent"
        assert len(os.listdir("/proc/self/fd")) - before <= 6 * 2 + 6 // 2
        assert [b for b, *_ in parse_batches(b"".join(bytes(c) for c in result.chunks))] == sorted(stored)
    finally:
        storage.close()
