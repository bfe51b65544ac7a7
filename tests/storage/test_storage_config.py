"""StorageConfig: Kafka's broker keys, their defaults and precedence, and topic overrides."""

from __future__ import annotations

import pytest

from kafkawire.broker.storage import InvalidConfigError, StorageConfig
from kafkawire.broker.storage.config import LONG_MAX

HOUR = 3_600_000


def test_defaults_are_kafkas():
    c = StorageConfig.from_properties({})
    assert (c.segment_bytes, c.roll_ms, c.retention_ms, c.retention_bytes) == (1073741824, 168 * HOUR, 168 * HOUR, -1)
    assert (c.index_interval_bytes, c.flush_interval_messages, c.flush_interval_ms) == (4096, LONG_MAX, None)
    assert (c.message_timestamp_type, c.cleanup_policy, c.fsync_acks_all) == ("CreateTime", "delete", True)
    assert StorageConfig.coerce(None) == c == StorageConfig()


def test_broker_keys_and_their_precedence():
    c = StorageConfig.from_properties(
        {
            "log.segment.bytes": "1048576",
            "log.roll.hours": "2",
            "log.retention.hours": "24",
            "log.retention.minutes": "30",
            "log.retention.bytes": "1000000",
            "log.index.interval.bytes": "512",
            "log.flush.interval.messages": "100",
            "log.flush.interval.ms": "250",
            "log.cleanup.policy": "compact,delete",
            "log.message.timestamp.type": "LogAppendTime",
            "kafkawire.log.fsync.acks.all": "false",
            "node.id": 7,
            "listeners": "PLAINTEXT://:9092",  # not ours: ignored
        }
    )
    assert (c.segment_bytes, c.roll_ms, c.retention_ms, c.retention_bytes) == (1048576, 2 * HOUR, 30 * 60_000, 1000000)
    assert (c.index_interval_bytes, c.flush_interval_messages, c.flush_interval_ms) == (512, 100, 250)
    assert (c.cleanup_policy, c.message_timestamp_type, c.fsync_acks_all, c.node_id) == (
        "compact,delete",
        "LogAppendTime",
        False,
        7,
    )
    ms = StorageConfig.from_properties(
        {"log.roll.ms": "5", "log.roll.hours": "9", "log.retention.ms": "6", "log.retention.minutes": "1"}
    )
    assert (ms.roll_ms, ms.retention_ms) == (5, 6)
    assert StorageConfig.from_properties({"log.retention.hours": "-1"}).retention_ms == -1


@pytest.mark.parametrize(
    "props",
    [
        {"log.segment.bytes": "ten"},
        {"log.segment.bytes": "13"},
        {"log.segment.bytes": str(2**31)},
        {"log.cleanup.policy": "shred"},
        {"log.message.timestamp.type": "Now"},
        {"log.flush.interval.messages": "0"},
        {"kafkawire.log.fsync.acks.all": "maybe"},
    ],
)
def test_bad_broker_values_are_refused(props):
    with pytest.raises(InvalidConfigError):
        StorageConfig.from_properties(props)


def test_topic_overrides_win_over_broker_defaults():
    c = StorageConfig.from_properties({"log.retention.ms": "1000", "log.segment.bytes": "5000"})
    t = c.for_topic(
        {
            "retention.ms": "-1",
            "segment.ms": "60000",
            "flush.messages": "1",
            "flush.ms": "10",
            "index.interval.bytes": "0",
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "compact",
            "max.message.bytes": "100",
        }
    )
    assert (t.retention_ms, t.segment_bytes, t.segment_ms, t.flush_messages, t.flush_ms) == (-1, 5000, 60000, 1, 10)
    assert t.index_interval_bytes == 0 and t.log_append_time and not t.deletes
    assert c.for_topic({}).retention_ms == 1000 and c.for_topic(None).deletes
    with pytest.raises(InvalidConfigError):
        c.for_topic({"segment.bytes": "1"})
    with pytest.raises(InvalidConfigError):
        c.for_topic({"retention.bytes": "1e9"})
