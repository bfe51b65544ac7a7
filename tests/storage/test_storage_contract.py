"""The contract of base.Storage / base.PartitionLog, run against every engine."""

from __future__ import annotations

import threading
import uuid

import pytest
from storage_batches import batch_attributes, build_batch, padded_batch, parse_batches

from kafkawire.broker.storage import base
from kafkawire.broker.storage.memory import MemoryStorage

ENGINES = ["memory", "segments"]


def _make(kind, tmp_path, props=None):
    if kind == "memory":
        return MemoryStorage(props)
    from kafkawire.broker.storage.segments import SegmentStorage

    return SegmentStorage(tmp_path / "data", props)


@pytest.fixture(params=ENGINES)
def make_storage(request, tmp_path):
    made = []

    def make(props=None):
        storage = _make(request.param, tmp_path, props)
        made.append(storage)
        return storage

    yield make
    for storage in made:
        storage.close()


@pytest.fixture
def storage(make_storage):
    return make_storage()


def read_all(log, offset=None, max_bytes=1 << 30):
    result = log.read(log.log_start_offset if offset is None else offset, max_bytes)
    data = b"".join(bytes(c) if not isinstance(c, base.FileRegion) else c.tobytes() for c in result.chunks)
    assert len(data) == result.size
    return result, parse_batches(data)


def test_cluster_id_is_kafka_shaped(storage):
    assert isinstance(storage.cluster_id, str) and len(storage.cluster_id) == 22


def test_create_and_look_up_topics(storage):
    tid = uuid.uuid4()
    meta = storage.create_topic("orders", 3, {"retention.ms": "1000"}, topic_id=tid)
    assert (meta.name, meta.topic_id, meta.partitions, meta.configs) == ("orders", tid, 3, {"retention.ms": "1000"})
    auto = storage.create_topic("events", 1)
    assert isinstance(auto.topic_id, uuid.UUID) and auto.topic_id != tid
    assert set(storage.topics()) == {"orders", "events"}
    assert storage.topic("orders") == meta
    assert storage.topic_by_id(tid).name == "orders"
    with pytest.raises(base.TopicExistsError):
        storage.create_topic("orders", 1)
    with pytest.raises(base.UnknownTopicError):
        storage.topic("nope")
    with pytest.raises(base.UnknownTopicError):
        storage.partition("orders", 3)
    with pytest.raises(base.UnknownTopicError):
        storage.partition("nope", 0)
    assert storage.partition("orders", 2).partition == 2


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x" * 250, "spaces no"])
def test_illegal_topic_names(storage, name):
    with pytest.raises(base.InvalidTopicError):
        storage.create_topic(name, 1)


def test_bad_partition_counts_and_configs(storage):
    with pytest.raises(base.InvalidPartitionsError):
        storage.create_topic("t", 0)
    with pytest.raises(base.InvalidConfigError):
        storage.create_topic("t", 1, {"segment.bytes": "lots"})
    assert storage.topics() == {}


def test_append_assigns_dense_offsets_and_keeps_batches_intact(storage):
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.size_bytes) == (0, 0, 0, 0)
    sent = [build_batch([b"a", b"b", b"c"]), build_batch([b"d"]), build_batch([b"e", b"f"])]
    results = [log.append(b) for b in sent]
    assert [(r.base_offset, r.last_offset, r.log_append_time, r.log_start_offset) for r in results] == [
        (0, 2, -1, 0),
        (3, 3, -1, 0),
        (4, 5, -1, 0),
    ]
    assert (log.log_end_offset, log.high_watermark, log.size_bytes) == (6, 6, sum(map(len, sent)))
    result, batches = read_all(log)
    assert [(b[0], b[1]) for b in batches] == [(0, 2), (3, 3), (4, 5)]
    for (_, _, _, stored), original in zip(batches, sent):
        assert stored[8:] == original[8:]  # only the base offset changed; parse_batches checked the CRC
    assert (result.high_watermark, result.log_start_offset, result.last_stable_offset) == (6, 0, 6)


def test_append_of_several_batches_at_once(storage):
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    log.append(build_batch([b"0"]))
    result = log.append(build_batch([b"a", b"b"], base_offset=77) + build_batch([b"c"], base_offset=5))
    assert (result.base_offset, result.last_offset) == (1, 3)
    assert [(b[0], b[1]) for b in read_all(log)[1]] == [(0, 0), (1, 2), (3, 3)]


def test_append_rejects_bytes_that_are_not_whole_batches(storage):
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    good = build_batch([b"a"])
    backwards = good[:23] + b"\xff\xff\xff\xff" + good[27:]  # lastOffsetDelta -1
    for bad in (b"", good[:-1], good + good[:20], b"\x00" * 70, backwards):
        with pytest.raises(base.CorruptBatchError):
            log.append(bad)
    assert log.log_end_offset == 0 and log.size_bytes == 0


def test_append_accepts_bytearray_and_memoryview(storage):
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    log.append(bytearray(build_batch([b"a"])))
    log.append(memoryview(build_batch([b"b", b"c"])))
    assert log.log_end_offset == 3


def test_read_starts_at_the_batch_containing_the_offset(storage):
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    for _ in range(4):
        log.append(build_batch([b"x"] * 5))
    for offset in range(20):
        _, batches = read_all(log, offset)
        assert batches[0][0] == offset - offset % 5
        assert batches[-1][1] == 19


def test_read_bounds(storage):
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    assert log.read(0, 100).chunks == []
    log.append(build_batch([b"x"] * 3))
    empty = log.read(3, 1000)
    assert (empty.chunks, empty.size, empty.high_watermark) == ([], 0, 3)
    for bad in (4, -1, 1000):
        with pytest.raises(base.OffsetOutOfRangeError) as info:
            log.read(bad, 1000)
        assert (info.value.log_start, info.value.log_end) == (0, 3)


def test_max_bytes_and_min_one(storage):
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    sizes = [300, 500, 200, 400]
    for size in sizes:
        log.append(padded_batch(size))
    assert log.read(0, 100, min_one=False).size == 0
    one = log.read(0, 100)
    assert one.size == 300 and len(read_all(log, 0, 100)[1]) == 1
    assert log.read(0, 799).size == 300
    assert log.read(0, 800).size == 800
    assert log.read(1, 1099).size == 700
    assert log.read(1, 1100).size == 1100
    assert log.read(0, 1400).size == 1400
    assert log.read(2, 0, min_one=True).size == 200


def test_log_append_time_rewrites_max_timestamp_and_crc(storage):
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    sent = build_batch([b"a", b"b"], timestamps=[5, 9])
    result = log.append(sent, log_append_time=1_800_000_000_000)
    assert result.log_append_time == 1_800_000_000_000
    ((_, _, max_ts, stored),) = read_all(log)[1]  # parse_batches verifies the recomputed CRC
    assert max_ts == 1_800_000_000_000
    assert batch_attributes(stored) & 0x08
    assert not batch_attributes(sent) & 0x08
    assert log.offset_for_timestamp(1_799_999_999_999) == (0, 1_800_000_000_000)
    assert log.max_timestamp() == (0, 1_800_000_000_000)


@pytest.mark.parametrize("compressed", [False, True])
def test_offset_for_timestamp_names_the_exact_record(storage, compressed):
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    assert log.offset_for_timestamp(0) is None
    log.append(build_batch([b"a", b"b", b"c"], timestamps=[100, 300, 200], gzip_records=compressed))
    log.append(build_batch([b"d", b"e"], timestamps=[400, 500], gzip_records=compressed))
    assert log.offset_for_timestamp(0) == (0, 100)
    assert log.offset_for_timestamp(100) == (0, 100)
    assert log.offset_for_timestamp(150) == (1, 300)
    assert log.offset_for_timestamp(300) == (1, 300)
    assert log.offset_for_timestamp(301) == (3, 400)
    assert log.offset_for_timestamp(450) == (4, 500)
    assert log.offset_for_timestamp(501) is None


def test_max_timestamp_names_the_record(storage):
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    assert log.max_timestamp() is None
    log.append(build_batch([b"a", b"b", b"c"], timestamps=[100, 900, 200]))
    log.append(build_batch([b"d", b"e"], timestamps=[400, 500]))
    assert log.max_timestamp() == (1, 900)
    log.append(build_batch([b"f", b"g"], timestamps=[950, 901]))
    assert log.max_timestamp() == (5, 950)


def test_delete_records_moves_log_start(storage):
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    for _ in range(3):
        log.append(build_batch([b"x"] * 4))
    assert log.delete_records_before(6) == 6
    assert log.log_start_offset == 6
    with pytest.raises(base.OffsetOutOfRangeError):
        log.read(5, 1000)
    result, batches = read_all(log, 6)
    assert batches[0][0] == 4 and result.log_start_offset == 6  # whole batch, consumer skips the rest
    assert log.delete_records_before(2) == 6  # never backwards
    assert log.offset_for_timestamp(0)[0] == 6
    with pytest.raises(base.OffsetOutOfRangeError):
        log.delete_records_before(13)
    assert log.delete_records_before(12) == 12
    assert log.read(12, 100).chunks == []
    assert log.append(build_batch([b"y"])).base_offset == 12


def test_retention_by_time_advances_log_start(make_storage):
    storage = make_storage({"log.segment.bytes": "400"})
    storage.create_topic("t", 1, {"retention.ms": "1000"})
    log = storage.partition("t", 0)
    for i in range(5):
        log.append(padded_batch(300, base_timestamp=10_000 + i * 1000))
    assert storage.enforce_retention(now_ms=10_500) == 0
    assert storage.enforce_retention(now_ms=12_500) == 2  # batches stamped 10_000 and 11_000
    assert log.log_start_offset == 2 and log.log_end_offset == 5
    with pytest.raises(base.OffsetOutOfRangeError):
        log.read(1, 1000)
    assert read_all(log)[1][0][0] == 2


def test_retention_by_size_deletes_oldest_while_the_rest_still_reaches_the_limit(make_storage):
    storage = make_storage({"log.segment.bytes": "400"})
    storage.create_topic("t", 1, {"retention.bytes": "1000"})
    log = storage.partition("t", 0)
    for _ in range(6):
        log.append(padded_batch(300))
    # Kafka deletes a segment only if what remains is still >= retention.bytes: 1800 -> 1500 -> 1200.
    assert storage.enforce_retention(now_ms=1_700_000_000_000) == 2
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (2, 6, 1200)


def test_cleanup_policy_compact_keeps_everything(make_storage):
    storage = make_storage({"log.segment.bytes": "400"})
    storage.create_topic("t", 1, {"retention.bytes": "0", "cleanup.policy": "compact"})
    log = storage.partition("t", 0)
    for _ in range(3):
        log.append(padded_batch(300))
    assert storage.enforce_retention(now_ms=1 << 60) == 0
    assert log.log_start_offset == 0


def test_topic_configs_add_partitions_and_delete(storage):
    storage.create_topic("t", 1, {"retention.ms": "5"})
    meta = storage.set_topic_configs("t", {"retention.ms": None, "segment.bytes": "1000"})
    assert meta.configs == {"segment.bytes": "1000"} and storage.topic("t").configs == {"segment.bytes": "1000"}
    with pytest.raises(base.InvalidConfigError):
        storage.set_topic_configs("t", {"retention.bytes": "x"})
    assert storage.topic("t").configs == {"segment.bytes": "1000"}
    storage.partition("t", 0).append(build_batch([b"a"]))
    meta = storage.add_partitions("t", 3)
    assert meta.partitions == 3 and storage.partition("t", 2).log_end_offset == 0
    assert storage.partition("t", 0).log_end_offset == 1
    with pytest.raises(base.InvalidPartitionsError):
        storage.add_partitions("t", 2)
    with pytest.raises(base.UnknownTopicError):
        storage.add_partitions("nope", 2)
    info = {(p.topic, p.partition): p for p in storage.partitions_info()}
    assert info[("t", 0)].log_end_offset == 1 and info[("t", 0)].size_bytes > 0 and len(info) == 3
    storage.delete_topic("t")
    assert storage.topics() == {}
    with pytest.raises(base.UnknownTopicError):
        storage.delete_topic("t")
    storage.create_topic("t", 1)
    assert storage.partition("t", 0).log_end_offset == 0  # nothing of the old topic comes back


def test_reads_during_appends_from_another_thread_see_whole_batches(storage):
    storage.create_topic("t", 1, {"segment.bytes": "20000"})
    log = storage.partition("t", 0)
    batch = padded_batch(1000, records=4)
    errors = []

    def produce():
        try:
            for _ in range(300):
                log.append(batch)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    writer = threading.Thread(target=produce)
    writer.start()
    offset, seen = 0, 0
    while writer.is_alive() or offset < log.log_end_offset:
        result, batches = read_all(log, offset, 64 * 1024)
        for base_offset, last, _, _ in batches:
            assert base_offset == offset and last == offset + 3
            offset = last + 1
            seen += 1
        assert offset <= result.high_watermark
    writer.join()
    assert not errors and seen == 300 and log.log_end_offset == 1200


def test_read_regions_carry_the_same_bytes_as_read(storage):
    storage.create_topic("t", 1, {"segment.bytes": "2000"})
    log = storage.partition("t", 0)
    for i in range(10):
        log.append(padded_batch(700, base_timestamp=i))
    for offset in (0, 3, 9):
        plain = log.read(offset, 2500)
        regions = log.read_regions(offset, 2500)
        as_bytes = [c.tobytes() if isinstance(c, base.FileRegion) else bytes(c) for c in regions.chunks]
        assert b"".join(as_bytes) == b"".join(bytes(c) for c in plain.chunks)
        assert regions.size == plain.size == sum(len(c) for c in regions.chunks)


# ---------------------------------------------------------------- transaction markers


def _control_record(batch: bytes) -> tuple[bytes, bytes]:
    """(key, value) of the one record of a control batch, read by hand from the v2 layout."""
    from kafkawire.protocol.records import RecordBatch

    (record,) = list(RecordBatch.from_bytes(batch).records())
    return bytes(record.key), bytes(record.value)


@pytest.mark.parametrize("commit, control_type", [(True, 1), (False, 0)])
def test_append_txn_marker_writes_a_control_batch_as_kafka(storage, commit, control_type):
    storage.create_topic("t", 2)
    log = storage.partition("t", 1)
    log.append(build_batch([b"a", b"b"], producer_id=7, producer_epoch=3, base_sequence=0, transactional=True))
    offset = storage.append_txn_marker("t", 1, 7, 3, commit, 11, timestamp=1_700_000_000_123)
    assert offset == 2 and log.log_end_offset == 3
    _, batches = read_all(log, 2)
    ((base, last, max_ts, batch),) = batches
    assert (base, last, max_ts) == (2, 2, 1_700_000_000_123)
    import struct

    (_, _, leader_epoch, magic, _, attributes, last_delta, first_ts, _, pid, epoch, base_seq, count) = (
        struct.unpack_from(">qiibIhiqqqhii", batch)
    )
    assert (magic, attributes & 0x30, attributes & 0x07, last_delta, count) == (2, 0x30, 0, 0, 1)
    assert (pid, epoch, base_seq, leader_epoch, first_ts) == (7, 3, -1, 0, 1_700_000_000_123)
    key, value = _control_record(batch)
    assert key == struct.pack(">hh", 0, control_type)  # ControlRecordType key v0: ABORT 0, COMMIT 1
    assert value == struct.pack(">hi", 0, 11)  # EndTxnMarker v0: coordinator epoch
    assert storage.partition("t", 0).log_end_offset == 0  # only the named partition


def test_append_txn_marker_to_unknown_partition(storage):
    storage.create_topic("t", 1)
    with pytest.raises(base.UnknownTopicError):
        storage.append_txn_marker("t", 1, 7, 0, True, 0)
