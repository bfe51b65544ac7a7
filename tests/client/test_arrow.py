"""The Arrow decoding path, offline: it must agree with the records module's decoder on every shape."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from kafkawire.client.arrow import SCHEMA, SCHEMA_WITH_HEADERS, ArrowColumns
from kafkawire.protocol.records import LOG_APPEND_TIME, CorruptRecordError, Record, build_batch, iter_batches


def _records(n: int, seed: int):
    rnd = random.Random(seed)
    out = []
    for _i in range(n):
        key = None if rnd.random() < 0.3 else rnd.randbytes(rnd.choice([0, 3, 70, 200]))
        value = None if rnd.random() < 0.1 else rnd.randbytes(rnd.choice([0, 5, 63, 64, 100, 300, 9000, 20000]))
        headers = (
            [] if rnd.random() < 0.7 else [("h%d" % j, None if j == 1 else rnd.randbytes(j * 3)) for j in range(3)]
        )
        out.append((key, value, headers, 1_700_000_000_000 + rnd.randint(-5000, 10_000_000)))
    return out


def _decode(buf, min_offset=0, headers=True):
    cols = ArrowColumns("topic", 3, headers=headers)
    expected = []
    for batch in iter_batches(buf):
        cols.add_batch(batch, min_offset)
        expected += [r for r in batch.records() if r.offset >= min_offset]
    return cols.to_batch(), expected


def _check(rb, expected, ts_type=0):
    assert rb.num_rows == len(expected)
    rb.validate(full=True)
    got = rb.to_pylist()
    timestamps = rb.column("timestamp").cast(pa.int64()).to_pylist()
    for row, ts, rec in zip(got, timestamps, expected):
        assert row["topic"] == "topic" and row["partition"] == 3
        assert row["offset"] == rec.offset
        assert ts == rec.timestamp
        assert row["timestamp_type"] == ts_type
        assert row["key"] == rec.key and row["value"] == rec.value
        if "headers" in row:
            assert [(h["key"], h["value"]) for h in row["headers"]] == list(rec.headers)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("min_offset", [0, 5, 1403])
def test_agrees_with_the_records_decoder(codec, min_offset):
    recs = _records(2100, seed=len(codec))
    batches, off = [], 0
    for i in range(0, len(recs), 700):
        chunk = recs[i : i + 700]
        batches.append(build_batch(chunk, compression=codec, base_offset=off))
        off += len(chunk)
    rb, expected = _decode(b"".join(batches), min_offset)
    assert rb.schema == SCHEMA_WITH_HEADERS
    _check(rb, expected)


def test_compacted_batches_with_offset_gaps():
    recs = _records(500, seed=9)
    kept = [Record(1000 + i, ts, k, v, h) for i, (k, v, h, ts) in enumerate(recs) if i % 3]
    buf = build_batch(kept, base_offset=1000)
    for min_offset in (0, 1000, 1001, 1250, 1499):
        rb, expected = _decode(buf, min_offset)
        _check(rb, expected)


def test_log_append_time_and_no_headers_column():
    buf = build_batch(
        [(b"k", b"v", None, 5), (None, b"w", None, 6)],
        timestamp_type=LOG_APPEND_TIME,
        log_append_time=1_700_000_000_123,
    )
    cols = ArrowColumns("topic", 3)
    for b in iter_batches(buf):
        cols.add_batch(b)
    rb = cols.to_batch()
    assert rb.schema == SCHEMA
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [1_700_000_000_123] * 2
    assert rb.column("timestamp_type").to_pylist() == [1, 1]
    assert rb.column("key").to_pylist() == [b"k", None]


def test_all_null_keys_and_empty():
    buf = build_batch([(None, b"x" * 100, None, 1)] * 300)
    rb, expected = _decode(buf, headers=False)
    assert rb.column("key").null_count == 300
    _check(rb, expected)
    assert len(ArrowColumns("t", 0)) == 0


def test_corrupt_records_section_is_an_error():
    buf = bytearray(build_batch([(b"k", b"value", None, 1)] * 3))
    buf[-7] = 0x7F  # the last value's length varint now claims more bytes than there are
    cols = ArrowColumns("t", 0)
    with pytest.raises(CorruptRecordError):
        for b in iter_batches(bytes(buf)):
            cols.add_batch(b)


def test_null_key_batches_then_keyed_then_null_again():
    recs_null = [(None, b"v%d" % i, None, 1000 + i) for i in range(50)]
    recs_keyed = [(b"k%d" % i if i % 2 else None, b"w%d" % i, None, 2000 + i) for i in range(50)]
    recs_empty_keys = [(b"" if i % 3 == 0 else None, b"", None, 3000 + i) for i in range(30)]
    buf = b"".join(
        [
            build_batch(recs_null, base_offset=0),
            build_batch(recs_keyed, base_offset=50),
            build_batch(recs_null, base_offset=100),
            build_batch(recs_empty_keys, base_offset=150),
        ]
    )
    rb, expected = _decode(buf, headers=False)
    _check(rb, expected)
    assert rb.column("key").null_count == 50 + 25 + 50 + 20


def test_every_key_null_across_pieces():
    buf = b"".join(build_batch([(None, b"x", None, 1)] * 10, base_offset=10 * i) for i in range(5))
    rb, expected = _decode(buf, headers=False)
    _check(rb, expected)
    assert rb.column("key").null_count == 50


# -- runs of same-layout records (decoded with strided slices, no per-record Python) -----------------------


def _uniform_batch(n, *, key_len=None, value_len=100, ts_step=1, base_ts=1_700_000_000_000, interrupt=None, vary=0):
    recs = []
    for i in range(n):
        key = None if key_len is None else (b"%0*d" % (key_len, i))[-key_len:] if key_len else b""
        value = bytes([i % 251]) * (value_len + ((i * 7919) % vary if vary else 0))
        headers = None
        if interrupt and i in interrupt:
            kind = interrupt[i]
            if kind == "headers":
                headers = [("h", b"x")]
            elif kind == "null":
                value = None
            elif kind == "longer":
                value = value + b"+"
            elif kind == "key":
                key = b"odd-one"
        recs.append((key, value, headers, base_ts + i * ts_step))
    return recs


SHAPES = [
    dict(n=200),  # 1-byte ts and offset deltas, then 2-byte offset deltas
    dict(n=9000, ts_step=3),  # 3-byte offset deltas after 8191, 2/3-byte ts deltas
    dict(n=300, ts_step=-1),  # negative timestamp deltas
    dict(n=300, ts_step=0),
    dict(n=300, value_len=10),  # 1-byte record lengths
    dict(n=300, value_len=5000),  # 2-byte value lengths
    dict(n=300, value_len=200),
    dict(n=300, value_len=0),
    dict(n=300, key_len=8),
    dict(n=300, key_len=0),  # empty (not null) keys
    dict(n=300, key_len=70),  # 2-byte key lengths: one by one
    dict(n=300, interrupt={5: "headers", 100: "null", 101: "longer", 200: "headers", 250: "key"}),
    dict(n=300, key_len=4, interrupt={40: "null", 41: "null", 150: "longer"}),
    # sizes that vary: fields line up before the value, which ends at each record's end
    dict(n=2000, value_len=100, vary=100),
    dict(n=2000, value_len=100, vary=100, key_len=6),
    dict(n=600, value_len=40, vary=60),  # 1- and 2-byte value lengths mixed
    dict(n=600, value_len=100, vary=20000),  # 2- and 3-byte record lengths mixed
    dict(n=600, value_len=0, vary=3),  # tiny records
    dict(n=2000, value_len=150, vary=50, ts_step=40, interrupt={300: "headers", 301: "null", 1500: "key"}),
    dict(n=2000, value_len=150, vary=50, key_len=3, interrupt={10: "null", 900: "headers"}),
]


@pytest.mark.parametrize("shape", range(len(SHAPES)))
@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_same_layout_runs_agree_with_the_records_decoder(shape, codec):
    kw = dict(SHAPES[shape])
    recs = _uniform_batch(**kw)
    buf = build_batch(recs, compression=codec, base_offset=1000)
    for min_offset in (0, 1000, 1001, 1063, 1064, 1100):
        rb, expected = _decode(buf, min_offset)
        _check(rb, expected)


def test_same_first_length_byte_but_different_lengths():
    # record lengths whose zigzag varints share the first byte (0x90 ..) but not the second
    recs = [(None, b"a" * 190, None, 1)] * 40 + [(None, b"b" * 318, None, 2)] * 40
    buf = build_batch(recs)
    rb, expected = _decode(buf, headers=False)
    _check(rb, expected)
    recs = [(None, b"a" * 190, None, 1)] * 20 + [(None, b"b" * 318, None, 2)] + [(None, b"a" * 190, None, 1)] * 20
    rb, expected = _decode(build_batch(recs), headers=False)
    _check(rb, expected)


def test_many_same_layout_batches_and_modes():
    parts = []
    off = 0
    for j, shape in enumerate([dict(n=100), dict(n=100, key_len=6), dict(n=100), dict(n=50, key_len=0)]):
        parts.append(build_batch(_uniform_batch(**shape, base_ts=10_000 * j), base_offset=off))
        off += shape["n"]
    rb, expected = _decode(b"".join(parts))
    _check(rb, expected)


# -- evenly spaced spans of one length (records of one size): a strided copy instead of the filter -------


def _fixed(n, *, key=lambda i: None, value=lambda i: bytes([i % 251]) * 100, ts0=1_700_000_000_000):
    return [(key(i), value(i), None, ts0 + i) for i in range(n)]


def _both_paths(buf, monkeypatch, min_offset=0):
    """The batch decoded with the strided path and with the filter path only; how many batches went strided."""
    from kafkawire.client import arrow

    even_runs = arrow._even_runs
    taken = []

    def counting(pos):
        runs = even_runs(pos)
        taken.append(runs is not None)
        return runs

    with monkeypatch.context() as m:
        m.setattr(arrow, "_even_runs", counting)
        fast, expected = _decode(buf, min_offset, headers=False)
        m.setattr(arrow, "_even_runs", lambda pos: None)
        slow, _ = _decode(buf, min_offset, headers=False)
    _check(fast, expected)
    fast.validate(full=True)
    for name in ("key", "value"):
        a, b = fast.column(name), slow.column(name)
        assert a.type == b.type == pa.binary()
        assert a.equals(b) and a.null_count == b.null_count
        assert a.is_valid().equals(b.is_valid())
        assert _offsets(a) == _offsets(b)  # int32, the same, nulls included
    assert fast.equals(slow)
    return sum(taken)


def _offsets(col):
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if arr.null_count == len(arr):
        return None
    offs = pa.Array.from_buffers(pa.int32(), len(arr) + 1, [None, arr.buffers()[1]], offset=arr.offset)
    return [x - offs[0].as_py() for x in offs.to_pylist()]


def _batches(*parts, codec="none"):
    out, off = [], 0
    for recs in parts:
        out.append(build_batch(recs, base_offset=off, compression=codec))
        off += len(recs)
    return b"".join(out)


def test_strided_equal_sizes_keys_and_values(monkeypatch):
    buf = _batches(_fixed(3000, key=lambda i: b"%010d" % i))
    assert _both_paths(buf, monkeypatch) == 2  # keys and values both strided


def test_strided_several_batches_and_codecs(monkeypatch):
    for codec in ("none", "lz4"):
        buf = _batches(*[_fixed(700, key=lambda i, j=j: b"k%02d-%04d" % (j, i)) for j in range(5)], codec=codec)
        assert _both_paths(buf, monkeypatch) == 10
        for min_offset in (1, 699, 700, 2801):
            _both_paths(buf, monkeypatch, min_offset)


def test_one_odd_record_and_a_varied_batch_in_one_column(monkeypatch):
    odd = _fixed(500)
    odd[250] = (None, b"longer" * 30, None, odd[250][3])  # the runs before and after it are strided
    varied = _fixed(500, value=lambda i: b"w" * (i % 13))  # every record another size: the filter path
    buf = _batches(_fixed(500), odd, varied, _fixed(500, value=lambda i: b"%07d" % i))
    # values: three batches copied run by run, the varied one filtered, all into one buffer
    assert _both_paths(buf, monkeypatch) == 3
    short = _fixed(500)
    short[0] = (None, b"", None, short[0][3])  # the first record differs: a run of one
    short[499] = (None, b"", None, short[499][3])  # the last too
    assert _both_paths(_batches(short, _fixed(10)), monkeypatch) == 2


def test_null_keys_mixed_and_null_values(monkeypatch):
    mixed = _fixed(400, key=lambda i: None if i % 7 == 0 else b"key-%04d" % i)
    all_null = _fixed(400)
    all_keyed = _fixed(400, key=lambda i: b"key-%04d" % i)
    null_values = _fixed(400, value=lambda i: None if i == 123 else b"v" * 100)
    buf = _batches(all_keyed, mixed, all_null, all_keyed, null_values)
    # keys: the first and fourth batch strided, the all-null third (spans of length 0) too; the mixed one
    # and the null_values batch's null keys (0-length) do as well; values: all but null_values
    assert _both_paths(buf, monkeypatch) >= 5
    _both_paths(_batches(null_values), monkeypatch)
    _both_paths(_batches(mixed), monkeypatch)


def test_empty_values_and_keys(monkeypatch):
    buf = _batches(
        _fixed(300, key=lambda i: b"", value=lambda i: b""),
        _fixed(300, value=lambda i: b""),
        _fixed(300, key=lambda i: b"", value=lambda i: b"x" * 3),
    )
    assert _both_paths(buf, monkeypatch) == 6


def test_compacted_batches_with_offset_gaps_strided(monkeypatch):
    for step in (2, 3, 200):  # offset deltas of 1, 2 and 3 bytes: record sizes change within the batch
        recs = [Record(5000 + step * i, 1_700_000_000_000 + i, b"k%05d" % i, b"%090d" % i, ()) for i in range(400)]
        buf = build_batch(recs, base_offset=5000)
        _both_paths(buf, monkeypatch)
        for min_offset in (5001, 5000 + step * 100 + 1):
            _both_paths(buf, monkeypatch, min_offset)
    recs = [Record(7000 + 2 * i, 1_700_000_000_000, None, b"%090d" % i, ()) for i in range(30)]
    assert _both_paths(build_batch(recs, base_offset=7000), monkeypatch) == 1


def test_single_record_batches(monkeypatch):
    buf = _batches(*[_fixed(1, key=lambda i, j=j: b"k" * j, value=lambda i, j=j: b"v" * (j * 37)) for j in range(6)])
    assert _both_paths(buf, monkeypatch) == 12
    assert _both_paths(_batches(_fixed(1)), monkeypatch) == 1


def test_strided_random_mixes_agree_with_the_filter_path(monkeypatch):
    rnd = random.Random(46)
    for _ in range(20):
        parts = []
        for _ in range(rnd.randint(1, 5)):
            n = rnd.choice([1, 2, 3, 50, 400])
            klen, vlen = rnd.choice([None, 0, 4, 70]), rnd.choice([0, 1, 100, 130, 5000])
            recs = _fixed(
                n,
                key=lambda i, k=klen: None if k is None else bytes([65 + i % 26]) * k,
                value=lambda i, v=vlen: bytes([i % 256]) * v,
            )
            for _ in range(rnd.choice([0, 0, 1, 3])):  # odd records: another size, a null
                i = rnd.randrange(n)
                recs[i] = (rnd.choice([None, b"odd"]), rnd.choice([None, b"", b"z" * 101]), None, recs[i][3])
            parts.append(recs)
        _both_paths(_batches(*parts), monkeypatch, rnd.choice([0, 0, 1, 60]))


def test_spans_copied_per_section_agree_with_one_filter_over_the_joined_sections():
    # varied records of many batches: each batch's spans filtered out of its own section (or, for the
    # one-record batch, copied as a run), against one filter over all sections joined
    from kafkawire.client import arrow

    recs = _records(900, seed=46)
    buf = _batches(recs[:300], recs[300:301], recs[301:900], codec="zstd")
    cols = ArrowColumns("t", 0)
    for batch in iter_batches(buf):
        cols.add_batch(batch)
    (piece,) = cols._pieces
    joined = pa.py_buffer(b"".join(piece.sections))
    for pos, valid in ((piece.value_pos, piece.value_valid), (piece.key_pos, piece.key_valid)):
        runs = arrow._plan(pos)
        assert [r if r is None else r.tolist() for r in runs] == [None, [0, 1], None]
        whole = arrow._with_validity(arrow._filter_spans(joined, np.concatenate(pos)), pos, valid)
        for plan in (runs, [None] * len(pos)):
            per_section = arrow._assemble(piece, pos, valid, plan)
            per_section.validate(full=True)
            assert per_section.equals(whole) and per_section.null_count == whole.null_count
            assert _offsets(per_section) == _offsets(whole)
