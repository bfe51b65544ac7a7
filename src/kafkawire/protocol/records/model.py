"""Value types shared by the v2 batch and legacy message-set code."""

from __future__ import annotations

import enum
from typing import NamedTuple

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

MAGIC_V0 = 0
MAGIC_V1 = 1
MAGIC_V2 = 2

# Offset + length prefix shared by every magic: what must be read to know
# how long an entry is.
LOG_OVERHEAD = 12


class Compression(enum.IntEnum):
    """Codec ids of the low three attribute bits (same ids for every magic)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def parse(cls, value: Compression | int | str | None) -> Compression:
        """Accept an enum, an id, or a Kafka config name (``"gzip"``, ``"none"``...)."""
        if value is None:
            return cls.NONE
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                raise ValueError(f"unknown compression {value!r}") from None
        return cls(value)


class TimestampType(enum.IntEnum):
    NO_TIMESTAMP_TYPE = -1  # magic 0 messages carry no timestamp
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


CREATE_TIME = TimestampType.CREATE_TIME
LOG_APPEND_TIME = TimestampType.LOG_APPEND_TIME


class Record(NamedTuple):
    """One record as a consumer sees it.

    ``key``/``value`` are ``None`` for null (distinct from ``b""``); ``headers``
    is a list of ``(str, bytes | None)``; legacy messages have no headers.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class ControlRecord(NamedTuple):
    """A decoded control record.

    ``type`` is a :class:`ControlRecordType` or, for ids this library does not
    know, the raw int.  ``coordinator_epoch`` is set for commit/abort markers
    only; ``value`` is the raw value for any type.
    """

    offset: int
    timestamp: int
    type: ControlRecordType | int
    version: int
    coordinator_epoch: int | None
    value: bytes | None

    @property
    def is_commit(self) -> bool:
        return self.type == ControlRecordType.COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == ControlRecordType.ABORT
