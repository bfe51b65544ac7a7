"""Transactions through a running kafkawire broker (raw protocol): the handlers, the markers in the log, and
restarts on the segments engine. Kafka's answers are compared in the conformance corpus
(tools/conformance_suite/corpus/transactions.py)."""

from __future__ import annotations

import time

import pytest
from broker.conftest import RawClient
from broker.helpers import create_topic

from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.server import start_in_thread
from kafkawire.protocol import errors, message_class
from kafkawire.protocol.records import build_batch, iter_batches

M = message_class


@pytest.fixture
def data_dir(tmp_path):
    return str(tmp_path / "data")


def start(data_dir, **props):
    cfg = BrokerConfig(
        port=0,
        storage="segments",
        data_dir=data_dir,
        properties={k.replace("_", "."): str(v) for k, v in props.items()},
    )
    return start_in_thread(cfg)


def find(c, tid):
    return c.call(M("FindCoordinatorRequest")(key_type=1, coordinator_keys=[tid]), 4).coordinators[0]


def init(c, tid, timeout=60000, version=5):
    r = c.call(
        M("InitProducerIdRequest")(
            transactional_id=tid, transaction_timeout_ms=timeout, producer_id=-1, producer_epoch=-1
        ),
        version,
    )
    assert r.error_code == 0, r
    return r.producer_id, r.producer_epoch


def produce(c, tid, topic, partition, pid, epoch, seq, version):
    P = M("ProduceRequest")
    batch = build_batch(
        [(b"k", b"v%d" % seq)], producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )
    r = c.call(
        P(
            transactional_id=tid,
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                P.TopicProduceData(name=topic, partition_data=[P.PartitionProduceData(index=partition, records=batch)])
            ],
        ),
        version,
    )
    return r.responses[0].partition_responses[0].error_code


def end(c, tid, pid, epoch, commit, version=4):
    return c.call(
        M("EndTxnRequest")(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit), version
    )


def describe(c, tid):
    return c.call(M("DescribeTransactionsRequest")(transactional_ids=[tid]), 0).transaction_states[0]


def batches(broker, topic, partition):
    plog = broker.broker.storage.partition(topic, partition)
    data = b"".join(bytes(x) for x in plog.read(0, 1 << 20).chunks)
    return list(iter_batches(data))


def test_find_coordinator_creates_the_transaction_log_with_kafkas_configs(data_dir):
    with start(data_dir) as b:
        c = RawClient(b.address)
        assert "__transaction_state" not in b.broker.storage.topics()
        assert find(c, "tx").error_code == 0
        meta = b.broker.storage.topics()["__transaction_state"]
        assert meta.partitions == 1 and meta.configs["cleanup.policy"] == "compact"
        c.close()


def test_tv1_commit_writes_markers_and_refuses_partitions_not_added(data_dir):
    with start(data_dir) as b:
        c = RawClient(b.address)
        create_topic(c, "t", partitions=2)
        find(c, "tx")
        pid, epoch = init(c, "tx")
        A = M("AddPartitionsToTxnRequest")
        r = c.call(
            A(
                v3_and_below_transactional_id="tx",
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[A.AddPartitionsToTxnTopic(name="t", partitions=[0])],
            ),
            3,
        )
        assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        assert produce(c, "tx", "t", 0, pid, epoch, 0, 9) == 0
        assert produce(c, "tx", "t", 1, pid, epoch, 0, 9) == errors.INVALID_TXN_STATE
        assert produce(c, "tx", "t", 1, pid, epoch, 0, 11) == errors.TRANSACTION_ABORTABLE
        assert end(c, "tx", pid, epoch, True).error_code == 0
        last = batches(b, "t", 0)[-1]
        assert last.is_control and last.producer_id == pid and last.producer_epoch == epoch
        assert batches(b, "t", 1) == []  # nothing was appended where the transaction was not
        assert describe(c, "tx").transaction_state == "CompleteCommit"
        c.close()


def test_tv2_produce_adds_the_partition_and_end_txn_bumps_the_epoch(data_dir):
    with start(data_dir) as b:
        c = RawClient(b.address)
        create_topic(c, "t", partitions=2)
        find(c, "tx")
        pid, epoch = init(c, "tx")
        assert produce(c, "tx", "t", 1, pid, epoch, 0, 12) == 0
        assert [t.partitions for t in describe(c, "tx").topics] == [[1]]
        r = end(c, "tx", pid, epoch, False, version=5)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
        marker = batches(b, "t", 1)[-1]
        assert marker.is_control and marker.producer_epoch == epoch + 1  # the marker fences the old epoch
        assert produce(c, "tx", "t", 1, pid, epoch, 1, 12) == errors.INVALID_PRODUCER_EPOCH
        c.close()


def test_transactional_offsets_are_unstable_until_commit(data_dir):
    with start(data_dir) as b:
        c = RawClient(b.address)
        create_topic(c, "t")
        find(c, "tx")
        c.call(M("FindCoordinatorRequest")(key_type=0, coordinator_keys=["g"]), 4)
        pid, epoch = init(c, "tx")
        r = c.call(
            M("AddOffsetsToTxnRequest")(transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g"), 3
        )
        assert r.error_code == 0
        T = M("TxnOffsetCommitRequest")
        r = c.call(
            T(
                transactional_id="tx",
                group_id="g",
                producer_id=pid,
                producer_epoch=epoch,
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=[
                    T.TxnOffsetCommitRequestTopic(
                        name="t",
                        partitions=[
                            T.TxnOffsetCommitRequestPartition(
                                partition_index=0, committed_offset=7, committed_leader_epoch=-1, committed_metadata=""
                            )
                        ],
                    )
                ],
            ),
            3,
        )
        assert r.topics[0].partitions[0].error_code == 0
        F = M("OffsetFetchRequest")

        def fetch(stable):
            res = c.call(
                F(
                    group_id="g",
                    topics=[F.OffsetFetchRequestTopic(name="t", partition_indexes=[0])],
                    require_stable=stable,
                ),
                7,
            )
            p = res.topics[0].partitions[0]
            return p.error_code, p.committed_offset

        assert fetch(True) == (errors.UNSTABLE_OFFSET_COMMIT, -1)
        assert fetch(False) == (0, -1)
        assert end(c, "tx", pid, epoch, True).error_code == 0
        assert fetch(True) == (0, 7)
        c.close()


def test_an_ongoing_transaction_is_aborted_after_a_restart_when_its_timeout_passes(data_dir):
    props = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 100}
    with start(data_dir, **props) as b:
        c = RawClient(b.address)
        create_topic(c, "t")
        find(c, "tx")
        pid, epoch = init(c, "tx", timeout=1500)
        assert produce(c, "tx", "t", 0, pid, epoch, 0, 12) == 0
        c.close()
    with start(data_dir, **props) as b:
        c = RawClient(b.address)
        state = describe(c, "tx")
        assert (state.transaction_state, [t.partitions for t in state.topics]) == ("Ongoing", [[0]])
        for _ in range(100):  # bounded: the timeout is 1.5 s, checked every 100 ms
            if describe(c, "tx").transaction_state == "CompleteAbort":
                break
            time.sleep(0.05)
        state = describe(c, "tx")
        assert (state.transaction_state, state.producer_epoch) == ("CompleteAbort", epoch + 1)
        marker = batches(b, "t", 0)[-1]
        assert marker.is_control and marker.producer_epoch == epoch + 1
        c.close()


def test_a_batched_add_partitions_is_bounded(data_dir):
    from kafkawire.broker.handlers.transactions import MAX_TRANSACTIONS_PER_REQUEST

    with start(data_dir) as b:
        c = RawClient(b.address)
        A = M("AddPartitionsToTxnRequest")
        many = [
            A.AddPartitionsToTxnTransaction(
                transactional_id=f"x{i}", producer_id=1, producer_epoch=0, verify_only=True, topics=[]
            )
            for i in range(MAX_TRANSACTIONS_PER_REQUEST + 1)
        ]
        r = c.call(A(transactions=many), 5)
        assert (r.error_code, r.results_by_transaction) == (errors.INVALID_REQUEST, [])
        r = c.call(A(transactions=many[:2]), 5)
        assert r.error_code == 0 and len(r.results_by_transaction) == 2
        c.close()
