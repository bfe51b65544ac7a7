"""Bad input: every byte flipped, every truncation, crafted nonsense.

The contract: reading raises :class:`CorruptRecordError` (or a subclass)
naming the batch, never another exception, never a hang; CRC-covered damage
is always detected when CRCs are checked.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkawire.protocol.records import (
    BatchBuilder,
    CorruptRecordError,
    CrcMismatchError,
    DecompressionLimitError,
    LegacyBatch,
    RecordBatch,
    UnsupportedCodecError,
    build_batch,
    build_control_batch,
    build_message_set,
    iter_batches,
)

TS = 1_700_000_000_000


def _records(n, headers=True):
    return [
        (
            b"key-%d" % i if i % 4 else None,
            b"v" * (i * 7 % 50) if i % 5 else None,
            [("hdr", b"x" * i), ("n", None)] if headers and i % 2 else [],
            TS + i * 13,
        )
        for i in range(n)
    ]


SAMPLES = {
    "v2-none": build_batch(_records(12), base_offset=1000, producer_id=4, producer_epoch=1, base_sequence=0),
    "v2-gzip": build_batch(_records(12), compression="gzip", base_offset=5),
    "v2-snappy": build_batch(_records(12), compression="snappy"),
    "v2-lz4": build_batch(_records(12), compression="lz4"),
    "v2-zstd": build_batch(_records(12), compression="zstd"),
    "v2-control": build_control_batch(producer_id=1, producer_epoch=0, coordinator_epoch=5, timestamp=TS),
    "v1-none": build_message_set(_records(3, headers=False), magic=1, base_offset=20),
    "v1-gzip": build_message_set(_records(6, headers=False), magic=1, compression="gzip", base_offset=20),
    "v0-snappy": build_message_set(_records(6, headers=False), magic=0, compression="snappy"),
    "v0-lz4": build_message_set(_records(6, headers=False), magic=0, compression="lz4"),
    "v1-lz4": build_message_set(_records(6, headers=False), magic=1, compression="lz4"),
}


def read_everything(buf, *, check_crc: bool) -> int:
    """What a consumer or broker does with a buffer: walk, check, decode.  Returns the record count."""
    n = 0
    for entry in iter_batches(buf, check_crc=check_crc, allow_partial=False):
        _ = (entry.base_offset, entry.last_offset, entry.compression, entry.timestamp_type)
        records = entry.decode_records()
        if entry.is_control:
            list(entry.control_records())
        n += len(records)
    return n


def _uncovered(buf: bytes) -> set[int]:
    """Byte positions no CRC covers and whose change is not a framing error: offset, v2 leader epoch."""
    out = set()
    for entry in iter_batches(buf):
        out.update(range(entry.position, entry.position + 8))
        if entry.magic == 2:
            out.update(range(entry.position + 12, entry.position + 16))
    return out


@pytest.mark.parametrize("name", list(SAMPLES))
@pytest.mark.parametrize("mask", [0xFF, 0x01, 0x80])
def test_every_byte_flip_is_detected_or_harmless(name, mask):
    buf = SAMPLES[name]
    good = read_everything(buf, check_crc=True)
    uncovered = _uncovered(buf)
    for i in range(len(buf)):
        bad = bytearray(buf)
        bad[i] ^= mask
        if i in uncovered:
            assert read_everything(bytes(bad), check_crc=True) == good
            continue
        with pytest.raises(CorruptRecordError) as info:
            read_everything(bytes(bad), check_crc=True)
        assert "corrupt record batch at " in str(info.value)


@pytest.mark.parametrize("name", list(SAMPLES))
def test_every_byte_flip_without_crc_check_fails_cleanly(name):
    """With CRC checks off, the decoders themselves meet the damage: only CorruptRecordError may escape."""
    buf = SAMPLES[name]
    for i in range(len(buf)):
        for mask in (0xFF, 0x01, 0x40):
            bad = bytearray(buf)
            bad[i] ^= mask
            try:
                read_everything(bytes(bad), check_crc=False)
            except CorruptRecordError:
                pass


def _refresh_checksums(bad: bytearray) -> None:
    """Recompute the CRC of the single entry in ``bad`` so only its structure is wrong."""
    magic = bad[16]
    if magic == 2 and len(bad) >= 61:
        struct.pack_into(">I", bad, 17, crc32c(bytes(bad[21:])))
    elif magic in (0, 1) and len(bad) >= 18:
        struct.pack_into(">I", bad, 12, zlib.crc32(bytes(bad[16:])))


@pytest.mark.parametrize("name", list(SAMPLES))
def test_every_byte_flip_behind_a_valid_crc_fails_cleanly(name):
    """Damage the CRC does not reveal (a buggy producer): structural checks must catch or tolerate it."""
    buf = SAMPLES[name]
    detected = 0
    for i in range(17 if buf[16] == 2 else 16, len(buf)):
        if buf[16] == 2 and 17 <= i < 21:
            continue  # the CRC field itself
        for mask in (0xFF, 0x01):
            bad = bytearray(buf)
            bad[i] ^= mask
            _refresh_checksums(bad)
            try:
                read_everything(bytes(bad), check_crc=True)
            except CorruptRecordError:
                detected += 1
    assert detected > 0


@pytest.mark.parametrize("name", list(SAMPLES))
def test_every_truncation(name):
    buf = SAMPLES[name]
    first_size = next(iter(iter_batches(buf))).size
    boundaries = [0]
    for entry in iter_batches(buf):
        boundaries.append(entry.position + entry.size)
    for cut in range(len(buf)):
        part = buf[:cut]
        reader = iter_batches(part, check_crc=True)
        entries = list(reader)  # never raises: a cut-off entry is a partial tail
        assert reader.consumed == max(b for b in boundaries if b <= cut)
        assert reader.partial_tail_bytes == cut - reader.consumed
        assert sum(e.size for e in entries) == reader.consumed
        if cut not in boundaries:
            with pytest.raises(CorruptRecordError):
                read_everything(part, check_crc=True)
        # Now pretend the cut-off entry is complete: fix its length and CRC.
        if cut > 26 and cut < first_size:
            bad = bytearray(part)
            struct.pack_into(">i", bad, 8, cut - 12)
            _refresh_checksums(bad)
            with pytest.raises(CorruptRecordError):
                read_everything(bytes(bad), check_crc=True)


# ------------------------------------------------------- crafted input


def _v2(records_section: bytes, *, count: int, attributes: int = 0, base_offset: int = 42) -> bytes:
    """A v2 batch with a valid CRC around an arbitrary records section."""
    header = struct.pack(
        ">qiibIhiqqqhii",
        base_offset,
        49 + len(records_section),
        -1,
        2,
        0,
        attributes,
        max(count - 1, 0),
        TS,
        TS,
        -1,
        -1,
        -1,
        count,
    )
    buf = bytearray(header + records_section)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def _only_batch(buf) -> RecordBatch:
    (batch,) = list(iter_batches(buf, check_crc=True, allow_partial=False))
    return batch


def test_wrong_crc_names_offset_and_problem():
    buf = bytearray(SAMPLES["v2-none"])
    buf[-1] ^= 0x10
    with pytest.raises(CrcMismatchError, match=r"base offset 1000, byte position 0: CRC mismatch"):
        _only_batch(bytes(buf))
    assert not RecordBatch.from_bytes(bytes(buf)).crc_ok


def test_wrong_legacy_crc():
    buf = bytearray(SAMPLES["v1-gzip"])
    buf[-3] ^= 0x10
    with pytest.raises(CrcMismatchError, match="CRC-32 mismatch"):
        list(iter_batches(bytes(buf), check_crc=True))


def test_length_past_the_end():
    buf = bytearray(SAMPLES["v2-none"])
    struct.pack_into(">i", buf, 8, len(buf))  # 12 bytes too long
    reader = iter_batches(bytes(buf))
    assert list(reader) == [] and reader.partial_tail_bytes == len(buf)
    assert reader.next_batch_size == len(buf) + 12
    with pytest.raises(CorruptRecordError, match=f"buffer ends {len(buf)} bytes into an entry"):
        list(iter_batches(bytes(buf), allow_partial=False))
    with pytest.raises(CorruptRecordError, match="does not match"):
        RecordBatch.from_bytes(bytes(buf))


@pytest.mark.parametrize("length", [-1, 0, 13, -(1 << 31)])
def test_length_below_minimum(length):
    buf = bytearray(SAMPLES["v2-none"])
    struct.pack_into(">i", buf, 8, length)
    with pytest.raises(CorruptRecordError, match="base offset 1000.*below the minimum"):
        list(iter_batches(bytes(buf)))


def test_unknown_magic():
    buf = bytearray(SAMPLES["v2-none"])
    buf[16] = 3
    with pytest.raises(CorruptRecordError, match="unknown magic 3"):
        list(iter_batches(bytes(buf)))


@pytest.mark.parametrize("count", [-1, -(1 << 31)])
def test_negative_record_count(count):
    good = SAMPLES["v2-none"]
    bad = _v2(good[61:], count=count)
    with pytest.raises(CorruptRecordError, match=f"base offset 42.*negative record count {count}"):
        _only_batch(bad).decode_records()


@pytest.mark.parametrize("count", [13, 10_000, (1 << 31) - 1])
def test_record_count_too_high(count):
    good = SAMPLES["v2-none"]  # 12 records
    bad = _v2(good[61:], count=count)
    with pytest.raises(CorruptRecordError, match="base offset 42"):
        _only_batch(bad).decode_records()


def test_record_count_too_low_leaves_bytes():
    bad = _v2(SAMPLES["v2-none"][61:], count=11)
    with pytest.raises(CorruptRecordError, match="bytes left after the 11 declared records"):
        _only_batch(bad).decode_records()


@pytest.mark.parametrize("section", [b"\xff" * 40, b"\x80" * 200, b"\x0e\x00" + b"\xff" * 20])
def test_varint_that_never_ends(section):
    with pytest.raises(CorruptRecordError, match="base offset 42.*(varint|varlong) longer than"):
        _only_batch(_v2(section, count=1)).decode_records()


def test_varint_running_off_the_end():
    # length 20, attributes, deltas, a 1-byte key, then a value length cut after its first byte
    section = b"\x28\x00\x00\x00\x02k\x80"
    with pytest.raises(CorruptRecordError, match="base offset 42.*runs past the end"):
        _only_batch(_v2(section, count=1)).decode_records()


def _record(body: bytes) -> bytes:
    from kafkawire.protocol.records.varint import encode_varint

    return encode_varint(len(body)) + body


@pytest.mark.parametrize(
    "body,problem",
    [
        (b"\x00\x00\x00\x03k\x00\x00", "invalid key length -2"),
        (b"\x00\x00\x00\x00\x05v\x00", "invalid value length -3"),
        (b"\x00\x00\x00\x01\x01\x01", "invalid header count -1"),
        (b"\x00\x00\x00\x01\x01\x02\x04\xff\xfe\x01", "not valid UTF-8"),
        (b"\x00\x00\x00\x01\x01\x02\x01\x01", "invalid header key length -1"),
        (b"\x00\x00\x00\x01\x01\x02\x02h\x05", "invalid header value length -3"),
        (b"\x00\x00\x00\x01\x01\x7e", "invalid header count 63"),
        (b"\x00\x00\x00\x01\x01\x00\x00", "does not end where its length says"),
        (b"\x00\x00\x00\x20abcd\x01\x00", "runs past the end"),
    ],
)
def test_malformed_records(body, problem):
    with pytest.raises(CorruptRecordError, match=f"base offset 42.*{problem}"):
        _only_batch(_v2(_record(body), count=1)).decode_records()


def test_record_length_shorter_than_fields():
    section = b"\x04" + b"\x00\x00\x00\x01\x01\x00"  # says 2 bytes, fields take 6
    with pytest.raises(CorruptRecordError, match="does not end where its length says"):
        _only_batch(_v2(section, count=1)).decode_records()


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_id(codec_id):
    bad = _v2(SAMPLES["v2-none"][61:], count=12, attributes=codec_id)
    batch = _only_batch(bad)  # the header and CRC are fine
    assert batch.compression_id == codec_id
    with pytest.raises(UnsupportedCodecError, match=f"base offset 42.*unknown compression codec id {codec_id}"):
        batch.compression
    with pytest.raises(UnsupportedCodecError, match=f"codec id {codec_id}"):
        batch.decode_records()


def test_legacy_zstd_codec_id_is_unsupported():
    buf = bytearray(SAMPLES["v1-gzip"])
    buf[17] = (buf[17] & ~7) | 4
    _refresh_checksums(buf)
    (entry,) = list(iter_batches(bytes(buf), check_crc=True))
    with pytest.raises(UnsupportedCodecError, match="not valid for magic 1"):
        entry.decode_records()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_garbage_compressed_payload(codec):
    good = build_batch(_records(5), compression=codec)
    bad = _v2(
        b"\x00\x01garbage-not-compressed" * 3, count=5, attributes={"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec]
    )
    assert _only_batch(good).decode_records()
    with pytest.raises(CorruptRecordError, match=f"base offset 42.*invalid {codec} data"):
        _only_batch(bad).decode_records()


def test_bomb_within_a_legacy_wrapper():
    b = build_message_set([(None, bytes(300_000), None, TS)] * 8, magic=1, compression="gzip")
    (entry,) = list(iter_batches(b, check_crc=True))
    with pytest.raises(DecompressionLimitError):
        entry.decode_records(max_decompressed_size=1 << 20)


def test_legacy_wrapper_with_null_value():
    from kafkawire.protocol.records.legacy import encode_message

    msg = encode_message(7, 1, 1, TS, None, None)
    (entry,) = list(iter_batches(msg, check_crc=True))
    with pytest.raises(CorruptRecordError, match="base offset 7.*null value"):
        entry.decode_records()


def test_legacy_nested_compression_and_magic_mismatch():
    from kafkawire.protocol.records.codecs import compress
    from kafkawire.protocol.records.legacy import encode_message

    inner_compressed = encode_message(0, 1, 1, TS, None, b"x")
    wrapper = encode_message(0, 1, 1, TS, None, compress(1, inner_compressed))
    with pytest.raises(CorruptRecordError, match="itself compressed"):
        LegacyBatch.from_bytes(wrapper).decode_records()
    inner_v0 = encode_message(0, 0, 0, -1, None, b"x")
    wrapper = encode_message(0, 1, 1, TS, None, compress(1, inner_v0))
    with pytest.raises(CorruptRecordError, match="differs from wrapper magic"):
        LegacyBatch.from_bytes(wrapper).decode_records()


def test_legacy_key_length_past_the_message():
    buf = bytearray(SAMPLES["v1-none"])
    first = next(iter(iter_batches(bytes(buf))))
    struct.pack_into(">i", buf, 26, 10_000)  # key length
    _refresh_checksums(buf)
    with pytest.raises(CorruptRecordError, match="base offset 20.*invalid message key length 10000"):
        LegacyBatch.from_bytes(bytes(buf[: first.size])).decode_records()


# -------------------------------------------------------- random junk


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(junk=st.binary(max_size=400))
def test_random_bytes_fail_cleanly(junk):
    try:
        read_everything(junk, check_crc=False)
    except CorruptRecordError:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(section=st.binary(max_size=300), count=st.integers(-3, 40), codec=st.integers(0, 4))
def test_random_records_section_behind_a_valid_header_fails_cleanly(section, count, codec):
    try:
        _only_batch(_v2(section, count=count, attributes=codec)).decode_records()
    except CorruptRecordError:
        pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_spliced_valid_records_fail_cleanly(data):
    """Sections made of pieces of real records (more likely to get deep into the decoder)."""
    good = SAMPLES["v2-none"][61:]
    pieces = data.draw(st.lists(st.tuples(st.integers(0, len(good)), st.integers(0, 40)), max_size=6))
    section = b"".join(good[a : a + n] for a, n in pieces)
    try:
        records = _only_batch(_v2(section, count=data.draw(st.integers(0, 15)))).decode_records()
    except CorruptRecordError:
        return
    assert all(r.key is None or isinstance(r.key, bytes) for r in records)


def test_builder_output_survives_its_own_checks():
    b = BatchBuilder(compression="lz4")
    for key, value, headers, ts in _records(30):
        b.append(key, value, headers, ts)
    assert read_everything(b.build(), check_crc=True) == 30
