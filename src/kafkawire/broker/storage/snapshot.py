"""Producer snapshot files (``<offset>.snapshot``) in Kafka's format, holding a partition's open transactions.

Kafka's ProducerStateManager writes, when a segment rolls and on a clean shutdown, the
producer table as of an offset: int16 version (1), uint32 CRC-32C of everything after
it, then an int32 count and per producer: id int64, epoch int16, last sequence int32,
last offset int64, offset delta int32, timestamp int64, coordinator epoch int32, first
offset of its open transaction int64 (-1 when none). kafkawire's storage keeps, per
partition, only what the log needs from that table (open transactions, for the last
stable offset; its idempotence windows are rebuilt from the log tail by
``broker.producer_state``), so it writes one entry per open transaction, with the
epoch of the producer's batch and the fields it does not track at Kafka's "none"
values (-1, offset delta 0). On start the newest snapshot at or below the log end
is read and the log after it replayed.
"""

from __future__ import annotations

import os
import re
import struct

from crc32c import crc32c

VERSION = 1
SUFFIX = ".snapshot"
_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_NAME = re.compile(r"(\d{20})\.snapshot")


class CorruptSnapshotError(ValueError):
    pass


def path_for(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{SUFFIX}")


def encode(ongoing: dict[int, tuple[int, int]]) -> bytes:
    """``ongoing``: producer id -> (epoch, first offset of its open transaction)."""
    body = _COUNT.pack(len(ongoing)) + b"".join(
        _ENTRY.pack(pid, epoch, -1, first, 0, -1, -1, first) for pid, (epoch, first) in sorted(ongoing.items())
    )
    return _HEAD.pack(VERSION, crc32c(body)) + body


def decode(data: bytes) -> dict[int, tuple[int, int]]:
    """Producer id -> (epoch, first offset) of the entries with an open transaction; CorruptSnapshotError."""
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
    out = {}
    for pid, epoch, _seq, _last, _delta, _ts, _coord, first in _ENTRY.iter_unpack(data[_HEAD.size + _COUNT.size :]):
        if first >= 0:
            out[pid] = (epoch, first)
    return out


def offsets(directory: str) -> list[int]:
    """Offsets of the snapshot files in ``directory``, ascending."""
    found = []
    for name in os.listdir(directory):
        m = _NAME.fullmatch(name)
        if m:
            found.append(int(m.group(1)))
    return sorted(found)


def write(directory: str, offset: int, ongoing: dict[int, tuple[int, int]], *, fsync: bool) -> None:
    """Write atomically (a temporary file renamed over the name)."""
    path = path_for(directory, offset)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(encode(ongoing))
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def delete(directory: str, offset: int) -> None:
    try:
        os.unlink(path_for(directory, offset))
    except FileNotFoundError:
        pass
