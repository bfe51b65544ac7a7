"""What both engines share beyond the contract: topic validation, config merging, ids,
the read side of their bookkeeping (``LogOffsets``, ``TopicRegistry``), and the
in-batch lookups ListOffsets needs (record timestamps)."""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Mapping

from . import _batch
from .base import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    PartitionLog,
    TopicExistsError,
    TopicMeta,
    UnknownTopicError,
)
from .config import StorageConfig

_LEGAL_NAME = re.compile(r"[A-Za-z0-9._-]+")
MAX_NAME_LENGTH = 249  # Kafka's limit, so that "<topic>-<partition>" fits a file name
MAX_PARTITIONS = 1_000_000


def check_topic_name(name: str) -> None:
    if (
        not isinstance(name, str)
        or not name
        or name in (".", "..")
        or len(name) > MAX_NAME_LENGTH
        or not _LEGAL_NAME.fullmatch(name)
    ):
        raise InvalidTopicError(f"illegal topic name {name!r}")


def check_partitions(count: int) -> None:
    if not isinstance(count, int) or count < 1 or count > MAX_PARTITIONS:
        raise InvalidPartitionsError(f"partition count {count!r} must be in [1, {MAX_PARTITIONS}]")


def new_topic(
    existing: Mapping[str, TopicMeta],
    config: StorageConfig,
    name: str,
    partitions: int,
    configs: Mapping[str, str] | None,
    topic_id: uuid.UUID | None,
) -> TopicMeta:
    """Validated metadata of a topic about to be created (not yet registered)."""
    check_topic_name(name)
    check_partitions(partitions)
    if name in existing:
        raise TopicExistsError(name)
    explicit = {str(k): str(v) for k, v in (configs or {}).items() if v is not None}
    config.for_topic(explicit)  # raises InvalidConfigError on a bad value
    if topic_id is None:
        topic_id = uuid.uuid4()
    if topic_id.int == 0:
        raise InvalidConfigError("the zero UUID is not a valid topic id")
    if any(m.topic_id == topic_id for m in existing.values()):
        raise TopicExistsError(f"topic id {topic_id} is already used")
    return TopicMeta(name=name, topic_id=topic_id, partitions=partitions, configs=explicit)


def merged_configs(
    config: StorageConfig, current: Mapping[str, str], changes: Mapping[str, str | None]
) -> dict[str, str]:
    out = dict(current)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[str(key)] = str(value)
    config.for_topic(out)
    return out


def check_new_total(meta: TopicMeta, total: int) -> None:
    check_partitions(total)
    if total <= meta.partitions:
        raise InvalidPartitionsError(f"topic {meta.name} has {meta.partitions} partitions; {total} would not add any")


def new_cluster_id() -> str:
    """Kafka's form: a random UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


class LogOffsets:
    """PartitionLog offsets and size, for an engine keeping them in ``_start``, ``_end`` and ``_size``."""

    _start: int
    _end: int
    _size: int

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    @property
    def size_bytes(self) -> int:
        return self._size


class TopicRegistry:
    """Storage's lookups, for an engine keeping ``_cluster_id``, ``_topics`` (name -> TopicMeta) and
    ``_logs`` (name -> its partitions' logs), with ``_lock`` guarding ``_topics``."""

    _cluster_id: str
    _topics: dict[str, TopicMeta]
    _logs: dict[str, list]

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def topics(self) -> dict[str, TopicMeta]:
        with self._lock:
            return dict(self._topics)

    def topic(self, name: str) -> TopicMeta:
        # one lookup, without the copy of every topic ``topics()`` makes (Produce looks its topics up per
        # request): a single dict operation needs no lock, as the engines change ``_topics`` one whole
        # operation at a time or replace it
        meta = self._topics.get(name)
        if meta is None:
            raise UnknownTopicError(name)
        return meta

    def partition(self, topic: str, partition: int) -> PartitionLog:
        logs = self._logs.get(topic)
        if logs is None or not 0 <= partition < len(logs):
            raise UnknownTopicError(f"{topic}-{partition}")
        return logs[partition]


def first_record_in(batches, timestamp_ms: int, min_offset: int) -> tuple[int, int] | None:
    """First (offset, timestamp) with timestamp >= ``timestamp_ms`` and offset >= ``min_offset`` among
    ``batches``, (whole batch, its BatchInfo) pairs in offset order; headers skip the batches that cannot hold it."""
    for batch, info in batches:
        if info.max_timestamp >= timestamp_ms and info.last_offset >= min_offset:
            found = first_record_at_or_after(batch, timestamp_ms, min_offset)
            if found is not None:
                return found
    return None


def first_record_at_or_after(batch, timestamp_ms: int, min_offset: int) -> tuple[int, int] | None:
    """First (offset, timestamp) in ``batch`` with timestamp >= ``timestamp_ms`` and offset >= ``min_offset``."""
    for offset, ts in _batch.record_timestamps(batch):
        if ts >= timestamp_ms and offset >= min_offset:
            return offset, ts
    return None


def record_with_timestamp(batch, timestamp_ms: int) -> tuple[int, int]:
    """(offset, timestamp) of the first record of ``batch`` carrying its max timestamp."""
    for offset, ts in _batch.record_timestamps(batch):
        if ts == timestamp_ms:
            return offset, ts
    return _batch.read_info(batch, 0).last_offset, timestamp_ms  # max timestamp not on any record (a producer's quirk)
