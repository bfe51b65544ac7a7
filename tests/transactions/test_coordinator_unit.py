"""The transaction coordinator driven directly: a memory storage, a fake clock, a fake marker writer."""

from __future__ import annotations

import itertools
import struct

import pytest

from kafkawire.broker.groups import CommitPartition, GroupCoordinator
from kafkawire.broker.groups.timers import FakeScheduler
from kafkawire.broker.storage.memory import MemoryStorage
from kafkawire.broker.transactions import TransactionCoordinator, TxnConfig, TxnState
from kafkawire.broker.transactions.log import TOPIC, decode_key, decode_value
from kafkawire.broker.transactions.states import TABLE, TxnEvent
from kafkawire.broker.transitions import IllegalTransition
from kafkawire.protocol import errors
from kafkawire.protocol.records import iter_batches

TIMEOUT = 60_000


class FakeMarkers:
    """Records each marker write; completes it at once unless ``hold`` (then ``release()`` does)."""

    def __init__(self):
        self.written: list[tuple[int, int, bool, list]] = []
        self.hold = False
        self.fail: BaseException | None = None
        self.held: list = []

    def write(self, pid, epoch, commit, partitions, done):
        if self.hold:
            self.held.append((pid, epoch, commit, list(partitions), done))
            return
        if self.fail is not None:
            return done(self.fail)
        self.written.append((pid, epoch, commit, list(partitions)))
        done(None)

    def release(self):
        held, self.held = self.held, []
        for pid, epoch, commit, parts, done in held:
            self.written.append((pid, epoch, commit, parts))
            done(None)


class StorageMarkers(FakeMarkers):
    """Appends each marker to its partition, as the broker's marker writer does (the group coordinator's
    staged offsets in ``__consumer_offsets`` are committed by the marker there)."""

    def __init__(self, storage):
        super().__init__()
        self.storage = storage

    def write(self, pid, epoch, commit, partitions, done):
        for topic, partition in partitions:
            self.storage.append_txn_marker(topic, partition, pid, epoch, commit, 0)
        super().write(pid, epoch, commit, partitions, done)


@pytest.fixture
def storage():
    s = MemoryStorage({})
    s.create_topic("t", 3, {})
    return s


def make(storage, clock=None, markers=None, groups=None, **cfg):
    ids = itertools.count(1000)
    coord = TransactionCoordinator(
        storage, lambda: next(ids), markers or FakeMarkers(), TxnConfig(**cfg), clock or FakeScheduler(), groups=groups
    )
    coord.start()
    return coord


def ended(coord, tid, pid, epoch, commit, tv2=False):
    out = []
    coord.end_txn(tid, pid, epoch, commit, tv2, out.append)
    return out[0] if out else None


# -- the state table -------------------------------------------------------------------------------------


def test_the_table_has_kafkas_moves_and_refuses_others():
    TABLE.check("x", TxnState.ONGOING, TxnEvent.END, TxnState.PREPARE_COMMIT)
    TABLE.check("x", TxnState.PREPARE_ABORT, TxnEvent.MARKERS_WRITTEN, TxnState.COMPLETE_ABORT)
    TABLE.check("x", TxnState.COMPLETE_COMMIT, TxnEvent.ADD, TxnState.ONGOING)
    with pytest.raises(IllegalTransition, match="from Empty to PrepareCommit"):
        TABLE.check("x", TxnState.EMPTY, TxnEvent.END, TxnState.PREPARE_COMMIT)
    with pytest.raises(IllegalTransition):
        TABLE.check("x", TxnState.PREPARE_COMMIT, TxnEvent.MARKERS_WRITTEN, TxnState.COMPLETE_ABORT)
    with pytest.raises(IllegalTransition):
        TABLE.check("x", TxnState.ONGOING, TxnEvent.EXPIRED, TxnState.DEAD)


def test_status_bytes_are_kafkas():
    assert [s.status for s in TxnState] == list(range(8))
    assert TxnState.from_status(7) is TxnState.PREPARE_EPOCH_FENCE


# -- InitProducerId ----------------------------------------------------------------------------------------


def test_init_gives_epoch_0_then_bumps(storage):
    c = make(storage)
    first = c.init_producer_id("a", TIMEOUT)
    assert (first.error, first.producer_epoch) == (0, 0)
    again = c.init_producer_id("a", TIMEOUT)
    assert (again.error, again.producer_id, again.producer_epoch) == (0, first.producer_id, 1)


def test_init_bad_input(storage):
    c = make(storage, max_timeout_ms=1000)
    assert c.init_producer_id("", TIMEOUT).error == errors.INVALID_REQUEST
    assert c.init_producer_id("a", 1001).error == errors.INVALID_TRANSACTION_TIMEOUT
    assert c.init_producer_id("a", 0).error == errors.INVALID_TRANSACTION_TIMEOUT
    assert c.init_producer_id("a", 1000).error == 0


def test_init_with_a_stale_producer_is_fenced_and_a_retry_gets_the_same_answer(storage):
    c = make(storage)
    r0 = c.init_producer_id("a", TIMEOUT)
    r1 = c.init_producer_id("a", TIMEOUT, r0.producer_id, r0.producer_epoch)  # KIP-360 bump
    assert r1.producer_epoch == 1
    assert c.init_producer_id("a", TIMEOUT, r0.producer_id, r0.producer_epoch) == r1  # the retry
    assert c.init_producer_id("a", TIMEOUT, r0.producer_id, 7).error == errors.PRODUCER_FENCED


def test_an_exhausted_epoch_takes_a_new_producer_id(storage):
    c = make(storage)
    r = c.init_producer_id("a", TIMEOUT)
    c.txns["a"].producer_epoch = 32766
    bumped = c.init_producer_id("a", TIMEOUT)
    assert bumped.producer_id != r.producer_id and bumped.producer_epoch == 0


def test_init_while_ongoing_fences_and_aborts_the_old_incarnation(storage):
    markers = FakeMarkers()
    c = make(storage, markers=markers)
    r = c.init_producer_id("a", TIMEOUT)
    assert c.add_partitions("a", r.producer_id, 0, [("t", 0)]) == 0
    assert c.init_producer_id("a", TIMEOUT).error == errors.CONCURRENT_TRANSACTIONS
    assert markers.written == [(r.producer_id, 1, False, [("t", 0)])]  # ABORT with the fenced epoch
    assert c.txns["a"].state is TxnState.COMPLETE_ABORT
    assert c.add_partitions("a", r.producer_id, 0, [("t", 1)]) == errors.PRODUCER_FENCED
    assert c.init_producer_id("a", TIMEOUT) == (0, r.producer_id, 2)


# -- AddPartitionsToTxn -------------------------------------------------------------------------------------


def test_add_partitions_errors(storage):
    markers = FakeMarkers()
    c = make(storage, markers=markers)
    r = c.init_producer_id("a", TIMEOUT)
    assert c.add_partitions("nobody", r.producer_id, 0, [("t", 0)]) == errors.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("a", r.producer_id + 1, 0, [("t", 0)]) == errors.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("a", r.producer_id, 3, [("t", 0)]) == errors.PRODUCER_FENCED
    assert c.add_partitions("", r.producer_id, 0, [("t", 0)]) == errors.INVALID_REQUEST
    assert c.add_partitions("a", r.producer_id, 0, [("t", 0)]) == 0
    markers.hold = True
    assert ended(c, "a", r.producer_id, 0, True) is None  # waits for its markers
    assert c.add_partitions("a", r.producer_id, 0, [("t", 1)]) == errors.CONCURRENT_TRANSACTIONS
    assert c.init_producer_id("a", TIMEOUT).error == errors.CONCURRENT_TRANSACTIONS
    markers.release()
    assert c.add_partitions("a", r.producer_id, 0, [("t", 1)]) == 0


def test_verify_only_answers_per_partition(storage):
    c = make(storage)
    r = c.init_producer_id("a", TIMEOUT)
    assert c.verify_partitions("a", r.producer_id, 0, [("t", 0)]) == {("t", 0): errors.INVALID_TXN_STATE}
    c.add_partitions("a", r.producer_id, 0, [("t", 0)])
    assert c.verify_partitions("a", r.producer_id, 0, [("t", 0), ("t", 1)]) == {
        ("t", 0): 0,
        ("t", 1): errors.INVALID_TXN_STATE,
    }
    assert c.verify_partitions("a", r.producer_id, 1, [("t", 0)]) == {("t", 0): errors.PRODUCER_FENCED}
    assert c.txns["a"].partitions == {("t", 0)}  # verifying adds nothing


def test_produce_check_tv1_verifies_tv2_adds(storage):
    c = make(storage)
    r = c.init_producer_id("a", TIMEOUT)
    pid = r.producer_id
    assert c.produce_check("a", pid, 0, "t", 0, add_implicitly=False) == errors.INVALID_TXN_STATE
    assert c.produce_check("a", pid, 0, "t", 0, add_implicitly=True) == 0
    assert c.txns["a"].partitions == {("t", 0)} and c.txns["a"].state is TxnState.ONGOING
    assert c.produce_check("a", pid, 0, "t", 0, add_implicitly=False) == 0
    assert c.produce_check("a", pid, 5, "t", 0, add_implicitly=False) == errors.INVALID_PRODUCER_EPOCH
    assert c.produce_check(None, pid, 0, "t", 0, add_implicitly=True) == errors.INVALID_TXN_STATE


# -- EndTxn ------------------------------------------------------------------------------------------------


def test_end_txn_tv1(storage):
    markers = FakeMarkers()
    c = make(storage, markers=markers)
    pid = c.init_producer_id("a", TIMEOUT).producer_id
    assert ended(c, "a", pid, 0, True).error == errors.INVALID_TXN_STATE  # nothing ongoing
    c.add_partitions("a", pid, 0, [("t", 0), ("t", 2)])
    assert ended(c, "a", pid, 1, True).error == errors.PRODUCER_FENCED
    assert ended(c, "a", pid + 1, 0, True).error == errors.INVALID_PRODUCER_ID_MAPPING
    assert ended(c, "a", pid, 0, True).error == 0
    assert markers.written == [(pid, 0, True, [("t", 0), ("t", 2)])]
    assert c.txns["a"].state is TxnState.COMPLETE_COMMIT and not c.txns["a"].partitions
    assert ended(c, "a", pid, 0, True).error == 0  # a retry
    assert ended(c, "a", pid, 0, False).error == errors.INVALID_TXN_STATE
    assert len(markers.written) == 1


def test_end_txn_answers_concurrent_while_preparing_and_invalid_for_the_other_outcome(storage):
    markers = FakeMarkers()
    c = make(storage, markers=markers)
    pid = c.init_producer_id("a", TIMEOUT).producer_id
    c.add_partitions("a", pid, 0, [("t", 0)])
    markers.hold = True
    waiting = []
    c.end_txn("a", pid, 0, False, False, waiting.append)
    assert waiting == [] and c.txns["a"].state is TxnState.PREPARE_ABORT
    assert ended(c, "a", pid, 0, False).error == errors.CONCURRENT_TRANSACTIONS
    markers.release()
    assert waiting[0].error == 0 and c.txns["a"].state is TxnState.COMPLETE_ABORT


def test_end_txn_tv2_bumps_the_epoch_and_accepts_a_retry(storage):
    markers = FakeMarkers()
    c = make(storage, markers=markers)
    pid = c.init_producer_id("a", TIMEOUT).producer_id
    c.produce_check("a", pid, 0, "t", 1, add_implicitly=True)
    assert ended(c, "a", pid, 0, True, tv2=True) == (0, pid, 1)
    assert markers.written == [(pid, 1, True, [("t", 1)])]  # the markers carry the new epoch
    assert ended(c, "a", pid, 0, True, tv2=True) == (0, pid, 1)  # retried with the epoch it sent
    assert ended(c, "a", pid, 1, True, tv2=True).error == errors.INVALID_TXN_STATE  # no transaction
    assert ended(c, "a", pid, 1, False, tv2=True) == (0, pid, 2)  # an abort of nothing bumps
    assert len(markers.written) == 1
    assert ended(c, "a", pid, 0, True, tv2=True).error == errors.PRODUCER_FENCED


# -- timeouts and expiration --------------------------------------------------------------------------------


def test_a_timed_out_transaction_is_aborted_with_a_bumped_epoch(storage):
    clock, markers = FakeScheduler(), FakeMarkers()
    c = make(storage, clock=clock, markers=markers)
    pid = c.init_producer_id("a", 15_000).producer_id
    c.add_partitions("a", pid, 0, [("t", 0)])
    clock.advance(10_000)
    assert markers.written == [] and c.txns["a"].state is TxnState.ONGOING
    clock.advance(10_000)  # the check at 20 s finds it 15 s old
    assert markers.written == [(pid, 1, False, [("t", 0)])]
    assert c.txns["a"].state is TxnState.COMPLETE_ABORT
    assert ended(c, "a", pid, 0, True).error == errors.PRODUCER_FENCED


def test_idle_ids_expire(storage):
    clock = FakeScheduler()
    c = make(storage, clock=clock, id_expiration_ms=5_000, remove_expired_interval_ms=1_000)
    c.init_producer_id("idle", TIMEOUT)
    pid = c.init_producer_id("busy", TIMEOUT).producer_id
    c.add_partitions("busy", pid, 0, [("t", 0)])
    clock.advance(6_000)
    assert set(c.txns) == {"busy"}
    restarted = make(storage)
    assert set(restarted.txns) == {"busy"}  # the tombstone is in the log


# -- the log and restarts ------------------------------------------------------------------------------------


def test_records_are_kafkas_transaction_log_format(storage):
    c = make(storage)
    pid = c.init_producer_id("a", TIMEOUT).producer_id
    c.add_partitions("a", pid, 0, [("t", 2), ("t", 0)])
    plog = storage.partition(TOPIC, 0)
    data = b"".join(bytes(x) for x in plog.read(0, 1 << 20).chunks)
    records = [r for b in iter_batches(data) for r in b.records()]
    last = records[-1]
    assert bytes(last.key) == struct.pack(">h", 0) + struct.pack(">h", 1) + b"a"
    assert decode_key(bytes(last.key)) == "a"
    txn = decode_value("a", bytes(last.value))
    assert (txn.producer_id, txn.state, txn.partitions, txn.timeout_ms) == (
        pid,
        TxnState.ONGOING,
        {("t", 0), ("t", 2)},
        TIMEOUT,
    )
    assert struct.unpack_from(">hqhih", bytes(last.value))[0] == 1  # value version 1
    assert storage.topics()[TOPIC].configs.get("cleanup.policy") == "compact"


def test_restart_in_prepare_commit_writes_the_markers_and_completes(storage):
    markers = FakeMarkers()
    c = make(storage, markers=markers)
    pid = c.init_producer_id("a", TIMEOUT).producer_id
    c.add_partitions("a", pid, 0, [("t", 0), ("t", 1)])
    markers.hold = True  # the broker dies before its markers are written
    c.end_txn("a", pid, 0, True, False, lambda r: None)
    c.stop()
    again = FakeMarkers()
    restarted = make(storage, markers=again)
    assert again.written == [(pid, 0, True, [("t", 0), ("t", 1)])]
    assert restarted.txns["a"].state is TxnState.COMPLETE_COMMIT
    assert ended(restarted, "a", pid, 0, True).error == 0


def test_restart_with_an_ongoing_transaction_aborts_it_when_its_timeout_passes(storage):
    clock = FakeScheduler()
    c = make(storage, clock=clock)
    pid = c.init_producer_id("a", 30_000).producer_id
    c.add_partitions("a", pid, 0, [("t", 0)])
    c.stop()
    markers = FakeMarkers()
    restarted = make(storage, clock=clock, markers=markers)
    assert restarted.txns["a"].state is TxnState.ONGOING and restarted.txns["a"].partitions == {("t", 0)}
    clock.advance(20_000)
    assert markers.written == []
    clock.advance(20_000)
    assert markers.written == [(pid, 1, False, [("t", 0)])]
    assert restarted.txns["a"].state is TxnState.COMPLETE_ABORT


def test_failed_markers_are_retried_at_the_next_check(storage):
    clock, markers = FakeScheduler(), FakeMarkers()
    c = make(storage, clock=clock, markers=markers)
    pid = c.init_producer_id("a", TIMEOUT).producer_id
    c.add_partitions("a", pid, 0, [("t", 0)])
    markers.fail = OSError("disk")
    answers = []
    c.end_txn("a", pid, 0, True, False, answers.append)
    assert c.txns["a"].state is TxnState.PREPARE_COMMIT
    assert [a.error for a in answers] == [0]  # decided: the client is not left waiting on the disk
    assert c.add_partitions("a", pid, 0, [("t", 1)]) == errors.CONCURRENT_TRANSACTIONS
    markers.fail = None
    clock.advance(10_000)
    assert c.txns["a"].state is TxnState.COMPLETE_COMMIT


# -- ListTransactions -------------------------------------------------------------------------------------


def test_list_filters(storage):
    clock = FakeScheduler()
    c = make(storage, clock=clock)
    a = c.init_producer_id("app-a", TIMEOUT).producer_id
    b = c.init_producer_id("app-b", TIMEOUT).producer_id
    c.init_producer_id("other", TIMEOUT)
    c.add_partitions("app-a", a, 0, [("t", 0)])
    clock.advance(5_000)
    c.add_partitions("app-b", b, 0, [("t", 0)])
    names = lambda res: sorted(t.transactional_id for t in res[2])  # noqa: E731
    assert names(c.list_transactions(["Ongoing"], [])) == ["app-a", "app-b"]
    assert names(c.list_transactions([], [b])) == ["app-b"]
    assert names(c.list_transactions(["Ongoing"], [], duration_ms=3_000)) == ["app-a"]
    assert names(c.list_transactions([], [], pattern="app-.*")) == ["app-a", "app-b"]
    assert c.list_transactions(["Ongoing", "Sleeping"], [])[1] == ["Sleeping"]
    assert c.list_transactions([], [], pattern="(")[0] == errors.INVALID_REGULAR_EXPRESSION


# -- transactional offsets --------------------------------------------------------------------------------


def test_transactional_offsets_are_visible_only_after_commit(storage):
    clock = FakeScheduler()
    groups = GroupCoordinator(storage, scheduler=clock)
    groups.start()
    c = make(storage, clock=clock, groups=lambda: groups)
    pid = c.init_producer_id("a", TIMEOUT).producer_id
    assert c.offset_commit_check("a", pid, 0, "g", add_implicitly=False) == errors.INVALID_TXN_STATE
    assert c.add_offsets("a", pid, 0, "g") == 0
    assert c.offset_commit_check("a", pid, 0, "g", add_implicitly=False) == 0
    groups.stage_txn_offsets(pid, "g", [CommitPartition("t", 0, 42)])
    assert groups.offset_fetch("g", [("t", [0])])[1] == [("t", [(0, -1, -1, "", 0)])]
    assert groups.offset_fetch("g", [("t", [0])], require_stable=True)[1] == [
        ("t", [(0, -1, -1, "", errors.UNSTABLE_OFFSET_COMMIT)])
    ]
    assert ended(c, "a", pid, 0, True).error == 0
    assert groups.offset_fetch("g", [("t", [0])], require_stable=True)[1] == [("t", [(0, 42, -1, "", 0)])]


def test_aborted_transactional_offsets_are_dropped(storage):
    clock = FakeScheduler()
    groups = GroupCoordinator(storage, scheduler=clock)
    groups.start()
    c = make(storage, clock=clock, groups=lambda: groups)
    pid = c.init_producer_id("a", TIMEOUT).producer_id
    c.add_offsets("a", pid, 0, "g")
    groups.stage_txn_offsets(pid, "g", [CommitPartition("t", 0, 42)])
    assert ended(c, "a", pid, 0, False).error == 0
    assert groups.offset_fetch("g", [("t", [0])], require_stable=True)[1] == [("t", [(0, -1, -1, "", 0)])]


def test_staged_offsets_survive_a_restart_and_commit_after_it(storage):
    clock, markers = FakeScheduler(), FakeMarkers()
    groups = GroupCoordinator(storage, scheduler=clock)
    groups.start()
    c = make(storage, clock=clock, markers=markers, groups=lambda: groups)
    pid = c.init_producer_id("a", TIMEOUT).producer_id
    c.add_offsets("a", pid, 0, "g")
    assert groups.stage_txn_offsets(pid, "g", [CommitPartition("t", 0, 42)]) == 0
    markers.hold = True  # PrepareCommit is written, then the broker dies
    c.end_txn("a", pid, 0, True, False, lambda r: None)
    c.stop()
    groups2 = GroupCoordinator(storage, scheduler=clock)
    groups2.start()
    assert groups2.offset_fetch("g", [("t", [0])], require_stable=True)[1] == [
        ("t", [(0, -1, -1, "", errors.UNSTABLE_OFFSET_COMMIT)])
    ]
    make(storage, clock=clock, markers=StorageMarkers(storage), groups=lambda: groups2)  # finishes the commit
    assert groups2.offset_fetch("g", [("t", [0])], require_stable=True)[1] == [("t", [(0, 42, -1, "", 0)])]
    groups3 = GroupCoordinator(storage, scheduler=clock)
    groups3.start()
    assert groups3.offset_fetch("g", [("t", [0])], require_stable=True)[1] == [("t", [(0, 42, -1, "", 0)])]


def test_the_log_is_compacted_and_replays_to_the_same_state(storage):
    c = make(storage, compact_after_records=20)
    pids = {}
    for i in range(30):
        pids[f"id{i % 3}"] = c.init_producer_id(f"id{i % 3}", TIMEOUT)
    plog = storage.partition(TOPIC, 0)
    assert plog.log_start_offset > 0  # records before the last snapshot are gone
    restarted = make(storage)
    assert {tid: (t.producer_id, t.producer_epoch) for tid, t in restarted.txns.items()} == {
        tid: (r.producer_id, r.producer_epoch) for tid, r in pids.items()
    }


def test_tv2_end_txn_at_an_exhausted_epoch_moves_to_a_new_producer_id(storage):
    markers = FakeMarkers()
    c = make(storage, markers=markers)
    pid = c.init_producer_id("a", TIMEOUT).producer_id
    c.txns["a"].producer_epoch = 32766
    assert c.produce_check("a", pid, 32766, "t", 0, add_implicitly=True) == 0
    result = ended(c, "a", pid, 32766, True, tv2=True)
    assert result.error == 0 and result.producer_id != pid and result.producer_epoch == 0
    assert markers.written == [(pid, 32767, True, [("t", 0)])]  # the old id's batches, fenced above them
    assert ended(c, "a", pid, 32766, True, tv2=True) == result  # a retry with the old id gets the new one
    assert ended(c, "a", pid, 32765, True, tv2=True).error == errors.INVALID_PRODUCER_ID_MAPPING
