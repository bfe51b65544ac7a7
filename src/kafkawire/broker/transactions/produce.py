"""Produce's transactional check: may a transactional batch be appended to this partition?

Kafka 4.4 asks its transaction coordinator before appending a transactional batch (KIP-890): a Produce
v12+ (Transactions V2) adds the partition to the producer's transaction itself; an older one must find the
partition already added (AddPartitionsToTxn), else INVALID_TXN_STATE and nothing is appended.
"""

from __future__ import annotations

import struct

from kafkawire.protocol import errors
from kafkawire.protocol.records.batch import PRODUCER_ID_OFFSET
from kafkawire.protocol.records.validation import Refusal

_PID_EPOCH = struct.Struct(">qh")  # producer id and epoch, side by side in the v2 batch header
IMPLICIT_ADD_SINCE = 12  # Produce v12+: partitions join the transaction implicitly (TV2)


def check(
    coordinator, transactional_id: str | None, version: int, topic: str, partition: int, records, found
) -> Refusal | None:
    """None when the partition's batches may be appended, else why not (the Produce answer)."""
    if not coordinator.has_log():
        # Kafka's coordinator has no partition of __transaction_state before the first FindCoordinator for a
        # transactional id creates the topic: verification then fails as with an unavailable coordinator
        return Refusal(
            errors.NOT_ENOUGH_REPLICAS,
            "transactional batch before __transaction_state exists",
            answer="cannot verify that the partition is part of the transaction: no transaction "
            "coordinator is available",
        )
    frame = found[0]
    pid, epoch = _PID_EPOCH.unpack_from(records, frame.position + PRODUCER_ID_OFFSET)
    code = coordinator.produce_check(
        transactional_id, pid, epoch, topic, partition, add_implicitly=version >= IMPLICIT_ADD_SINCE
    )
    if not code:
        return None
    answer = None
    if code == errors.INVALID_TXN_STATE:
        if version >= 11:  # KIP-1050: a client of Produce v11+ aborts the transaction and goes on
            code = errors.TRANSACTION_ABORTABLE
        else:
            answer = NOT_ADDED  # Kafka's words, from v8 (the first version with error_message)
    return Refusal(
        code,
        f"transactional batch of producer {pid} epoch {epoch} to {topic}-{partition} refused "
        f"by the transaction coordinator: {errors.error_for(code).name}",
        answer=answer,
    )


NOT_ADDED = "Partition was not added to the transaction"
