"""The same broker on the on-disk engine: appends run in storage threads, in order per partition."""

from __future__ import annotations

import threading
import time

import pytest

from kafkawire.broker.config import BrokerConfig
from kafkawire.protocol import errors

from .helpers import batch, create_topic, fetch_request, produce_request, records_with_offsets, values_of
from .test_sessions_idempotence import init_producer, produce_idem


@pytest.fixture
def broker_config(tmp_path):
    return BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data"))


def test_engine_runs_appends_in_threads(broker):
    assert type(broker.broker.storage).__name__ == "SegmentStorage"
    assert broker.broker.storage_in_thread


def test_pipelined_produces_keep_their_order(client):
    create_topic(client, "order", partitions=2)
    sent = []
    for i in range(200):
        sent.append(client.send(produce_request("order", i % 2, batch([b"%d" % i]), acks=-1 if i % 3 else 1), 9))
    bases = {0: [], 1: []}
    for i, cid in enumerate(sent):
        res = client.recv(0, 9, cid)
        pr = res.responses[0].partition_responses[0]
        assert pr.error_code == 0
        bases[i % 2].append(pr.base_offset)
    assert bases[0] == list(range(100)) and bases[1] == list(range(100))
    f = client.call(fetch_request([("order", 0, 0)]), 12)
    assert values_of(f.responses[0].partitions[0].records) == [b"%d" % i for i in range(0, 200, 2)]


def test_idempotence_and_long_poll_on_disk(client, connect):
    create_topic(client, "disk")
    pid, epoch = init_producer(client)
    assert produce_idem(client, "disk", pid, epoch, 0, [b"a"]).base_offset == 0
    assert produce_idem(client, "disk", pid, epoch, 0, [b"a"]).base_offset == 0
    assert produce_idem(client, "disk", pid, epoch, 2, [b"c"]).error_code != 0
    producer = connect()

    def later():
        time.sleep(0.2)
        producer.call(produce_request("disk", 0, batch([b"b"])), 9)

    writer = threading.Thread(target=later)
    writer.start()
    res = client.call(fetch_request([("disk", 0, 1)], max_wait_ms=5000), 12)
    writer.join(10)  # its connection stays open until the produce's own answer is read
    assert records_with_offsets(res.responses[0].partitions[0].records) == [(1, b"b")]


def test_acks_all_is_durable(broker, client, monkeypatch):
    create_topic(client, "dur")
    calls = []
    log = broker.broker.storage.partition("dur", 0)
    original = type(log).append

    def spy(self, batches, *, log_append_time=None, durable=False):
        calls.append(durable)
        return original(self, batches, log_append_time=log_append_time, durable=durable)

    monkeypatch.setattr(type(log), "append", spy)
    client.call(produce_request("dur", 0, batch([b"x"]), acks=-1), 9)
    client.call(produce_request("dur", 0, batch([b"y"]), acks=1), 9)
    assert calls == [True, False]
    broker.broker.config.acks_all_fsync = False
    client.call(produce_request("dur", 0, batch([b"z"]), acks=-1), 9)
    assert calls == [True, False, False]


def test_producer_state_survives_restart(tmp_path):
    from kafkawire.broker.server import start_in_thread

    from .conftest import RawClient

    cfg = BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "restart"))
    b = start_in_thread(cfg)
    c = RawClient(b.address)
    create_topic(c, "re")
    pid, epoch = init_producer(c)
    assert produce_idem(c, "re", pid, epoch, 0, [b"a", b"b"]).base_offset == 0
    assert produce_idem(c, "re", pid, epoch, 2, [b"c"]).base_offset == 2
    c.close()
    b.stop()
    b = start_in_thread(BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "restart")))
    try:
        c = RawClient(b.address)
        r = produce_idem(c, "re", pid, epoch, 2, [b"c"])  # a retry after the restart is still a duplicate
        assert (r.error_code, r.base_offset) == (0, 2)
        r = produce_idem(c, "re", pid, epoch, 5, [b"x"])
        assert r.error_code == errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce_idem(c, "re", pid, epoch, 3, [b"d"]).base_offset == 3
        c.close()
    finally:
        b.stop()


def test_retention_runs_on_a_timer(tmp_path):
    from kafkawire.broker.server import start_in_thread
    from kafkawire.protocol.records import build_batch

    from .conftest import RawClient
    from .test_admin import list_offsets

    cfg = BrokerConfig(
        port=0,
        storage="segments",
        data_dir=str(tmp_path / "ret"),
        properties={"log.retention.check.interval.ms": "100"},
    )
    b = start_in_thread(cfg)
    try:
        c = RawClient(b.address)
        create_topic(c, "old", configs={"retention.ms": "1000", "internal.segment.bytes": "200"})
        old = int(time.time() * 1000) - 3_600_000
        for i in range(10):
            c.call(produce_request("old", 0, build_batch([(None, b"x" * 100, [], old + i)])), 9)
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and list_offsets(c, "old", -2).offset == 0:
            time.sleep(0.2)
        assert list_offsets(c, "old", -2).offset > 0
        assert list_offsets(c, "old", -1).offset == 10
        c.close()
    finally:
        b.stop()


def test_pipelined_acks_all_share_fsyncs(broker, client, monkeypatch):
    create_topic(client, "group-commit")
    calls = []
    log = broker.broker.storage.partition("group-commit", 0)
    original = type(log).append

    def spy(self, batches, *, log_append_time=None, durable=False):
        calls.append(durable)
        return original(self, batches, log_append_time=log_append_time, durable=durable)

    monkeypatch.setattr(type(log), "append", spy)
    ids = [client.send(produce_request("group-commit", 0, batch([b"%d" % i]), acks=-1), 9) for i in range(50)]
    bases = [client.recv(0, 9, cid).responses[0].partition_responses[0].base_offset for cid in ids]
    assert bases == list(range(50))
    assert len(calls) == 50 and calls[-1] is True  # the last append of every group asks for the fsync
    assert calls.count(True) < 50  # requests that queued up behind one another shared an fsync
