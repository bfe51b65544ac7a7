"""The compiled codec on the generator's own test schemas and on hand-checked real messages."""

from __future__ import annotations

import math
import uuid

import pytest

from kafkawire.protocol import DecodeError, EncodeError, UnsupportedVersionError, message_class

Example = message_class("SimpleExampleMessage")
NullableStructs = message_class("NullableStructMessage")
Arrays = message_class("SimpleArraysMessage")
Records = message_class("SimpleRecordsMessage")


# -- defaults ------------------------------------------------------------------


def test_schema_defaults():
    m = Example()
    assert m.my_float64 == 12.34
    assert m.my_int16 == 123
    assert m.tagged_long == 0xCAFCACAFCACAFCA
    # the uuid default is Kafka's URL-safe base64 of the 16 bytes
    assert m.tagged_uuid == uuid.UUID("1f728a3b-8353-44f6-825a-d1269b7bd6ec")
    assert m.process_id == uuid.UUID(int=0)
    assert m.my_uint16 == 33000 and m.my_uint32 == 1234567
    assert m.my_nullable_string is None and m.my_string == "" and m.my_bytes == b""
    assert m.my_tagged_int_array == []
    assert m.my_common_struct == Example.TestCommonStruct(foo=123, bar=123)
    assert NullableStructs().nullable_struct is None  # "default": "null"
    assert NullableStructs().nullable_struct2 == NullableStructs.MyStruct2(my_string="", my_int=0)


def test_real_message_defaults():
    assert message_class("MetadataRequest")().allow_auto_topic_creation is True
    fetch = message_class("FetchRequest")()
    assert (fetch.replica_id, fetch.max_bytes, fetch.session_epoch, fetch.cluster_id) == (-1, 0x7FFFFFFF, -1, None)
    assert message_class("ApiVersionsResponse")().finalized_features_epoch == -1
    assert message_class("ProduceRequest")().transactional_id is None


def test_mutable_defaults_are_not_shared():
    a, b = Example(), Example()
    a.my_tagged_int_array.append(1)
    a.my_common_struct.foo = 7
    assert b.my_tagged_int_array == [] and b.my_common_struct.foo == 123


# -- exact encodings -----------------------------------------------------------


def test_example_message_all_defaults_bytes():
    common = "0000007b0000007b"
    assert Example().encode(0).hex() == common + common
    # v1: uuid, two compact zero-copy byte buffers, common structs (with tag bytes), uint16, uint32, no tags
    assert Example().encode(1).hex() == (
        "00" * 16 + "01" + "01" + common + "00" + common + "00" + "80e8" + "0012d687" + "00"
    )
    # v2: MyStruct (int32, empty compact array, tags) instead of the zero-copy buffers
    assert Example().encode(2).hex() == (
        "00" * 16 + "000000000100" + common + "00" + common + "00" + "80e8" + "0012d687" + "00"
    )


def test_tagged_fields_written_only_when_not_default_in_ascending_order():
    m = Example(my_string="abc", my_int16=123, my_float64=12.34, tagged_long=1, my_tagged_int_array=[5])
    data = m.encode(1)
    tags = data[-(1 + 7 + 6 + 10) :]
    # three tags: 0 (array [5]), 4 (string "abc"), 7 (int64 1); 123 and 12.34 are the defaults
    assert tags.hex() == (
        "03"
        "00"
        "05"
        "02"
        "00000005"  # tagged array: compact count 1+1, one int32
        "04"
        "04"
        "04"
        "616263"  # tagged string: always compact
        "07"
        "08"
        "0000000000000001"
    )
    assert Example.decode(data, 1) == m


def test_tagged_default_float_and_uuid_are_not_written():
    assert Example(my_float64=12.34, tagged_uuid=Example().tagged_uuid).encode(1) == Example().encode(1)
    changed = Example(my_float64=1.5).encode(1)
    assert changed.endswith(bytes.fromhex("0103083ff8000000000000"))  # one tag: 3, size 8, 1.5


def test_tagged_nullable_struct():
    m = NullableStructs(nullable_struct3=NullableStructs.MyStruct3(my_string="x", my_int=1))
    data = m.encode(1)
    # tag 0, size 8: present marker 1, compact "x", int32 1, struct tag byte
    assert data.endswith(bytes.fromhex("0100080102780000000100"))
    assert NullableStructs.decode(data, 1) == m
    # NullableStruct4 has no default: its default is a non-null struct, so null must be written; in a tagged
    # field Kafka writes the null marker as an unsigned varint 0 (kafka-clients 4.3.1's NullableStructMessageData
    # writes 01 01 01 00 here and fails on ff with a BufferUnderflowException)
    m4 = NullableStructs(nullable_struct4=None)
    assert m4.encode(1).endswith(bytes.fromhex("01010100"))
    assert NullableStructs.decode(m4.encode(1), 1).nullable_struct4 is None


def test_nullable_struct_markers():
    m = NullableStructs(nullable_struct=NullableStructs.MyStruct(my_string="a", my_int=2))
    assert m.encode(0).hex() == "0100016100000002" + "000000000000"
    assert NullableStructs().encode(0).hex() == "ff" + "000000000000"
    assert NullableStructs.decode(bytes.fromhex("ff000000000000"), 0) == NullableStructs()
    with pytest.raises(EncodeError, match="null but not nullable"):
        NullableStructs(nullable_struct2=None).encode(0)
    assert NullableStructs.decode(NullableStructs(nullable_struct2=None).encode(1), 1).nullable_struct2 is None


def test_uint_and_float_types():
    m = Example(my_uint16=65535, my_uint32=0xFFFFFFFF)
    back = Example.decode(m.encode(2), 2)
    assert (back.my_uint16, back.my_uint32) == (65535, 0xFFFFFFFF)
    for bad in (dict(my_uint16=-1), dict(my_uint16=65536), dict(my_uint32=1 << 32), dict(my_int16=1 << 15)):
        with pytest.raises(EncodeError):
            Example(**bad).encode(2)
    for value in (math.inf, -0.5, 5e-324):
        assert Example.decode(Example(my_float64=value).encode(1), 1).my_float64 == value


def test_primitive_arrays():
    m = Arrays(goats=[Arrays.StructArray(color=1, name="g")], sheep=[1, -1, 1 << 30])
    assert m.replace(goats=[]).encode(0).hex() == "0000000300000001ffffffff40000000"
    assert m.encode(2).hex() == "0201026700" + "0400000001ffffffff4000000000"
    assert Arrays.decode(m.encode(2), 2) == m


# -- versions ------------------------------------------------------------------


def test_non_default_value_in_a_version_without_the_field():
    with pytest.raises(EncodeError, match="myUint16.*version 0"):
        Example(my_uint16=1).encode(0)
    with pytest.raises(EncodeError, match="Goats"):
        Arrays(goats=[Arrays.StructArray()]).encode(0)
    with pytest.raises(EncodeError, match="Name"):
        Arrays(goats=[Arrays.StructArray(name="x")]).encode(1)
    # ignorable: silently not written where the version lacks it
    assert Example(tagged_long_flexible_version_subset=5).encode(1) == Example().encode(1)
    assert (
        Example.decode(Example(tagged_long_flexible_version_subset=5).encode(2), 2).tagged_long_flexible_version_subset
        == 5
    )
    # a default value in a version without the field is fine
    assert Example(my_uint16=33000).encode(0) == Example().encode(0)


def test_real_message_version_errors():
    metadata = message_class("MetadataRequest")
    with pytest.raises(EncodeError, match="AllowAutoTopicCreation"):
        metadata(allow_auto_topic_creation=False).encode(3)
    assert metadata(allow_auto_topic_creation=False).encode(4)[-1:] == b"\x00"
    with pytest.raises(EncodeError, match="null but not nullable"):
        metadata(topics=None).encode(0)  # v0 had no "all topics" null
    assert metadata(topics=None).encode(1) == b"\xff\xff\xff\xff"


def test_unsupported_version():
    with pytest.raises(UnsupportedVersionError):
        Example().encode(3)
    with pytest.raises(UnsupportedVersionError):
        Example.decode(b"", 7)
    with pytest.raises(UnsupportedVersionError):
        message_class("ProduceRequest").decode(b"", -1)


# -- unknown tags --------------------------------------------------------------


def test_unknown_tags_are_kept_and_written_back_in_order():
    known = Example(my_int16=5, tagged_long=9)
    body = known.encode(1)
    # replace the tag section with one that interleaves unknown tags with the known tags 2 and 7
    tags_at = body.rfind(b"\x02\x02\x02\x00\x05")  # count 2, tag 2, size 2, int16 5
    assert tags_at > 0
    frame = body[:tags_at] + bytes.fromhex("0402020005070800000000000000091401aa2003bbccdd")
    decoded = Example.decode(frame, 1)
    assert decoded.my_int16 == 5 and decoded.tagged_long == 9
    assert decoded.unknown_tags == [(20, b"\xaa"), (32, b"\xbb\xcc\xdd")]
    assert decoded.encode(1) == frame
    assert decoded != Example(my_int16=5, tagged_long=9)  # unknown tags take part in equality
    assert "unknown_tags" in repr(decoded)


def test_unknown_tags_given_out_of_order_are_written_ascending():
    m = Example(my_int16=5, _unknown_tags=[(40, b"\x01"), (12, b"")])
    tail = m.encode(1)[-10:]
    assert tail.hex() == "03020200050c00280101"


def test_unknown_tag_in_a_nested_struct():
    resp = message_class("ApiVersionsResponse")
    m = resp(api_keys=[resp.ApiVersion(api_key=0, min_version=0, max_version=11, _unknown_tags=[(9, b"\x01\x02")])])
    data = m.encode(3)
    assert data.hex() == "00000200000000000b01090201020000000000"
    back = resp.decode(data, 3)
    assert back.api_keys[0].unknown_tags == [(9, b"\x01\x02")]
    assert back.encode(3) == data


# -- records: zero copy ----------------------------------------------------------


def test_records_decode_as_a_view_of_the_input():
    wire = bytearray(Records(topic="t", record_set=b"\x01\x02\x03").encode(1))
    m = Records.decode(wire, 1)
    assert isinstance(m.record_set, memoryview)
    assert m.record_set.obj is wire
    wire[-2] = 0x7F
    assert bytes(m.record_set) == b"\x01\x02\x7f"
    assert m.record_set == b"\x01\x02\x7f"  # compares by content
    frozen = bytes(wire)
    assert Records.decode(frozen, 1).record_set.obj is frozen  # bytes input: still a view, not a copy
    framed = message_class("ProduceRequest")(
        topic_data=[
            message_class("ProduceRequest").TopicProduceData(
                name="t", partition_data=[message_class("ProduceRequest").PartitionProduceData(index=0, records=b"abc")]
            )
        ]
    )
    from kafkawire.protocol import decode_request, encode_request, request_header

    frame = encode_request(request_header(0, 9, 1), framed)
    records = decode_request(frame).body.topic_data[0].partition_data[0].records
    assert records.obj is frame and bytes(records) == b"abc"


def test_records_encode_without_copy():
    payload = bytearray(b"x" * 100)
    parts = []
    Records(topic="t", record_set=memoryview(payload)).encode_into(parts.append, 0)
    assert any(isinstance(p, memoryview) and p.obj is payload for p in parts)
    assert Records(record_set=None).encode(0).endswith(b"\xff\xff\xff\xff")
    assert Records(record_set=None).encode(1).endswith(b"\x00\x00")


def test_bytes_fields_are_copied():
    wire = bytearray(Example(my_bytes=b"ab").encode(1))
    m = Example.decode(wire, 1)
    assert type(m.my_bytes) is bytes


# -- the Python side -------------------------------------------------------------


def test_repr_eq_to_dict_replace():
    m = Arrays(goats=[Arrays.StructArray(color=3, name="billy")], sheep=[1])
    assert repr(m) == "SimpleArraysMessage(goats=[SimpleArraysMessage.StructArray(color=3, name='billy')], sheep=[1])"
    assert m == Arrays(goats=[Arrays.StructArray(color=3, name="billy")], sheep=[1])
    assert m != Arrays(goats=[Arrays.StructArray(color=4, name="billy")], sheep=[1])
    assert m != Example() and m != "x"
    assert m.to_dict() == {"goats": [{"color": 3, "name": "billy"}], "sheep": [1]}
    r = Records.decode(Records(topic="t", record_set=b"ab").encode(0), 0)
    assert r.to_dict() == {"topic": "t", "record_set": b"ab"}
    assert Example().to_dict()["tagged_uuid"] == "1f728a3b-8353-44f6-825a-d1269b7bd6ec"
    changed = m.replace(sheep=[2])
    assert changed.sheep == [2] and m.sheep == [1] and changed.goats is m.goats
    with pytest.raises(TypeError):
        m.replace(wolves=1)
    with pytest.raises(TypeError):
        Arrays(wolves=1)
    with pytest.raises(TypeError):
        hash(m)


def test_message_classes_by_import():
    from kafkawire.protocol import FetchRequest
    from kafkawire.protocol.messages import ProduceRequest

    assert FetchRequest is message_class("FetchRequest")
    assert ProduceRequest.api_key == 0 and ProduceRequest.kind == "request"
    with pytest.raises(KeyError):
        message_class("NoSuchMessage")


def test_invalid_utf8_is_a_decode_error():
    data = bytes.fromhex("0002ff61") + bytes(4)  # string of 2 bytes, invalid UTF-8
    with pytest.raises(DecodeError, match="UTF-8") as info:
        Records.decode(data, 0)
    assert info.value.path == "Topic" and info.value.offset == 0


def test_api_versions_response_omits_default_tagged_fields():
    """KAFKA-NOTES: librdkafka 2.0 (Debian's kcat) breaks on default-valued tagged fields in
    ApiVersionsResponse v3+; SupportedFeatures, FinalizedFeaturesEpoch, FinalizedFeatures and
    ZkMigrationReady at their defaults leave an empty tag section."""
    resp = message_class("ApiVersionsResponse")
    body = resp(
        api_keys=[resp.ApiVersion(api_key=18, min_version=0, max_version=4)],
        supported_features=[],
        finalized_features_epoch=-1,
        finalized_features=[],
        zk_migration_ready=False,
    )
    assert body.encode(3).hex() == "000002001200000004000000000000"
    with_epoch = body.replace(finalized_features_epoch=5).encode(3)
    assert with_epoch.endswith(bytes.fromhex("0101080000000000000005"))
