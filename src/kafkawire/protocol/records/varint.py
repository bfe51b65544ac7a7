"""Zig-zag varints as used inside v2 records (protobuf style, little-endian groups of 7 bits).

The hot loops in :mod:`.batch` and :mod:`.builder` inline the one- and
two-byte cases; these functions are the general path and the reference the
tests check against.
"""

from __future__ import annotations

from .errors import CorruptRecordError

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def encode_varint(value: int) -> bytes:
    """Zig-zag encode a signed 64-bit value."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise OverflowError(f"varint value {value} outside int64")
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def size_of_varint(value: int) -> int:
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n


# Encodings of 0..N-1: lengths, offset deltas and small timestamp deltas hit
# this table instead of a function call.
VARINT_TABLE_SIZE = 1 << 14
# encode_varint(i) for each i, laid out from the byte patterns of zigzag(i) = 2i (1, 2 and 3 bytes):
# encoding 16,384 values one by one cost every process that imports the records module a few ms
VARINT_TABLE: list[bytes] = (
    [bytes((v,)) for v in range(0, 128, 2)]
    + [bytes((v & 0x7F | 0x80, v >> 7)) for v in range(128, 1 << 14, 2)]
    + [bytes((v & 0x7F | 0x80, v >> 7 & 0x7F | 0x80, v >> 14)) for v in range(1 << 14, 2 * VARINT_TABLE_SIZE, 2)]
)
VARINT_SIZES: list[int] = [len(b) for b in VARINT_TABLE]  # a record's size adds up without len() calls
NULL_VARINT = encode_varint(-1)


def _read_zigzag(data, pos: int, max_shift: int, lo: int, hi: int, what: str) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift >= max_shift:
            raise CorruptRecordError(f"{what} longer than {max_shift // 7} bytes")
    value = (result >> 1) ^ -(result & 1)
    if not lo <= value <= hi:
        raise CorruptRecordError(f"{what} {value} overflows int{64 if max_shift == 70 else 32}")
    return value, pos


def read_varint(data, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint that must fit an int32 (at most 5 bytes).

    Returns ``(value, next_pos)``; raises :class:`CorruptRecordError` when the
    varint does not end within 5 bytes or overflows int32, and ``IndexError``
    when the data ends first (callers turn that into a located error).
    """
    return _read_zigzag(data, pos, 35, _INT32_MIN, _INT32_MAX, "varint")


def read_varlong(data, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint that must fit an int64 (at most 10 bytes)."""
    return _read_zigzag(data, pos, 70, _INT64_MIN, _INT64_MAX, "varlong")
