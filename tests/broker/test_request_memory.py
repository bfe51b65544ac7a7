"""queued.max.request.bytes: the bytes of requests being received or waiting for an answer are bounded
across connections; reading pauses (backpressure) instead of buffering without limit."""

from __future__ import annotations

import select
import socket
import struct
import time

import pytest

from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.server import start_in_thread
from kafkawire.protocol import message_class

from .conftest import RawClient
from .helpers import batch, create_topic, produce_request

MB = 1 << 20


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def api_versions_ok(address) -> bool:
    c = RawClient(address, timeout=10)
    try:
        AV = message_class("ApiVersionsRequest")
        return c.call(AV(client_software_name="t", client_software_version="1"), 3).error_code == 0
    finally:
        c.close()


# 50 connections each announce a 100 MB frame and send 60 MB of it. Without a budget the broker buffers
# all of it (3 GB); with queued.max.request.bytes=16 MiB it reads one frame (which may exceed the budget
# alone) and about one socket read per other connection. Bound on the growth of this process's RSS:
RSS_GROWTH_BOUND = 200 * MB
SAFETY_STOP = 400 * MB  # the senders stop here, so that a broker without the budget fails the test cheaply


@pytest.mark.skipif(not hasattr(socket, "MSG_DONTWAIT"), reason="needs Linux sockets")
def test_fifty_partial_large_frames_keep_memory_bounded():
    cfg = BrokerConfig(port=0, storage="memory")
    cfg.queued_max_request_bytes = 16 * MB
    cfg.socket_request_max_bytes = 100 * MB
    with start_in_thread(cfg) as broker:
        base = rss_bytes()
        chunk = memoryview(b"\0" * MB)
        socks, sent = [], []
        for _ in range(50):
            s = socket.create_connection(broker.address)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 256 * 1024)
            s.sendall(struct.pack(">i", 100 * MB))
            s.setblocking(False)
            socks.append(s)
            sent.append(0)
        peak = 0
        try:
            deadline = time.monotonic() + 20.0
            last_progress = time.monotonic()
            while time.monotonic() < deadline and time.monotonic() - last_progress < 2.0:
                todo = [s for s, n in zip(socks, sent) if n < 60 * MB]
                if not todo:
                    break
                _, writable, _ = select.select([], todo, [], 0.2)
                for s in writable:
                    i = socks.index(s)
                    try:
                        n = s.send(chunk[: min(MB, 60 * MB - sent[i])])
                    except BlockingIOError:
                        continue
                    sent[i] += n
                    last_progress = time.monotonic()
                peak = max(peak, rss_bytes() - base)
                if peak > SAFETY_STOP:
                    break
            time.sleep(0.5)
            peak = max(peak, rss_bytes() - base)
            assert peak < RSS_GROWTH_BOUND, f"RSS grew by {peak / MB:.0f} MB ({sum(sent) / MB:.0f} MB sent)"
            assert sum(sent) > 60 * MB, "the broker read no whole partial frame"
            server = broker.broker.server
            assert server.queued_bytes >= 16 * MB
            assert len(server._memory_waiters) >= 40
        finally:
            for s in socks:
                s.close()
        # the budget comes back when those connections go, and requests are read again
        end = time.monotonic() + 10
        while broker.broker.server.queued_bytes and time.monotonic() < end:
            time.sleep(0.05)
        assert broker.broker.server.queued_bytes == 0
        assert api_versions_ok(broker.address)


def test_many_clients_over_a_small_budget_are_all_answered():
    """1 MiB budget, 10 clients pipelining 300 KB produce requests: reads pause and resume, nothing stalls."""
    cfg = BrokerConfig(port=0, storage="memory")
    cfg.queued_max_request_bytes = MB
    with start_in_thread(cfg) as broker:
        admin = RawClient(broker.address)
        create_topic(admin, "t")
        admin.close()
        clients = [RawClient(broker.address, timeout=20) for _ in range(10)]
        try:
            payload = batch([b"x" * 300_000])
            ids = [[c.send(produce_request("t", 0, payload, acks=1), 9) for _ in range(5)] for c in clients]
            for c, cids in zip(clients, ids):
                for cid in cids:
                    res = c.recv(0, 9, cid)
                    assert res.responses[0].partition_responses[0].error_code == 0
        finally:
            for c in clients:
                c.close()
        assert broker.call(lambda: broker.broker.server.queued_bytes) == 0


def test_a_frame_above_socket_request_max_bytes_closes_only_that_connection(broker, client, connect):
    other = connect()
    client.send_raw(struct.pack(">i", broker.broker.config.socket_request_max_bytes + 1))
    assert client.is_closed()
    assert api_versions_ok(broker.address)
    AV = message_class("ApiVersionsRequest")
    assert other.call(AV(client_software_name="t", client_software_version="1"), 3).error_code == 0
