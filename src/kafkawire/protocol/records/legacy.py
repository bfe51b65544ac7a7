"""Legacy message sets: magic 0 and 1 (Kafka < 0.11), read and written.

Each entry of a message set::

    offset int64, size int32,
    crc uint32 (CRC-32 of magic..end), magic int8, attributes int8,
    [timestamp int64 -- magic 1 only], key bytes(int32 len), value bytes(int32 len)

A compressed entry ("wrapper") has a null key and, as value, a compressed
message set of *inner* messages.  With magic 1 the inner offsets are relative
(0, 1, ...) and the wrapper carries the absolute offset of the last one; with
magic 0 inner offsets are absolute.  The wrapper's offset is always the last
offset.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterable, Iterator
from typing import Literal

from .codecs import DEFAULT_MAX_DECOMPRESSED_SIZE, compress, decompress
from .errors import CorruptRecordError, CrcMismatchError, UnsupportedCodecError
from .model import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    Compression,
    Record,
    TimestampType,
)

_V0 = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_V1 = struct.Struct(">qiIbbq")  # ... timestamp
_I32 = struct.Struct(">i")
_PREFIX = struct.Struct(">qiI")
_MAGIC_ATTRS = struct.Struct(">bb")
_MAGIC_ATTRS_TS = struct.Struct(">bbq")

LOG_OVERHEAD = 12
CRC_OFFSET = 12
MAGIC_OFFSET = 16
ATTRIBUTES_OFFSET = 17
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08

# Bytes after the 12-byte prefix: crc, magic, attributes, [timestamp], key length, value length.
RECORD_OVERHEAD_V0 = 14
RECORD_OVERHEAD_V1 = 22
_KEY_OFFSET = (18, 26)  # by magic, from the start of the entry

_COMPRESSIONS = tuple(Compression)


def record_overhead(magic: int) -> int:
    return RECORD_OVERHEAD_V0 if magic == 0 else RECORD_OVERHEAD_V1


class LegacyBatch:
    """One top-level entry of a magic 0/1 message set (a message or a compressed wrapper).

    Shares the reading API of :class:`~.batch.RecordBatch` where it makes
    sense: ``base_offset``, ``last_offset``, ``next_offset``, ``size``,
    ``compression``, ``timestamp_type``, ``validate_crc()``, ``records()``.
    """

    __slots__ = ("buffer", "position", "offset", "crc", "magic", "attributes", "timestamp", "_records")
    # declared for mypy only (no value, so no class attribute that would clash with the slots)
    magic: Literal[0, 1]  # the walk hands magic 2 to RecordBatch, from_bytes refuses others
    _records: list[Record] | None  # decode_records() cached by _decoded()

    is_control = False
    is_transactional = False
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    partition_leader_epoch = -1
    has_delete_horizon = False

    def __init__(self, buffer, position: int = 0):
        if not isinstance(buffer, memoryview):
            buffer = memoryview(buffer)
        self.buffer = buffer
        self.position = position
        magic = buffer[MAGIC_OFFSET]
        if magic == 0:
            self.offset, _, self.crc, self.magic, attrs = _V0.unpack_from(buffer)
            self.timestamp = NO_TIMESTAMP
        else:
            self.offset, _, self.crc, self.magic, attrs, self.timestamp = _V1.unpack_from(buffer)
        self.attributes = attrs & 0xFF
        self._records = None

    @classmethod
    def from_bytes(cls, data, position: int = 0) -> LegacyBatch:
        view = memoryview(data).cast("B")
        if len(view) < LOG_OVERHEAD + RECORD_OVERHEAD_V0 or view[MAGIC_OFFSET] not in (0, 1):
            raise CorruptRecordError("not a magic 0/1 message", position=position)
        (size,) = _I32.unpack_from(view, 8)
        if size + LOG_OVERHEAD != len(view) or size < record_overhead(view[MAGIC_OFFSET]):
            raise CorruptRecordError(
                f"message size {size} does not match the {len(view)} bytes given", position=position
            )
        return cls(view, position)

    # ---------------------------------------------------------- header

    @property
    def compression(self) -> Compression:
        codec = self.attributes & COMPRESSION_MASK
        if codec > 3:
            raise UnsupportedCodecError(
                codec,
                base_offset=self.offset,
                position=self.position,
                problem=f"compression codec id {codec} is not valid for magic {self.magic}",
            )
        return _COMPRESSIONS[codec]

    @property
    def compression_id(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_compressed(self) -> bool:
        return bool(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def base_offset(self) -> int:
        """First offset; for a compressed wrapper this decompresses (as Kafka's Java client does)."""
        if not self.attributes & COMPRESSION_MASK:
            return self.offset
        records = self._decoded()
        return records[0].offset if records else self.offset

    @property
    def record_count(self) -> int:
        if not self.attributes & COMPRESSION_MASK:
            return 1
        return len(self._decoded())

    @property
    def size(self) -> int:
        return len(self.buffer)

    size_in_bytes = size

    @property
    def key(self) -> bytes | None:
        return _key_value(self.buffer, _KEY_OFFSET[self.magic], self.offset, self.position)[0]

    @property
    def value(self) -> bytes | None:
        return _key_value(self.buffer, _KEY_OFFSET[self.magic], self.offset, self.position)[1]

    # ------------------------------------------------------------- CRC

    def compute_crc(self) -> int:
        return zlib.crc32(self.buffer[MAGIC_OFFSET:])

    @property
    def crc_ok(self) -> bool:
        return self.compute_crc() == self.crc

    def validate_crc(self) -> None:
        computed = zlib.crc32(self.buffer[MAGIC_OFFSET:])
        if computed != self.crc:
            raise CrcMismatchError(self.crc, computed, base_offset=self.offset, position=self.position, what="CRC-32")

    # --------------------------------------------------------- records

    def _decoded(self, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> list[Record]:
        if self._records is None:
            self._records = self.decode_records(max_decompressed_size=max_decompressed_size)
        return self._records

    def decode_records(
        self, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE, check_inner_crc: bool = True
    ) -> list[Record]:
        """The records of this entry: itself, or the inner messages of a wrapper."""
        key, value = _key_value(self.buffer, _KEY_OFFSET[self.magic], self.offset, self.position)
        codec = self.attributes & COMPRESSION_MASK
        if not codec:
            return [Record(self.offset, self.timestamp, key, value, [])]
        where = {"base_offset": self.offset, "position": self.position}
        codec = self.compression  # validates the id
        if value is None:
            raise CorruptRecordError("compressed wrapper message has a null value", **where)
        try:
            payload = decompress(codec, value, magic=self.magic, limit=max_decompressed_size)
            return _decode_inner(
                payload,
                self.magic,
                self.offset,
                self.timestamp,
                bool(self.attributes & TIMESTAMP_TYPE_MASK),
                check_inner_crc,
            )
        except CorruptRecordError as exc:
            raise exc.with_context(**where) from exc

    def records(self, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[Record]:
        return iter(self.decode_records(max_decompressed_size=max_decompressed_size))

    __iter__ = records

    def __len__(self) -> int:
        return len(self.buffer)

    def __bytes__(self) -> bytes:
        return self.buffer.tobytes()

    def __repr__(self) -> str:
        return (
            f"LegacyBatch(magic={self.magic}, offset={self.offset}, size={len(self.buffer)}, "
            f"attributes=0x{self.attributes:02x}, timestamp={self.timestamp})"
        )


def _key_value(buf, pos: int, offset: int, position: int) -> tuple[bytes | None, bytes | None]:
    end = len(buf)
    out: list[bytes | None] = []
    for what in ("key", "value"):
        if pos + 4 > end:
            raise CorruptRecordError(
                f"message {what} length runs past the message", base_offset=offset, position=position
            )
        (n,) = _I32.unpack_from(buf, pos)
        pos += 4
        if n == -1:
            out.append(None)
            continue
        if n < 0 or pos + n > end:
            raise CorruptRecordError(f"invalid message {what} length {n}", base_offset=offset, position=position)
        out.append(buf[pos : pos + n].tobytes())
        pos += n
    if pos != end:
        raise CorruptRecordError(
            f"{end - pos} unexpected bytes after the message value", base_offset=offset, position=position
        )
    return out[0], out[1]


def _decode_inner(
    payload: bytes, magic: int, wrapper_offset: int, wrapper_ts: int, log_append_time: bool, check_crc: bool
) -> list[Record]:
    entries = []
    pos = 0
    end = len(payload)
    view = memoryview(payload)
    while pos < end:
        if end - pos < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
            raise CorruptRecordError(f"truncated inner message at byte {pos} of the decompressed wrapper")
        (size,) = _I32.unpack_from(payload, pos + 8)
        inner_magic = payload[pos + MAGIC_OFFSET]
        if inner_magic != magic:
            raise CorruptRecordError(f"inner message magic {inner_magic} differs from wrapper magic {magic}")
        if size < record_overhead(magic) or pos + LOG_OVERHEAD + size > end:
            raise CorruptRecordError(f"invalid inner message size {size}")
        entry = view[pos : pos + LOG_OVERHEAD + size]
        if magic == 0:
            offset, _, crc, _, attrs = _V0.unpack_from(entry)
            ts = NO_TIMESTAMP
        else:
            offset, _, crc, _, attrs, ts = _V1.unpack_from(entry)
        if attrs & COMPRESSION_MASK:
            raise CorruptRecordError("inner message is itself compressed")
        if check_crc:
            computed = zlib.crc32(entry[MAGIC_OFFSET:])
            if computed != crc:
                raise CrcMismatchError(crc, computed, what=f"inner message (offset {offset}) CRC-32")
        key, value = _key_value(entry, _KEY_OFFSET[magic], offset, pos)
        entries.append((offset, ts, key, value))
        pos += LOG_OVERHEAD + size
    if not entries:
        raise CorruptRecordError("compressed wrapper holds no messages")
    shift = 0
    if magic > 0:
        # Inner offsets are relative; the wrapper has the absolute last offset.
        # A wrapper that was never given offsets (a producer's, offset 0)
        # yields a negative base: then, like Kafka, keep the relative offsets.
        shift = max(wrapper_offset - entries[-1][0], 0)
    if log_append_time:
        return [Record(o + shift, wrapper_ts, k, v, []) for o, _, k, v in entries]
    return [Record(o + shift, t, k, v, []) for o, t, k, v in entries]


# ------------------------------------------------------------------ writing


def encode_message(offset: int, magic: int, attributes: int, timestamp: int, key, value) -> bytes:
    """One complete message-set entry (prefix + message) with its CRC-32."""
    if magic == 0:
        head = _MAGIC_ATTRS.pack(0, attributes)
    else:
        head = _MAGIC_ATTRS_TS.pack(magic, attributes, timestamp)
    parts = [head]
    for field in (key, value):
        if field is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(_I32.pack(len(field)))
            parts.append(field)
    body = b"".join(parts)
    return _PREFIX.pack(offset, len(body) + 4, zlib.crc32(body)) + body


def _now_ms() -> int:
    return int(time.time() * 1000)


def _normalize(records: Iterable, base_offset: int | None) -> list[tuple[int, int | None, bytes | None, bytes | None]]:
    """``(offset, timestamp, key, value)`` for each input record; see :func:`build_message_set`."""
    out: list[tuple[int, int | None, bytes | None, bytes | None]] = []
    next_offset = base_offset
    ts: int | None  # a Record's timestamp, or the tuple's (None: stamped when built)
    headers: list | None
    for item in records:
        if type(item) is Record:
            offset, ts, key, value, headers = item
            if next_offset is None:
                next_offset = offset
        else:
            n = len(item)
            key, value = item[0], item[1]
            headers = item[2] if n > 2 else None
            ts = item[3] if n > 3 else None
            if next_offset is None:
                next_offset = 0
            offset = next_offset
        if headers:
            raise ValueError("magic 0/1 messages cannot carry headers")
        if out and offset <= out[-1][0]:
            raise ValueError(f"offset {offset} does not follow {out[-1][0]}")
        key = None if key is None else _as_bytes(key)
        value = None if value is None else _as_bytes(value)
        out.append((offset, ts, key, value))
        next_offset = offset + 1
    return out


def _as_bytes(data) -> bytes:
    if type(data) is bytes:
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"record keys and values must be bytes-like, not {type(data).__name__}")


def build_message_set(
    records: Iterable,
    magic: int = 1,
    compression: Compression | int | str = Compression.NONE,
    base_offset: int | None = None,
    *,
    timestamp_type: TimestampType | int = CREATE_TIME,
    log_append_time: int | None = None,
) -> bytes:
    """Build a magic 0 or 1 message set, the way Kafka's Java client lays it out.

    ``records`` holds :class:`Record` items (their offsets are kept) or tuples
    ``(key, value[, headers[, timestamp]])`` numbered from ``base_offset``
    (default 0).  Headers must be empty.  Without compression each record is
    its own message; with compression they are wrapped in one message.
    With ``timestamp_type=LOG_APPEND_TIME`` (magic 1) the messages get
    ``log_append_time`` (default: now).
    """
    if magic not in (0, 1):
        raise ValueError(f"magic must be 0 or 1, not {magic}")
    codec = Compression.parse(compression)
    if codec == Compression.ZSTD:
        raise UnsupportedCodecError(4, problem="zstd compression needs magic 2")
    entries = _normalize(records, base_offset)
    if not entries:
        return b""
    lat = magic > 0 and timestamp_type == LOG_APPEND_TIME
    if lat and log_append_time is None:
        log_append_time = _now_ms()
    # read only when lat, which has just set log_append_time
    append_ts = NO_TIMESTAMP if log_append_time is None else log_append_time
    now = None
    stamped: list[tuple[int, int, bytes | None, bytes | None]] = []
    for offset, ts, key, value in entries:
        if magic == 0:
            ts = NO_TIMESTAMP
        elif lat:
            ts = append_ts
        elif ts is None:
            if now is None:
                now = _now_ms()
            ts = now
        stamped.append((offset, ts, key, value))
    ts_attr = TIMESTAMP_TYPE_MASK if lat else 0
    if codec == Compression.NONE:
        return b"".join(encode_message(o, magic, ts_attr, t, k, v) for o, t, k, v in stamped)
    first = stamped[0][0]
    inner = b"".join(encode_message(o - first if magic > 0 else o, magic, ts_attr, t, k, v) for o, t, k, v in stamped)
    wrapper_ts = append_ts if lat else max(t for _, t, _, _ in stamped)
    payload = compress(codec, inner, magic=magic)
    return encode_message(stamped[-1][0], magic, int(codec) | ts_attr, wrapper_ts, None, payload)


def iter_message_set(
    buf, *, check_crc: bool = True, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> Iterator[Record]:
    """Records of a magic 0/1 message set, wrappers expanded; a partial tail is ignored."""
    from .reader import iter_batches

    for entry in iter_batches(buf, check_crc=check_crc):
        if entry.magic > 1:
            raise CorruptRecordError(
                "expected a magic 0/1 message set, found a v2 batch",
                base_offset=entry.base_offset,
                position=entry.position,
            )
        yield from entry.decode_records(max_decompressed_size=max_decompressed_size)
