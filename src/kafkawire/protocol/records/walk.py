"""The records section of a v2 batch walked record by record, sans-IO: the layout walk the consumer's Arrow
decoder builds on, and the check a partition leader makes of a producer's records, as Kafka reads them.

The walk (``record_runs``, ``expand``, ``varints``) finds where records start without a Python step per
record when neighbouring records have one size, and reads each varint field of every record at once with
numpy. ``unreadable`` first asks a quick check whether every record is laid out as producers write it: a
Python step per record for a few records (numpy's fixed cost per call would dominate); for a section of a
few runs of equal-sized records, each run's first record read and the others shown to share its layout with
strided byte slices; for a section of many runs of a few layouts (a keyed producer's batch), regular
expressions of the layouts matched in C; else each field of every record looked up two bytes at a time in
tables, else ``varints``. Only a section that fails the quick check is walked again one record at a time with Kafka's
reading rules, which decide the answer:

* an uncompressed section is read as Kafka reads a ByteBuffer: a record's length varint longer than 5 bytes
  escapes as an exception Kafka does not map (UNKNOWN_SERVER_ERROR); any other flaw (the section ending
  before the batch's count of records, a length past the section, fields not filling the record exactly, a
  negative header count or header key length, records left after the count) is INVALID_RECORD;
* a decompressed section is read as Kafka reads a stream, where every flaw is INVALID_RECORD. Kept with its
  codec, Kafka only skips over keys, values and headers and ignores each record's length (``SKIP``); rebuilt
  with another codec, each record is read whole within its length (``WHOLE``).

numpy is optional here: without it every section takes the record-by-record walk.
"""

from __future__ import annotations

import re
import time
from typing import Any

from .. import errors
from .batch import MIN_RECORD_SIZE
from .errors import CorruptRecordError

# numpy is imported on first use, not with this module: the broker imports it for every start (it checks
# produced records), and numpy costs about 70 ms and 10 MiB there before the first request. The broker does not
# require numpy; without it the record-by-record walk below is the only check.
np: Any = None
_numpy_looked_up = False


def _numpy():
    global np, _numpy_looked_up
    if not _numpy_looked_up:
        try:
            import numpy
        except ImportError:
            numpy = None
        np, _numpy_looked_up = numpy, True
    return np


# runs shorter than this are walked one record at a time (a strided slice costs more than a few steps)
_MIN_RUN = 4
# records in the first window a run is measured over (``record_runs``); producers' runs are mostly short
_FIRST_WINDOW = 16
_BYTE = [bytes((i,)) for i in range(256)]
_U32 = 0xFFFFFFFF

# how a records section is read (``unreadable``)
BUFFER = 0  # uncompressed
SKIP = 1  # decompressed, appended with its own codec
WHOLE = 2  # decompressed, rebuilt with the topic's codec


def varint(data, pos):
    """Zigzag varint at ``pos`` -> (value, new pos); for the walk and headers."""
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


class _ManyRuns(Exception):
    """``record_runs`` found more runs than its caller takes."""


def record_runs(data, pos: int, end: int, count: int, max_runs: int = -1) -> tuple[list, list, list]:
    """Walk ``count`` records from ``pos``: (run starts, record sizes, records per run).

    A run is a stretch of records of one size; a record unlike its neighbours is a run of one.
    Raises :class:`CorruptRecordError` when the records do not fit below ``end``; with ``max_runs`` (>= 0),
    ``_ManyRuns`` as soon as there are more runs than that."""
    starts: list[int] = []
    sizes: list[int] = []
    lengths: list[int] = []
    s_app, z_app, n_app = starts.append, sizes.append, lengths.append
    left = count
    while left:
        b0 = data[pos]
        if b0 < 0x80:
            lsize = 1
            ln = (b0 >> 1) ^ -(b0 & 1)
        elif data[pos + 1] < 0x80:  # records of 64 to 8191 bytes: inline, a call per record is a third of the walk
            lsize = 2
            u = (b0 & 0x7F) | (data[pos + 1] << 7)
            ln = (u >> 1) ^ -(u & 1)
        else:
            ln, q = varint(data, pos)
            lsize = q - pos
        if ln < MIN_RECORD_SIZE - 1:
            raise CorruptRecordError(f"record length {ln} at byte {pos} of the records section")
        size = lsize + ln
        nxt = pos + size
        m = 1
        if left >= _MIN_RUN and lsize <= 2 and nxt < end and data[nxt] == b0:
            # the next record starts with the same length bytes: count how many in a row do, a window of
            # records at a time, each window four times the last (a slice to the section's end for every run
            # made the walk quadratic: a 9,000-record batch of 300 runs copied 1.4 MB of strided bytes)
            first = _BYTE[b0]
            second = _BYTE[data[pos + 1]] if lsize == 2 else None
            m = 0
            at = pos
            window = _FIRST_WINDOW
            while True:
                want = left - m
                if want > window:
                    want = window
                stop = at + size * want
                if stop > end:
                    stop = end
                firsts = data[at:stop:size]
                same = len(firsts) - len(firsts.lstrip(first))
                if second is not None:
                    seconds = data[at + 1 : stop : size][:same]
                    same2 = len(seconds) - len(seconds.lstrip(second))
                    if same2 < same:
                        same = same2
                m += same
                if same < want or m >= left:
                    break
                at += size * want
                window <<= 2
            # m >= 1: the first window starts at this record, whose own length bytes match
        if len(starts) == max_runs:
            raise _ManyRuns
        s_app(pos)
        z_app(size)
        n_app(m)
        pos += size * m
        left -= m
        if pos > end:
            raise CorruptRecordError(f"record runs past the end of the records section ({pos} > {end})")
    if pos != end:
        raise CorruptRecordError(f"records end at byte {pos} of {end} in the records section")
    return starts, sizes, lengths


def expand(starts: list, sizes: list, lengths: list, count: int):
    """(start, end) of every record, from the runs (numpy arrays)."""
    _numpy()
    if len(starts) == count:
        s = np.array(starts, np.int64)
        return s, s + np.array(sizes, np.int64)
    z = np.repeat(np.array(sizes, np.int64), lengths)
    n = np.array(lengths, np.int64)
    first = np.cumsum(n) - n  # row of each run's first record
    s = np.repeat(np.array(starts, np.int64) - first * np.array(sizes, np.int64), lengths)
    s += np.arange(count, dtype=np.int64) * z
    return s, s + z


def varints(u, at):
    """The zigzag varint at each position ``at`` of ``u``: (values int64, widths: 1 when all are 1 byte).

    Positions past the buffer read its last byte (``mode="clip"``): the record checks that follow
    catch what that makes of a corrupt record."""
    _numpy()
    b = u.take(at, mode="clip")
    more = b >= 0x80
    if not more.any():
        v = (b >> 1).astype(np.int64)
        v ^= -(b & 1).astype(np.int64)
        return v, 1
    b2 = u.take(at + 1, mode="clip")
    if not (more & (b2 >= 0x80)).any():  # 1- and 2-byte varints (deltas up to 8191): no index arrays
        raw = (b & 0x7F).astype(np.int64)
        raw |= (b2.astype(np.int64) << 7) * more
        v = raw >> 1
        v ^= -(raw & 1)
        return v, more + 1
    raw = (b & 0x7F).astype(np.uint64)
    width = np.ones(len(at), np.int64)
    idx = np.flatnonzero(more)
    for k in range(1, 10):
        nb = u.take(at[idx] + k, mode="clip")
        raw[idx] |= (nb & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        width[idx] += 1
        idx = idx[nb >= 0x80]
        if not len(idx):
            break
    else:
        raise CorruptRecordError("varint longer than 10 bytes")
    v = (raw >> np.uint64(1)).astype(np.int64)
    v ^= -(raw & np.uint64(1)).astype(np.int64)
    return v, width


def unreadable(data: bytes, count: int, mode: int) -> tuple[int, str] | None:
    """Why Kafka's broker cannot read ``count`` records out of the records section ``data`` read the
    ``mode`` way: (error code, text for the broker's log), or None when it can."""
    if _well_formed(data, count):
        return None
    return _as_kafka_reads(data, count, mode)


# Up to this many records a section is checked by a Python step per record (``_well_formed_walk``) unless it
# is a few runs: numpy's bulk check costs about 20 calls per batch whatever its size, more than walking a few
# records, and librdkafka sends many batches of a few records. Measured with benchmarks/bench_record_check.py.
_WALK_MAX = 20
# From this many records a section of at most one run per _RECORDS_PER_RUN records is checked run by run
# (``_well_formed_runs``) even below _WALK_MAX: a run's strided slices cost about what walking five records
# costs (100 B records: 20 in one or two runs 27 -> 9 us a batch, 5 records about even).
_RUNS_FROM = 6
_RECORDS_PER_RUN = 4


def _well_formed(data: bytes, count: int) -> bool:
    """Every record laid out exactly as a producer writes it. True only for sections Kafka reads in every
    mode (lengths and widths within what its readers take); False sends the section to the record-by-record
    walk with Kafka's rules (``_as_kafka_reads``), which may still accept it."""
    if count <= _WALK_MAX:
        if count >= _RUNS_FROM and _may_be_runs(data):
            # a section of more runs (records of many sizes, or not filling it) stops being walked by runs
            # at the first run past the limit, and is walked record by record
            runs = _runs(data, count, count // _RECORDS_PER_RUN)
            if runs is not None and _well_formed_runs(data, count, runs):
                return True
        return _well_formed_walk(data, count)
    # a section of more runs stops being walked by runs at the first run past the limit, and is matched
    # against the known layouts instead (``_well_formed_layouts``), then, failing that, walked whole for the
    # tables. Once a section has been many runs, the next ones are matched against the layouts first: a
    # producer's sections are alike, and the walk up to the limit was a tenth of a keyed section's check.
    matcher = _matcher
    tried = matcher.first
    if tried and matcher.well_formed(data, count):
        return True
    runs = _runs(data, count, _FEW_RUNS + count // 64)
    matcher.first = runs is None
    if runs is not None:
        if _well_formed_runs(data, count, runs):
            return True
    elif not tried and matcher.well_formed(data, count):
        return True
    if runs is None:
        runs = _runs(data, count)
        if runs is None:
            return False
    if _numpy() is None:
        return _well_formed_walk(data, count)
    return _well_formed_tables(data, count, runs) or _well_formed_bulk(data, count, runs)


def _may_be_runs(data: bytes) -> bool:
    """Whether the first record has no headers and the second starts with the same length bytes: a guess,
    made before ``_runs``, at whether a small section may be a few runs ``_well_formed_runs`` takes (records
    of varied sizes or with headers go straight to the walk)."""
    try:
        b0 = data[0]
        if b0 < 0x80:
            size = 1 + ((b0 >> 1) ^ -(b0 & 1))
            return data[size - 1] == 0 and data[size] == b0
        b1 = data[1]
        if b1 >= 0x80:
            return False
        u = (b0 & 0x7F) | (b1 << 7)
        size = 2 + ((u >> 1) ^ -(u & 1))
        return size > 2 and data[size - 1] == 0 and data[size] == b0 and data[size + 1] == b1
    except IndexError:
        return False


def _runs(data: bytes, count: int, max_runs: int = -1) -> tuple[list, list, list] | None:
    """``record_runs`` over the whole section, or None when its records do not fill it (or are more than
    ``max_runs`` runs, when given)."""
    end = len(data)
    if count <= 0 or count > end // MIN_RECORD_SIZE:
        return None
    try:
        return record_runs(data, 0, end, count, max_runs)
    except (CorruptRecordError, IndexError, _ManyRuns):
        return None


def _well_formed_walk(data: bytes, count: int) -> bool:
    """``_well_formed`` one record at a time: the fields of every record read in turn, each varint's common
    one- and two-byte forms inline (a call per field would double the cost), the key and the value each
    written out (a loop over the two cost a tenth of the walk)."""
    end = len(data)
    if count <= 0 or count > end // MIN_RECORD_SIZE:
        return False
    pos = 0
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                ln = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:  # records of 64 to 8191 bytes: inline, as record_runs reads them
                u = (b & 0x7F) | (data[pos + 1] << 7)
                ln = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                ln, q = varint(data, pos)
                if q - pos > 5:  # Kafka reads an int varint of at most 5 bytes
                    return False
                pos = q
            if ln < MIN_RECORD_SIZE - 1 or ln > end - pos:
                return False
            stop = pos + ln
            pos += 1  # attributes
            if data[pos] >= 0x80:  # timestamp delta: a varlong of at most 10 bytes (bounded: 0xff bytes)
                at = pos
                while data[pos] >= 0x80:
                    pos += 1
                    if pos - at >= 10:
                        return False
            pos += 1
            if data[pos] >= 0x80:  # offset delta
                at = pos
                _, pos = varint(data, pos)
                if pos - at > 5:
                    return False
            else:
                pos += 1
            # key: a length (-1 null) and its bytes within the record
            b = data[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:  # 64 to 8191 bytes
                u = (b & 0x7F) | (data[pos + 1] << 7)
                n = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                at = pos
                n, pos = varint(data, pos)
                if pos - at > 5:
                    return False
            if n < -1 or n >= stop - pos:
                return False
            if n > 0:
                pos += n
            # value: the same
            b = data[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                n = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                at = pos
                n, pos = varint(data, pos)
                if pos - at > 5:
                    return False
            if n < -1 or n >= stop - pos:
                return False
            if n > 0:
                pos += n
            if data[pos] == 0 and pos + 1 == stop:  # no headers
                pos = stop
            elif _headers_end(data, pos, stop) == stop:
                pos = stop
            else:
                return False
    except (CorruptRecordError, IndexError):
        return False
    return pos == end


# A section of a few runs (records of one size in a row, ``record_runs``) is checked run by run: the run's
# first record is read field by field, and the others are shown to share its layout with a strided slice
# per byte of the fields whose bytes fix it (bytes ops in C, no numpy call): the continuation bits of the
# timestamp and offset deltas (so every later field starts at the same place), the key and value lengths'
# bytes, and the header count 0 as the record's last byte. Producers' batches are a few such runs (the
# sizes change where a key's or an offset delta's length does); a section of many runs goes to the tables.
_FEW_RUNS = 6
_LOW = bytes(range(0x80))


def _first_layout(data: bytes, pos: int, end: int, length_bytes: int = 5) -> tuple | None:
    """The record at ``pos`` read field by field as ``_well_formed_walk`` reads it, if it has no headers and its
    length takes at most ``length_bytes`` bytes: (offsets in it of the delta bytes with whether each continues,
    offsets of the length and count bytes, (width, value) of the key's and the value's length, where its length's
    bytes end, where it ends). The run check uses the offsets, the layout match (``_record_layout``) all of it."""
    try:
        ln, q = varint(data, pos)
        if q - pos > length_bytes or ln < MIN_RECORD_SIZE - 1 or ln > end - q:
            return None
        stop = q + ln
        cont: list[tuple[int, bool]] = []
        at = p = q + 1  # after the attributes
        while data[p] >= 0x80:  # timestamp delta: a varlong of at most 10 bytes
            cont.append((p - pos, True))
            p += 1
            if p - at >= 10:
                return None
        cont.append((p - pos, False))
        at = p = p + 1
        while data[p] >= 0x80:  # offset delta: an int of at most 5 bytes
            cont.append((p - pos, True))
            p += 1
            if p - at >= 5:
                return None
        cont.append((p - pos, False))
        p += 1
        same: list[int] = []
        lengths = []
        for _field in (0, 1):  # key, then value: a length (-1 null) and its bytes within the record
            at = p
            n, p = varint(data, p)
            if p - at > 5 or n < -1 or n >= stop - p:
                return None
            same.extend(range(at - pos, p - pos))
            lengths.append((p - at, n))
            if n > 0:
                p += n
        if data[p] != 0 or p + 1 != stop:  # headers: not taken here
            return None
        same.append(p - pos)
    except (CorruptRecordError, IndexError):
        return None
    return cont, same, lengths, q, stop


def _well_formed_runs(data: bytes, count: int, runs: tuple | None = None) -> bool:
    """``_well_formed`` run by run, for records without headers (see above)."""
    if runs is None:
        runs = _runs(data, count)
        if runs is None:
            return False
    end = len(data)
    for pos, size, m in zip(*runs):
        layout = _first_layout(data, pos, end)
        if layout is None:
            return False
        if m == 1:
            continue
        cont, same = layout[:2]
        last = pos + size * m
        for off, more in cont:
            column = data[pos + off : last : size]  # this byte of every record of the run
            # continuing: no byte below 0x80 (none deleted); the last byte of the field: all below 0x80
            if not (len(column.translate(None, _LOW)) == m if more else column.isascii()):
                return False
        for off in same:
            column = data[pos + off : last : size]
            if column.count(column[:1]) != m:
                return False
    return True


# A section of many runs (records whose size changes every few records: a keyed producer's batch for one of
# many partitions, whose keys differ in length from record to record) costs ``record_runs`` a Python step per
# run, a third to a half of a step per record. Such a section is mostly a few layouts: records alike but for
# their key, value and delta bytes. Each layout is written as a regular expression of one record: its length
# bytes, its key's and value's length bytes as they are, the timestamp and offset deltas' bytes by their
# continuation bits, the key and value as so many bytes of any value, and the header count 0. The section is
# matched against the alternation of the known layouts in chunks of records by ``re`` (C), which checks what
# ``_well_formed_walk`` checks of each record; the chunks count the records. Where no known layout matches,
# the layouts of the next records are learned (walked in Python) and the match goes on from there. Every record
# a layout matches ends where its length bytes say: layouts of different length bytes differ in their first
# bytes, and a varint's bytes are prefix-free, so no two alternatives match different spans and no match
# needs backtracking (the possessive ``{n}+``).
_LAYOUT_CHUNKS = (64, 8, 1)  # records per match of each pattern
_LONG_RUN = 4  # runs shorter than this many records, _SHORT_RUNS in a row: the section's rest goes by the chunks
_SHORT_RUNS = 4
_LAYOUTS_MAX = 32  # alternatives in a matcher; past it the matcher starts again from the new layouts
_LEARN_AHEAD = 64  # records walked for their layouts where the match stops
_LEARN_PER_SECTION = 3  # learning rounds within one section before it goes to the tables
# Each learning round compiles the four patterns anew (the run pattern adds about a third to the three chunks':
# 1 ms for 4 alternatives to 10 ms for 32, timed on a loaded machine). A token bucket bounds that: a peer whose
# every batch brings new layouts (values of every length) makes the broker compile at most this many rounds a
# second after the first _LEARN_BURST; such sections then take the tables, as before.
_LEARN_PER_SECOND = 4.0
_LEARN_BURST = 32.0
_CONT_BYTE = rb"[\x80-\xff]"
_LAST_BYTE = rb"[\x00-\x7f]"


class _Layouts:
    """The known record layouts, compiled: immutable, replaced whole when layouts are learned (a thread that
    learns concurrently with another loses what one of the two learned, nothing else).

    Besides the chunks, a pattern of runs: each alternative one layout's records repeated (possessive), in a
    group of its own, so that the group that matched names the layout and the run's span over that layout's
    record size counts its records. Keyed batches whose keys come in order are runs of tens of records (a key's
    length changes every few dozen keys): one match per run there costs about three quarters of the chunks'
    per-record alternation. Where runs are short (keys in no order: _SHORT_RUNS runs in a row of under _LONG_RUN
    records) the rest of the section goes by the chunks."""

    __slots__ = ("alternatives", "_matches", "_run", "_sizes")

    def __init__(self, alternatives: tuple[bytes, ...], sizes: tuple[int, ...]):
        self.alternatives = alternatives
        body = b"(?:" + b"|".join(alternatives) + b")"
        self._matches = tuple(re.compile(b"(?s)(?:%s){%d}+" % (body, n)).match for n in _LAYOUT_CHUNKS)
        self._run = re.compile(b"(?s)" + b"|".join(b"((?:%s)++)" % layout for layout in alternatives)).match
        self._sizes = (0, *sizes)  # by group number

    def sizes(self) -> tuple[int, ...]:
        """Each alternative's record size."""
        return self._sizes[1:]

    def advance(self, data, pos: int, left: int) -> tuple[int, int]:
        """Match up to ``left`` records from ``pos``: (position, records left) where matching stopped."""
        run, sizes = self._run, self._sizes
        short = 0  # runs in a row shorter than _LONG_RUN
        while left and short < _SHORT_RUNS:  # then runs of a few records: the rest by the chunks
            m = run(data, pos)
            if m is None:
                break
            size = sizes[m.lastindex]  # type: ignore[index]  # every alternative is a group: always set
            n = (m.end() - pos) // size
            if n >= left:  # the count ends within the run (records past it are the caller's to refuse)
                return pos + left * size, 0
            pos, left = m.end(), left - n
            short = short + 1 if n < _LONG_RUN else 0
        for n, match in zip(_LAYOUT_CHUNKS, self._matches):
            while left >= n:
                m = match(data, pos)
                if m is None:
                    break
                pos = m.end()
                left -= n
        return pos, left


def _record_layout(data: bytes, pos: int, end: int) -> tuple[bytes, int] | None:
    """The regular expression of the layout of the record at ``pos`` (``_first_layout``, a length of one or two
    bytes: under 8 KiB), and where the record ends."""
    layout = _first_layout(data, pos, end, 2)
    if layout is None:
        return None
    cont, _same, lengths, q, stop = layout
    out = [re.escape(data[pos:q]), b"."]  # the length's bytes; the attributes, which Kafka does not check
    out.extend(_CONT_BYTE if more else _LAST_BYTE for _off, more in cont)  # the deltas
    p = pos + cont[-1][0] + 1
    for width, n in lengths:
        out.append(re.escape(data[p : p + width]))
        p += width
        if n > 0:
            out.append(b".{%d}" % n)
            p += n
    out.append(rb"\x00")
    return b"".join(out), stop


def _sampled_layouts(data: bytes, pos: int, end: int, left: int, sizes: dict[bytes, int]) -> dict[bytes, int]:
    """How many of up to _LEARN_AHEAD records from ``pos`` have each layout, as far as they are well formed (and
    each layout's record size, into ``sizes``)."""
    seen: dict[bytes, int] = {}
    for _ in range(min(left, _LEARN_AHEAD)):
        found = _record_layout(data, pos, end)
        if found is None:
            break
        layout, stop = found
        seen[layout] = seen.get(layout, 0) + 1
        sizes[layout] = stop - pos
        pos = stop
    return seen


class _LayoutMatcher:
    """The layouts learned so far (``_Layouts``), whether the next large section is matched against them first,
    and the learning budget (a token bucket read on ``clock``). The process keeps one (``_matcher``), as ``re``
    keeps its compiled patterns: a cache, shared by the threads that check sections (a race between two loses
    what one learned, or a token, nothing else)."""

    __slots__ = ("layouts", "first", "_tokens", "_counted", "_clock")

    def __init__(self, clock=time.monotonic):
        self.layouts: _Layouts | None = None
        self.first = False  # the last section of more than _WALK_MAX records was many runs (``_well_formed``)
        self._clock = clock
        self._tokens = _LEARN_BURST
        self._counted = clock()

    def _learning_tokens(self) -> float:
        """The learning rounds the budget allows now (refilled since it was last counted)."""
        now = self._clock()
        self._tokens = min(_LEARN_BURST, self._tokens + (now - self._counted) * _LEARN_PER_SECOND)
        self._counted = now
        return self._tokens

    def well_formed(self, data: bytes, count: int) -> bool:
        """``_well_formed`` by the known record layouts (see above), learning those the section brings."""
        end = len(data)
        layouts = self.layouts
        pos, left = 0, count
        for rounds in range(_LEARN_PER_SECTION + 1):
            if layouts is not None:
                pos, left = layouts.advance(data, pos, left)
                if not left:
                    return pos == end
            if rounds == _LEARN_PER_SECTION:
                break
            if self._learning_tokens() < 1.0:  # (before the walk for the layouts: that costs a step per record)
                break
            known = layouts.alternatives if layouts is not None else ()
            sizes = dict(zip(known, layouts.sizes())) if layouts is not None else {}
            sample = _sampled_layouts(data, pos, end, left, sizes)
            new = tuple(layout for layout in sample if layout not in known)
            if not new:
                break
            self._tokens -= 1.0
            if len(known) + len(new) > _LAYOUTS_MAX:
                known = ()
            # ``re`` tries the alternatives in turn: the layouts most frequent in the sample (where the section's
            # records changed layout, the records that follow) first, the others as they were
            alternatives = sorted(known + new[:_LAYOUTS_MAX], key=lambda layout: -sample.get(layout, 0))
            layouts = self.layouts = _Layouts(tuple(alternatives), tuple(sizes[layout] for layout in alternatives))
        return False


_matcher = _LayoutMatcher()


def _well_formed_layouts(data: bytes, count: int) -> bool:
    """``_well_formed`` by the process's layout matcher alone."""
    return _matcher.well_formed(data, count)


# The bulk check reads each varint field of every record as two bytes at once: a little-endian uint16 view
# of the section at every byte offset (``_pairs``), looked up in tables over all 65536 byte pairs that give
# what a field of one or two bytes adds to a record's read position. A varint of three or more bytes (a
# record or value of 8 KiB, a timestamp delta of 8 s), or a key or value length below -1, adds _FAR instead:
# the record then cannot end where its length says, and the section goes to ``_well_formed_bulk``. Offset
# deltas are the exception: a section of more than _TWO_BYTE_DELTAS records reads them up to three bytes.
_FAR = 1 << 40
_tables: Any = None


# A batch of more records than this has offset deltas of three bytes (zigzag 8192 and up): librdkafka's
# batches of 100 B records reach 9,000. The tables read those deltas as three bytes when the section has
# that many records (``_pair_tables``' third table) and then check each one's last byte.
_TWO_BYTE_DELTAS = 8192


def _pair_tables():
    """(width of the varint, width plus the length's bytes, or _FAR; the width read as 3 where both bytes
    continue) for every first-two-bytes pair."""
    global _tables
    if _tables is None:
        _numpy()
        w = np.arange(1 << 16, dtype=np.int64)
        b0, b1 = w & 0xFF, w >> 8
        one = b0 < 0x80
        two = ~one & (b1 < 0x80)
        raw = np.where(one, b0, (b0 & 0x7F) | (b1 << 7))
        value = (raw >> 1) ^ -(raw & 1)
        width = np.where(one, 1, np.where(two, 2, _FAR))
        span = np.where(value >= -1, width + np.maximum(value, 0), _FAR)
        span[~(one | two)] = _FAR
        _tables = (width, span, np.where(one, 1, np.where(two, 2, 3)))
    return _tables


def _well_formed_tables(data: bytes, count: int, runs: tuple | None = None) -> bool:
    """``_well_formed`` in bulk for sections whose varints take one or two bytes (all but the last field of
    a record then sits at least two bytes before the section's end, so the pair view reads it exactly)."""
    if runs is None:
        runs = _runs(data, count)
        if runs is None:
            return False
    end = len(data)
    width, span, width3 = _pair_tables()
    starts, sizes, lengths = runs
    # the records lie end to end from 0 to ``end``: ``bounds`` holds each one's start and, one further, its
    # stop (fewer numpy calls than ``expand``)
    if len(starts) == count:
        bounds = np.array(starts + [end], np.int64)
    else:
        bounds = np.empty(count + 1, np.int64)
        bounds[0] = 0
        np.cumsum(np.repeat(sizes, lengths), out=bounds[1:])
    start, stop = bounds[:-1], bounds[1:]
    # (indexed, not ``take``n: take copies a strided view whole first)
    pairs = np.ndarray((end - 1,), "<u2", data, 0, (1,))
    u = np.frombuffer(data, np.uint8)
    # record_runs already proved each record's length (equal length bytes within a run) and that the records
    # fill the section; its width here finds the fields after it
    try:
        at = width[pairs[start]]
        at += start
        at += 1  # attributes
        at += width[pairs[at]]  # timestamp delta
        if count > _TWO_BYTE_DELTAS:
            at += width3[pairs[at]]  # offset delta, of up to three bytes: the last must end the varint
            if u[at - 1].max() >= 0x80:
                return False
        else:
            at += width[pairs[at]]  # offset delta
        at += span[pairs[at]]  # key length and key
        at += span[pairs[at]]  # value length and value: ``at`` is the header count's byte
    except IndexError:  # a field past the section's last pair: not a well-formed record
        return False
    headers = u.take(at, mode="clip")
    # each record ends right after a header count of 0: (at + 1 - stop) | headers is 0 for every record
    miss = at + 1
    miss -= stop
    miss |= headers
    if not miss.any():
        return True
    # some records have headers (or are malformed): those without end right after a 0 count, the others are
    # walked (a header's fields have no fixed place)
    plain = headers == 0
    if not np.where(plain, at + 1 == stop, at < stop).all():
        return False
    for i in np.flatnonzero(~plain).tolist():
        if _headers_end(data, int(at[i]), int(stop[i])) != int(stop[i]):
            return False
    return True


def _well_formed_bulk(data: bytes, count: int, runs: tuple | None = None) -> bool:
    """``_well_formed`` in bulk for varints of any width (``varints``): more numpy calls than the tables.
    ``runs``: the section's ``record_runs``, when walked already."""
    end = len(data)
    if count <= 0 or count > end // MIN_RECORD_SIZE:
        return False
    try:
        if runs is None:
            runs = record_runs(data, 0, end, count)
        starts, sizes, lengths = runs
        start, stop = expand(starts, sizes, lengths, count)
        u = np.frombuffer(data, np.uint8)
        length, lw = varints(u, start)
        at = start + lw + 1  # after the length and the attributes byte
        _, w = varints(u, at)  # timestamp delta (a varlong: up to 10 bytes, as varints reads)
        at = at + w
        _, ow = varints(u, at)  # offset delta
        at = at + ow
        kl, kw = varints(u, at)
        ks = at + kw
        ke = ks + np.maximum(kl, 0)
        vl, vw = varints(u, ke)
    except (CorruptRecordError, IndexError):
        return False
    vs = ke + vw
    ve = vs + np.maximum(vl, 0)
    hc = u.take(ve, mode="clip")
    # Kafka reads an int varint of at most 5 bytes
    if max(np.max(lw), np.max(ow), np.max(kw), np.max(vw)) > 5:
        return False
    ok = (kl >= -1) & (kl < stop - ks) & (vl >= -1) & (vl < stop - vs) & (start + lw + length == stop)
    plain = hc == 0
    ok &= ~plain | (ve + 1 == stop)
    if not ok.all():
        return False
    if not plain.all():  # records with headers: each walked (a header's fields have no fixed place)
        for i in np.flatnonzero(~plain).tolist():
            if _headers_end(data, int(ve[i]), int(stop[i])) != int(stop[i]):
                return False
    return True


def _headers_end(data: bytes, pos: int, stop: int) -> int:
    """Where a record's well-formed headers end, or -1. Every count and length is an int varint of at most 5
    bytes, as Kafka reads them."""
    try:
        n, q = varint(data, pos)
        if q - pos > 5 or n < 0 or n > stop - q:
            return -1
        pos = q
        for _ in range(n):
            kl, q = varint(data, pos)
            if q - pos > 5 or kl < 0 or kl > stop - q:
                return -1
            pos = q + kl
            vl, q = varint(data, pos)
            if q - pos > 5 or vl < -1 or vl > stop - q:
                return -1
            pos = q + max(vl, 0)
    except (CorruptRecordError, IndexError):
        return -1
    return pos


class _Underflow(Exception):
    """Kafka: BufferUnderflowException."""


class _Illegal(Exception):
    """Kafka: IllegalArgumentException (a varint too long, a slice past the buffer)."""


class _Invalid(Exception):
    """Kafka: InvalidRecordException."""


class _Reader:
    """Java's reads of varints and bytes over ``data[:end]``; ``stream``: past the end a read gives -1 (an
    InputStream) instead of failing (a ByteBuffer)."""

    __slots__ = ("data", "pos", "end", "stream")

    def __init__(self, data, pos: int, end: int, stream: bool):
        self.data, self.pos, self.end, self.stream = data, pos, end, stream

    def byte(self) -> int:
        if self.pos < self.end:
            b = self.data[self.pos]
            self.pos += 1
            return b
        if self.stream:
            return 0xFF  # read() == -1, taken as a byte
        raise _Underflow

    def int32(self) -> int:
        """ByteUtils.readVarint: at most 5 bytes, bits past 32 dropped."""
        raw = 0
        for i in range(5):
            b = self.byte()
            if i == 4:
                if b >= 0x80:
                    raise _Illegal("varint longer than 5 bytes")
                raw |= b << 28
                break
            raw |= (b & 0x7F) << (7 * i)
            if b < 0x80:
                break
        raw &= _U32
        v = (raw >> 1) ^ (-(raw & 1) & _U32)
        return v - (1 << 32) if v >= 1 << 31 else v

    def int64(self) -> None:
        """ByteUtils.readVarlong (the value is not needed): a continuation in a 10th byte fails."""
        for _ in range(10):
            if self.byte() < 0x80:
                return
        raise _Illegal("varlong longer than 10 bytes")

    def slice(self, n: int) -> None:
        """Utils.readBytes: a negative length is null; past the end fails."""
        if n >= 0:
            if n > self.end - self.pos:
                raise _Illegal(f"{n} bytes past the end")
            self.pos += n

    def skip(self, n: int) -> None:
        """DefaultRecord.skipBytes of a stream."""
        if n > 0:
            if n > self.end - self.pos:
                raise _Invalid("end of stream before the bytes to skip")
            self.pos += n


def _record_body(r: _Reader, size: int) -> None:
    """DefaultRecord.readFrom after the length: every field read, the record's length consumed exactly."""
    start = r.pos
    try:
        r.byte()  # attributes
        r.int64()  # timestamp delta
        r.int32()  # offset delta
        r.slice(r.int32())  # key
        r.slice(r.int32())  # value
        n = r.int32()
        if n < 0:
            raise _Invalid(f"negative header count {n}")
        if n > r.end - r.pos:
            raise _Invalid(f"header count {n} larger than the bytes left")
        for _ in range(n):
            k = r.int32()
            if k < 0:
                raise _Invalid(f"negative header key length {k}")
            r.slice(k)
            r.slice(r.int32())
    except (_Underflow, _Illegal) as exc:
        raise _Invalid(f"invalid record structure ({exc or type(exc).__name__})") from None
    if r.pos - start != size:
        raise _Invalid(f"record declares {size} bytes but its fields take {r.pos - start}")


def _skip_record(r: _Reader) -> None:
    """DefaultRecord.readPartiallyFrom: fields read or skipped in turn, the record's length not used."""
    r.int32()  # length
    r.byte()  # attributes
    r.int64()
    r.int32()
    r.skip(r.int32())
    r.skip(r.int32())
    n = r.int32()
    if n < 0:
        raise _Invalid(f"negative header count {n}")
    for _ in range(n):  # each header reads at least a byte: bounded by the section
        k = r.int32()
        if k < 0:
            raise _Invalid(f"negative header key length {k}")
        r.skip(k)
        r.skip(r.int32())


def _as_kafka_reads(data, count: int, mode: int) -> tuple[int, str] | None:
    end = len(data)
    r = _Reader(data, 0, end, mode != BUFFER)
    for i in range(count):
        try:
            if mode == SKIP:
                _skip_record(r)
                continue
            try:
                size = r.int32()
            except _Illegal as exc:
                if mode == BUFFER:
                    # outside Kafka's record parse and its iterator's catch of an underflow: an exception it
                    # answers as UNKNOWN_SERVER_ERROR
                    return errors.UNKNOWN_SERVER_ERROR, f"record {i} of {count}: its length is a {exc}"
                raise _Invalid(str(exc)) from None
            except _Underflow:
                raise _Invalid("the records section ends before the record's length") from None
            if size > end - r.pos or (mode == WHOLE and size < 0):
                raise _Invalid(f"record declares {size} bytes, {end - r.pos} left")
            if mode == WHOLE:  # the record read out of the stream whole, then parsed within its length
                rec = _Reader(data, r.pos, r.pos + size, False)
                _record_body(rec, size)
                r.pos += size
            else:
                _record_body(r, size)
        except (_Invalid, _Illegal, _Underflow) as exc:
            return errors.INVALID_RECORD, f"record {i} of {count}: {exc or type(exc).__name__}"
    if r.pos < end:
        return errors.INVALID_RECORD, f"{end - r.pos} bytes left in the records section after {count} records"
    return None
