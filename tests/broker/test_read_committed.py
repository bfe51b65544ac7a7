"""Fetch read_committed and ListOffsets by isolation level, over the wire, on transactions written through the
storage API (the log side of transactions; the coordinator's requests are tested with it).

Kafka's answers: read_committed returns records below the last stable offset (LSO) only, with the aborted
transactions overlapping them ((producer id, first offset), an empty list when none); read_uncommitted returns
everything, with the LSO reported too and a null aborted list. ListOffsets LATEST is the LSO for read_committed.
"""

from __future__ import annotations

import time

import pytest

from kafkawire.protocol import message_class
from kafkawire.protocol.records import build_batch

from .helpers import create_topic, fetch_request

NOW = int(time.time() * 1000)


def batch(values, ts=NOW, **kw):
    return build_batch([(None, v, [], ts) for v in values], **kw)


def txn(pid, values, seq=0):
    return batch(values, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)


@pytest.fixture
def txn_topic(broker, client):
    """Offsets: 0 plain, 1-2 pid 1 (aborted at 4), 3 pid 2 (committed at 6), 5 pid 3 (open), 7 plain."""
    create_topic(client, "tx")
    storage = broker.broker.storage
    log = storage.partition("tx", 0)
    log.append(batch([b"p0"]))
    log.append(txn(1, [b"a1", b"a2"]))
    log.append(txn(2, [b"c1"]))
    assert storage.append_txn_marker("tx", 0, 1, 0, False, 0, timestamp=NOW) == 4
    log.append(txn(3, [b"o1"]))
    assert storage.append_txn_marker("tx", 0, 2, 0, True, 0, timestamp=NOW) == 6
    log.append(batch([b"p7"], NOW + 1))
    return log


def batch_offsets(records):
    from kafkawire.protocol.records import iter_batches

    return [(b.base_offset, b.last_offset, b.is_control) for b in iter_batches(bytes(records or b""))]


@pytest.mark.parametrize("version", [4, 11, 12, 13, 17, 18])
def test_fetch_read_committed_stops_at_the_lso_with_aborted_transactions(client, txn_topic, version):
    from .test_metadata_topic_ids import topic_id

    key = topic_id(client, "tx") if version >= 13 else "tx"
    p = client.call(fetch_request([(key, 0, 0)], isolation_level=1), version).responses[0].partitions[0]
    start = 0 if version >= 5 else -1  # LogStartOffset: v5+
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (0, 8, 5, start)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(1, 1)]
    assert batch_offsets(p.records) == [(0, 0, False), (1, 2, False), (3, 3, False), (4, 4, True)]
    # from past the aborted transaction's marker: none overlaps
    p = client.call(fetch_request([(key, 0, 5)], isolation_level=1), version).responses[0].partitions[0]
    assert (p.last_stable_offset, p.aborted_transactions, batch_offsets(p.records)) == (5, [], [])
    # read_uncommitted: every record, the LSO still reported, a null aborted list
    p = client.call(fetch_request([(key, 0, 0)], isolation_level=0), version).responses[0].partitions[0]
    assert (p.high_watermark, p.last_stable_offset, p.aborted_transactions) == (8, 5, None)
    assert [b[0] for b in batch_offsets(p.records)] == [0, 1, 3, 4, 5, 6, 7]


def test_fetch_read_committed_moves_with_the_marker(broker, client, txn_topic):
    assert broker.broker.storage.append_txn_marker("tx", 0, 3, 0, False, 0, timestamp=NOW) == 8
    p = client.call(fetch_request([("tx", 0, 4)], isolation_level=1), 12).responses[0].partitions[0]
    assert (p.high_watermark, p.last_stable_offset) == (9, 9)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(1, 1), (3, 5)]
    assert [b[0] for b in batch_offsets(p.records)] == [4, 5, 6, 7, 8]


def list_offsets(client, version, timestamp, isolation):
    R = message_class("ListOffsetsRequest")
    req = R(
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            R.ListOffsetsTopic(name="tx", partitions=[R.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])
        ],
    )
    p = client.call(req, version).topics[0].partitions[0]
    return p.error_code, p.offset, p.timestamp


@pytest.mark.parametrize("version", [2, 7, 11])
def test_list_offsets_latest_follows_the_isolation_level(client, txn_topic, version):
    assert list_offsets(client, version, -1, 0) == (0, 8, -1)
    assert list_offsets(client, version, -1, 1) == (0, 5, -1)
    # by timestamp: a record at or past the last fetchable offset does not count
    assert list_offsets(client, version, NOW + 1, 0) == (0, 7, NOW + 1)
    assert list_offsets(client, version, NOW + 1, 1) == (0, -1, -1)
    assert list_offsets(client, version, NOW, 1) == (0, 0, NOW)


def test_read_committed_long_poll_wakes_when_the_commit_marker_is_written(broker, client):
    """A read_committed Fetch waiting (MaxWaitMs 120 s) while the only records are in an open transaction is
    answered when the coordinator writes the COMMIT marker: the marker's append wakes it as a produce does.
    (Were it not woken it would answer only after 120 s; the socket gives up after 60 s and the test fails.)"""
    from confluent_kafka import Producer

    create_topic(client, "lp")
    host, port = broker.address
    producer = Producer(
        {
            "bootstrap.servers": f"{host}:{port}",
            "transactional.id": "lp-tx",
            "linger.ms": 0,
            "broker.address.family": "v4",
        }
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce("lp", value=b"pending", partition=0)
    producer.flush(30)
    assert (
        client.call(fetch_request([("lp", 0, 0)], isolation_level=1), 12).responses[0].partitions[0].last_stable_offset
        == 0
    )
    client.sock.settimeout(60)
    cid = client.send(fetch_request([("lp", 0, 0)], max_wait_ms=120_000, min_bytes=1, isolation_level=1), 12)
    producer.commit_transaction(60)
    p = client.recv(1, 12, cid).responses[0].partitions[0]
    assert (p.high_watermark, p.last_stable_offset, p.aborted_transactions) == (2, 2, [])
    assert batch_offsets(p.records) == [(0, 0, False), (1, 1, True)]
