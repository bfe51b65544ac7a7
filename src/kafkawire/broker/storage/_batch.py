"""The storage engines' adapter over ``kafkawire.protocol.records``.

Engines move v2 batches as opaque bytes. Framing, header fields, CRC-32C checks
and the LogAppendTime rewrite are all records' (``iter_batches``,
``RecordBatch``, ``set_max_timestamp``); this module only adds what storage
needs on top: the ``BatchInfo`` rows the engines index by, the storage rules
records does not know (only magic 2 is stored; on recovery offsets must be
dense, since the CRC does not cover them), and ``CorruptBatchError`` (the
storage contract's error) in place of records' ``CorruptRecordError``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from kafkawire.protocol.records import (
    LOG_APPEND_TIME,
    CorruptRecordError,
    RecordBatch,
    iter_batches,
    set_base_offset,
    set_max_timestamp,
)
from kafkawire.protocol.records.batch import (
    HEADER,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
)

from .base import CorruptBatchError

LOG_OVERHEAD = LENGTH_OFFSET + 4  # baseOffset + batchLength: enough to know how long a batch is


class BatchInfo(NamedTuple):
    """Header fields the engines use; ``position`` is where the batch starts in its buffer/file."""

    position: int
    size: int  # whole batch including the 12-byte log overhead
    base_offset: int
    last_offset: int
    max_timestamp: int
    record_count: int


def _info(fields: tuple, position: int) -> BatchInfo:
    """BatchInfo from records' header fields (``RecordBatch.header()`` order)."""
    base = fields[0]
    return tuple.__new__(BatchInfo, (position, fields[1] + LOG_OVERHEAD, base, base + fields[6], fields[8], fields[12]))


def read_info(buf, pos: int) -> BatchInfo:
    """Header of the batch at ``pos``; the caller guarantees HEADER_SIZE bytes are there."""
    fields = HEADER.unpack_from(buf, pos)
    if fields[3] != 2:
        raise CorruptBatchError(f"batch at {pos} has magic {fields[3]}; only v2 is stored")
    if fields[1] < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptBatchError(f"batch at {pos} declares length {fields[1]}")
    return _info(fields, pos)


_EPOCH = struct.Struct(">i")


def leader_epoch(buf, pos: int) -> int:
    """The partitionLeaderEpoch of the batch at ``pos`` (the leader's epoch when it was appended)."""
    return _EPOCH.unpack_from(buf, pos + PARTITION_LEADER_EPOCH_OFFSET)[0]


def iter_infos(
    buf, start: int, end: int, *, whole: bool = False, check: bool = False, first_offset: int | None = None
) -> Iterator[BatchInfo]:
    """Headers of the batches in ``buf[start:end]`` (records' walk); CorruptBatchError at the first bad one.

    A partial batch at the end ends the walk quietly unless ``whole``. ``check`` (recovery) also checks
    each CRC and that offsets are dense (the CRC does not cover them: kafkawire's logs have no
    compaction), each batch starting right after the previous one, the first at ``first_offset`` if
    given. No view of ``buf`` outlives the walk, even when it raises: the engines close their mmaps
    right after.
    """
    reader = iter_batches(memoryview(buf)[start:end], allow_partial=not whole)
    unpack, new, next_offset = HEADER.unpack_from, tuple.__new__, first_offset
    problem = batch = None
    try:
        for batch in reader:
            pos = start + batch.position
            if batch.magic != 2:
                problem = f"batch at {pos} has magic {batch.magic}; only v2 is stored"
                break
            base, length, _epoch, _magic, crc, _attrs, delta, _ts, max_ts, _pid, _pe, _seq, count = unpack(batch.buffer)
            if delta < 0:
                problem = f"batch at {pos} has a negative last offset delta"
                break
            if check and next_offset is not None and base != next_offset:
                problem = f"batch at {pos} has offsets {base}..{base + delta}, expected to start at {next_offset}"
                break
            if check and batch.compute_crc() != crc:
                problem = f"batch at {pos} (offset {base}) fails its CRC"
                break
            next_offset = base + delta + 1
            yield new(BatchInfo, (pos, length + LOG_OVERHEAD, base, next_offset - 1, max_ts, count))
    except CorruptRecordError as exc:
        problem = str(exc) if not start else f"{exc} (positions counted from {start})"
    finally:
        del reader, batch
    if problem is not None:
        raise CorruptBatchError(problem)


def split(buf) -> list[BatchInfo]:
    """Headers of the whole batches making up ``buf``; CorruptBatchError unless it is exactly that."""
    size = len(buf)
    if size >= HEADER_SIZE:
        # The usual case, a Produce request's one batch (v3+ allows no more), in one header read: the
        # walk's framing rules (exact length, magic 2) reduce to these checks.
        fields = HEADER.unpack_from(buf, 0)
        if fields[1] + LOG_OVERHEAD == size and fields[3] == 2 and fields[6] >= 0:
            return [_info(fields, 0)]
    infos = list(iter_infos(buf, 0, size, whole=True))
    if not infos:
        raise CorruptBatchError("no record batch given")
    return infos


def valid_prefix(buf, start: int = 0, first_offset: int | None = None) -> tuple[list[BatchInfo], int, str | None]:
    """Walk batches from ``start`` as ``iter_infos(check=True)``; stop at the first torn or corrupt one.

    Returns (good batches, end of the last good batch, why it stopped or None).
    """
    out, why, end = [], None, len(buf)
    append = out.append
    try:
        for info in iter_infos(buf, start, end, check=True, first_offset=first_offset):
            append(info)
    except CorruptBatchError as exc:
        why = str(exc)
    pos = out[-1].position + out[-1].size if out else start
    if why is None and pos < end:
        why = f"{end - pos} bytes at {pos} are a torn batch"
    return out, pos, why


# Lookups read only baseOffset, batchLength and lastOffsetDelta: one unpack of records' fields at
# records' offsets, skipping the rest (half the cost of unpacking the whole header).
_SPAN = struct.Struct(f">qi{LAST_OFFSET_DELTA_OFFSET - PARTITION_LEADER_EPOCH_OFFSET}xi")


def find_batch(buf, pos: int, end: int, offset: int) -> int | None:
    """Position of the batch holding ``offset`` among the (validated) batches in ``buf[pos:end]``."""
    unpack = _SPAN.unpack_from
    while pos + HEADER_SIZE <= end:
        base, length, last_delta = unpack(buf, pos)
        if base + last_delta >= offset:
            return pos
        pos += length + LOG_OVERHEAD
    return None


def whole_batches_end(buf, pos: int, end: int, limit: int) -> int:
    """End of the run of (validated) batches from ``pos`` that finish by ``limit`` (``pos`` if none)."""
    unpack = _SPAN.unpack_from
    while pos + HEADER_SIZE <= end:
        stop = pos + unpack(buf, pos)[1] + LOG_OVERHEAD
        if stop > limit or stop > end:
            break
        pos = stop
    return pos


def stored(
    view, infos: Iterable[BatchInfo], first_offset: int, log_append_time: int | None, position: int = 0
) -> Iterator[tuple[tuple, BatchInfo]]:
    """The batches ``infos`` of ``view`` (from ``split``) as the log stores them: offsets from
    ``first_offset`` and, when ``log_append_time`` is given, LogAppendTime stamped (records recomputes
    the CRC). Yields per batch the buffers that make it up (zero-copy unless stamped) and its
    BatchInfo, positions counted from ``position``. ``view`` is never modified."""
    next_offset = first_offset
    for info in infos:
        last = next_offset + info.last_offset - info.base_offset
        raw = view[info.position : info.position + info.size]
        if log_append_time is None:
            # Only the base offset changes and the CRC does not cover it: keep the rest as given.
            chunks = (next_offset.to_bytes(8, "big", signed=True), raw[8:])
            max_ts = info.max_timestamp
        else:
            stamped = bytearray(raw)
            set_base_offset(stamped, 0, next_offset)
            set_max_timestamp(stamped, 0, LOG_APPEND_TIME, log_append_time)
            chunks = (stamped,)
            max_ts = log_append_time
        yield chunks, BatchInfo(position, info.size, next_offset, last, max_ts, info.record_count)
        position += info.size
        next_offset = last + 1


def stored_one(view, info: BatchInfo, first_offset: int, position: int) -> tuple[tuple, BatchInfo]:
    """``stored`` for the usual append, one batch and no LogAppendTime, without the generator: (its buffers,
    its BatchInfo)."""
    start = info.position
    base = info.base_offset
    chunks = (first_offset.to_bytes(8, "big", signed=True), view[start + 8 : start + info.size])
    last = first_offset + info.last_offset - base
    return chunks, tuple.__new__(
        BatchInfo, (position, info.size, first_offset, last, info.max_timestamp, info.record_count)
    )


def record_timestamps(batch) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record in a whole batch (bytes starting at its base offset).

    Only ListOffsets by timestamp looks inside a batch (to name the exact record)."""
    try:
        return [(r.offset, r.timestamp) for r in RecordBatch.from_bytes(batch).records()]
    except CorruptRecordError as exc:
        raise CorruptBatchError(str(exc)) from None
