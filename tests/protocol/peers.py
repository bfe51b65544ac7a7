"""Adapters between kafkawire messages and the differential peers (kafka-python 3.x, kio).

Both sides are compared through a neutral form: nested dicts keyed by Kafka's
JSON field names, holding only the fields present at the version, with lists
for arrays, bytes for byte fields and UUIDs for uuids.
"""

from __future__ import annotations

import datetime
import importlib
import io
import pkgutil
import uuid

from kafkawire.protocol.schema import FieldSpec, StructSpec

ZERO_UUID = uuid.UUID(int=0)


def neutral(obj, spec: StructSpec, version: int) -> dict | None:
    """A kafkawire struct in neutral form."""
    if obj is None:
        return None
    out = {}
    for f in spec.fields:
        if f.present(version):
            out[f.name] = _neutral_value(getattr(obj, f.attr), f, version)
    return out


def _neutral_value(value, f: FieldSpec, version: int):
    if value is None:
        return None
    if f.is_array:
        return [_neutral_element(v, f, version) for v in value]
    return _neutral_element(value, f, version)


def _neutral_element(value, f: FieldSpec, version: int):
    if f.struct is not None:
        return neutral(value, f.struct, version)
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    return value


# -- kafka-python 3.x -----------------------------------------------------------------------


def kafka_python_classes() -> dict[str, type]:
    """kafka-python's schema-driven classes (requests, responses, data, headers) by Kafka name."""
    import kafka.protocol as kp
    from kafka.protocol.api_data import ApiData
    from kafka.protocol.api_header import ApiHeader
    from kafka.protocol.api_message import ApiMessage

    for mod in pkgutil.walk_packages(kp.__path__, "kafka.protocol."):
        if ".old" not in mod.name and "generate_stubs" not in mod.name:
            importlib.import_module(mod.name)
    out = {}

    def walk(cls):
        for sub in cls.__subclasses__():
            if getattr(sub, "_class_version", None) is None and getattr(sub, "_json", None) is not None:
                out[sub._json["name"]] = sub
            walk(sub)

    for base in (ApiMessage, ApiData, ApiHeader):
        walk(base)
    return out


def kp_valid_versions(cls) -> tuple[int, int]:
    """The versions the peer's own schema defines (kafka-python widens requests' lower bound to 0)."""
    from kafka.protocol.schemas.fields.base import BaseField

    lo, hi = BaseField.parse_versions(cls._json["validVersions"])
    return lo, hi


def kp_fields(kp_struct, version: int):
    return [f for f in kp_struct._fields if f.for_version_q(version) or f.tagged_field_q(version)]


def _pair_fields(kp_struct, spec: StructSpec) -> dict:
    """The peer's field -> kafkawire's field, by Kafka's field name. The two schemas need not list the
    same fields: kafka-python's Kafka 4.3 files keep fields of versions Kafka 4.4 no longer defines
    (OffsetCommit's v1-only CommitTimestamp), kafkawire's definitions have fields of versions newer than
    the peer's. Fields either side renamed (kafka-python's own patches, Kafka's GenerationId ->
    GenerationIdOrMemberEpoch) are paired in order among the fields left unmatched. A peer field with no
    partner is absent from the result: ``kp_fields_paired`` fails if one is on the wire at the version."""
    ours = {f.name: f for f in spec.fields}
    theirs = {kf._json["name"] for kf in kp_struct._fields}
    pairs = {kf.name: ours[kf._json["name"]] for kf in kp_struct._fields if kf._json["name"] in ours}
    left_theirs = [kf for kf in kp_struct._fields if kf._json["name"] not in ours]
    left_ours = [f for f in spec.fields if f.name not in theirs]
    for kf, f in zip(left_theirs, left_ours):
        pairs[kf.name] = f
    return pairs


def kp_fields_paired(kp_struct, spec: StructSpec, version: int):
    """(peer field, kafkawire field) for the peer's fields on the wire at the version."""
    pairs = _pair_fields(kp_struct, spec)
    out = []
    for kf in kp_fields(kp_struct, version):
        assert kf.name in pairs, f"{spec.name} v{version}: the peer's field {kf._json['name']} has no counterpart"
        out.append((kf, pairs[kf.name]))
    return out


def _kp_data_class(kp_cls, kf):
    return getattr(kp_cls, kf.type_str, None) or kf.data_class


def _bitfield_to_kp(value: int):
    # kafka-python patches authorized-operations int32 fields into sets of bit numbers,
    # with the "not requested" value INT32_MIN (bit 31 alone) as None
    from kafka.protocol.schemas.fields.codecs.types import BitField

    bits = BitField.from_32_bit_field(value & 0xFFFFFFFF)
    return None if bits == {31} else bits


def _bitfield_from_kp(bits) -> int:
    from kafka.protocol.schemas.fields.codecs.types import BitField

    raw = BitField.to_32_bit_field({31} if bits is None else bits)
    return raw - (1 << 32) if raw >= 1 << 31 else raw


def to_kafka_python(obj, spec: StructSpec, kp_cls, version: int, top: bool = True):
    """Build the peer's object holding the same values as a kafkawire struct."""
    if obj is None:
        return None
    kwargs = {}
    for kf, f in kp_fields_paired(kp_cls._struct, spec, version):
        value = getattr(obj, f.attr)
        if (
            kf.is_struct()
            and kf.tagged_field_q(version)
            and value is not None
            and neutral(value, f.struct, version) == neutral_default(f.struct, version)
        ):
            value = None  # the peer's "absent" for a tagged struct; kafkawire's is the default struct
        elif value is not None and (kf.is_struct() or kf.is_struct_array()):
            sub = _kp_data_class(kp_cls, kf)
            if f.is_array:
                value = [to_kafka_python(v, f.struct, sub, version, False) for v in value]
            else:
                value = to_kafka_python(value, f.struct, sub, version, False)
        elif kf.type_str == "bitfield":
            value = _bitfield_to_kp(value)
        elif kf.type_str == "uuid" and value == ZERO_UUID:
            value = None  # the peer's zero uuid (its default, so a tagged zero uuid is not written)
        elif isinstance(value, memoryview):
            value = bytes(value)
        kwargs[kf.name] = value
    if top:
        kwargs["version"] = version
    return kp_cls(**kwargs)


def kp_neutral(obj, kp_struct, spec: StructSpec, version: int):
    """The peer's decoded object in neutral form, keyed by kafkawire's field names."""
    if obj is None:
        return None
    out = {}
    for kf, f in kp_fields_paired(kp_struct, spec, version):
        value = getattr(obj, kf.name)
        if value is not None and kf.is_struct_array():
            value = [kp_neutral(v, kf, f.struct, version) for v in value]
        elif value is not None and kf.is_struct():
            value = kp_neutral(value, kf, f.struct, version)
        elif value is None and kf.is_struct() and kf.tagged_field_q(version) and f.default_text != "null":
            value = neutral_default(f.struct, version)
        elif kf.type_str == "bitfield":
            value = _bitfield_from_kp(value)
        elif isinstance(value, (list, tuple)):
            value = [bytes(v) if isinstance(v, memoryview) else v for v in value]
        elif isinstance(value, (memoryview, bytearray)):
            value = bytes(value)
        if kf.type_str == "uuid" and value is None:
            value = ZERO_UUID  # the peer reads the zero uuid as None
        out[f.name] = value
    return out


def neutral_default(spec: StructSpec, version: int) -> dict:
    """A struct holding only schema defaults, in neutral form."""
    out = {}
    for f in spec.fields:
        if f.present(version):
            value = f.default_value()
            if f.is_struct and not f.is_array and value is not None:
                value = neutral_default(f.struct, version)
            out[f.name] = value
    return out


def kp_encode(kp_cls, obj, version: int, flexible: bool) -> bytes:
    if kp_cls._json["type"] in ("request", "response"):
        return bytes(obj.encode(version=version))
    return bytes(kp_cls._struct.encode(obj, version=version, compact=flexible, tagged=flexible))


def kp_decode(kp_cls, data: bytes, version: int, flexible: bool):
    if kp_cls._json["type"] in ("request", "response"):
        from kafka.protocol.api_message import ApiMessage

        # the schema-level decoder: kafka-python's ApiVersionsResponse.decode switches to v0
        # whenever the error code is not 0, a client policy rather than the wire format
        return ApiMessage.decode.__func__(kp_cls, data, version=version)
    buf = io.BytesIO(data)
    obj = kp_cls._struct.decode(buf, version=version, compact=flexible, tagged=flexible, data_class=kp_cls)
    assert buf.read() == b"", "the peer left bytes unread"
    return obj


# -- kio ------------------------------------------------------------------------------------


def kio_classes() -> dict[tuple[str, int], type]:
    """kio's per-version entity classes by (Kafka name, version)."""
    from kio.schema.index import schema_name_map

    out = {}
    for versions in schema_name_map.values():
        for version, kinds in versions.items():
            for path in kinds.values():
                out[(path.split(":")[1], version)] = path
    return _Lazy(out)


class _Lazy(dict):
    """Resolves kio's classes on first use (importing all of them takes seconds)."""

    def __getitem__(self, key):
        from pkgutil import resolve_name

        value = super().__getitem__(key)
        if isinstance(value, str):
            value = resolve_name(value)
            super().__setitem__(key, value)
        return value


def _norm(name: str) -> str:
    return name.replace("_", "").lower()


_KIO_TYPE_OF = {"error_code": "int16", "timedelta_i32": "int32", "timedelta_i64": "int64", "datetime_i64": "int64"}


def kio_field_pairs(kio_cls, spec: StructSpec, version: int) -> list[tuple]:
    """(kio dataclass field, kafkawire field) for the fields present at the version, paired by schema
    position (kio renames some fields, e.g. ThrottleTimeMs -> throttle_time); the wire types must agree."""
    import dataclasses

    ours = [f for f in spec.fields if f.present(version)]
    theirs = list(dataclasses.fields(kio_cls))
    assert len(ours) == len(theirs), (kio_cls, [k.name for k in theirs], [f.name for f in ours])
    for k, f in zip(theirs, ours):
        kafka_type = k.metadata.get("kafka_type")
        if kafka_type is not None:
            assert _KIO_TYPE_OF.get(kafka_type, kafka_type) == f.type, (kio_cls, k.name, kafka_type, f.name, f.type)
    return list(zip(theirs, ours))


def _kio_entity_type(kio_field):
    from kio.serial._introspect import EntityField, EntityTupleField, classify_field

    kind = classify_field(kio_field)
    return kind.type_ if isinstance(kind, (EntityField, EntityTupleField)) else None


def kio_kafka_types(kio_cls, spec: StructSpec, version: int, out: dict | None = None) -> dict:
    """id(kafkawire FieldSpec) -> kio's kafka_type, for the whole struct tree."""
    out = {} if out is None else out
    for k, f in kio_field_pairs(kio_cls, spec, version):
        nested = _kio_entity_type(k)
        if nested is not None:
            kio_kafka_types(nested, f.struct, version, out)
        else:
            from kio.serial._introspect import is_optional

            out[id(f)] = (k.metadata.get("kafka_type"), is_optional(k))
    return out


def kio_neutral(obj, spec: StructSpec, version: int):
    if obj is None:
        return None
    out = {}
    for k, f in kio_field_pairs(type(obj), spec, version):
        value = getattr(obj, k.name)
        if isinstance(value, tuple):
            value = [_kio_value(v, f, version, element=True) for v in value]
        else:
            value = _kio_value(value, f, version)
        out[f.name] = value
    return out


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MS = datetime.timedelta(milliseconds=1)


def _kio_value(value, f: FieldSpec, version: int, element: bool = False):
    import enum

    if f.struct is not None:
        return kio_neutral(value, f.struct, version)
    if value is None:
        if f.is_array and not element:
            return None  # a null array (BrokerHeartbeat v2's CordonedLogDirs: nullable []uuid)
        if f.type == "uuid":
            return ZERO_UUID  # kio reads the zero uuid as None
        if f.type == "int64" and not f.is_array:
            return -1  # kio's nullable timestamps read -1 as None
        return None
    if isinstance(value, enum.Enum):
        return int(value.value)
    if isinstance(value, datetime.datetime):
        return (value - _EPOCH) // _MS
    if isinstance(value, datetime.timedelta):
        return value // _MS
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value


def kio_decode(kio_cls, data: bytes):
    from kio.serial import entity_reader

    obj, size = entity_reader(kio_cls)(data, 0)
    assert size == len(data), f"kio read {size} of {len(data)} bytes"
    return obj


def kio_encode(kio_cls, obj) -> bytes:
    from kio.serial import entity_writer

    buf = io.BytesIO()
    entity_writer(kio_cls)(buf, obj)
    return buf.getvalue()
