"""Disk errors while appending: LogDirError (KAFKA_STORAGE_ERROR), the log dir offline for writes (an I/O error
until a restart, a full disk until there is room again), a process's file limit offline for nothing; reads go on."""

from __future__ import annotations

import errno
import os

import pytest
from storage_batches import build_batch, parse_batches

from kafkawire.broker.handlers._common import storage_error_code
from kafkawire.broker.storage import segments as segments_mod
from kafkawire.broker.storage.segment import LogDirError
from kafkawire.broker.storage.segments import SegmentStorage
from kafkawire.protocol import errors


@pytest.fixture
def storage(tmp_path):
    s = SegmentStorage(tmp_path / "data")
    s.create_topic("t", 2)
    s.partition("t", 0).append(build_batch([b"kept"]))
    yield s
    s.close()


def _failing_pwritev(code):
    def pwritev(fd, bufs, pos):
        raise OSError(code, os.strerror(code))

    return pwritev


def test_an_io_error_takes_the_log_dir_offline_until_a_restart(storage, monkeypatch, tmp_path):
    real = os.pwritev
    monkeypatch.setattr(os, "pwritev", _failing_pwritev(errno.EIO))
    with pytest.raises(LogDirError) as info:
        storage.partition("t", 0).append(build_batch([b"lost"]))
    assert storage_error_code(info.value) == errors.KAFKA_STORAGE_ERROR
    monkeypatch.setattr(os, "pwritev", real)
    with pytest.raises(LogDirError, match="offline"):  # the other partition too: the directory is offline
        storage.partition("t", 1).append(build_batch([b"refused"]))
    assert storage.log_dir_failure() is not None
    [(base, _, _, _)] = parse_batches(b"".join(bytes(c) for c in storage.partition("t", 0).read(0, 1 << 20).chunks))
    assert base == 0  # reads go on
    storage.close()
    again = SegmentStorage(tmp_path / "data")
    try:
        assert again.log_dir_failure() is None
        assert again.partition("t", 1).append(build_batch([b"after restart"])).base_offset == 0
    finally:
        again.close()


def test_a_full_disk_comes_back_when_statvfs_shows_room(storage, monkeypatch):
    real = os.pwritev
    monkeypatch.setattr(os, "pwritev", _failing_pwritev(errno.ENOSPC))
    with pytest.raises(LogDirError):
        storage.partition("t", 0).append(build_batch([b"lost"]))
    monkeypatch.setattr(os, "pwritev", real)
    monkeypatch.setattr(segments_mod.LogDirState, "free_bytes", lambda self: 1000)
    with pytest.raises(LogDirError, match="offline"):
        storage.partition("t", 0).append(build_batch([b"still no room"]))
    assert storage.log_dir_failure() is not None
    monkeypatch.setattr(segments_mod.LogDirState, "free_bytes", lambda self: 64 << 20)
    assert storage.partition("t", 0).append(build_batch([b"room again"])).base_offset == 1
    assert storage.log_dir_failure() is None


def test_too_many_open_files_fails_the_write_but_takes_nothing_offline(storage, monkeypatch):
    real = os.pwritev
    monkeypatch.setattr(os, "pwritev", _failing_pwritev(errno.EMFILE))
    with pytest.raises(LogDirError) as info:
        storage.partition("t", 0).append(build_batch([b"lost"]))
    assert storage_error_code(info.value) == errors.KAFKA_STORAGE_ERROR
    monkeypatch.setattr(os, "pwritev", real)
    assert storage.log_dir_failure() is None
    assert storage.partition("t", 0).append(build_batch([b"next"])).base_offset == 1


def test_a_failed_fsync_is_not_acknowledged(storage, monkeypatch):
    def fsync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(LogDirError):
        storage.partition("t", 1).append(build_batch([b"unsure"]), durable=True)
    assert storage.log_dir_failure() is not None
