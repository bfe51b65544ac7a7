"""Records of v2 batches encoded from Arrow columns, with no per-record Python.

The producer's Arrow path (Spark's sink, ``send_many`` with Arrow arrays) hands whole columns here.
Every varint of every record (length, timestamp delta, offset delta, key and value lengths) is
computed at once with numpy; the bytes before the key, between key and value, and after the value
become three Arrow binary columns, and one Arrow ``take`` (C) over the five columns lays out
``prefix | key | value length | value | headers`` for each record in one buffer: the records
section of a batch, byte for byte what ``BatchBuilder.append`` makes of the same records.

Headers are the exception: rows that have some are encoded one by one (``builder._encode_headers``);
rows without take the one-byte count 0 from a constant column.

Needs numpy and pyarrow (the ``arrow`` extra); nothing else in ``kafkawire.protocol`` imports this.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .builder import _encode_headers

# bytes the producer adds to a record's key, value and header sizes when it checks whether the
# record still fits its open batch (``AsyncProducer._append``: ``len(value) + len(key) + headers + 32``)
ROOM_CHECK_OVERHEAD = 32
# ``encode_rows`` lays the records of a call out in one binary column (int32 offsets): below this size
MAX_POOL = (1 << 31) - 1


def zigzag(x: np.ndarray) -> np.ndarray:
    """Zigzag of int64 values, as uint64."""
    x = x.astype(np.int64, copy=False)
    return ((x << 1) ^ (x >> 63)).view(np.uint64)


def varint_widths(u: np.ndarray) -> np.ndarray:
    """Bytes of the varint of each (zigzagged) value."""
    w = np.ones(len(u), np.int64)
    top = int(u.max()) if len(u) else 0
    k = 1
    while k < 10 and top >= 1 << (7 * k):  # one comparison per byte the largest value needs
        w += u >= np.uint64(1 << (7 * k))
        k += 1
    return w


def _varint_matrix(u: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, valid) matrices of shape (n, widest): row i's first w[i] bytes are u[i]'s varint."""
    widest = int(w.max()) if len(w) else 1
    out = np.empty((len(u), widest), np.uint8)
    for b in range(widest):
        low7 = ((u >> np.uint64(7 * b)) & np.uint64(0x7F)).astype(np.uint8)
        out[:, b] = low7 | ((w > b + 1).astype(np.uint8) << 7)
    return out, np.arange(widest) < w[:, None]


# Above this many runs of rows with the same varint widths (or one per 512 rows), the rows are laid out
# by a mask over the widest layout instead (variable-length values crossing the 1/2-byte length border
# again and again): a run costs a few numpy calls per varint byte, the mask a few per row
_MAX_WIDTH_RUNS = 8


def _binary_from_fields(fields: list[tuple[np.ndarray, np.ndarray]]) -> pa.Array:
    """A binary column whose row i is the varints ``fields[0][i], fields[1][i], ...`` one after the other.

    The rows of a producer's call mostly share their varint widths: the same timestamp delta, keys and
    values of one length, offset deltas whose width changes twice in 8192 records. A run of rows with the
    same widths is a fixed-width matrix written column by column into the output (no mask, no gather);
    only rows whose widths change often take the general path."""
    n = len(fields[0][0])
    widths = np.stack([w for _, w in fields])
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(widths.sum(axis=0), out=offsets[1:])
    cuts = np.flatnonzero((widths[:, 1:] != widths[:, :-1]).any(axis=0)) + 1 if n else ()
    if len(cuts) >= max(_MAX_WIDTH_RUNS, n // 512):
        mats, masks = zip(*(_varint_matrix(u, w) for u, w in fields))
        data = np.hstack(mats)[np.hstack(masks)]  # row-major: each row's bytes in field order
    else:
        data = np.empty(int(offsets[-1]), np.uint8)
        bounds = [0, *(int(c) for c in cuts), n]
        for a, b in zip(bounds, bounds[1:]):
            ws = widths[:, a].tolist()
            rows = data[offsets[a] : offsets[b]].reshape(b - a, sum(ws))
            col = 0
            for (u, _), w in zip(fields, ws):
                part = u[a:b]
                for k in range(w):  # byte k of the varint: 7 bits, the high bit set but on the last byte
                    byte = (part >> np.uint64(7 * k)).astype(np.uint8) if k else part.astype(np.uint8)
                    if k < w - 1:
                        byte |= 0x80
                    else:
                        byte &= 0x7F
                    rows[:, col] = byte
                    col += 1
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _lengths(col: pa.Array) -> np.ndarray:
    """Byte length of each element, -1 for null (a varint of -1 is Kafka's null)."""
    lengths = pc.binary_length(col)
    return np.asarray(pc.fill_null(lengths, -1).to_numpy(zero_copy_only=False), np.int64)


def as_binary(col) -> pa.Array:
    """An Arrow column of keys or values as ``binary`` (strings are their UTF-8 bytes, as ``send`` encodes)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if not isinstance(col, pa.Array):
        raise TypeError(f"expected a pyarrow Array, not {type(col).__name__}")
    t = col.type
    if pa.types.is_binary(t):
        return col
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return col.cast(pa.binary())
    if pa.types.is_null(t):
        return pa.nulls(len(col), pa.binary())
    raise TypeError(f"record keys and values must be binary or string columns, not {t}")


class ColumnarRecords:
    """Records as columns: keys, values, encoded headers and timestamps, plus the sizes the producer uses.

    ``keys``/``values``: Arrow binary (or string) arrays, nulls allowed; ``headers``: ``None`` or one
    list of ``(key, value)`` per row (``None``/empty for none), already in Python because only rows with
    headers cost anything; ``timestamps``: int64 milliseconds, one per row.
    """

    __slots__ = ("keys", "values", "timestamps", "klen", "vlen", "kw", "vw", "headers", "hlen", "room", "fixed")

    def __init__(self, keys: pa.Array | None, values: pa.Array, timestamps: np.ndarray, headers=None):
        n = len(values)
        self.values = as_binary(values)
        self.keys = pa.nulls(n, pa.binary()) if keys is None else as_binary(keys)
        if len(self.keys) != n or len(timestamps) != n:
            raise ValueError("keys, values and timestamps must have one entry per record")
        self.timestamps = np.asarray(timestamps, np.int64)
        self.klen = _lengths(self.keys)
        self.vlen = _lengths(self.values)
        # the widths of the key and value length varints, which the batch a record joins does not change
        self.kw = varint_widths(zigzag(self.klen))
        self.vw = varint_widths(zigzag(self.vlen))
        # what the producer's room check counts per record (see ROOM_CHECK_OVERHEAD)
        self.room = np.maximum(self.klen, 0) + np.maximum(self.vlen, 0) + ROOM_CHECK_OVERHEAD
        self.headers, self.hlen = self._encode_headers(headers, n)
        # the bytes of a record's body that do not depend on its batch: all but the timestamp and offset
        # delta varints (attributes, key and value with their lengths, headers)
        self.fixed = 1 + self.kw + np.maximum(self.klen, 0) + self.vw + np.maximum(self.vlen, 0) + self.hlen

    def _encode_headers(self, headers, n: int) -> tuple[pa.Array, np.ndarray]:
        hlen = np.ones(n, np.int64)
        rows = [] if headers is None else [i for i, h in enumerate(headers) if h]
        if not rows:
            offsets = np.arange(n + 1, dtype=np.int32)
            return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(bytes(n))]), hlen
        encoded = {}
        for i in rows:  # only the rows that have headers: Python per header, as in BatchBuilder.append
            hs = headers[i]
            if isinstance(hs, dict):
                hs = list(hs.items())
            hs = [(k, v.encode() if isinstance(v, str) else v) for k, v in hs]
            encoded[i], hlen[i] = _encode_headers(hs)
            self.room[i] += sum(len(k) * 3 + (len(v) if v is not None else 0) + 10 for k, v in hs) + 5
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(hlen, out=offsets[1:])
        data = bytearray(int(offsets[-1]))
        for i, b in encoded.items():
            data[offsets[i] : offsets[i + 1]] = b
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(bytes(data))]), hlen

    def __len__(self) -> int:
        return len(self.klen)

    def take(self, rows: np.ndarray, columns: bool = True) -> ColumnarRecords:
        """The records at ``rows`` (in that order). ``columns=False``: their sizes and timestamps only (enough
        for ``sizes``; keys, values and headers None), as the producer needs to decide on batches."""
        out = ColumnarRecords.__new__(ColumnarRecords)
        if columns:
            idx = pa.array(rows, pa.int64())
            out.keys = self.keys.take(idx)
            out.values = self.values.take(idx)
            out.headers = self.headers.take(idx)
        else:
            out.keys = out.values = out.headers = None
        out.timestamps = self.timestamps[rows]
        out.klen = self.klen[rows]
        out.vlen = self.vlen[rows]
        out.kw = self.kw[rows]
        out.vw = self.vw[rows]
        out.hlen = self.hlen[rows]
        out.room = self.room[rows]
        out.fixed = self.fixed[rows]
        return out

    def sizes(self, start: int, stop: int, first_delta: int, base_ts: int) -> tuple[np.ndarray, np.ndarray]:
        """(encoded size of each record ``start:stop``, its body length) when the first is at offset delta
        ``first_delta`` of a batch whose base timestamp is ``base_ts``."""
        n = stop - start
        tsd = zigzag(self.timestamps[start:stop] - base_ts)
        od = zigzag(np.arange(first_delta, first_delta + n, dtype=np.int64))
        body = self.fixed[start:stop] + varint_widths(tsd) + varint_widths(od)
        return body + varint_widths(zigzag(body)), body

    def encode(self, start: int, stop: int, first_delta: int, base_ts: int, body: np.ndarray | None = None):
        """The records section of records ``start:stop`` (offset deltas from ``first_delta``), as a buffer."""
        n = stop - start
        if body is None:
            body = self.sizes(start, stop, first_delta, base_ts)[1]
        tsd = zigzag(self.timestamps[start:stop] - base_ts)
        od = zigzag(np.arange(first_delta, first_delta + n, dtype=np.int64))
        zb = zigzag(body)
        zk = zigzag(self.klen[start:stop])
        zv = zigzag(self.vlen[start:stop])
        zero = np.zeros(n, np.uint64)
        one = np.ones(n, np.int64)
        prefix = _binary_from_fields(
            [
                (zb, varint_widths(zb)),
                (zero, one),  # attributes
                (tsd, varint_widths(tsd)),
                (od, varint_widths(od)),
                (zk, self.kw[start:stop]),
            ]
        )
        middle = _binary_from_fields([(zv, self.vw[start:stop])])
        # prefix | key | value length | value | headers of each record: the five columns one after the
        # other, and one ``take`` (C, a memcpy per element) of [prefix 0, key 0, middle 0, value 0,
        # headers 0, prefix 1, ...]; a null key or value is an element of no bytes. Measured against
        # pyarrow's binary_join_element_wise of the same columns: ~3x less CPU per record.
        parts = pa.concat_arrays(
            [prefix, self.keys.slice(start, n), middle, self.values.slice(start, n), self.headers.slice(start, n)]
        )
        joined = parts.take(pa.array(_interleave(n, 5), pa.int32()))
        offsets = np.frombuffer(joined.buffers()[1], np.int32, 5 * n + 1, joined.offset * 4)
        data = joined.buffers()[2]
        return memoryview(data)[offsets[0] : offsets[5 * n]]

    def encode_rows(
        self, rows: np.ndarray, deltas: np.ndarray, base_ts: np.ndarray, body: np.ndarray
    ) -> tuple[memoryview, np.ndarray] | None:
        """The records at ``rows`` (in that order) encoded one after the other in one buffer: row i with offset
        delta ``deltas[i]``, against base timestamp ``base_ts[i]``, of body length ``body[i]`` (``sizes``).

        Returns (buffer, ends): records ``a:b`` are ``buffer[ends[a]:ends[b]]``, a records section when they
        are consecutive records of one batch. The producer encodes the rows of all partitions of a call here
        in one go: the varints of all rows at once, and one ``take`` out of one pool of the call's prefixes,
        keys, value lengths, values and headers (no copy of the keys and values per partition). None when
        the pool would not fit int32 offsets (the caller encodes batch by batch with ``encode``)."""
        n, m = len(rows), len(self)
        if int(self.klen.clip(0).sum() + self.vlen.clip(0).sum() + self.hlen.sum()) + 40 * m >= MAX_POOL:
            return None
        tsd = zigzag(self.timestamps[rows] - base_ts)
        od = zigzag(deltas)
        zb, zk, zv = zigzag(body), zigzag(self.klen[rows]), zigzag(self.vlen[rows])
        prefix = _binary_from_fields(
            [
                (zb, varint_widths(zb)),
                (np.zeros(n, np.uint64), np.ones(n, np.int64)),  # attributes
                (tsd, varint_widths(tsd)),
                (od, varint_widths(od)),
                (zk, self.kw[rows]),
            ]
        )
        middle = _binary_from_fields([(zv, self.vw[rows])])
        pool = pa.concat_arrays([prefix, middle, self.keys, self.values, self.headers])
        at = np.arange(n, dtype=np.int64)
        rows = np.asarray(rows, np.int64)
        idx = np.empty((n, 5), np.int64)
        idx[:, 0] = at  # prefix i
        idx[:, 1] = 2 * n + rows  # key of the row
        idx[:, 2] = n + at  # value length i
        idx[:, 3] = 2 * n + m + rows  # value of the row
        idx[:, 4] = 2 * n + 2 * m + rows  # headers of the row
        joined = pool.take(pa.array(idx.reshape(-1)))
        ends = np.frombuffer(joined.buffers()[1], np.int32, 5 * n + 1, joined.offset * 4)[::5]
        return memoryview(joined.buffers()[2]), ends


def _interleave(n: int, k: int) -> np.ndarray:
    """[0, n, 2n, ... (k-1)n, 1, n+1, ...]: row i of k columns of n rows stacked one after the other."""
    return np.arange(k * n, dtype=np.int32).reshape(k, n).T.reshape(-1)
