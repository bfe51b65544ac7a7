"""Transactions in storage, on every engine: markers end transactions, the last stable offset, read_committed
reads and their aborted transactions, and (segments) the .txnindex files, producer snapshots and restarts."""

from __future__ import annotations

import os
import struct
import time

import pytest
from storage_batches import build_batch, parse_batches
from test_storage_contract import make_storage, storage  # noqa: F401  (fixtures: one per engine)

from kafkawire.broker.storage import base
from kafkawire.broker.storage.segments import SegmentStorage
from kafkawire.broker.storage.txn import AbortedTxn


def now_ms():
    return int(time.time() * 1000)


def txn_batch(pid, values, seq=0, epoch=0):
    # stamped now, as the markers are: older timestamps would roll a segment (segment.ms counts record time)
    return build_batch(
        values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True, base_timestamp=now_ms()
    )


def plain(values):
    return build_batch(values, base_timestamp=now_ms())


def offsets_of(result):
    data = b"".join(c.tobytes() if isinstance(c, base.FileRegion) else bytes(c) for c in result.chunks)
    return [(b, last) for b, last, _, _ in parse_batches(data)]


def test_open_transaction_holds_the_last_stable_offset(storage):
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    log.append(plain([b"plain"]))  # offset 0
    assert log.last_stable_offset == 1
    log.append(txn_batch(7, [b"a", b"b"]))  # 1-2
    log.append(plain([b"plain"]))  # 3
    assert (log.high_watermark, log.last_stable_offset) == (4, 1)
    assert log.open_transactions() == {7: 1}
    assert log.read(0, 1 << 20).last_stable_offset == 1
    log.append(txn_batch(7, [b"c"], seq=2))  # 4: same transaction, its first offset stays
    assert log.open_transactions() == {7: 1}
    assert storage.append_txn_marker("t", 0, 7, 0, True, 0) == 5
    assert (log.last_stable_offset, log.open_transactions()) == (6, {})


def test_read_committed_stops_at_the_last_stable_offset(storage):
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    log.append(plain([b"x"]))  # 0
    log.append(txn_batch(7, [b"a"]))  # 1
    log.append(plain([b"y"]))  # 2
    result = log.read_committed(0, 1 << 20)
    assert offsets_of(result) == [(0, 0)]
    assert (result.high_watermark, result.last_stable_offset, result.aborted) == (3, 1, [])
    past = log.read_committed(1, 1 << 20)
    assert (offsets_of(past), past.aborted) == ([], [])
    assert offsets_of(log.read(0, 1 << 20)) == [(0, 0), (1, 1), (2, 2)]  # read_uncommitted sees all
    assert log.read(0, 1 << 20).aborted is None
    storage.append_txn_marker("t", 0, 7, 0, True, 0)  # 3
    assert offsets_of(log.read_committed(0, 1 << 20)) == [(0, 0), (1, 1), (2, 2), (3, 3)]
    with pytest.raises(base.OffsetOutOfRangeError):
        log.read_committed(5, 100)


def test_aborted_transactions_as_kafka_collects_them(storage):
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    log.append(txn_batch(1, [b"a", b"b"]))  # 0-1: producer 1
    log.append(txn_batch(2, [b"c"]))  # 2: producer 2
    assert storage.append_txn_marker("t", 0, 1, 0, False, 5) == 3  # abort 1 while 2 is open: LSO 2
    log.append(txn_batch(1, [b"d"], epoch=1))  # 4: producer 1 again (new epoch)
    assert storage.append_txn_marker("t", 0, 2, 0, True, 5) == 5  # commit 2
    assert log.last_stable_offset == 4
    assert storage.append_txn_marker("t", 0, 1, 1, False, 5) == 6  # abort 1 again: nothing else open
    assert storage.append_txn_marker("t", 0, 9, 0, False, 5) == 7  # abort with no open transaction
    assert log.last_stable_offset == 8
    first = AbortedTxn(1, 0, 3, 2)
    second = AbortedTxn(1, 4, 6, 7)
    empty = AbortedTxn(9, 7, 7, 8)
    whole = log.read_committed(0, 1 << 20)
    assert offsets_of(whole) == [(0, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6), (7, 7)]
    assert whole.aborted == [first, second, empty]
    assert log.read_committed(4, 1 << 20).aborted == [second, empty]  # the first ended before offset 4
    assert log.read_committed(7, 1 << 20).aborted == [empty]


def test_aborted_transactions_go_with_retention(storage):
    storage.create_topic("t", 1, {"retention.ms": "1000"})
    log = storage.partition("t", 0)
    log.append(
        build_batch([b"a"], base_timestamp=1000, producer_id=1, producer_epoch=0, base_sequence=0, transactional=True)
    )
    storage.append_txn_marker("t", 0, 1, 0, False, 0, timestamp=1000)
    if isinstance(storage, SegmentStorage):
        log.roll()  # (in memory each batch plays a segment's part)
    log.append(build_batch([b"later"], base_timestamp=10_000_000))
    storage.enforce_retention(5_000_000)
    assert log.log_start_offset == 2
    assert log.read_committed(2, 1 << 20).aborted == []
    assert log._txn.aborted == []  # forgotten with the segment that held its marker


# ------------------------------------------------------------------ segments: files and restarts


def _segment_storage(tmp_path):
    return SegmentStorage(tmp_path / "data")


def test_txnindex_file_holds_kafkas_aborted_txn_entries(tmp_path):
    storage = _segment_storage(tmp_path)
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    log.append(txn_batch(0x0102030405060708, [b"a", b"b"]))  # 0-1
    log.append(txn_batch(42, [b"c"]))  # 2
    storage.append_txn_marker("t", 0, 0x0102030405060708, 0, False, 3)  # 3
    storage.append_txn_marker("t", 0, 42, 0, True, 3)  # 4: commits are not indexed
    path = os.path.join(str(tmp_path / "data"), "t-0", "00000000000000000000.txnindex")
    with open(path, "rb") as f:
        data = f.read()
    # AbortedTxn v0: version int16, producer id, first offset, last offset, last stable offset (int64s)
    assert data == bytes.fromhex("00000102030405060708000000000000000000000000000000030000000000000002")
    assert data == struct.pack(">hqqqq", 0, 0x0102030405060708, 0, 3, 2)
    storage.close()


def test_restart_mid_transaction_keeps_it_open(tmp_path):
    storage = _segment_storage(tmp_path)
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    log.append(txn_batch(1, [b"a"]))  # 0
    storage.append_txn_marker("t", 0, 1, 0, False, 0)  # 1
    log.append(txn_batch(2, [b"b"]))  # 2: open across the restart
    log.append(plain([b"plain"]))  # 3
    storage.close()
    storage = _segment_storage(tmp_path)
    log = storage.partition("t", 0)
    assert (log.high_watermark, log.last_stable_offset, log.open_transactions()) == (4, 2, {2: 2})
    assert log.read_committed(0, 1 << 20).aborted == [AbortedTxn(1, 0, 1, 2)]
    assert storage.append_txn_marker("t", 0, 2, 0, False, 0) == 4  # the coordinator aborts it after the restart
    assert log.last_stable_offset == 5
    assert log.read_committed(0, 1 << 20).aborted == [AbortedTxn(1, 0, 1, 2), AbortedTxn(2, 2, 4, 5)]
    storage.close()


def test_crash_mid_transaction_replays_from_the_roll_snapshot(tmp_path):
    """No clean close: the open transaction (begun in a sealed segment) and the aborted one after the roll
    come back from the snapshot written at the roll, the .txnindex of the sealed segment and a replay."""
    storage = _segment_storage(tmp_path)
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    log.append(txn_batch(1, [b"a"]))  # 0: open across the roll and the crash
    log.append(txn_batch(3, [b"x"]))  # 1
    storage.append_txn_marker("t", 0, 3, 0, False, 0)  # 2: aborted in the sealed segment
    log.roll()
    log.append(txn_batch(2, [b"b"]))  # 3
    storage.append_txn_marker("t", 0, 2, 0, False, 0)  # 4: aborted in the active segment
    directory = os.path.join(str(tmp_path / "data"), "t-0")
    assert sorted(n for n in os.listdir(directory) if n.endswith(".snapshot")) == ["00000000000000000003.snapshot"]
    # crash: drop the storage without closing (release the directory lock only), and lose the active
    # segment's .txnindex as if its page never reached the disk
    storage._release()
    os.unlink(os.path.join(directory, "00000000000000000003.txnindex"))
    storage = _segment_storage(tmp_path)
    log = storage.partition("t", 0)
    assert (log.last_stable_offset, log.open_transactions()) == (0, {1: 0})
    log.append(plain([b"c"]))  # 5
    storage.append_txn_marker("t", 0, 1, 0, False, 0)  # 6
    result = log.read_committed(0, 1 << 20)
    assert result.last_stable_offset == 7
    assert result.aborted == [AbortedTxn(3, 1, 2, 0), AbortedTxn(2, 3, 4, 0), AbortedTxn(1, 0, 6, 7)]
    with open(os.path.join(directory, "00000000000000000003.txnindex"), "rb") as f:
        assert f.read() == b"".join(a.encode() for a in result.aborted[1:])  # rebuilt, then appended to
    storage.close()


def test_snapshot_past_the_log_end_is_dropped(tmp_path):
    """A snapshot beyond the recovered log end (a torn tail cut off) is deleted, not trusted."""
    storage = _segment_storage(tmp_path)
    storage.create_topic("t", 1)
    storage.partition("t", 0).append(txn_batch(1, [b"a"]))
    storage.close()
    directory = os.path.join(str(tmp_path / "data"), "t-0")
    from kafkawire.broker.storage import snapshot

    assert snapshot.offsets(directory) == [1]
    snapshot.write(directory, 50, {}, fsync=False)
    storage = _segment_storage(tmp_path)
    assert storage.partition("t", 0).open_transactions() == {1: 0}
    assert snapshot.offsets(directory) == [1]
    storage.close()


def test_producer_snapshot_bytes_are_kafkas(tmp_path):
    from kafkawire.broker.storage import snapshot

    data = snapshot.encode({5: (2, 100)})
    # version 1, CRC-32C of the rest, one entry: id, epoch, last seq, last offset, offset delta, timestamp,
    # coordinator epoch, current transaction first offset
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 5, 2, -1, 100, 0, -1, -1, 100)
    from crc32c import crc32c

    assert data == struct.pack(">hI", 1, crc32c(body)) + body
    assert snapshot.decode(data) == {5: (2, 100)}
    with pytest.raises(snapshot.CorruptSnapshotError):
        snapshot.decode(data[:-1] + b"\x00")


def test_check_and_logs_read_the_transaction_files(tmp_path, capsys):
    """``kafkawire check`` passes a data directory with control batches, .txnindex and .snapshot files, and
    ``kafkawire logs`` (its own decoder of Kafka's formats) reads them back as written."""
    from kafkawire.cli.main import main

    storage = _segment_storage(tmp_path)
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    log.append(txn_batch(1, [b"a"]))  # 0
    storage.append_txn_marker("t", 0, 1, 0, False, 4)  # 1
    log.roll()
    log.append(txn_batch(2, [b"b"]))  # 2: open at the clean close
    storage.close()
    data_dir = str(tmp_path / "data")
    assert main(["check", data_dir]) == 0, capsys.readouterr().out
    capsys.readouterr()
    directory = os.path.join(data_dir, "t-0")
    assert main(["logs", "--dump", os.path.join(directory, "00000000000000000000.txnindex")]) == 0
    assert "aborted: producer 1 offsets 0..1, last stable offset 2" in capsys.readouterr().out
    assert main(["logs", "--dump", os.path.join(directory, "00000000000000000003.snapshot")]) == 0
    out = capsys.readouterr().out
    assert "crc 0x" in out and " ok, 1 producers" in out and "producer_id 2, epoch 0" in out
    assert "current_txn_first_offset 2" in out
    assert main(["logs", "--dump", os.path.join(directory, "00000000000000000000.log")]) == 0
    assert "control ABORT coordinator epoch 4" in capsys.readouterr().out


def test_last_stable_offset_never_below_the_log_start(storage):
    """As Kafka: DeleteRecords past an open transaction's first records moves the LSO up to the log start."""
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    log.append(txn_batch(1, [b"a"]))  # 0: open
    log.append(plain([b"b"]))  # 1
    log.append(plain([b"c"]))  # 2
    assert log.last_stable_offset == 0
    log.delete_records_before(2)
    assert (log.log_start_offset, log.last_stable_offset) == (2, 2)
    assert offsets_of(log.read_committed(2, 1 << 20)) == []  # the transaction still holds what follows it
