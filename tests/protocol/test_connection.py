"""The sans-IO protocol connection: bytes in, events out, for the server, client and observer sides."""

from __future__ import annotations

import struct

import pytest

from kafkawire.protocol import ApiKey, DecodeError, encode_request, encode_response, frame, request_header
from kafkawire.protocol.connection import (
    NEED_DATA,
    NeedData,
    ProtocolConnection,
    ProtocolViolation,
    RequestReceived,
    ResponseReceived,
    Role,
    SaslTokenReceived,
    StreamEnded,
    Violation,
    produce_acks,
)
from kafkawire.protocol.framing import DEFAULT_MAX_FRAME
from kafkawire.protocol.messages import message_class

from .frames import API_VERSIONS_REQUEST_V3, DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0

UNSUPPORTED_VERSION = 35


def server(**kw) -> ProtocolConnection:
    return ProtocolConnection(Role.SERVER, **kw)


def client(**kw) -> ProtocolConnection:
    return ProtocolConnection(Role.CLIENT, **kw)


def drain(conn: ProtocolConnection) -> list:
    """Every event up to (not including) the NeedData that ends them."""
    out = []
    for _ in range(1000):
        event = conn.next_event()
        if type(event) is NeedData:
            return out
        out.append(event)
        if type(event) is StreamEnded or (type(event) is ProtocolViolation and event.fatal):
            return out
    raise AssertionError("no NeedData after 1000 events")


def metadata_request(corr: int, version: int = 9) -> bytes:
    body = message_class("MetadataRequest")(topics=[])
    return encode_request(request_header(ApiKey.METADATA, version, corr, "c1"), body)


def produce_request(corr: int, acks: int, version: int = 9, transactional_id: str | None = None) -> bytes:
    body = message_class("ProduceRequest")(acks=acks, timeout_ms=1000, transactional_id=transactional_id, topic_data=[])
    return encode_request(request_header(ApiKey.PRODUCE, version, corr, "producer-1"), body)


# --------------------------------------------------------------------------- framing

STREAM = API_VERSIONS_REQUEST_V3 + DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0 + metadata_request(9)


def test_a_stream_split_at_every_byte_boundary_gives_the_same_requests():
    whole = server()
    whole.receive_data(STREAM)
    expected = drain(whole)
    assert [(e.api_key, e.api_version, e.correlation_id) for e in expected] == [
        (18, 3, 7),
        (75, 0, 1486810363),
        (3, 9, 9),
    ]
    assert [e.offset for e in expected] == [
        0,
        len(API_VERSIONS_REQUEST_V3),
        len(API_VERSIONS_REQUEST_V3) + len(DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0),
    ]
    for cut in range(len(STREAM) + 1):
        conn = server()
        conn.receive_data(STREAM[:cut])
        got = drain(conn)
        conn.receive_data(STREAM[cut:])
        got += drain(conn)
        assert got == expected, f"split at byte {cut}"
        assert conn.buffered == 0


def test_a_stream_fed_one_byte_at_a_time_gives_the_same_requests():
    conn = server()
    got = []
    for i in range(len(STREAM)):
        conn.receive_data(STREAM[i : i + 1])
        got += drain(conn)
    assert [bytes(e.payload) for e in got] == [
        API_VERSIONS_REQUEST_V3[4:],
        DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0[4:],
        metadata_request(9)[4:],
    ]


def test_several_frames_in_one_chunk_come_out_in_order_and_a_partial_one_waits():
    conn = server()
    conn.receive_data(API_VERSIONS_REQUEST_V3 * 3 + API_VERSIONS_REQUEST_V3[:-5])
    assert len(drain(conn)) == 3
    assert conn.buffered == len(API_VERSIONS_REQUEST_V3) - 5
    conn.receive_data(API_VERSIONS_REQUEST_V3[-5:])
    (last,) = drain(conn)
    assert last.offset == 3 * len(API_VERSIONS_REQUEST_V3)


def test_the_size_of_a_frame_in_progress_is_known_once_its_prefix_is_in():
    conn = server()
    conn.receive_data(API_VERSIONS_REQUEST_V3[:3])
    assert conn.next_event() == NEED_DATA
    conn.receive_data(API_VERSIONS_REQUEST_V3[3:6])
    assert conn.next_event() == NeedData(len(API_VERSIONS_REQUEST_V3) - 4)


def test_a_request_payload_is_a_writable_copy_of_its_frame():
    conn = server()
    conn.receive_data(API_VERSIONS_REQUEST_V3 * 2)
    first, second = drain(conn)
    assert isinstance(first.payload, bytearray)
    first.payload[-1] ^= 0xFF  # a broker patching records in place touches only its own request
    assert bytes(second.payload) == API_VERSIONS_REQUEST_V3[4:]


def big_produce_request(corr: int, size: int) -> bytes:
    """A produce request of about ``size`` bytes (its records opaque here: framing does not read them)."""
    records = bytes((corr * 31 + i * 7) & 0xFF for i in range(251)) * (size // 251)
    body = message_class("ProduceRequest")(
        acks=1,
        timeout_ms=1000,
        transactional_id=None,
        topic_data=[
            message_class("ProduceRequest").TopicProduceData(
                name="t",
                partition_data=[message_class("ProduceRequest").PartitionProduceData(index=0, records=records)],
            )
        ],
    )
    return encode_request(request_header(ApiKey.PRODUCE, 9, corr, "producer-1"), body)


LARGE_STREAM = [
    big_produce_request(1, 200_000),
    API_VERSIONS_REQUEST_V3,
    big_produce_request(2, 70_000),
    big_produce_request(3, 300_000),
    big_produce_request(4, 65_000),  # just under the hand-over size: copied
    API_VERSIONS_REQUEST_V3,
]


@pytest.mark.parametrize("role", ["server", "observer"])
@pytest.mark.parametrize("chunk", [997, 4096, 65_536, 150_001, 10**7])
def test_large_request_frames_come_out_whole_in_order_at_their_offsets(role, chunk):
    # frames of 64 KiB and more may be handed over as the receive buffer itself (_Inbound.take): whatever the
    # chunks, each payload is its frame's bytes, writable and its own, and the stream offsets stay right
    stream = b"".join(LARGE_STREAM)
    conn = server() if role == "server" else observer()
    got = []
    for i in range(0, len(stream), chunk):
        if role == "server":
            conn.receive_data(stream[i : i + chunk])
        else:
            conn.receive_data(stream[i : i + chunk], from_client=True)
        for event in drain(conn):
            assert isinstance(event.payload, bytearray)
            got.append((event.offset, bytes(event.payload)))
            event.payload[:] = b"\0" * len(event.payload)  # a broker patching it touches only its own frame
    offsets = [sum(len(f) for f in LARGE_STREAM[:k]) for k in range(len(LARGE_STREAM))]
    assert got == [(offset, f[4:]) for offset, f in zip(offsets, LARGE_STREAM)]
    assert conn.buffered == 0


def test_a_large_frame_that_is_most_of_the_buffer_is_handed_over_not_copied():
    conn = server()
    big = big_produce_request(1, 200_000)
    conn.receive_data(big + API_VERSIONS_REQUEST_V3[:9])
    held = conn._from_client.buf
    event = conn.next_event()
    assert event.payload is held  # the buffer itself, its size prefix and the next frame's start cut off
    assert bytes(event.payload) == big[4:]
    assert conn.next_event() == NeedData(len(API_VERSIONS_REQUEST_V3) - 4)
    conn.receive_data(API_VERSIONS_REQUEST_V3[9:])
    (last,) = drain(conn)
    assert (last.offset, bytes(last.payload)) == (len(big), API_VERSIONS_REQUEST_V3[4:])


def test_a_large_frame_is_copied_while_a_view_of_the_buffer_is_alive():
    conn = server()
    big = big_produce_request(1, 200_000)
    conn.receive_data(big)
    held = conn._from_client.buf
    with memoryview(held):  # a buffer with a view cannot be resized: the frame is copied instead
        event = conn.next_event()
    assert event.payload is not held
    assert bytes(event.payload) == big[4:]
    conn.receive_data(API_VERSIONS_REQUEST_V3)
    (last,) = drain(conn)
    assert (last.offset, bytes(last.payload)) == (len(big), API_VERSIONS_REQUEST_V3[4:])


# --------------------------------------------------------------------------- reading into given buffers


def read_into(conn: ProtocolConnection, data: bytes, piece: int) -> list:
    """What a BufferedProtocol shell does with ``data`` arriving ``piece`` bytes per read: into the direct
    buffer when the connection gives one, else into scratch and ``receive_data``; the events after each read.
    Returns (events, how many requests were read into their own buffers)."""
    events, direct, i, was_direct = [], 0, 0, False
    while i < len(data):
        view = conn.direct_buffer()
        if view is None:
            n = min(piece, len(data) - i)
            conn.receive_data(bytearray(data[i : i + n]))
        else:
            n = min(piece, len(data) - i, len(view))
            view[:n] = data[i : i + n]
            view.release()
            direct += not was_direct
            conn.direct_received(n)
        was_direct = view is not None
        i += n
        events += drain(conn)
    return events, direct


@pytest.mark.parametrize("piece", [1000, 65_536, 262_144, 10**7])
def test_large_requests_read_into_their_own_buffers_come_out_whole_in_order_at_their_offsets(piece):
    stream = b"".join(LARGE_STREAM)
    conn = server()
    events, direct = read_into(conn, stream, piece)
    offsets = [sum(len(f) for f in LARGE_STREAM[:k]) for k in range(len(LARGE_STREAM))]
    assert [(e.offset, bytes(e.payload)) for e in events] == [(o, f[4:]) for o, f in zip(offsets, LARGE_STREAM)]
    assert all(type(e) is RequestReceived and isinstance(e.payload, bytearray) for e in events)
    assert [e.correlation_id for e in events] == [1, 7, 2, 3, 4, 7]
    # the three requests of 64 KiB and more (not the one just under) are read, after the read that brings their
    # size prefix, into their own buffers; one read of everything leaves nothing to read into them
    assert direct == {1000: 3, 65_536: 3, 262_144: 2, 10**7: 0}[piece]
    assert conn.buffered == 0 and conn.direct_buffer() is None


def test_a_direct_buffer_is_the_unfilled_rest_of_the_request_and_only_for_large_ones():
    conn = server()
    big = big_produce_request(1, 100_000)
    conn.receive_data(big[:3])
    assert conn.direct_buffer() is None  # the size prefix is not in yet
    conn.receive_data(big[3:1000])
    assert conn.next_event() == NeedData(len(big) - 4)
    view = conn.direct_buffer()
    assert len(view) == len(big) - 1000  # exactly what is missing: a read never runs into the next request
    assert conn.buffered == 1000
    view[:] = big[1000:]
    assert conn.direct_received(len(view)) is True
    view.release()
    assert conn.direct_buffer() is None  # the whole request goes out before another is started
    conn.receive_data(API_VERSIONS_REQUEST_V3)
    first, second = drain(conn)
    assert bytes(first.payload) == big[4:] and first.offset == 0
    first.payload.extend(b"resizable")  # the payload is the handler's own buffer
    assert (second.offset, bytes(second.payload)) == (len(big), API_VERSIONS_REQUEST_V3[4:])
    small = server()
    small.receive_data(API_VERSIONS_REQUEST_V3[:10])
    assert small.direct_buffer() is None  # below DIRECT_MIN: the copying way


def test_bytes_given_the_copying_way_during_a_direct_read_fill_it_first():
    conn = server()
    big = big_produce_request(1, 100_000)
    conn.receive_data(big[:5000])
    conn.direct_buffer().release()  # started
    conn.receive_data(big[5000:] + API_VERSIONS_REQUEST_V3)
    first, second = drain(conn)
    assert bytes(first.payload) == big[4:]
    assert (second.offset, bytes(second.payload)) == (len(big), API_VERSIONS_REQUEST_V3[4:])


def test_no_direct_reads_before_authentication_or_for_sasl_tokens():
    big = big_produce_request(1, 100_000)
    guarded = server()
    guarded.require_authentication()
    guarded.receive_data(big[:1000])
    assert guarded.direct_buffer() is None
    tokens = server()
    tokens.start_sasl_tokens()
    tokens.receive_data(big[:1000])
    assert tokens.direct_buffer() is None
    assert client().direct_buffer() is None and observer().direct_buffer() is None


def test_the_stream_ending_inside_a_direct_read_is_truncated():
    conn = server()
    big = big_produce_request(1, 100_000)
    conn.receive_data(big[:1000])
    view = conn.direct_buffer()
    view[:500] = big[1000:1500]
    view.release()
    conn.direct_received(500)
    assert conn.next_event() == NeedData(len(big) - 4)
    conn.receive_eof()
    violation = conn.next_event()
    assert violation.kind is Violation.TRUNCATED and violation.fatal and violation.offset == 0
    assert violation.message == f"stream ends inside a frame: 1500 of {len(big)} bytes"


def test_a_frame_above_max_frame_is_refused_from_its_size_prefix_alone():
    conn = server(max_frame=1000)
    conn.receive_data(frame(b"x" * 1000) + struct.pack(">i", 1001))  # a frame at the limit, then only a size
    (ok,) = [e for e in drain(conn) if type(e) is RequestReceived]
    assert len(ok.payload) == 1000
    violation = conn.next_event()
    assert violation.kind is Violation.FRAME_TOO_LARGE and violation.fatal
    assert violation.message == "frame size 1001 is outside [0, 1000]"
    assert violation.offset == 1004 and violation.size == 1001
    conn.receive_data(API_VERSIONS_REQUEST_V3)  # nothing after it means anything any more
    assert conn.next_event() is violation and conn.broken is violation


def test_the_default_limit_is_kafkas_socket_request_max_bytes():
    assert DEFAULT_MAX_FRAME == 104857600
    conn = server()
    conn.receive_data(b"\x7f\xff\xff\xff")  # 2 GiB
    assert conn.next_event().kind is Violation.FRAME_TOO_LARGE


def test_a_negative_size_is_fatal():
    conn = client()
    conn.receive_data(b"\xff\xff\xff\xfe")
    violation = conn.next_event()
    assert violation.kind is Violation.NEGATIVE_SIZE and violation.fatal and violation.size == -2
    assert violation.message == "frame size -2 is outside [0, 104857600]"


def test_a_request_too_short_for_its_header_prefix_is_reported_and_framing_goes_on():
    conn = server()
    conn.receive_data(frame(b"\x00\x12\x00") + API_VERSIONS_REQUEST_V3)
    short, request = drain(conn)
    assert short.kind is Violation.SHORT_FRAME and not short.fatal and bytes(short.payload) == b"\x00\x12\x00"
    assert "3 bytes is shorter than the 8-byte header prefix" in short.message
    assert request.correlation_id == 7


def test_the_stream_ending_between_frames_is_a_clean_end_and_inside_one_is_truncated():
    conn = server()
    conn.receive_data(API_VERSIONS_REQUEST_V3)
    conn.receive_eof()
    assert [type(e) for e in drain(conn)] == [RequestReceived, StreamEnded]
    cut = server()
    cut.receive_data(API_VERSIONS_REQUEST_V3[:-1])
    assert cut.next_event() == NeedData(len(API_VERSIONS_REQUEST_V3) - 4)
    cut.receive_eof()
    violation = cut.next_event()
    assert violation.kind is Violation.TRUNCATED and violation.fatal
    assert (
        violation.message == f"stream ends inside a frame: {len(API_VERSIONS_REQUEST_V3) - 1} of "
        f"{len(API_VERSIONS_REQUEST_V3)} bytes"
    )


def test_a_request_body_is_not_decoded_until_asked():
    header_only = metadata_request(5)[4:16]  # a Metadata v9 request's prefix and client id, then no valid body
    conn = server()
    conn.receive_data(frame(header_only + b"\xff\xff\xff"))
    (request,) = drain(conn)
    assert (request.api_key, request.api_version, request.correlation_id) == (3, 9, 5)
    with pytest.raises(DecodeError):
        request.decode()


# --------------------------------------------------------------------------- client: matching responses


def test_the_client_numbers_requests_and_matches_responses_to_their_api_and_version():
    conn = client(client_id="c1")
    sent = {}
    for version in (4, 9, 12):
        conn.send_request(message_class("MetadataRequest")(topics=[]), version, tag=f"v{version}")
        sent[conn.last_correlation_id] = version
    assert list(sent) == [1, 2, 3]
    for corr in (1, 2, 3):
        body = message_class("MetadataResponse")(throttle_time_ms=corr)
        conn.receive_data(encode_response(corr, body, sent[corr]))
    events = drain(conn)
    assert [(e.correlation_id, e.api_version, e.tag) for e in events] == [(1, 4, "v4"), (2, 9, "v9"), (3, 12, "v12")]
    assert [e.decode().body.throttle_time_ms for e in events] == [1, 2, 3]
    assert conn.pending == {}


def test_a_response_with_an_unknown_correlation_id_is_reported_and_the_next_one_still_pairs():
    conn = client()
    conn.send_request(message_class("ApiVersionsRequest")(), 3)
    body = message_class("ApiVersionsResponse")()
    conn.receive_data(encode_response(99, body, 3) + encode_response(1, body, 3))
    stray, answer = drain(conn)
    assert stray.kind is Violation.UNKNOWN_CORRELATION_ID and not stray.fatal and stray.correlation_id == 99
    assert type(answer) is ResponseReceived and answer.correlation_id == 1


def test_a_forgotten_request_gets_its_late_response_reported_as_unknown():
    conn = client()
    conn.send_request(message_class("ApiVersionsRequest")(), 3)
    assert conn.forget(1) is not None and conn.pending == {}
    conn.receive_data(encode_response(1, message_class("ApiVersionsResponse")(), 3))
    assert conn.next_event().kind is Violation.UNKNOWN_CORRELATION_ID


def test_a_response_too_short_for_a_correlation_id():
    conn = client()
    conn.receive_data(frame(b"\x00\x01"))
    violation = conn.next_event()
    assert violation.kind is Violation.SHORT_FRAME and violation.message == "response of 2 bytes has no correlation id"


def test_correlation_ids_stay_non_negative_when_they_wrap():
    conn = client(first_correlation_id=0x7FFFFFFF)
    ids = []
    for _ in range(2):
        conn.send_request(message_class("ApiVersionsRequest")(), 3)
        ids.append(conn.last_correlation_id)
    assert ids == [0x7FFFFFFF, 0]


@pytest.mark.parametrize("acks,expects", [(0, False), (1, True), (-1, True)])
def test_produce_with_acks_zero_waits_for_no_response(acks, expects):
    conn = client()
    conn.send_request(message_class("ProduceRequest")(acks=acks, timeout_ms=1000, topic_data=[]), 9)
    assert (conn.expected(conn.last_correlation_id) is not None) is expects
    incoming = server()
    incoming.receive_data(produce_request(4, acks))
    assert incoming.next_event().expects_response is expects


@pytest.mark.parametrize(
    "version,transactional_id", [(2, None), (3, None), (3, "tx-1"), (8, "tx-1"), (9, None), (9, "tx-1"), (13, "tx-1")]
)
def test_acks_is_read_from_the_header_end_at_every_layout(version, transactional_id):
    payload = produce_request(1, 0, version, transactional_id)[4:]
    assert produce_acks(payload, version) == 0
    assert produce_acks(payload[:12], version) is None  # cut before acks


# --------------------------------------------------------------------------- headers


@pytest.mark.parametrize(
    "version,request_header_version,response_header_version", [(8, 1, 0), (9, 2, 1)], ids=["non-flexible", "flexible"]
)
def test_flexible_and_non_flexible_headers_round_trip(version, request_header_version, response_header_version):
    out = client(client_id="c1")
    incoming = server()
    incoming.receive_data(out.send_request(message_class("MetadataRequest")(topics=[]), version))
    request = incoming.next_event()
    decoded = request.decode(strict=True)
    assert decoded.header_version == request_header_version and decoded.header.client_id == "c1"
    answer = incoming.send_response(request, message_class("MetadataResponse")(cluster_id="k"))
    out.receive_data(answer)
    response = out.next_event().decode(strict=True)
    assert response.header_version == response_header_version and response.body.cluster_id == "k"


# --------------------------------------------------------------------------- ApiVersions fallback


def test_a_server_answers_an_api_versions_request_it_does_not_support_in_a_v0_body():
    conn = server(api_versions=(0, 3))
    conn.receive_data(encode_request(request_header(18, 3, 1, "a"), message_class("ApiVersionsRequest")()))
    raw = struct.pack(">hhih", 18, 7, 2, 1) + b"b" + b"\x00\x00\x00"  # v7: unknown to this side
    conn.receive_data(frame(raw))
    known, unknown = drain(conn)
    assert (known.api_version, known.response_version) == (3, 3)
    assert (unknown.api_version, unknown.response_version) == (7, 0)
    body = message_class("ApiVersionsResponse")(error_code=UNSUPPORTED_VERSION)
    assert conn.send_response(unknown, body) == encode_response(2, body, 0)


def test_only_api_versions_gets_the_fallback():
    conn = server(api_versions=(0, 3))
    conn.receive_data(metadata_request(1, version=12))
    request = conn.next_event()
    assert request.response_version == request.api_version == 12


def test_a_client_reads_an_unsupported_version_answer_as_v0_and_others_at_their_version():
    conn = client()
    conn.send_request(message_class("ApiVersionsRequest")(), 4)
    conn.send_request(message_class("ApiVersionsRequest")(), 3)
    ranges = [message_class("ApiVersionsResponse").ApiVersion(api_key=18, min_version=0, max_version=2)]
    refused = message_class("ApiVersionsResponse")(error_code=UNSUPPORTED_VERSION, api_keys=ranges)
    accepted = message_class("ApiVersionsResponse")(error_code=0, api_keys=ranges, throttle_time_ms=5)
    conn.receive_data(encode_response(1, refused, 0) + encode_response(2, accepted, 3))
    first, second = drain(conn)
    assert (first.api_version, first.body_version) == (4, 0)
    decoded = first.decode(strict=True)
    assert decoded.header_version == 0 and decoded.body.error_code == UNSUPPORTED_VERSION
    assert [(k.api_key, k.max_version) for k in decoded.body.api_keys] == [(18, 2)]
    assert second.body_version == 3 and second.decode(strict=True).body.throttle_time_ms == 5


# --------------------------------------------------------------------------- observer


def observer() -> ProtocolConnection:
    return ProtocolConnection(Role.OBSERVER)


def test_an_observer_pairs_responses_with_requests_across_chunks():
    conn = observer()
    requests = metadata_request(1, 9) + API_VERSIONS_REQUEST_V3  # correlation ids 1 and 7
    responses = encode_response(1, message_class("MetadataResponse")(), 9) + encode_response(
        7, message_class("ApiVersionsResponse")(), 3
    )
    for i in range(0, len(requests), 5):
        conn.receive_data(requests[i : i + 5], from_client=True)
    for i in range(0, len(responses), 7):
        conn.receive_data(responses[i : i + 7], from_client=False)
    events = drain(conn)
    assert [(type(e).__name__, e.api_key, e.api_version, e.correlation_id) for e in events] == [
        ("RequestReceived", 3, 9, 1),
        ("RequestReceived", 18, 3, 7),
        ("ResponseReceived", 3, 9, 1),
        ("ResponseReceived", 18, 3, 7),
    ]
    assert all(e.overtook == () for e in events[2:])
    assert events[3].decode(strict=True).body.error_code == 0


def test_an_observer_reports_a_response_that_overtakes_earlier_requests():
    conn = observer()
    for corr in (1, 2, 3):
        conn.receive_data(metadata_request(corr, 9 + corr), from_client=True)
    for corr in (3, 1, 2):  # Kafka answers in order; this peer does not
        conn.receive_data(encode_response(corr, message_class("MetadataResponse")(), 9 + corr), from_client=False)
    responses = [e for e in drain(conn) if type(e) is ResponseReceived]
    assert [(e.correlation_id, e.api_version, e.overtook) for e in responses] == [
        (3, 12, (1, 2)),
        (1, 10, ()),
        (2, 11, ()),
    ]
    assert all(e.decode(strict=True).body.throttle_time_ms == 0 for e in responses)


def test_an_observer_expects_nothing_after_an_acks_zero_produce():
    conn = observer()
    conn.receive_data(produce_request(5, 0), from_client=True)
    conn.receive_data(encode_response(5, message_class("ProduceResponse")(), 9), from_client=False)
    request, stray = drain(conn)
    assert request.expects_response is False
    assert stray.kind is Violation.UNKNOWN_CORRELATION_ID and stray.correlation_id == 5


def test_an_observer_takes_whole_frames_from_a_caller_that_finds_them_itself():
    conn = observer()
    request = conn.observe_request(metadata_request(4)[4:], offset=100, tag=("t", 1))
    assert request.offset == 100 and conn.expected(4).tag == ("t", 1)
    response = conn.observe_response(encode_response(4, message_class("MetadataResponse")(), 9)[4:])
    assert (response.api_key, response.api_version, response.tag) == (3, 9, ("t", 1))
    assert conn.observe_response(b"\x00\x00\x00\x04").kind is Violation.UNKNOWN_CORRELATION_ID


# --------------------------------------------------------------------------- SASL slot


def test_bare_sasl_tokens_after_a_v0_handshake_then_requests_again():
    conn = server()
    handshake = encode_request(request_header(17, 0, 1, "c"), message_class("SaslHandshakeRequest")(mechanism="PLAIN"))
    conn.receive_data(handshake + frame(b"\x00user\x00pw") + frame(b"") + metadata_request(2))
    assert conn.next_event().api_key == ApiKey.SASL_HANDSHAKE
    conn.start_sasl_tokens()  # the mechanism's decision, after answering the handshake
    token = conn.next_event()
    assert token == SaslTokenReceived(b"\x00user\x00pw", True, len(handshake))
    assert conn.send_sasl_token(b"") == b"\x00\x00\x00\x00"
    assert conn.next_event().token == b""  # shorter than any header: still just a token
    conn.end_sasl_tokens()
    assert conn.next_event().api_key == ApiKey.METADATA


def test_a_sasl_token_split_across_chunks_arrives_whole_on_the_client():
    conn = client()
    conn.start_sasl_tokens()
    data = conn.send_sasl_token(b"server-first-message")
    conn.receive_data(data[:3])
    assert conn.next_event() == NEED_DATA
    conn.receive_data(data[3:])
    assert conn.next_event() == SaslTokenReceived(b"server-first-message", False, 0)
    assert conn.pending == {}


def test_a_token_outside_token_mode_is_refused():
    with pytest.raises(RuntimeError, match="start_sasl_tokens"):
        server().send_sasl_token(b"x")


def test_an_observer_in_token_mode_sees_tokens_both_ways():
    conn = observer()
    conn.start_sasl_tokens()
    conn.receive_data(frame(b"client-token"), from_client=True)
    conn.receive_data(frame(b"server-token"), from_client=False)
    assert drain(conn) == [SaslTokenReceived(b"client-token", True, 0), SaslTokenReceived(b"server-token", False, 0)]


def test_requests_before_authentication_are_refused_when_required():
    conn = server()
    conn.require_authentication()
    conn.receive_data(
        API_VERSIONS_REQUEST_V3
        + encode_request(request_header(17, 1, 2, "c"), message_class("SaslHandshakeRequest")())
        + encode_request(request_header(36, 2, 3, "c"), message_class("SaslAuthenticateRequest")())
    )
    assert [e.api_key for e in drain(conn)] == [18, 17, 36]
    conn.authenticated()
    conn.receive_data(metadata_request(4))
    assert conn.next_event().api_key == 3
    conn.require_authentication()  # re-authentication under way
    conn.receive_data(metadata_request(5))
    refused = conn.next_event()
    assert refused.kind is Violation.NOT_AUTHENTICATED and refused.fatal and refused.correlation_id == 5
    assert refused.message == "Metadata v9 request (correlation id 5) before authentication"


# --------------------------------------------------------------------------- roles


def test_each_side_only_sends_what_its_role_sends():
    with pytest.raises(RuntimeError, match="server connection does not send requests"):
        server().send_request(message_class("ApiVersionsRequest")(), 3)
    request = RequestReceived(18, 3, 1, bytearray())
    with pytest.raises(RuntimeError, match="client connection does not send responses"):
        client().send_response(request, message_class("ApiVersionsResponse")())
    with pytest.raises(ValueError, match="from_client"):
        observer().receive_data(b"")


def test_events_iterates_up_to_the_need_for_data_and_frames_taken_are_let_go():
    conn = server()
    conn.receive_data(API_VERSIONS_REQUEST_V3 * 2 + API_VERSIONS_REQUEST_V3[:6])
    assert [type(e) for e in conn.events()] == [RequestReceived, RequestReceived, NeedData]
    assert len(conn._from_client.buf) == 6  # the two whole frames' bytes are dropped once both are taken
    conn.receive_data(API_VERSIONS_REQUEST_V3[6:])
    (event, _need) = conn.events()
    assert event.offset == 2 * len(API_VERSIONS_REQUEST_V3)
