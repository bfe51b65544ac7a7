"""The batch topic changes of base.Storage (create_topics, delete_topics, add_partitions_batch), every engine."""

from __future__ import annotations

import os
import uuid

import pytest

from kafkawire.broker.storage import base, metadata
from kafkawire.broker.storage.memory import MemoryStorage

ENGINES = ["memory", "segments"]


@pytest.fixture(params=ENGINES)
def engine(request, tmp_path):
    made = []

    def make():
        if request.param == "memory":
            storage = MemoryStorage()
        else:
            from kafkawire.broker.storage.segments import SegmentStorage

            storage = SegmentStorage(tmp_path / "data")
        made.append(storage)
        return storage

    yield request.param, make
    for storage in made:
        storage.close()


def test_create_topics_answers_each_topic_and_keeps_the_good_ones(engine):
    _kind, make = engine
    storage = make()
    storage.create_topic("exists", 1)
    tid = uuid.uuid4()
    results = storage.create_topics(
        [
            base.NewTopic("a", 3, {"retention.ms": "1000"}, tid),
            base.NewTopic("exists", 1),
            base.NewTopic("bad/name", 1),
            base.NewTopic("b", 0),
            base.NewTopic("c", 2),
            base.NewTopic("c", 5),
            base.NewTopic("d", 1, {"retention.ms": "not a number"}),
        ]
    )
    assert isinstance(results[0], base.TopicMeta) and results[0].topic_id == tid and results[0].partitions == 3
    assert isinstance(results[1], base.TopicExistsError)
    assert isinstance(results[2], base.InvalidTopicError)
    assert isinstance(results[3], base.InvalidPartitionsError)
    assert isinstance(results[4], base.TopicMeta) and results[4].partitions == 2
    assert isinstance(results[5], base.TopicExistsError)  # the same name twice in one batch
    assert isinstance(results[6], base.InvalidConfigError)
    assert set(storage.topics()) == {"exists", "a", "c"}
    assert storage.topics()["a"].configs == {"retention.ms": "1000"}
    for name, count in (("a", 3), ("c", 2)):
        for p in range(count):
            log = storage.partition(name, p)
            assert log.append(_batch()).base_offset == 0
        with pytest.raises(base.UnknownTopicError):
            storage.partition(name, count)


def test_topic_ids_must_be_unique_within_a_batch(engine):
    _kind, make = engine
    storage = make()
    tid = uuid.uuid4()
    results = storage.create_topics([base.NewTopic("a", 1, None, tid), base.NewTopic("b", 1, None, tid)])
    assert isinstance(results[0], base.TopicMeta)
    assert isinstance(results[1], base.TopicExistsError)
    assert set(storage.topics()) == {"a"}


def test_delete_topics_and_add_partitions_batch(engine):
    _kind, make = engine
    storage = make()
    storage.create_topics([base.NewTopic(n, 1) for n in ("a", "b", "c")])
    assert [type(r) for r in storage.add_partitions_batch([("a", 4), ("b", 1), ("zz", 2), ("c", 2)])] == [
        base.TopicMeta,
        base.InvalidPartitionsError,
        base.UnknownTopicError,
        base.TopicMeta,
    ]
    assert storage.topics()["a"].partitions == 4 and storage.topics()["c"].partitions == 2
    assert storage.partition("a", 3).log_end_offset == 0
    results = storage.delete_topics(["a", "nope", "c"])
    assert results[0] is None and isinstance(results[1], base.UnknownTopicError) and results[2] is None
    assert set(storage.topics()) == {"b"}
    with pytest.raises(base.UnknownTopicError):
        storage.partition("a", 0)


def test_segments_batch_survives_a_restart_and_writes_topics_json_once(tmp_path, monkeypatch):
    from kafkawire.broker.storage import segments
    from kafkawire.broker.storage.segments import SegmentStorage

    saves = []
    real_save = metadata.save_topics
    monkeypatch.setattr(segments.metadata, "save_topics", lambda d, t: (saves.append(len(t)), real_save(d, t)))
    storage = SegmentStorage(tmp_path / "data")
    results = storage.create_topics([base.NewTopic(f"t{i}", 3) for i in range(50)])
    assert all(isinstance(r, base.TopicMeta) for r in results)
    assert saves == [50]
    storage.partition("t7", 2).append(_batch(), durable=True)
    storage.add_partitions_batch([("t1", 5), ("t2", 4)])
    assert saves == [50, 50]
    storage.delete_topics(["t3", "t4", "nope"])
    assert saves == [50, 50, 48]
    storage.close()
    again = SegmentStorage(tmp_path / "data")
    try:
        assert len(again.topics()) == 48 and again.topics()["t1"].partitions == 5
        assert again.partition("t7", 2).log_end_offset == 1
        assert again.partition("t2", 3).log_end_offset == 0
        assert not [d for d in os.listdir(tmp_path / "data") if d.startswith("t3-")]
        ids = {m.topic_id for m in again.topics().values()}
        assert len(ids) == 48
    finally:
        again.close()


def test_segments_partition_directories_lost_in_a_crash_are_recreated(tmp_path):
    """Batch creation does not fsync each new partition: topics.json is the record, and a partition
    directory that a crash lost comes back empty on start."""
    import shutil

    from kafkawire.broker.storage.segments import SegmentStorage

    storage = SegmentStorage(tmp_path / "data")
    storage.create_topics([base.NewTopic("t", 2)])
    storage.close()
    shutil.rmtree(tmp_path / "data" / "t-1")
    again = SegmentStorage(tmp_path / "data")
    try:
        assert again.partition("t", 1).append(_batch()).base_offset == 0
    finally:
        again.close()


def _batch():
    from storage_batches import build_batch

    return build_batch([b"v"])
