"""Transaction error handling of kafkawire's producer against a scripted broker (tests/client/fakebroker.py).

The broker finalizes no ``transaction.version`` (as Kafka 3.x), so the producer speaks version 1:
AddPartitionsToTxn before a partition's first batch, AddOffsetsToTxn, EndTxn at v4 at most, Produce at v11
at most. The coordinator's answers are scripted per request; what the producer sends next is checked from
the recorded requests: retries of CONCURRENT_TRANSACTIONS and of a moved coordinator, abortable errors
(commit raises, abort recovers, the next transaction works) and fatal ones (the producer is done).
"""

from __future__ import annotations

import asyncio

import pytest

from kafkawire.client import AsyncProducer
from kafkawire.client.groups.membership import fit
from kafkawire.client.transactions import State
from kafkawire.protocol import ApiKey, KafkaError, errors as kerrors, message_class
from kafkawire.protocol.records import iter_batches

from .fakebroker import FakeBroker

TOPIC = "t"


class TxnBroker(FakeBroker):
    """One node that is the transaction and group coordinator; every transactional answer is scripted: a list
    of error codes per API, consumed in order (then 0)."""

    def __init__(self):
        super().__init__(topics={TOPIC: 2})
        self.script: dict[int, list[int]] = {}
        self.produced = 0
        for key, fn in {
            ApiKey.FIND_COORDINATOR: self.find,
            ApiKey.INIT_PRODUCER_ID: self.init_pid,
            ApiKey.ADD_PARTITIONS_TO_TXN: self.add_partitions,
            ApiKey.PRODUCE: self.produce,
            ApiKey.END_TXN: self.end_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: self.add_offsets,
            ApiKey.TXN_OFFSET_COMMIT: self.txn_offset_commit,
        }.items():
            self.handlers[int(key)] = fn

    def code(self, key) -> int:
        codes = self.script.get(int(key))
        return codes.pop(0) if codes else 0

    def sent(self, key) -> list:
        return [body for k, _, body in self.requests if k == int(key)]

    def versions(self, key) -> list[int]:
        return [v for k, v, _ in self.requests if k == int(key)]

    def order(self) -> list[str]:
        names = {
            int(ApiKey.ADD_PARTITIONS_TO_TXN): "add",
            int(ApiKey.PRODUCE): "produce",
            int(ApiKey.END_TXN): "end",
            int(ApiKey.ADD_OFFSETS_TO_TXN): "add_offsets",
            int(ApiKey.TXN_OFFSET_COMMIT): "offsets",
            int(ApiKey.INIT_PRODUCER_ID): "init",
        }
        return [names[k] for k, _, _ in self.requests if k in names]

    def find(self, header, body, version):
        cls = message_class("FindCoordinatorResponse")
        code = self.code(ApiKey.FIND_COORDINATOR)
        if version >= 4:
            return cls(
                coordinators=[
                    cls.Coordinator(
                        key=k, node_id=1, host="127.0.0.1", port=self.port, error_code=code, error_message=None
                    )
                    for k in body.coordinator_keys
                ]
            )
        return fit(cls, version, error_code=code, node_id=1, host="127.0.0.1", port=self.port)

    def init_pid(self, header, body, version):
        return message_class("InitProducerIdResponse")(
            error_code=self.code(ApiKey.INIT_PRODUCER_ID), producer_id=1000, producer_epoch=3
        )

    def add_partitions(self, header, body, version):
        cls = message_class("AddPartitionsToTxnResponse")
        code = self.code(ApiKey.ADD_PARTITIONS_TO_TXN)
        return cls(
            results_by_topic_v3_and_below=[
                cls.AddPartitionsToTxnTopicResult(
                    name=t.name,
                    results_by_partition=[
                        cls.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code)
                        for p in t.partitions
                    ],
                )
                for t in body.v3_and_below_topics
            ]
        )

    def produce(self, header, body, version):
        cls = message_class("ProduceResponse")
        code = self.code(ApiKey.PRODUCE)
        out = []
        for t in body.topic_data:
            parts = []
            for p in t.partition_data:
                parts.append(
                    cls.PartitionProduceResponse(
                        index=p.index,
                        error_code=code,
                        base_offset=self.produced if not code else -1,
                        log_append_time_ms=-1,
                        log_start_offset=0,
                        record_errors=[],
                        error_message=None,
                    )
                )
                self.produced += 1
            out.append(cls.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=parts))
        return cls(responses=out)

    def end_txn(self, header, body, version):
        return fit(
            message_class("EndTxnResponse"),
            version,
            error_code=self.code(ApiKey.END_TXN),
            producer_id=-1,
            producer_epoch=-1,
        )

    def add_offsets(self, header, body, version):
        return message_class("AddOffsetsToTxnResponse")(error_code=self.code(ApiKey.ADD_OFFSETS_TO_TXN))

    def txn_offset_commit(self, header, body, version):
        cls = message_class("TxnOffsetCommitResponse")
        code = self.code(ApiKey.TXN_OFFSET_COMMIT)
        return cls(
            topics=[
                cls.TxnOffsetCommitResponseTopic(
                    name=t.name,
                    partitions=[
                        cls.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ]
        )


def run(scenario, script: dict | None = None) -> TxnBroker:
    """``await scenario(broker)`` against a fresh scripted broker (``script``: {api key: [codes]}); the broker."""

    async def main():
        b = await TxnBroker().start()
        b.script.update({int(k): list(v) for k, v in (script or {}).items()})
        try:
            await scenario(b)
        finally:
            await b.close()
        return b

    return asyncio.run(main())


def producer(broker: TxnBroker) -> AsyncProducer:
    return AsyncProducer(broker.bootstrap, transactional_id="tx", linger_ms=1, max_block=10)


def test_init_retries_concurrent_transactions_and_a_moved_coordinator():
    async def scenario(b):
        async with producer(b) as p:
            await p.init_transactions()
            assert (p.producer_id, p.producer_epoch) == (1000, 3)
            assert p._txn.version == 1  # no finalized transaction.version

    b = run(
        scenario,
        {
            ApiKey.INIT_PRODUCER_ID: [
                kerrors.CONCURRENT_TRANSACTIONS,
                kerrors.COORDINATOR_LOAD_IN_PROGRESS,
                kerrors.NOT_COORDINATOR,
            ]
        },
    )
    inits = b.sent(ApiKey.INIT_PRODUCER_ID)
    assert len(inits) == 4
    assert all(r.transactional_id == "tx" and r.transaction_timeout_ms == 60000 for r in inits)
    # NOT_COORDINATOR: looked up again (key type 1: a transactional id)
    finds = b.sent(ApiKey.FIND_COORDINATOR)
    assert len(finds) == 2 and all(f.key_type == 1 for f in finds)


def test_partition_added_before_its_first_batch():
    async def scenario(b):
        async with producer(b) as p:
            await p.init_transactions()
            p.begin_transaction()
            fut = await p.send(TOPIC, b"v", partition=1)
            await p.commit_transaction()
            assert (await fut).offset == 0

    b = run(scenario, {ApiKey.ADD_PARTITIONS_TO_TXN: [kerrors.CONCURRENT_TRANSACTIONS]})
    assert b.order() == ["init", "add", "add", "produce", "end"]
    add = b.sent(ApiKey.ADD_PARTITIONS_TO_TXN)[-1]
    assert (add.v3_and_below_producer_id, add.v3_and_below_producer_epoch) == (1000, 3)
    assert [(t.name, t.partitions) for t in add.v3_and_below_topics] == [(TOPIC, [1])]
    assert max(b.versions(ApiKey.ADD_PARTITIONS_TO_TXN)) <= 3
    assert max(b.versions(ApiKey.PRODUCE)) <= 11
    assert max(b.versions(ApiKey.END_TXN)) <= 4
    assert b.sent(ApiKey.PRODUCE)[0].transactional_id == "tx"
    (end,) = b.sent(ApiKey.END_TXN)
    assert end.committed is True and (end.producer_id, end.producer_epoch) == (1000, 3)


def test_abortable_error_then_abort_then_a_new_transaction():
    async def scenario(b):
        async with producer(b) as p:
            await p.init_transactions()
            p.begin_transaction()
            fut = await p.send(TOPIC, b"v", partition=0)
            with pytest.raises(KafkaError) as failed:
                await p.commit_transaction()
            assert failed.value.code == kerrors.TOPIC_AUTHORIZATION_FAILED
            with pytest.raises(KafkaError):
                await fut  # the record was never written
            assert p._txn.state is State.ABORTABLE_ERROR
            with pytest.raises(KafkaError):
                await p.send(TOPIC, b"w", partition=0)  # nothing more until the abort
            await p.abort_transaction()
            assert p._txn.state is State.READY
            p.begin_transaction()
            fut = await p.send(TOPIC, b"x", partition=0)
            await p.commit_transaction()
            await fut

    b = run(scenario, {ApiKey.ADD_PARTITIONS_TO_TXN: [kerrors.TOPIC_AUTHORIZATION_FAILED]})
    # nothing was added in the failed transaction: its abort needs no EndTxn; the next one commits
    assert b.order() == ["init", "add", "add", "produce", "end"]
    assert [e.committed for e in b.sent(ApiKey.END_TXN)] == [True]


def test_refused_offsets_make_the_transaction_abortable():
    meta = {"group_id": "g", "member_id": "m-1", "generation": 7, "instance_id": None}

    async def scenario(b):
        async with producer(b) as p:
            await p.init_transactions()
            p.begin_transaction()
            with pytest.raises(KafkaError) as refused:
                await p.send_offsets_to_transaction({(TOPIC, 0): 42}, meta)
            assert refused.value.code == kerrors.ILLEGAL_GENERATION
            with pytest.raises(KafkaError):
                await p.commit_transaction()
            await p.abort_transaction()

    b = run(scenario, {ApiKey.TXN_OFFSET_COMMIT: [kerrors.ILLEGAL_GENERATION]})
    assert b.order() == ["init", "add_offsets", "offsets", "end"]
    (add,) = b.sent(ApiKey.ADD_OFFSETS_TO_TXN)
    assert add.group_id == "g"
    (commit,) = b.sent(ApiKey.TXN_OFFSET_COMMIT)
    assert (commit.group_id, commit.member_id, commit.generation_id_or_member_epoch) == ("g", "m-1", 7)
    assert [(t.name, [(q.partition_index, q.committed_offset) for q in t.partitions]) for t in commit.topics] == [
        (TOPIC, [(0, 42)])
    ]
    assert [e.committed for e in b.sent(ApiKey.END_TXN)] == [False]
    assert max(b.versions(ApiKey.TXN_OFFSET_COMMIT)) <= 4


@pytest.mark.parametrize("where", ["produce", "end_txn"])
@pytest.mark.parametrize("code", [kerrors.PRODUCER_FENCED, kerrors.INVALID_PRODUCER_EPOCH])
def test_fenced_is_fatal(where, code):
    async def scenario(b):
        async with producer(b) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send(TOPIC, b"v", partition=0)
            with pytest.raises(KafkaError) as fenced:
                await p.commit_transaction()
            # as Kafka's client: an old epoch means a newer producer with the same id took over
            assert fenced.value.code == kerrors.PRODUCER_FENCED
            assert p._txn.state is State.FATAL_ERROR
            for call in (p.abort_transaction, p.init_transactions):
                with pytest.raises(KafkaError):
                    await call()
            with pytest.raises(KafkaError):
                p.begin_transaction()

    b = run(scenario, {ApiKey.PRODUCE if where == "produce" else ApiKey.END_TXN: [code]})
    assert [e.committed for e in b.sent(ApiKey.END_TXN)] == ([] if where == "produce" else [True])


class TV2Broker(TxnBroker):
    """Finalizes transaction.version 2 (as Kafka 4.x); each EndTxn answers the next epoch."""

    def __init__(self):
        super().__init__()
        self.epoch = 3

    def _default_18(self, header, body, version):
        resp = super()._default_18(header, body, version)
        cls = message_class("ApiVersionsResponse")
        resp.finalized_features = [
            cls.FinalizedFeatureKey(name="transaction.version", max_version_level=2, min_version_level=2)
        ]
        resp.finalized_features_epoch = 1
        return resp

    def end_txn(self, header, body, version):
        self.epoch += 1
        return fit(
            message_class("EndTxnResponse"),
            version,
            error_code=self.code(ApiKey.END_TXN),
            producer_id=1000,
            producer_epoch=self.epoch,
        )


def test_transaction_version_2():
    """No AddPartitionsToTxn (Produce v12+ adds the partition), no AddOffsetsToTxn (TxnOffsetCommit v5),
    EndTxn v5 and the epoch it answers used by the next transaction's batches."""

    async def scenario(b):
        async with producer(b) as p:
            await p.init_transactions()
            assert p._txn.version == 2
            for value in (b"a", b"b"):
                p.begin_transaction()
                await p.send(TOPIC, value, partition=0)
                await p.send_offsets_to_transaction({(TOPIC, 1): 5}, "g")
                await p.commit_transaction()
            assert p.producer_epoch == 5

    async def main():
        b = await TV2Broker().start()
        try:
            await scenario(b)
        finally:
            await b.close()
        return b

    b = asyncio.run(main())
    order = b.order()
    first_end = order.index("end")
    # each transaction: its batch and its offsets (in either order: the batch lingers), then EndTxn
    assert order[0] == "init" and order[-1] == "end"
    assert sorted(order[1:first_end]) == sorted(order[first_end + 1 : -1]) == ["offsets", "produce"]
    assert min(b.versions(ApiKey.PRODUCE)) >= 12 and min(b.versions(ApiKey.END_TXN)) >= 5
    assert b.versions(ApiKey.TXN_OFFSET_COMMIT) == [5, 5]
    assert [(e.producer_epoch, e.committed) for e in b.sent(ApiKey.END_TXN)] == [(3, True), (4, True)]
    assert [c.producer_epoch for c in b.sent(ApiKey.TXN_OFFSET_COMMIT)] == [3, 4]
    # the second transaction's batch carries the epoch the first EndTxn answered
    epochs = [
        batch.producer_epoch
        for body in b.sent(ApiKey.PRODUCE)
        for t in body.topic_data
        for part in t.partition_data
        for batch in iter_batches(memoryview(part.records))
    ]
    assert epochs == [3, 4]
