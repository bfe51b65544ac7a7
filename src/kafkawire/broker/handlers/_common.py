"""Helpers shared by handler families: topic lookup, creation, error mapping, clocks."""

from __future__ import annotations

import logging
import time
import uuid

from kafkawire.protocol import errors

from ..storage import base as sb

log = logging.getLogger("kafkawire.broker")

ZERO_UUID = uuid.UUID(int=0)
INT32_MIN = -2147483648

# AclOperation codes
(
    READ,
    WRITE,
    CREATE,
    DELETE,
    ALTER,
    DESCRIBE,
    CLUSTER_ACTION,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    IDEMPOTENT_WRITE,
    CREATE_TOKENS,
    DESCRIBE_TOKENS,
) = 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14
TOPIC_OPERATIONS = sum(
    1 << op for op in (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
)
# as Kafka 4.4 reports them without an authorizer (8096): the token operations are not among them
CLUSTER_OPERATIONS = sum(
    1 << op for op in (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE)
)


def now_ms() -> int:
    return int(time.time() * 1000)


class StorageFailure(sb.StorageError):
    """The disk failed a change (no space, I/O error...): KAFKA_STORAGE_ERROR."""

    error_code = errors.KAFKA_STORAGE_ERROR
    log_dir_failure = True


def is_disk_failure(exc: BaseException) -> bool:
    """An OSError, or a storage error an OSError caused or that the engine marked as a log dir failure."""
    return (
        isinstance(exc, OSError)
        or getattr(exc, "log_dir_failure", False)
        or isinstance(exc.__cause__, OSError)
        or isinstance(exc.__context__, OSError)
    )


def storage_error_code(exc: Exception) -> int:
    """Kafka's error code for an exception from storage: the disk's when the disk caused it, else the code
    its ``StorageError`` class carries; anything else is UNKNOWN_SERVER_ERROR."""
    if is_disk_failure(exc):
        return errors.KAFKA_STORAGE_ERROR
    if isinstance(exc, sb.StorageError):
        return exc.error_code
    return errors.UNKNOWN_SERVER_ERROR


_LEGAL = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def topic_name_problem(name) -> str | None:
    """Why ``name`` cannot be a topic (Kafka's Topic.validate), or None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > 249:
        return f"Topic name is illegal, it can't be longer than 249 characters, topic name: {name}"
    if not set(name) <= _LEGAL:
        return (
            f'Topic name "{name}" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'"
        )
    return None


def find_topic(broker, name: str | None = None, topic_id: uuid.UUID | None = None):
    """TopicMeta or None."""
    storage = broker.storage
    if name:
        try:
            return storage.topic(name)
        except sb.UnknownTopicError:
            return None
    if topic_id is not None and topic_id != ZERO_UUID:
        try:
            return storage.topic_by_id(topic_id)
        except sb.UnknownTopicError:
            return None
    return None


def topic_config(broker, meta, name: str) -> str:
    return broker.config.topic_value(meta.configs if meta is not None else {}, name)


def create_topic(broker, name: str, partitions: int, configs: dict | None = None):
    """Create a topic (auto-creation and CreateTopics); returns its TopicMeta."""
    try:
        meta = broker.storage.create_topic(name, partitions, configs or {})
    except OSError as exc:
        raise StorageFailure(f"creating topic {name} failed: {exc}") from exc
    log.info(
        "created topic %s with %d partitions (id %s)%s",
        name,
        partitions,
        meta.topic_id,
        f" and configs {configs}" if configs else "",
    )
    return meta


def partition_log(broker, meta, partition: int):
    if partition < 0 or partition >= meta.partitions:
        return None
    try:
        return broker.storage.partition(meta.name, partition)
    except sb.UnknownTopicError:
        return None
