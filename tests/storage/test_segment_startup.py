"""A restart reads what it must and rewrites nothing that is unchanged (creating thousands of index files was
most of the start-up time of a broker with many partitions)."""

from __future__ import annotations

import os

from storage_batches import build_batch

from kafkawire.broker.storage.segments import SegmentStorage


def test_a_clean_restart_leaves_unchanged_index_files_alone(tmp_path):
    data_dir = tmp_path / "data"
    storage = SegmentStorage(data_dir, {"log.index.interval.bytes": "50"})
    storage.create_topic("t", 3)
    for p in range(3):
        for i in range(20):
            storage.partition("t", p).append(build_batch([b"value-%d" % i]))
    storage.close()
    indexes = sorted((data_dir).glob("t-*/*index"))
    assert len(indexes) == 6 and all(i.stat().st_size for i in indexes)
    before = {i: os.stat(i).st_ino for i in indexes}
    storage = SegmentStorage(data_dir, {"log.index.interval.bytes": "50"})
    try:
        assert {i: os.stat(i).st_ino for i in indexes} == before  # not replaced
        assert storage.partition("t", 2).read(7, 1).size > 0
    finally:
        storage.close()


def test_an_index_that_differs_is_still_rewritten(tmp_path):
    data_dir = tmp_path / "data"
    storage = SegmentStorage(data_dir, {"log.index.interval.bytes": "50"})
    storage.create_topic("t", 1)
    for i in range(20):
        storage.partition("t", 0).append(build_batch([b"value-%d" % i]))
    storage.close()
    index = data_dir / "t-0" / f"{0:020d}.index"
    good = index.read_bytes()
    index.write_bytes(good[:-8])  # an entry short
    # a start after a crash (no clean-shutdown marker) rebuilds the active segment's index; after a clean stop
    # the sparse index is taken as it is, as Kafka does, and an entry short only means a longer walk
    os.unlink(data_dir / ".kafka_cleanshutdown")
    SegmentStorage(data_dir, {"log.index.interval.bytes": "50"}).close()
    assert index.read_bytes() == good


def test_a_start_rewrites_the_log_start_offsets_only_when_they_changed(tmp_path):
    data_dir = tmp_path / "data"
    checkpoint = data_dir / "log-start-offset-checkpoint"
    SegmentStorage(data_dir, {}).close()
    assert checkpoint.read_bytes() == b""  # created empty on a new directory, as Kafka's log manager creates it
    storage = SegmentStorage(data_dir, {})
    storage.create_topic("t", 2)
    storage.partition("t", 1).append(build_batch([b"a", b"b", b"c"]))
    storage.partition("t", 1).delete_records_before(2)
    storage.close()
    assert checkpoint.read_text() == "0\n1\nt 1 2\n"
    inode = os.stat(checkpoint).st_ino
    storage = SegmentStorage(data_dir, {})
    try:
        assert os.stat(checkpoint).st_ino == inode  # the same entries: not written again (two fsyncs a start)
        assert storage.partition("t", 1).log_start_offset == 2
    finally:
        storage.close()
    checkpoint.write_text("0\n2\nt 1 2\ngone 0 5\n")  # a topic no longer there: its entry is dropped at start
    SegmentStorage(data_dir, {}).close()
    assert checkpoint.read_text() == "0\n1\nt 1 2\n"
