"""Byte for byte with a real client: librdkafka produces and consumes (in a group) through the proxy to
kafkawire's broker, behind a recording relay (the broker advertises the relay's address, so every upstream
connection passes it). On every connection the client's request bytes are exactly those the upstream got,
and every response frame the client got is the upstream's, except the responses that carry broker
addresses, which differ only in those addresses. The client side is the proxy's pcapng of what it read and
wrote."""

from __future__ import annotations

import time

import pytest

from kafkawire.protocol.api_keys import ApiKey
from kafkawire.protocol.rpc import decode_request, decode_response
from kafkawire.proxy.addresses import rewrites
from kafkawire.testing._process import free_port
from kafkawire.tools.capture import read_packets, tcp_segment

from .harness import ProxyThread, Tee, frames


@pytest.fixture
def teed_upstream():
    import kafkawire.testing

    port = free_port()
    with kafkawire.testing.broker(config={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}"}) as broker:
        tee = Tee(port, (broker.host, broker.port))
        try:
            yield f"127.0.0.1:{port}", tee
        finally:
            tee.close()


def _client_streams(capture: bytes) -> list[tuple[bytes, bytes]]:
    flows: dict[tuple[int, int], tuple[bytearray, bytearray]] = {}
    for packet in read_packets(capture):
        seg = tcp_segment(packet)
        if seg.syn and not seg.has_ack:
            flows[(seg.sport, seg.dport)] = (bytearray(), bytearray())
        if (seg.sport, seg.dport) in flows:
            flows[(seg.sport, seg.dport)][0].extend(seg.payload)
        elif (seg.dport, seg.sport) in flows:
            flows[(seg.dport, seg.sport)][1].extend(seg.payload)
    return [(bytes(a), bytes(b)) for a, b in flows.values()]


def _brokerless(api_key: int, version: int, frame: bytes):
    """The decoded body with every broker address blanked, to compare the rest."""
    body = decode_response(frame, api_key, version).body
    items = []
    if api_key in (ApiKey.METADATA, ApiKey.DESCRIBE_CLUSTER):
        items = body.brokers
    elif api_key == ApiKey.FIND_COORDINATOR:
        items = [body] if version < 4 else body.coordinators
    elif hasattr(body, "node_endpoints"):
        items = body.node_endpoints
    for item in items:
        item.host, item.port = "", 0
    return body


def test_librdkafka_traffic_crosses_byte_for_byte_except_broker_addresses(teed_upstream, tmp_path):
    from confluent_kafka import Consumer, Producer

    address, tee = teed_upstream
    capture = tmp_path / "client-side.pcapng"
    with ProxyThread(address, pcap_path=capture) as proxy:
        producer = Producer({"bootstrap.servers": proxy.bootstrap})
        for i in range(30):
            producer.produce("proxy-bytes", f"value-{i}".encode(), key=f"k{i % 3}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer(
            {"bootstrap.servers": proxy.bootstrap, "group.id": "bytes", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe(["proxy-bytes"])
        got = 0
        deadline = time.monotonic() + 60
        while got < 30 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got += 1
        consumer.close()
        assert got == 30
    upstream = [(bytes(a), bytes(b)) for a, b in tee.streams]
    client = _client_streams(capture.read_bytes())
    assert len(client) == len(upstream) >= 3
    rewritten = identical = 0
    for requests, responses in client:
        matches = [u for u in upstream if u[0] == requests]  # the same request bytes, byte for byte
        assert len(matches) >= 1, "a client connection whose requests the upstream did not get as sent"
        up_responses = frames(matches[0][1])
        sent = {}
        for frame in frames(requests):
            r = decode_request(frame)
            sent[r.header.correlation_id] = (r.api_key, r.api_version)
        ours = frames(responses)
        assert len(ours) == len(up_responses)
        for mine, theirs in zip(ours, up_responses):
            api_key, version = sent[int.from_bytes(mine[4:8], "big")]
            if mine == theirs:
                identical += 1
                continue
            assert rewrites(api_key, version), f"API {api_key} v{version} changed on the way"
            assert mine[4:8] == theirs[4:8]
            assert _brokerless(api_key, version, mine) == _brokerless(api_key, version, theirs)
            rewritten += 1
    assert rewritten >= 3 and identical >= 10  # Metadata and FindCoordinator at least; the rest untouched
