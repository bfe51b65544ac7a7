"""KRaft metadata records as Kafka frames them in ``__cluster_metadata-0``, on the generated codecs.

Kafka's MetadataRecordSerde writes a record's value as an unsigned varint frame version (1), the
schema's record type (its "apiKey"), the schema version, then the message; the key is null. Control
records (LeaderChange, SnapshotHeader/Footer, KRaftVersion, Voters) carry Kafka's control key and the
data message of their type as the value, at version 0.
"""

from __future__ import annotations

import functools

from kafkawire.protocol import message_class
from kafkawire.protocol.primitives import read_uvarint, uvarint_bytes
from kafkawire.protocol.records.model import ControlRecordType
from kafkawire.protocol.schema import message_spec, record_names

FRAME_VERSION = 1

# The control messages of a KRaft log, by control record type.
CONTROL_MESSAGES = {
    ControlRecordType.LEADER_CHANGE: "LeaderChangeMessage",
    ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeaderRecord",
    ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooterRecord",
    ControlRecordType.KRAFT_VERSION: "KRaftVersionRecord",
    ControlRecordType.KRAFT_VOTERS: "VotersRecord",
}


class MetadataRecordError(ValueError):
    pass


class UnknownRecordTypeError(MetadataRecordError):
    """A record type this version of kafkawire has no schema for (a newer Kafka's): carried, not applied."""


@functools.cache
def _by_type() -> dict[int, str]:
    out = {}
    for name in record_names():
        spec = message_spec(name)
        # kafka-storage's remote log metadata records are "metadata" too, numbered apart: only kafka-metadata's
        if (
            spec.kind == "metadata"
            and spec.record_type is not None
            and "kafka-metadata-" in (spec.definitions[0].source or "")
        ):
            out[spec.record_type] = name
    return out


def record_name(record_type: int) -> str | None:
    return _by_type().get(record_type)


def encode(message, version: int | None = None) -> bytes:
    """A metadata record's value: frame, record type, version, then the message (at its newest version)."""
    spec = type(message).spec
    if version is None:
        version = spec.valid.hi
    return b"".join(
        (uvarint_bytes(FRAME_VERSION), uvarint_bytes(spec.record_type), uvarint_bytes(version), message.encode(version))
    )


def decode(value) -> tuple[str, int, object]:
    """(schema name, version, message) of a metadata record's value."""
    if value is None:
        raise MetadataRecordError("a metadata record has no value")
    frame, pos = read_uvarint(value, 0)
    if frame != FRAME_VERSION:
        raise MetadataRecordError(f"unknown metadata record frame version {frame}")
    record_type, pos = read_uvarint(value, pos)
    version, pos = read_uvarint(value, pos)
    name = record_name(record_type)
    if name is None:
        raise UnknownRecordTypeError(f"unknown metadata record type {record_type}")
    cls = message_class(name)
    return name, version, cls.decode(memoryview(value)[pos:], version)


def decode_control(control_type: int, value) -> tuple[str, object] | None:
    """(message name, message) of a KRaft control record, or None for a type this log does not carry."""
    name = CONTROL_MESSAGES.get(control_type)
    if name is None or value is None:
        return None
    return name, message_class(name).decode(value, 0)


def new(schema: str, /, **fields):
    """A record of the named schema (positional: schemas have fields called ``name``)."""
    return message_class(schema)(**fields)
