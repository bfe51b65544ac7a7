"""Record batch v2 (magic 2): a lazy, zero-copy view plus in-place header rewrites.

Layout (big-endian), offsets from the start of the batch::

     0 baseOffset            int64    \\ not covered by the CRC: the broker
     8 batchLength           int32     | rewrites offset and epoch in place
    12 partitionLeaderEpoch  int32    /
    16 magic                 int8
    17 crc                   uint32   CRC-32C of bytes 21..end
    21 attributes            int16    codec(0-2) tstype(3) txn(4) control(5) deleteHorizon(6)
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordCount           int32
    61 records (compressed as a whole when a codec is set)

Each record: varint length, int8 attributes, varlong timestampDelta, varint
offsetDelta, varint-length key and value (-1 = null), varint header count,
then per header a varint-length UTF-8 key and varint-length value.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from itertools import chain
from typing import Literal, NamedTuple

from .codecs import DEFAULT_MAX_DECOMPRESSED_SIZE, decompress
from .crc import crc32c
from .errors import CorruptRecordError, CrcMismatchError, UnsupportedCodecError
from .model import (
    LOG_APPEND_TIME,
    NO_SEQUENCE,
    Compression,
    ControlRecord,
    Record,
    TimestampType,
)
from .varint import read_varint, read_varlong

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
assert HEADER_SIZE == 61


class BatchHeader(NamedTuple):
    """The 13 header fields of a v2 batch by name, in wire order (``HEADER``'s)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int


def read_header(buf, pos: int = 0) -> BatchHeader:
    """The header of the v2 batch at ``pos`` of ``buf`` (one ``unpack_from``; HEADER_SIZE bytes must be there)."""
    return tuple.__new__(BatchHeader, HEADER.unpack_from(buf, pos))


BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORD_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

# Smallest possible record: length, attributes, timestamp delta, offset
# delta, key length, value length, header count, one byte each.  Bounds the
# record count a payload of a given size can honestly declare.
MIN_RECORD_SIZE = 7

# Records decoded per step by RecordBatch.records(); small enough that they
# die young (cheap for the garbage collector), large enough to amortise the step.
_CHUNK = 256

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_OFFSET_LEN_EPOCH = struct.Struct(">qii")
_INT32_MAX = (1 << 31) - 1

_COMPRESSIONS = tuple(Compression)


class RecordBatch:
    """Lazy view over one v2 batch.

    ``buffer`` is a memoryview of exactly this batch (no copy); header fields
    are read from it on access, so in-place rewrites (``set_base_offset``)
    are visible.  Records are decoded (and decompressed) only by
    :meth:`records` / :meth:`decode_records`.

    ``position`` is where the batch starts in the buffer it was read from
    (used in error messages).
    """

    __slots__ = ("buffer", "position")

    magic: Literal[2] = 2  # Literal: `x.magic == 2` tells RecordBatch from LegacyBatch (magic 0 or 1) for mypy

    def __init__(self, buffer, position: int = 0):
        if not isinstance(buffer, memoryview):
            buffer = memoryview(buffer)
        self.buffer = buffer
        self.position = position

    @classmethod
    def from_bytes(cls, data, position: int = 0) -> RecordBatch:
        """View ``data`` as exactly one batch, checking its framing (not its CRC)."""
        view = memoryview(data).cast("B") if not isinstance(data, memoryview) else data.cast("B")
        if len(view) < HEADER_SIZE:
            raise CorruptRecordError(
                f"{len(view)} bytes is shorter than a v2 batch header ({HEADER_SIZE})", position=position
            )
        (length,) = _I32.unpack_from(view, LENGTH_OFFSET)
        if length + 12 != len(view):
            raise CorruptRecordError(
                f"batch length {length} does not match the {len(view)} bytes given",
                base_offset=_I64.unpack_from(view, 0)[0],
                position=position,
            )
        if view[MAGIC_OFFSET] != 2:
            raise CorruptRecordError(
                f"magic {view[MAGIC_OFFSET]} is not 2", base_offset=_I64.unpack_from(view, 0)[0], position=position
            )
        return cls(view, position)

    # ------------------------------------------------------------ header

    def header(self) -> BatchHeader:
        """All 13 header fields at once, by name and in wire order (one ``unpack_from``)."""
        return tuple.__new__(BatchHeader, HEADER.unpack_from(self.buffer))

    @property
    def base_offset(self) -> int:
        return _I64.unpack_from(self.buffer, 0)[0]

    @property
    def batch_length(self) -> int:
        return _I32.unpack_from(self.buffer, LENGTH_OFFSET)[0]

    @property
    def partition_leader_epoch(self) -> int:
        return _I32.unpack_from(self.buffer, PARTITION_LEADER_EPOCH_OFFSET)[0]

    @property
    def crc(self) -> int:
        return _U32.unpack_from(self.buffer, CRC_OFFSET)[0]

    @property
    def attributes(self) -> int:
        return _I16.unpack_from(self.buffer, ATTRIBUTES_OFFSET)[0]

    @property
    def last_offset_delta(self) -> int:
        return _I32.unpack_from(self.buffer, LAST_OFFSET_DELTA_OFFSET)[0]

    @property
    def base_timestamp(self) -> int:
        return _I64.unpack_from(self.buffer, BASE_TIMESTAMP_OFFSET)[0]

    first_timestamp = base_timestamp

    @property
    def max_timestamp(self) -> int:
        return _I64.unpack_from(self.buffer, MAX_TIMESTAMP_OFFSET)[0]

    @property
    def producer_id(self) -> int:
        return _I64.unpack_from(self.buffer, PRODUCER_ID_OFFSET)[0]

    @property
    def producer_epoch(self) -> int:
        return _I16.unpack_from(self.buffer, PRODUCER_EPOCH_OFFSET)[0]

    @property
    def base_sequence(self) -> int:
        return _I32.unpack_from(self.buffer, BASE_SEQUENCE_OFFSET)[0]

    @property
    def record_count(self) -> int:
        return _I32.unpack_from(self.buffer, RECORD_COUNT_OFFSET)[0]

    @property
    def compression(self) -> Compression:
        codec = self.buffer[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK
        if codec > 4:
            raise UnsupportedCodecError(codec, base_offset=self.base_offset, position=self.position)
        return _COMPRESSIONS[codec]

    @property
    def compression_id(self) -> int:
        """The raw codec bits (0-7), without validation."""
        return self.buffer[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        if self.buffer[ATTRIBUTES_OFFSET + 1] & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.buffer[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.buffer[ATTRIBUTES_OFFSET + 1] & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.buffer[ATTRIBUTES_OFFSET + 1] & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon (stored in the base timestamp field) when the flag is set."""
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def is_compressed(self) -> bool:
        return bool(self.buffer[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK)

    @property
    def last_offset(self) -> int:
        base, _, _ = _OFFSET_LEN_EPOCH.unpack_from(self.buffer, 0)
        return base + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > -1

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wrapping at int32 like the Java client)."""
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return (base + self.last_offset_delta) & _INT32_MAX

    @property
    def size(self) -> int:
        """Total bytes of the batch, including the 12-byte offset/length prefix."""
        return len(self.buffer)

    size_in_bytes = size

    # --------------------------------------------------------------- CRC

    def compute_crc(self) -> int:
        return crc32c(self.buffer[ATTRIBUTES_OFFSET:])

    @property
    def crc_ok(self) -> bool:
        return self.compute_crc() == self.crc

    def validate_crc(self) -> None:
        """Raise :class:`CrcMismatchError` unless the stored CRC-32C matches."""
        computed = crc32c(self.buffer[ATTRIBUTES_OFFSET:])
        stored = _U32.unpack_from(self.buffer, CRC_OFFSET)[0]
        if computed != stored:
            raise CrcMismatchError(stored, computed, base_offset=self.base_offset, position=self.position)

    # ----------------------------------------------------------- records

    def records_payload(self, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE):
        """The records section, decompressed when needed (a memoryview when uncompressed)."""
        codec = self.buffer[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK
        body = self.buffer[RECORDS_OFFSET:]
        if codec == 0:
            return body
        if codec > 4:
            raise UnsupportedCodecError(codec, base_offset=self.base_offset, position=self.position)
        try:
            return decompress(codec, body, magic=2, limit=max_decompressed_size)
        except CorruptRecordError as exc:
            raise exc.with_context(base_offset=self.base_offset, position=self.position) from exc

    def _prepare(self, max_decompressed_size: int) -> tuple:
        """Header checks and decompression: what must happen before any record is decoded."""
        base_offset, _, _, _, _, attrs, _, base_ts, max_ts, _, _, _, count = HEADER.unpack_from(self.buffer)
        if count < 0:
            raise CorruptRecordError(f"negative record count {count}", base_offset=base_offset, position=self.position)
        if attrs & COMPRESSION_MASK:
            data = self.records_payload(max_decompressed_size=max_decompressed_size)
        else:
            # One memcpy of the batch is far cheaper than slicing keys and
            # values out of a memoryview and converting each to bytes.
            data = self.buffer[RECORDS_OFFSET:].tobytes()
        if count > len(data) // MIN_RECORD_SIZE:
            raise CorruptRecordError(
                f"record count {count} cannot fit in {len(data)} bytes of records",
                base_offset=base_offset,
                position=self.position,
            )
        log_append_time = max_ts if attrs & TIMESTAMP_TYPE_MASK else None
        return data, count, base_offset, base_ts, log_append_time

    def _decode_chunk(self, data, pos, count, base_offset, base_ts, log_append_time) -> tuple[list, int]:
        try:
            return _decode_records(data, pos, count, base_offset, base_ts, log_append_time)
        except CorruptRecordError as exc:
            raise exc.with_context(base_offset=base_offset, position=self.position) from exc
        except IndexError as exc:
            raise CorruptRecordError(
                "record runs past the end of the batch", base_offset=base_offset, position=self.position
            ) from exc
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(
                f"header key is not valid UTF-8: {exc}", base_offset=base_offset, position=self.position
            ) from exc

    def _check_consumed(self, data, pos: int, count: int, base_offset: int) -> None:
        if pos != len(data):
            raise CorruptRecordError(
                f"{len(data) - pos} bytes left after the {count} declared records",
                base_offset=base_offset,
                position=self.position,
            )

    def decode_records(self, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> list[Record]:
        """Decode every record into a list (decompressing first if needed); all or nothing."""
        data, count, base_offset, base_ts, lat = self._prepare(max_decompressed_size)
        records, pos = self._decode_chunk(data, 0, count, base_offset, base_ts, lat)
        self._check_consumed(data, pos, count, base_offset)
        return records

    def records(self, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[Record]:
        """Iterate the records.

        Decompression and the header checks happen on this call; records are
        then decoded in small chunks as the iteration proceeds, so a large
        batch never holds thousands of live record objects at once (which
        would make the garbage collector rescan them).  A corrupt record
        raises when the iteration reaches its chunk.
        """
        prepared = self._prepare(max_decompressed_size)
        if prepared[1] <= _CHUNK:
            return iter(self._finish_small(*prepared))
        return chain.from_iterable(self._chunks(*prepared))

    def _finish_small(self, data, count, base_offset, base_ts, lat) -> list:
        records, pos = self._decode_chunk(data, 0, count, base_offset, base_ts, lat)
        self._check_consumed(data, pos, count, base_offset)
        return records

    def _chunks(self, data, count, base_offset, base_ts, lat):
        pos = 0
        remaining = count
        while remaining:
            n = _CHUNK if remaining > _CHUNK else remaining
            chunk, pos = self._decode_chunk(data, pos, n, base_offset, base_ts, lat)
            remaining -= n
            if not remaining:
                self._check_consumed(data, pos, count, base_offset)
            yield chunk

    __iter__ = records

    def control_records(self) -> Iterator[ControlRecord]:
        """Decode the records of a control batch as :class:`ControlRecord`."""
        from .control import decode_control_record

        if not self.is_control:
            raise ValueError("not a control batch")
        for record in self.decode_records():
            try:
                yield decode_control_record(record)
            except CorruptRecordError as exc:
                raise exc.with_context(base_offset=self.base_offset, position=self.position) from exc

    def control_record(self) -> ControlRecord:
        """The (single) control record of a control batch."""
        for record in self.control_records():
            return record
        raise CorruptRecordError("control batch without records", base_offset=self.base_offset, position=self.position)

    # ----------------------------------------------------- in-place edits

    def set_base_offset(self, base_offset: int, partition_leader_epoch: int | None = None) -> None:
        """Rewrite base offset (and epoch) in the underlying buffer; needs a writable buffer."""
        set_base_offset(self.buffer, 0, base_offset, partition_leader_epoch)

    def set_partition_leader_epoch(self, epoch: int) -> None:
        _I32.pack_into(self.buffer, PARTITION_LEADER_EPOCH_OFFSET, epoch)

    def set_max_timestamp(self, timestamp_type: TimestampType | int, max_timestamp: int) -> None:
        set_max_timestamp(self.buffer, 0, timestamp_type, max_timestamp)

    # ------------------------------------------------------------- misc

    def __len__(self) -> int:
        return len(self.buffer)

    def __bytes__(self) -> bytes:
        return self.buffer.tobytes()

    def __repr__(self) -> str:
        try:
            h = self.header()
        except struct.error:
            return f"RecordBatch(<{len(self.buffer)} bytes, truncated>)"
        return (
            f"RecordBatch(base_offset={h[0]}, last_offset_delta={h[6]}, count={h[12]}, "
            f"size={len(self.buffer)}, compression={self.compression_id}, attributes=0x{h[5] & 0xFFFF:04x}, "
            f"producer_id={h[9]}, producer_epoch={h[10]}, base_sequence={h[11]}, "
            f"base_timestamp={h[7]}, max_timestamp={h[8]}, partition_leader_epoch={h[2]})"
        )


# ------------------------------------------------------------------ decoding


def _decode_records(
    data: bytes, pos: int, count: int, base_offset: int, base_ts: int, log_append_time: int | None
) -> tuple[list, int]:
    """Decode ``count`` records from ``data[pos:]``; returns them and the position after them.

    Varints are inlined for their 1- and 2-byte forms through lookup tables
    (lengths below 8 KiB, small deltas) and, for the deltas, also the 3-byte
    form (batches of thousands of records, timestamps spread over seconds);
    anything longer takes the general path.  Running off the end shows up as ``IndexError``.
    """
    out: list[Record] = []
    headers: list  # declared here for mypy: an annotation without a value costs nothing in the loop
    append = out.append
    new = tuple.__new__
    R = Record
    Z1 = _ZIGZAG1
    Z2 = _ZIGZAG2
    rv = read_varint
    rl = read_varlong
    for _ in range(count):
        # length; the attributes byte (unused by Kafka so far) is skipped with it
        b = data[pos]
        if b < 128:
            end = pos + 1 + Z1[b]
            pos += 2
        else:
            c = data[pos + 1]
            if c < 128:
                end = pos + 2 + Z2[b - 128 + (c << 7)]
                pos += 3
            else:
                length, pos = rv(data, pos)
                end = pos + length
                pos += 1
        # timestamp delta (varlong)
        b = data[pos]
        if b < 128:
            tsd = Z1[b]
            pos += 1
        else:
            c = data[pos + 1]
            if c < 128:
                tsd = Z2[b - 128 + (c << 7)]
                pos += 2
            else:
                d = data[pos + 2]
                if d < 128:
                    u = (b & 127) | ((c & 127) << 7) | (d << 14)
                    tsd = (u >> 1) ^ -(u & 1)
                    pos += 3
                else:
                    tsd, pos = rl(data, pos)
        # offset delta
        b = data[pos]
        if b < 128:
            od = Z1[b]
            pos += 1
        else:
            c = data[pos + 1]
            if c < 128:
                od = Z2[b - 128 + (c << 7)]
                pos += 2
            else:
                d = data[pos + 2]
                if d < 128:
                    u = (b & 127) | ((c & 127) << 7) | (d << 14)
                    od = (u >> 1) ^ -(u & 1)
                    pos += 3
                else:
                    od, pos = rv(data, pos)
        # key
        b = data[pos]
        if b < 128:
            n = Z1[b]
            pos += 1
        else:
            c = data[pos + 1]
            if c < 128:
                n = Z2[b - 128 + (c << 7)]
                pos += 2
            else:
                n, pos = rv(data, pos)
        if n >= 0:
            key = data[pos : pos + n]
            pos += n
        elif n == -1:
            key = None
        else:
            raise CorruptRecordError(f"invalid key length {n}")
        # value
        b = data[pos]
        if b < 128:
            n = Z1[b]
            pos += 1
        else:
            c = data[pos + 1]
            if c < 128:
                n = Z2[b - 128 + (c << 7)]
                pos += 2
            else:
                n, pos = rv(data, pos)
        if n >= 0:
            value = data[pos : pos + n]
            pos += n
        elif n == -1:
            value = None
        else:
            raise CorruptRecordError(f"invalid value length {n}")
        # headers
        if data[pos] == 0:
            headers = []
            pos += 1
        else:
            headers, pos = _decode_headers(data, pos, end)
        if pos != end:
            raise CorruptRecordError(f"record at offset delta {od} does not end where its length says")
        append(
            new(
                R,
                (base_offset + od, base_ts + tsd if log_append_time is None else log_append_time, key, value, headers),
            )
        )
    return out, pos


# Zig-zag decoded values of 1-byte varints (index: the byte) and of 2-byte
# varints (index: first byte - 128 + second byte << 7).
_ZIGZAG1 = [(u >> 1) ^ -(u & 1) for u in range(128)]
_ZIGZAG2 = [(u >> 1) ^ -(u & 1) for u in range(1 << 14)]


def _decode_headers(data: bytes, pos: int, end: int) -> tuple[list, int]:
    count, pos = read_varint(data, pos)
    # Each header takes at least two bytes (two lengths): bounds the loop.
    if count < 0 or count > (end - pos) // 2:
        raise CorruptRecordError(f"invalid header count {count}")
    headers = []
    for _ in range(count):
        n, pos = read_varint(data, pos)
        if n < 0:
            raise CorruptRecordError(f"invalid header key length {n}")
        if pos + n > end:
            raise CorruptRecordError("header key runs past the record")
        hkey = data[pos : pos + n].decode("utf-8")
        pos += n
        n, pos = read_varint(data, pos)
        if n >= 0:
            if pos + n > end:
                raise CorruptRecordError("header value runs past the record")
            hvalue = data[pos : pos + n]
            pos += n
        elif n == -1:
            hvalue = None
        else:
            raise CorruptRecordError(f"invalid header value length {n}")
        headers.append((hkey, hvalue))
    return headers, pos


# ------------------------------------------------------- in-place rewrites


def _check_v2_at(buf, pos: int) -> None:
    if 0 <= pos and pos + MAGIC_OFFSET < len(buf) and buf[pos + MAGIC_OFFSET] != 2:
        raise ValueError(
            f"entry at position {pos} has magic {buf[pos + MAGIC_OFFSET]}; only v2 batches can be rewritten in place"
        )
    if pos < 0 or pos + HEADER_SIZE > len(buf):
        raise ValueError(f"no v2 batch header at position {pos} (buffer holds {len(buf)} bytes)")


def set_base_offset(buf, pos: int, base_offset: int, partition_leader_epoch: int | None = None) -> None:
    """Rewrite the base offset (and partition leader epoch) of the v2 batch at ``pos`` in place.

    Neither field is covered by the CRC, so nothing else changes; the batch's
    records keep their offset deltas.  ``buf`` must be writable (bytearray or
    a writable memoryview).
    """
    _check_v2_at(buf, pos)
    _I64.pack_into(buf, pos, base_offset)
    if partition_leader_epoch is not None:
        _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)


def set_partition_leader_epoch(buf, pos: int, partition_leader_epoch: int) -> None:
    _check_v2_at(buf, pos)
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)


def set_max_timestamp(buf, pos: int, timestamp_type: TimestampType | int, max_timestamp: int) -> None:
    """Set timestamp type and max timestamp of the batch at ``pos`` and recompute its CRC.

    What a broker does for ``message.timestamp.type=LogAppendTime``; the
    records are not touched (readers take every record's timestamp from the
    max timestamp when the type is LOG_APPEND_TIME).
    """
    _check_v2_at(buf, pos)
    (length,) = _I32.unpack_from(buf, pos + LENGTH_OFFSET)
    end = pos + 12 + length
    if end > len(buf) or length < HEADER_SIZE - 12:
        raise ValueError(f"batch at position {pos} declares {length} bytes, buffer too short")
    (attrs,) = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    if timestamp_type == LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
    else:
        attrs &= ~TIMESTAMP_TYPE_MASK
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attrs)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    view = memoryview(buf)
    _U32.pack_into(buf, pos + CRC_OFFSET, crc32c(view[pos + ATTRIBUTES_OFFSET : end]))


def header_summary(buf, pos: int = 0) -> tuple[int, int, int, int]:
    """``(base_offset, last_offset, max_timestamp, record_count)`` from the header alone."""
    h = HEADER.unpack_from(buf, pos)
    return h[0], h[0] + h[6], h[8], h[12]
