"""One log segment: ``<base offset:020d>.log`` with its ``.index`` and ``.timeindex``.

The .log holds v2 batches back to back, byte for byte as Kafka stores them.
Only the owning partition log writes to a segment, and only to its tail;
``size`` counts the bytes that are committed (visible to readers), so a reader
never sees a half-written batch even while the next write is in progress.

Readers get memoryviews of a read-only ``mmap`` of the file, remapped when the
committed size outgrows the mapping; an old mapping stays valid for as long as
someone holds a view of it (also after the segment is deleted: the data is
unlinked, not unmapped, under them).
"""
from __future__ import annotations

import mmap
import os
import threading
from typing import Iterable

from . import _batch
from .base import FileRegion, StorageError
from .index import OffsetIndex, TimeIndex

_IOV_MAX = 1024  # Linux's limit on buffers per writev
# A writer thread and a reader may both be first to touch a segment's file; exactly one must open it.
_open_lock = threading.Lock()


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class SegmentFile:
    """The open .log file. Shared with FileRegions: it is closed when the segment is closed
    or, after a deletion, when the last region using it is gone."""

    def __init__(self, path: str):
        self._fd = os.open(path, os.O_RDWR)

    def fileno(self) -> int:
        if self._fd < 0:
            raise ValueError("segment file is closed")
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __del__(self):
        self.close()


class LogSegment:
    def __init__(self, directory: str, base_offset: int, *, created_ms: int):
        self.directory, self.base_offset = directory, base_offset
        stem = os.path.join(directory, segment_name(base_offset))
        self.log_path = stem + ".log"
        self.offset_index = OffsetIndex(stem + ".index", base_offset)
        self.time_index = TimeIndex(stem + ".timeindex", base_offset)
        self.size = 0  # committed bytes
        self.next_offset = base_offset  # offset after the last committed batch
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1  # last offset of the batch that carried max_timestamp
        self.first_batch_timestamp = -1  # segment.ms counts from here (as Kafka's rolling-based timestamp)
        self.created_ms = created_ms
        self._bytes_since_index_entry = 0
        self._file: SegmentFile | None = None  # FileRegions hold it, so it outlives deletion
        self._map: mmap.mmap | None = None
        self._map_len = 0

    # --------------------------------------------------------------- files

    @property
    def file(self):
        file = self._file
        if file is None:
            with _open_lock:
                if self._file is None:
                    self._file = SegmentFile(self.log_path)
                file = self._file
        return file

    def create(self) -> None:
        # Nothing can live at this base offset yet (it is the log end); a file there is the
        # leftover of a roll that failed half-way, so it is emptied rather than refused.
        fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        os.close(fd)
        self.write_indexes(fsync=False)

    def file_size(self) -> int:
        return os.path.getsize(self.log_path)  # without opening: sealed segments stay closed until read

    def buffer(self) -> mmap.mmap | memoryview:
        """The committed bytes, mapped; valid while the returned object is referenced."""
        if self.size == 0:
            return memoryview(b"")
        if self._map is None or self._map_len < self.size:
            self._map = mmap.mmap(self.file.fileno(), self.size, access=mmap.ACCESS_READ)
            self._map_len = self.size
        return self._map

    def view(self, position: int, length: int) -> memoryview:
        return memoryview(self.buffer())[position:position + length]

    def region(self, position: int, length: int) -> FileRegion:
        return FileRegion(self.file, position, length)

    # -------------------------------------------------------------- writes

    def write(self, buffers: list, total: int) -> None:
        """Write ``buffers`` after the committed bytes, not yet visible to readers.

        On failure (disk full...) the file is cut back to its committed size so
        the next append does not land after garbage.
        """
        fd = self.file.fileno()
        position, end = self.size, self.size + total
        try:
            pending = [memoryview(b).cast("B") for b in buffers]
            first = 0  # pending[:first] are fully written
            while first < len(pending):
                written = os.pwritev(fd, pending[first:first + _IOV_MAX], position)
                if written <= 0:
                    raise OSError("pwritev wrote nothing")
                position += written
                while first < len(pending) and written >= len(pending[first]):
                    written -= len(pending[first])
                    first += 1
                if written:  # a short write stopped inside this buffer
                    pending[first] = pending[first][written:]
            if position != end:
                raise OSError(f"wrote {position - self.size} of {total} bytes")
        except OSError as exc:
            try:
                os.ftruncate(fd, self.size)
            except OSError:
                pass
            raise StorageError(f"append to {self.log_path} failed: {exc}") from exc

    def commit(self, infos: Iterable[_batch.BatchInfo], index_interval_bytes: int) -> None:
        """Make written batches visible and index them (as Kafka does: an entry once more than
        ``index_interval_bytes`` were appended since the previous one)."""
        for info in infos:
            if info.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = info.max_timestamp, info.last_offset
            if self.first_batch_timestamp < 0 and self.size == 0 and info.position == 0:
                self.first_batch_timestamp = info.max_timestamp
            if self._bytes_since_index_entry > index_interval_bytes:
                self.offset_index.append(info.last_offset, info.position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self._bytes_since_index_entry = 0
            self._bytes_since_index_entry += info.size
            self.next_offset = info.last_offset + 1
        self.size = info.position + info.size

    def rebuild_from(self, infos: list[_batch.BatchInfo], index_interval_bytes: int) -> None:
        """Reset the in-memory state and both indexes from a scan of the whole log."""
        self.size = 0
        self.next_offset = self.base_offset
        self.max_timestamp = self.offset_of_max_timestamp = self.first_batch_timestamp = -1
        self._bytes_since_index_entry = 0
        offsets, times = [], []
        max_ts, max_off, since = -1, -1, 0
        for info in infos:
            if info.max_timestamp > max_ts:
                max_ts, max_off = info.max_timestamp, info.last_offset
            if since > index_interval_bytes:
                offsets.append((info.last_offset, info.position))
                if max_ts >= 0 and (not times or max_ts > times[-1][0]):
                    times.append((max_ts, max_off))
                since = 0
            since += info.size
        self.offset_index.reset(offsets)
        self.time_index.reset(times)
        self.write_indexes(fsync=False)
        if infos:
            last = infos[-1]
            self.size, self.next_offset = last.position + last.size, last.last_offset + 1
            self.max_timestamp, self.offset_of_max_timestamp = max_ts, max_off
            self.first_batch_timestamp = infos[0].max_timestamp
        self._bytes_since_index_entry = since

    def truncate(self, size: int) -> None:
        """Cut the .log to ``size`` bytes (recovery only: nobody reads the segment yet)."""
        self._map, self._map_len = None, 0
        os.ftruncate(self.file.fileno(), size)
        os.fsync(self.file.fileno())

    def seal(self) -> None:
        """The segment stops being active: record its max timestamp as the last time index entry
        (so a restart knows it without a scan) and make log and indexes durable."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.fsync_log()
        self.write_indexes(fsync=True)

    def write_indexes(self, *, fsync: bool) -> None:
        for index in (self.offset_index, self.time_index):
            if index.dirty or not os.path.exists(index.path):
                index.write(fsync=fsync)

    def fsync_log(self) -> None:
        os.fsync(self.file.fileno())

    # --------------------------------------------------------------- reads

    def locate(self, offset: int) -> int | None:
        """Position of the batch containing ``offset``; None if it is past this segment."""
        if offset >= self.next_offset:
            return None
        return _batch.find_batch(self.buffer(), self.offset_index.lookup(offset), self.size, offset)

    def extent(self, position: int, budget: int, take_first: bool) -> int:
        """End position of the whole batches from ``position`` that fit in ``budget`` bytes (at least
        the first one when ``take_first``). Jumps via the index so only a few KiB of headers are read."""
        limit = position + budget
        if limit >= self.size:
            return self.size
        buf = self.buffer()
        end = _batch.whole_batches_end(buf, max(position, self.offset_index.last_position_within(limit)),
                                       self.size, limit)
        if end == position and take_first:
            return position + _batch.read_info(buf, position).size
        return end

    def batch_at(self, position: int) -> memoryview:
        buf = self.buffer()
        info = _batch.read_info(buf, position)
        return memoryview(buf)[position:position + info.size]

    def find_by_timestamp(self, timestamp_ms: int, min_offset: int) -> tuple[int, int] | None:
        from .topics import first_record_in

        start = max(self.time_index.lookup(timestamp_ms), min_offset)
        view = memoryview(self.buffer())
        infos = _batch.iter_infos(view, self.offset_index.lookup(start), self.size)
        return first_record_in(((view[i.position:i.position + i.size], i) for i in infos), timestamp_ms, min_offset)

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                pass  # a reader still holds a view; the mapping goes when it lets go
            self._map = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def delete(self) -> None:
        """Unlink the files. Open views and FileRegions keep working until released."""
        self.offset_index.delete()
        self.time_index.delete()
        self._map = None  # dropped, not closed: views may still use it
        self._file = None  # same for the file held by FileRegions
        try:
            os.unlink(self.log_path)
        except FileNotFoundError:
            pass
