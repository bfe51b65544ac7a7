"""Property-based round trips: build -> read gives the records back, for every magic and codec."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from kafkawire.protocol.records import (
    LOG_APPEND_TIME,
    BatchBuilder,
    Compression,
    Record,
    RecordBatch,
    TimestampType,
    batches_to_message_set,
    build_batch,
    build_message_set,
    iter_batches,
    iter_message_set,
    message_set_to_batches,
    set_base_offset,
)
from kafkawire.protocol.records.varint import encode_varint, read_varint, read_varlong, size_of_varint

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

V2_CODECS = st.sampled_from(list(Compression))
LEGACY_CODECS = st.sampled_from([c for c in Compression if c != Compression.ZSTD])

header = st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=24))
# Large values cost little entropy as repeated bytes; past 8 KiB their length
# varints take three bytes (the decoder's general path).
big = st.builds(lambda n, b: bytes([b]) * n, st.integers(8000, 9000), st.integers(0, 255))
payload = st.none() | st.binary(max_size=300) | big


@st.composite
def v2_records(draw, min_size=1, max_size=30):
    """Records with increasing (possibly gapped) offsets and any timestamps."""
    n = draw(st.integers(min_size, max_size))
    offset = draw(st.integers(0, 1 << 50))
    out = []
    for _ in range(n):
        out.append(
            Record(
                offset,
                draw(st.integers(0, 1 << 45)),
                draw(payload),
                draw(payload),
                draw(st.lists(header, max_size=3)),
            )
        )
        offset += draw(st.sampled_from([1, 1, 1, 2, 100, 70_000]))
    return out


def read_all(buf) -> list[Record]:
    reader = iter_batches(buf, check_crc=True, allow_partial=False)
    out = [r for batch in reader for r in batch.records()]
    assert reader.consumed == len(buf) and reader.partial_tail_bytes == 0
    return out


@SETTINGS
@given(
    records=v2_records(),
    codec=V2_CODECS,
    producer=st.tuples(st.integers(-1, 1 << 62), st.integers(-1, 32767), st.integers(-1, (1 << 31) - 1)),
    transactional=st.booleans(),
    epoch=st.integers(-1, (1 << 31) - 1),
)
def test_v2_round_trip(records, codec, producer, transactional, epoch):
    pid, pepoch, seq = producer
    built = build_batch(
        records,
        compression=codec,
        producer_id=pid,
        producer_epoch=pepoch,
        base_sequence=seq,
        transactional=transactional,
        partition_leader_epoch=epoch,
    )
    assert read_all(built) == records
    (batch,) = list(iter_batches(built))
    assert isinstance(batch, RecordBatch)
    assert batch.compression == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == producer
    assert batch.is_transactional == transactional
    assert batch.partition_leader_epoch == epoch
    assert batch.base_offset == records[0].offset
    assert batch.last_offset == records[-1].offset
    assert batch.record_count == len(records)
    assert batch.base_timestamp == records[0].timestamp
    assert batch.max_timestamp == max(r.timestamp for r in records)
    assert batch.size == len(built)
    # Rebuilding from what was read gives the same bytes (every codec here is deterministic).
    assert (
        build_batch(
            list(batch.records()),
            compression=codec,
            producer_id=pid,
            producer_epoch=pepoch,
            base_sequence=seq,
            transactional=transactional,
            partition_leader_epoch=epoch,
        )
        == built
    )


@SETTINGS
@given(records=v2_records(max_size=10), codec=V2_CODECS, lat=st.integers(0, 1 << 45))
def test_v2_log_append_time(records, codec, lat):
    built = build_batch(records, compression=codec, timestamp_type=LOG_APPEND_TIME, log_append_time=lat)
    (batch,) = list(iter_batches(built, check_crc=True))
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == lat
    assert [r.timestamp for r in batch.records()] == [lat] * len(records)
    assert [r._replace(timestamp=0) for r in batch.records()] == [r._replace(timestamp=0) for r in records]


@SETTINGS
@given(
    records=v2_records(max_size=20),
    codec=V2_CODECS,
    new_base=st.integers(0, 1 << 60),
    epoch=st.integers(0, (1 << 31) - 1),
)
def test_set_base_offset_keeps_crc_and_shifts_offsets(records, codec, new_base, epoch):
    buf = bytearray(build_batch(records, compression=codec))
    set_base_offset(buf, 0, new_base, epoch)
    (batch,) = list(iter_batches(buf, check_crc=True))
    shift = new_base - records[0].offset
    assert batch.partition_leader_epoch == epoch
    assert [r.offset for r in batch.records()] == [r.offset + shift for r in records]


@st.composite
def legacy_records(draw):
    n = draw(st.integers(1, 25))
    offset = draw(st.integers(0, 1 << 50))
    out = []
    for _ in range(n):
        out.append(Record(offset, draw(st.integers(0, 1 << 45)), draw(payload), draw(payload), []))
        offset += draw(st.sampled_from([1, 1, 3]))
    return out


@SETTINGS
@given(
    records=legacy_records(),
    magic=st.sampled_from([0, 1]),
    codec=LEGACY_CODECS,
    lat=st.none() | st.integers(0, 1 << 45),
)
def test_legacy_round_trip(records, magic, codec, lat):
    ts_type = TimestampType.LOG_APPEND_TIME if lat is not None else TimestampType.CREATE_TIME
    built = build_message_set(records, magic, codec, timestamp_type=ts_type, log_append_time=lat)
    got = read_all(built)
    if magic == 0:
        expected = [r._replace(timestamp=-1) for r in records]
    elif lat is not None:
        expected = [r._replace(timestamp=lat) for r in records]
    else:
        expected = records
    assert got == expected
    assert list(iter_message_set(built)) == expected
    entries = list(iter_batches(built))
    assert len(entries) == (len(records) if codec == Compression.NONE else 1)
    assert entries[-1].last_offset == records[-1].offset
    assert entries[0].base_offset == records[0].offset
    for e in entries:
        assert e.magic == magic and e.compression == codec
        e.validate_crc()


@SETTINGS
@given(records=legacy_records(), magic=st.sampled_from([0, 1]), codec=LEGACY_CODECS, target=st.none() | V2_CODECS)
def test_up_conversion_keeps_records(records, magic, codec, target):
    legacy = build_message_set(records, magic, codec)
    converted = message_set_to_batches(legacy, compression=target)
    batches = list(iter_batches(converted, check_crc=True))
    assert all(b.magic == 2 for b in batches)
    expected_codec = codec if target is None else target
    assert all(b.compression == expected_codec for b in batches)
    assert read_all(converted) == read_all(legacy)
    # And back down: the same message set, byte for byte, when the codec is kept.
    if target is None:
        assert batches_to_message_set(converted, magic) == legacy


@SETTINGS
@given(records=v2_records(max_size=15), magic=st.sampled_from([0, 1]), codec=LEGACY_CODECS)
def test_down_conversion_drops_only_headers(records, magic, codec):
    built = build_batch(records, compression=codec)
    legacy = batches_to_message_set(built, magic)
    assert all(e.magic == magic for e in iter_batches(legacy, check_crc=True))
    expected = [r._replace(headers=[], timestamp=-1 if magic == 0 else r.timestamp) for r in records]
    assert read_all(legacy) == expected


@SETTINGS
@given(records=v2_records(max_size=40), limit=st.integers(100, 20_000))
def test_builder_size_accounting(records, limit):
    """The builder's uncompressed size is exact, and has_room_for keeps batches under the limit."""
    builder = BatchBuilder(max_batch_size=limit)
    built = []
    for r in records:
        if not builder.has_room_for(r.key, r.value, r.headers):
            built.append(builder.build())
            builder = BatchBuilder(max_batch_size=limit)
        builder.append(r.key, r.value, r.headers, r.timestamp)
    built.append(builder.build())
    assert builder.size_in_bytes == len(built[-1])
    for b in built:
        (batch,) = list(iter_batches(b))
        assert len(b) <= limit or batch.record_count == 1
    got = [(r.key, r.value, r.headers, r.timestamp) for b in built for r in read_all(b)]
    assert got == [(r.key, r.value, r.headers, r.timestamp) for r in records]


@settings(max_examples=300, deadline=None)
@given(value=st.integers(-(1 << 63), (1 << 63) - 1))
def test_varint_round_trip(value):
    enc = encode_varint(value)
    assert len(enc) == size_of_varint(value)
    assert read_varlong(enc + b"\x00", 0) == (value, len(enc))
    if -(1 << 31) <= value < (1 << 31):
        assert read_varint(enc, 0) == (value, len(enc))
