"""What the storage engines need to know about v2 record batches, and no more.

Engines move batches as opaque bytes; they only read the fixed 61-byte header
(to assign offsets, index, roll and find batches) and, for crash recovery,
check the CRC. This is a private helper rather than ``kafkawire.protocol.records``
because the engines must not depend on the full record codec (which was still
landing when this was written); it reads the same on-disk format.

v2 header, big-endian: baseOffset i64, batchLength i32, partitionLeaderEpoch
i32, magic i8, crc u32, attributes i16, lastOffsetDelta i32, baseTimestamp i64,
maxTimestamp i64, producerId i64, producerEpoch i16, baseSequence i32,
recordCount i32. The CRC-32C covers attributes to the end of the batch.
"""
from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

from crc32c import crc32c

from .base import CorruptBatchError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: enough to know how long a batch is
_LENGTH_PREFIX = struct.Struct(">qi")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")

LENGTH_OFFSET = 8
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
RECORDS_OFFSET = HEADER_SIZE

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
CONTROL_MASK = 0x20


class BatchInfo(NamedTuple):
    """Header fields the engines use; ``position`` is where the batch starts in its buffer/file."""

    position: int
    size: int  # whole batch including the 12-byte log overhead
    base_offset: int
    last_offset: int
    max_timestamp: int
    record_count: int
    attributes: int


def read_info(buf, pos: int) -> BatchInfo:
    """Header of the batch at ``pos``; the caller guarantees HEADER_SIZE bytes are there."""
    (base, length, _epoch, magic, _crc, attrs, last_delta, _base_ts, max_ts,
     _pid, _pepoch, _seq, count) = HEADER.unpack_from(buf, pos)
    if magic != 2:
        raise CorruptBatchError(f"batch at {pos} has magic {magic}; only v2 is stored")
    if length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptBatchError(f"batch at {pos} declares length {length}")
    return BatchInfo(pos, length + LOG_OVERHEAD, base, base + last_delta, max_ts, count, attrs)


def split(buf) -> list[BatchInfo]:
    """Headers of the whole batches making up ``buf``; CorruptBatchError unless it is exactly that."""
    out, pos, end = [], 0, len(buf)
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise CorruptBatchError(f"{end - pos} trailing bytes at {pos} are not a whole batch")
        info = read_info(buf, pos)
        if pos + info.size > end:
            raise CorruptBatchError(f"batch at {pos} declares {info.size} bytes, only {end - pos} given")
        if info.last_offset < info.base_offset:
            raise CorruptBatchError(f"batch at {pos} has a negative last offset delta")
        out.append(info)
        pos += info.size
    if not out:
        raise CorruptBatchError("no record batch given")
    return out


def crc_ok(buf, info: BatchInfo) -> bool:
    view = memoryview(buf)
    (stored,) = _U32.unpack_from(view, info.position + CRC_OFFSET)
    return crc32c(view[info.position + ATTRIBUTES_OFFSET:info.position + info.size]) == stored


def valid_prefix(buf, start: int = 0, first_offset: int | None = None) -> tuple[list[BatchInfo], int, str | None]:
    """Walk batches from ``start``; stop at the first torn or corrupt one.

    Returns (good batches, end of the last good batch, why it stopped or None).
    The CRC does not cover the base offset, so offsets are checked too: kafkawire's
    logs are dense (no compaction), each batch starting right after the previous
    one, the first at ``first_offset``.
    """
    out, pos, end, next_offset = [], start, len(buf), first_offset
    while pos < end:
        if end - pos < HEADER_SIZE:
            return out, pos, f"{end - pos} bytes at {pos} are a torn batch header"
        try:
            info = read_info(buf, pos)
        except CorruptBatchError as exc:
            return out, pos, str(exc)
        if pos + info.size > end:
            return out, pos, f"batch at {pos} declares {info.size} bytes, file has {end - pos}"
        if info.last_offset < info.base_offset or (next_offset is not None and info.base_offset != next_offset):
            return out, pos, (f"batch at {pos} has offsets {info.base_offset}..{info.last_offset}, "
                              f"expected to start at {next_offset}")
        if not crc_ok(buf, info):
            return out, pos, f"batch at {pos} (offset {info.base_offset}) fails its CRC"
        out.append(info)
        next_offset = info.last_offset + 1
        pos += info.size
    return out, pos, None


def iter_infos(buf, start: int, end: int) -> Iterator[BatchInfo]:
    """Headers of the batches in ``buf[start:end]`` (already validated data: no CRC check)."""
    pos = start
    while pos + HEADER_SIZE <= end:
        info = read_info(buf, pos)
        if pos + info.size > end:
            return
        yield info
        pos += info.size


# baseOffset, batchLength and lastOffsetDelta in one unpack: all a lookup needs.
_SPAN = struct.Struct(">qi11xi")


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
        _base, length, _delta = unpack(buf, pos)
        stop = pos + length + LOG_OVERHEAD
        if stop > limit or stop > end:
            break
        pos = stop
    return pos


def base_offset_bytes(offset: int) -> bytes:
    return _I64.pack(offset)


def stamp_log_append_time(batch: bytearray, time_ms: int) -> None:
    """Set LogAppendTime in the attributes and ``time_ms`` as max timestamp of the batch
    occupying all of ``batch``, then recompute its CRC (those fields are covered by it)."""
    (attrs,) = _I16.unpack_from(batch, ATTRIBUTES_OFFSET)
    _I16.pack_into(batch, ATTRIBUTES_OFFSET, attrs | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(batch, MAX_TIMESTAMP_OFFSET, time_ms)
    _U32.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))


# ------------------------------------------------------- record timestamps
# Only ListOffsets by timestamp needs to look inside a batch (to name the exact
# record), so this is the one place that decodes records.

def _varint(buf, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptBatchError("varint too long")


def record_timestamps(batch) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record in a whole batch (bytes starting at its base offset)."""
    info = read_info(batch, 0)
    if info.attributes & TIMESTAMP_TYPE_MASK:
        # LogAppendTime: every record's timestamp is the batch's max timestamp.
        return [(off, info.max_timestamp) for off in range(info.base_offset, info.last_offset + 1)]
    (_b, _l, _e, _m, _c, attrs, _d, base_ts, *_rest) = HEADER.unpack_from(batch, 0)
    body = memoryview(batch)[RECORDS_OFFSET:info.size]
    codec = attrs & COMPRESSION_MASK
    if codec:
        from kafkawire.protocol.records.codecs import decompress  # lazy: only this rare path needs codecs
        body = memoryview(decompress(codec, body))
    out, pos = [], 0
    for _ in range(info.record_count):
        length, pos = _varint(body, pos)
        end = pos + length
        pos += 1  # record attributes
        ts_delta, pos = _varint(body, pos)
        offset_delta, pos = _varint(body, pos)
        out.append((info.base_offset + offset_delta, base_ts + ts_delta))
        pos = end
    return out
