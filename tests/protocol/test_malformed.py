"""Decoding never trusts a length: malformed input raises DecodeError naming the field path and offset,
never another exception, and never allocates more than the input could hold."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkawire.protocol import DecodeError, UnsupportedVersionError, decode_request, message_class

from .frames import API_VERSIONS_REQUEST_V3, DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0, DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0
from .strategies import all_pairs, messages

PAIRS = all_pairs()
IDS = [f"{n}-v{v}" for n, v in PAIRS]
SETTINGS = settings(
    max_examples=3,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _decode_expecting_error(cls, data, version) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        cls.decode(data, version)
    err = info.value
    assert err.offset is not None and 0 <= err.offset <= len(data), err
    assert err.message == f"{cls.spec.name} v{version}"
    return err


@pytest.mark.parametrize("name,version", PAIRS, ids=IDS)
def test_every_truncation_is_a_decode_error(name, version):
    cls = message_class(name)

    @SETTINGS
    @given(messages(cls, version))
    def check(msg):
        data = msg.encode(version)
        for cut in range(len(data)):
            _decode_expecting_error(cls, data[:cut], version)

    check()


@pytest.mark.parametrize("name,version", PAIRS, ids=IDS)
def test_byte_flips_decode_or_raise_decode_error(name, version):
    cls = message_class(name)

    @settings(SETTINGS, max_examples=6)
    @given(
        messages(cls, version),
        st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)), min_size=1, max_size=3),
    )
    def check(msg, flips):
        data = bytearray(msg.encode(version))
        if not data:
            return
        for where, xor in flips:
            data[where % len(data)] ^= xor
        try:
            decoded = cls.decode(data, version)
        except DecodeError as err:
            assert err.offset is not None and 0 <= err.offset <= len(data)
        else:
            decoded.encode(version)  # whatever decodes is a valid message again

    check()


SAMPLE_FRAMES = [API_VERSIONS_REQUEST_V3, DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0]


@pytest.mark.parametrize("frame", SAMPLE_FRAMES, ids=["api-versions", "describe-topic-partitions"])
def test_frame_truncations_and_flips(frame):
    for cut in range(len(frame)):
        with pytest.raises(DecodeError):
            decode_request(frame[:cut])
        # unframed, the truncated payload is still never accepted
        if cut > 4:
            with pytest.raises(DecodeError):
                decode_request(frame[4:cut], framed=False)
    for i in range(4, len(frame)):
        for xor in (0x01, 0x80, 0xFF):
            data = bytearray(frame)
            data[i] ^= xor
            try:
                decode_request(data)
            except (DecodeError, UnsupportedVersionError):
                pass  # a flipped API version is reported as unsupported, so a broker can answer it


def test_response_frame_truncations():
    from kafkawire.protocol import decode_response

    for cut in range(len(DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0)):
        with pytest.raises(DecodeError):
            decode_response(DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0[:cut], 75, 0)


# -- hand-made malformed input, with the exact field and offset ----------------------------

Metadata = message_class("MetadataRequest")
MetadataResponse = message_class("MetadataResponse")
Example = message_class("SimpleExampleMessage")
Arrays = message_class("SimpleArraysMessage")


def test_string_length_past_the_end():
    # v12: compact array of 1 topic: topic id, then a compact nullable name of length 99
    data = bytes.fromhex("02" + "00" * 16 + "646162")
    err = _decode_expecting_error(Metadata, data, 12)
    assert err.path == "Topics[0].Name" and err.offset == 17 and "runs past the end" in str(err)
    assert "MetadataRequest v12.Topics[0].Name at byte 17" in str(err)


def test_negative_length_other_than_null():
    data = bytes.fromhex("00000001fffe")  # v1: 1 topic, name length -2
    err = _decode_expecting_error(Metadata, data, 1)
    assert err.path == "Topics[0].Name" and err.offset == 4
    assert "-2" in str(err)
    # -1 is the null marker, but the topic name is not nullable before v10
    err = _decode_expecting_error(Metadata, bytes.fromhex("00000001ffff"), 1)
    assert "non-nullable" in str(err)


def test_negative_array_count_other_than_null():
    err = _decode_expecting_error(Metadata, bytes.fromhex("fffffffe"), 1)
    assert err.path == "Topics" and err.offset == 0 and "-2" in str(err)
    assert Metadata.decode(bytes.fromhex("ffffffff"), 1).topics is None  # the null marker


def test_array_count_larger_than_the_remaining_bytes():
    err = _decode_expecting_error(Metadata, bytes.fromhex("7fffffff0000"), 1)
    assert err.path == "Topics" and err.offset == 0 and "exceeds" in str(err)
    err = _decode_expecting_error(Arrays, bytes.fromhex("0010000000000001"), 0)  # int32 array
    assert err.path == "Sheep" and "exceeds" in str(err)
    err = _decode_expecting_error(Arrays, bytes.fromhex("000000030000000100000002"), 0)
    assert err.path == "Sheep" and "past the end" in str(err)


def test_compact_array_count_larger_than_the_remaining_bytes():
    err = _decode_expecting_error(Metadata, bytes.fromhex("ffffffff0f00"), 12)  # count 2^32-2
    assert err.path == "Topics" and err.offset == 0


def test_varint_longer_than_five_bytes():
    err = _decode_expecting_error(Metadata, bytes.fromhex("ffffffffff01"), 12)
    assert err.path == "Topics" and err.offset == 0 and "longer than 5 bytes" in str(err)


def test_varint_above_32_bits():
    err = _decode_expecting_error(Metadata, bytes.fromhex("ffffffff1f"), 12)
    assert err.path == "Topics" and "32 bits" in str(err)


def test_varint_cut_short():
    err = _decode_expecting_error(Metadata, bytes.fromhex("8080"), 12)
    assert err.path == "Topics" and "past the end" in str(err)


def test_tagged_field_errors():
    body = Example().encode(1)[:-1]
    err = _decode_expecting_error(Example, body + bytes.fromhex("010a0500"), 1)  # size past the end
    assert err.path == "_tagged_fields" and err.offset == len(body)
    err = _decode_expecting_error(Example, body + bytes.fromhex("7f"), 1)  # 127 tags in 0 bytes
    assert err.path == "_tagged_fields"
    # a known tag whose declared size disagrees with its content (int16 in 3 bytes)
    err = _decode_expecting_error(Example, body + bytes.fromhex("010203000100"), 1)
    assert err.path == "myInt16" and "does not match" in str(err)


def test_error_path_in_nested_arrays():
    resp = MetadataResponse(
        topics=[
            MetadataResponse.MetadataResponseTopic(
                name="t", partitions=[MetadataResponse.MetadataResponsePartition(replica_nodes=[1, 2])]
            )
        ]
    )
    data = resp.encode(12)
    # cut inside the replica node array
    cut = data.index(bytes.fromhex("030000000100000002")) + 3
    err = _decode_expecting_error(MetadataResponse, data[:cut], 12)
    assert err.path == "Topics[0].Partitions[0].ReplicaNodes"


def test_trailing_bytes():
    err = _decode_expecting_error(Metadata, bytes.fromhex("0000000000"), 1)
    assert "1 trailing bytes" in str(err) and err.offset == 4
    assert Metadata.decode(bytes.fromhex("0000000000"), 1, strict=False).topics == []


def test_decode_accepts_bytes_bytearray_and_memoryview():
    data = Metadata(topics=[Metadata.MetadataRequestTopic(name="x")]).encode(1)
    for buf in (data, bytearray(data), memoryview(data), memoryview(b"??" + data)[2:]):
        assert Metadata.decode(buf, 1).topics[0].name == "x"


@pytest.mark.parametrize(
    "data,version",
    [
        (bytes.fromhex("7fffffff"), 1),  # 2^31-1 topics claimed
        (bytes.fromhex("000000017fff"), 1),  # 32 KiB name claimed
        (bytes.fromhex("fffffff70f"), 12),  # compact count near 2^32
        (bytes.fromhex("02" + "00" * 16 + "fffffff70f"), 12),  # compact string length near 2^32
    ],
)
def test_claimed_sizes_allocate_nothing(data, version):
    """Lengths are checked against the input before anything is built for them."""
    Metadata.decode(Metadata().encode(version), version)  # compile outside the measurement
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError):
            Metadata.decode(data, version)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024
