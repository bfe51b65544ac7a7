"""The broker's quick checks of a produced records section never accept what Kafka's reading refuses.

``walk._well_formed`` lets a section through without the record-by-record walk that follows Kafka's reading
rules (``walk._as_kafka_reads``); it has five ways of doing so (a Python step per record for a few records,
run by run with strided byte slices, regular expressions of the known record layouts, the byte-pair tables, the
general numpy varints). Each is compared with the walk, in every mode, on random
sections as producers write them and on the same sections corrupted (bytes changed, inserted, removed, cut,
the record count off by one). A quick check may refuse a section Kafka reads (the walk then decides), but
it must take the sections producers write, or the broker pays the walk for them.
"""

from __future__ import annotations

import random

import pytest

from kafkawire.protocol.records import walk
from kafkawire.protocol.records.walk import (
    BUFFER,
    SKIP,
    WHOLE,
    _as_kafka_reads,
    _well_formed,
    _well_formed_bulk,
    _well_formed_layouts,
    _well_formed_runs,
    _well_formed_tables,
    _well_formed_walk,
    unreadable,
)

pytest.importorskip("numpy")

CHECKS = {
    "walk": _well_formed_walk,
    "runs": _well_formed_runs,
    "layouts": _well_formed_layouts,
    "tables": _well_formed_tables,
    "bulk": _well_formed_bulk,
    "any": _well_formed,
}
MODES = (BUFFER, SKIP, WHOLE)


def varint(n: int, pad: int = 0, most: int = 5) -> bytes:
    """A zigzag varint; ``pad`` extra bytes of leading-zero continuation (a longer form Kafka still reads:
    at most ``most`` bytes in all, 5 for an int, 10 for a long)."""
    u = (n << 1) ^ (n >> 63)
    pad = max(0, min(pad, most - (max(u.bit_length(), 1) + 6) // 7))
    out = bytearray()
    while u >= 0x80:
        out.append(u & 0x7F | 0x80)
        u >>= 7
    if pad:
        out.append(u | 0x80)
        out += b"\x80" * (pad - 1)
        out.append(0)
    else:
        out.append(u)
    return bytes(out)


def blob(rng: random.Random, big: bool) -> bytes | None:
    r = rng.random()
    if r < 0.1:
        return None
    if r < 0.15:
        return b""
    if big and r < 0.2:
        return rng.randbytes(rng.choice((8190, 8200)))  # a 2- or 3-byte length, and a 3-byte record length
    return rng.randbytes(rng.choice((1, 3, 10, 60, 63, 64, 100, 1024)))


FLAWS = (
    "length over 5 bytes",
    "timestamp over 10 bytes",
    "field over 5 bytes",
    "bytes after the headers",
    "length one short",
    "length one long",
    "negative header count",
    "negative header key length",
    "one header more than written",
    "key length -2",
)


def section(rng: random.Random, count: int, odd: bool, flaw: str | None = None) -> tuple[bytes, bool, bool]:
    """A records section of ``count`` records as a producer could write it, and whether every varint in it is
    canonical and at most two bytes (what the byte-pair tables take). ``odd``: long timestamp and offset
    deltas, padded varints, 8 KiB values. ``flaw``: one record (chosen at random) written with it. Third:
    whether the records share one layout (no headers, keys and values of one length each)."""
    plain = bare = True
    same_key = rng.random() < 0.5  # runs of records of one size, as most batches are
    key0, value0 = blob(rng, False), blob(rng, odd)
    flawed = rng.randrange(count)
    headed = rng.random() < 0.5  # half the sections have no headers at all (the run-by-run check's sections)
    parts = []
    for i in range(count):
        f = flaw if i == flawed else None
        key, value = (key0, value0) if same_key else (blob(rng, False), blob(rng, odd))
        headers = []
        if headed and rng.random() < 0.2 or f == "negative header key length":
            headers = [(rng.randbytes(rng.randint(0, 5)), blob(rng, False)) for _ in range(rng.randint(1, 3))]
            bare = False
        ts = rng.choice((0, 1, 63, 64, 8191, 8192, 10**6, 2**40)) if odd and rng.random() < 0.3 else i // 7
        pads = [rng.choice((0, 0, 0, 1, 3)) if odd else 0 for _ in range(5)]
        if any(pads) or ts >= 8192:  # (offset deltas of 8192 and up: three bytes the tables take)
            plain = False
        if f == "field over 5 bytes":
            pads[rng.randrange(1, 5)] = -6
        if f == "timestamp over 10 bytes":
            pads[0] = -11

        def v(n: int, pad: int = 0, most: int = 5) -> bytes:
            return varint(n, -pad, -pad) if pad < 0 else varint(n, pad, most)  # pad -k: exactly k bytes

        def length(b: bytes | None, pad: int = 0) -> bytes:
            return v(-1 if b is None else len(b), pad) + (b or b"")

        count_of_headers = len(headers) + (f == "one header more than written")
        if f == "negative header count":
            count_of_headers = rng.choice((-1, -5))
        header_bytes = [length(k) + length(w) for k, w in headers]
        if f == "negative header key length":
            k, w = headers[0]
            header_bytes[0] = varint(rng.choice((-1, -3))) + k + length(w)
        body = (
            b"\0"
            + v(ts, pads[0], 10)
            + v(i, pads[1])
            + (v(-2, pads[2]) if f == "key length -2" else length(key, pads[2]))
            + length(value, pads[3])
            + v(count_of_headers, pads[4])
            + b"".join(header_bytes)
        )
        if f == "bytes after the headers":
            body += rng.randbytes(rng.randint(1, 3))
        if value is not None and len(value) >= 8192 or len(body) >= 8192:
            plain = False
        size = len(body) + (f == "length one long") - (f == "length one short")
        parts.append((varint(size, 6, 6) if f == "length over 5 bytes" else varint(size)) + body)
    return b"".join(parts), plain, bare and same_key


def corrupted(rng: random.Random, data: bytes) -> bytes:
    pos = rng.randrange(len(data))
    kind = rng.randrange(5)
    if kind == 0:
        return (
            data[:pos]
            + bytes((rng.choice((0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF, rng.randrange(256))),))
            + data[pos + 1 :]
        )
    if kind == 1:
        return data[:pos] + bytes((rng.randrange(256),)) + data[pos:]
    if kind == 2:
        return data[:pos] + data[pos + 1 :]
    if kind == 3:
        return data[:pos]
    return data[:pos] + data[pos : pos + 2][::-1] + data[pos + 2 :]  # two bytes swapped


def kafka_reads(data: bytes, count: int) -> bool:
    return all(_as_kafka_reads(data, count, mode) is None for mode in MODES)


@pytest.mark.parametrize("seed", range(4))
def test_quick_checks_take_what_producers_write(seed):
    rng = random.Random(seed)
    for _ in range(60):
        count = rng.choice((1, 2, 5, 20, 21, 40, 200))
        odd = rng.random() < 0.3
        data, plain, uniform = section(rng, count, odd)
        assert kafka_reads(data, count)
        assert _well_formed_walk(data, count)
        assert _well_formed_bulk(data, count) or odd  # it reads any width, not padded varints over 5 bytes
        if plain:
            assert _well_formed_tables(data, count), data.hex()
        if uniform and not odd:  # (records of one size but different layouts, or padded varints: the others)
            assert _well_formed_runs(data, count), data.hex()
        assert _well_formed(data, count) or odd
        for mode in MODES:
            assert unreadable(data, count, mode) is None


def agree(data: bytes, n: int, passed: dict) -> bool:
    """Every quick check that passes ``data`` is right to (Kafka reads it in every mode), and the broker's
    answer is the walk's; whether Kafka reads it."""
    reads = kafka_reads(data, n)
    for name, check in CHECKS.items():
        if check(data, n):
            passed[name] += 1
            assert reads, (name, data.hex(), n)
    for mode in MODES:
        assert unreadable(data, n, mode) == _as_kafka_reads(data, n, mode)
    return reads


@pytest.mark.parametrize("seed", range(4))
def test_quick_checks_accept_no_corrupted_section_kafkas_reading_refuses(seed):
    rng = random.Random(100 + seed)
    passed = {name: 0 for name in CHECKS}
    refused = 0
    for _ in range(30):
        count = rng.choice((1, 3, 20, 21, 50))
        data, _, _ = section(rng, count, rng.random() < 0.3)
        for _ in range(30):
            bad = corrupted(rng, data)
            for n in (count - 1, count, count + 1) if rng.random() < 0.3 else (count,):
                refused += not agree(bad, n, passed)
    # the corruptions reach both sides: some leave the layout intact (a key or value byte), many break it
    assert refused > 400 and all(passed.values()), (refused, passed)


@pytest.mark.parametrize("flaw", FLAWS)
def test_quick_checks_accept_no_flawed_record_kafkas_reading_refuses(flaw):
    """One record of the section written with a flaw in its layout (a field too long, the length off, ...),
    among records of every check's shapes."""
    rng = random.Random(flaw)
    passed = {name: 0 for name in CHECKS}
    refused = 0
    for _ in range(40):
        count = rng.choice((1, 3, 20, 21, 50))
        data, _, _ = section(rng, count, rng.random() < 0.3, flaw)
        refused += not agree(data, count, passed)
    if flaw == "key length -2":
        assert not refused  # Kafka reads a negative length as null: the quick checks may refuse it all the same
    else:
        assert refused == 40


@pytest.mark.parametrize("count", (6, 8, 12, 20))
def test_small_sections_of_few_runs_are_checked_run_by_run_as_soundly(count):
    """From 6 to 20 records a section that looks like a few runs is checked run by run before the walk
    (``_RUNS_FROM``): producers' sections pass, and nothing it passes is refused by Kafka's reading."""
    rng = random.Random(count)
    passed = {name: 0 for name in CHECKS}
    refused = taken = 0
    for _ in range(25):
        data, _, uniform = section(rng, count, False)
        assert _well_formed(data, count)
        taken += uniform and _well_formed_runs(data, count)
        for _ in range(25):
            bad = corrupted(rng, data)
            for n in (count - 1, count, count + 1):
                refused += not agree(bad, n, passed)
    assert taken and refused > 200 and passed["any"], (taken, refused, passed)


def _offset_delta_at(data: bytes, index: int) -> int:
    """Where record ``index``'s offset delta starts (records as ``section`` writes them)."""

    def skip(pos: int) -> tuple[int, int]:
        u = shift = 0
        while True:
            b = data[pos]
            u |= (b & 0x7F) << shift
            pos += 1
            shift += 7
            if b < 0x80:
                return (u >> 1) ^ -(u & 1), pos

    pos = 0
    for _ in range(index):
        size, body = skip(pos)
        pos = body + size
    _, body = skip(pos)
    return skip(body + 1)[1]  # past the attributes byte and the timestamp delta


def test_batches_past_8192_records_are_checked_by_the_tables_as_soundly():
    """librdkafka fills batches of 100 B records to about 9,000: the offset deltas from 8192 on take three
    bytes, which the tables read (and check the third byte of) rather than sending the section to the general
    numpy check. A delta's third byte made to continue, and bytes put in or taken out after record 8192, are
    refused as Kafka refuses them."""
    rng = random.Random(8192)
    passed = {name: 0 for name in CHECKS}
    refused = tries = 0
    for count in (8192, 9000):
        data, plain, _ = section(rng, count, False)
        assert plain and _well_formed_tables(data, count) and _well_formed(data, count)
        assert agree(data, count, passed)
        for index in rng.sample(range(8192, count), min(3, count - 8192)):
            third = _offset_delta_at(data, index) + 2
            assert data[third - 2] >= 0x80 and data[third - 1] >= 0x80 and data[third] < 0x80
            bad = data[:third] + bytes((data[third] | 0x80,)) + data[third + 1 :]
            assert not agree(bad, count, passed)
        tail = _offset_delta_at(data, 8192 if count > 8192 else count - 1)
        for _ in range(12):
            pos = rng.randrange(tail, len(data))
            bad = data[:pos] + data[pos + 1 :] if rng.random() < 0.5 else data[:pos] + b"\0" + data[pos:]
            tries += 1
            refused += not agree(bad, count, passed)
    assert refused > tries // 2 and passed["tables"] == 2, (refused, tries, passed)


def keyed_records(key_numbers, value: bytes) -> bytes:
    """Records with keys ``k<n>`` for each n, one value, timestamps a millisecond apart every 50 records."""
    parts = []
    for i, n in enumerate(key_numbers):
        key = b"k%d" % n
        body = b"\0" + varint(i // 50) + varint(i) + varint(len(key)) + key + varint(len(value)) + value + b"\0"
        parts.append(varint(len(body)) + body)
    return b"".join(parts)


def keyed_section(rng: random.Random, count: int, value: bytes = b"v" * 100) -> bytes:
    """``count`` records as a keyed producer writes them to one of many partitions: keys ``k<n>`` of 2 to 5
    bytes in no order (a run of one size lasts a few records)."""
    return keyed_records([rng.randrange(1024) for _ in range(count)], value)


class Clock:
    """A clock that moves only when told (the learning budget's refill)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def in_order_keyed_section(start: int, count: int, value: bytes = b"v" * 100) -> bytes:
    """``count`` records as a keyed producer writes them when its keys come in order (``k<n>`` cycling through
    1024 keys, every twelfth to this partition): runs of a key length last tens of records, with runs of one or
    two where the length changes."""
    return keyed_records([(start + 12 * i) % 1024 for i in range(count)], value)


@pytest.fixture(autouse=True)
def clock(monkeypatch) -> Clock:
    """The layout matcher as the broker starts it (no layouts known, none tried first, a full learning budget),
    on a clock of the test's."""
    clock = Clock()
    monkeypatch.setattr(walk, "_matcher", walk._LayoutMatcher(clock))
    return clock


def test_keyed_sections_of_many_runs_are_matched_by_their_layouts():
    """A keyed partition's batch is hundreds of runs: the run-by-run check gives up on it and the layouts take
    it, learning each layout once; the next batches of the same producer are matched with nothing learned."""
    rng = random.Random(7)
    first = keyed_section(rng, 2400)
    starts, _sizes, _lengths = walk._runs(first, 2400)
    assert len(starts) > walk._FEW_RUNS + 2400 // 64  # more runs than the run-by-run check takes
    assert _well_formed_layouts(first, 2400) and kafka_reads(first, 2400)
    assert 4 <= len(walk._matcher.layouts.alternatives) <= walk._LAYOUTS_MAX
    for _ in range(5):  # the rare layouts (a key of 2 or 5 bytes with a 1-byte offset delta) come later
        data = keyed_section(rng, 2400)
        assert _well_formed_layouts(data, 2400) and _well_formed(data, 2400)
    learned = walk._matcher.layouts
    assert len(learned.alternatives) == 8  # keys of 2-5 bytes, offset deltas of 1-2 bytes
    for _ in range(5):
        data = keyed_section(rng, 2400)
        assert _well_formed_layouts(data, 2400) and _well_formed(data, 2400)
    assert walk._matcher.layouts is learned  # nothing learned again
    # a count off by one, a section with a record more or less: the layouts refuse, and Kafka's reading decides
    data = keyed_section(rng, 300)
    for n in (299, 301):
        assert not _well_formed_layouts(data, n) and not kafka_reads(data, n)


def test_keyed_sections_corrupted_are_never_taken_by_the_layouts():
    """Bytes changed, put in, taken out or cut anywhere in a keyed section whose layouts are all known: what
    the layouts take, Kafka reads (and the broker's answer is the walk's)."""
    rng = random.Random(11)
    passed = {name: 0 for name in CHECKS}
    refused = 0
    base = keyed_section(rng, 200)
    assert _well_formed_layouts(base, 200)
    for _ in range(300):
        bad = corrupted(rng, base)
        refused += not agree(bad, 200, passed)
    assert refused > 100 and passed["layouts"], (refused, passed)


def test_learning_layouts_is_bounded(monkeypatch, clock):
    """A peer whose every batch brings new layouts (values of every length) makes the broker compile a bounded
    number of times: at most _LEARN_PER_SECTION rounds per section, _LEARN_BURST in all, then _LEARN_PER_SECOND
    a second; such sections are still answered right (by the tables)."""
    compiled = []
    real = walk._Layouts

    def counting(alternatives, sizes):
        compiled.append(len(alternatives))
        return real(alternatives, sizes)

    monkeypatch.setattr(walk, "_Layouts", counting)
    rng = random.Random(3)

    def sections(n: int) -> None:
        for i in range(n):
            parts = []
            for j in range(50):  # each record a value of its own length: a layout of its own
                value = rng.randbytes(200 + 50 * i + j)
                body = b"\0\0" + varint(j) + b"\1" + varint(len(value)) + value + b"\0"
                parts.append(varint(len(body)) + body)
            data = b"".join(parts)
            before = len(compiled)
            assert kafka_reads(data, 50) and _well_formed(data, 50)
            assert len(compiled) - before <= walk._LEARN_PER_SECTION

    sections(40)
    assert len(compiled) == walk._LEARN_BURST  # the burst is spent, nothing more while the clock stands
    clock.now += 1.0
    sections(10)
    assert len(compiled) == walk._LEARN_BURST + walk._LEARN_PER_SECOND  # a second's refill, no more
    assert max(compiled) <= walk._LAYOUTS_MAX


def test_in_order_keyed_sections_are_matched_run_by_run_and_corruption_is_refused():
    """Sections of long runs of a layout (keys in order) are taken by the layouts' run match; the same sections
    with bytes changed, put in, taken out or cut are taken only where Kafka reads them."""
    rng = random.Random(13)
    base = in_order_keyed_section(5, 600)
    starts, _sizes, _lengths = walk._runs(base, 600)
    assert len(starts) > walk._FEW_RUNS + 600 // 64  # more runs than the run-by-run check takes
    assert _well_formed_layouts(base, 600) and kafka_reads(base, 600)
    layouts = walk._matcher.layouts
    assert layouts.advance(base, 0, 600) == (len(base), 0)
    assert layouts.advance(base, 0, 599)[1] == 0  # a count one short ends inside a run: the bytes left refuse it
    assert not _well_formed_layouts(base, 599) and not _well_formed_layouts(base, 601)
    for start in range(0, 1024, 97):
        data = in_order_keyed_section(start, 900)
        assert _well_formed(data, 900) and kafka_reads(data, 900)
    passed = {name: 0 for name in CHECKS}
    refused = 0
    for _ in range(300):
        refused += not agree(corrupted(rng, base), 600, passed)
    assert refused > 100 and passed["layouts"], (refused, passed)
