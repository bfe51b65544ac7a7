"""Builds valid v2 record batches for the storage tests (independent of the engines' parser)."""

from __future__ import annotations

import gzip
import struct

from crc32c import crc32c


def _varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)  # zigzag
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += _varint(ts_delta) + _varint(offset_delta)
    for field in (key, value):
        if field is None:
            body += _varint(-1)
        else:
            body += _varint(len(field)) + field
    body += _varint(0)  # no headers
    return _varint(len(body)) + bytes(body)


def build_batch(
    values,
    *,
    base_offset: int = 0,
    timestamps=None,
    base_timestamp: int = 1_700_000_000_000,
    gzip_records: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """A v2 batch holding one record per value; timestamps default to base_timestamp + index."""
    values = list(values)
    if timestamps is None:
        timestamps = [base_timestamp + i for i in range(len(values))]
    first_ts = timestamps[0]
    records = b"".join(_record(i, ts - first_ts, None, v) for i, (v, ts) in enumerate(zip(values, timestamps)))
    attributes = 0x10 if transactional else 0
    if gzip_records:
        records = gzip.compress(records)
        attributes |= 1
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            len(values) - 1,
            first_ts,
            max(timestamps),
            producer_id,
            producer_epoch,
            base_sequence,
            len(values),
        )
        + records
    )
    crc = crc32c(after_crc)
    body = struct.pack(">ibI", 0, 2, crc) + after_crc  # partition leader epoch, magic, crc
    return struct.pack(">qi", base_offset, len(body)) + body


def padded_batch(size: int, *, records: int = 1, base_timestamp: int = 1_700_000_000_000) -> bytes:
    """A batch of exactly ``size`` bytes (``records`` records sharing the padding)."""
    overhead = len(build_batch([b""] * records, base_timestamp=base_timestamp))
    pad = size - overhead
    for extra in range(0, 64):  # varint lengths grow with the value; settle on an exact fit
        values = [b"x" * ((pad - extra) // records)] * (records - 1)
        values.append(b"x" * (pad - extra - sum(len(v) for v in values)))
        batch = build_batch(values, base_timestamp=base_timestamp)
        if len(batch) == size:
            return batch
    raise ValueError(f"cannot build a batch of exactly {size} bytes")


def parse_batches(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """(base_offset, last_offset, max_timestamp, whole batch) for each batch, checking every CRC."""
    out, pos = [], 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        (crc,) = struct.unpack_from(">I", data, pos + 17)
        assert crc == crc32c(data[pos + 21 : end]), f"CRC mismatch in batch at {pos}"
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        (max_ts,) = struct.unpack_from(">q", data, pos + 35)
        out.append((base, base + last_delta, max_ts, data[pos:end]))
        pos = end
    return out


def batch_attributes(batch: bytes) -> int:
    return struct.unpack_from(">h", batch, 21)[0]
