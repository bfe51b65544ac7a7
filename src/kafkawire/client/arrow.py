"""Record batches straight into Arrow columns: the consumer's fast path (the Spark hot path).

Each v2 batch is decoded in three steps, none of which makes a Python object per record:

1. **Where records start.** A record's length varint says where the next one starts, so finding
   the starts is a walk from record to record. The walk jumps over runs of records of one size
   (fixed-size payloads, the common case of generated data): when the length bytes of the record
   one size further on are the same, a strided slice of the buffer (C) counts how many records in
   a row start with them. Only records whose size differs from their neighbour's take a Python step.
2. **The fields of every record at once** (numpy): from the start positions, each varint
   (attributes, timestamp delta, offset delta, key length, value length, header count) is read
   for all records together; a varint longer than one byte costs one more gather for the records
   that have one. The layout is then checked for every record in one go (lengths >= -1, key and
   value inside the record, the header count ending it), so a corrupt section raises
   :class:`CorruptRecordError` before anything is kept. Headers are decoded one by one, only for
   the records that have some.
3. **Arrow columns.** Keys and values are copied out of each batch's records section into one data
   buffer per column (the sections are never joined: that copy of every byte of every record cost
   more than the gather). Where a batch's spans come in a few long runs of one length starting one
   stride apart (records of one size: generated data), a run is a strided view of the section
   copied row by row, one fixed-size memcpy each, and its offsets are an arithmetic series. Other
   batches go through Arrow: the section with the offsets ``[0, value0 start, value0 end, value1
   start, ...]`` is a valid binary array whose odd elements are the values, and one ``filter`` (C,
   memcpy) makes them contiguous. Null keys and values are a validity bitmap over spans of length 0.
   Offsets and timestamps come from numpy arrays without a copy.

Offset deltas are read from the records (not assumed to be 0, 1, 2, ...), checked to increase and to
end at the batch's last offset delta or before, so compacted batches need no special case.

pyarrow and numpy are imported when this module is (the ``arrow`` extra); the rest of the client
does not need them.

Schema of the result (``SCHEMA``)::

    topic string, partition int32, offset int64, timestamp timestamp[ms],
    timestamp_type int8, key binary, value binary
    [, headers list<struct<key: string, value: binary>>]
"""

from __future__ import annotations

from array import array

import numpy as np
import pyarrow as pa

from ..protocol.records import CorruptRecordError, RecordBatch
from ..protocol.records.batch import HEADER, MIN_RECORD_SIZE
from ..protocol.records.walk import (
    expand as _expand,
    record_runs as _record_runs,
    varint as _varint,
    varints as _varints,
)

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

_TIMESTAMP_TYPE_MASK = 0x08
# the records sections of one piece stay below this: its keys or values are one buffer with int32 offsets
MAX_BUFFER = (1 << 31) - 1


class _Piece:
    """Decoded records whose keys and values fit in one column buffer (below MAX_BUFFER bytes)."""

    __slots__ = ("sections", "size", "key_pos", "value_pos", "key_valid", "value_valid", "keyed")

    def __init__(self):
        self.sections: list[bytes] = []  # the records section of each batch
        self.size = 0
        self.key_pos: list[np.ndarray] = []  # per batch: (n, 2) key start/end in ``data``
        self.value_pos: list[np.ndarray] = []
        self.key_valid: list[np.ndarray] = []  # per batch: bool per record
        self.value_valid: list[np.ndarray] = []  # per batch: bool per record, or None when no value is null
        self.keyed = False


class ArrowColumns:
    """Accumulates decoded records of one partition; ``to_batch()`` makes a ``pyarrow.RecordBatch``."""

    __slots__ = (
        "topic",
        "partition",
        "headers",
        "header_rows",
        "_offsets",
        "_timestamps",
        "_ts_types",
        "_pieces",
        "_n",
    )

    def __init__(self, topic: str, partition: int, *, headers: bool = False):
        self.topic = topic
        self.partition = partition
        self.headers = headers
        self.header_rows: dict[int, list] = {}
        self._offsets: list[np.ndarray] = []
        self._timestamps: list[np.ndarray] = []
        self._ts_types: list[tuple[int, int]] = []  # (rows, type) per batch
        self._pieces: list[_Piece] = [_Piece()]
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def nbytes(self) -> int:
        return sum(p.size for p in self._pieces)

    def add_batch(self, batch: RecordBatch, min_offset: int = 0) -> int:
        """Decode one v2 batch (not a control batch) into the columns; returns how many records were added.

        A corrupt batch raises :class:`CorruptRecordError` and adds nothing."""
        (base_offset, _, _, _, _, attrs, last_delta, base_ts, max_ts, _, _, _, count) = HEADER.unpack_from(batch.buffer)
        if base_offset + last_delta < min_offset or count <= 0:
            return 0
        data = batch.records_payload()
        if not isinstance(data, bytes):  # an uncompressed section: a view of the fetch response
            data = data.tobytes()  # bytes index and slice faster than a memoryview in the walk
        end = len(data)
        if count > end // MIN_RECORD_SIZE:
            raise CorruptRecordError(
                f"record count {count} cannot fit in {end} bytes of records", base_offset=base_offset
            )
        try:
            fields = self._parse(data, end, count, base_offset, last_delta, min_offset)
        except CorruptRecordError as exc:
            raise exc.with_context(base_offset=base_offset, position=batch.position) from exc
        except (IndexError, UnicodeDecodeError) as exc:
            raise CorruptRecordError(
                f"malformed record: {exc}", base_offset=base_offset, position=batch.position
            ) from None
        if fields is None:
            return 0
        od, ts, ks, ke, kvalid, vs, ve, vvalid, hrows = fields
        n = len(od)
        piece = self._pieces[-1]
        if piece.size + end > MAX_BUFFER:
            piece = _Piece()
            self._pieces.append(piece)
        base = piece.size
        piece.sections.append(data)
        piece.size += end
        row0 = self._n
        self._offsets.append(od + base_offset)
        if attrs & _TIMESTAMP_TYPE_MASK:
            self._timestamps.append(np.full(n, max_ts, np.int64))
            self._ts_types.append((n, 1))
        else:
            ts += base_ts
            self._timestamps.append(ts)
            self._ts_types.append((n, 0))
        if kvalid is not None:
            piece.keyed = True
        piece.key_pos.append(np.stack([ks + base, ke + base], axis=1))
        piece.key_valid.append(np.zeros(n, bool) if kvalid is None else kvalid)
        piece.value_pos.append(np.stack([vs + base, ve + base], axis=1))
        piece.value_valid.append(vvalid)
        if self.headers:
            for i, hs in hrows:
                self.header_rows[row0 + i] = hs
        self._n += n
        return n

    @staticmethod
    def _parse(data, end: int, count: int, base_offset: int, last_delta: int, min_offset: int):
        """The fields of the records of one records section, checked; None when every record is below min_offset."""
        run_starts, run_sizes, run_lengths = _record_runs(data, 0, end, count)
        start, stop = _expand(run_starts, run_sizes, run_lengths, count)
        u = np.frombuffer(data, np.uint8)
        length, lw = _varints(u, start)
        at = start + lw + 1  # after the length and the attributes byte
        ts, w = _varints(u, at)
        at = at + w
        od, w = _varints(u, at)
        at = at + w
        kl, w = _varints(u, at)
        ks = at + w
        ke = ks + np.maximum(kl, 0)
        vl, w = _varints(u, ke)
        vs = ke + w
        ve = vs + np.maximum(vl, 0)
        hc = u.take(ve, mode="clip")
        # every record: its length as the walk read it, key and value lengths >= -1 (-1: null), its
        # value inside it, and a header count; records without headers end right after the count (0)
        # (lengths compared with what is left of the record first: a corrupt huge length cannot wrap around)
        ok = (kl >= -1) & (kl < stop - ks) & (vl >= -1) & (vl < stop - vs) & (start + lw + length == stop)
        plain = hc == 0
        ok &= ~plain | (ve + 1 == stop)
        if not ok.all():
            bad = int(np.flatnonzero(~ok)[0])
            raise CorruptRecordError(f"record {bad} of the batch is malformed (at byte {int(start[bad])})")
        if (od[0] < 0) | (od[-1] > last_delta) | (count > 1 and bool((od[1:] <= od[:-1]).any())):
            raise CorruptRecordError("offset deltas do not increase within the batch's last offset delta")
        hrows = []
        if not plain.all():
            for i in np.flatnonzero(~plain).tolist():
                hs, pos = _headers(data, int(ve[i]))
                if pos != stop[i]:
                    raise CorruptRecordError(f"record {i} of the batch: its headers end at {pos}, not {int(stop[i])}")
                hrows.append((i, hs))
        first = 0
        if min_offset > base_offset:
            first = int(np.searchsorted(od, min_offset - base_offset))
            if first >= count:
                return None
            if first:
                od, ts, kl, ks, ke, vl, vs, ve = (x[first:] for x in (od, ts, kl, ks, ke, vl, vs, ve))
                hrows = [(i - first, hs) for i, hs in hrows if i >= first]
        kvalid = kl >= 0
        if not kvalid.any():
            kvalid = None  # every key null: the common case of data pipelines
        vvalid = vl >= 0
        if vvalid.all():
            vvalid = None
        return od, ts, ks, ke, kvalid, vs, ve, vvalid, hrows

    def to_batch(self) -> pa.RecordBatch:
        n = self._n
        keys, values = [], []
        for piece in self._pieces:
            if not piece.value_pos:
                continue
            # spans copied out of each batch's section into one buffer per column: the sections are
            # never joined (that copy of every byte cost more than the gather itself)
            values.append(_assemble(piece, piece.value_pos, piece.value_valid, _plan(piece.value_pos)))
            if piece.keyed:
                keys.append(_assemble(piece, piece.key_pos, piece.key_valid, _plan(piece.key_pos)))
            else:
                keys.append(pa.nulls(sum(len(p) for p in piece.key_pos), pa.binary()))
        cols = [
            _repeat_string(self.topic, n),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.full(n, self.partition, np.int32))]),
            pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(_concat(self._offsets, np.int64))]),
            pa.Array.from_buffers(pa.timestamp("ms"), n, [None, pa.py_buffer(_concat(self._timestamps, np.int64))]),
            self._ts_type_column(n),
            _one(keys),
            _one(values),
        ]
        schema = SCHEMA
        if self.headers:
            cols.append(_headers_column(n, self.header_rows))
            schema = SCHEMA_WITH_HEADERS
        return pa.RecordBatch.from_arrays(cols, schema=schema)

    def _ts_type_column(self, n):
        types = {t for _, t in self._ts_types}
        if len(types) <= 1:
            value = types.pop() if types else 0
            return pa.Array.from_buffers(pa.int8(), n, [None, pa.py_buffer(bytes([value]) * n)])
        out = np.repeat(np.array([t for _, t in self._ts_types], np.int8), [k for k, _ in self._ts_types])
        return pa.Array.from_buffers(pa.int8(), n, [None, pa.py_buffer(out)])


def _concat(parts: list, dtype) -> np.ndarray:
    if not parts:
        return np.empty(0, dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _one(arrays: list) -> pa.Array:
    if not arrays:
        return pa.array([], pa.binary())
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)


def _with_validity(arr: pa.Array, positions: list, valid: list) -> pa.Array:
    if all(v is None for v in valid):
        return arr
    n = len(arr)
    bits = np.concatenate([np.ones(len(p), bool) if v is None else v for p, v in zip(positions, valid)])
    nulls = n - int(np.count_nonzero(bits))
    if nulls == n:
        return pa.nulls(n, pa.binary())
    buffers = arr.buffers()
    return pa.Array.from_buffers(
        pa.binary(),
        n,
        [pa.py_buffer(np.packbits(bits, bitorder="little")), buffers[1], buffers[2]],
        null_count=nulls,
        offset=arr.offset,
    )


def _filter_spans(buf: pa.Buffer, pos: np.ndarray) -> pa.Array:
    """The spans ``pos`` (an (n, 2) array of start, end) of ``buf`` as one binary array, without nulls."""
    n = len(pos)
    # [0, s0, e0, s1, e1, ...]: element 2i+1 of the binary array over buf is span i
    offsets = np.empty(2 * n + 1, np.int32)
    offsets[0] = 0
    offsets[1:] = pos.reshape(-1)
    spans = pa.Array.from_buffers(pa.binary(), 2 * n, [None, pa.py_buffer(offsets), buf])
    return spans.filter(_mask(2 * n, b"\xaa"))


# a batch is copied run by run when its runs average at least this many spans; below, the Python step
# per run costs more than the filter path
_MIN_RUN = 32


def _even_runs(pos: np.ndarray) -> np.ndarray | None:
    """Where the runs of evenly spaced spans of one length start in ``pos`` (an (n, 2) array of start,
    end), ending with n; None when the runs are too short to be worth copying one by one."""
    k = len(pos)
    if k < 2:
        return np.array([0, k])
    starts = pos[:, 0]
    lengths = pos[:, 1] - starts
    gaps = starts[1:] - starts[:-1]
    # a run ends after span i when span i + 1 has another length, or when the gap after span i is not
    # the one before it (span i + 1 is not where the run's stride puts it); a run of one span is fine
    ends = lengths[1:] != lengths[:-1]
    ends[1:] |= gaps[1:] != gaps[:-1]
    cut = np.flatnonzero(ends)
    if len(cut) + 1 > k // _MIN_RUN:
        return None if len(cut) else np.array([0, k])
    return np.concatenate(([0], cut + 1, [k]))


def _plan(positions: list) -> list:
    """``_even_runs`` of every batch."""
    return [_even_runs(p) for p in positions]


def _assemble(piece: _Piece, positions: list, valid: list, runs: list) -> pa.Array:
    """Binary column of the spans ``positions`` (one (n, 2) array of start, end in the piece per batch),
    null where ``valid`` is False, copied out of each batch's section into one data buffer.

    Where a batch's spans come in a few long runs of one length L starting one stride S apart
    (records of one size: generated data; a batch has two or three, as offset deltas grow a byte
    at 64 and 8192), each run is copied as rows of a strided view of the section, one fixed-size
    memcpy per row. Other batches (``runs`` None for them) have their spans filtered out of their
    section by Arrow, then copied in."""
    n = sum(len(p) for p in positions)
    parts = []
    size = 0
    base = 0
    for section, pos, batch_runs in zip(piece.sections, positions, runs):
        if batch_runs is None:
            arr = _filter_spans(pa.py_buffer(section), pos - base)
            offs = np.frombuffer(arr.buffers()[1], np.int32, len(arr) + 1, 4 * arr.offset)
            parts.append((arr, offs))
            size += int(offs[-1] - offs[0])
        else:
            lengths = pos[:, 1] - pos[:, 0]
            parts.append(lengths)
            size += int(lengths.sum())
        base += len(section)
    data = np.empty(size, np.uint8)
    offsets = np.empty(n + 1, np.int32)
    offsets[0] = 0
    row = at = base = 0
    for section, pos, batch_runs, part in zip(piece.sections, positions, runs, parts):
        k = len(pos)
        if batch_runs is not None:
            offsets[row + 1 : row + k + 1] = np.cumsum(part) + at
            u = np.frombuffer(section, np.uint8)
            for i, j in zip(batch_runs[:-1].tolist(), batch_runs[1:].tolist()):
                length = int(part[i])
                if length:
                    stride = int(pos[i + 1, 0] - pos[i, 0]) if j - i > 1 else length
                    # rows of one fixed-size void element: numpy copies each with one memcpy
                    row_type = np.dtype((np.void, length))
                    start = int(pos[i, 0]) - base
                    rows = np.ndarray((j - i,), row_type, buffer=u, offset=start, strides=(stride,))
                    data[at : at + (j - i) * length].view(row_type)[...] = rows
                    at += (j - i) * length
        else:
            arr, offs = part
            first, last = int(offs[0]), int(offs[-1])
            offsets[row + 1 : row + k + 1] = offs[1:] + (at - first)
            if last > first:
                data[at : at + last - first] = np.frombuffer(arr.buffers()[2], np.uint8, last - first, first)
            at += last - first
        row += k
        base += len(section)
    arr = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return _with_validity(arr, positions, valid)


def _mask(count: int, pattern: bytes) -> pa.Array:
    """A boolean array of ``count`` whose bits repeat ``pattern`` (0xaa: the odd elements)."""
    return pa.Array.from_buffers(pa.bool_(), count, [None, pa.py_buffer(pattern * ((count + 7) // 8))])


def _repeat_string(s: str, n: int) -> pa.Array:
    raw = s.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(raw))
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def _headers(data, pos: int) -> tuple[list, int]:
    count, pos = _varint(data, pos)
    if count < 0:
        raise CorruptRecordError(f"negative header count {count}")
    out = []
    for _ in range(count):
        kl, pos = _varint(data, pos)
        if kl < 0 or pos + kl > len(data):
            raise CorruptRecordError(f"header key length {kl}")
        key = bytes(data[pos : pos + kl]).decode()
        pos += kl
        vl, pos = _varint(data, pos)
        if vl < 0:
            value = None
        else:
            if pos + vl > len(data):
                raise CorruptRecordError(f"header value length {vl}")
            value = bytes(data[pos : pos + vl])
            pos += vl
        out.append((key, value))
    return out, pos


def _headers_column(n: int, rows: dict[int, list]) -> pa.Array:
    if not rows:
        ends = array("i", [0]) * (n + 1)
        empty = pa.StructArray.from_arrays([pa.array([], pa.string()), pa.array([], pa.binary())], ["key", "value"])
        return pa.ListArray.from_arrays(
            pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(ends)]), empty, type=HEADER_TYPE
        )
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
    return pa.ListArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(ends)]), items, type=HEADER_TYPE
    )


def empty_batch(headers: bool = False) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=SCHEMA_WITH_HEADERS if headers else SCHEMA)


__all__ = ["ArrowColumns", "SCHEMA", "SCHEMA_WITH_HEADERS", "HEADER_TYPE", "empty_batch"]
