"""A restart of a segments broker in the middle of a transaction: the log keeps the transaction open (last stable
offset at its first record, DescribeProducers naming where it started) and the producer can still abort it."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.server import start_in_thread
from kafkawire.protocol import message_class

from .conftest import RawClient
from .helpers import create_topic, fetch_request


def committed_view(client):
    p = client.call(fetch_request([("rs", 0, 0)], isolation_level=1), 12).responses[0].partitions[0]
    return p.high_watermark, p.last_stable_offset, [(a.producer_id, a.first_offset) for a in p.aborted_transactions]


def txn_start(client):
    R = message_class("DescribeProducersRequest")
    res = client.call(R(topics=[R.TopicRequest(name="rs", partition_indexes=[0])]), 0)
    return {s.producer_id: s.current_txn_start_offset for s in res.topics[0].partitions[0].active_producers}


def test_restart_mid_transaction_keeps_it_open_until_the_producer_aborts(tmp_path):
    config = BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data"))
    broker = start_in_thread(config)
    try:
        client = RawClient(broker.address)
        create_topic(client, "rs")
        host, port = broker.address
        producer = Producer(
            {
                "bootstrap.servers": f"{host}:{port}",
                "transactional.id": "rs-tx",
                "linger.ms": 0,
                "broker.address.family": "v4",
            }
        )
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.produce("rs", value=b"in flight", partition=0)
        producer.flush(30)
        assert committed_view(client) == (1, 0, [])
        (pid,) = txn_start(client)
        client.close()
    finally:
        broker.stop()
    config = BrokerConfig(port=port, storage="segments", data_dir=str(tmp_path / "data"))
    broker = start_in_thread(config)
    try:
        client = RawClient(broker.address)
        assert committed_view(client) == (1, 0, [])
        assert txn_start(client) == {pid: 0}
        producer.abort_transaction(60)
        deadline = time.monotonic() + 30  # the coordinator may answer EndTxn before its markers are written
        while committed_view(client)[1] != 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert committed_view(client) == (2, 2, [(pid, 0)])
        assert txn_start(client) == {pid: -1}
        client.close()
    finally:
        broker.stop()
