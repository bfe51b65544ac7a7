"""Producer snapshots hold every producer, as Kafka's do: a restart rebuilds idempotence from them.

A kafkawire broker (segments engine, in this process, raw protocol) writes a ``.snapshot`` with each
producer's epoch, last batch (sequences, offsets), timestamp and coordinator epoch when a segment rolls and on
a clean stop; a start loads the newest one and replays only the log after it (``replayed_batches`` counts
what a start read to rebuild the state). Kafka 4.4 starting on kafkawire's directory loads kafkawire's
snapshots and kafkawire loads Kafka's: the same producer's retry of its last batch is a duplicate on the other
broker, its next sequence is taken and a gap is OUT_OF_ORDER_SEQUENCE_NUMBER.
"""

from __future__ import annotations

import logging
import os
import time

import pytest
from broker.conftest import RawClient
from broker.helpers import batch, create_topic, produce_request
from idempotent_producer import (
    TOPIC,
    check_continues,
    host_port,
    init_producer,
    partition_dir,
    produce,
    segments_broker,
    write_old_and_fresh,
    write_two_batches,
)
from kafka_dir import kafka_on

from kafkawire.broker.storage import snapshot
from kafkawire.protocol import errors, message_class


def _two_producers(b, c):
    """pid1: offsets 0..2 (seq 0..2), a roll at 3, pid2: 3..4 (seq 0..1), pid1: 5..6 (seq 3..4)."""
    create_topic(c, TOPIC)
    pid1, e1 = init_producer(c)
    pid2, e2 = init_producer(c)
    assert produce(c, pid1, e1, 0, 3).base_offset == 0
    b.broker.storage.partition(TOPIC, 0).roll()
    assert produce(c, pid2, e2, 0, 2).base_offset == 3
    assert produce(c, pid1, e1, 3, 2).base_offset == 5
    return (pid1, e1), (pid2, e2)


def test_snapshots_hold_every_producer_and_a_clean_restart_replays_nothing(tmp_path):
    with segments_broker(tmp_path) as b:
        c = RawClient(b.address)
        (pid1, e1), (pid2, e2) = _two_producers(b, c)
        c.close()
    directory = partition_dir(tmp_path)
    assert snapshot.offsets(directory) == [3, 7]  # the roll's, the clean stop's (log end)
    at_roll = snapshot.read_entries(directory, 3)
    at_stop = snapshot.read_entries(directory, 7)
    assert [e[:5] + e[6:] for e in at_roll] == [(pid1, e1, 2, 2, 2, -1, -1)]
    assert sorted(e[:5] + e[6:] for e in at_stop) == sorted([(pid1, e1, 4, 6, 1, -1, -1), (pid2, e2, 1, 4, 1, -1, -1)])
    assert all(abs(e.timestamp - time.time() * 1000) < 600_000 for e in at_stop)

    with segments_broker(tmp_path) as b:
        c = RawClient(b.address)
        check_continues(c, pid1, e1, dup_seq=3, dup_count=2, dup_offset=5, next_seq=5, next_offset=7)
        other = produce(c, pid2, e2, 0, 2)  # pid2's last batch, from the same snapshot
        assert (other.error_code, other.base_offset) == (0, 3)
        assert b.broker.producers.replayed_batches == 0  # the snapshot at the log end was all it read
        c.close()
    # the start kept the snapshots of segments and the newest one; the stop added its own at the new end
    assert snapshot.offsets(directory) == [3, 7, 8]


def test_producers_are_carried_into_the_next_snapshot_when_no_producer_wrote_since_the_start(tmp_path):
    """A start loads no producer state until a producer writes; a stop after plain records were appended
    still writes every producer of the earlier snapshot (and the one there at the log end is left alone)."""
    with segments_broker(tmp_path) as b:
        c = RawClient(b.address)
        (pid1, e1), (pid2, e2) = _two_producers(b, c)
        c.close()
    directory = partition_dir(tmp_path)
    written = os.stat(snapshot.path_for(directory, 7)).st_mtime_ns
    with segments_broker(tmp_path) as b:
        pass  # nothing appended: the snapshot at the log end is not written again
    assert snapshot.offsets(directory) == [3, 7]
    assert os.stat(snapshot.path_for(directory, 7)).st_mtime_ns == written
    with segments_broker(tmp_path) as b:
        c = RawClient(b.address)
        plain = c.call(produce_request(TOPIC, 0, batch([b"plain"])), 9).responses[0].partition_responses[0]
        assert (plain.error_code, plain.base_offset) == (0, 7)
        c.close()
    assert snapshot.read_entries(directory, 8) == snapshot.read_entries(directory, 7)
    with segments_broker(tmp_path) as b:
        c = RawClient(b.address)
        check_continues(c, pid2, e2, dup_seq=0, dup_count=2, dup_offset=3, next_seq=2, next_offset=8)
        c.close()


def test_describe_producers_after_a_restart_reads_the_snapshot(tmp_path):
    with segments_broker(tmp_path) as b:
        c = RawClient(b.address)
        (pid1, e1), (pid2, e2) = _two_producers(b, c)
        c.close()
    with segments_broker(tmp_path) as b:
        c = RawClient(b.address)
        R = message_class("DescribeProducersRequest")
        res = c.call(R(topics=[R.TopicRequest(name=TOPIC, partition_indexes=[0])]), 0)
        (part,) = res.topics[0].partitions
        assert part.error_code == 0
        got = sorted((s.producer_id, s.producer_epoch, s.last_sequence) for s in part.active_producers)
        assert got == sorted([(pid1, e1, 4), (pid2, e2, 1)])
        assert b.broker.producers.replayed_batches == 0
        c.close()


def test_after_a_crash_the_last_roll_snapshot_and_the_log_after_it_rebuild_the_state(tmp_path):
    with segments_broker(tmp_path) as b:
        c = RawClient(b.address)
        (pid1, e1), (pid2, e2) = _two_producers(b, c)
        c.close()
    snapshot.delete(partition_dir(tmp_path), 7)  # a crash writes no snapshot at the log end
    with segments_broker(tmp_path) as b:
        c = RawClient(b.address)
        check_continues(c, pid1, e1, dup_seq=3, dup_count=2, dup_offset=5, next_seq=5, next_offset=7)
        assert b.broker.producers.replayed_batches == 2  # pid2's and pid1's batches after the roll at 3
        c.close()


@pytest.mark.parametrize("damage", ["flipped byte", "truncated"])
def test_a_damaged_snapshot_is_logged_and_an_older_one_used(tmp_path, caplog, damage):
    with segments_broker(tmp_path) as b:
        c = RawClient(b.address)
        (pid1, e1), _ = _two_producers(b, c)
        c.close()
    path = snapshot.path_for(partition_dir(tmp_path), 7)
    data = bytearray(open(path, "rb").read())
    if damage == "truncated":
        del data[-10:]
    else:
        data[20] ^= 0x40
    with open(path, "wb") as f:
        f.write(data)
    with caplog.at_level(logging.WARNING, logger="kafkawire.storage"), segments_broker(tmp_path) as b:
        c = RawClient(b.address)
        check_continues(c, pid1, e1, dup_seq=3, dup_count=2, dup_offset=5, next_seq=5, next_offset=7)
        assert b.broker.producers.replayed_batches == 2  # from the snapshot at 3
        c.close()
    assert any("ignoring producer snapshot" in r.getMessage() and path in r.getMessage() for r in caplog.records)


def test_producers_idle_past_producer_id_expiration_are_not_loaded(tmp_path):
    with segments_broker(tmp_path) as b:
        c = RawClient(b.address)
        (old, e_old), (fresh, e_fresh) = write_old_and_fresh(c)
        c.close()
    assert {e.producer_id for e in snapshot.read_entries(partition_dir(tmp_path), 4)} == {old, fresh}
    with segments_broker(tmp_path) as b:
        c = RawClient(b.address)
        # as Kafka loads a snapshot: the idle producer is gone, so any sequence starts it again
        assert produce(c, old, e_old, 9, 1).error_code == 0
        assert produce(c, fresh, e_fresh, 9, 1).error_code == errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        c.close()


def test_kafka_loads_the_snapshots_kafkawire_wrote(tmp_path):
    """Kafka, finding no clean shutdown marker of its own, recovers the active segment starting from the
    snapshot at its base: kafkawire's, written at the roll. Producer 1 wrote only before the roll, so that
    snapshot is all Kafka knows of it."""
    logs = tmp_path / "logs"
    with segments_broker(logs) as b:
        c = RawClient(b.address)
        create_topic(c, TOPIC)
        pid1, e1 = init_producer(c)
        pid2, e2 = init_producer(c)
        assert produce(c, pid1, e1, 0, 3).base_offset == 0
        assert produce(c, pid1, e1, 3, 2).base_offset == 3
        b.broker.storage.partition(TOPIC, 0).roll()
        assert produce(c, pid2, e2, 0, 2).base_offset == 5
        c.close()
    assert [e.producer_id for e in snapshot.read_entries(partition_dir(logs), 5)] == [pid1]
    kafka = kafka_on(tmp_path)
    try:
        c = RawClient(host_port(kafka.bootstrap), timeout=30)
        check_continues(c, pid1, e1, dup_seq=3, dup_count=2, dup_offset=3, next_seq=5, next_offset=7)
        check_continues(c, pid2, e2, dup_seq=0, dup_count=2, dup_offset=5, next_seq=2, next_offset=8)
        c.close()
    finally:
        kafka.stop()


def test_kafkawire_loads_the_snapshots_kafka_wrote(tmp_path):
    kafka = kafka_on(tmp_path)
    try:
        c = RawClient(host_port(kafka.bootstrap), timeout=30)
        pid, epoch = write_two_batches(c)
        c.close()
    finally:
        kafka.stop()
    logs = tmp_path / "logs"
    assert 5 in snapshot.offsets(partition_dir(logs))  # Kafka's, at its log end on a clean shutdown
    with segments_broker(logs) as b:
        c = RawClient(b.address)
        check_continues(c, pid, epoch, dup_seq=3, dup_count=2, dup_offset=3, next_seq=5, next_offset=5)
        assert b.broker.producers.replayed_batches == 0
        c.close()
