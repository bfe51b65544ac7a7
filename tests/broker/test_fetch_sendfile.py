"""Fetch answered with sendfile: on a plaintext connection the segments engine's records go out as file ranges
(``os.sendfile``), and the bytes on the wire are exactly those of the copying path (views of the mapped
segments written with ``writelines``) for the same request: every Fetch version, read_committed cut at the
last stable offset with its aborted transactions, MaxBytes and PartitionMaxBytes limits, pipelined requests.
TLS connections read the ranges into memory instead (tested at the net layer with a TLS FramedServer)."""

from __future__ import annotations

import os
import random
import struct
import time

import pytest

from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.storage import FileRegion
from kafkawire.net.server import SENDFILE_MIN
from kafkawire.protocol import message_class
from kafkawire.protocol.records import build_batch, iter_batches

from .conftest import RawClient
from .helpers import create_topic, fetch_request
from .net_server import ThreadedServer, read_frames, tls_contexts

NOW = int(time.time() * 1000)


@pytest.fixture
def broker_config(tmp_path):
    cfg = BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data"))
    assert cfg.fetch_sendfile  # the default (kafkawire.fetch.sendfile)
    return cfg


@pytest.fixture
def sendfile_calls(monkeypatch):
    """Counts os.sendfile calls (the broker runs in this process), so a test can tell the path was taken."""
    calls = []
    real = os.sendfile

    def counting(out_fd, in_fd, offset, count):
        sent = real(out_fd, in_fd, offset, count)
        calls.append(sent)
        return sent

    monkeypatch.setattr(os, "sendfile", counting)
    return calls


def values(n: int, size: int, seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    return [rnd.randbytes(size) for _ in range(n)]


def plain(vals, **kw) -> bytes:
    return build_batch([(None, v, [], NOW) for v in vals], **kw)


def txn(pid, vals) -> bytes:
    return plain(vals, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)


@pytest.fixture
def loaded(broker, client):
    """Three partitions of "big" (offsets 0-17 each): batches of 40-200 KiB (each above the sendfile threshold), small ones between
    them; then in partition 2 an aborted transaction (18-19, marker 20), a committed one (21, marker 22) and one
    left open (23: the last stable offset), and a plain batch (24)."""
    create_topic(client, "big", partitions=3)
    storage = broker.broker.storage
    for p in range(3):
        log = storage.partition("big", p)
        for i in range(6):
            log.append(plain(values(1 + i % 3, 40_000 + 20_000 * p, seed=p * 100 + i)))
            log.append(plain([b"small-%d-%d" % (p, i)]))
    log = storage.partition("big", 2)
    log.append(txn(7, values(2, 50_000, seed=7)))
    storage.append_txn_marker("big", 2, 7, 0, False, 0, timestamp=NOW)
    log.append(txn(8, values(1, 60_000, seed=8)))
    storage.append_txn_marker("big", 2, 8, 0, True, 0, timestamp=NOW)
    log.append(txn(9, values(1, 70_000, seed=9)))  # open
    log.append(plain(values(1, 80_000, seed=10)))
    return storage


def copying(broker, client: RawClient) -> RawClient:
    """Make the broker answer ``client``'s connection through the copying path (no sendfile)."""
    client.call(message_class("ApiVersionsRequest")(), 0)  # the connection is registered once answered
    port = client.sock.getsockname()[1]
    (conn,) = [c for c in broker.broker.server.connections if c.peer.endswith(f":{port}")]
    assert conn.sendfile
    conn.sendfile_fd = None
    return client


def exchange(client: RawClient, requests) -> list[bytes]:
    """Send every (request, version) pipelined, then read the raw response frames (correlation ids included)."""
    for body, version in requests:
        client.send(body, version)
    return [client.read_frame() for _ in requests]


def topic_key(client, version):
    if version < 13:
        return "big"
    meta = client.call(
        message_class("MetadataRequest")(topics=[message_class("MetadataRequest").MetadataRequestTopic(name="big")]), 12
    )
    return meta.topics[0].topic_id


def cases(key):
    three = [(key, p, 0) for p in range(3)]
    return [
        fetch_request(three),  # everything
        fetch_request(three, max_bytes=150_000),  # the response limit: partition 0 cut, the others empty
        fetch_request(three, partition_max_bytes=100_000),  # a per-partition limit
        fetch_request(three, max_bytes=1),  # only the first batch, whatever the limit (progress)
        fetch_request([(key, 1, 7), (key, 2, 3), (key, 0, 11)]),  # mid-log offsets, another order
        fetch_request(
            three, isolation_level=1, partition_max_bytes=4 << 20
        ),  # read_committed: partition 2 stops at the open transaction
        fetch_request([(key, 2, 18)], isolation_level=1),  # from the aborted transaction on
    ]


@pytest.mark.parametrize("version", [4, 7, 11, 12, 13, 16, 18])
def test_sendfile_answers_are_byte_identical_to_the_copying_path(broker, loaded, connect, sendfile_calls, version):
    sending, copy = connect(), copying(broker, connect())
    sending.call(message_class("ApiVersionsRequest")(), 0)  # same correlation ids on both connections
    key = topic_key(sending, version)
    assert topic_key(copy, version) == key
    requests = [(body, version) for body in cases(key)]
    before = len(sendfile_calls)
    copied = exchange(copy, requests)
    assert len(sendfile_calls) == before  # the copying connection never sends from the file
    sent = exchange(sending, requests)
    assert len(sendfile_calls) > before, "the plaintext connection did not use sendfile"
    for i, (a, b) in enumerate(zip(sent, copied, strict=True)):
        assert a == b, f"case {i}: {len(a)} bytes with sendfile, {len(b)} copied"
    # and they are the answers expected: partition 2 under read_committed ends before the open transaction
    from kafkawire.protocol import decode_response

    committed = decode_response(sent[5], 1, version, framed=False).body.responses[0].partitions[2]
    offsets = [b.last_offset for b in iter_batches(bytes(committed.records))]
    assert committed.last_stable_offset == 23 and offsets[-1] == 22
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [(7, 18)]
    limited = decode_response(sent[1], 1, version, framed=False).body.responses[0].partitions
    assert sum(len(p.records or b"") for p in limited) <= 150_000


def test_sendfile_keeps_pipelined_answers_in_order(broker, loaded, connect, sendfile_calls):
    """Fetches answered from the file between small answers, all sent before any is read: the order and the
    bytes are the copying connection's."""
    sending, copy = connect(), copying(broker, connect())
    sending.call(message_class("ApiVersionsRequest")(), 0)
    metadata = message_class("MetadataRequest")(topics=None)
    requests = []
    for i in range(20):
        requests.append((fetch_request([("big", i % 3, 0)]), 12))
        requests.append((metadata, 12) if i % 2 else (message_class("ApiVersionsRequest")(), 3))
    copied = exchange(copy, requests)
    sent = exchange(sending, requests)
    assert sendfile_calls
    assert sent == copied


# -- the net layer: file ranges over plaintext (sendfile) and TLS (read into memory) --------------------------


def _ranges_answer(path, ranges):
    """A handler answering every request with the same frame: a header, then the ranges of ``path`` given,
    with byte strings between them."""

    def answer(payload, conn):
        from kafkawire.broker.storage.segment import SegmentFile

        file = SegmentFile(path)
        parts = [b"head"]
        for i, (position, length) in enumerate(ranges):
            parts.append(FileRegion(file, position, length))
            parts.append(b"-%d-" % i)
        size = sum(len(p) for p in parts)
        return [struct.pack(">i", size), *parts]

    return answer


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "tls"])
def test_file_ranges_reach_the_peer_exactly(tmp_path, certs_dir, sendfile_calls, tls, loop):
    """Ranges of 3 MiB (more than a socket buffer takes at once: the rest goes through the transport), of
    the threshold, and below it; the peer gets the file's bytes in order, five answers pipelined."""
    import socket

    data = random.Random(5).randbytes(4 << 20)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    ranges = [(100, 3 << 20), (5, SENDFILE_MIN), (7, SENDFILE_MIN - 1), (0, 10)]
    expected = b"head" + b"".join(data[p : p + n] + b"-%d-" % i for i, (p, n) in enumerate(ranges))
    context, client_context = tls_contexts(certs_dir) if tls else (None, None)
    with ThreadedServer(_ranges_answer(str(path), ranges), context, loop) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        if client_context is not None:
            sock = client_context.wrap_socket(sock)
        with sock:
            before = len(sendfile_calls)
            for cid in range(5):
                sock.sendall(struct.pack(">ihhih", 10, 18, 0, cid, -1))
            answers = read_frames(sock, 5)
    assert all(a == expected for a in answers)
    assert (len(sendfile_calls) > before) is (not tls)


@pytest.mark.parametrize("setting", [None, "true", "false"])
def test_fetch_sendfiles_by_default_and_not_when_turned_off(tmp_path, sendfile_calls, setting):
    """A default broker sends a plaintext fetch's records with sendfile, as Kafka does; kafkawire.fetch.sendfile
    =false answers the same bytes from its mapped segments (writev), without a sendfile call."""
    from kafkawire.broker.server import start_in_thread

    props = {"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0"}
    if setting is not None:
        props["kafkawire.fetch.sendfile"] = setting
    cfg = BrokerConfig.from_properties(props)
    assert cfg.fetch_sendfile is (setting != "false")
    broker = start_in_thread(cfg)
    try:
        client = RawClient(broker.address)
        create_topic(client, "d")
        batch = plain(values(2, 60_000, seed=1))
        broker.broker.storage.partition("d", 0).append(batch)
        p = client.call(fetch_request([("d", 0, 0)]), 12).responses[0].partitions[0]
        got = list(iter_batches(bytes(p.records)))
        assert len(got) == 1 and [r.value for r in got[0].records()] == values(2, 60_000, seed=1)
        client.close()
    finally:
        broker.stop()
    assert bool(sendfile_calls) is (setting != "false"), sendfile_calls
