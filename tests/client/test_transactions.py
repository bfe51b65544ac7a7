"""kafkawire's transactional producer and read_committed consumer, on kafkawire's broker and on Apache Kafka 4.4.

Each scenario runs with the transaction version the broker finalizes ("broker": 2 on Kafka 4.4, where
Produce adds the partitions and each EndTxn bumps the epoch) and with version 1 forced (AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn v4), as the Java 3.x client speaks it:

* commit, abort, commit: a read_committed consumer reads exactly the committed records, a
  read_uncommitted one reads all of them, neither returns a control record;
* an open transaction is invisible to read_committed (the last stable offset holds it back) until it
  commits; an aborted one leaves no trace for read_committed;
* consume-transform-produce: the group's offsets sent with ``send_offsets_to_transaction`` are committed
  only with the transaction (an abort leaves them as they were);
* a zombie: a second producer with the same transactional id fences the first, whose commit fails with
  PRODUCER_FENCED (or INVALID_PRODUCER_EPOCH) and which stays fenced; the open transaction it left is
  aborted by the new producer's InitProducerId.
"""

from __future__ import annotations

import time

import pytest

from kafkawire.client import Consumer, Producer
from kafkawire.client.transactions import State, TransactionStateError
from kafkawire.protocol import KafkaError, errors as kerrors

from .groups_support import FAST, create_topics, group_broker, names  # noqa: F401

pytestmark = pytest.mark.timeout(180)

VERSIONS = {"broker": None, "tv1": 1}


@pytest.fixture(params=list(VERSIONS))
def tv(request):
    return VERSIONS[request.param]


def txn_producer(bootstrap: str, txn_id: str, tv, **kw) -> Producer:
    p = Producer(bootstrap, transactional_id=txn_id, transaction_version=tv, linger_ms=5, **kw)
    p.init_transactions(60)
    if tv == 1:
        assert p._core._txn.version == 1
    return p


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float = 30) -> list[int]:
    """Every value of the topic up to its end offset (for read_committed: the last stable offset)."""
    with Consumer(bootstrap, isolation_level=isolation, fetch_max_wait_ms=100) as c:
        tps = [(topic, p) for p in range(partitions)]
        c.assign(tps, "earliest")
        end = c.end_offsets(tps)
        got: list[int] = []
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, f"{isolation}: positions {[c.position(tp) for tp in tps]} < {end}"
            got += [int(r.value) for r in c.poll(0.5)]
        return sorted(got)


def assert_reads(
    bootstrap: str, topic: str, partitions: int, isolation: str, expected: list[int], timeout: float = 30
) -> None:
    """``read_all`` returns ``expected`` within ``timeout``: EndTxn answers once the coordinator has the
    decision, and the markers that move the last stable offset are written just after."""
    deadline = time.monotonic() + timeout
    while True:
        got = read_all(bootstrap, topic, partitions, isolation)
        if got == expected:
            return
        assert time.monotonic() < deadline, f"{isolation} read {got}, expected {expected}"
        time.sleep(0.2)


def produce_values(p: Producer, topic: str, values, partitions: int) -> None:
    for v in values:
        p.produce(topic, str(v).encode(), partition=v % partitions)
    p.flush(30)


def test_commit_abort_commit(group_broker, names, tv):
    topic, _ = names
    create_topics(group_broker.bootstrap, topic, partitions=2)
    with txn_producer(group_broker.bootstrap, f"tx-{topic}", tv) as p:
        for base, commit in ((0, True), (100, False), (200, True)):
            p.begin_transaction()
            produce_values(p, topic, range(base, base + 10), 2)  # sent before the end: the abort has records
            (p.commit_transaction if commit else p.abort_transaction)(60)
    committed = list(range(10)) + list(range(200, 210))
    assert_reads(group_broker.bootstrap, topic, 2, "read_committed", committed)
    assert_reads(group_broker.bootstrap, topic, 2, "read_uncommitted", sorted(committed + list(range(100, 110))))


def test_open_transaction_hidden_until_commit(group_broker, names, tv):
    topic, _ = names
    create_topics(group_broker.bootstrap, topic, partitions=1)
    with Producer(group_broker.bootstrap) as plain:
        plain.send(topic, b"1", partition=0, timeout=30)
    with txn_producer(group_broker.bootstrap, f"tx-{topic}", tv) as p:
        p.begin_transaction()
        produce_values(p, topic, [2, 3], 1)
        # the open transaction holds the last stable offset at its first record
        assert_reads(group_broker.bootstrap, topic, 1, "read_committed", [1])
        assert_reads(group_broker.bootstrap, topic, 1, "read_uncommitted", [1, 2, 3])
        p.commit_transaction(60)
    assert_reads(group_broker.bootstrap, topic, 1, "read_committed", [1, 2, 3])


def test_abort_leaves_no_trace(group_broker, names, tv):
    topic, _ = names
    create_topics(group_broker.bootstrap, topic, partitions=3)
    with txn_producer(group_broker.bootstrap, f"tx-{topic}", tv) as p:
        p.begin_transaction()
        produce_values(p, topic, range(30), 3)
        p.abort_transaction(60)
        # records produced but not sent when the abort comes are dropped, never written
        p.begin_transaction()
        for v in range(100, 110):
            p.produce(topic, str(v).encode(), partition=0)
        p.abort_transaction(60)
        p.begin_transaction()
        produce_values(p, topic, [1000], 3)
        p.commit_transaction(60)
    assert_reads(group_broker.bootstrap, topic, 3, "read_committed", [1000])
    uncommitted = read_all(group_broker.bootstrap, topic, 3, "read_uncommitted")
    assert [v for v in uncommitted if v < 100] == list(range(30))
    assert 1000 in uncommitted


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_consume_transform_produce(group_broker, names, tv, protocol):
    """The group's metadata carries the generation (classic) or the member epoch (KIP-848) that TxnOffsetCommit
    sends: the coordinator checks it against the member's."""
    source, group = names
    sink = source + "-out"
    create_topics(group_broker.bootstrap, source, sink, partitions=2)
    with Producer(group_broker.bootstrap) as plain:
        produce_values(plain, source, range(20), 2)
    consumer = Consumer(
        group_broker.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        isolation_level="read_committed",
        group_protocol=protocol,
        **FAST,
    )
    tps = [(source, 0), (source, 1)]
    try:
        consumer.subscribe([source])
        consumer.wait_for_assignment(60)
        with txn_producer(group_broker.bootstrap, f"tx-{source}", tv) as p:
            # offsets from a member whose generation (or epoch) the group does not know are refused: the
            # transaction can only abort
            p.begin_transaction()
            meta = consumer.group_metadata()
            with pytest.raises(KafkaError) as refused:
                p.send_offsets_to_transaction({tp: 1 for tp in tps}, dict(meta, generation=meta["generation"] + 5), 60)
            assert refused.value.code == kerrors.ILLEGAL_GENERATION  # Kafka 4.4's answer for both protocols
            with pytest.raises(KafkaError):
                p.commit_transaction(60)
            p.abort_transaction(60)
            # round 1 is aborted: its output and its offsets are dropped; round 2 reads the same records again
            for commit in (False, True):
                got: list = []
                deadline = time.monotonic() + 30
                while len(got) < 20:
                    assert time.monotonic() < deadline, f"read {len(got)} of 20"
                    got += consumer.poll(0.5)
                p.begin_transaction()
                for r in got:
                    p.produce(sink, str(int(r.value) * 10).encode(), partition=r.partition)
                positions = {tp: consumer.position(tp) for tp in tps}
                assert positions == {(source, 0): 10, (source, 1): 10}
                p.send_offsets_to_transaction(positions, consumer.group_metadata(), 60)
                p.flush(30)
                # not before the transaction ends: a stable read (require_stable, as the consumer asks)
                # is refused while the group has offsets pending in an open transaction
                with pytest.raises(KafkaError) as pending:
                    consumer.committed(tps)
                assert pending.value.code == kerrors.UNSTABLE_OFFSET_COMMIT
                if commit:
                    p.commit_transaction(60)
                else:
                    p.abort_transaction(60)
                    assert consumer.committed(tps) == {tp: None for tp in tps}
                    for tp in tps:
                        consumer.seek(tp, 0)
        assert consumer.committed(tps) == {(source, 0): 10, (source, 1): 10}
    finally:
        consumer.close()
    assert_reads(group_broker.bootstrap, sink, 2, "read_committed", [v * 10 for v in range(20)])
    assert len(read_all(group_broker.bootstrap, sink, 2, "read_uncommitted")) == 40


def test_fenced_zombie(group_broker, names, tv):
    topic, _ = names
    create_topics(group_broker.bootstrap, topic, partitions=1)
    txn_id = f"tx-{topic}"
    zombie = txn_producer(group_broker.bootstrap, txn_id, tv)
    try:
        zombie.begin_transaction()
        produce_values(zombie, topic, [1, 2], 1)
        with txn_producer(group_broker.bootstrap, txn_id, tv) as successor:
            # the successor's InitProducerId aborted the zombie's open transaction and bumped the epoch
            assert (successor._core.producer_id, successor._core.producer_epoch) != (
                zombie._core.producer_id,
                zombie._core.producer_epoch,
            )
            with pytest.raises(KafkaError) as fenced:
                zombie.produce(topic, b"3", partition=0)
                zombie.commit_transaction(60)
            assert fenced.value.code in (kerrors.PRODUCER_FENCED, kerrors.INVALID_PRODUCER_EPOCH)
            assert zombie._core._txn.state is State.FATAL_ERROR
            with pytest.raises(KafkaError):
                zombie.begin_transaction()  # fenced for good
            successor.begin_transaction()
            produce_values(successor, topic, [10], 1)
            successor.commit_transaction(60)
    finally:
        zombie.close()
    assert_reads(group_broker.bootstrap, topic, 1, "read_committed", [10])
    assert_reads(group_broker.bootstrap, topic, 1, "read_uncommitted", [1, 2, 10])


def test_state_errors(group_broker, names):
    """Calls out of order are refused before anything is sent, as Kafka's client refuses them."""
    topic, _ = names
    create_topics(group_broker.bootstrap, topic, partitions=1)
    with Producer(group_broker.bootstrap, transactional_id=f"tx-{topic}") as p:
        with pytest.raises(TransactionStateError):
            p.begin_transaction()  # before init_transactions
        p.init_transactions(60)
        with pytest.raises(TransactionStateError):
            p.commit_transaction(10)  # no transaction
        fut = p.produce(topic, b"x", partition=0)
        p.flush(10)
        with pytest.raises(TransactionStateError):
            fut.result(10)  # a record outside a transaction
    with pytest.raises(ValueError):
        Producer(group_broker.bootstrap, transactional_id="x", acks=1)
