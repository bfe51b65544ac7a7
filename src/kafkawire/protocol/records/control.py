"""Control records: transaction markers (commit/abort) and the other KRaft control types.

A control record's key is ``version int16, type int16``.  For commit and
abort the value is ``version int16, coordinator_epoch int32`` (the
EndTxnMarker schema, version 0).
"""

from __future__ import annotations

import struct

from .builder import BatchBuilder
from .errors import CorruptRecordError
from .model import ControlRecord, ControlRecordType, Record

_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


def encode_control_key(control_type: ControlRecordType | int, version: int = CONTROL_KEY_VERSION) -> bytes:
    return _KEY.pack(version, int(control_type))


def encode_end_txn_marker_value(coordinator_epoch: int, version: int = END_TXN_MARKER_VERSION) -> bytes:
    return _MARKER_VALUE.pack(version, coordinator_epoch)


def decode_control_record(record: Record) -> ControlRecord:
    """Interpret a record of a control batch; raises :class:`CorruptRecordError` if it does not parse."""
    key = record.key
    if key is None or len(key) < 4:
        raise CorruptRecordError(f"control record key needs 4 bytes, got {None if key is None else len(key)}")
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    try:
        ctype: ControlRecordType | int = ControlRecordType(type_id)
    except ValueError:
        ctype = type_id
    epoch = None
    if ctype in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        value = record.value
        if value is None or len(value) < 6:
            raise CorruptRecordError("end transaction marker value needs 6 bytes")
        marker_version, epoch = _MARKER_VALUE.unpack_from(value)
        if marker_version < 0:
            raise CorruptRecordError(f"invalid end transaction marker version {marker_version}")
    return ControlRecord(record.offset, record.timestamp, ctype, version, epoch, record.value)


def build_control_batch(
    control_type: ControlRecordType | int = ControlRecordType.COMMIT,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = -1,
    value: bytes | None = None,
) -> bytes:
    """A control batch holding one control record, as the transaction coordinator has leaders write.

    For COMMIT/ABORT the value is the end-transaction marker built from
    ``coordinator_epoch``; for other types pass the encoded ``value``.  The
    batch carries no sequence and, for transaction markers, is transactional, like Java's.
    """
    ctype = int(control_type)
    if value is None:
        if ctype not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            raise ValueError(f"control type {control_type!r} needs an explicit value")
        value = encode_end_txn_marker_value(coordinator_epoch)
    builder = BatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        transactional=ctype in (ControlRecordType.COMMIT, ControlRecordType.ABORT),
        control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(encode_control_key(ctype), value, None, timestamp)
    return builder.build()


def build_end_txn_marker(commit: bool, **kwargs) -> bytes:
    """``build_control_batch(COMMIT if commit else ABORT, ...)``."""
    return build_control_batch(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, **kwargs)
