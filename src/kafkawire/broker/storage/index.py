"""Sparse per-segment indexes, in Kafka's file formats.

``.index``: 8-byte entries (offset relative to the segment's base offset: i32,
byte position of a batch in the .log: i32). An entry ``(o, p)`` says the batch
starting at ``p`` ends at offset ``o``; one is written every
``index.interval.bytes``, so finding an offset is a binary search here plus a
scan of a few KiB of batch headers.

``.timeindex``: 12-byte entries (timestamp: i64, relative offset: i32), written
at the same moments with the largest timestamp seen so far and the last offset
of the batch that carried it; timestamps strictly increase. A sealed
(non-active) segment's last entry is its largest timestamp.

Entries live in memory as sorted arrays (the lookups bisect them). The files
are written whole, fsynced, when a segment is sealed (rolled) or the storage
closes, and by recovery: an active segment's index is rebuilt from its log on
a start that finds no clean-shutdown marker, so writing it entry by entry would
buy nothing and cost two open files per partition and a syscall per entry.
Indexes are never the only copy of anything.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class IndexCorruptError(Exception):
    pass


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


class _IndexFile:
    """Fixed-size entries in memory, written out whole on request."""

    entry: struct.Struct

    def __init__(self, path: str, base_offset: int):
        self.path, self.base_offset = path, base_offset
        self.dirty = False  # memory has entries the file lacks

    def write(self, *, fsync: bool) -> None:
        """Replace the file with the in-memory entries (atomically: a crash leaves old or new). A file that
        already holds exactly these entries is left alone (only fsynced if asked): a restart that rebuilds
        an index finds it unchanged, and creating thousands of files costs more than reading them."""
        encoded = self._encode_all()
        try:
            with open(self.path, "rb") as f:
                same = f.read(len(encoded) + 1) == encoded
                if same and fsync:
                    os.fsync(f.fileno())
        except FileNotFoundError:
            same = False
        if same:
            self.dirty = False
            return
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            data = memoryview(encoded)
            while data:
                data = data[os.write(fd, data) :]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        self.dirty = False

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def _encode_all(self) -> bytes:  # pragma: no cover - overridden
        raise NotImplementedError


class OffsetIndex(_IndexFile):
    entry = _OFFSET_ENTRY

    def __init__(self, path: str, base_offset: int):
        super().__init__(path, base_offset)
        self.offsets = array("q")  # absolute last offset of the indexed batch
        self.positions = array("q")

    def __len__(self) -> int:
        return len(self.offsets)

    def load(self, log_size: int) -> None:
        """Read the file; IndexCorruptError if it cannot describe a log of ``log_size`` bytes."""
        data = _read_file(self.path)
        if len(data) % self.entry.size:
            raise IndexCorruptError(f"{self.path}: {len(data)} bytes is not a whole number of entries")
        offsets, positions = array("q"), array("q")
        last_off = last_pos = -1
        for rel, pos in self.entry.iter_unpack(data):
            if rel <= last_off - self.base_offset or pos <= last_pos or pos >= log_size or rel < 0:
                raise IndexCorruptError(f"{self.path}: entry ({rel}, {pos}) out of order or past the log")
            last_off, last_pos = self.base_offset + rel, pos
            offsets.append(last_off)
            positions.append(pos)
        self.offsets, self.positions = offsets, positions

    def append(self, last_offset: int, position: int) -> None:
        self.dirty = True
        self.offsets.append(last_offset)
        self.positions.append(position)

    def lookup(self, offset: int) -> int:
        """Position to scan from for ``offset``: the latest indexed batch ending at or before it."""
        i = bisect_right(self.offsets, offset) - 1
        return self.positions[i] if i >= 0 else 0

    def last_position_within(self, end: int) -> int:
        """The largest indexed batch start that is <= ``end`` (0 if none): every batch before it ends by then."""
        i = bisect_right(self.positions, end) - 1
        return self.positions[i] if i >= 0 else 0

    def truncate_from_position(self, position: int) -> None:
        i = bisect_right(self.positions, position - 1)
        del self.offsets[i:], self.positions[i:]

    def reset(self, entries: list[tuple[int, int]]) -> None:
        self.offsets = array("q", (o for o, _ in entries))
        self.positions = array("q", (p for _, p in entries))
        self.dirty = True

    def _encode_all(self) -> bytes:
        return b"".join(self.entry.pack(o - self.base_offset, p) for o, p in zip(self.offsets, self.positions))


class TimeIndex(_IndexFile):
    entry = _TIME_ENTRY

    def __init__(self, path: str, base_offset: int):
        super().__init__(path, base_offset)
        self.timestamps = array("q")
        self.offsets = array("q")

    def __len__(self) -> int:
        return len(self.timestamps)

    def load(self) -> None:
        data = _read_file(self.path)
        if len(data) % self.entry.size:
            raise IndexCorruptError(f"{self.path}: {len(data)} bytes is not a whole number of entries")
        timestamps, offsets = array("q"), array("q")
        for ts, rel in self.entry.iter_unpack(data):
            if rel < 0 or (timestamps and (ts <= timestamps[-1] or self.base_offset + rel < offsets[-1])):
                raise IndexCorruptError(f"{self.path}: entry ({ts}, {rel}) out of order")
            timestamps.append(ts)
            offsets.append(self.base_offset + rel)
        self.timestamps, self.offsets = timestamps, offsets

    @property
    def last(self) -> tuple[int, int] | None:
        return (self.timestamps[-1], self.offsets[-1]) if self.timestamps else None

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if timestamp < 0 or (self.timestamps and timestamp <= self.timestamps[-1]):
            return
        self.dirty = True
        self.timestamps.append(timestamp)
        self.offsets.append(offset)

    def lookup(self, timestamp: int) -> int:
        """Offset to scan from for the first record at or after ``timestamp``.

        The entry taken is the latest whose timestamp is <= ``timestamp``; it was recorded when that
        timestamp first became the maximum, so every earlier batch holds only smaller timestamps.
        """
        i = bisect_right(self.timestamps, timestamp) - 1
        return self.offsets[i] if i >= 0 else self.base_offset

    def truncate_from_offset(self, offset: int) -> None:
        i = bisect_right(self.offsets, offset - 1)
        del self.timestamps[i:], self.offsets[i:]

    def reset(self, entries: list[tuple[int, int]]) -> None:
        self.timestamps = array("q", (t for t, _ in entries))
        self.offsets = array("q", (o for _, o in entries))
        self.dirty = True

    def _encode_all(self) -> bytes:
        return b"".join(self.entry.pack(t, o - self.base_offset) for t, o in zip(self.timestamps, self.offsets))
