"""Crash consistency: whatever a crash leaves at the tail, restart keeps exactly the whole, valid batches
before it, and a killed process loses nothing it acknowledged."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from storage_batches import build_batch, parse_batches

from kafkawire.broker.storage.segments import SegmentStorage

HERE = Path(__file__).resolve().parent
SEGMENT = "t-0/00000000000000000000.log"


def _write_log(data_dir):
    storage = SegmentStorage(data_dir)
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    for i in range(5):
        log.append(build_batch([b"record-%d" % i] * (i + 1)))
    storage.close()
    return (data_dir / SEGMENT).read_bytes()


def _restart(data_dir):
    storage = SegmentStorage(data_dir)
    try:
        log = storage.partition("t", 0)
        return log.log_end_offset, b"".join(bytes(c) for c in log.read(0, 1 << 20).chunks)
    finally:
        storage.close()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("pristine")
    data = _write_log(data_dir)
    bounds, pos = [], 0
    for _base, last, _, batch in parse_batches(data):
        bounds.append((pos, pos + len(batch), last + 1))
        pos += len(batch)
    return data_dir, data, bounds


def _clone(src, dst):
    import shutil

    shutil.copytree(src, dst)
    (dst / ".lock").unlink(missing_ok=True)
    (dst / ".kafka_cleanshutdown").unlink(missing_ok=True)  # a crash leaves no clean-shutdown marker
    return dst


def test_every_cut_inside_the_last_two_batches_recovers_to_a_batch_boundary(pristine, tmp_path):
    data_dir, data, bounds = pristine
    start_of_fourth = bounds[3][0]
    cuts = range(start_of_fourth, len(data) + 1, 7)
    for i, cut in enumerate(cuts):
        d = _clone(data_dir, tmp_path / f"cut{i}")
        with open(d / SEGMENT, "r+b") as f:
            f.truncate(cut)
        kept = max((b for b in bounds if b[1] <= cut), key=lambda b: b[1])
        end, read = _restart(d)
        assert (end, read) == (kept[2], data[: kept[1]]), f"cut at {cut}"
        assert os.path.getsize(d / SEGMENT) == kept[1]


@pytest.mark.parametrize("tail", [b"\x00" * 4096, os.urandom(100), b"\xff" * 61])
def test_garbage_after_the_last_batch_is_cut(pristine, tmp_path, tail):
    data_dir, data, bounds = pristine
    d = _clone(data_dir, tmp_path / "g")
    with open(d / SEGMENT, "ab") as f:
        f.write(tail)  # e.g. zero pages of a file extended but never written before power loss
    assert _restart(d) == (bounds[-1][2], data)


def test_a_batch_from_the_past_at_the_tail_is_cut(pristine, tmp_path):
    data_dir, data, bounds = pristine
    d = _clone(data_dir, tmp_path / "r")
    with open(d / SEGMENT, "ab") as f:
        f.write(data[: bounds[0][1]])  # valid CRC, but offsets going backwards
    assert _restart(d) == (bounds[-1][2], data)


CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, {here!r})
    from kafkawire.broker.storage.segments import SegmentStorage
    from storage_batches import build_batch
    storage = SegmentStorage(sys.argv[1], {{"log.segment.bytes": "4000"}})
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    i = 0
    while True:
        result = log.append(build_batch([b"v%d" % i] * 3), durable=True)
        print(result.last_offset, flush=True)
        i += 1
""")


def test_killed_process_keeps_every_acknowledged_record(tmp_path):
    data_dir = tmp_path / "data"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(here=str(HERE)), str(data_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        acked = -1
        for _ in range(150):
            line = child.stdout.readline()
            assert line, "child died"
            acked = int(line)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    storage = SegmentStorage(data_dir)
    try:
        log = storage.partition("t", 0)
        assert log.log_end_offset > acked
        batches = parse_batches(b"".join(bytes(c) for c in log.read(0, 1 << 30).chunks))
        assert [b[0] for b in batches] == list(range(0, log.log_end_offset, 3))
        assert len(log.segments) > 1
    finally:
        storage.close()


@pytest.mark.parametrize("seed", range(12))
def test_a_flipped_byte_anywhere_in_the_active_segment_costs_only_its_batch(pristine, tmp_path, seed):
    import random

    data_dir, data, bounds = pristine
    rng = random.Random(seed)
    where = rng.randrange(len(data))
    d = _clone(data_dir, tmp_path / "f")
    with open(d / SEGMENT, "r+b") as f:
        f.seek(where)
        f.write(bytes([data[where] ^ (1 << rng.randrange(8))]))
    end, read = _restart(d)
    hit = next(b for b in bounds if b[0] <= where < b[1])
    i = bounds.index(hit)
    if i == len(bounds) - 1:  # the last batch is the tail: cut, as a torn write would be
        assert read == data[: hit[0]]
        assert end == bounds[i - 1][2]
        assert not list(d.glob("t-0/*.quarantine"))
    else:  # set aside; every batch after it is kept byte for byte, at its own offsets
        assert read == data[: hit[0]] + data[hit[1] :]
        assert end == bounds[-1][2]
        [quarantine] = d.glob("t-0/*.quarantine")
        assert (
            quarantine.read_bytes()[: hit[1] - hit[0]]
            == data[hit[0] : where]
            + quarantine.read_bytes()[where - hit[0] : where - hit[0] + 1]
            + data[where + 1 : hit[1]]
        )
        assert quarantine.stat().st_size == hit[1] - hit[0]
        assert quarantine.name.startswith(f"{0:020d}.{hit[0]}.")
        # a second start finds nothing more to repair (the gap is remembered through the quarantine file)
        assert _restart(d) == (end, read)
        assert len(list(d.glob("t-0/*.quarantine"))) == 1
