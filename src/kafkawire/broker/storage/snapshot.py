"""Producer snapshot files (``<offset>.snapshot``) in Kafka's format: every producer's state as of an offset.

Kafka's ProducerStateManager writes, when a segment rolls (named by the new segment's base
offset) and on a clean shutdown (named by the log end), the producer table as of that offset:
int16 version (1), uint32 CRC-32C of everything after it, then an int32 count and per
producer (``Entry``): id int64, epoch int16, last sequence int32, last offset int64, offset
delta int32 (last offset - first offset of its last batch), timestamp int64, coordinator epoch
int32, first offset of its open transaction int64 (-1 when none). Only the last batch of each
producer is kept, so after a restart a retry of that batch is still a duplicate, as in Kafka.

Two readers in kafkawire: the segments engine takes the open transactions from the newest
snapshot (``SegmentPartitionLog.recover_transactions``), and ``broker.producer_state`` the
idempotence state (``ProducerStateManager.ensure_loaded``); each then replays only the log
after the snapshot's offset. The engine asks the broker's producer state for the entries when
it writes one (``Storage.producer_state``); without one (the engine on its own) it writes
the open transactions only, as entries with no batch.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable
from typing import NamedTuple

from kafkawire.protocol.records.crc import crc32c

VERSION = 1
SUFFIX = ".snapshot"
_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_NAME = re.compile(r"(\d{20})\.snapshot")


class CorruptSnapshotError(ValueError):
    pass


class Entry(NamedTuple):
    """One producer of a snapshot (Kafka's ProducerSnapshot.ProducerEntry); -1 where Kafka writes "none"."""

    producer_id: int
    epoch: int
    last_sequence: int = -1
    last_offset: int = -1  # of the producer's last data batch
    offset_delta: int = 0
    timestamp: int = -1
    coordinator_epoch: int = -1
    txn_first_offset: int = -1  # first offset of its open transaction


def path_for(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{SUFFIX}")


def open_transaction_entries(ongoing: dict[int, tuple[int, int]]) -> list[Entry]:
    """``ongoing``: producer id -> (epoch, first offset of its open transaction); entries with no batch."""
    return [Entry(pid, epoch, -1, first, 0, -1, -1, first) for pid, (epoch, first) in sorted(ongoing.items())]


def open_transactions(entries: Iterable[Entry]) -> dict[int, tuple[int, int]]:
    """Producer id -> (epoch, first offset) of the entries with an open transaction."""
    return {e.producer_id: (e.epoch, e.txn_first_offset) for e in entries if e.txn_first_offset >= 0}


def encode_entries(entries: Iterable[Entry]) -> bytes:
    packed = [_ENTRY.pack(*e) for e in entries]
    body = _COUNT.pack(len(packed)) + b"".join(packed)
    return _HEAD.pack(VERSION, crc32c(body)) + body


def decode_entries(data: bytes) -> list[Entry]:
    """Every entry of a snapshot file's bytes; CorruptSnapshotError when it is short, torn or fails its CRC."""
    return [Entry(*fields) for fields in _checked(data)]


def _checked(data: bytes):
    """The entries' fields (tuples) once the bytes are known whole; CorruptSnapshotError."""
    if len(data) < _HEAD.size + _COUNT.size:
        raise CorruptSnapshotError(f"{len(data)} bytes is too short for a producer snapshot")
    version, crc = _HEAD.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshotError(f"producer snapshot version {version}, expected {VERSION}")
    if crc32c(data[_HEAD.size :]) != crc:
        raise CorruptSnapshotError("producer snapshot fails its CRC")
    (count,) = _COUNT.unpack_from(data, _HEAD.size)
    if count < 0 or len(data) != _HEAD.size + _COUNT.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"producer snapshot of {len(data)} bytes declares {count} entries")
    return _ENTRY.iter_unpack(memoryview(data)[_HEAD.size + _COUNT.size :])


def encode(ongoing: dict[int, tuple[int, int]]) -> bytes:
    """A snapshot holding only open transactions (producer id -> (epoch, first offset))."""
    return encode_entries(open_transaction_entries(ongoing))


def decode(data: bytes) -> dict[int, tuple[int, int]]:
    """Producer id -> (epoch, first offset) of the entries with an open transaction; CorruptSnapshotError.
    (Every start reads this of each partition: no Entry is made for the many producers without one.)"""
    return {f[0]: (f[1], f[7]) for f in _checked(data) if f[7] >= 0}


def offsets(directory: str) -> list[int]:
    """Offsets of the snapshot files in ``directory``, ascending."""
    found = []
    for name in os.listdir(directory):
        m = _NAME.fullmatch(name)
        if m:
            found.append(int(m.group(1)))
    return sorted(found)


def read_entries(directory: str, offset: int) -> list[Entry]:
    """The entries of the snapshot at ``offset``; OSError, CorruptSnapshotError."""
    with open(path_for(directory, offset), "rb") as f:
        return decode_entries(f.read())


def write_entries(directory: str, offset: int, entries: Iterable[Entry], *, fsync: bool) -> None:
    """Write atomically (a temporary file renamed over the name): a crash leaves the old file or the new one."""
    path = path_for(directory, offset)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(encode_entries(entries))
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def write(directory: str, offset: int, ongoing: dict[int, tuple[int, int]], *, fsync: bool) -> None:
    """A snapshot of the open transactions only (``ongoing`` as for ``encode``)."""
    write_entries(directory, offset, open_transaction_entries(ongoing), fsync=fsync)


def delete(directory: str, offset: int) -> None:
    try:
        os.unlink(path_for(directory, offset))
    except FileNotFoundError:
        pass
