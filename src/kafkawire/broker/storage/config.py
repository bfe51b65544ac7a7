"""Storage settings: Kafka's broker keys and defaults, and the per-topic overrides.

``StorageConfig.from_properties`` reads the keys of ``server.properties``;
``StorageConfig.for_topic`` resolves the values a topic actually uses, a topic
config (``segment.bytes``...) winning over the broker default
(``log.segment.bytes``...), exactly as Kafka resolves them.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from .base import InvalidConfigError

LONG_MAX = 2**63 - 1
_HOUR_MS = 3_600_000

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


def _as_int(key: str, value) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise InvalidConfigError(f"{key}={value!r} is not an integer") from None


def _as_bool(key: str, value) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise InvalidConfigError(f"{key}={value!r} is not a boolean")


def _timestamp_type(key: str, value) -> str:
    text = str(value).strip()
    if text not in (CREATE_TIME, LOG_APPEND_TIME):
        raise InvalidConfigError(f"{key}={value!r} must be {CREATE_TIME} or {LOG_APPEND_TIME}")
    return text


def _as_ratio(key: str, value) -> float:
    try:
        ratio = float(value)
    except (TypeError, ValueError):
        raise InvalidConfigError(f"{key}={value!r} is not a number") from None
    if not 0.0 <= ratio <= 1.0:
        raise InvalidConfigError(f"{key}={value!r} must be in [0, 1]")
    return ratio


def _cleanup_policy(key: str, value) -> str:
    """A list of delete and compact; empty (as Kafka 4.4 allows) means neither: segments are never deleted."""
    parts = [p.strip() for p in str(value).split(",") if p.strip()]
    if any(p not in ("delete", "compact") for p in parts):
        raise InvalidConfigError(f"{key}={value!r} must be a list of delete, compact")
    return ",".join(parts)


class TopicSettings(msgspec.Struct, frozen=True):
    """What one topic's log actually uses (broker defaults with the topic's overrides applied)."""

    segment_bytes: int
    segment_ms: int
    retention_ms: int  # -1: keep forever
    retention_bytes: int  # -1: no size limit (per partition, like Kafka)
    index_interval_bytes: int
    flush_messages: int
    flush_ms: int | None
    message_timestamp_type: str
    cleanup_policy: str
    # log compaction (storage/cleaner.py), Kafka's topic keys and defaults
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def deletes(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")


# topic key -> (TopicSettings field, parser)
_TOPIC_KEYS = {
    "segment.bytes": ("segment_bytes", _as_int),
    "segment.ms": ("segment_ms", _as_int),
    "retention.ms": ("retention_ms", _as_int),
    "retention.bytes": ("retention_bytes", _as_int),
    "index.interval.bytes": ("index_interval_bytes", _as_int),
    "flush.messages": ("flush_messages", _as_int),
    "flush.ms": ("flush_ms", _as_int),
    "message.timestamp.type": ("message_timestamp_type", _timestamp_type),
    "cleanup.policy": ("cleanup_policy", _cleanup_policy),
    "delete.retention.ms": ("delete_retention_ms", _as_int),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _as_int),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _as_int),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _as_ratio),
}
TOPIC_CONFIG_KEYS = frozenset(_TOPIC_KEYS)


class StorageConfig(msgspec.Struct, frozen=True):
    """Broker-level storage settings with Kafka's defaults."""

    segment_bytes: int = 1024 * 1024 * 1024  # log.segment.bytes
    roll_ms: int = 168 * _HOUR_MS  # log.roll.ms / log.roll.hours
    retention_ms: int = 168 * _HOUR_MS  # log.retention.ms / .minutes / .hours
    retention_bytes: int = -1  # log.retention.bytes
    index_interval_bytes: int = 4096  # log.index.interval.bytes
    flush_interval_messages: int = LONG_MAX  # log.flush.interval.messages
    flush_interval_ms: int | None = None  # log.flush.interval.ms
    message_timestamp_type: str = CREATE_TIME  # log.message.timestamp.type
    cleanup_policy: str = "delete"  # log.cleanup.policy
    # kafkawire's own: fsync before acknowledging acks=all produce requests.
    # A single node has no replicas, so the disk is the only copy (see segments).
    fsync_acks_all: bool = True  # kafkawire.log.fsync.acks.all
    # the log cleaner's defaults for the topic keys of compaction (log.cleaner.*)
    delete_retention_ms: int = 86_400_000  # log.cleaner.delete.retention.ms
    min_compaction_lag_ms: int = 0  # log.cleaner.min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX  # log.cleaner.max.compaction.lag.ms
    min_cleanable_dirty_ratio: float = 0.5  # log.cleaner.min.cleanable.ratio
    node_id: int | None = None  # node.id, recorded in meta.properties

    @classmethod
    def from_properties(cls, props: Mapping[str, object] | None) -> StorageConfig:
        """Read server.properties-style keys; unknown keys are ignored (they belong to other parts)."""
        props = dict(props or {})
        values: dict[str, object] = {}

        def first(*keys: str):
            for key in keys:
                if props.get(key) not in (None, ""):
                    return key, props[key]
            return None, None

        key, value = first("log.segment.bytes")
        if key:
            values["segment_bytes"] = _as_int(key, value)
        key, value = first("log.roll.ms", "log.roll.hours")
        if key:
            values["roll_ms"] = _as_int(key, value) * (_HOUR_MS if key.endswith("hours") else 1)
        key, value = first("log.retention.ms", "log.retention.minutes", "log.retention.hours")
        if key:
            scale = {"ms": 1, "minutes": 60_000, "hours": _HOUR_MS}[key.rsplit(".", 1)[1]]
            ms = _as_int(key, value)
            values["retention_ms"] = -1 if ms < 0 else ms * scale
        for prop, name in (
            ("log.retention.bytes", "retention_bytes"),
            ("log.index.interval.bytes", "index_interval_bytes"),
            ("log.flush.interval.messages", "flush_interval_messages"),
            ("log.flush.interval.ms", "flush_interval_ms"),
            ("node.id", "node_id"),
        ):
            key, value = first(prop)
            if key:
                values[name] = _as_int(key, value)
        key, value = first("log.message.timestamp.type")
        if key:
            values["message_timestamp_type"] = _timestamp_type(key, value)
        key, value = first("log.cleanup.policy")
        if key:
            values["cleanup_policy"] = _cleanup_policy(key, value)
        for prop, name in (
            ("log.cleaner.delete.retention.ms", "delete_retention_ms"),
            ("log.cleaner.min.compaction.lag.ms", "min_compaction_lag_ms"),
            ("log.cleaner.max.compaction.lag.ms", "max_compaction_lag_ms"),
        ):
            key, value = first(prop)
            if key:
                values[name] = _as_int(key, value)
        key, value = first("log.cleaner.min.cleanable.ratio")
        if key:
            values["min_cleanable_dirty_ratio"] = _as_ratio(key, value)
        key, value = first("kafkawire.log.fsync.acks.all")
        if key:
            values["fsync_acks_all"] = _as_bool(key, value)
        config = cls(**values)
        config._check()
        return config

    @classmethod
    def coerce(cls, config: StorageConfig | Mapping[str, object] | None) -> StorageConfig:
        """Engines accept a StorageConfig, a properties dict, or None (all defaults)."""
        if isinstance(config, StorageConfig):
            return config
        return cls.from_properties(config)

    def _check(self) -> None:
        if self.segment_bytes < 14 or self.segment_bytes > 2**31 - 1:
            raise InvalidConfigError(f"log.segment.bytes={self.segment_bytes} must be in [14, 2147483647]")
        if self.roll_ms < 1:
            raise InvalidConfigError(f"log.roll.ms={self.roll_ms} must be positive")
        if self.index_interval_bytes < 0:
            raise InvalidConfigError(f"log.index.interval.bytes={self.index_interval_bytes} must be >= 0")
        if self.flush_interval_messages < 1:
            raise InvalidConfigError(f"log.flush.interval.messages={self.flush_interval_messages} must be >= 1")

    def defaults(self) -> TopicSettings:
        return TopicSettings(
            segment_bytes=self.segment_bytes,
            segment_ms=self.roll_ms,
            retention_ms=self.retention_ms,
            retention_bytes=self.retention_bytes,
            index_interval_bytes=self.index_interval_bytes,
            flush_messages=self.flush_interval_messages,
            flush_ms=self.flush_interval_ms,
            message_timestamp_type=self.message_timestamp_type,
            cleanup_policy=self.cleanup_policy,
            delete_retention_ms=self.delete_retention_ms,
            min_compaction_lag_ms=self.min_compaction_lag_ms,
            max_compaction_lag_ms=self.max_compaction_lag_ms,
            min_cleanable_dirty_ratio=self.min_cleanable_dirty_ratio,
        )

    def for_topic(self, topic_configs: Mapping[str, str] | None) -> TopicSettings:
        """Effective settings of a topic whose explicit configs are ``topic_configs``."""
        values = {f.name: getattr(self.defaults(), f.name) for f in msgspec.structs.fields(TopicSettings)}
        for key, raw in (topic_configs or {}).items():
            spec = _TOPIC_KEYS.get(key)
            if spec is None or raw is None:
                continue  # other topic configs (max.message.bytes...) are the handlers' business
            name, parse = spec
            values[name] = parse(key, raw)
        internal = (topic_configs or {}).get("internal.segment.bytes")
        if internal is not None:
            # Kafka's internal config for tests: the segment size whatever segment.bytes says, and with no bounds
            # (Kafka 4.4 takes 0 or a negative size; produce to such a topic is then refused, every batch being
            # larger than a segment, with RECORD_LIST_TOO_LARGE)
            values["segment_bytes"] = _as_int("internal.segment.bytes", internal)
        settings = TopicSettings(**values)
        if internal is None and (settings.segment_bytes < 14 or settings.segment_bytes > 2**31 - 1):
            raise InvalidConfigError(f"segment.bytes={settings.segment_bytes} must be in [14, 2147483647]")
        if settings.segment_ms < 1:
            raise InvalidConfigError(f"segment.ms={settings.segment_ms} must be positive")
        if settings.index_interval_bytes < 0:
            raise InvalidConfigError(f"index.interval.bytes={settings.index_interval_bytes} must be >= 0")
        if settings.flush_messages < 1:
            raise InvalidConfigError(f"flush.messages={settings.flush_messages} must be >= 1")
        return settings
