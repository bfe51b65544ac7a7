"""Kafka's Java client in transactions against the broker: kafka-clients 3.9.1 (transaction version 1:
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn v4) and the reference release's own 4.4 (version 2 when the
broker finalizes ``transaction.version`` 2: Produce v12 adds the partitions, EndTxn v5 bumps the epoch).

``tests/client/java/TxnPeer.java`` runs each scenario and prints what its consumers read; the test checks
that and reads the topics once more with kafkawire's read_committed and read_uncommitted consumers:

* commit, abort, commit: read_committed reads exactly the committed records, read_uncommitted all;
* consume-transform-produce with ``sendOffsetsToTransaction`` (a first round aborted, then committed):
  the group's offsets are those of the committed round, the output holds each value once;
* a zombie: a second producer with the transactional id fences the first (ProducerFencedException or
  InvalidProducerEpochException), whose open transaction is aborted.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kafkawire.client import Admin, Consumer, NewTopic, Producer

import kafka_pins
from support.java import JavaProgram

pytestmark = pytest.mark.timeout(240)

SOURCE = Path(__file__).resolve().parent.parent / "client" / "java" / "TxnPeer.java"


@pytest.fixture(scope="module", params=[None, kafka_pins.BROKER], ids=["clients-3.9.1", f"clients-{kafka_pins.KAFKA}"])
def java_txn(request):
    return JavaProgram.require(SOURCE, clients=request.param)


@pytest.fixture
def txn_broker(broker, peer_target):
    if peer_target == "tansu":
        pytest.skip("transactions are tested on kafkawire and Kafka")
    return broker


def create(bootstrap: str, *topics: str, partitions: int) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(t, partitions) for t in topics])


def kafkawire_read(
    bootstrap: str, topic: str, partitions: int, isolation: str, expected: list[int], timeout: float = 30
) -> list[int]:
    """What kafkawire's consumer reads up to the end offsets, read again until it is ``expected`` or
    ``timeout`` passes (the markers that move the last stable offset follow EndTxn's answer)."""
    deadline = time.monotonic() + timeout
    while True:
        with Consumer(bootstrap, isolation_level=isolation, fetch_max_wait_ms=100) as c:
            tps = [(topic, p) for p in range(partitions)]
            c.assign(tps, "earliest")
            end = c.end_offsets(tps)
            got: list[int] = []
            while any(c.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
                got += [int(r.value) for r in c.poll(0.5)]
        got.sort()
        if got == expected or time.monotonic() >= deadline:
            return got
        time.sleep(0.2)


def marker_epochs(bootstrap: str, topic: str, partition: int) -> list[int]:
    """The producer epochs of the partition's control batches (the COMMIT/ABORT markers), read raw."""
    from kafkawire.client.connection import Connection
    from kafkawire.client.groups.membership import fit
    from kafkawire.protocol import ApiKey
    from kafkawire.protocol.messages import message_class
    from kafkawire.protocol.records import iter_batches

    async def fetch():
        host, port = bootstrap.rsplit(":", 1)
        conn = await Connection.open(host, int(port))
        try:
            cls = message_class("FetchRequest")
            version = min(conn.version_for(ApiKey.FETCH), 12)  # topics by name
            part = cls.FetchPartition(
                partition=partition,
                fetch_offset=0,
                partition_max_bytes=1 << 20,
                current_leader_epoch=-1,
                log_start_offset=-1,
                last_fetched_epoch=-1,
            )
            req = fit(
                cls,
                version,
                replica_id=-1,
                max_wait_ms=100,
                min_bytes=1,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                forgotten_topics_data=[],
                rack_id="",
                topics=[cls.FetchTopic(topic=topic, partitions=[part])],
            )
            resp = await conn.request(req, version=version)
            records = resp.responses[0].partitions[0].records
            return [b.producer_epoch for b in iter_batches(memoryview(records)) if b.is_control]
        finally:
            await conn.close()

    return asyncio.run(fetch())


def lines(output: str) -> dict[str, list[str]]:
    return {line.split(" ")[0]: line.split(" ")[1:] for line in output.splitlines() if line.strip()}


def test_commit_abort_commit(txn_broker, topic, java_txn, request):
    create(txn_broker.bootstrap, topic, partitions=2)
    out = lines(java_txn.run("TxnPeer", "cycle", txn_broker.bootstrap, topic, f"tx-{topic}", timeout=180))
    committed = list(range(10)) + list(range(200, 210))
    everything = sorted(committed + list(range(100, 110)))
    assert [int(v) for v in out["read_committed"]] == committed
    assert [int(v) for v in out["read_uncommitted"]] == everything
    # 3.9.1 speaks transaction version 1: the markers carry the epoch InitProducerId gave (0 for a new id);
    # 4.4 speaks version 2 (both brokers finalize it): each of the three EndTxn bumped it, and its marker
    # carries the new epoch
    clients = request.node.callspec.params["java_txn"]
    assert marker_epochs(txn_broker.bootstrap, topic, 0) == ([0, 0, 0] if clients is None else [1, 2, 3])
    assert kafkawire_read(txn_broker.bootstrap, topic, 2, "read_committed", committed) == committed
    assert kafkawire_read(txn_broker.bootstrap, topic, 2, "read_uncommitted", everything) == everything


def test_consume_transform_produce(txn_broker, topic, java_txn):
    source, sink, group = topic, topic + "-out", "g-" + topic
    create(txn_broker.bootstrap, source, sink, partitions=2)
    with Producer(txn_broker.bootstrap) as p:
        for v in range(20):
            p.produce(source, str(v).encode(), partition=v % 2)
        p.flush(30)
    out = lines(
        java_txn.run("TxnPeer", "ctp", txn_broker.bootstrap, source, sink, group, f"tx-{topic}", "20", timeout=180)
    )
    assert out["offsets"] == ["0=10", "1=10"]
    with Consumer(txn_broker.bootstrap, group_id=group) as c:
        assert c.committed([(source, 0), (source, 1)]) == {(source, 0): 10, (source, 1): 10}
    expected = [v * 10 for v in range(20)]
    assert kafkawire_read(txn_broker.bootstrap, sink, 2, "read_committed", expected) == expected
    # the aborted round's output is in the log too, for read_uncommitted
    assert kafkawire_read(txn_broker.bootstrap, sink, 2, "read_uncommitted", sorted(expected * 2)) == sorted(
        expected * 2
    )


def test_fenced_zombie(txn_broker, topic, java_txn):
    create(txn_broker.bootstrap, topic, partitions=1)
    out = lines(java_txn.run("TxnPeer", "zombie", txn_broker.bootstrap, topic, f"tx-{topic}", timeout=180))
    kind = out["fenced"][0]
    assert "ProducerFencedException" in kind or "InvalidProducerEpochException" in kind, kind
    assert kafkawire_read(txn_broker.bootstrap, topic, 1, "read_committed", [10]) == [10]
    # the zombie's records (1, 2, maybe 3) were written and aborted
    got = kafkawire_read(txn_broker.bootstrap, topic, 1, "read_uncommitted", [1, 2, 10])
    assert got in ([1, 2, 10], [1, 2, 3, 10]), got
