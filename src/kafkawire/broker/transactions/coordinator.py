"""The transaction coordinator: every transactional id of this node, its producer id and epoch, the
partitions of its ongoing transaction, and their durable log ``__transaction_state``.

``TransactionCoordinator`` is a plain object driven by method calls and ``Scheduler`` timers (no sockets),
like the group coordinator: the broker creates and starts it, its handlers
(``broker/handlers/transactions.py``) translate requests into calls and results into responses; tests
drive it with a ``FakeScheduler`` and a fake marker writer.

What it decides, as Kafka 4.4's ``TransactionCoordinator`` does:

- InitProducerId: a new id gets a producer id at epoch 0; a known one has its epoch bumped (a new producer
  id once the epoch is exhausted), which fences the previous incarnation; an ongoing transaction of that
  incarnation is aborted first (epoch fenced, ABORT markers) and the caller told CONCURRENT_TRANSACTIONS,
  to retry.
- AddPartitionsToTxn / AddOffsetsToTxn / Produce under Transactions V2: the partitions join the
  transaction, which becomes Ongoing and starts its ``transaction.timeout.ms``.
- EndTxn: PrepareCommit/PrepareAbort is written, then a COMMIT/ABORT marker to every partition (in
  process, through ``MarkerWriter``; offsets staged by TxnOffsetCommit go to the group coordinator instead),
  then CompleteCommit/CompleteAbort. Under TV2 (EndTxn v5+) every EndTxn bumps the epoch, answered to the
  client, and the markers carry the new epoch.
- Timeouts: every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` an Ongoing transaction
  older than its timeout is aborted with a bumped epoch (its producer is fenced); ids idle for
  ``transactional.id.expiration.ms`` are forgotten (a tombstone in the log).

Restart: replaying the log restores every id; a transaction left in PrepareCommit/PrepareAbort writes its
markers again (they are idempotent for readers: a second marker of the same transaction ends nothing new)
and completes; an Ongoing one keeps its start time and is aborted when its timeout passes.

Limits (kafkawire's; Kafka's only limit is memory): 10,000 partitions per transaction (an add past it is
refused with INVALID_REQUEST) and at most ``LIST_LIMIT`` ids in one ListTransactions answer.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

import msgspec

from kafkawire.protocol import errors

from .config import TxnConfig
from .log import TOPIC, TxnLog, TxnLogError, encode_key, encode_value
from .metadata import MAX_EPOCH, NO_EPOCH, NO_PRODUCER_ID, TxnMetadata
from .states import TxnEvent, TxnState, move

log = logging.getLogger("kafkawire.transactions")

OFFSETS_TOPIC = "__consumer_offsets"
MAX_PARTITIONS_PER_TXN = 10_000
LIST_LIMIT = 100_000
COORDINATOR_EPOCH = 0  # the epoch of __transaction_state's leader: a single node never changes it


class InitResult(NamedTuple):
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_EPOCH


class EndResult(NamedTuple):
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_EPOCH


class MarkerWriter:
    """Writes the COMMIT/ABORT markers of a completing transaction (WriteTxnMarkers, in process).

    ``write`` calls ``done(failure)`` once every partition has its marker (``failure`` None), or with the
    exception that stopped it; it may call it before returning."""

    def write(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        partitions: list[tuple[str, int]],
        done: Callable[[BaseException | None], None],
    ) -> None:  # pragma: no cover - interface
        raise NotImplementedError


def _exhausted(epoch: int) -> bool:
    # Kafka keeps the last value free so that a fence can still bump once more
    return epoch >= MAX_EPOCH - 1


class TransactionCoordinator:
    def __init__(
        self,
        storage,
        allocate_producer_id: Callable[[], int],
        markers: MarkerWriter,
        config: TxnConfig | None = None,
        scheduler=None,
        groups: Callable[[], object] | None = None,
        leader_epochs=None,
    ):
        from ..groups.timers import FakeScheduler

        self.storage = storage
        self.config = config or TxnConfig()
        self.scheduler = scheduler or FakeScheduler()
        self.allocate_producer_id = allocate_producer_id
        self.markers = markers
        self.groups = groups or (lambda: None)  # the group coordinator now serving (it may be replaced)
        self.log = (
            TxnLog(
                storage,
                fsync=self.config.fsync,
                compact_after_records=self.config.compact_after_records,
                leader_epochs=leader_epochs,
                partitions=self.config.log_partitions,
            )
            if storage is not None
            else None
        )
        self.txns: dict[str, TxnMetadata] = {}
        self._end_waiters: dict[str, list[Callable[[EndResult], None]]] = {}
        self._timers: dict[str, object] = {}  # the periodic checks' next timers, by name
        self.stopped = False

    # -- life --------------------------------------------------------------------------------------
    def start(self) -> None:
        """Replay ``__transaction_state``, finish what it left prepared, start the periodic checks."""
        self.load()
        for txn in list(self.txns.values()):
            if txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._write_markers(txn)
            elif txn.state is TxnState.PREPARE_EPOCH_FENCE:  # fenced but the abort was not yet written
                self._abort(txn, TxnEvent.FENCE)
        self._every(self.config.abort_interval_ms, self.abort_timed_out)
        self._every(self.config.remove_expired_interval_ms, self.expire_ids)

    def stop(self) -> None:
        self.stopped = True
        for timer in self._timers.values():
            timer.cancel()

    def _every(self, interval_ms: int, fn) -> None:
        def tick():
            if self.stopped:
                return
            try:
                fn()
            except Exception:  # pragma: no cover - never let a timer kill the coordinator
                log.exception("transaction coordinator housekeeping failed")
            self._timers[fn.__name__] = self.scheduler.call_later(interval_ms, tick)

        self._timers[fn.__name__] = self.scheduler.call_later(interval_ms, tick)

    def load(self) -> None:
        if self.log is None:
            return
        n = 0
        for tid, txn in self.log.replay():
            n += 1
            if txn is None or txn.state is TxnState.DEAD:
                self.txns.pop(tid, None)
            else:
                self.txns[tid] = txn
        if n:
            log.info("loaded %d transactional ids from %d records of %s", len(self.txns), n, TOPIC)

    def has_log(self) -> bool:
        """Whether ``__transaction_state`` exists (always True without storage)."""
        return self.log is None or self.log.exists()

    def ensure_topic(self) -> bool:
        """Create ``__transaction_state`` if missing (Kafka does at FindCoordinator for a transactional id);
        False when it cannot (a failed disk)."""
        if self.log is None:
            return True
        try:
            self.log.ensure_topic()
        except TxnLogError as exc:
            log.warning("cannot create %s: %s", TOPIC, exc)
            return False
        return True

    # -- durable changes ------------------------------------------------------------------------------
    def _persist(self, txn: TxnMetadata, new: TxnMetadata) -> bool:
        """Write ``new`` as the id's metadata, then make it current; False (nothing changed) when the write
        failed."""
        new.last_update_ms = self.scheduler.now_ms()
        if self.log is not None:
            try:
                self.log.append([(encode_key(new.transactional_id), encode_value(new))])
            except TxnLogError as exc:
                log.warning("transactional id %s: %s", new.transactional_id, exc)
                return False
        for f in msgspec.structs.fields(TxnMetadata):
            if f.name not in ("pending", "markers_failed"):
                setattr(txn, f.name, getattr(new, f.name))
        if self.log is not None and self.log.compaction_due(len(self.txns)):
            self.log.compact(list(self.txns.values()))
        return True

    @staticmethod
    def _copy(txn: TxnMetadata) -> TxnMetadata:
        return msgspec.structs.replace(txn, partitions=set(txn.partitions), pending=False, markers_failed=False)

    def _bump(self, new: TxnMetadata) -> None:
        """The next epoch, or a new producer id at epoch 0 when the epoch is exhausted."""
        new.last_producer_id, new.last_producer_epoch = new.producer_id, new.producer_epoch
        if _exhausted(new.producer_epoch):
            new.producer_id, new.producer_epoch = self.allocate_producer_id(), 0
        else:
            new.producer_epoch += 1

    # -- InitProducerId --------------------------------------------------------------------------------
    def init_producer_id(
        self, tid: str, timeout_ms: int, expected_pid: int = NO_PRODUCER_ID, expected_epoch: int = NO_EPOCH
    ) -> InitResult:
        if not tid:
            return InitResult(errors.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitResult(errors.INVALID_TRANSACTION_TIMEOUT)
        txn = self.txns.get(tid)
        if txn is None:
            txn = TxnMetadata(tid, self.allocate_producer_id(), NO_EPOCH, timeout_ms)
            new = self._copy(txn)
            new.producer_epoch = 0
            move(new, TxnState.EMPTY, TxnEvent.INIT)
            if not self._persist(txn, new):
                return InitResult(errors.NOT_COORDINATOR)
            self.txns[tid] = txn
            return InitResult(0, txn.producer_id, txn.producer_epoch)
        if txn.pending:
            return InitResult(errors.CONCURRENT_TRANSACTIONS)
        if expected_pid != NO_PRODUCER_ID:
            current = (txn.producer_id, txn.producer_epoch)
            last = (txn.last_producer_id, txn.last_producer_epoch)
            if (expected_pid, expected_epoch) not in (current, last):
                return InitResult(errors.PRODUCER_FENCED)
            if (expected_pid, expected_epoch) == last and txn.state is TxnState.EMPTY:
                # a retry of the InitProducerId that already bumped: the same answer again
                return InitResult(0, txn.producer_id, txn.producer_epoch)
        state = txn.state
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD):
            return InitResult(errors.CONCURRENT_TRANSACTIONS)
        if state is TxnState.ONGOING:
            # a new incarnation of the producer: fence the old one's transaction and abort it; the caller
            # retries and gets its epoch once the abort is complete
            self._abort(txn, TxnEvent.FENCE)
            return InitResult(errors.CONCURRENT_TRANSACTIONS)
        new = self._copy(txn)
        self._bump(new)
        new.timeout_ms = timeout_ms
        new.partitions.clear()
        new.start_ms = -1
        move(new, TxnState.EMPTY, TxnEvent.INIT)
        if not self._persist(txn, new):
            return InitResult(errors.NOT_COORDINATOR)
        return InitResult(0, txn.producer_id, txn.producer_epoch)

    # -- adding partitions -------------------------------------------------------------------------------
    def _check_producer(
        self, tid: str, pid: int, epoch: int, *, tv2_retry: bool = False
    ) -> tuple[int, TxnMetadata | None]:
        if not tid:
            return errors.INVALID_REQUEST, None
        txn = self.txns.get(tid)
        if (
            txn is not None
            and tv2_retry
            and pid == txn.last_producer_id != txn.producer_id
            and epoch == txn.last_producer_epoch
        ):
            # the retry of an EndTxn whose bump moved the producer to a new id (its epoch was exhausted)
            return (errors.CONCURRENT_TRANSACTIONS if txn.pending else 0), txn
        if txn is None or txn.producer_id != pid:
            return errors.INVALID_PRODUCER_ID_MAPPING, txn
        if epoch != txn.producer_epoch and not (tv2_retry and epoch == txn.producer_epoch - 1):
            return errors.PRODUCER_FENCED, txn
        if txn.pending:
            return errors.CONCURRENT_TRANSACTIONS, txn
        return 0, txn

    def add_partitions(
        self, tid: str, pid: int, epoch: int, partitions: Iterable[tuple[str, int]], client_tv: int | None = None
    ) -> int:
        """Add the partitions to the producer's transaction; 0 or the error for all of them."""
        err, txn = self._check_producer(tid, pid, epoch)
        if err:
            return err
        assert txn is not None
        if txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return errors.CONCURRENT_TRANSACTIONS
        if txn.state not in (TxnState.EMPTY, TxnState.ONGOING, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            return errors.INVALID_TXN_STATE
        wanted = set(partitions)
        if txn.state is TxnState.ONGOING and wanted <= txn.partitions:
            return 0  # nothing new: no write, as Kafka answers a retried AddPartitionsToTxn
        if len(txn.partitions | wanted) > MAX_PARTITIONS_PER_TXN:
            return errors.INVALID_REQUEST
        new = self._copy(txn)
        if txn.state is not TxnState.ONGOING:
            new.partitions = set()
            new.start_ms = self.scheduler.now_ms()
        new.partitions |= wanted
        if client_tv is not None:
            new.client_tv = client_tv
        move(new, TxnState.ONGOING, TxnEvent.ADD)
        if not self._persist(txn, new):
            return errors.NOT_COORDINATOR
        return 0

    def verify_partitions(
        self, tid: str, pid: int, epoch: int, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """AddPartitionsToTxn v4+ verify_only: for each partition, NONE when it is in the producer's ongoing
        transaction, INVALID_TXN_STATE when not, or the producer's error."""
        parts = list(partitions)
        err, txn = self._check_producer(tid, pid, epoch)
        if err:
            return dict.fromkeys(parts, err)
        assert txn is not None
        ongoing = txn.state is TxnState.ONGOING
        return {tp: 0 if ongoing and tp in txn.partitions else errors.INVALID_TXN_STATE for tp in parts}

    def produce_check(
        self, tid: str | None, pid: int, epoch: int, topic: str, partition: int, add_implicitly: bool
    ) -> int:
        """May a transactional batch go to the partition? Under TV2 (Produce v12+) the partition joins the
        transaction; otherwise it must already be in it (Kafka's verification, KIP-890 part 1). The error is
        the one Produce answers."""
        if tid is None:
            return errors.INVALID_TXN_STATE
        if add_implicitly:
            err = self.add_partitions(tid, pid, epoch, [(topic, partition)], client_tv=2)
        else:
            err = self.verify_partitions(tid, pid, epoch, [(topic, partition)])[(topic, partition)]
        if err in (errors.PRODUCER_FENCED, errors.INVALID_PRODUCER_EPOCH):
            return errors.INVALID_PRODUCER_EPOCH  # what Produce answers for a stale epoch
        if err in (errors.CONCURRENT_TRANSACTIONS, errors.NOT_COORDINATOR, errors.COORDINATOR_NOT_AVAILABLE):
            # retriable for every client version, as Kafka maps verification errors for Produce
            return errors.NOT_ENOUGH_REPLICAS
        return err

    def add_offsets(self, tid: str, pid: int, epoch: int, group_id: str) -> int:
        """AddOffsetsToTxn: the group's partition of ``__consumer_offsets`` joins the transaction."""
        return self.add_partitions(tid, pid, epoch, [(OFFSETS_TOPIC, self.offsets_partition(group_id))])

    def offsets_partition(self, group_id: str) -> int:
        """The group's partition of ``__consumer_offsets``, as the group coordinator writes it."""
        groups = self.groups()
        group_log = getattr(getattr(groups, "store", None), "log", None)
        if group_log is None:
            return 0
        return group_log.partition_for(group_id)

    def offset_commit_check(self, tid: str, pid: int, epoch: int, group_id: str, add_implicitly: bool) -> int:
        """TxnOffsetCommit: the group's offsets partition must be in the transaction (TV1: AddOffsetsToTxn
        first; TxnOffsetCommit v5+ adds it, KIP-890)."""
        tp = (OFFSETS_TOPIC, self.offsets_partition(group_id))
        if add_implicitly:
            return self.add_partitions(tid, pid, epoch, [tp], client_tv=2)
        return self.verify_partitions(tid, pid, epoch, [tp])[tp]

    # -- EndTxn -----------------------------------------------------------------------------------------
    def end_txn(self, tid: str, pid: int, epoch: int, commit: bool, tv2: bool, cb: Callable[[EndResult], None]) -> None:
        """Answers through ``cb``: at once for an error or a retry, else once the markers are written."""
        err, txn = self._check_producer(tid, pid, epoch, tv2_retry=tv2)
        if err:
            return cb(EndResult(err))
        assert txn is not None
        # TV2: the client did not see the bump of its EndTxn
        retry = epoch != txn.producer_epoch or pid != txn.producer_id
        state = txn.state
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        preparing = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if state is done and (not tv2 or retry or not commit):
            if not retry and tv2 and not commit:
                return self._abort_empty(txn, cb)
            return cb(EndResult(0, txn.producer_id, txn.producer_epoch))
        if state is preparing:
            return cb(EndResult(errors.CONCURRENT_TRANSACTIONS))
        if retry:
            # the previous epoch may only retry the EndTxn that bumped it: the other outcome is a wrong move
            finished = (
                TxnState.COMPLETE_COMMIT,
                TxnState.COMPLETE_ABORT,
                TxnState.PREPARE_COMMIT,
                TxnState.PREPARE_ABORT,
            )
            return cb(EndResult(errors.INVALID_TXN_STATE if state in finished else errors.PRODUCER_FENCED))
        if state is TxnState.ONGOING:
            new = self._copy(txn)
            if tv2:
                self._bump(new)
                new.client_tv = 2
            move(new, preparing, TxnEvent.END)
            if not self._persist(txn, new):
                return cb(EndResult(errors.NOT_COORDINATOR))
            self._end_waiters.setdefault(tid, []).append(cb)
            self._write_markers(txn)
            return None
        if tv2 and not commit and state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            return self._abort_empty(txn, cb)
        return cb(EndResult(errors.INVALID_TXN_STATE))

    def _abort_empty(self, txn: TxnMetadata, cb) -> None:
        """TV2: aborting with nothing ongoing bumps the epoch (the client may abort at any time)."""
        new = self._copy(txn)
        self._bump(new)
        new.client_tv = 2
        new.partitions.clear()
        move(new, TxnState.COMPLETE_ABORT, TxnEvent.END)
        if not self._persist(txn, new):
            return cb(EndResult(errors.NOT_COORDINATOR))
        return cb(EndResult(0, txn.producer_id, txn.producer_epoch))

    # -- completing: markers -----------------------------------------------------------------------------
    def _abort(self, txn: TxnMetadata, event: TxnEvent) -> None:
        """Fence the producer (a bumped epoch) and abort its ongoing transaction (timeout, new incarnation)."""
        new = self._copy(txn)
        if txn.state is TxnState.ONGOING:
            if not _exhausted(new.producer_epoch):
                # the markers carry the new epoch, so the fenced producer's late batches are refused
                new.last_producer_id, new.last_producer_epoch = new.producer_id, new.producer_epoch
                new.producer_epoch += 1
            if event is TxnEvent.FENCE:
                move(new, TxnState.PREPARE_EPOCH_FENCE, TxnEvent.FENCE)
        move(new, TxnState.PREPARE_ABORT, TxnEvent.FENCE if event is TxnEvent.FENCE else TxnEvent.TIMEOUT)
        if not self._persist(txn, new):
            return
        self._write_markers(txn)

    def _write_markers(self, txn: TxnMetadata) -> None:
        commit = txn.state is TxnState.PREPARE_COMMIT
        txn.pending = True
        targets = []
        groups_offsets = False
        for topic, partition in sorted(txn.partitions):
            if topic == OFFSETS_TOPIC:
                groups_offsets = True  # the group coordinator applies its staged offsets once the markers are in
            targets.append((topic, partition))
        pid, epoch = txn.producer_id, txn.producer_epoch
        if txn.tv2 and epoch == 0 and txn.last_producer_id not in (NO_PRODUCER_ID, pid):
            # this EndTxn's bump exhausted the epoch and moved the producer to a new id: the transaction's
            # batches are the previous id's, so its markers are too, one epoch above them
            pid, epoch = txn.last_producer_id, txn.last_producer_epoch + 1

        def done(failure: BaseException | None) -> None:
            if failure is not None:
                # Kafka retries marker writes until they succeed; kafkawire retries at the next check
                log.warning(
                    "transactional id %s: writing %s markers failed: %s; retrying later",
                    txn.transactional_id,
                    "COMMIT" if commit else "ABORT",
                    failure,
                )
                txn.pending = False
                txn.markers_failed = True
                # the outcome was decided when Prepare* was written (Kafka answers EndTxn then): the client is
                # told, and a new transaction meets CONCURRENT_TRANSACTIONS until the markers are in
                self._answer_end_waiters(txn)
                return
            if groups_offsets:
                coord = self.groups()
                if coord is not None:
                    # offsets were staged under the producer id of the transaction; a TV2 bump past the
                    # last epoch moved the producer to a new id, the previous one is in last_producer_id
                    for staged_pid in {pid, txn.last_producer_id} - {NO_PRODUCER_ID}:
                        try:
                            coord.complete_transaction(staged_pid, commit)
                        except Exception:  # the offsets are applied in memory; only their record is missing
                            log.exception(
                                "transactional id %s: writing its offsets to the group failed", txn.transactional_id
                            )
            self._complete(txn, commit)

        self.markers.write(pid, epoch, commit, targets, done)

    def _complete(self, txn: TxnMetadata, commit: bool) -> None:
        new = self._copy(txn)
        new.partitions.clear()
        move(new, TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT, TxnEvent.MARKERS_WRITTEN)
        ok = self._persist(txn, new)
        txn.pending = False
        txn.markers_failed = not ok  # the markers are written; Complete* is written again at the next check
        self._answer_end_waiters(txn)

    def _answer_end_waiters(self, txn: TxnMetadata) -> None:
        for cb in self._end_waiters.pop(txn.transactional_id, []):
            cb(EndResult(0, txn.producer_id, txn.producer_epoch))

    # -- periodic checks ---------------------------------------------------------------------------------
    def abort_timed_out(self) -> int:
        """Abort Ongoing transactions older than their timeout (with an epoch bump, as Kafka does); retry
        markers that failed. Returns how many were aborted."""
        now = self.scheduler.now_ms()
        aborted = 0
        for txn in list(self.txns.values()):
            if txn.pending:
                continue
            if txn.markers_failed and txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._write_markers(txn)
            elif txn.state is TxnState.ONGOING and now - txn.start_ms > txn.timeout_ms:
                log.info(
                    "transactional id %s: transaction of producer %d epoch %d timed out after %d ms; aborting",
                    txn.transactional_id,
                    txn.producer_id,
                    txn.producer_epoch,
                    txn.timeout_ms,
                )
                self._abort(txn, TxnEvent.TIMEOUT)
                aborted += 1
        return aborted

    def expire_ids(self) -> int:
        """Forget ids idle for ``transactional.id.expiration.ms`` with no transaction under way."""
        now = self.scheduler.now_ms()
        gone = [
            tid
            for tid, txn in self.txns.items()
            if not txn.pending
            and txn.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
            and now - txn.last_update_ms >= self.config.id_expiration_ms
        ]
        if self.log is not None and gone:
            try:
                self.log.append_by_partition([(encode_key(tid), None) for tid in gone])
            except TxnLogError as exc:  # kept; tried again at the next check
                log.warning("expiring transactional ids: %s", exc)
                return 0
        for tid in gone:
            move(self.txns.pop(tid), TxnState.DEAD, TxnEvent.EXPIRED)
        if gone:
            log.info("expired %d transactional ids", len(gone))
        return len(gone)

    # -- DescribeTransactions / ListTransactions ----------------------------------------------------------
    def describe(self, tid: str) -> TxnMetadata | None:
        return self.txns.get(tid)

    def list_transactions(
        self, states: list[str], producer_ids: list[int], duration_ms: int = -1, pattern: str | None = None
    ) -> tuple[int, list[str], list[TxnMetadata]]:
        """(error, unknown state filters, matching transactions)."""
        known = {s.value for s in TxnState}
        unknown = [s for s in states if s not in known]
        wanted = {s for s in states if s in known}
        pids = set(producer_ids)
        regex = None
        if pattern:
            try:
                regex = re.compile(pattern)
            except re.error:
                return errors.INVALID_REGULAR_EXPRESSION, unknown, []
        now = self.scheduler.now_ms()
        out = []
        for tid, txn in self.txns.items():
            if states and txn.state.value not in wanted:
                continue
            if pids and txn.producer_id not in pids:
                continue
            if duration_ms >= 0 and now - txn.start_ms <= duration_ms:
                continue
            if regex is not None and regex.fullmatch(tid) is None:
                continue
            out.append(txn)
            if len(out) >= LIST_LIMIT:
                break
        return 0, unknown, out
