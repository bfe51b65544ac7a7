"""Transaction states (Kafka's ``TransactionState``), their legal moves, and the one place that writes them.

A transactional id's life, as Kafka's coordinator runs it:

    Empty / CompleteCommit / CompleteAbort --AddPartitionsToTxn, AddOffsetsToTxn, Produce (TV2)--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --markers written--> CompleteCommit
    Ongoing --EndTxn(abort), timeout--> PrepareAbort --markers written--> CompleteAbort
    Ongoing --InitProducerId of a new incarnation--> PrepareEpochFence --> PrepareAbort
    Empty / Complete* --InitProducerId--> Empty (epoch bumped)
    Empty / Complete* --transactional.id.expiration.ms--> Dead

``move`` is the only writer of ``TxnMetadata.state``; a move the table lacks raises ``IllegalTransition``
naming the transactional id, the states and the event. The numeric ids are the ``transaction_status``
byte of Kafka's ``TransactionLogValue`` records in ``__transaction_state``.
"""

from __future__ import annotations

from enum import StrEnum

from ..transitions import Transitions


class TxnState(StrEnum):
    """Kafka's names, as DescribeTransactions and ListTransactions answer them."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    @property
    def status(self) -> int:
        """The ``transaction_status`` byte of Kafka's TransactionLogValue."""
        return _STATUS[self]

    @classmethod
    def from_status(cls, status: int) -> TxnState:
        return _BY_STATUS[status]


_STATUS = {s: i for i, s in enumerate(TxnState)}  # Kafka's ids follow the declaration order above
_BY_STATUS = {i: s for s, i in _STATUS.items()}


class TxnEvent(StrEnum):
    LOADED = "replay of __transaction_state"
    INIT = "InitProducerId"
    ADD = "partitions added (AddPartitionsToTxn, AddOffsetsToTxn, Produce under TV2)"
    END = "EndTxn"
    TIMEOUT = "transaction.timeout.ms passed"
    FENCE = "InitProducerId of a new incarnation fenced an ongoing transaction"
    MARKERS_WRITTEN = "every partition has its COMMIT/ABORT marker"
    EXPIRED = "transactional.id.expiration.ms passed"


_S = TxnState
_COMPLETE = (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
TABLE = Transitions(
    "transaction",
    [
        (_COMPLETE, TxnEvent.INIT, (_S.EMPTY,)),
        (_COMPLETE + (_S.ONGOING,), TxnEvent.ADD, (_S.ONGOING,)),
        ((_S.ONGOING,), TxnEvent.END, (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)),
        # TV2: an abort of an empty transaction only bumps the epoch (nothing to mark)
        ((_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT), TxnEvent.END, (_S.COMPLETE_ABORT,)),
        ((_S.ONGOING,), TxnEvent.TIMEOUT, (_S.PREPARE_ABORT,)),
        ((_S.ONGOING,), TxnEvent.FENCE, (_S.PREPARE_EPOCH_FENCE,)),
        ((_S.PREPARE_EPOCH_FENCE,), TxnEvent.FENCE, (_S.PREPARE_ABORT,)),
        ((_S.PREPARE_COMMIT,), TxnEvent.MARKERS_WRITTEN, (_S.COMPLETE_COMMIT,)),
        ((_S.PREPARE_ABORT,), TxnEvent.MARKERS_WRITTEN, (_S.COMPLETE_ABORT,)),
        (_COMPLETE, TxnEvent.EXPIRED, (_S.DEAD,)),
    ],
)


def move(txn, to_state: TxnState, event: TxnEvent) -> None:
    """Set ``txn.state`` (the only writer), refusing a move the table lacks."""
    TABLE.check(txn.transactional_id, txn.state, event, to_state)
    txn._state = to_state
