"""Loading a partition directory after a restart, clean or not.

Every start is treated as a possible crash:

- the active (last) segment is read batch by batch, checking each length and
  CRC-32C; at the first torn or corrupt batch the file is truncated (logged on
  ``kafkawire.storage``) and its indexes are rebuilt from what remains;
- sealed segments were fsynced (log and indexes) when they were rolled, so
  they are only sanity-checked: index files well-formed and agreeing with the
  batch headers they point at, and the bytes after the last index entry being
  whole batches. A segment failing that is re-validated fully; a bad one is
  truncated and every later segment deleted (offsets must stay contiguous);
- files a crash can leave behind (``*.tmp``, ``*.deleted``, index files whose
  ``.log`` is gone) are removed.
"""
from __future__ import annotations

import logging
import mmap
import os
import re

from . import _batch
from .base import CorruptBatchError
from .index import IndexCorruptError
from .segment import LogSegment

log = logging.getLogger("kafkawire.storage")

_SEGMENT_FILE = re.compile(r"(\d{20})\.(log|index|timeindex)")


def _mapped(path: str, size: int, *, whole: bool = False):
    """Read-only map of the file; ``whole``: about to read every byte, so map all pages up front
    (MAP_POPULATE: one kernel call instead of a page fault per few pages)."""
    flags = mmap.MAP_SHARED | (getattr(mmap, "MAP_POPULATE", 0) if whole else 0)
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), size, flags=flags, prot=mmap.PROT_READ)


def load_segments(directory: str, index_interval_bytes: int, now_ms: int) -> list[LogSegment]:
    """The partition's segments, oldest first, with the active one recovered; [] if there are none."""
    bases, others = set(), []
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if name.endswith((".tmp", ".deleted")):
            os.unlink(path)
            continue
        m = _SEGMENT_FILE.fullmatch(name)
        if m is None:
            continue
        if m.group(2) == "log":
            bases.add(int(m.group(1)))
        else:
            others.append((int(m.group(1)), path))
    for base, path in others:
        if base not in bases:
            log.info("removing %s: its segment is gone", path)
            os.unlink(path)
    segments = [LogSegment(directory, base, created_ms=now_ms) for base in sorted(bases)]
    for i, segment in enumerate(segments[:-1]):
        if not _load_sealed(segment, index_interval_bytes):
            for later in segments[i + 1:]:
                log.error("deleting %s: it follows a truncated segment", later.log_path)
                later.delete()
            del segments[i + 1:]
            break
    if segments:
        _recover(segments[-1], index_interval_bytes)
    return segments


def _load_sealed(segment: LogSegment, index_interval_bytes: int) -> bool:
    """Load a sealed segment cheaply; False if it had to be truncated."""
    size = segment.file_size()
    try:
        for index in (segment.offset_index, segment.time_index):
            if not os.path.exists(index.path):
                raise IndexCorruptError(f"{index.path} is missing")
        segment.offset_index.load(size)
        segment.time_index.load()
        if size == 0:
            raise IndexCorruptError(f"{segment.log_path} is empty but not the last segment")
        buf = _mapped(segment.log_path, size)
        try:
            first = _batch.read_info(buf, 0)
            if first.base_offset != segment.base_offset:
                raise IndexCorruptError(f"{segment.log_path} starts at offset {first.base_offset}")
            if first.max_timestamp >= 0 and not len(segment.time_index):
                raise IndexCorruptError(f"{segment.time_index.path} lacks the entry written at roll")
            idx = segment.offset_index
            if not len(idx) and size > first.size + index_interval_bytes:
                raise IndexCorruptError(f"{idx.path} is empty for a {size}-byte segment")
            if len(idx):
                info = _batch.read_info(buf, idx.positions[-1])
                if info.last_offset != idx.offsets[-1]:
                    raise IndexCorruptError(f"{idx.path} points at a batch ending at {info.last_offset}")
            tail_start = idx.positions[-1] if len(idx) else 0
            tail = list(_batch.iter_infos(buf, tail_start, size))
            if not tail or tail[-1].position + tail[-1].size != size:
                raise IndexCorruptError(f"{segment.log_path} does not end with a whole batch")
        finally:
            buf.close()
    except (IndexCorruptError, CorruptBatchError) as exc:
        log.warning("segment %s needs a full check: %s", segment.log_path, exc)
        return _recover(segment, index_interval_bytes)
    segment.size = size
    segment.next_offset = tail[-1].last_offset + 1
    segment.first_batch_timestamp = first.max_timestamp
    last_entry = segment.time_index.last
    if last_entry is not None:
        segment.max_timestamp, segment.offset_of_max_timestamp = last_entry
    for info in tail:  # batches after the last index entry (normally covered by the seal entry)
        if info.max_timestamp > segment.max_timestamp:
            segment.max_timestamp, segment.offset_of_max_timestamp = info.max_timestamp, info.last_offset
    return True


def _recover(segment: LogSegment, index_interval_bytes: int) -> bool:
    """Check every batch of the segment; truncate at the first bad one. True if nothing was cut."""
    size = segment.file_size()
    infos, good_end, why = [], 0, None
    if size:
        buf = _mapped(segment.log_path, size, whole=True)
        try:
            infos, good_end, why = _batch.valid_prefix(buf, 0, segment.base_offset)
        finally:
            buf.close()
    if good_end < size:
        log.warning("truncating %s from %d to %d bytes (%d bytes lost): %s",
                    segment.log_path, size, good_end, size - good_end, why)
        segment.truncate(good_end)
    segment.rebuild_from(infos, index_interval_bytes)
    return good_end == size
