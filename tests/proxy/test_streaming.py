"""Large responses go on to the client while they arrive (the proxy would otherwise double a big Fetch's
transfer time): the client holds the first bytes of a frame whose end the upstream has not sent yet. A
Fetch v16+ keeps only its tail back, where KIP-951's NodeEndpoints are; when those name an upstream broker
the frame's length is already on its way, so the hint is withdrawn at the same length and the client
falls back to a metadata refresh."""

from __future__ import annotations

import asyncio

from kafkawire.protocol.api_keys import ApiKey
from kafkawire.protocol.messages import FetchRequest, FetchResponse
from kafkawire.protocol.rpc import decode_response, encode_request, encode_response, request_header
from kafkawire.proxy import Proxy, ProxyConfig
from kafkawire.proxy.addresses import WITHDRAWN_TAG
from kafkawire.proxy.relay import STREAM_MIN, TAIL_HELD

from .harness import RecordingReporter

RECORDS = bytes(range(256)) * (3 * STREAM_MIN // 256)  # opaque to the proxy: it never reads records


def _fetch_response(version: int, corr: int, endpoints: list[tuple[int, str, int]]) -> bytes:
    P = FetchResponse.PartitionData
    body = FetchResponse(
        session_id=0,
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic="t",
                partitions=[P(partition_index=0, high_watermark=10, last_stable_offset=10, records=RECORDS)],
            )
        ],
        node_endpoints=[FetchResponse.NodeEndpoint(node_id=n, host=h, port=p, rack=None) for n, h, p in endpoints],
    )
    return encode_response(corr, body, version)


class HoldingUpstream:
    """Answers the first request with ``response``, in two writes: all but the last ``rest`` bytes, then,
    once ``release`` is set, those."""

    def __init__(self, rest: int):
        self.rest = rest
        self.response = b""
        self.release = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def start(self) -> tuple[str, int]:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[:2]

    async def _handle(self, reader, writer) -> None:
        try:
            size = int.from_bytes(await reader.readexactly(4), "big")
            await reader.readexactly(size)
            writer.write(self.response[: -self.rest])
            await writer.drain()
            await asyncio.wait_for(self.release.wait(), 10)
            writer.write(self.response[-self.rest :])
            await writer.drain()
            await reader.read()  # until the proxy closes
        finally:
            writer.close()


async def _exchange(version: int, endpoints_of_upstream: bool):
    upstream = HoldingUpstream(rest=TAIL_HELD + 1000)
    host, port = await upstream.start()
    reporter = RecordingReporter()
    proxy = await Proxy(ProxyConfig("127.0.0.1", 0, [(host, port)]), reporter).start()
    upstream.response = _fetch_response(version, 7, [(1, host, port)] if endpoints_of_upstream else [])
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 30, topics=[])
        writer.write(encode_request(request_header(ApiKey.FETCH, version, 7, "streaming-test"), request))
        # the upstream now holds back its last bytes: the client already has most of the frame
        early = await asyncio.wait_for(reader.readexactly(len(upstream.response) - upstream.rest - TAIL_HELD), 10)
        upstream.release.set()
        rest = await asyncio.wait_for(reader.readexactly(len(upstream.response) - len(early)), 10)
        writer.close()
        for _ in range(100):
            if reporter.named("Fetch"):
                break
            await asyncio.sleep(0.02)
        return upstream.response, early + rest, reporter.named("Fetch"), proxy.broker_ports
    finally:
        await proxy.close()
        upstream.server.close()


def test_a_large_response_reaches_the_client_before_the_upstream_has_sent_all_of_it():
    sent, received, fetches, _ = asyncio.run(_exchange(15, endpoints_of_upstream=False))
    assert len(sent) > STREAM_MIN
    assert received == sent  # not rewritten: the same bytes
    assert len(fetches) == 1 and fetches[0].problem is None


def test_a_large_fetch_v16_without_endpoints_goes_on_unchanged():
    sent, received, fetches, _ = asyncio.run(_exchange(16, endpoints_of_upstream=False))
    assert received == sent
    assert fetches[0].problem is None


def test_a_streamed_fetch_naming_an_upstream_broker_has_its_hint_withdrawn_at_the_same_length():
    sent, received, fetches, ports = asyncio.run(_exchange(16, endpoints_of_upstream=True))
    assert len(received) == len(sent)
    differences = [i for i, (a, b) in enumerate(zip(sent, received)) if a != b]
    assert len(differences) == 1 and received[differences[0]] == WITHDRAWN_TAG
    assert differences[0] >= len(sent) - TAIL_HELD
    # the client reads no broker address it could reach around the proxy; the hint is an unknown tag now
    body = decode_response(received, ApiKey.FETCH, 16).body
    assert body.node_endpoints == []
    assert body.responses[0].partitions[0].records == RECORDS
    assert "NodeEndpoints withdrawn" in fetches[0].problem
    assert 1 in ports  # the proxy learnt where node 1 is, ready for the client's metadata refresh
