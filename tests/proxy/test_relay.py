"""The relay against a scripted upstream that records every byte: what is not rewritten arrives byte for
byte in both directions; frames that do not decode are forwarded and reported; SaslHandshake v0's bare
tokens keep the framing; an upstream that closes closes the client; a frame of impossible size ends the
connection without stopping the proxy."""

from __future__ import annotations

import asyncio

from kafkawire.protocol.api_keys import ApiKey
from kafkawire.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafkawire.protocol.rpc import decode_response, encode_request, encode_response, request_header
from kafkawire.proxy import Proxy, ProxyConfig

from .harness import RecordingReporter, ScriptedUpstream, frames


def _request(key: int, version: int, corr: int, body) -> bytes:
    return encode_request(request_header(key, version, corr, "test-client"), body)


def _produce(corr: int) -> bytes:
    PD = ProduceRequest.TopicProduceData
    body = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            PD(
                name="t",
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"records the proxy never reads")],
            )
        ],
    )
    return _request(ApiKey.PRODUCE, 9, corr, body)


def _answer_by_correlation(answers: dict[int, bytes]):
    def respond(pending: bytes):
        found = frames(pending)
        if not found:
            return 0, b"", False
        frame = found[0]
        corr = int.from_bytes(frame[8:12], "big")
        return len(frame), answers.get(corr, b""), False

    return respond


async def _with_proxy(upstream: ScriptedUpstream, body):
    address = await upstream.start()
    host, _, port = address.rpartition(":")
    reporter = RecordingReporter()
    proxy = await Proxy(ProxyConfig("127.0.0.1", 0, [(host, int(port))]), reporter).start()
    try:
        return await body(proxy, reporter)
    finally:
        await proxy.close()
        await upstream.close()


async def _read_exactly(reader: asyncio.StreamReader, n: int) -> bytes:
    return await asyncio.wait_for(reader.readexactly(n), 10)


def test_frames_not_rewritten_cross_byte_for_byte_both_ways():
    requests = [
        _request(ApiKey.API_VERSIONS, 3, 1, ApiVersionsRequest(client_software_name="x", client_software_version="1")),
        _produce(2),
        # an API key no Kafka has, with a body nobody can read
        (14).to_bytes(4, "big")
        + (999).to_bytes(2, "big")
        + (0).to_bytes(2, "big")
        + (3).to_bytes(4, "big")
        + b"\xff\xfe\x00\x01zz",
        _request(ApiKey.METADATA, 12, 4, MetadataRequest(topics=None)),
    ]
    AV = ApiVersionsResponse.ApiVersion
    answers = {
        1: encode_response(1, ApiVersionsResponse(api_keys=[AV(api_key=0, min_version=0, max_version=11)]), 3),
        2: encode_response(2, ProduceResponse(responses=[]), 9),
        3: (7).to_bytes(4, "big") + (3).to_bytes(4, "big") + b"???",
    }
    upstream = ScriptedUpstream(lambda pending: (0, b"", False))

    async def body(proxy, reporter):
        up_host, up_port = upstream.server.sockets[0].getsockname()[:2]
        answers[4] = encode_response(
            4,
            MetadataResponse(
                brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host=up_host, port=up_port, rack=None)],
                cluster_id="c",
                controller_id=1,
                topics=[],
            ),
            12,
        )
        upstream.respond = _answer_by_correlation(answers)
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        # in pieces that cut frames and headers, then several frames in one write
        stream = b"".join(requests)
        for cut in (3, 11, 40):
            writer.write(stream[:cut])
            await writer.drain()
            stream = stream[cut:]
        writer.write(stream)
        got = []
        for expected in (answers[1], answers[2], answers[3]):
            got.append(await _read_exactly(reader, len(expected)))
        size = int.from_bytes(await _read_exactly(reader, 4), "big")
        metadata = size.to_bytes(4, "big") + await _read_exactly(reader, size)
        writer.close()
        return got, metadata, proxy.broker_ports

    got, metadata, broker_ports = asyncio.run(_with_proxy(upstream, body))
    assert bytes(upstream.received[0]) == b"".join(requests)  # every request byte, unchanged
    assert got == [answers[1], answers[2], answers[3]]  # responses not rewritten: the same bytes
    brokers = decode_response(metadata, ApiKey.METADATA, 12).body.brokers
    assert [(b.node_id, b.host, b.port) for b in brokers] == [(1, "127.0.0.1", broker_ports[1])]
    assert metadata != answers[4]


def test_an_undecodable_frame_is_forwarded_and_reported():
    bad = (
        (14).to_bytes(4, "big")
        + (999).to_bytes(2, "big")
        + (0).to_bytes(2, "big")
        + (3).to_bytes(4, "big")
        + b"\xff\xfe\x00\x01zz"
    )
    # a Metadata response whose body is cut short: it cannot be rewritten, so it goes as it came
    broken_metadata = (9).to_bytes(4, "big") + (5).to_bytes(4, "big") + b"\x00\x00\x00\x00\x05"
    answers = {3: (7).to_bytes(4, "big") + (3).to_bytes(4, "big") + b"???", 5: broken_metadata}
    upstream = ScriptedUpstream(_answer_by_correlation(answers))

    async def body(proxy, reporter):
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(bad + _request(ApiKey.METADATA, 9, 5, MetadataRequest(topics=None)))
        first = await _read_exactly(reader, len(answers[3]))
        second = await _read_exactly(reader, len(broken_metadata))
        writer.close()
        return first, second, reporter

    first, second, reporter = asyncio.run(_with_proxy(upstream, body))
    assert (first, second) == (answers[3], broken_metadata)
    by_corr = {e.correlation_id: e for e in reporter.exchanges}
    assert by_corr[3].api_name == "api999" and "request does not decode" in by_corr[3].problem
    assert by_corr[5].api_name == "Metadata" and "forwarded as received" in by_corr[5].problem
    assert "!! response not rewritten" in reporter.text.getvalue()


def test_sasl_handshake_v0_bare_tokens_keep_the_framing():
    token = b"\x00alice\x00secret"
    stage = {"n": 0}

    def respond(pending: bytes):
        found = frames(pending)
        if not found:
            return 0, b"", False
        frame = found[0]
        stage["n"] += 1
        if stage["n"] == 1:  # the handshake
            return len(frame), encode_response(1, SaslHandshakeResponse(error_code=0, mechanisms=["PLAIN"]), 0), False
        if stage["n"] == 2:  # the bare token: answered by an empty bare token
            assert frame[4:] == token
            return len(frame), b"\x00\x00\x00\x00", False
        corr = int.from_bytes(frame[8:12], "big")
        return len(frame), encode_response(corr, ApiVersionsResponse(api_keys=[]), 3), False

    upstream = ScriptedUpstream(respond)
    handshake = _request(ApiKey.SASL_HANDSHAKE, 0, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    api_versions = _request(
        ApiKey.API_VERSIONS, 3, 2, ApiVersionsRequest(client_software_name="x", client_software_version="1")
    )

    async def body(proxy, reporter):
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(handshake)
        size = int.from_bytes(await _read_exactly(reader, 4), "big")
        await _read_exactly(reader, size)
        writer.write(len(token).to_bytes(4, "big") + token)
        empty = await _read_exactly(reader, 4)
        writer.write(api_versions)
        size = int.from_bytes(await _read_exactly(reader, 4), "big")
        answer = await _read_exactly(reader, size)
        writer.close()
        return empty, answer, reporter

    empty, answer, reporter = asyncio.run(_with_proxy(upstream, body))
    assert empty == b"\x00\x00\x00\x00"
    assert decode_response(answer, ApiKey.API_VERSIONS, 3, framed=False).header.correlation_id == 2
    assert [(e.api_name, e.correlation_id, e.problem) for e in reporter.exchanges] == [
        ("SaslHandshake", 1, None),
        ("ApiVersions", 2, None),
    ]
    assert reporter.sasl_tokens == 2
    assert bytes(upstream.received[0]) == handshake + len(token).to_bytes(4, "big") + token + api_versions


def test_an_upstream_that_closes_closes_the_client():
    upstream = ScriptedUpstream(lambda pending: (len(pending), b"", True))

    async def body(proxy, reporter):
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(_request(ApiKey.METADATA, 9, 1, MetadataRequest(topics=None)))
        rest = await asyncio.wait_for(reader.read(), 10)  # EOF, not a hang
        writer.close()
        return rest, reporter

    rest, reporter = asyncio.run(_with_proxy(upstream, body))
    assert rest == b""
    assert [(e.api_name, e.problem) for e in reporter.exchanges] == [
        ("Metadata", "no response before the connection closed")
    ]


def test_an_impossible_frame_size_ends_that_connection_only():
    answers = {1: encode_response(1, ApiVersionsResponse(api_keys=[]), 3)}
    upstream = ScriptedUpstream(_answer_by_correlation(answers))
    api_versions = _request(
        ApiKey.API_VERSIONS, 3, 1, ApiVersionsRequest(client_software_name="x", client_software_version="1")
    )

    async def body(proxy, reporter):
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"\x7f\xff\xff\xff" + b"x" * 100)
        rest = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        # the proxy still serves others
        reader2, writer2 = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer2.write(api_versions)
        answer = await _read_exactly(reader2, len(answers[1]))
        writer2.close()
        return rest, answer, reporter

    rest, answer, reporter = asyncio.run(_with_proxy(upstream, body))
    assert rest == b"" and answer == answers[1]
    problems = [e.problem for e in reporter.exchanges if e.api_key is None]
    assert len(problems) == 1 and "frame size 2147483647" in problems[0] and "connection closed" in problems[0]


def test_connections_beyond_the_limit_are_refused_and_the_others_served():
    answers = {1: encode_response(1, ApiVersionsResponse(api_keys=[]), 3)}
    upstream = ScriptedUpstream(_answer_by_correlation(answers))
    api_versions = _request(
        ApiKey.API_VERSIONS, 3, 1, ApiVersionsRequest(client_software_name="x", client_software_version="1")
    )

    async def body():
        address = await upstream.start()
        host, _, port = address.rpartition(":")
        reporter = RecordingReporter()
        proxy = await Proxy(ProxyConfig("127.0.0.1", 0, [(host, int(port))], max_connections=2), reporter).start()
        try:
            kept = [await asyncio.open_connection("127.0.0.1", proxy.port) for _ in range(2)]
            for reader, writer in kept:  # both served
                writer.write(api_versions)
                assert await _read_exactly(reader, len(answers[1])) == answers[1]
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            refused = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            for _, w in kept:
                w.close()
            return refused, reporter.notes
        finally:
            await proxy.close()
            await upstream.close()

    refused, notes = asyncio.run(body())
    assert refused == b""
    assert len(notes) == 1 and "refused, 2 connections already" in notes[0]
