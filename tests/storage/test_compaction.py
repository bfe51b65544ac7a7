"""Log compaction of the segments engine (``storage/cleaner.py``), checked against a model of Kafka's rules, by
Kafka 4.4's own classes and consumers (Java and librdkafka), and across interrupted passes."""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

import pytest

from kafkawire.broker.storage import cleaner
from kafkawire.broker.storage.memory import MemoryStorage
from kafkawire.broker.storage.segments import SegmentStorage
from kafkawire.protocol.records import build_batch, iter_batches

from support.java import JavaProgram  # tests/ is on sys.path (tests/conftest.py)

HERE = Path(__file__).resolve().parent
DAY_MS = 86_400_000


def _workload(plog, seed: int, batches: int, keys: int, *, ts: int, tombstones: float = 0.1):
    """Appends keyed batches (updates, tombstones, every fifth gzip); returns the model: key -> (offset, value)
    of its last record, and the number of records written."""
    rng = random.Random(seed)
    model, offset = {}, plog.log_end_offset
    for i in range(batches):
        records = []
        for _ in range(rng.randint(1, 5)):
            key = f"key-{rng.randrange(keys)}".encode()
            value = None if rng.random() < tombstones else f"value-{offset}".encode()
            records.append((key, value, [], ts + offset))
            model[key] = (offset, value)
            offset += 1
        plog.append(build_batch(records, compression="gzip" if i % 5 == 0 else 0))
    return model, offset


def _read_all(plog) -> list[tuple[int, bytes, bytes | None]]:
    data = b"".join(bytes(c) for c in plog.read(plog.log_start_offset, 1 << 26).chunks)
    out = []
    for batch in iter_batches(data):
        batch.validate_crc()
        if batch.is_control:
            continue
        out += [(r.offset, bytes(r.key), None if r.value is None else bytes(r.value)) for r in batch.records()]
    return out


def _latest(model: dict, *, tombstones: bool) -> list[tuple[int, bytes, bytes | None]]:
    return sorted((o, k, v) for k, (o, v) in model.items() if tombstones or v is not None)


def _compacted_topic(tmp_path, **configs):
    storage = SegmentStorage(tmp_path / "data", {"log.segment.bytes": "3000"})
    storage.create_topic("c", 1, {"cleanup.policy": "compact", **configs})
    return storage, storage.partition("c", 0)


def test_compaction_keeps_the_latest_record_of_each_key_at_its_offset(tmp_path):
    storage, plog = _compacted_topic(tmp_path)
    now = int(time.time() * 1000)
    model, end = _workload(plog, 1, 400, 40, ts=now - 2 * DAY_MS)
    plog.roll()  # everything is in sealed segments: all of it is cleanable
    before = len(plog.segments)
    work = cleaner.Cleaner(str(tmp_path / "data"))
    stats = work.clean_partition(plog, plog._settings(), now_ms=now)
    assert stats is not None and stats.records_read == end
    # exactly the last record of each key, tombstones included (they have not been through a cleaning yet)
    assert _read_all(plog) == _latest(model, tombstones=True)
    # each segment is rewritten alone: groups are made by the segments' sizes before cleaning, as Kafka's
    # groupSegmentsBySize makes them, and these are full
    assert len(plog.segments) == before and plog.log_end_offset == end
    # the second pass finds nothing dirty; a forced one drops tombstones older than delete.retention.ms
    assert work.clean_partition(plog, plog._settings(), now_ms=now) is None
    storage.close()
    storage = SegmentStorage(tmp_path / "data", {"log.segment.bytes": "3000"})  # the checkpoint was kept
    plog = storage.partition("c", 0)
    assert _read_all(plog) == _latest(model, tombstones=True)
    more, end = _workload(plog, 2, 50, 40, ts=now - 2 * DAY_MS, tombstones=0.0)
    plog.roll()
    model.update(more)
    work = cleaner.Cleaner(str(tmp_path / "data"))
    assert work.clean_partition(plog, plog._settings(), now_ms=now, force=True) is not None
    assert _read_all(plog) == _latest(model, tombstones=False)
    assert len(plog.segments) < before  # the small cleaned segments were merged
    storage.close()


@pytest.mark.parametrize("engine", ["segments", "memory"])
def test_both_engines_compact_to_the_model_and_stamp_delete_horizons(engine, tmp_path):
    """The same workload and passes on each engine (the memory engine's batches in the part of segments, its last
    batch the active one): each key's last record at its offset, tombstones stamped on the first pass that keeps
    them, kept until their delete horizon and gone at it."""
    if engine == "segments":
        storage = SegmentStorage(tmp_path / "data", {"log.segment.bytes": "3000"})
    else:
        storage = MemoryStorage({})
    storage.create_topic("c", 1, {"cleanup.policy": "compact"})
    plog = storage.partition("c", 0)
    now = int(time.time() * 1000)

    def seal(model):
        # a batch that ends what is cleanable: the memory engine's active batch; the segments engine rolls after it.
        # A key of its own: the active part is not in the offset map, so it supersedes nothing
        offset = plog.log_end_offset
        plog.append(build_batch([(f"seal-{offset}".encode(), b"x", [], now)]))
        model[f"seal-{offset}".encode()] = (offset, b"x")
        if engine == "segments":
            plog.roll()

    def clean(at):
        if engine == "segments":
            return cleaner.Cleaner(str(tmp_path / "data")).clean_partition(
                plog, plog._settings(), now_ms=at, force=True
            )
        return plog.clean(at, force=True)

    def batches():
        return list(iter_batches(b"".join(bytes(c) for c in plog.read(plog.log_start_offset, 1 << 26).chunks)))

    model, _ = _workload(plog, 21, 300, 30, ts=now - 2 * DAY_MS, tombstones=0.2)
    seal(model)
    stats = clean(now)
    assert stats is not None
    assert _read_all(plog) == _latest(model, tombstones=True)
    stamped = {b.base_offset: b.delete_horizon_ms for b in batches()}
    tombstoned = {b.base_offset for b in batches() if any(r.value is None for r in b.records())}
    assert tombstoned and {o: h for o, h in stamped.items() if h is not None} == dict.fromkeys(tombstoned, now + DAY_MS)
    # a pass just before the horizon keeps them
    more, _ = _workload(plog, 22, 20, 30, ts=now, tombstones=0.0)
    model.update(more)
    seal(model)
    assert clean(now + DAY_MS - 1) is not None
    assert _read_all(plog) == _latest(model, tombstones=True)
    # one at the horizon removes them
    more, _ = _workload(plog, 23, 5, 30, ts=now, tombstones=0.0)
    model.update(more)
    seal(model)
    assert clean(now + DAY_MS) is not None
    assert _read_all(plog) == _latest(model, tombstones=False)
    storage.close()


def test_tombstones_stay_for_delete_retention_ms(tmp_path):
    storage, plog = _compacted_topic(tmp_path, **{"delete.retention.ms": str(DAY_MS)})
    now = int(time.time() * 1000)
    model, _ = _workload(plog, 3, 200, 20, ts=now - 1000, tombstones=0.3)
    plog.roll()
    work = cleaner.Cleaner(str(tmp_path / "data"))

    def another_pass(seed, at):
        more, _ = _workload(plog, seed, 1, 20, ts=now, tombstones=0.0)  # something dirty, so that a pass runs
        model.update(more)
        plog.roll()
        assert work.clean_partition(plog, plog._settings(), now_ms=at, force=True) is not None

    assert work.clean_partition(plog, plog._settings(), now_ms=now, force=True) is not None
    another_pass(4, now)
    # the tombstones are a second old, not a day: still there after two cleanings
    assert _read_all(plog) == _latest(model, tombstones=True)
    assert any(v is None for _, _, v in _read_all(plog))
    # two days later they are gone, the rest stays
    another_pass(5, now + 2 * DAY_MS)
    assert _read_all(plog) == _latest(model, tombstones=False)
    storage.close()


def test_dirty_ratio_and_compaction_lags_decide_when_to_clean(tmp_path):
    storage, plog = _compacted_topic(tmp_path, **{"min.cleanable.dirty.ratio": "0.5", "min.compaction.lag.ms": "60000"})
    now = int(time.time() * 1000)
    _workload(plog, 5, 100, 1000, ts=now)  # fresh records (younger than min.compaction.lag.ms), keys mostly distinct
    plog.roll()
    work = cleaner.Cleaner(str(tmp_path / "data"))
    assert not work.needs_cleaning(plog, plog._settings(), now)
    assert work.needs_cleaning(plog, plog._settings(), now + 120_000)
    work.clean_partition(plog, plog._settings(), now_ms=now + 120_000)
    _workload(plog, 6, 3, 1000, ts=now)  # a little dirt over a clean log: below the ratio
    plog.roll()
    assert not work.needs_cleaning(plog, plog._settings(), now + 120_000)
    storage.set_topic_configs("c", {"max.compaction.lag.ms": "1000"})  # ...but overdue
    assert work.needs_cleaning(plog, plog._settings(), now + 120_000)
    storage.close()


def test_aborted_transactions_go_and_producers_keep_their_last_batch(tmp_path):
    storage, plog = _compacted_topic(tmp_path)
    now = int(time.time() * 1000)

    def txn(pid, seq, key, value):
        plog.append(
            build_batch(
                [(key, value, [], now)], producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True
            )
        )

    txn(7, 0, b"a", b"committed")  # 0
    storage.append_txn_marker("c", 0, 7, 0, True, 0)  # 1
    txn(8, 0, b"a", b"aborted")  # 2
    storage.append_txn_marker("c", 0, 8, 0, False, 0)  # 3
    plog.append(build_batch([(b"b", b"idempotent", [], now)], producer_id=9, producer_epoch=0, base_sequence=0))
    plog.append(build_batch([(b"b", b"newer", [], now)]))  # 5: supersedes producer 9's only batch
    plog.append(build_batch([(None, b"no key", [], now)]))  # 6
    plog.roll()
    cleaner.Cleaner(str(tmp_path / "data")).clean_partition(plog, plog._settings(), now_ms=now, force=True)
    data = b"".join(bytes(c) for c in plog.read(0, 1 << 20).chunks)
    batches = list(iter_batches(data))
    for b in batches:
        b.validate_crc()
    records = [(r.offset, r.key, r.value) for b in batches if not b.is_control for r in b.records()]
    assert records == [(0, b"a", b"committed"), (5, b"b", b"newer")]  # the aborted and keyless records are gone
    assert [(b.base_offset, b.is_control) for b in batches if b.is_control] == [(1, True), (3, True)]
    kept9 = [b for b in batches if b.producer_id == 9]
    assert [(b.base_offset, b.last_offset, b.record_count, b.base_sequence) for b in kept9] == [(4, 4, 0, 0)]
    # no marker has a delete horizon yet: each transaction still has a batch in the log
    assert [b.has_delete_horizon for b in batches if b.is_control] == [False, False]

    def another_pass(at):
        plog.append(build_batch([(b"c", b"dirt", [], now)]))
        plog.roll()
        cleaner.Cleaner(str(tmp_path / "data")).clean_partition(plog, plog._settings(), now_ms=at, force=True)
        got = list(iter_batches(b"".join(bytes(c) for c in plog.read(0, 1 << 20).chunks)))
        for b in got:
            b.validate_crc()
        return got

    # Kafka's order, pass by pass. Two days on, producers 8 and 9 are past producer.id.expiration.ms: their
    # empty batches go; the abort marker was kept this pass (the empty batch of its transaction was still met)
    later = now + 2 * DAY_MS
    batches = another_pass(later)
    assert [b.base_offset for b in batches if b.producer_id in (8, 9)] == [3]
    assert not next(b for b in batches if b.base_offset == 3).has_delete_horizon
    # next pass: no batch of the aborted transaction is left, so its marker gets a delete horizon, and stays
    batches = another_pass(later)
    marker = next(b for b in batches if b.base_offset == 3)
    assert marker.delete_horizon_ms == later + DAY_MS and marker.record_count == 1
    # a pass before the horizon keeps it; one after removes it; the committed transaction's marker stays, its
    # record is there
    assert any(b.base_offset == 3 for b in another_pass(later + DAY_MS - 1))
    batches = another_pass(later + DAY_MS)
    assert [b.base_offset for b in batches if b.is_control] == [1]
    assert [(r.offset, r.value) for b in batches if not b.is_control for r in b.records()][:2] == [
        (0, b"committed"),
        (5, b"newer"),
    ]
    storage.close()


def test_a_pass_cut_short_is_finished_or_dropped_at_start(tmp_path):
    storage, plog = _compacted_topic(tmp_path)
    now = int(time.time() * 1000)
    model, _ = _workload(plog, 7, 300, 30, ts=now - 2 * DAY_MS)
    plog.roll()
    directory = plog.directory
    # a copy of the directory as it was, to replay each crash point from
    storage.close()
    pristine = tmp_path / "pristine"
    shutil.copytree(directory, pristine)
    storage = SegmentStorage(tmp_path / "data", {"log.segment.bytes": "3000"})
    storage.set_topic_configs("c", {"segment.bytes": str(1 << 20)})  # one group: all of them into one segment
    plog = storage.partition("c", 0)
    work = cleaner.Cleaner(str(tmp_path / "data"))
    work.clean_partition(plog, plog._settings(), now_ms=now)
    assert len(plog.segments) == 2  # the cleaned one and the active one
    cleaned = sorted(os.listdir(directory))
    group_base = min(s.base_offset for s in plog.segments)
    storage.close()
    name = f"{group_base:020d}.log"
    swap = (Path(directory) / name).read_bytes()

    for crash in ("cleaned", "swap", "swap-after-deletes"):
        shutil.rmtree(directory)
        shutil.copytree(pristine, directory)
        if crash == "cleaned":
            (Path(directory) / (name + ".cleaned")).write_bytes(swap[: len(swap) // 2])  # torn, uncommitted
        else:
            (Path(directory) / (name + ".swap")).write_bytes(swap)
            if crash == "swap-after-deletes":
                for f in sorted(Path(directory).glob("*.log"))[1:-1]:
                    f.rename(str(f) + ".deleted")
        storage = SegmentStorage(tmp_path / "data", {"log.segment.bytes": "3000"})
        plog = storage.partition("c", 0)
        got = _read_all(plog)
        if crash == "cleaned":
            assert {k: (o, v) for o, k, v in got} == model  # the old log, whole
            assert not any(n.endswith(".cleaned") for n in os.listdir(directory))
        else:
            assert got == _latest(model, tombstones=True)
            assert sorted(n for n in os.listdir(directory) if not n.endswith(".snapshot")) == sorted(
                n for n in cleaned if not n.endswith(".snapshot")
            )
        storage.close()


# -- Kafka 4.4 and clients read what the cleaner wrote ---------------------------------------------------------
@pytest.fixture(scope="module")
def kafka_reader():
    return JavaProgram.against_broker(HERE / "KafkaCompactedReader.java")


def _recs(out: str) -> list[tuple[int, bytes, bytes | None]]:
    rows = []
    for line in out.splitlines():
        if line.startswith("rec "):
            _, offset, key, value = line.split(" ", 3)
            rows.append((int(offset), key.encode(), None if value == "-" else value.encode()))
    return rows


def test_kafka_and_its_clients_read_the_compacted_log(kafka_reader, tmp_path):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from kafkawire.testing import KafkaBroker

    data = tmp_path / "broker"
    storage = SegmentStorage(data, {"log.segment.bytes": "3000"})
    storage.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    plog = storage.partition("compacted", 0)
    now = int(time.time() * 1000)
    model, end = _workload(plog, 11, 500, 60, ts=now - 2 * DAY_MS)
    plog.roll()
    cleaner.Cleaner(str(data)).clean_partition(plog, plog._settings(), now_ms=now)
    expected = _latest(model, tombstones=True)
    segments = [s.log_path for s in plog.segments if s.size]
    storage.close()

    # Kafka's FileRecords reads the segment files: every batch valid, the records and offsets of the model; the
    # batches holding tombstones carry the delete horizon the pass stamped (now + delete.retention.ms)
    out = kafka_reader.run("KafkaCompactedReader", "files", *segments)
    assert _recs(out) == expected
    horizons = {int(line.split()[5]) for line in out.splitlines() if line.startswith("batch ")}
    assert horizons == {-1, now + DAY_MS}

    broker = KafkaBroker(storage="segments", data_dir=data)
    broker.start()
    try:
        java = _recs(
            kafka_reader.run("KafkaCompactedReader", "consume", broker.bootstrap, "compacted", str(len(expected)))
        )
        assert java == expected
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "compacted-reader", "enable.auto.commit": False}
        )
        try:
            consumer.assign([confluent_kafka.TopicPartition("compacted", 0, confluent_kafka.OFFSET_BEGINNING)])
            got, deadline = [], time.monotonic() + 30
            while len(got) < len(expected) and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and m.error() is None:
                    got.append((m.offset(), m.key(), m.value()))
        finally:
            consumer.close()
        assert got == expected
    finally:
        broker.stop()


@pytest.mark.parametrize("engine", ["segments", "memory"])
def test_the_broker_compacts_a_topic_by_itself(engine, tmp_path):
    """``kafkawire serve`` runs the cleaner thread: a compacted topic written by librdkafka shrinks to its keys."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    from kafkawire.testing import KafkaBroker

    configs = {"cleanup.policy": "compact", "internal.segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.01"}
    broker = KafkaBroker(
        storage=engine,
        data_dir=tmp_path / "data" if engine == "segments" else None,
        config={"log.cleaner.backoff.ms": "100"},
    )
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("auto", 1, 1, config=configs)])["auto"].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        last = {}
        for i in range(600):
            key = f"k{i % 20}".encode()
            producer.produce("auto", f"v{i}".encode(), key)
            last[key] = f"v{i}".encode()
            if i % 20 == 19:
                assert producer.flush(30) == 0  # batches of 20: the 2,000-byte segments roll
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "auto-reader", "enable.auto.commit": False}
        )
        try:
            deadline = time.monotonic() + 60
            while True:  # until a pass has run: everything below the active segment is one record per key
                consumer.assign([confluent_kafka.TopicPartition("auto", 0, confluent_kafka.OFFSET_BEGINNING)])
                got, until = [], time.monotonic() + 15
                while (not got or got[-1][0] < 599) and time.monotonic() < until:  # a whole read, to the last record
                    m = consumer.poll(0.5)
                    if m is not None and m.error() is None:
                        got.append((m.offset(), m.key(), m.value()))
                if len(got) < 600 or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        finally:
            consumer.close()
        assert len(got) < 600, "the cleaner never ran"
        offsets = [o for o, _, _ in got]
        assert offsets == sorted(offsets) and offsets[-1] == 599  # offsets kept, the last record there
        assert {k: v for _, k, v in got} == last  # each key's last value survives
    finally:
        broker.stop()


def test_broker_log_cleaner_defaults_apply_unless_a_topic_sets_its_own(tmp_path):
    storage = SegmentStorage(
        tmp_path / "data", {"log.cleaner.delete.retention.ms": "5000", "log.cleaner.min.cleanable.ratio": "0.2"}
    )
    try:
        storage.create_topic("a", 1, {"cleanup.policy": "compact"})
        storage.create_topic(
            "b", 1, {"cleanup.policy": "compact", "delete.retention.ms": "7", "min.cleanable.dirty.ratio": "0.9"}
        )
        a, b = storage.partition("a", 0)._settings(), storage.partition("b", 0)._settings()
        assert (a.delete_retention_ms, a.min_cleanable_dirty_ratio) == (5000, 0.2)
        assert (b.delete_retention_ms, b.min_cleanable_dirty_ratio) == (7, 0.9)
    finally:
        storage.close()


def test_offset_gaps_of_a_compacted_log_are_not_damage(tmp_path):
    """Every check that reads batches (the scrubber, a start that rebuilds indexes, ``kafkawire check``) takes the
    cleaner's offset gaps for what they are: the compacted log stays whole."""
    from kafkawire.cli.check import check

    storage, plog = _compacted_topic(tmp_path)
    now = int(time.time() * 1000)
    model, _ = _workload(plog, 13, 300, 7, ts=now - 2 * DAY_MS)  # few keys: whole batches and segments go
    plog.roll()
    cleaner.Cleaner(str(tmp_path / "data")).clean_partition(plog, plog._settings(), now_ms=now)
    expected = _latest(model, tombstones=True)
    assert _read_all(plog) == expected
    assert storage.verify()["damaged"] == []
    directory = Path(plog.directory)
    storage.close()
    for index in directory.glob("*.index"):  # the next start checks every batch of every segment
        index.unlink()
    storage = SegmentStorage(tmp_path / "data", {"log.segment.bytes": "3000"})
    try:
        assert _read_all(storage.partition("c", 0)) == expected
        assert not list(directory.glob("*.quarantine"))
    finally:
        storage.close()
    report = check(str(tmp_path / "data"))
    assert [p["problems"] for p in report["partitions"]] == [[]]


@pytest.mark.parametrize("target", ["kafkawire", "kafka"])
def test_a_compacted_topic_refuses_records_without_a_key(target, request, tmp_path):
    """As Kafka's LogValidator: INVALID_RECORD for a batch with a keyless record; keyed records go in."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    from kafkawire.testing import KafkaBroker

    broker = None
    if target == "kafka":
        bootstrap = request.getfixturevalue("reference_kafka").bootstrap
    else:
        broker = KafkaBroker(storage="segments", data_dir=tmp_path / "data")
        broker.start()
        bootstrap = broker.bootstrap
    try:
        topic = f"keyless-{time.monotonic_ns()}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[topic].result(30)
        outcomes = []
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 0, "retries": 0, "enable.idempotence": False}
        )
        for key in (b"k", None):
            producer.produce(topic, b"v", key, on_delivery=lambda err, msg: outcomes.append(err))
            assert producer.flush(30) == 0
        assert outcomes[0] is None
        assert outcomes[1] is not None and outcomes[1].code() == confluent_kafka.KafkaError.INVALID_RECORD
    finally:
        if broker is not None:
            broker.stop()


def test_a_small_dedupe_buffer_cleans_in_several_passes_to_the_model(tmp_path):
    """log.cleaner.dedupe.buffer.size bounds the offset map as Kafka sizes it (24 bytes a slot, load factor 0.9);
    a full map ends the pass where it got, mid-segment, and the next passes go on from there."""
    assert cleaner.map_entries(134_217_728) == 5_033_164  # Kafka's defaults: 128 MiB, one thread
    assert cleaner.map_entries(134_217_728, 0.9, 4) == 1_258_290  # 33,554,432 / 24 = 1,398,101 slots, * 0.9
    with pytest.raises(ValueError):
        cleaner.map_entries(24, 0.9)  # Kafka's cleaner refuses a map that cannot hold one key
    storage, plog = _compacted_topic(tmp_path)
    now = int(time.time() * 1000)
    model, end = _workload(plog, 17, 600, 300, ts=now - 2 * DAY_MS)
    plog.roll()
    entries = cleaner.map_entries(24 * 100)  # 2,400 bytes: 90 keys a pass
    assert entries == 90
    boundaries = {s.base_offset for s in plog.segments}
    work = cleaner.Cleaner(str(tmp_path / "data"), max_map_entries=entries)
    ends = []
    while (stats := work.clean_partition(plog, plog._settings(), now_ms=now, force=True)) is not None:
        ends.append(stats.end_offset)
        assert len(ends) < 100
    assert len(ends) > 3 and ends == sorted(ends) and ends[-1] == end
    assert set(ends[:-1]) - boundaries, "every pass ended at a segment boundary"
    assert _read_all(plog) == _latest(model, tombstones=True)
    storage.close()


def test_cleaner_threads_clean_partitions_side_by_side(tmp_path):
    """log.cleaner.threads: two threads, each taking a partition no other is cleaning; every partition ends as its
    model, and each offset map is half the buffer."""
    storage = SegmentStorage(tmp_path / "data", {"log.segment.bytes": "3000"})
    now = int(time.time() * 1000)
    models = {}
    for name in ("a", "b", "c"):
        storage.create_topic(name, 1, {"cleanup.policy": "compact"})
        plog = storage.partition(name, 0)
        models[name], _ = _workload(plog, ord(name), 200, 20, ts=now - 2 * DAY_MS)
        plog.roll()
    thread = storage.start_cleaner(backoff_ms=50, threads=2, dedupe_buffer_size=24 * 2000)
    try:
        assert thread.threads == 2 and thread.cleaner.max_map_entries == 900
        deadline = time.monotonic() + 60
        while thread.passes < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert {t for t, _ in thread.cleaner.checkpoints} == {"a", "b", "c"}
        for name, model in models.items():
            assert _read_all(storage.partition(name, 0)) == _latest(model, tombstones=True), name
    finally:
        storage.close()
