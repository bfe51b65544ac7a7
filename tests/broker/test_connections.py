"""Connection handling: what closes a connection, and that only that connection is affected."""

from __future__ import annotations

import struct

import pytest

from kafkawire.broker.config import BrokerConfig

from .conftest import msg


def alive(client) -> bool:
    return client.call(msg("ApiVersionsRequest"), 0).error_code == 0


@pytest.fixture
def broker_config():
    return BrokerConfig(port=0, storage="memory", socket_request_max_bytes=10_000)


def test_oversize_frame_closes_only_that_connection(connect):
    bad, good = connect(), connect()
    bad.send_raw(struct.pack(">i", 10_001))  # the size alone is enough: nothing is allocated for it
    assert bad.is_closed()
    assert alive(good)


def test_negative_frame_size_closes(connect):
    bad, good = connect(), connect()
    bad.send_raw(struct.pack(">i", -5))
    assert bad.is_closed()
    assert alive(good)


def test_garbage_body_closes_connection_and_others_keep_working(connect):
    bad, good = connect(), connect()
    assert alive(bad)
    # a Metadata v9 header followed by a body that does not decode
    header = struct.pack(">hhih", 3, 9, 1, 3) + b"abc" + b"\x00"
    payload = header + b"\xff\xff\xff\xff\xff"
    bad.send_raw(struct.pack(">i", len(payload)) + payload)
    assert bad.is_closed()
    assert alive(good)


def test_unknown_api_key_closes_connection(connect):
    bad, good = connect(), connect()
    payload = struct.pack(">hhih", 999, 0, 1, -1)
    bad.send_raw(struct.pack(">i", len(payload)) + payload)
    assert bad.is_closed()
    assert alive(good)


def test_unsupported_version_of_other_api_closes_connection(connect):
    bad = connect()
    payload = struct.pack(">hhih", 3, 99, 1, -1)
    bad.send_raw(struct.pack(">i", len(payload)) + payload)
    assert bad.is_closed()


def test_responses_before_the_bad_request_are_still_sent(connect):
    c = connect()
    cid = c.send(msg("ApiVersionsRequest"), 0)
    payload = struct.pack(">hhih", 999, 0, 1, -1)
    c.send_raw(struct.pack(">i", len(payload)) + payload)
    assert c.recv(18, 0, cid).error_code == 0
    assert c.is_closed()


def test_request_split_across_many_writes(connect):
    import time

    from kafkawire.protocol import encode_request, request_header

    c = connect()
    frame = encode_request(request_header(18, 0, 42, "slow"), msg("ApiVersionsRequest"))
    for i in range(len(frame)):
        c.send_raw(frame[i : i + 1])
        time.sleep(0.001)
    assert c.recv(18, 0, 42).error_code == 0


def test_idle_connections_are_closed(connect):
    from kafkawire.broker.server import start_in_thread

    from .conftest import RawClient

    b = start_in_thread(BrokerConfig(port=0, storage="memory", properties={"connections.max.idle.ms": "1000"}))
    try:
        busy, idle = RawClient(b.address), RawClient(b.address)
        assert alive(busy) and alive(idle)
        import time

        for _ in range(10):
            time.sleep(0.15)
            assert alive(busy)
        assert idle.is_closed(timeout=3)
        busy.close()
        idle.close()
    finally:
        b.stop()
