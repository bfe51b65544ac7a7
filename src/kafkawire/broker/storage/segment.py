"""One log segment: ``<base offset:020d>.log`` with its ``.index`` and ``.timeindex``.

The .log holds v2 batches back to back, byte for byte as Kafka stores them.
Only the owning partition log writes to a segment, and only to its tail;
``size`` counts the bytes that are committed (visible to readers), so a reader
never sees a half-written batch even while the next write is in progress.

Readers get memoryviews of a read-only ``mmap`` of the file, remapped when the
committed size outgrows the mapping; an old mapping stays valid for as long as
someone holds a view of it (also after the segment is deleted: the data is
unlinked, not unmapped, under them).

Open files are bounded: every segment holding an open file or a mapping is in
one process-wide LRU (``open_handles``), and opening one more past its limit
drops the handles of the least recently used segment. Dropping only forgets
the references; a reader's view or a FileRegion still using them keeps them
until it is done (CPython closes them when the last user lets go), and the
segment reopens its file on the next access. ``set_open_limit`` sizes the LRU
from RLIMIT_NOFILE (two descriptors per segment, the file and the mapping, and
room for the mappings reads still hold).
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable

from kafkawire.protocol import errors

from . import _batch
from .base import FileRegion, StorageError
from .index import OffsetIndex, TimeIndex

_IOV_MAX = 1024  # Linux's limit on buffers per writev
# A writer thread and a reader may both be first to touch a segment's file; exactly one must open it.
_open_lock = threading.Lock()
log = logging.getLogger("kafkawire.storage")


class LogDirError(StorageError):
    """The disk failed an operation (no space, I/O error, too many open files...): Kafka's
    KAFKA_STORAGE_ERROR. ``errno`` is the OS error number (None if unknown)."""

    error_code = errors.KAFKA_STORAGE_ERROR
    log_dir_failure = True

    def __init__(self, message: str, errno_: int | None = None):
        super().__init__(message)
        self.errno = errno_

    @classmethod
    def wrap(cls, what: str, exc: OSError) -> LogDirError:
        return cls(f"{what}: {exc}", exc.errno)

    @property
    def out_of_space(self) -> bool:
        return self.errno in (errno.ENOSPC, errno.EDQUOT)


class _OpenHandles:
    """LRU of the segments that hold an open file or mapping (see the module docstring)."""

    def __init__(self, limit: int):
        self.limit = limit
        self._lock = threading.Lock()
        self._open: OrderedDict[int, LogSegment] = OrderedDict()

    def touch(self, segment: LogSegment) -> None:
        key = id(segment)
        with self._lock:
            if key in self._open:
                self._open.move_to_end(key)
                return
            self._open[key] = segment
            victims = []
            while len(self._open) > self.limit:
                _, victim = self._open.popitem(last=False)
                victims.append(victim)
        for victim in victims:
            victim._drop_handles()

    @property
    def crowded(self) -> bool:
        """Past half the limit, reads copy instead of handing out views (a view keeps its mapping, and
        its descriptor, alive after the LRU lets go of it): at most limit / 2 such mappings exist."""
        return len(self._open) >= self.limit // 2

    def shed(self) -> None:
        """Drop the handles of the older half (the process ran out of descriptors anyway)."""
        with self._lock:
            victims = [self._open.popitem(last=False)[1] for _ in range(len(self._open) // 2)]
        for victim in victims:
            victim._drop_handles()

    def forget(self, segment: LogSegment) -> None:
        with self._lock:
            self._open.pop(id(segment), None)

    def __len__(self) -> int:
        return len(self._open)


def default_open_limit() -> int:
    """Segments that may hold handles at once: half of what RLIMIT_NOFILE leaves after a reserve (a quarter
    of the limit, at least a third of a small one) for sockets and other files, and below vm.max_map_count
    (one mapping per segment)."""
    soft = 1024
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft == resource.RLIM_INFINITY:
            soft = 1 << 20
    except (ImportError, OSError, ValueError):
        pass
    maps = 65530
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            maps = int(f.read())
    except (OSError, ValueError):
        pass
    reserve = max(soft // 4, min(256, soft // 3))  # sockets, indexes being written, the rest of the process
    # each segment in the LRU holds up to two descriptors, and reads' views may keep up to half as many
    # mappings alive after eviction (see ``crowded``): 2.5 descriptors per segment
    return max(8, min((soft - reserve) * 2 // 5, maps // 2))


open_handles = _OpenHandles(default_open_limit())


def set_open_limit(limit: int | None = None) -> int:
    """Resize the LRU (``None``: from the current RLIMIT_NOFILE); returns the new limit."""
    open_handles.limit = max(2, limit if limit is not None else default_open_limit())
    return open_handles.limit


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class SegmentFile:
    """The open .log file. Shared with FileRegions: it is closed when the segment is closed
    or, after a deletion, when the last region using it is gone."""

    def __init__(self, path: str):
        self._fd = -1
        self._fd = os.open(path, os.O_RDWR)

    def fileno(self) -> int:
        if self._fd < 0:
            raise ValueError("segment file is closed")
        return self._fd

    def close(self, _close=os.close) -> None:
        # os.close bound at definition: __del__ may run at interpreter exit, after module globals are gone
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            _close(fd)

    def __del__(self):
        self.close()


class LogSegment:
    def __init__(self, directory: str, base_offset: int, *, created_ms: int):
        self.directory, self.base_offset = directory, base_offset
        stem = os.path.join(directory, segment_name(base_offset))
        self.log_path = stem + ".log"
        self.txn_index_path = stem + ".txnindex"  # aborted transactions whose marker is here (storage.txn)
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
    def file(self) -> SegmentFile:
        """The open .log (opened on first use). Callers keep the returned object while they use its
        descriptor: the LRU may drop the segment's own reference at any moment."""
        file = self._file
        if file is None:
            with _open_lock:
                file = self._file
                if file is None:
                    try:
                        file = SegmentFile(self.log_path)
                    except OSError as exc:
                        if exc.errno not in (errno.EMFILE, errno.ENFILE):
                            raise
                        open_handles.shed()  # other users held more than the limit allowed for: retry once
                        file = SegmentFile(self.log_path)
                    self._file = file
        open_handles.touch(self)
        return file

    def _drop_handles(self) -> None:
        """Forget the open file and mapping (evicted from the LRU); users of them keep them alive."""
        self._map, self._map_len = None, 0
        self._file = None

    def replace_file(self, path: str) -> None:
        """Put ``path`` in place of the .log (a repair). Views of the old file stay valid."""
        self._drop_handles()
        open_handles.forget(self)
        os.replace(path, self.log_path)
        from .metadata import fsync_dir

        fsync_dir(self.directory)

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
        size = self.size
        if size == 0:
            return memoryview(b"")
        m = self._map
        if m is None or self._map_len < size:
            file = self.file
            m = mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ)
            self._map, self._map_len = m, size
        open_handles.touch(self)
        return m

    def view(self, position: int, length: int) -> memoryview | bytes:
        """The bytes at ``position``: a view of the mapping, or, when open files are scarce (more
        segments in use than the LRU holds), a copy, so a read spanning many segments does not keep
        a descriptor per segment until its answer is sent."""
        buf = self.buffer()
        if open_handles.crowded:
            return buf[position : position + length]
        return memoryview(buf)[position : position + length]

    def region(self, position: int, length: int) -> FileRegion | memoryview | bytes:
        """The bytes at ``position`` as a file range for sendfile, with the mapping the views use for the
        part a socket does not take at once (see FileRegion.view). When open files are scarce, what ``view``
        gives instead (a copy): a range holds its file's descriptor until the answer is sent, so a fetch of
        more partitions than the process may hold files open would run out of descriptors."""
        if open_handles.crowded:
            return self.view(position, length)
        file = self.file
        return FileRegion(file, position, length, self.buffer())

    # -------------------------------------------------------------- writes

    def write(self, buffers: list, total: int) -> None:
        """Write ``buffers`` after the committed bytes, not yet visible to readers.

        On failure (disk full...) the file is cut back to its committed size so
        the next append does not land after garbage.
        """
        try:
            file = self.file  # held until the write is done (the LRU may drop the segment's reference)
        except OSError as exc:
            raise LogDirError.wrap(f"cannot open {self.log_path}", exc) from exc
        fd = file.fileno()
        position, end = self.size, self.size + total
        try:
            if len(buffers) <= _IOV_MAX and os.pwritev(fd, buffers, position) == total:
                return  # the usual case: every byte in one call (a short write goes on below)
            pending = [memoryview(b).cast("B") for b in buffers]
            first = 0  # pending[:first] are fully written
            while first < len(pending):
                written = os.pwritev(fd, pending[first : first + _IOV_MAX], position)
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
            raise LogDirError.wrap(f"append to {self.log_path} failed", exc) from exc

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

    def rebuild_from(self, infos: list[_batch.BatchInfo], index_interval_bytes: int, *, write: bool = True) -> None:
        """Reset the in-memory state and both indexes from a scan of the whole log (and write the index
        files, unless ``write`` is False; a failure to write them is logged: they are rebuilt again)."""
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
        if write:
            try:
                self.write_indexes(fsync=False)
            except OSError as exc:  # a full disk: the indexes live in memory until they can be written
                log.warning("cannot write the indexes of %s: %s", self.log_path, exc)
        if infos:
            last = infos[-1]
            self.size, self.next_offset = last.position + last.size, last.last_offset + 1
            self.max_timestamp, self.offset_of_max_timestamp = max_ts, max_off
            self.first_batch_timestamp = infos[0].max_timestamp
        self._bytes_since_index_entry = since

    def truncate(self, size: int) -> None:
        """Cut the .log to ``size`` bytes (recovery only: nobody reads the segment yet)."""
        self._map, self._map_len = None, 0
        file = self.file
        os.ftruncate(file.fileno(), size)
        os.fsync(file.fileno())

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
        file = self.file
        os.fsync(file.fileno())

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
        end = _batch.whole_batches_end(
            buf, max(position, self.offset_index.last_position_within(limit)), self.size, limit
        )
        if end == position and take_first:
            return position + _batch.read_info(buf, position).size
        return end

    def batch_at(self, position: int) -> memoryview:
        buf = self.buffer()
        info = _batch.read_info(buf, position)
        return memoryview(buf)[position : position + info.size]

    def find_by_timestamp(self, timestamp_ms: int, min_offset: int) -> tuple[int, int] | None:
        from .topics import first_record_in

        start = max(self.time_index.lookup(timestamp_ms), min_offset)
        view = memoryview(self.buffer())
        infos = _batch.iter_infos(view, self.offset_index.lookup(start), self.size)
        return first_record_in(((view[i.position : i.position + i.size], i) for i in infos), timestamp_ms, min_offset)

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        open_handles.forget(self)
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
        open_handles.forget(self)
        self.offset_index.delete()
        self.time_index.delete()
        try:
            os.unlink(self.txn_index_path)
        except FileNotFoundError:
            pass
        self._map = None  # dropped, not closed: views may still use it
        self._file = None  # same for the file held by FileRegions
        try:
            os.unlink(self.log_path)
        except FileNotFoundError:
            pass
