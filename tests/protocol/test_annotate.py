"""The spec-walking annotator: an independent second reading of the bytes, checked against the codec."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from kafkawire.protocol import DecodeError, decode_request, message_class
from kafkawire.protocol.annotate import AnnotationError, annotate, annotate_request, annotate_response

from .frames import (
    API_VERSIONS_REQUEST_V3,
    DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0,
    DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0,
    DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0_AS_GIVEN,
)
from .strategies import all_pairs, messages

PAIRS = all_pairs()
SETTINGS = settings(
    max_examples=4,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _matches(annotated, decoded) -> None:
    """Every field the annotator read equals the codec's value (the annotator reports only present fields)."""
    if isinstance(annotated, dict):
        plain = decoded if isinstance(decoded, dict) else decoded.to_dict()
        for key, value in annotated.items():
            if key == "_unknown_tags":
                assert value == decoded.unknown_tags
                continue
            _matches(value, getattr(decoded, key) if not isinstance(decoded, dict) else plain[key])
    elif isinstance(annotated, list):
        assert len(annotated) == len(decoded)
        for a, d in zip(annotated, decoded):
            _matches(a, d)
    else:
        plain = decoded.to_dict() if hasattr(decoded, "to_dict") else decoded
        if isinstance(plain, memoryview):
            plain = bytes(plain)
        elif plain is not None and type(plain).__name__ == "UUID":
            plain = str(plain)
        assert annotated == plain


@pytest.mark.parametrize("name,version", PAIRS, ids=[f"{n}-v{v}" for n, v in PAIRS])
def test_annotator_agrees_with_the_codec(name, version):
    cls = message_class(name)

    @SETTINGS
    @given(messages(cls, version, unknown_tags=True))
    def check(msg):
        data = msg.encode(version)
        result = annotate(name, data, version)
        assert result.end == len(data)
        _matches(result.value, cls.decode(data, version))
        # the annotations tile the input: leaves cover every byte exactly once, in order
        leaves = [
            e
            for i, e in enumerate(result.events)
            if i + 1 == len(result.events) or result.events[i + 1].depth <= e.depth
        ]
        covered = 0
        for e in result.events:
            assert e.width is not None and e.offset + e.width <= len(data)
        for i, e in enumerate(result.events):
            nxt = result.events[i + 1] if i + 1 < len(result.events) else None
            own_end = e.offset + e.width if e in leaves else nxt.offset
            assert e.offset == covered, (e, covered)
            covered = own_end
        assert covered == len(data)

    check()


def test_annotated_request_frame():
    result = annotate_request(API_VERSIONS_REQUEST_V3)
    by_path = {e.path: e for e in result.events}
    assert (by_path["size"].offset, by_path["size"].width, by_path["size"].value) == (0, 4, 38)
    key = by_path["header.RequestApiKey"]
    assert (key.offset, key.width, key.wire_type, key.value, key.note) == (4, 2, "int16", 18, "ApiVersions")
    client = by_path["header.ClientId"]
    assert (client.offset, client.width, client.value) == (12, 4, "c1")  # 2-byte length, even in header v2
    name = by_path["body.ClientSoftwareName"]
    assert (name.offset, name.width, name.wire_type, name.value) == (17, 18, "compact_string", "apache-kafka-java")
    decoded = decode_request(API_VERSIONS_REQUEST_V3).body.to_dict()
    # v5's ClusterId and NodeId are not on the wire at v3: the decoder gives their defaults, annotate omits them
    assert (decoded.pop("cluster_id"), decoded.pop("node_id")) == (None, -1)
    assert result.value["body"] == decoded


def test_annotated_response_frame():
    result = annotate_response(DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0, 75, 0)
    by_path = {e.path: e for e in result.events}
    err = by_path["body.Topics[0].ErrorCode"]
    assert (err.offset, err.value, err.note) == (14, 3, "UNKNOWN_TOPIC_OR_PARTITION")
    assert by_path["body.Topics[0].TopicAuthorizedOperations"].value == 3576
    assert by_path["body.NextCursor"].value is None and by_path["body.NextCursor"].width == 1


def test_size_mismatch_is_reported_with_what_was_read():
    with pytest.raises(AnnotationError, match="frame size 55 does not match the 56 bytes") as info:
        annotate_response(DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0_AS_GIVEN, 75, 0)
    assert [e.path for e in info.value.events] == ["size"]
    assert isinstance(info.value, DecodeError)


_DTP_BODY = DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0[4 + 23 :]  # after the size and the 23-byte header


@pytest.mark.parametrize("cut", range(len(_DTP_BODY)))
def test_annotator_errors_match_the_codec(cut):
    """On truncated input both readers fail, at the same field and offset."""
    data = _DTP_BODY[:cut]
    with pytest.raises(DecodeError) as fast:
        message_class("DescribeTopicPartitionsRequest").decode(data, 0)
    with pytest.raises(AnnotationError) as slow:
        annotate("DescribeTopicPartitionsRequest", data, 0)
    assert (slow.value.path, slow.value.offset) == (fast.value.path, fast.value.offset)


def test_unknown_api_key_and_version():
    with pytest.raises(AnnotationError, match="unknown API key"):
        annotate_request(bytes.fromhex("03e7000000000001ffff"), framed=False)
    with pytest.raises(AnnotationError, match="outside"):
        annotate_request(bytes.fromhex("00120063000000010000"), framed=False)
    with pytest.raises(AnnotationError, match="unknown API key"):
        annotate_response(b"\x00\x00\x00\x01", 999, 0, framed=False)
