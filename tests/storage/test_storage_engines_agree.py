"""Random workloads give identical answers from both engines, across segment-engine restarts."""

from __future__ import annotations

import os
import random
import threading

import pytest
from storage_batches import build_batch, parse_batches

from kafkawire.broker.storage import OffsetOutOfRangeError
from kafkawire.broker.storage.memory import MemoryStorage
from kafkawire.broker.storage.segments import SegmentStorage


def _outcome(fn):
    try:
        return ("ok", fn())
    except OffsetOutOfRangeError as exc:
        return ("out of range", exc.log_start, exc.log_end)


def _read(log, offset, max_bytes, min_one):
    result = log.read(offset, max_bytes, min_one=min_one)
    return (b"".join(bytes(c) for c in result.chunks), result.size, result.high_watermark, result.log_start_offset)


@pytest.mark.parametrize("seed", range(6))
def test_memory_and_segments_agree(tmp_path, seed, monkeypatch):
    # Every append rolls a segment here, and rolls fsync; durability is tested elsewhere.
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    rng = random.Random(seed)
    # segment.bytes so small that every append rolls: a segment is one batch, as in the memory engine,
    # so retention decisions coincide too.
    props = {"log.segment.bytes": "14", "log.index.interval.bytes": str(rng.choice([0, 200, 4096]))}
    memory = MemoryStorage(props)
    disk = SegmentStorage(tmp_path, props)
    try:
        for s in (memory, disk):
            s.create_topic("t", 1, {"retention.ms": "50000", "retention.bytes": "-1"})
        clock = 0
        for step in range(150):
            op = rng.random()
            m, d = memory.partition("t", 0), disk.partition("t", 0)
            if op < 0.45:
                n = rng.randint(1, 6)
                clock += rng.randint(0, 2000)
                timestamps = [clock + rng.randint(-500, 500) for _ in range(n)]
                batch = build_batch(
                    [os.urandom(rng.randint(0, 300)) for _ in range(n)],
                    timestamps=timestamps,
                    gzip_records=rng.random() < 0.3,
                )
                lat = clock if rng.random() < 0.2 else None
                assert m.append(batch, log_append_time=lat) == d.append(batch, log_append_time=lat)
            elif op < 0.75:
                offset = rng.randint(m.log_start_offset - 2, m.log_end_offset + 1)
                max_bytes, min_one = rng.randint(0, 3000), rng.random() < 0.8
                assert _outcome(lambda: _read(m, offset, max_bytes, min_one)) == _outcome(
                    lambda: _read(d, offset, max_bytes, min_one)
                )
            elif op < 0.85:
                ts = clock + rng.randint(-3000, 1000)
                assert m.offset_for_timestamp(ts) == d.offset_for_timestamp(ts)
                assert m.max_timestamp() == d.max_timestamp()
            elif op < 0.9:
                offset = rng.randint(m.log_start_offset, m.log_end_offset + 1)
                assert _outcome(lambda: m.delete_records_before(offset)) == _outcome(
                    lambda: d.delete_records_before(offset)
                )
            elif op < 0.95:
                now = clock + rng.randint(0, 60000)
                memory.enforce_retention(now)
                disk.enforce_retention(now)
            else:
                disk.close()
                disk = SegmentStorage(tmp_path, props)
            m, d = memory.partition("t", 0), disk.partition("t", 0)
            assert (m.log_start_offset, m.log_end_offset, m.size_bytes) == (
                d.log_start_offset,
                d.log_end_offset,
                d.size_bytes,
            ), f"step {step}"
        assert _read(memory.partition("t", 0), memory.partition("t", 0).log_start_offset, 1 << 30, True) == _read(
            disk.partition("t", 0), disk.partition("t", 0).log_start_offset, 1 << 30, True
        )
    finally:
        disk.close()


def test_durable_appends_from_many_threads(tmp_path, monkeypatch):
    storage = SegmentStorage(tmp_path, {"log.segment.bytes": "30000"})
    try:
        storage.create_topic("t", 1)
        log = storage.partition("t", 0)
        fsyncs = []
        real_fsync = os.fsync
        monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd)))
        results, errors = [], []

        def produce(worker):
            try:
                for i in range(25):
                    results.append(log.append(build_batch([b"%d-%d" % (worker, i)] * 3), durable=True))
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=produce, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert sorted(r.base_offset for r in results) == list(range(0, 300, 3))
        assert log.flushed_offset == log.log_end_offset == 300
        assert 1 <= len(fsyncs) <= 100 + 3 * len(log.segments)  # at most one per append, plus rolls
        stored = parse_batches(b"".join(bytes(c) for c in log.read(0, 1 << 30).chunks))
        assert [b[0] for b in stored] == list(range(0, 300, 3))
    finally:
        storage.close()
