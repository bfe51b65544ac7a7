"""Record batches straight into Arrow columns: the consumer's fast path (the Spark hot path).

One pass over each batch's (decompressed) records section reads the varints
of each record and appends four machine ints (offset, timestamp, key end,
value end) to ``array`` buffers and two ``bytes`` slices to lists; keys and
values are then joined once per column and handed to Arrow with
``from_buffers`` (no per-record Python objects in the result, and no
per-record pyarrow calls). Headers are decoded only for records that have
them, and only when asked for.

pyarrow is imported when this module is (the ``arrow`` extra); the rest of
the client does not need it.

Schema of the result (``SCHEMA``)::

    topic string, partition int32, offset int64, timestamp timestamp[ms],
    timestamp_type int8, key binary, value binary
    [, headers list<struct<key: string, value: binary>>]
"""
from __future__ import annotations

from array import array

import pyarrow as pa
import pyarrow.compute as pc

from ..protocol.records import CorruptRecordError, RecordBatch, decompress
from ..protocol.records.batch import HEADER, RECORDS_OFFSET

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_BASE_FIELDS = [
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp", pa.timestamp("ms"), nullable=False),
    pa.field("timestamp_type", pa.int8(), nullable=False),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
]
SCHEMA = pa.schema(_BASE_FIELDS)
SCHEMA_WITH_HEADERS = pa.schema(_BASE_FIELDS + [pa.field("headers", HEADER_TYPE)])

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08


def _varint(data, pos):
    """Zigzag varint at ``pos`` -> (value, new pos); the slow path of the inline decoder."""
    shift = 0
    raw = 0
    while True:
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes", position=pos)


class ArrowColumns:
    """Accumulates decoded records of one partition; ``to_batch()`` makes a ``pyarrow.RecordBatch``."""

    __slots__ = ("topic", "partition", "headers", "offsets", "timestamps", "ts_types", "keys", "key_lens",
                 "values", "value_lens", "header_rows")

    def __init__(self, topic: str, partition: int, *, headers: bool = False):
        self.topic = topic
        self.partition = partition
        self.headers = headers
        self.offsets = array("q")
        self.timestamps = array("q")
        self.ts_types: list[tuple[int, int]] = []   # (row where a run starts, type), runs of one type
        self.keys: list[bytes] = []
        self.key_lens = array("i")      # -1: null
        self.values: list[bytes] = []
        self.value_lens = array("i")
        self.header_rows: dict[int, list] = {}

    def __len__(self) -> int:
        return len(self.offsets)

    def add_batch(self, batch: RecordBatch, min_offset: int = 0) -> int:
        """Decode one v2 batch (not a control batch) into the columns; returns how many records were added."""
        (base_offset, _, _, _, _, attrs, last_delta, base_ts, max_ts, _, _, _, count) = HEADER.unpack_from(batch.buffer)
        if base_offset + last_delta < min_offset or count <= 0:
            return 0
        codec = attrs & _COMPRESSION_MASK
        body = batch.buffer[RECORDS_OFFSET:]
        data = decompress(codec, body, magic=2) if codec else body.tobytes()
        if not isinstance(data, bytes):
            data = bytes(data)
        log_append = attrs & _TIMESTAMP_TYPE_MASK
        ts_type = 1 if log_append else 0
        n0 = len(self.offsets)
        if not self.ts_types or self.ts_types[-1][1] != ts_type:
            self.ts_types.append((n0, ts_type))
        try:
            self._decode(data, count, base_offset, base_ts, max_ts if log_append else None, min_offset)
        except IndexError:
            raise CorruptRecordError("record runs past the end of the batch", base_offset=base_offset) from None
        return len(self.offsets) - n0

    def _decode(self, data: bytes, count: int, base_offset: int, base_ts: int, log_append_ts, min_offset: int):
        pos = 0
        if min_offset > base_offset:  # the fetch position is inside this batch: skip the records before it
            skip_below = min_offset - base_offset
            while count:
                ln, p = _varint(data, pos)
                _, q = _varint(data, p + 1)   # timestamp delta
                od, _ = _varint(data, q)
                if od >= skip_below:
                    break
                pos = p + ln
                count -= 1
        if not count:
            return
        ts_app = self.timestamps.append
        keys_app = self.keys.append
        klen_app = self.key_lens.append
        vals_app = self.values.append
        vlen_app = self.value_lens.append
        row0 = len(self.timestamps)
        want_headers = self.headers
        # offset deltas are 0, 1, 2, ... except in batches compaction thinned out: check, don't store
        _, p = _varint(data, pos)
        _, p = _varint(data, p + 1)
        first_od, _ = _varint(data, p)
        expected = first_od - 1
        irregular = None
        for i in range(count):
            # record length (not needed: the fields tell where the record ends) + attributes
            if data[pos] < 0x80:
                pos += 2
            elif data[pos + 1] < 0x80:
                pos += 3
            else:
                pos = _varint(data, pos)[1] + 1
            # timestamp delta
            b = data[pos]
            if b < 0x80:
                ts_app(base_ts + ((b >> 1) ^ -(b & 1)))
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    raw = (b & 0x7F) | (b2 << 7)
                    ts_app(base_ts + ((raw >> 1) ^ -(raw & 1)))
                    pos += 2
                else:
                    tsd, pos = _varint(data, pos)
                    ts_app(base_ts + tsd)
            # offset delta
            b = data[pos]
            if b < 0x80:
                od = b >> 1
                pos += 1
            else:
                od, pos = _varint(data, pos)
            expected += 1
            if od != expected:
                if irregular is None:
                    irregular = list(range(first_od, expected))
                expected = od
            if irregular is not None:
                irregular.append(od)
            # key
            b = data[pos]
            if b == 1:  # null
                klen_app(-1)
                pos += 1
            else:
                if b < 0x80:
                    kl = b >> 1
                    pos += 1
                else:
                    kl, pos = _varint(data, pos)
                keys_app(data[pos:pos + kl])
                klen_app(kl)
                pos += kl
            # value
            b = data[pos]
            if b < 0x80:
                if b == 1:
                    vlen_app(-1)
                    pos += 1
                    vl = 0
                else:
                    vl = b >> 1
                    pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    vl = ((b & 0x7F) | (b2 << 7)) >> 1
                    pos += 2
                else:
                    vl, pos = _varint(data, pos)
            if vl:
                vals_app(data[pos:pos + vl])
                vlen_app(vl)
                pos += vl
            elif b != 1:
                vlen_app(0)
            # headers: almost always a count of 0
            if data[pos]:
                hs, pos = _headers(data, pos)
                if want_headers:
                    self.header_rows[row0 + i] = hs
            else:
                pos += 1
        if pos != len(data):
            raise CorruptRecordError(f"records end at byte {pos} of a {len(data)}-byte records section",
                                     base_offset=base_offset)
        if log_append_ts is not None:
            n = len(self.timestamps)
            del self.timestamps[row0:]
            self.timestamps.extend(array("q", [log_append_ts]) * (n - row0))
        if irregular is None:
            start = base_offset + first_od
            self.offsets.extend(range(start, start + count))
        else:
            self.offsets.extend(base_offset + od for od in irregular)

    def to_batch(self) -> pa.RecordBatch:
        n = len(self.offsets)
        cols = [
            _repeat_string(self.topic, n),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(array("i", [self.partition]) * n)]),
            pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self.offsets)]),
            pa.Array.from_buffers(pa.timestamp("ms"), n, [None, pa.py_buffer(self.timestamps)]),
            self._ts_type_column(n),
            _binary(n, self.key_lens, self.keys),
            _binary(n, self.value_lens, self.values),
        ]
        schema = SCHEMA
        if self.headers:
            cols.append(_headers_column(n, self.header_rows))
            schema = SCHEMA_WITH_HEADERS
        return pa.RecordBatch.from_arrays(cols, schema=schema)

    def _ts_type_column(self, n):
        if len(self.ts_types) <= 1:
            value = self.ts_types[0][1] if self.ts_types else 0
            return pa.Array.from_buffers(pa.int8(), n, [None, pa.py_buffer(bytes([value]) * n)])
        out = bytearray(n)
        runs = self.ts_types + [(n, None)]
        for (start, t), (stop, _) in zip(runs, runs[1:]):
            out[start:stop] = bytes([t]) * (stop - start)
        return pa.Array.from_buffers(pa.int8(), n, [None, pa.py_buffer(bytes(out))])


def _repeat_string(s: str, n: int) -> pa.Array:
    raw = s.encode()
    ends = array("i", range(0, len(raw) * (n + 1), len(raw))) if raw else array("i", [0]) * (n + 1)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(ends), pa.py_buffer(raw * n)])


def _binary(n: int, lens: array, chunks: list[bytes]) -> pa.Array:
    """A binary column from lengths (-1: null) and the non-null values in order; offsets computed in C."""
    if not chunks:
        if n and lens.count(-1) == n:
            return pa.nulls(n, pa.binary())
    data = b"".join(chunks)
    if len(data) > 0x7FFFFFFF:
        raise OverflowError("more than 2 GiB of keys or values in one Arrow batch")
    length = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(lens)])
    valid = pc.greater_equal(length, 0)
    sizes = pc.max_element_wise(length, 0)
    ends = pc.cumulative_sum(sizes)
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), ends.cast(pa.int32())])
    null_count = n - pc.sum(valid).as_py() if n else 0
    validity = None
    if null_count:
        validity = pc.invert(pc.is_null(pc.if_else(valid, True, None))).buffers()[1]
        validity = valid.buffers()[1] if valid.offset == 0 and valid.null_count == 0 else validity
    return pa.Array.from_buffers(pa.binary(), n, [validity, offsets.buffers()[1], pa.py_buffer(data)],
                                 null_count=null_count)


def _headers(data: bytes, pos: int) -> tuple[list, int]:
    count, pos = _varint(data, pos)
    out = []
    for _ in range(count):
        kl, pos = _varint(data, pos)
        key = data[pos:pos + kl].decode()
        pos += kl
        vl, pos = _varint(data, pos)
        if vl < 0:
            value = None
        else:
            value = data[pos:pos + vl]
            pos += vl
        out.append((key, value))
    return out, pos


def _headers_column(n: int, rows: dict[int, list]) -> pa.Array:
    if not rows:
        ends = array("i", [0]) * (n + 1)
        empty = pa.StructArray.from_arrays([pa.array([], pa.string()), pa.array([], pa.binary())], ["key", "value"])
        return pa.ListArray.from_arrays(pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(ends)]), empty,
                                        type=HEADER_TYPE)
    keys, values, ends = [], [], array("i", [0])
    total = 0
    for i in range(n):
        hs = rows.get(i)
        if hs:
            for k, v in hs:
                keys.append(k)
                values.append(v)
            total += len(hs)
        ends.append(total)
    items = pa.StructArray.from_arrays([pa.array(keys, pa.string()), pa.array(values, pa.binary())], ["key", "value"])
    return pa.ListArray.from_arrays(pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(ends)]), items,
                                    type=HEADER_TYPE)


def empty_batch(headers: bool = False) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=SCHEMA_WITH_HEADERS if headers else SCHEMA)


__all__ = ["ArrowColumns", "SCHEMA", "SCHEMA_WITH_HEADERS", "HEADER_TYPE", "empty_batch"]
