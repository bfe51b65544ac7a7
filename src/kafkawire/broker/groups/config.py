"""Group coordinator settings, read from the broker's properties (Kafka's key names and defaults)."""

from __future__ import annotations

import msgspec

# key -> (attribute, Kafka default)
KEYS = {
    "group.initial.rebalance.delay.ms": ("initial_rebalance_delay_ms", 3000),
    "group.min.session.timeout.ms": ("min_session_timeout_ms", 6000),
    "group.max.session.timeout.ms": ("max_session_timeout_ms", 1800000),
    "group.max.size": ("max_size", 2147483647),
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", 4096),
    "group.consumer.heartbeat.interval.ms": ("consumer_heartbeat_interval_ms", 5000),
    "group.consumer.session.timeout.ms": ("consumer_session_timeout_ms", 45000),
    "group.consumer.max.size": ("consumer_max_size", 2147483647),
    "group.consumer.assignment.interval.ms": ("consumer_assignment_interval_ms", 1000),
    "offsets.topic.num.partitions": ("offsets_topic_partitions", 1),
    "offsets.retention.minutes": ("offsets_retention_minutes", 10080),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_interval_ms", 600000),
    "kafkawire.offsets.fsync": ("offsets_fsync", True),
    "kafkawire.offsets.compact.records": ("compact_after_records", 50000),
}


class GroupConfig(msgspec.Struct):
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2147483647
    offset_metadata_max_bytes: int = 4096
    consumer_heartbeat_interval_ms: int = 5000
    consumer_session_timeout_ms: int = 45000
    consumer_max_size: int = 2147483647
    # the least time between two target assignments of a consumer group (0: every epoch at once)
    consumer_assignment_interval_ms: int = 1000
    offsets_topic_partitions: int = 1
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    # an acknowledged commit is on disk, like an acks=all produce (a single node has no replica to
    # keep it); costs one fsync per commit request on the disk engine
    offsets_fsync: bool = True
    compact_after_records: int = 50000
    # server-side assignors of the consumer protocol (KIP-848), the first is the default
    consumer_assignors: list[str] = msgspec.field(default_factory=lambda: ["uniform", "range"])
    # group.coordinator.rebalance.protocols: "classic,consumer"
    protocols: tuple[str, ...] = ("classic", "consumer")
    # group.consumer.migration.policy: bidirectional, upgrade, downgrade or disabled (see groups/mixed.py)
    migration_policy: str = "bidirectional"
    # broker.rack: the rack of every partition's one replica, part of a consumer group's metadataHash
    rack: str | None = None

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> GroupConfig:
        cfg = cls()
        for key, (attr, default) in KEYS.items():
            if key in props:
                raw = props[key].strip()
                if isinstance(default, bool):
                    setattr(cfg, attr, raw.lower() == "true")
                else:
                    setattr(cfg, attr, int(raw))
        if props.get("group.consumer.assignors"):
            names = []
            for item in props["group.consumer.assignors"].split(","):
                item = item.strip()
                # Kafka takes class names; accept both forms
                low = item.rsplit(".", 1)[-1].lower()
                for n in ("uniform", "range"):
                    if low.startswith(n):
                        names.append(n)
            cfg.consumer_assignors = names or cfg.consumer_assignors
        policy = (props.get("group.consumer.migration.policy") or "").strip().lower()
        if policy:
            if policy not in ("bidirectional", "upgrade", "downgrade", "disabled"):
                raise ValueError(
                    f"group.consumer.migration.policy: {policy!r} is not one of "
                    "bidirectional, upgrade, downgrade, disabled"
                )
            cfg.migration_policy = policy
        if props.get("group.coordinator.rebalance.protocols"):
            cfg.protocols = tuple(
                p.strip().lower() for p in props["group.coordinator.rebalance.protocols"].split(",") if p.strip()
            )
        cfg.rack = props.get("broker.rack") or None
        return cfg
