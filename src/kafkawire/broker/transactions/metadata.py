"""One transactional id's metadata, as Kafka's ``TransactionMetadata`` keeps it."""

from __future__ import annotations

import msgspec

from .states import TxnState

NO_PRODUCER_ID = -1
NO_EPOCH = -1
MAX_EPOCH = 32767  # Short.MAX_VALUE: an epoch that cannot be bumped again takes a new producer id


class TxnMetadata(msgspec.Struct, eq=False):
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    _state: TxnState = TxnState.EMPTY
    # the producer id and epoch before the last bump (KIP-360: a producer retrying InitProducerId with them
    # is the same incarnation, not a zombie)
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_EPOCH
    # the id a TV2 epoch bump past MAX_EPOCH moved to (written before the markers, so a restart keeps it)
    next_producer_id: int = NO_PRODUCER_ID
    partitions: set[tuple[str, int]] = msgspec.field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    # 2 when the client speaks Transactions V2 (EndTxn v5+): every EndTxn bumps the epoch, Produce adds
    # partitions implicitly; else 0 (Kafka writes 0 or 1 for TV1 clients; kafkawire treats both alike)
    client_tv: int = 0
    # a transaction whose markers are being written (PrepareCommit/PrepareAbort) or whose change is not yet
    # durable: every request but DescribeTransactions answers CONCURRENT_TRANSACTIONS meanwhile
    pending: bool = False
    markers_failed: bool = False  # a marker or the Complete* record could not be written: retried later

    @property
    def state(self) -> TxnState:
        return self._state

    @property
    def tv2(self) -> bool:
        return self.client_tv >= 2

    def sorted_partitions(self) -> list[tuple[str, list[int]]]:
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(self.partitions):
            by_topic.setdefault(t, []).append(p)
        return list(by_topic.items())
