"""Transactions: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions,
ListTransactions. Thin handlers over the transaction coordinator (``kafkawire.broker.transactions``,
reached as ``broker.txn_coordinator``); InitProducerId is in ``producers.py``, FindCoordinator in
``groups.py``.

Versions: Kafka 4.4's. PRODUCER_FENCED (KIP-588) is answered from InitProducerId v4, AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn v2; older versions get INVALID_PRODUCER_EPOCH for it, as
Kafka converts it. AddPartitionsToTxn v4+ is the broker-to-broker form (KIP-890): several transactions per
request, each either added or only verified. EndTxn v5+ is Transactions V2: the epoch is bumped by every
EndTxn and answered. TxnOffsetCommit v5+ adds the group's offsets partition to the transaction itself;
v6+ names topics by id.
"""

from __future__ import annotations

import asyncio

from kafkawire.protocol import errors
from kafkawire.protocol.messages import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    DescribeTransactionsResponse,
    EndTxnResponse,
    ListTransactionsResponse,
    TxnOffsetCommitResponse,
)

from ..dispatch import handles
from ..groups import CommitPartition
from ._common import find_topic

APT = AddPartitionsToTxnResponse
# kafkawire's bound on the transactions of one broker-to-broker AddPartitionsToTxn (Kafka sets none; its brokers
# send the transactions of the produce requests waiting on one coordinator): more is INVALID_REQUEST
MAX_TRANSACTIONS_PER_REQUEST = 1000


def fenced(code: int, version: int, since: int) -> int:
    """PRODUCER_FENCED as versions before ``since`` know it."""
    return errors.INVALID_PRODUCER_EPOCH if code == errors.PRODUCER_FENCED and version < since else code


# -- AddPartitionsToTxn --------------------------------------------------------------------------------
def _topic_results(parts: dict[tuple[str, int], int], order: list) -> list:
    out = []
    for t in order:
        out.append(
            APT.AddPartitionsToTxnTopicResult(
                name=t.name,
                results_by_partition=[
                    APT.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=parts[(t.name, p)])
                    for p in t.partitions
                ],
            )
        )
    return out


def _add(broker, tid, pid, epoch, topics, verify_only: bool, version: int) -> dict[tuple[str, int], int]:
    coord = broker.txn_coordinator
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    if coord is None:
        return dict.fromkeys(wanted, errors.COORDINATOR_NOT_AVAILABLE)
    if verify_only:
        # a partition outside the transaction: Kafka 4.4 answers TRANSACTION_ABORTABLE (KIP-1050) at v4 too
        return {
            tp: errors.TRANSACTION_ABORTABLE if code == errors.INVALID_TXN_STATE else code
            for tp, code in coord.verify_partitions(tid, pid, epoch, wanted).items()
        }
    # partitions the broker does not have fail alone; the others are not attempted (Kafka's answer)
    unknown = set()
    for name, p in wanted:
        meta = find_topic(broker, name)
        if meta is None or not 0 <= p < meta.partitions:
            unknown.add((name, p))
    if unknown:
        return {
            tp: errors.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else errors.OPERATION_NOT_ATTEMPTED for tp in wanted
        }
    code = fenced(coord.add_partitions(tid, pid, epoch, wanted), version, 2)
    return dict.fromkeys(wanted, code)


@handles("AddPartitionsToTxn", 0, 5)
def add_partitions_to_txn(broker, ctx, body):
    v = ctx.api_version
    if v < 4:
        parts = _add(
            broker,
            body.v3_and_below_transactional_id,
            body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch,
            body.v3_and_below_topics,
            False,
            v,
        )
        return APT(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(parts, body.v3_and_below_topics))
    if len(body.transactions) > MAX_TRANSACTIONS_PER_REQUEST:
        return APT(throttle_time_ms=0, error_code=errors.INVALID_REQUEST, results_by_transaction=[])
    results = []
    for txn in body.transactions:
        parts = _add(broker, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics, txn.verify_only, v)
        results.append(
            APT.AddPartitionsToTxnResult(
                transactional_id=txn.transactional_id, topic_results=_topic_results(parts, txn.topics)
            )
        )
    return APT(throttle_time_ms=0, error_code=0, results_by_transaction=results)


# -- AddOffsetsToTxn ----------------------------------------------------------------------------------
@handles("AddOffsetsToTxn", 0, 4)
def add_offsets_to_txn(broker, ctx, body):
    coord = broker.txn_coordinator
    if coord is None:
        code = errors.COORDINATOR_NOT_AVAILABLE
    else:
        # the offsets topic must exist to be part of a transaction (Kafka creates it on first use too)
        broker.current_group_coordinator().ensure_offsets_topic()
        code = coord.add_offsets(body.transactional_id, body.producer_id, body.producer_epoch, body.group_id)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=fenced(code, ctx.api_version, 2))


# -- EndTxn ------------------------------------------------------------------------------------------
@handles("EndTxn", 0, 5)
async def end_txn(broker, ctx, body):
    v = ctx.api_version
    coord = broker.txn_coordinator
    if coord is None:
        return EndTxnResponse(
            throttle_time_ms=0, error_code=errors.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1
        )
    fut = asyncio.get_running_loop().create_future()

    def answer(result):
        if not fut.done():
            fut.set_result(result)

    coord.end_txn(body.transactional_id, body.producer_id, body.producer_epoch, bool(body.committed), v >= 5, answer)
    result = await fut
    code = fenced(result.error, v, 2)
    if v >= 5 and code == 0:
        return EndTxnResponse(
            throttle_time_ms=0, error_code=0, producer_id=result.producer_id, producer_epoch=result.producer_epoch
        )
    return EndTxnResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)


# -- TxnOffsetCommit ------------------------------------------------------------------------------------
@handles("TxnOffsetCommit", 0, 6)
def txn_offset_commit(broker, ctx, body):
    v = ctx.api_version
    R = TxnOffsetCommitResponse
    coord = broker.txn_coordinator
    groups = broker.current_group_coordinator()

    def answer(codes):
        return R(
            throttle_time_ms=0,
            topics=[
                R.TxnOffsetCommitResponseTopic(
                    name=t.name,
                    topic_id=t.topic_id,
                    partitions=[
                        R.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=codes[i][j])
                        for j, p in enumerate(t.partitions)
                    ],
                )
                for i, t in enumerate(body.topics)
            ],
        )

    def everywhere(code):
        # a stale epoch is INVALID_PRODUCER_EPOCH at every version here: Kafka's group coordinator learns it
        # from the transaction verification, which speaks the older code
        code = errors.INVALID_PRODUCER_EPOCH if code == errors.PRODUCER_FENCED else code
        return answer([[code] * len(t.partitions) for t in body.topics])

    if coord is None:
        return everywhere(errors.COORDINATOR_NOT_AVAILABLE)
    if not body.group_id:
        return everywhere(errors.INVALID_GROUP_ID)
    code = coord.offset_commit_check(
        body.transactional_id, body.producer_id, body.producer_epoch, body.group_id, add_implicitly=v >= 5
    )
    if code == errors.INVALID_TXN_STATE and v >= 4:  # KIP-1050, as Kafka 4.4 answers v4
        code = errors.TRANSACTION_ABORTABLE
    if code:
        return everywhere(code)
    if v >= 3 and body.group_id not in groups.groups and body.generation_id_or_member_epoch >= 0:
        # a generation of a group that does not exist
        return everywhere(errors.GROUP_ID_NOT_FOUND if v >= 6 else errors.ILLEGAL_GENERATION)
    if v >= 3:  # KIP-447: the member must be of the group's current generation
        code = groups.validate_txn_offset_commit(
            body.group_id, body.generation_id_or_member_epoch, body.member_id, body.group_instance_id
        )
        if code:
            return everywhere(code)
    limit = groups.config.offset_metadata_max_bytes
    codes, staged = [], []
    by_id = v >= 6  # topics named by id (KIP-848's follow-up, as OffsetCommit v10)
    for t in body.topics:
        meta = find_topic(broker, None, t.topic_id) if by_id else find_topic(broker, t.name)
        row = []
        for p in t.partitions:
            metadata = p.committed_metadata if p.committed_metadata is not None else ""
            if meta is None:
                row.append(errors.UNKNOWN_TOPIC_ID if by_id else errors.UNKNOWN_TOPIC_OR_PARTITION)
            elif not 0 <= p.partition_index < meta.partitions:
                row.append(errors.UNKNOWN_TOPIC_OR_PARTITION)
            elif len(metadata.encode("utf-8")) > limit:
                row.append(errors.OFFSET_METADATA_TOO_LARGE)
            else:
                row.append(0)
                staged.append(
                    CommitPartition(
                        meta.name,
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch if v >= 2 else -1,
                        metadata,
                    )
                )
        codes.append(row)
    code = groups.stage_txn_offsets(body.producer_id, body.group_id, staged, body.producer_epoch) if staged else 0
    if code:
        return everywhere(code)
    return answer(codes)


# -- DescribeTransactions / ListTransactions ------------------------------------------------------------
@handles("DescribeTransactions", 0, 0)
def describe_transactions(broker, ctx, body):
    R = DescribeTransactionsResponse
    coord = broker.txn_coordinator
    states = []
    for tid in body.transactional_ids:
        txn = coord.describe(tid) if coord is not None else None
        if txn is None:
            code = errors.COORDINATOR_NOT_AVAILABLE if coord is None else errors.TRANSACTIONAL_ID_NOT_FOUND
            states.append(
                R.TransactionState(
                    error_code=code,
                    transactional_id=tid,
                    transaction_state="",
                    transaction_timeout_ms=0,
                    transaction_start_time_ms=0,
                    producer_id=0,
                    producer_epoch=0,
                    topics=[],
                )
            )
            continue
        states.append(
            R.TransactionState(
                error_code=0,
                transactional_id=tid,
                transaction_state=txn.state.value,
                transaction_timeout_ms=txn.timeout_ms,
                transaction_start_time_ms=txn.start_ms,
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                topics=[R.TopicData(topic=t, partitions=ps) for t, ps in txn.sorted_partitions()],
            )
        )
    return R(throttle_time_ms=0, transaction_states=states)


@handles("ListTransactions", 0, 2)
def list_transactions(broker, ctx, body):
    R = ListTransactionsResponse
    v = ctx.api_version
    coord = broker.txn_coordinator
    if coord is None:
        return R(
            throttle_time_ms=0,
            error_code=errors.COORDINATOR_NOT_AVAILABLE,
            unknown_state_filters=[],
            transaction_states=[],
        )
    code, unknown, txns = coord.list_transactions(
        list(body.state_filters),
        list(body.producer_id_filters),
        body.duration_filter if v >= 1 else -1,
        body.transactional_id_pattern if v >= 2 else None,
    )
    return R(
        throttle_time_ms=0,
        error_code=code,
        unknown_state_filters=unknown,
        transaction_states=[
            R.TransactionState(
                transactional_id=t.transactional_id, producer_id=t.producer_id, transaction_state=t.state.value
            )
            for t in txns
        ],
    )
