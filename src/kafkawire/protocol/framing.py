"""Kafka's framing: a 4-byte big-endian size (counting header + body), then the payload.

``FrameParser`` is sans-IO: feed it bytes as they arrive, take whole frames
out. A size that is negative or above the configured maximum raises
``FrameError`` before anything is allocated for it.
"""
from __future__ import annotations

import struct

from .primitives import FrameError

_SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default (104857600)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def frame_size_prefix(size: int) -> bytes:
    return _SIZE.pack(size)


def check_frame_size(size: int, max_size: int) -> None:
    if size < 0:
        raise FrameError(f"negative frame size {size}")
    if size > max_size:
        raise FrameError(f"frame size {size} is larger than the maximum {max_size}")


def read_frame_size(header: bytes, max_size: int = DEFAULT_MAX_FRAME) -> int:
    (size,) = _SIZE.unpack_from(header, 0)
    check_frame_size(size, max_size)
    return size


class FrameParser:
    """Accumulates bytes and yields complete frame payloads (without the size prefix)."""

    def __init__(self, max_size: int = DEFAULT_MAX_FRAME):
        self.max_size = max_size
        self._buf = bytearray()
        self._need: int | None = None

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        frames = []
        buf = self._buf
        pos = 0
        while True:
            if self._need is None:
                if len(buf) - pos < 4:
                    break
                size = _SIZE.unpack_from(buf, pos)[0]
                check_frame_size(size, self.max_size)
                self._need = size
                pos += 4
            if len(buf) - pos < self._need:
                break
            frames.append(bytes(buf[pos:pos + self._need]))
            pos += self._need
            self._need = None
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered(self) -> int:
        return len(self._buf)
