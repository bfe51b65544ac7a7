"""Whole frames: exact captured bytes and request/response headers (splitting streams: test_connection.py)."""

from __future__ import annotations

import uuid

import pytest

from kafkawire.protocol import (
    DecodeError,
    UnsupportedVersionError,
    decode_request,
    decode_response,
    encode_request,
    encode_request_parts,
    encode_response,
    encode_response_parts,
    frame,
    message_class,
    request_header,
    request_header_version,
    response_header_version,
)
from kafkawire.protocol.rpc import peek_request_prefix

from .frames import (
    API_VERSIONS_REQUEST_V3,
    DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0,
    DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0,
    DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0_AS_GIVEN,
)

ApiVersionsRequest = message_class("ApiVersionsRequest")
ApiVersionsResponse = message_class("ApiVersionsResponse")
DTPRequest = message_class("DescribeTopicPartitionsRequest")
DTPResponse = message_class("DescribeTopicPartitionsResponse")


# -- the exact frames ------------------------------------------------------------------


def test_api_versions_request_v3():
    req = decode_request(API_VERSIONS_REQUEST_V3)
    assert (req.api_key, req.api_version, req.header_version) == (18, 3, 2)
    assert (req.header.correlation_id, req.header.client_id) == (7, "c1")
    assert req.body == ApiVersionsRequest(client_software_name="apache-kafka-java", client_software_version="3.9.1")
    built = encode_request(
        request_header(18, 3, 7, "c1"),
        ApiVersionsRequest(client_software_name="apache-kafka-java", client_software_version="3.9.1"),
    )
    assert built == API_VERSIONS_REQUEST_V3
    assert encode_request(req.header, req.body) == API_VERSIONS_REQUEST_V3


def test_describe_topic_partitions_request_v0():
    req = decode_request(DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0)
    assert (req.api_key, req.api_version, req.header.correlation_id) == (75, 0, 1486810363)
    assert req.header.client_id == "kafka-tester"
    expected = DTPRequest(
        topics=[DTPRequest.TopicRequest(name="unknown-topic-saz")], response_partition_limit=1, cursor=None
    )
    assert req.body == expected
    assert (
        encode_request(request_header(75, 0, 1486810363, "kafka-tester"), expected)
        == DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0
    )


def test_describe_topic_partitions_response_as_given_is_rejected():
    """The frame's size (55) disagrees with what follows (56 bytes); it must not be accepted."""
    data = DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0_AS_GIVEN
    with pytest.raises(DecodeError, match="frame size 55 does not match the 56 bytes") as info:
        decode_response(data, 75, 0)
    assert info.value.offset == 0
    # Nor do the 56 bytes decode as a response on their own: the extra zero shifts every field
    # after the header, so the topics array count reads as a null non-nullable array.
    with pytest.raises(DecodeError) as info:
        decode_response(data[4:], 75, 0, framed=False)
    assert info.value.path == "Topics" and info.value.offset == 9  # where the count starts
    # Taking only the declared 55 bytes leaves a body that ends mid-way (no tagged-field byte).
    with pytest.raises(DecodeError):
        decode_response(data[4:59], 75, 0, framed=False)


def test_describe_topic_partitions_response_v0_corrected():
    resp = decode_response(DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0, 75, 0)
    assert resp.header.correlation_id == 1486810363 and resp.header_version == 1
    body = resp.body
    assert body.throttle_time_ms == 0 and body.next_cursor is None
    [topic] = body.topics
    assert topic.error_code == 3 and topic.name == "unknown-topic-saz"
    assert topic.topic_id == uuid.UUID(int=0) and topic.is_internal is False
    assert topic.partitions == [] and topic.topic_authorized_operations == 3576
    assert encode_response(1486810363, body, 0) == DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0
    built = DTPResponse(
        topics=[
            DTPResponse.DescribeTopicPartitionsResponseTopic(
                error_code=3,
                name="unknown-topic-saz",
                topic_id=uuid.UUID(int=0),
                is_internal=False,
                partitions=[],
                topic_authorized_operations=3576,
            )
        ],
        next_cursor=None,
    )
    assert encode_response(1486810363, built, 0) == DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0


def test_encode_parts_join_to_the_frame():
    req = decode_request(API_VERSIONS_REQUEST_V3)
    assert b"".join(encode_request_parts(req.header, req.body)) == API_VERSIONS_REQUEST_V3
    body = decode_response(DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0, 75, 0).body
    assert b"".join(encode_response_parts(1486810363, body, 0)) == DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0


# -- unknown tags in a real frame ------------------------------------------------------------


def _reframe(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def test_unknown_tag_in_the_request_header_survives():
    payload = API_VERSIONS_REQUEST_V3[4:]
    # header: key, version, correlation id, client id "c1" (2-byte length), then the tag section
    at = 2 + 2 + 4 + 2 + 2
    assert payload[at] == 0
    data = _reframe(payload[:at] + bytes.fromhex("010502abcd") + payload[at + 1 :])
    req = decode_request(data)
    assert req.header.unknown_tags == [(5, b"\xab\xcd")]
    assert req.body.client_software_name == "apache-kafka-java"
    assert encode_request(req.header, req.body) == data


def test_unknown_tag_in_a_nested_struct_survives():
    payload = DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0[4:]
    name = b"unknown-topic-saz"
    at = payload.index(name) + len(name)  # the topic entry's tag section
    assert payload[at] == 0
    data = _reframe(payload[:at] + bytes.fromhex("0203000701ee") + payload[at + 1 :])
    req = decode_request(data)
    assert req.body.topics[0].unknown_tags == [(3, b""), (7, b"\xee")]
    assert req.body.topics[0].name == "unknown-topic-saz" and req.body.response_partition_limit == 1
    assert encode_request(req.header, req.body) == data


# -- headers ------------------------------------------------------------------------------


def test_header_versions():
    assert request_header_version(18, 3) == 2 and request_header_version(18, 2) == 1
    assert request_header_version(0, 8) == 1 and request_header_version(0, 9) == 2
    assert request_header_version(7, 0) == 0 and request_header_version(7, 1) == 1  # ControlledShutdown v0
    assert response_header_version(18, 0) == 0 and response_header_version(18, 4) == 0  # ApiVersions: always v0
    assert response_header_version(1, 11) == 0 and response_header_version(1, 12) == 1
    assert response_header_version(75, 0) == 1


def test_request_header_v0_has_no_client_id():
    body = message_class("ControlledShutdownRequest")(broker_id=3)
    data = encode_request(request_header(7, 0, 9, "ignored"), body)
    assert data.hex() == "0000000c000700000000000900000003"
    req = decode_request(data)
    assert req.header_version == 0 and req.body.broker_id == 3 and req.header.correlation_id == 9


def test_request_header_v1_client_id_and_null():
    body = message_class("MetadataRequest")(topics=[])
    data = encode_request(request_header(3, 4, 1, "ab"), body)
    assert data.hex() == "000000110003000400000001000261620000000001"
    null_id = encode_request(request_header(3, 4, 1, None), body)
    assert null_id.hex() == "0000000f0003000400000001ffff0000000001"
    assert decode_request(null_id).header.client_id == ""  # a null client id reads as empty


def test_request_header_v2_client_id_is_not_compact():
    body = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    data = encode_request(request_header(18, 3, 2, "abc"), body)
    # 2-byte length 3 (not compact 04), then the header's tag byte
    assert data[4:].hex() == "00120003000000020003616263000278023100"
    null_id = encode_request(request_header(18, 3, 2, None), body)
    assert null_id[4 + 8 : 4 + 11].hex() == "ffff00"
    assert decode_request(null_id).header.client_id == ""


def test_response_header_v0_and_v1():
    body = message_class("MetadataResponse")(controller_id=1)
    v0 = encode_response(5, body, 8)
    assert v0[4:8].hex() == "00000005" and v0[8:] == body.encode(8)
    assert decode_response(v0, 3, 8).header_version == 0
    v1 = encode_response(5, body, 9)
    assert v1[4:9].hex() == "0000000500" and v1[9:] == body.encode(9)  # tag byte after the correlation id
    assert decode_response(v1, 3, 9).header_version == 1


def test_api_versions_response_header_is_always_v0():
    body = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)])
    data = encode_response(11, body, 3)
    # no tag byte after the correlation id, straight into the body's error code
    assert data[4:].hex() == "0000000b000002001200000004000000000000"
    resp = decode_response(data, 18, 3)
    assert resp.header_version == 0 and resp.body == body and resp.header.correlation_id == 11


def test_request_decoding_errors():
    with pytest.raises(DecodeError, match="unknown API key 999"):
        decode_request(frame(bytes.fromhex("03e7000000000001ffff")))
    with pytest.raises(UnsupportedVersionError):
        decode_request(frame(bytes.fromhex("00120063000000010000")))
    with pytest.raises(DecodeError, match="shorter than the 8-byte header prefix"):
        decode_request(frame(b"\x00\x12\x00"))
    with pytest.raises(DecodeError, match="trailing"):
        decode_request(_reframe(API_VERSIONS_REQUEST_V3[4:] + b"\x00"))
    assert decode_request(_reframe(API_VERSIONS_REQUEST_V3[4:] + b"\x00"), strict=False).header.client_id == "c1"
    with pytest.raises(ValueError, match="API key 3"):
        encode_request(request_header(3, 1, 1), ApiVersionsRequest())


def test_peek_request_prefix():
    assert peek_request_prefix(API_VERSIONS_REQUEST_V3[4:]) == (18, 3, 7)
    # readable even for a version this side cannot decode: the broker answers UNSUPPORTED_VERSION
    assert peek_request_prefix(bytes.fromhex("00127fff0000002a")) == (18, 32767, 42)


def test_framed_decode_checks_the_size():
    with pytest.raises(DecodeError, match="4-byte size"):
        decode_request(b"\x00\x00")
    with pytest.raises(DecodeError, match="frame size -1"):
        decode_request(b"\xff\xff\xff\xff" + API_VERSIONS_REQUEST_V3[4:])


def test_api_versions_response_falls_back_to_v0():
    """A broker answers an ApiVersions version it does not know with UNSUPPORTED_VERSION in a v0 body."""
    body = ApiVersionsResponse(
        error_code=35, api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)]
    )
    data = encode_response(3, body, 0)
    for asked in (1, 3, 4):
        resp = decode_response(data, 18, asked)
        assert resp.body.error_code == 35 and resp.body.api_keys == body.api_keys
    # a response that is valid at the requested version is read at that version
    v3 = ApiVersionsResponse(error_code=35, throttle_time_ms=5)
    assert decode_response(encode_response(3, v3, 3), 18, 3).body == v3
    # other APIs never fall back
    with pytest.raises(DecodeError):
        decode_response(encode_response(1, message_class("MetadataResponse")(), 0), 3, 9)
