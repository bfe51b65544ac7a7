"""Building v2 record batches.

Records are encoded into a list of byte strings (varint prefixes come from a
precomputed table) and joined once, so the per-record Python work is a few
list operations; compression and CRC are single C calls over the whole body.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from .batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    HEADER,
    HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from .codecs import compress
from .crc import crc32c
from .model import CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP, Compression, Record, TimestampType
from .varint import NULL_VARINT, VARINT_SIZES, VARINT_TABLE, VARINT_TABLE_SIZE, encode_varint, size_of_varint

# Record overhead beyond key/value/headers in the worst case: length (5),
# attributes (1), timestamp delta (10), offset delta (5).  Used for room checks.
MAX_RECORD_OVERHEAD = 21

_INT32_MAX = (1 << 31) - 1


def _now_ms() -> int:
    return int(time.time() * 1000)


def _as_bytes(data) -> bytes:
    # Copied: the builder keeps references until build(), and a caller's
    # bytearray may change in between.
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"record keys, values and header values must be bytes-like, not {type(data).__name__}")


def _encode_headers(headers) -> tuple[bytes, int]:
    """Encoded header section (count + headers) and its length."""
    table = VARINT_TABLE
    parts = [encode_varint(len(headers))]
    for item in headers:
        hkey, hvalue = item
        if not isinstance(hkey, str):
            if isinstance(hkey, (bytes, bytearray, memoryview)):
                hkey = bytes(hkey).decode("utf-8")
            else:
                raise TypeError(f"header keys must be str, not {type(hkey).__name__}")
        kb = hkey.encode("utf-8")
        parts.append(table[len(kb)] if len(kb) < VARINT_TABLE_SIZE else encode_varint(len(kb)))
        parts.append(kb)
        if hvalue is None:
            parts.append(NULL_VARINT)
        else:
            if type(hvalue) is not bytes:
                hvalue = _as_bytes(hvalue)
            parts.append(table[len(hvalue)] if len(hvalue) < VARINT_TABLE_SIZE else encode_varint(len(hvalue)))
            parts.append(hvalue)
    out = b"".join(parts)
    return out, len(out)


def estimate_record_size(key, value, headers=None) -> int:
    """Upper bound on the encoded size of one record (Java's ``estimateSizeInBytesUpperBound`` for v2)."""
    size = MAX_RECORD_OVERHEAD
    size += 1 if key is None else size_of_varint(len(key)) + len(key)
    size += 1 if value is None else size_of_varint(len(value)) + len(value)
    size += len(_encode_headers(headers)[0]) if headers else 1
    return size


class BatchBuilder:
    """Incremental v2 batch builder with size accounting (what a producer accumulates per partition).

    ``max_batch_size`` is a soft limit on the *uncompressed* batch size
    (header included) used by :meth:`has_room_for`; an empty builder always
    accepts one record, as Kafka's does.
    """

    __slots__ = (
        "compression",
        "base_offset",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "transactional",
        "control",
        "timestamp_type",
        "partition_leader_epoch",
        "log_append_time",
        "delete_horizon_ms",
        "max_batch_size",
        "_base_ts",
        "_max_ts",
        "_parts",
        "_size",
        "_count",
        "_last_delta",
    )

    def __init__(
        self,
        *,
        compression: Compression | int | str = Compression.NONE,
        base_offset: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        timestamp_type: TimestampType | int = CREATE_TIME,
        partition_leader_epoch: int = -1,
        base_timestamp: int | None = None,
        log_append_time: int | None = None,
        max_batch_size: int | None = None,
        delete_horizon_ms: int | None = None,
        control: bool = False,
    ):
        # Enum coercion is slow next to the rest; producers build many small batches.
        self.compression = compression if type(compression) is Compression else Compression.parse(compression)
        self.base_offset = base_offset
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.transactional = bool(transactional)
        self.control = bool(control)
        if type(timestamp_type) is not TimestampType:
            timestamp_type = TimestampType(timestamp_type)
        if timestamp_type is TimestampType.NO_TIMESTAMP_TYPE:
            raise ValueError("v2 batches need CREATE_TIME or LOG_APPEND_TIME")
        self.timestamp_type = timestamp_type
        self.partition_leader_epoch = partition_leader_epoch
        self.log_append_time = log_append_time
        self.delete_horizon_ms = delete_horizon_ms
        self.max_batch_size = max_batch_size
        # With a delete horizon, the base timestamp field holds the horizon
        # and record deltas are taken from it (as Kafka's log cleaner writes).
        self._base_ts = delete_horizon_ms if delete_horizon_ms is not None else base_timestamp
        self._max_ts = NO_TIMESTAMP
        self._parts: list = []
        self._size = HEADER_SIZE
        self._count = 0
        self._last_delta = -1

    # ---------------------------------------------------------- accounting

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def size_in_bytes(self) -> int:
        """Uncompressed size of the batch built so far, header included."""
        return self._size

    @property
    def is_empty(self) -> bool:
        return self._count == 0

    @property
    def next_offset(self) -> int:
        return self.base_offset + self._last_delta + 1

    def has_room_for(self, key=None, value=None, headers=None) -> bool:
        if self._count == 0 or self.max_batch_size is None:
            return True
        return self._size + estimate_record_size(key, value, headers) <= self.max_batch_size

    # ------------------------------------------------------------ append

    def append(
        self,
        key=None,
        value=None,
        headers: Sequence | None = None,
        timestamp: int | None = None,
        *,
        offset: int | None = None,
    ) -> int:
        """Append one record; returns its offset delta.

        ``offset`` (absolute) lets callers leave gaps, as a compacted log
        has; it must be above the previous one.
        """
        if timestamp is None:
            timestamp = _now_ms()
        if offset is None:
            delta = self._last_delta + 1
        else:
            delta = offset - self.base_offset
            if delta <= self._last_delta:
                raise ValueError(f"offset {offset} does not follow {self.base_offset + self._last_delta}")
        if delta > _INT32_MAX:
            raise ValueError("offset delta exceeds int32")
        if self._base_ts is None:
            self._base_ts = timestamp
        self._size += _encode_into(self._parts, delta, timestamp - self._base_ts, key, value, headers)
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        self._count += 1
        self._last_delta = delta
        return delta

    def try_append(
        self, key=None, value=None, headers: Sequence | None = None, timestamp: int | None = None
    ) -> int | None:
        """Append unless the record would take the batch past ``max_batch_size``.

        Returns the offset delta, or ``None`` (nothing appended) when the
        batch is full.  The check uses the record's exact encoded size; an
        empty builder always takes the record.
        """
        if timestamp is None:
            timestamp = _now_ms()
        base_ts = self._base_ts
        if base_ts is None:
            base_ts = timestamp
        parts = self._parts
        delta = self._last_delta + 1
        size = _encode_into(parts, delta, timestamp - base_ts, key, value, headers)
        limit = self.max_batch_size
        if limit is not None and self._count and self._size + size > limit:
            del parts[-_PARTS_PER_RECORD:]  # encoded to learn its exact size: taken back
            return None
        self._base_ts = base_ts
        self._size += size
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        self._count += 1
        self._last_delta = delta
        return delta

    def extend(self, records: Iterable) -> None:
        """Append many records (see :func:`build_batch` for the accepted shapes)."""
        _append_all(self, records)

    def append_section(self, section, count: int, size: int, base_ts: int, max_ts: int) -> None:
        """Append ``count`` records already encoded (``columnar.ColumnarRecords.encode``) with offset deltas
        from ``next_offset - base_offset`` on and timestamp deltas from ``base_ts`` (the batch's base
        timestamp: the one it already has, or the first record's); ``size`` is their encoded size."""
        if count <= 0:
            return
        if self._base_ts is None:
            self._base_ts = base_ts
        elif base_ts != self._base_ts:
            raise ValueError("records encoded against another base timestamp")
        if self._last_delta + count > _INT32_MAX:
            raise ValueError("offset delta exceeds int32")
        self._parts.append(section)
        self._size += size
        self._count += count
        self._last_delta += count
        if max_ts > self._max_ts:
            self._max_ts = max_ts

    # ------------------------------------------------------------- build

    def attributes(self, *, compressed: bool = True) -> int:
        attrs = self.compression.value if compressed else 0
        if self.timestamp_type is LOG_APPEND_TIME:
            attrs |= TIMESTAMP_TYPE_MASK
        if self.transactional:
            attrs |= TRANSACTIONAL_MASK
        if self.control:
            attrs |= CONTROL_MASK
        if self.delete_horizon_ms is not None:
            attrs |= DELETE_HORIZON_MASK
        return attrs

    def build(self) -> bytes:
        """The finished batch (compressed, CRC set).  The builder can keep growing afterwards."""
        if self._count == 0:
            raise ValueError("a record batch needs at least one record")
        parts = self._parts
        if self.compression is not Compression.NONE:
            parts = [compress(self.compression, b"".join(parts), magic=2)]
        elif len(parts) > _JOIN_FIRST:  # the per-record path's many small pieces: one CRC call over them joined
            parts = [b"".join(parts)]
        if self.timestamp_type is LOG_APPEND_TIME:
            max_ts = self.log_append_time if self.log_append_time is not None else _now_ms()
        else:
            max_ts = self._max_ts
        fields = [
            self.base_offset,
            HEADER_SIZE - 12 + sum(map(len, parts)),
            self.partition_leader_epoch,
            2,
            0,
            self.attributes(),
            self._last_delta,
            self._base_ts,
            max_ts,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self._count,
        ]
        header = HEADER.pack(*fields)
        crc = crc32c(header[ATTRIBUTES_OFFSET:])
        for part in parts:
            crc = crc32c(part, crc)
        fields[4] = crc
        # the records (the columnar path's few sections) are copied once, into the batch
        return b"".join([HEADER.pack(*fields), *parts])


_PARTS_PER_RECORD = 9  # what _encode_into appends for one record
# up to this many parts, build() runs the CRC over each and copies them straight into the batch
_JOIN_FIRST = 64


def _encode_into(
    parts: list,
    delta: int,
    ts_delta: int,
    key,
    value,
    headers,
    table=VARINT_TABLE,
    sizes=VARINT_SIZES,
    tsize=VARINT_TABLE_SIZE,
    null=NULL_VARINT,
) -> int:
    """Append one encoded record to ``parts`` (``_PARTS_PER_RECORD`` byte strings); returns its size.

    The one per-record encoder of every append path, so the producer's and the bulk path's per-record cost
    is this function: it keeps to local names (the table defaults) and adds the record's size up as it goes,
    from the table of varint sizes, instead of measuring the pieces afterwards."""
    if 0 <= ts_delta < tsize:
        tsb = table[ts_delta]
        n = 1 + sizes[ts_delta]  # the attributes byte and the timestamp delta
    else:
        tsb = encode_varint(ts_delta)
        n = 1 + len(tsb)
    if delta < tsize:
        odb = table[delta]
        n += sizes[delta]
    else:
        odb = encode_varint(delta)
        n += len(odb)
    if key is None:
        kb = null
        key = b""
        n += 1
    else:
        if type(key) is not bytes:
            key = _as_bytes(key)
        klen = len(key)
        if klen < tsize:
            kb = table[klen]
            n += sizes[klen] + klen
        else:
            kb = encode_varint(klen)
            n += len(kb) + klen
    if value is None:
        vb = null
        value = b""
        n += 1
    else:
        if type(value) is not bytes:
            value = _as_bytes(value)
        vlen = len(value)
        if vlen < tsize:
            vb = table[vlen]
            n += sizes[vlen] + vlen
        else:
            vb = encode_varint(vlen)
            n += len(vb) + vlen
    if headers:
        hb, hlen = _encode_headers(headers)
        n += hlen
    else:
        hb = b"\x00"
        n += 1
    if n < tsize:
        parts += (table[n], b"\x00", tsb, odb, kb, key, vb, value, hb)
        return n + sizes[n]
    lb = encode_varint(n)
    parts += (lb, b"\x00", tsb, odb, kb, key, vb, value, hb)
    return n + len(lb)


def _append_all(builder: BatchBuilder, records: Iterable) -> None:
    """Fast path of :meth:`BatchBuilder.append` over many records."""
    parts = builder._parts
    encode = _encode_into
    base_offset = builder.base_offset
    base_ts = builder._base_ts
    max_ts = builder._max_ts
    last = builder._last_delta
    size = 0
    count = 0
    now = None
    ts: int | None  # a tuple's timestamp may be None (now); declared here, not in the loop (no run-time cost)
    headers: list | None
    for count, item in enumerate(records, 1):  # noqa: B007  (count is read after the loop)
        if type(item) is Record:
            offset, ts, key, value, headers = item
            delta = offset - base_offset
            if delta <= last:
                raise ValueError(f"offset {offset} does not follow {base_offset + last}")
        else:
            n = len(item)
            if n == 2:
                key, value = item
                headers = ts = None
            elif n == 3:
                key, value, headers = item
                ts = None
            else:
                key, value, headers, ts = item
            delta = last + 1
        if ts is None:
            if now is None:
                now = _now_ms()
            ts = now
        if base_ts is None:
            base_ts = builder._base_ts = ts
        if ts > max_ts:
            max_ts = ts
        size += encode(parts, delta, ts - base_ts, key, value, headers)
        last = delta
    if last > _INT32_MAX:
        raise ValueError("offset delta exceeds int32")
    builder._size += size
    builder._count += count
    builder._last_delta = last
    builder._max_ts = max_ts


def build_batch(
    records: Iterable,
    *,
    compression: Compression | int | str = Compression.NONE,
    base_offset: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    timestamp_type: TimestampType | int = CREATE_TIME,
    partition_leader_epoch: int = -1,
    base_timestamp: int | None = None,
    log_append_time: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Build one v2 batch.

    ``records`` items are :class:`Record` (offset and timestamp kept; the
    default ``base_offset`` is then the first record's offset) or tuples
    ``(key, value)``, ``(key, value, headers)``, ``(key, value, headers,
    timestamp)`` numbered consecutively from ``base_offset`` (default 0).
    A ``None`` timestamp means now.  ``base_timestamp`` defaults to the first
    record's timestamp; ``log_append_time`` (with
    ``timestamp_type=LOG_APPEND_TIME``) defaults to now.
    """
    if not isinstance(records, (list, tuple)):
        records = list(records)
    if base_offset is None:
        base_offset = records[0].offset if records and type(records[0]) is Record else 0
    builder = BatchBuilder(
        compression=compression,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
        timestamp_type=timestamp_type,
        partition_leader_epoch=partition_leader_epoch,
        base_timestamp=base_timestamp,
        log_append_time=log_append_time,
        delete_horizon_ms=delete_horizon_ms,
    )
    _append_all(builder, records)
    return builder.build()
