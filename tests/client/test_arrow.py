"""The Arrow decoding path, offline: it must agree with the records module's decoder on every shape."""
from __future__ import annotations

import random

import pyarrow as pa
import pytest

from kafkawire.client.arrow import SCHEMA, SCHEMA_WITH_HEADERS, ArrowColumns
from kafkawire.protocol.records import LOG_APPEND_TIME, CorruptRecordError, Record, build_batch, iter_batches


def _records(n: int, seed: int):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        key = None if rnd.random() < 0.3 else rnd.randbytes(rnd.choice([0, 3, 70, 200]))
        value = None if rnd.random() < 0.1 else rnd.randbytes(rnd.choice([0, 5, 63, 64, 100, 300, 9000, 20000]))
        headers = [] if rnd.random() < 0.7 else [("h%d" % j, None if j == 1 else rnd.randbytes(j * 3))
                                                 for j in range(3)]
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
    for row, rec in zip(got, expected):
        assert row["topic"] == "topic" and row["partition"] == 3
        assert row["offset"] == rec.offset
        assert rb.column("timestamp").cast(pa.int64())[got.index(row)].as_py() == rec.timestamp
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
        chunk = recs[i:i + 700]
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
    buf = build_batch([(b"k", b"v", None, 5), (None, b"w", None, 6)], timestamp_type=LOG_APPEND_TIME,
                      log_append_time=1_700_000_000_123)
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
    buf[-7] = 0x7F   # the last value's length varint now claims more bytes than there are
    cols = ArrowColumns("t", 0)
    with pytest.raises(CorruptRecordError):
        for b in iter_batches(bytes(buf)):
            cols.add_batch(b)


def test_null_key_batches_then_keyed_then_null_again():
    recs_null = [(None, b"v%d" % i, None, 1000 + i) for i in range(50)]
    recs_keyed = [(b"k%d" % i if i % 2 else None, b"w%d" % i, None, 2000 + i) for i in range(50)]
    recs_empty_keys = [(b"" if i % 3 == 0 else None, b"", None, 3000 + i) for i in range(30)]
    buf = b"".join([build_batch(recs_null, base_offset=0), build_batch(recs_keyed, base_offset=50),
                    build_batch(recs_null, base_offset=100), build_batch(recs_empty_keys, base_offset=150)])
    rb, expected = _decode(buf, headers=False)
    _check(rb, expected)
    assert rb.column("key").null_count == 50 + 25 + 50 + 20


def test_every_key_null_across_pieces():
    buf = b"".join(build_batch([(None, b"x", None, 1)] * 10, base_offset=10 * i) for i in range(5))
    rb, expected = _decode(buf, headers=False)
    _check(rb, expected)
    assert rb.column("key").null_count == 50
