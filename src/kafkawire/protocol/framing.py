"""Kafka's framing: a 4-byte big-endian size (counting header + body), then the payload.

Splitting a byte stream into frames, and the limits on their size, belong to
``kafkawire.protocol.connection.ProtocolConnection``; this module only writes
the prefix.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default (104857600)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def frame_size_prefix(size: int) -> bytes:
    return _SIZE.pack(size)
