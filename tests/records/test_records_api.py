"""Behaviour of the public API: laziness, zero copy, partial tails, in-place rewrites, builders, control batches."""

from __future__ import annotations

import struct
import sys

import pytest
from crc32c import crc32c

from kafkawire.protocol.records import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    LOG_APPEND_TIME,
    BatchBuilder,
    CodecUnavailableError,
    Compression,
    ControlRecordType,
    CorruptRecordError,
    CrcMismatchError,
    DecompressionLimitError,
    LegacyBatch,
    Record,
    RecordBatch,
    TimestampType,
    UnsupportedCodecError,
    assign_offsets,
    build_batch,
    build_control_batch,
    build_end_txn_marker,
    build_message_set,
    codecs as codecs_module,
    decode_control_record,
    estimate_record_size,
    header_summary,
    iter_batches,
    iter_records,
    set_base_offset,
    set_max_timestamp,
)

TS = 1_700_000_000_000


def sample_records(n: int, start_ts: int = TS):
    return [(b"k%d" % i, b"value-%d" % i, [("h", b"%d" % i)] if i % 3 == 0 else [], start_ts + i) for i in range(n)]


def legacy_records(n: int):
    return [(k, v, None, ts) for k, v, _, ts in sample_records(n)]


def fix_crc(buf: bytearray, pos: int = 0) -> None:
    (length,) = struct.unpack_from(">i", buf, pos + 8)
    struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : pos + 12 + length])))


# ------------------------------------------------------------ reading


def test_iteration_yields_views_into_the_buffer():
    one = build_batch(sample_records(5))
    buf = bytearray(one * 3)
    batches = list(iter_batches(buf))
    assert [b.position for b in batches] == [0, len(one), 2 * len(one)]
    for b in batches:
        assert b.buffer.obj is buf  # a view, not a copy
        assert b.buffer.nbytes == len(one)
    # A change in the underlying buffer shows through the view.
    buf[len(one) : len(one) + 8] = (99).to_bytes(8, "big")
    assert batches[1].base_offset == 99


def test_header_is_readable_and_crc_checkable_without_decoding_records():
    """Garbage in the (compressed) records section does not stop header access or CRC checks."""
    buf = bytearray(
        build_batch(
            sample_records(10), compression="zstd", base_offset=40, producer_id=5, producer_epoch=1, base_sequence=0
        )
    )
    buf[61:] = b"\xab" * (len(buf) - 61)  # not zstd any more
    fix_crc(buf)
    (batch,) = list(iter_batches(buf, check_crc=True))
    assert batch.crc_ok
    assert header_summary(buf) == (40, 49, TS + 9, 10)
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (40, 49, 50)
    assert (batch.record_count, batch.max_timestamp, batch.compression) == (10, TS + 9, Compression.ZSTD)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_sequence) == (5, 1, 0, 9)
    with pytest.raises(CorruptRecordError, match="base offset 40.*invalid zstd data"):
        batch.decode_records()


def test_partial_tail_is_reported_not_raised():
    one = build_batch(sample_records(5))
    legacy = build_message_set(legacy_records(2), magic=1)
    full = one + legacy + one
    for cut in range(len(full) + 1):
        buf = full[:cut]
        reader = iter_batches(buf)
        assert reader.consumed <= cut  # available before iterating too
        entries = list(reader)
        sizes = [e.size for e in entries]
        assert reader.consumed == sum(sizes)
        assert reader.partial_tail_bytes == cut - sum(sizes)
        boundaries = [0, len(one), len(one) + len(legacy) // 2, len(one) + len(legacy), len(full)]
        assert sum(sizes) == max(b for b in boundaries if b <= cut)
        if reader.partial_tail_bytes >= 12:
            assert reader.next_batch_size in (len(one), len(legacy) // 2)
        else:
            assert reader.next_batch_size is None
        if reader.partial_tail_bytes:
            with pytest.raises(CorruptRecordError, match="buffer ends"):
                list(iter_batches(buf, allow_partial=False))


def test_check_crc_raises_with_location():
    one = build_batch(sample_records(3), base_offset=7)
    buf = bytearray(one + build_batch(sample_records(3), base_offset=42))
    buf[len(one) + 70] ^= 1
    reader = iter_batches(buf, check_crc=True)
    assert next(reader).base_offset == 7
    with pytest.raises(CrcMismatchError, match=f"base offset 42, byte position {len(one)}: CRC mismatch") as info:
        next(reader)
    assert info.value.base_offset == 42 and info.value.position == len(one)
    assert info.value.stored != info.value.computed


def test_mixed_magics_in_one_buffer():
    buf = (
        build_message_set(legacy_records(2), magic=0, base_offset=0)
        + build_message_set(legacy_records(2), magic=1, compression="gzip", base_offset=2)
        + build_batch(sample_records(2), base_offset=4, compression="snappy")
    )
    entries = list(iter_batches(buf, check_crc=True))
    assert [type(e) for e in entries] == [LegacyBatch, LegacyBatch, LegacyBatch, RecordBatch]
    assert [e.magic for e in entries] == [0, 0, 1, 2]
    assert [r.offset for r in iter_records(buf)] == [0, 1, 2, 3, 4, 5]


def test_records_decoded_only_when_asked(monkeypatch):
    calls = []
    real = codecs_module.decompress
    monkeypatch.setattr("kafkawire.protocol.records.batch.decompress", lambda *a, **k: calls.append(1) or real(*a, **k))
    buf = build_batch(sample_records(4), compression="gzip")
    (batch,) = list(iter_batches(buf, check_crc=True))
    _ = (batch.record_count, batch.last_offset, batch.max_timestamp, batch.compression)
    assert calls == []
    assert len(list(batch.records())) == 4
    assert calls == [1]


def test_null_and_empty_are_distinct():
    records = [(None, None, [("n", None)], TS), (b"", b"", [("e", b"")], TS)]
    got = list(next(iter(iter_batches(build_batch(records)))).records())
    assert got[0].key is None and got[0].value is None and got[0].headers == [("n", None)]
    assert got[1].key == b"" and got[1].value == b"" and got[1].headers == [("e", b"")]


# --------------------------------------------------------- rewriting


def test_set_base_offset_in_place_leaves_crc_valid():
    buf = bytearray(build_batch(sample_records(3), base_offset=0, partition_leader_epoch=-1))
    crc_before = bytes(buf[17:21])
    set_base_offset(buf, 0, 1_000_000, partition_leader_epoch=12)
    (batch,) = list(iter_batches(buf, check_crc=True))
    assert bytes(buf[17:21]) == crc_before
    assert batch.base_offset == 1_000_000 and batch.partition_leader_epoch == 12
    assert [r.offset for r in batch.records()] == [1_000_000, 1_000_001, 1_000_002]
    # Through a memoryview slice of a bigger buffer too.
    big = bytearray(b"\x00" * 10) + buf
    set_base_offset(memoryview(big), 10, 5)
    assert RecordBatch.from_bytes(big[10:]).base_offset == 5


def test_set_base_offset_refuses_legacy_entries():
    buf = bytearray(build_message_set(legacy_records(1), magic=1))
    with pytest.raises(ValueError, match="magic 1"):
        set_base_offset(buf, 0, 10)


def test_assign_offsets_over_several_batches():
    buf = bytearray(build_batch(sample_records(3)) + build_batch(sample_records(5)) + build_batch(sample_records(1)))
    assert assign_offsets(buf, 100, partition_leader_epoch=4) == 109
    batches = list(iter_batches(buf, check_crc=True))
    assert [(b.base_offset, b.last_offset, b.partition_leader_epoch) for b in batches] == [
        (100, 102, 4),
        (103, 107, 4),
        (108, 108, 4),
    ]


def test_set_max_timestamp_switches_to_log_append_time():
    buf = bytearray(build_batch(sample_records(4), compression="lz4"))
    set_max_timestamp(buf, 0, LOG_APPEND_TIME, 1_800_000_000_000)
    (batch,) = list(iter_batches(buf, check_crc=True))
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [1_800_000_000_000] * 4


# ---------------------------------------------------------- building


def test_builder_offsets_gaps_and_ordering():
    b = BatchBuilder(base_offset=10)
    assert b.append(b"a", b"1", timestamp=TS) == 0
    assert b.append(b"b", b"2", timestamp=TS + 1, offset=15) == 5
    with pytest.raises(ValueError, match="does not follow"):
        b.append(b"c", b"3", timestamp=TS, offset=15)
    assert b.next_offset == 16
    (batch,) = list(iter_batches(b.build()))
    assert [r.offset for r in batch.records()] == [10, 15]
    assert batch.last_offset_delta == 5 and batch.record_count == 2


def test_builder_accepts_bytes_like_and_rejects_str():
    b = BatchBuilder()
    b.append(bytearray(b"k"), memoryview(b"v"), [("h", bytearray(b"x"))], TS)
    with pytest.raises(TypeError):
        b.append("text", b"v", None, TS)
    (r,) = list(next(iter(iter_batches(b.build()))).records())
    assert (r.key, r.value, r.headers) == (b"k", b"v", [("h", b"x")])


def test_empty_batch_is_refused():
    with pytest.raises(ValueError):
        build_batch([])


def test_builder_size_and_estimate():
    b = BatchBuilder(max_batch_size=500)
    assert b.size_in_bytes == 61 and b.is_empty
    for key, value, headers, ts in sample_records(5):
        assert estimate_record_size(key, value, headers) >= 0
        before = b.size_in_bytes
        b.append(key, value, headers, ts)
        assert b.size_in_bytes - before <= estimate_record_size(key, value, headers)
    assert len(b.build()) == b.size_in_bytes
    assert not b.has_room_for(None, b"x" * 500)
    assert BatchBuilder(max_batch_size=10).has_room_for(None, b"x" * 500)  # first record always fits


def test_delete_horizon_flag():
    built = build_batch(sample_records(3), delete_horizon_ms=TS - 50)
    (batch,) = list(iter_batches(built, check_crc=True))
    assert batch.has_delete_horizon and batch.delete_horizon_ms == TS - 50
    assert batch.base_timestamp == TS - 50
    assert [r.timestamp for r in batch.records()] == [TS, TS + 1, TS + 2]
    assert next(iter(iter_batches(build_batch(sample_records(1))))).delete_horizon_ms is None


def test_attribute_flags():
    built = build_batch(
        sample_records(2),
        compression="snappy",
        transactional=True,
        producer_id=3,
        producer_epoch=0,
        base_sequence=0,
        timestamp_type=LOG_APPEND_TIME,
        log_append_time=TS,
    )
    (batch,) = list(iter_batches(built))
    assert batch.attributes == 0x02 | 0x08 | 0x10
    assert batch.compression == Compression.SNAPPY and batch.is_compressed
    assert batch.is_transactional and not batch.is_control and not batch.has_delete_horizon


def test_compression_parse():
    assert Compression.parse("GZIP") == Compression.GZIP
    assert Compression.parse(None) == Compression.NONE
    assert Compression.parse(4) == Compression.ZSTD
    with pytest.raises(ValueError):
        Compression.parse("brotli")


# ----------------------------------------------------------- control


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_markers(commit):
    built = build_end_txn_marker(
        commit,
        producer_id=9,
        producer_epoch=2,
        coordinator_epoch=77,
        base_offset=30,
        timestamp=TS,
        partition_leader_epoch=3,
    )
    (batch,) = list(iter_batches(built, check_crc=True))
    assert batch.is_control and batch.is_transactional
    assert batch.base_sequence == -1 and batch.producer_id == 9 and batch.producer_epoch == 2
    marker = batch.control_record()
    assert marker.type == (ControlRecordType.COMMIT if commit else ControlRecordType.ABORT)
    assert (marker.is_commit, marker.is_abort) == (commit, not commit)
    assert (marker.offset, marker.timestamp, marker.version, marker.coordinator_epoch) == (30, TS, 0, 77)


def test_other_control_types_keep_their_value():
    built = build_control_batch(
        ControlRecordType.LEADER_CHANGE, producer_id=-1, producer_epoch=-1, value=b"\x00\x00raw", timestamp=TS
    )
    (batch,) = list(iter_batches(built))
    rec = batch.control_record()
    assert rec.type == ControlRecordType.LEADER_CHANGE and rec.coordinator_epoch is None
    assert rec.value == b"\x00\x00raw" and not batch.is_transactional
    with pytest.raises(ValueError):
        build_control_batch(ControlRecordType.SNAPSHOT_HEADER, producer_id=-1, producer_epoch=-1)
    unknown = decode_control_record(Record(0, 0, b"\x00\x00\x00\x63", None, []))
    assert unknown.type == 99


def test_control_records_on_a_data_batch_is_an_error():
    (batch,) = list(iter_batches(build_batch(sample_records(1))))
    with pytest.raises(ValueError):
        list(batch.control_records())


def test_bad_control_key_is_corrupt():
    b = BatchBuilder(control=True, transactional=True, producer_id=1, producer_epoch=0)
    b.append(b"\x00", b"", None, TS)
    (batch,) = list(iter_batches(b.build()))
    with pytest.raises(CorruptRecordError, match="control record key"):
        batch.control_record()


# ------------------------------------------------------------ codecs


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_decompressed_size_is_capped(codec):
    b = BatchBuilder(compression=codec)
    for _ in range(40):
        b.append(None, bytes(50_000), None, TS)  # 2 MB of zeros, compresses to little
    built = b.build()
    assert len(built) < 200_000
    (batch,) = list(iter_batches(built, check_crc=True))
    with pytest.raises(DecompressionLimitError, match="base offset 0.*exceeds the limit of 1048576"):
        batch.decode_records(max_decompressed_size=1 << 20)
    assert len(batch.decode_records()) == 40


def test_default_cap_stops_a_real_bomb():
    zstd = pytest.importorskip("zstandard")
    c = zstd.ZstdCompressor(level=1).compressobj()
    zeros = bytes(1 << 20)
    payload = b"".join(c.compress(zeros) for _ in range(DEFAULT_MAX_DECOMPRESSED_SIZE // len(zeros) + 2))
    payload += c.flush()
    assert len(payload) < 1 << 20
    buf = bytearray(build_batch([(None, b"x", None, TS)], compression="zstd"))
    buf[61:] = payload
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    fix_crc(buf)
    (batch,) = list(iter_batches(buf, check_crc=True))
    with pytest.raises(DecompressionLimitError):
        batch.decode_records()


@pytest.mark.parametrize(
    "codec,module,package",
    [
        (Compression.SNAPPY, "cramjam", "cramjam"),
        (Compression.LZ4, "lz4.frame", "lz4"),
        (Compression.ZSTD, "zstandard", "zstandard"),
    ],
)
def test_missing_codec_package_is_named(monkeypatch, codec, module, package):
    monkeypatch.setattr(codecs_module, "_modules", {})
    monkeypatch.setitem(sys.modules, module, None)  # makes the import fail
    with pytest.raises(CodecUnavailableError, match=f"pip install {package}"):
        build_batch(sample_records(1), compression=codec)
    assert not codecs_module.codec_available(codec)


def test_snappy_reads_raw_and_xerial():
    import cramjam

    inner = BatchBuilder()
    for key, value, headers, ts in sample_records(20):
        inner.append(key, value, headers, ts)
    plain = inner.build()
    for framing in ("raw", "xerial"):
        buf = bytearray(plain)
        body = bytes(buf[61:])
        compressed = (
            bytes(cramjam.snappy.compress_raw(body))
            if framing == "raw"
            else codecs_module.compress(Compression.SNAPPY, body)
        )
        buf[61:] = compressed
        struct.pack_into(">i", buf, 8, len(buf) - 12)
        struct.pack_into(">h", buf, 21, 2)
        fix_crc(buf)
        (batch,) = list(iter_batches(buf, check_crc=True))
        assert [tuple(r) for r in batch.records()] == [tuple(r) for r in next(iter(iter_batches(plain))).records()]


def test_lz4_magic0_uses_kafkas_header_checksum():
    """Kafka computes the v0 LZ4 frame header checksum over the magic too (KAFKA-3160)."""
    v0 = codecs_module.compress(Compression.LZ4, b"hello" * 100, magic=0)
    v1 = codecs_module.compress(Compression.LZ4, b"hello" * 100, magic=1)
    assert v0[:6] == v1[:6] and v0[7:] == v1[7:]
    assert v0[6] == (codecs_module._xxh32(v0[0:6]) >> 8) & 0xFF
    assert v1[6] == (codecs_module._xxh32(v1[4:6]) >> 8) & 0xFF
    for data in (v0, v1):  # either checksum is accepted for magic 0
        assert codecs_module.decompress(Compression.LZ4, data, magic=0) == b"hello" * 100


def test_zstd_is_not_allowed_for_legacy_magics():
    with pytest.raises(UnsupportedCodecError):
        build_message_set(legacy_records(1), magic=1, compression="zstd")


def test_try_append_fills_to_the_limit_exactly():
    limit = 1000
    b = BatchBuilder(max_batch_size=limit)
    deltas = []
    while True:
        d = b.try_append(b"key", b"x" * 50, [("h", b"v")], TS)
        if d is None:
            break
        deltas.append(d)
    built = b.build()
    assert len(built) == b.size_in_bytes <= limit
    assert limit - len(built) < 70  # one more record would not have fitted
    assert deltas == list(range(len(deltas)))
    (batch,) = list(iter_batches(built, check_crc=True))
    assert batch.record_count == len(deltas)
    # A refused record leaves the builder untouched; an empty builder takes anything.
    assert b.build() == built
    assert BatchBuilder(max_batch_size=10).try_append(None, b"y" * 100, None, TS) == 0


def test_streaming_records_of_a_large_batch_match_and_fail_like_decode_records():
    """records() decodes big batches in chunks; same records, same errors as decode_records()."""
    records = [(b"%d" % i, b"v" * (i % 7), [], TS + i) for i in range(600)]
    built = build_batch(records, compression="lz4")
    (batch,) = list(iter_batches(built))
    assert list(batch.records()) == batch.decode_records()
    assert [r.offset for r in batch.records()] == list(range(600))
    # A record far past the first chunk whose key length overruns: caught while iterating.
    plain = bytearray(build_batch(records))
    (batch,) = list(iter_batches(bytes(plain)))
    pos = 61
    for _ in range(500):
        pos += 1 + plain[pos] // 2 if plain[pos] < 128 else 2 + (plain[pos] - 128 + (plain[pos + 1] << 7)) // 2
    # length(1) attributes(1) timestamp delta(2) offset delta(2), then the key length
    assert plain[pos + 6] == 6  # zig-zag of 3: b"500"
    plain[pos + 6] = 0x7E  # key length 63
    fix_crc(plain)
    (bad,) = list(iter_batches(bytes(plain), check_crc=True))
    it = bad.records()
    assert len([next(it) for _ in range(256)]) == 256  # the first chunk is fine
    with pytest.raises(CorruptRecordError, match="base offset 0, byte position 0: "):
        list(it)
    with pytest.raises(CorruptRecordError):
        bad.decode_records()
    # Trailing bytes after the last declared record are reported at the end of the stream.
    extra = bytearray(build_batch(records) + b"\x00\x00")
    struct.pack_into(">i", extra, 8, len(extra) - 12)
    fix_crc(extra)
    (batch,) = list(iter_batches(bytes(extra), check_crc=True))
    with pytest.raises(CorruptRecordError, match="2 bytes left after the 600 declared records"):
        list(batch.records())
