"""Record batches straight into Arrow columns: the consumer's fast path (the Spark hot path).

One pass over each batch's (decompressed) records section reads the varints
of each record and appends its timestamp and the start/end positions of its
key and value to ``array`` buffers: no per-record Python objects, no copies
of keys and values. The records sections of all batches are appended to one
buffer; keys and values are then gathered out of it by Arrow itself:
that buffer with the offsets ``[0, key0 start, key0 end, value0 start,
value0 end, key1 start, ...]`` is a valid binary array whose elements
``4i+1`` and ``4i+3`` are record ``i``'s key and value, and one ``filter``
(C, memcpy) per column makes them contiguous. While every key is null (the
usual case for data pipelines) only value positions are kept
(``[0, value0 start, value0 end, ...]``, elements ``2i+1``). Headers are
decoded only for records that have them, and only when asked for.

Runs of records with the same layout (same record size, same varint sizes,
same key and value lengths: fixed-size payloads) need no per-record Python
at all: every field sits at the same offset from its record's start, so
strided slices of the buffer check the layout and read the timestamp deltas
in C, and the positions are arithmetic progressions. Runs whose sizes vary
but whose fields before the value line up (same varint sizes, null or
same-length keys, no headers) take one lean hop per record to find where
records end; Arrow checks every record's layout and gathers the rest. Any
other record is decoded one by one.

Measured with ``benchmarks/bench_client.py`` (CPU time, one core, 100-byte
values, no headers): about 2.6-3.2M records/s for fixed-size records (2M with
keys), 1.2-1.4M for values of varying size, 0.9M one by one.

pyarrow is imported when this module is (the ``arrow`` extra); the rest of
the client does not need it.

Schema of the result (``SCHEMA``)::

    topic string, partition int32, offset int64, timestamp timestamp[ms],
    timestamp_type int8, key binary, value binary
    [, headers list<struct<key: string, value: binary>>]
"""

from __future__ import annotations

from array import array
from bisect import bisect_left

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
# the records sections gathered in one ArrowColumns stay below this (int32 offsets)
MAX_BUFFER = (1 << 31) - 1
_Z1 = [(u >> 1) ^ -(u & 1) for u in range(128)]
_Z2 = [(u >> 1) ^ -(u & 1) for u in range(1 << 14)]


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


class _KeyFound(Exception):
    """A non-null key in a batch decoded without key positions."""


class ArrowColumns:
    """Accumulates decoded records of one partition; ``to_batch()`` makes a ``pyarrow.RecordBatch``."""

    __slots__ = (
        "topic",
        "partition",
        "headers",
        "offsets",
        "timestamps",
        "ts_types",
        "data",
        "positions",
        "mode",
        "key_empty",
        "value_nulls",
        "header_rows",
        "_pieces",
    )

    def __init__(self, topic: str, partition: int, *, headers: bool = False):
        self.topic = topic
        self.partition = partition
        self.headers = headers
        self.offsets = array("q")
        self.timestamps = array("q")
        self.ts_types: list[tuple[int, int]] = []  # (row where a run starts, type), runs of one type
        self.data = bytearray()  # the records sections, one after the other
        # per record: key start, key end, value start, value end (mode 4), or value start, value end (mode 2:
        # every key so far is null, the common case, which saves half the bookkeeping)
        self.positions = array("i", [0])
        self.mode = 0  # 0: nothing yet
        self.key_empty: list[int] = []  # rows whose key is b"" (a null key is an empty span too)
        self.value_nulls: list[int] = []
        self.header_rows: dict[int, list] = {}
        self._pieces: list = []  # (mode, positions, data) of buffers already closed

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def nbytes(self) -> int:
        return len(self.data) + sum(len(d) for _, _, d in self._pieces)

    def add_batch(self, batch: RecordBatch, min_offset: int = 0) -> int:
        """Decode one v2 batch (not a control batch) into the columns; returns how many records were added."""
        (base_offset, _, _, _, _, attrs, last_delta, base_ts, max_ts, _, _, _, count) = HEADER.unpack_from(batch.buffer)
        if base_offset + last_delta < min_offset or count <= 0:
            return 0
        codec = attrs & _COMPRESSION_MASK
        body = batch.buffer[RECORDS_OFFSET:]
        data = decompress(codec, body, magic=2) if codec else body
        log_append = attrs & _TIMESTAMP_TYPE_MASK
        ts_type = 1 if log_append else 0
        n0 = len(self.offsets)
        if not self.ts_types or self.ts_types[-1][1] != ts_type:
            self.ts_types.append((n0, ts_type))
        if len(self.data) + len(data) > MAX_BUFFER:
            self._close_piece()
        if self.mode == 0:
            self.mode = 2
        base = len(self.data)
        self.data += data
        end = base + len(data)
        marks = (len(self.positions), n0, len(self.key_empty), len(self.value_nulls))
        args = (base, end, count, base_offset, base_ts, max_ts if log_append else None, min_offset, last_delta)
        try:
            try:
                self._decode(self.data, *args)
            except _KeyFound:
                # a non-null key in a piece of null keys: this batch goes to a new piece with key positions
                self._rollback(marks, base)
                if len(self.positions) > 1:
                    self._close_piece()
                self.mode = 4
                base = len(self.data)
                self.data += data
                args = (base, base + len(data)) + args[2:]
                marks = (len(self.positions), n0, len(self.key_empty), len(self.value_nulls))
                self._decode(self.data, *args)
        except (IndexError, CorruptRecordError) as exc:
            self._rollback(marks, base)
            if isinstance(exc, CorruptRecordError):
                raise
            raise CorruptRecordError("record runs past the end of the batch", base_offset=base_offset) from None
        return len(self.offsets) - n0

    def _rollback(self, marks, base):
        npos, n0, nk, nv = marks
        del self.positions[npos:]
        del self.offsets[n0:]
        del self.timestamps[n0:]
        del self.data[base:]
        del self.key_empty[nk:]
        del self.value_nulls[nv:]
        self.header_rows = {r: h for r, h in self.header_rows.items() if r < n0}

    def _close_piece(self):
        self.positions.append(len(self.data))
        self._pieces.append((self.mode, self.positions, self.data))
        self.positions = array("i", [0])
        self.data = bytearray()
        self.mode = 0

    def _decode(
        self,
        data,
        pos: int,
        end: int,
        count: int,
        base_offset: int,
        base_ts: int,
        log_append_ts,
        min_offset: int,
        last_delta: int,
    ):
        regular = count == last_delta + 1
        skipped = False
        if min_offset > base_offset:  # the fetch position is inside this batch: skip the records before it
            skip_below = min_offset - base_offset
            while count:
                ln, p = _varint(data, pos)
                _, q = _varint(data, p + 1)  # timestamp delta
                od, _ = _varint(data, q)
                if od >= skip_below:
                    break
                pos = p + ln
                count -= 1
                skipped = True
            if pos > end:
                raise CorruptRecordError("record runs past the end of the batch", base_offset=base_offset)
        if not count:
            return
        keyed = self.mode == 4
        row0 = len(self.timestamps)
        # Offset deltas strictly increase within a batch, so when the batch holds last_delta + 1 records they
        # are 0, 1, 2, ...: nothing to check or store. Otherwise (compacted batches) they are collected.
        ods: list[int] | None = None if regular else []
        first_od = None
        if not regular or skipped:
            _, p = _varint(data, pos)
            _, p = _varint(data, p + 1)
            first_od, _ = _varint(data, p)
        i = 0
        short_runs = 0  # varied runs that did not pay for their Arrow calls; after a few, no more tries
        hop = None  # record ends of this batch, found by the first varied run
        while i < count:
            if ods is None and count - i >= _MIN_RUN:
                done, pos = self._uniform_run(data, pos, end, count - i, base_ts, row0 + i, keyed)
                if not done and short_runs < 3:
                    done, pos, hop = self._varied_run(data, pos, end, count - i, base_ts, keyed, hop)
                    if hop is not None and done < _MIN_VARIED and done < count - i:
                        short_runs += 1
                if done:
                    i += done
                    if i < count:  # the run stopped at a record unlike the others: that one alone
                        pos = self._scalar(data, pos, i, i + 1, base_ts, row0, keyed, ods)
                        i += 1
                    continue
            step = min(count, i + _SCALAR_STEP)
            pos = self._scalar(data, pos, i, step, base_ts, row0, keyed, ods)
            i = step
        if pos != end:
            raise CorruptRecordError(
                f"records end at byte {pos} of {end} in the records section", base_offset=base_offset
            )
        if log_append_ts is not None:
            n = len(self.timestamps)
            del self.timestamps[row0:]
            self.timestamps.extend(array("q", [log_append_ts]) * (n - row0))
        if ods is None:
            start = base_offset + (first_od or 0)
            self.offsets.extend(range(start, start + count))
        else:
            if any(b <= a for a, b in zip(ods, ods[1:])) or (ods and ods[-1] > last_delta):
                raise CorruptRecordError("offset deltas do not increase", base_offset=base_offset)
            self.offsets.extend(base_offset + od for od in ods)

    def _scalar(self, data, pos: int, i0: int, i1: int, base_ts: int, row0: int, keyed: bool, ods) -> int:
        """Records ``i0`` to ``i1`` of the batch, one by one; returns the position after them."""
        Z1 = _Z1
        Z2 = _Z2
        ts_app = self.timestamps.append
        pos_app = self.positions.append
        vnull_app = self.value_nulls.append
        kempty_app = self.key_empty.append
        want_headers = self.headers
        for i in range(i0, i1):
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
                ts_app(base_ts + Z1[b])
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    ts_app(base_ts + Z2[b - 128 + (c << 7)])
                    pos += 2
                else:
                    tsd, pos = _varint(data, pos)
                    ts_app(base_ts + tsd)
            # offset delta
            if ods is None:
                if data[pos] < 0x80:
                    pos += 1
                elif data[pos + 1] < 0x80:
                    pos += 2
                else:
                    pos = _varint(data, pos)[1]
            else:
                od, pos = _varint(data, pos)
                ods.append(od)
            # key: a null key is an empty span; a real empty key (rare) is noted
            b = data[pos]
            if b == 1:
                pos += 1
                if keyed:
                    pos_app(pos)
                    pos_app(pos)
            elif not keyed:
                raise _KeyFound
            elif b < 0x80:
                pos_app(pos + 1)
                pos += 1 + (b >> 1)
                pos_app(pos)
                if not b:
                    kempty_app(row0 + i)
            else:
                kl, pos = _varint(data, pos)
                pos_app(pos)
                pos += kl
                pos_app(pos)
            # value
            b = data[pos]
            if b < 0x80:
                pos += 1
                pos_app(pos)
                if b == 1:
                    vnull_app(row0 + i)
                else:
                    pos += b >> 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    vl = Z2[b - 128 + (c << 7)]
                    pos += 2
                else:
                    vl, pos = _varint(data, pos)
                pos_app(pos)
                pos += vl
            pos_app(pos)
            # headers: almost always a count of 0
            if data[pos]:
                hs, pos = _headers(data, pos)
                if want_headers:
                    self.header_rows[row0 + i] = hs
            else:
                pos += 1
        return pos

    def _uniform_run(self, data, pos: int, end: int, left: int, base_ts: int, row: int, keyed: bool):
        """Decode a run of records that all have the same layout without a per-record Python step.

        Records of one size whose varints have the same sizes and whose key and value lengths are
        equal (fixed-size payloads, the common case of generated data) put every field at the same
        offset from the record's start; strided slices of the buffer check that (and read the
        timestamp deltas) in C. Returns (records done, position after them); (0, pos) if the
        records here are not like that.
        """
        b0 = data[pos]
        if b0 < 0x80:
            lsize, ln = 1, b0 >> 1
        else:
            b1 = data[pos + 1]
            if b1 >= 0x80:
                return 0, pos
            lsize, ln = 2, ((b0 & 0x7F) | (b1 << 7)) >> 1
        size = lsize + ln
        stop = min(end, pos + size * left)
        # how many records in a row start with the same length bytes (each one's length says where the next is)
        firsts = data[pos:stop:size]
        m = len(firsts) - len(firsts.lstrip(bytes((b0,))))
        if lsize == 2 and m:
            seconds = data[pos + 1 : stop : size][:m]
            m = min(m, len(seconds) - len(seconds.lstrip(bytes((data[pos + 1],)))))
        m = min(m, left, (end - pos) // size)
        if m < _MIN_RUN:
            return 0, pos
        span = pos + size * m
        # timestamp delta: 1 or 2 bytes in every record of the run
        t = pos + lsize + 1
        raw1 = data[t:span:size]
        if _all_low(raw1):
            tsize, raw2 = 1, None
        elif _all_high(raw1):
            raw2 = data[t + 1 : span : size]
            if not _all_low(raw2):
                return 0, pos
            tsize = 2
        else:
            return 0, pos
        # offset delta (not stored: the batch is regular): 1 or 2 bytes everywhere
        o = t + tsize
        od1 = data[o:span:size]
        if _all_low(od1):
            osize = 1
        elif _all_high(od1) and _all_low(data[o + 1 : span : size]):
            osize = 2
        else:
            return 0, pos
        # key: null everywhere, or (keyed pieces) the same length everywhere
        k = o + osize
        kb = data[k]
        if kb == 1:
            ksize, kl = 1, -1
        elif not keyed or kb == 0 or kb >= 0x80:
            return 0, pos
        elif kb & 1:
            return 0, pos  # a negative length: corrupt, let the one-by-one decoder say so
        else:
            ksize, kl = 1, kb >> 1
        if not _same(data, k, span, size, kb):
            return 0, pos
        # value: the same non-null length everywhere, then a header count of 0 ending the record
        v = k + ksize + max(kl, 0)
        vb = data[v]
        if vb == 1:
            return 0, pos
        if vb < 0x80:
            vsize, vl = 1, vb >> 1
        else:
            vb2 = data[v + 1]
            if vb2 >= 0x80 or not _same(data, v + 1, span, size, vb2):
                return 0, pos
            vsize, vl = 2, ((vb & 0x7F) | (vb2 << 7)) >> 1
        if (
            v + vsize + vl + 1 != pos + size
            or not _same(data, v, span, size, vb)
            or not _same(data, pos + size - 1, span, size, 0)
        ):
            return 0, pos
        # every field is where the first record has it: positions are arithmetic progressions
        vs = v + vsize
        if keyed:
            ks = k + ksize
            seg = array("i", bytes(16 * m))
            seg[0::4] = array("i", range(ks, span, size))
            seg[1::4] = array("i", range(ks + max(kl, 0), span, size))
            seg[2::4] = array("i", range(vs, span, size))
            seg[3::4] = array("i", range(vs + vl, span, size))
        else:
            seg = array("i", bytes(8 * m))
            seg[0::2] = array("i", range(vs, span, size))
            seg[1::2] = array("i", range(vs + vl, span, size))
        self.positions.extend(seg)
        self.timestamps.frombytes(_timestamps(raw1, raw2, base_ts))
        return m, span

    def _varied_run(self, data, pos: int, end: int, left: int, base_ts: int, keyed: bool, hop):
        """Decode a run of records whose sizes differ but whose fields before the value line up.

        When the timestamp and offset deltas, the key and the value length have the same varint
        sizes in every record (and keys are null or of one length), the value starts at the same
        offset after each record's length varint and ends right before its header count (0). A
        loop that only hops from record to record collects where each record starts and ends;
        Arrow then checks the layout of every record and gathers the timestamp deltas. Returns
        (records done, position after them, the record ends found, to pass back in the same batch):
        the longest prefix of records that fit, (0, pos, ...) if none.
        """
        # the layout of the first record
        b = data[pos]
        a = pos + 1 if b < 0x80 else pos + 2
        if b >= 0x80 and data[pos + 1] >= 0x80:
            return 0, pos, hop
        t = a + 1
        tsize = 1 if data[t] < 0x80 else (2 if data[t + 1] < 0x80 else 0)
        o = t + tsize
        osize = 1 if data[o] < 0x80 else (2 if data[o + 1] < 0x80 else 0)
        k = o + osize
        kb = data[k]
        if not tsize or not osize or kb >= 0x80 or (kb != 1 and (not keyed or kb == 0 or kb & 1)):
            return 0, pos, hop
        kl = 0 if kb == 1 else kb >> 1
        v = k + 1 + kl
        vb = data[v]
        if vb == 1:
            return 0, pos, hop
        vsize = 1 if vb < 0x80 else (2 if data[v + 1] < 0x80 else 0)
        if not vsize:
            return 0, pos, hop
        # where each record ends: one hop per record, once per batch (later runs reuse it)
        if hop is None or hop[0] > pos:
            hop = (pos, _hop(data, pos, end))
        origin, all_ends = hop
        if pos == origin:
            j = 0
        else:
            j = bisect_left(all_ends, pos) + 1
            if j > len(all_ends) or all_ends[j - 1] != pos:
                return 0, pos, hop
        ends = all_ends[j : j + left]
        n = len(ends)
        if n < _MIN_RUN:
            return 0, pos, hop
        rstarts = array("i", [pos])
        rstarts.extend(ends[: n - 1])
        # check every record's layout in C; keep the longest prefix that fits
        buf = pa.Array.from_buffers(pa.uint8(), len(data), [None, pa.py_buffer(data)])
        R = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(rstarts)])
        E = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(ends)])
        # fields start after the length varint: 1 byte, or 2 when the first has the continuation bit
        A = pc.add(pc.add(R, _i32(1)), pc.greater_equal(pc.take(buf, R), pa.scalar(0x80, pa.uint8())).cast(pa.int32()))

        try:

            def at(offset):
                return pc.take(buf, pc.add(A, _i32(offset)) if offset else A).cast(pa.int32())

            def low(x):
                return pc.less(x, _i32(0x80))

            t1 = at(t - a)
            ok = low(t1) if tsize == 1 else pc.and_(pc.invert(low(t1)), low(t2 := at(t - a + 1)))
            o1 = at(o - a)
            ok = pc.and_(ok, low(o1) if osize == 1 else pc.and_(pc.invert(low(o1)), low(at(o - a + 1))))
            ok = pc.and_(ok, pc.equal(at(k - a), _i32(kb)))
            v1 = at(v - a)
            if vsize == 1:
                ok = pc.and_(ok, low(v1))
                vl = pc.shift_right(v1, _i32(1))
            else:
                v2 = at(v - a + 1)
                ok = pc.and_(ok, pc.and_(pc.invert(low(v1)), low(v2)))
                vl = pc.shift_right(
                    pc.bit_wise_or(pc.bit_wise_and(v1, _i32(0x7F)), pc.shift_left(v2, _i32(7))), _i32(1)
                )
            vs_off = v + vsize - a
            # the value (even length: not null) ends where the header count (0) is, the record's last byte
            last = pc.subtract(E, _i32(1))
            ok = pc.and_(ok, pc.equal(pc.bit_wise_and(v1, _i32(1)), _i32(0)))
            ok = pc.and_(ok, pc.equal(pc.add(pc.add(A, _i32(vs_off)), vl), last))
            ok = pc.and_(ok, pc.equal(pc.take(buf, last), pa.scalar(0, pa.uint8())))
        except (pa.ArrowIndexError, IndexError):  # a record too short for the first one's layout
            return 0, pos, hop
        bad = pc.index(ok, False).as_py()
        m = n if bad < 0 else bad
        if m < _MIN_RUN:
            return 0, pos, hop
        if m < n:
            A, E, t1 = A.slice(0, m), E.slice(0, m), t1.slice(0, m)
            if tsize == 2:
                t2 = t2.slice(0, m)
        vs = pc.add(A, _i32(vs_off))
        ve = pc.subtract(E, _i32(1))
        cols: tuple[pa.Array, ...]  # (key start, key end, value start, value end) or (value start, value end)
        if keyed:
            ks = pc.add(A, _i32(k + 1 - a))
            cols = (ks, pc.add(ks, _i32(kl)), vs, ve)
        else:
            cols = (vs, ve)
        seg = array("i", bytes(4 * len(cols) * m))
        for j, col in enumerate(cols):
            seg[j :: len(cols)] = _int32s(col)
        self.positions.extend(seg)
        words = bytearray(2 * m)
        words[0::2] = _bytes_of(t1)
        if tsize == 2:
            words[1::2] = _bytes_of(t2)
        idx = pa.Array.from_buffers(pa.uint16(), m, [None, pa.py_buffer(words)])
        self.timestamps.frombytes(_zigzag_timestamps(idx, base_ts))
        return m, ends[m - 1], hop

    def to_batch(self) -> pa.RecordBatch:
        n = len(self.offsets)
        pieces = self._pieces + [(self.mode, self.positions, self.data)]
        keys, values = [], []
        for mode, positions, data in pieces:
            if len(positions) == 1:
                continue
            if positions is self.positions:
                positions = array("i", positions)
                positions.append(len(data))
            count = len(positions) - 1  # 4 (or 2) per record + what follows the last value
            # elements 4i+1 / 4i+3 (2i+1) of this array are the keys / values; the rest is what lies between
            spans = pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(positions), pa.py_buffer(data)])
            if mode == 4:
                keys.append(pc.filter(spans, _mask(count, b"\x22")))
                values.append(pc.filter(spans, _mask(count, b"\x88")))
            else:
                values.append(pc.filter(spans, _mask(count, b"\xaa")))
                keys.append(pa.nulls(len(values[-1]), pa.binary()))
        cols = [
            _repeat_string(self.topic, n),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(array("i", [self.partition]) * n)]),
            pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self.offsets)]),
            pa.Array.from_buffers(pa.timestamp("ms"), n, [None, pa.py_buffer(self.timestamps)]),
            self._ts_type_column(n),
            _keys_column(keys, self.key_empty, n),
            _with_nulls(values, self.value_nulls, n),
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


def _mask(count: int, pattern: bytes) -> pa.Array:
    """A boolean array of ``count`` whose bits repeat ``pattern`` (0x22: elements 4i+1, 0x88: 4i+3)."""
    return pa.Array.from_buffers(pa.bool_(), count, [None, pa.py_buffer(pattern * ((count + 7) // 8))])


def _keys_column(parts: list, empty: list[int], n: int) -> pa.Array:
    """Keys: empty spans are null keys, except the rows listed in ``empty`` (keys of zero bytes)."""
    if not parts:
        return pa.array([], pa.binary())
    if all(p.null_count == len(p) for p in parts) and not empty:
        return pa.nulls(n, pa.binary())
    arr = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
    valid = pc.fill_null(pc.greater(pc.binary_length(arr), _i32(0)), pa.scalar(False))
    nulls = n - (pc.sum(valid).as_py() or 0) - len(empty) if n else 0
    if not nulls:
        return arr
    if nulls == n:
        return pa.nulls(n, pa.binary())
    bits = bytearray(valid.buffers()[1].to_pybytes()[: (n + 7) // 8])
    for i in empty:
        bits[i >> 3] |= 1 << (i & 7)
    buffers = arr.buffers()
    return pa.Array.from_buffers(
        pa.binary(), n, [pa.py_buffer(bytes(bits)), buffers[1], buffers[2]], null_count=nulls, offset=arr.offset
    )


def _with_nulls(parts: list, nulls: list[int], n: int) -> pa.Array:
    if not parts:
        return pa.array([], pa.binary())
    if len(nulls) == n:
        return pa.nulls(n, pa.binary())
    arr = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
    if not nulls:
        return arr
    bits = bytearray(b"\xff") * ((n + 7) // 8)
    for i in nulls:
        bits[i >> 3] &= ~(1 << (i & 7)) & 0xFF
    buffers = arr.buffers()
    return pa.Array.from_buffers(
        pa.binary(), n, [pa.py_buffer(bytes(bits)), buffers[1], buffers[2]], null_count=len(nulls), offset=arr.offset
    )


_MIN_RUN = 16  # shorter runs of same-layout records are not worth the strided checks
_SCALAR_STEP = 32  # records decoded one by one before looking for a run again
_MIN_VARIED = 256  # a varied run shorter than this hardly pays for its Arrow calls


def _same(data, start: int, stop: int, step: int, value: int) -> bool:
    """Whether every ``step``-th byte from ``start`` (below ``stop``) is ``value``."""
    got = data[start:stop:step]
    return not got.strip(bytes((value,)))


_SCALARS: dict[int, pa.Scalar] = {}


def _i32(value: int) -> pa.Scalar:
    """An int32 Arrow scalar (made once: converting a Python int in each compute call is slow)."""
    got = _SCALARS.get(value)
    if got is None:
        if len(_SCALARS) > 4096:
            _SCALARS.clear()
        got = _SCALARS[value] = pa.scalar(value, pa.int32())
    return got


_LOW = bytes(range(0x80))
_HIGH = bytes(range(0x80, 0x100))


def _all_low(raw) -> bool:
    """Every byte below 0x80 (a varint's last byte)."""
    return not raw.translate(None, _LOW)


def _all_high(raw) -> bool:
    """Every byte 0x80 or above (a varint continues)."""
    return not raw.translate(None, _HIGH)


_ZIGZAG16 = None  # zigzag value of a 2-byte varint, indexed by its two bytes read as a little-endian uint16


def _timestamps(raw1, raw2, base_ts: int) -> bytes:
    """int64 timestamps (native order) from the 1- or 2-byte zigzag deltas of a run: two Arrow calls."""
    n = len(raw1)
    words = bytearray(2 * n)
    words[0::2] = raw1
    if raw2 is not None:
        words[1::2] = raw2
    return _zigzag_timestamps(pa.Array.from_buffers(pa.uint16(), n, [None, pa.py_buffer(words)]), base_ts)


def _zigzag_timestamps(idx: pa.Array, base_ts: int) -> bytes:
    """``base_ts`` + the zigzag value of each 2-byte varint (low byte first, as a uint16), as int64 bytes."""
    global _ZIGZAG16
    if _ZIGZAG16 is None:
        table = [0] * 65536
        for lo in range(256):
            for hi in range(128):
                u = (lo & 0x7F) | (hi << 7)
                table[lo | (hi << 8)] = (u >> 1) ^ -(u & 1)
        _ZIGZAG16 = pa.array(table, pa.int64())
    n = len(idx)
    ts = pc.add(pc.take(_ZIGZAG16, idx), pa.scalar(base_ts, pa.int64()))
    return ts.buffers()[1].to_pybytes()[ts.offset * 8 : (ts.offset + n) * 8]


def _hop(data, pos: int, end: int) -> array:
    """The end of each record from ``pos`` on (lengths of 1 or 2 varint bytes; stops at a longer one)."""
    ends = array("i")
    app = ends.append
    Z2 = _Z2
    try:
        while pos < end:
            b = data[pos]
            if b < 0x80:
                pos += 1 + (b >> 1)
            else:
                n = Z2[b - 128 + (data[pos + 1] << 7)]
                if n < 0:  # corrupt: the one-by-one decoder will say where
                    break
                pos += 2 + n
            app(pos)
    except IndexError:  # a 3-byte length (or the end of the buffer): stop here
        pass
    while ends and ends[-1] > end:
        ends.pop()
    return ends


def _int32s(arr: pa.Array) -> array:
    arr = arr.cast(pa.int32())
    out = array("i")
    out.frombytes(arr.buffers()[1].to_pybytes()[arr.offset * 4 : (arr.offset + len(arr)) * 4])
    return out


def _bytes_of(arr: pa.Array) -> bytes:
    """The values of an integer array (0-255) as bytes."""
    u8 = arr.cast(pa.uint8())
    return u8.buffers()[1].to_pybytes()[u8.offset : u8.offset + len(u8)]


def _repeat_string(s: str, n: int) -> pa.Array:
    zeros = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(bytes(4 * n))])
    return pa.array([s], pa.string()).take(zeros)


def _headers(data: bytes, pos: int) -> tuple[list, int]:
    count, pos = _varint(data, pos)
    out = []
    for _ in range(count):
        kl, pos = _varint(data, pos)
        key = data[pos : pos + kl].decode()
        pos += kl
        vl, pos = _varint(data, pos)
        if vl < 0:
            value = None
        else:
            value = data[pos : pos + vl]
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
