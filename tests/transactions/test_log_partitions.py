"""Each transactional id's state lives in the partition of ``__transaction_state`` Kafka's
``TransactionStateManager.partitionFor`` picks, ``Utils.abs(id.hashCode()) % partitions``: checked against
Kafka's own ``Utils.abs`` and Java's ``String.hashCode`` (tests/java/TransactionPartitionFor.java), then the
coordinator's writes, expiry, compaction and replay on a topic of Kafka's 50 partitions, and the records an
older kafkawire left in partition 0."""

from __future__ import annotations

import itertools

import pytest

from kafkawire.broker.groups.persistence import java_string_hash
from kafkawire.broker.groups.timers import FakeScheduler
from kafkawire.broker.storage.memory import MemoryStorage
from kafkawire.broker.transactions import TransactionCoordinator, TxnConfig, TxnState
from kafkawire.broker.transactions.log import TOPIC, TOPIC_CONFIGS, TxnLog, decode_key, encode_key, encode_value
from kafkawire.broker.transactions.metadata import TxnMetadata
from kafkawire.protocol.records import build_batch, iter_batches

from .test_coordinator_unit import TIMEOUT, FakeMarkers
from support.java import JavaProgram

KAFKA_PARTITIONS = 50  # transaction.state.log.num.partitions' default in Kafka
IDS = [
    "",
    "a",
    "txn-1",
    "my-transactional-id",
    "polygenelubricants",  # String.hashCode is Integer.MIN_VALUE: Utils.abs gives 0
    "DESIGNING WORKHOUSES",  # Integer.MIN_VALUE as well
    "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",  # wraps around many times
    "héllo-wörld",
    "事务-42",
    "транзакция",
    "rocket-\U0001f680",  # a character outside the BMP: two UTF-16 code units in Java's hash
    "\U0001f680\U0001f9ea\U00010348",
    "x" * 300,
]


def test_the_partition_is_kafkas_for_every_id():
    program = JavaProgram.require("TransactionPartitionFor.java")
    counts = (KAFKA_PARTITIONS, 7, 3, 1)
    out = program.run("TransactionPartitionFor", *map(str, counts), input="".join(i.encode().hex() + "\n" for i in IDS))
    rows = [list(map(int, line.split())) for line in out.splitlines()]
    assert len(rows) == len(IDS)
    hashes = [row[0] for row in rows]
    assert hashes.count(-(2**31)) == 2 and any(h < 0 for h in hashes if h != -(2**31))  # the edge cases
    for tid, (java_hash, *partitions) in zip(IDS, rows):
        assert java_string_hash(tid) == java_hash, tid
        for count, kafka_partition in zip(counts, partitions):
            storage = MemoryStorage({})
            storage.create_topic(TOPIC, count, {})
            # the topic's own count, whatever transaction.state.log.num.partitions says
            assert TxnLog(storage, partitions=1).partition_for(tid) == kafka_partition, (tid, count)


def records_by_partition(storage, count=KAFKA_PARTITIONS):
    """{partition: [(transactional id, value bytes or None)]} of the whole topic."""
    found = {}
    for p in range(count):
        plog = storage.partition(TOPIC, p)
        data = b"".join(bytes(c) for c in plog.read(plog.log_start_offset, 1 << 24, min_one=True).chunks)
        for batch in iter_batches(data) if data else ():
            for rec in batch.records():
                value = None if rec.value is None else bytes(rec.value)
                found.setdefault(p, []).append((decode_key(bytes(rec.key)), value))
    return found


def kafka_made_storage():
    """A storage holding __transaction_state as Kafka creates it (50 partitions)."""
    storage = MemoryStorage({})
    storage.create_topic(TOPIC, KAFKA_PARTITIONS, dict(TOPIC_CONFIGS))
    storage.create_topic("t", 3, {})
    return storage


def make(storage, clock=None, **cfg):
    ids = itertools.count(1000)
    coord = TransactionCoordinator(
        storage, lambda: next(ids), FakeMarkers(), TxnConfig(**cfg), clock or FakeScheduler()
    )
    coord.start()
    return coord


def test_a_new_topic_gets_the_configured_partition_count():
    for configured in (1, 5):
        storage = MemoryStorage({})
        make(storage, log_partitions=configured).init_producer_id("a", TIMEOUT)
        assert storage.topics()[TOPIC].partitions == configured


def test_each_ids_records_go_to_its_partition_and_replay_from_all_of_them():
    storage, clock = kafka_made_storage(), FakeScheduler()
    c = make(storage, clock, id_expiration_ms=60_000, remove_expired_interval_ms=1000)
    pids = {}
    for tid in IDS[1:]:
        pids[tid] = c.init_producer_id(tid, TIMEOUT).producer_id
    c.add_partitions("a", pids["a"], 0, [("t", 0)])
    found = records_by_partition(storage)
    assert len(found) > 5  # spread, not all in partition 0
    assert {tid for recs in found.values() for tid, _ in recs} == set(IDS[1:])
    for p, recs in found.items():
        assert all(c.log.partition_for(tid) == p for tid, _ in recs), p
    restarted = make(storage, clock, id_expiration_ms=60_000, remove_expired_interval_ms=1000)
    assert {t: (x.producer_id, x.state) for t, x in restarted.txns.items()} == {
        t: (pid, TxnState.ONGOING if t == "a" else TxnState.EMPTY) for t, pid in pids.items()
    }
    # expiry: each id's tombstone in its own partition (the one with a transaction under way stays)
    c.stop()
    clock.advance(61_000)
    assert set(restarted.txns) == {"a"}
    tombstones = [(p, tid) for p, recs in records_by_partition(storage).items() for tid, v in recs if v is None]
    assert sorted(tid for _, tid in tombstones) == sorted(IDS[2:])
    assert all(restarted.log.partition_for(tid) == p for p, tid in tombstones)


def test_compaction_snapshots_each_id_in_its_partition():
    storage = kafka_made_storage()
    c = make(storage, compact_after_records=20)
    last = {}
    for i in range(40):
        tid = IDS[1 + i % 6]
        last[tid] = c.init_producer_id(tid, TIMEOUT)
    assert any(storage.partition(TOPIC, p).log_start_offset > 0 for p in range(KAFKA_PARTITIONS))
    for p, recs in records_by_partition(storage).items():
        assert all(c.log.partition_for(tid) == p for tid, _ in recs), p
    restarted = make(storage)
    assert {t: (x.producer_id, x.producer_epoch) for t, x in restarted.txns.items()} == {
        t: (r.producer_id, r.producer_epoch) for t, r in last.items()
    }


def _txn(tid, pid, epoch, state, partitions=()):
    txn = TxnMetadata(tid, pid, epoch, TIMEOUT, state)
    txn.partitions = set(partitions)
    return txn


def _write(storage, partition, timestamp, tid, txn):
    value = None if txn is None else encode_value(txn)
    storage.partition(TOPIC, partition).append(build_batch([(encode_key(tid), value, [], timestamp)]))


def test_an_older_kafkawires_records_in_partition_0_are_loaded_and_moved_to_their_partition():
    storage = kafka_made_storage()
    log = TxnLog(storage)
    newer_stray, newer_home, only_stray, gone = "txn-1", "my-transactional-id", "事务-42", "транзакция"
    homes = {tid: log.partition_for(tid) for tid in (newer_stray, newer_home, only_stray, gone)}
    assert 0 not in homes.values()
    # partition 0 as an older kafkawire wrote it, and two ids' records Kafka wrote where it looks
    _write(storage, homes[newer_stray], 1_000, newer_stray, _txn(newer_stray, 7, 3, TxnState.COMPLETE_COMMIT))
    _write(storage, 0, 2_000, newer_stray, _txn(newer_stray, 7, 5, TxnState.ONGOING, [("t", 1)]))
    _write(storage, 0, 1_000, newer_home, _txn(newer_home, 8, 1, TxnState.ONGOING, [("t", 0)]))
    _write(storage, homes[newer_home], 2_000, newer_home, _txn(newer_home, 8, 2, TxnState.COMPLETE_ABORT))
    _write(storage, 0, 1_500, only_stray, _txn(only_stray, 9, 0, TxnState.PREPARE_COMMIT, [("t", 2)]))
    _write(storage, 0, 1_500, gone, _txn(gone, 10, 0, TxnState.EMPTY))
    _write(storage, 0, 1_600, gone, None)

    def state(coord):
        return {t: (x.producer_id, x.producer_epoch, x.state, x.partitions) for t, x in coord.txns.items()}

    c = make(storage)
    assert c.log.strays_moved == 2
    expected = {
        newer_stray: (7, 5, TxnState.ONGOING, {("t", 1)}),
        newer_home: (8, 2, TxnState.COMPLETE_ABORT, set()),
        only_stray: (9, 0, TxnState.COMPLETE_COMMIT, set()),  # the prepared commit completed at start
    }
    assert state(c) == expected
    found = records_by_partition(storage)
    # the moved states are in their own partitions, and partition 0 ends with tombstones for the strays: what
    # Kafka loads from partition 0 no longer holds them
    assert sorted(tid for tid, v in found[0][-3:]) == sorted([newer_stray, newer_home, only_stray]) and all(
        v is None for _, v in found[0][-3:]
    )
    assert found[homes[newer_stray]][-1][0] == newer_stray and found[homes[newer_stray]][-1][1] is not None
    assert [tid for tid, _ in found[homes[only_stray]]][:1] == [only_stray]
    restarted = make(storage)
    assert restarted.log.strays_moved == 0 and state(restarted) == expected


@pytest.mark.parametrize("partitions", [1, KAFKA_PARTITIONS])
def test_a_tie_goes_to_the_ids_own_partition(partitions):
    storage = MemoryStorage({})
    storage.create_topic(TOPIC, partitions, {})
    log = TxnLog(storage)
    tid = "txn-1"
    home = log.partition_for(tid)
    other = (home + 1) % partitions
    _write(storage, home, 5_000, tid, _txn(tid, 1, 4, TxnState.EMPTY))
    _write(storage, other, 5_000, tid, _txn(tid, 1, 9, TxnState.EMPTY))
    epochs = [txn.producer_epoch for t, txn in log.replay() if t == tid]
    # one partition: both records are its own, in log order; fifty: the stray ties and loses
    assert epochs[-1] == (9 if partitions == 1 else 4)
