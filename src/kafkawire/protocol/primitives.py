"""Wire primitives shared by the compiled codecs: varints and the codec's exceptions.

Nothing here knows about messages; the compiler (``codegen``) emits code that
calls these helpers only for the rare multi-byte cases, keeping the common
one-byte varint inline.
"""

from __future__ import annotations

import struct


class ProtocolError(ValueError):
    """Base of every protocol-level error kafkawire raises."""


class DecodeError(ProtocolError):
    """Bytes that do not decode as the expected message; names the field path and byte offset."""

    def __init__(self, problem: str, *, path: str = "", offset: int | None = None, message: str = ""):
        self.problem = problem
        self.path = path
        self.offset = offset
        self.message = message
        where = ".".join(p for p in (message, path) if p)
        text = problem
        if where or offset is not None:
            text = f"{where or '<message>'} at byte {offset}: {problem}"
        super().__init__(text)


class EncodeError(ProtocolError):
    """A message that cannot be written at the requested version."""


class UnsupportedVersionError(ProtocolError):
    """A version outside a message's valid range."""


class FrameError(ProtocolError):
    """A frame size that is negative or larger than allowed."""


def uvarint_bytes(value: int) -> bytes:
    if value < 0:
        raise EncodeError(f"unsigned varint cannot hold {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_bytes(value: int) -> bytes:
    """Signed (zigzag) varint, 32 or 64 bit."""
    return uvarint_bytes((value << 1) ^ (value >> 63))


# Lengths and counts below 16384 dominate; their encodings are looked up, not computed.
# (laid out from the byte patterns, 1 and 2 bytes, rather than encoded one by one: a few ms of every start)
UVARINT_TABLE: tuple[bytes, ...] = tuple(
    [bytes((v,)) for v in range(128)] + [bytes((v & 0x7F | 0x80, v >> 7)) for v in range(128, 1 << 14)]
)


def read_uvarint(buf, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Decode an unsigned varint at ``pos``; at most ``max_bytes`` bytes (5 for 32-bit, 10 for 64-bit)."""
    result = 0
    shift = 0
    end = len(buf)
    for i in range(max_bytes):
        if pos >= end:
            raise DecodeError("varint runs past the end of the buffer", offset=pos)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if max_bytes == 5 and result > 0xFFFFFFFF:
                raise DecodeError("unsigned varint exceeds 32 bits", offset=pos - i - 1)
            return result, pos
        shift += 7
    raise DecodeError(f"varint longer than {max_bytes} bytes", offset=pos - max_bytes)


def read_varint(buf, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    raw, pos = read_uvarint(buf, pos, max_bytes)
    return (raw >> 1) ^ -(raw & 1), pos


INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
