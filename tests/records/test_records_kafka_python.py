"""Agreement with kafka-python 3.x's record readers and builders (``kafka.record``).

Random records go through kafka-python's builders into kafkawire's readers
and through kafkawire's builders into kafka-python's readers, for every
magic and codec kafka-python supports.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

kafka_codec = pytest.importorskip("kafka.codec", reason="kafka-python is not installed")
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402
from kafka.record.legacy_records import LegacyRecordBatchBuilder  # noqa: E402
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder  # noqa: E402

from kafkawire.protocol.records import (  # noqa: E402
    Compression,
    LegacyBatch,
    Record,
    RecordBatch,
    build_batch,
    build_message_set,
    iter_batches,
)

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])

COMBOS = [
    (magic, codec) for magic in (0, 1, 2) for codec in Compression if not (codec == Compression.ZSTD and magic < 2)
]


def _skip_unsupported(magic: int, codec: Compression) -> None:
    # kafka-python reads and writes magic-0 LZ4 (Kafka's broken header
    # checksum) only with xxhash; the Java tests cover that combination.
    if magic == 0 and codec == Compression.LZ4 and kafka_codec.xxhash is None:
        pytest.skip("kafka-python needs the 'xxhash' package for magic 0 LZ4")


def records_strategy(with_headers: bool):
    headers = (
        st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=3)
        if with_headers
        else st.just([])
    )
    return st.lists(
        st.tuples(
            st.none() | st.binary(max_size=64),
            st.none() | st.binary(max_size=400),
            headers,
            st.integers(0, 1 << 42),
        ),
        min_size=1,
        max_size=25,
    )


def kafka_python_read(data: bytes) -> list[tuple]:
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        for r in batch:
            # kafka-python says None where Kafka (and kafkawire) say NO_TIMESTAMP (-1) for magic 0.
            ts = -1 if r.timestamp is None else r.timestamp
            out.append((r.offset, ts, r.key, r.value, list(r.headers)))
    return out


def kafkawire_read(data: bytes) -> list[tuple]:
    out = []
    reader = iter_batches(data, check_crc=True, allow_partial=False)
    for batch in reader:
        out.extend(tuple(r) for r in batch.records())
    assert reader.partial_tail_bytes == 0
    return out


def kafka_python_build(records, magic: int, codec: Compression) -> bytes:
    builder = MemoryRecordsBuilder(magic, int(codec), batch_size=1 << 30)
    for key, value, headers, ts in records:
        assert builder.append(ts, key, value, headers if magic == 2 else None) is not None
    builder.close()
    return bytes(builder.buffer())


@pytest.mark.parametrize("magic,codec", COMBOS)
@SETTINGS
@given(data=st.data())
def test_kafkawire_reads_kafka_python_batches(magic, codec, data):
    _skip_unsupported(magic, codec)
    records = data.draw(records_strategy(magic == 2))
    built = kafka_python_build(records, magic, codec)
    ours = kafkawire_read(built)
    assert ours == kafka_python_read(built)
    # And against the input itself (offsets of compressed legacy wrappers built
    # by kafka-python are relative to a wrapper offset of 0, so compare the rest).
    assert [(k, v, list(h)) for _, _, k, v, h in ours] == [(k, v, h if magic == 2 else []) for k, v, h, _ in records]
    expected_ts = [-1 if magic == 0 else ts for _, _, _, ts in records]
    assert [r[1] for r in ours] == expected_ts


@pytest.mark.parametrize("magic,codec", COMBOS)
@SETTINGS
@given(data=st.data())
def test_kafka_python_reads_kafkawire_batches(magic, codec, data):
    _skip_unsupported(magic, codec)
    records = data.draw(records_strategy(magic == 2))
    base = data.draw(st.integers(0, 1 << 40))
    if magic == 2:
        built = build_batch(records, compression=codec, base_offset=base)
    else:
        built = build_message_set(records, magic, codec, base_offset=base)
    theirs = kafka_python_read(built)
    assert theirs == kafkawire_read(built)
    assert [r[0] for r in theirs] == list(range(base, base + len(records)))
    assert [(k, v, h) for _, _, k, v, h in theirs] == [(k, v, h if magic == 2 else []) for k, v, h, _ in records]


@pytest.mark.parametrize("magic", [0, 1, 2])
@SETTINGS
@given(data=st.data())
def test_uncompressed_bytes_identical_to_kafka_python(magic, data):
    records = data.draw(records_strategy(magic == 2))
    if magic == 2:
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 30,
        )
        for i, (key, value, headers, ts) in enumerate(records):
            builder.append(i, ts, key, value, headers)
        theirs = bytes(builder.build())
        # kafka-python leaves the partition leader epoch at 0 (the broker sets it).
        ours = build_batch(records, partition_leader_epoch=0)
    else:
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 30)
        for i, (key, value, _, ts) in enumerate(records):
            builder.append(i, ts, key, value)
        theirs = bytes(builder.build())
        ours = build_message_set([(k, v, None, ts) for k, v, _, ts in records], magic)
    assert ours == theirs


@pytest.mark.parametrize("codec", list(Compression))
def test_header_fields_agree_with_kafka_python(codec):
    records = [(b"k%d" % i, b"v" * i, [("h", b"x")], 1_700_000_000_000 + 3 * i) for i in range(50)]
    built = build_batch(
        records,
        compression=codec,
        base_offset=1000,
        producer_id=77,
        producer_epoch=5,
        base_sequence=123,
        transactional=True,
        partition_leader_epoch=9,
    )
    theirs = MemoryRecords(built).next_batch()
    (ours,) = list(iter_batches(built))
    assert isinstance(ours, RecordBatch)
    assert ours.base_offset == theirs.base_offset == 1000
    assert ours.last_offset == theirs.last_offset == 1049
    assert ours.next_offset == theirs.next_offset == 1050
    assert ours.size == theirs.size_in_bytes == len(built)
    assert ours.partition_leader_epoch == theirs.leader_epoch == 9
    assert ours.crc == theirs.crc
    assert ours.attributes == theirs.attributes
    assert ours.compression == theirs.compression_type == codec
    assert ours.timestamp_type == theirs.timestamp_type == 0
    assert ours.is_transactional == theirs.is_transactional is True
    assert ours.is_control == theirs.is_control_batch is False
    assert ours.base_timestamp == theirs.first_timestamp == 1_700_000_000_000
    assert ours.max_timestamp == theirs.max_timestamp == 1_700_000_000_147
    assert ours.producer_id == theirs.producer_id == 77
    assert ours.producer_epoch == theirs.producer_epoch == 5
    assert ours.base_sequence == theirs.base_sequence == 123
    assert ours.last_sequence == theirs.last_sequence == 172
    assert ours.record_count == theirs.records_count == 50


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
def test_legacy_entry_fields_agree_with_kafka_python(magic, codec):
    _skip_unsupported(magic, codec)
    records = [Record(500 + i, 1_600_000_000_000 + i, b"key", b"value-%d" % i, []) for i in range(5)]
    built = build_message_set(records, magic, codec)
    mr = MemoryRecords(built)
    entries = list(iter_batches(built))
    theirs = []
    while mr.has_next():
        theirs.append(mr.next_batch())
    assert len(entries) == len(theirs) == (5 if codec == Compression.NONE else 1)
    for ours, t in zip(entries, theirs):
        assert isinstance(ours, LegacyBatch)
        assert ours.magic == t.magic == magic
        assert ours.compression == t.compression_type == codec
        assert ours.size == t.size_in_bytes
        assert ours.crc_ok and t.validate_crc()
        assert [tuple(r)[:4] for r in ours.records()] == [
            (r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value) for r in t
        ]
    ours_all = [tuple(r)[:4] for e in entries for r in e.records()]
    assert ours_all == [(r.offset, -1 if magic == 0 else r.timestamp, r.key, r.value) for r in records]
