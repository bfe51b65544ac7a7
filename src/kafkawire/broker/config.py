"""Broker configuration: Kafka's ``server.properties`` keys, their defaults, and topic config definitions.

``BrokerConfig.load(path, overrides)`` reads a Java properties file (the format
Kafka uses), applies command-line overrides, and keeps every property it was
given so that DescribeConfigs can report them as ``STATIC_BROKER_CONFIG``.
Keys kafkawire does not know are reported once (``unknown_keys``) and ignored.
"""

from __future__ import annotations

import os
import re
import socket

import msgspec

LONG_MAX = 9223372036854775807

# Config types as DescribeConfigs v3+ reports them
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9

# Config sources (DescribeConfigsResponse.ConfigSource)
SOURCE_UNKNOWN = 0
TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


class ConfigDef(msgspec.Struct, frozen=True):
    name: str
    type: int
    default: str | None  # as Kafka reports it (None: no default)
    doc: str = ""
    read_only: bool = False
    sensitive: bool = False


def _d(name, type_, default, doc="", read_only=False):
    return ConfigDef(name, type_, default, doc, read_only)


# Broker configs kafkawire knows: name -> definition. Types, defaults and read-only flags (not dynamically
# updatable) are Kafka 4.4's, checked against the reference by tests/broker/test_describe_configs.py.
BROKER_CONFIGS: dict[str, ConfigDef] = {
    c.name: c
    for c in [
        _d("node.id", INT, None, "The node id of this server.", True),
        _d("broker.id", INT, "-1", "The broker id of this server.", True),
        # Kafka 4.4 can add listeners at run time (not read-only there); kafkawire cannot
        _d("listeners", LIST, "PLAINTEXT://:9092", "Listener list.", True),
        _d("advertised.listeners", LIST, None, "Listeners to publish for clients to use.", True),
        _d("log.dirs", LIST, None, "Directories in which the log data is kept.", True),
        _d("log.dir", LIST, "/tmp/kafka-logs", "The directory in which the log data is kept.", True),
        _d("num.partitions", INT, "1", "The default number of log partitions per topic.", True),
        _d("default.replication.factor", INT, "1", "The replication factor for automatically created topics.", True),
        _d("auto.create.topics.enable", BOOLEAN, "true", "Enable auto creation of topic on the server.", True),
        _d("log.segment.bytes", INT, "1073741824", "The maximum size of a single log file."),
        _d("log.retention.ms", LONG, None, "Milliseconds to keep a log file before deleting it."),
        _d("log.retention.minutes", INT, None, "Minutes to keep a log file before deleting it.", True),
        _d("log.retention.hours", INT, "168", "Hours to keep a log file before deleting it.", True),
        _d("log.retention.bytes", LONG, "-1", "The maximum size of the log before deleting it."),
        _d("log.retention.check.interval.ms", LONG, "300000", "How often the log cleaner checks retention.", True),
        _d("log.roll.ms", LONG, None, "Maximum time before a new log segment is rolled out."),
        _d("log.roll.hours", INT, "168", "Maximum time before a new log segment is rolled out.", True),
        _d("log.roll.jitter.ms", LONG, None, "Maximum jitter subtracted from log roll time."),
        _d("log.roll.jitter.hours", INT, "0", "Maximum jitter subtracted from log roll time.", True),
        _d("message.max.bytes", INT, "1048588", "The largest record batch size allowed."),
        _d("connections.max.idle.ms", LONG, "600000", "Idle connections are closed after this many ms.", True),
        _d("socket.request.max.bytes", INT, "104857600", "The maximum number of bytes in a socket request.", True),
        _d(
            "queued.max.request.bytes",
            LONG,
            "-1",
            "Bytes of requests being received or waiting to be handled before reading pauses; -1: no limit. "
            "kafkawire applies 256 MiB unless the key is set.",
            True,
        ),
        _d("controller.quota.window.num", INT, "11", "Samples kept for controller mutation quotas.", True),
        _d(
            "controller.quota.window.size.seconds",
            INT,
            "1",
            "Time span of each controller mutation quota sample.",
            True,
        ),
        _d("kafkawire.max.partitions", INT, "100000", "kafkawire: partitions this broker may hold in all.", True),
        _d(
            "kafkawire.controller.mutation.rate",
            DOUBLE,
            None,
            "kafkawire: partitions each client id may create, add or delete per second (Kafka's "
            "controller_mutation_rate quota as a default for every client); unset: no limit.",
            True,
        ),
        _d("log.flush.interval.messages", LONG, str(LONG_MAX), "Messages accumulated before flushing to disk."),
        _d("log.flush.interval.ms", LONG, None, "Maximum time a message stays in memory before flushing."),
        _d("log.flush.scheduler.interval.ms", LONG, str(LONG_MAX), "How often the log flusher checks.", True),
        _d("log.cleanup.policy", LIST, "delete", "The default cleanup policy for segments."),
        _d("log.cleaner.delete.retention.ms", LONG, "86400000", "How long delete records are retained."),
        _d("log.cleaner.min.compaction.lag.ms", LONG, "0", "Minimum time a message stays uncompacted."),
        _d("log.cleaner.max.compaction.lag.ms", LONG, str(LONG_MAX), "Maximum time a message stays uncompacted."),
        _d("log.cleaner.min.cleanable.ratio", DOUBLE, "0.5", "Minimum ratio of dirty log to total log."),
        _d("log.cleaner.threads", INT, "1", "Threads compacting logs."),
        _d("log.cleaner.dedupe.buffer.size", LONG, "134217728", "Memory of the cleaners' offset maps, all threads."),
        _d("log.cleaner.io.buffer.load.factor", DOUBLE, "0.9", "How full the cleaner's offset map may get."),
        _d("log.cleaner.enable", BOOLEAN, "true", "Run the log cleaner, which compacts compacted topics.", True),
        _d("log.cleaner.backoff.ms", LONG, "15000", "Sleep of the log cleaner when no log needs cleaning."),
        _d(
            "log.cleaner.io.max.bytes.per.second",
            DOUBLE,
            "1.7976931348623157E308",
            "Read rate limit of the log cleaner, in bytes per second.",
        ),
        _d("log.segment.delete.delay.ms", LONG, "60000", "Time to wait before deleting a file."),
        _d("log.index.interval.bytes", INT, "4096", "Interval at which an entry is added to the offset index."),
        _d("log.index.size.max.bytes", INT, "10485760", "The maximum size in bytes of the offset index."),
        _d("log.message.timestamp.type", STRING, "CreateTime", "CreateTime or LogAppendTime."),
        _d("log.message.timestamp.before.max.ms", LONG, str(LONG_MAX), "Allowed past timestamp difference."),
        _d("log.message.timestamp.after.max.ms", LONG, "3600000", "Allowed future timestamp difference."),
        _d("log.preallocate", BOOLEAN, "false", "Preallocate the file when creating a segment."),
        _d("log.local.retention.ms", LONG, "-2", "Local retention time (tiered storage)."),
        _d("log.local.retention.bytes", LONG, "-2", "Local retention size (tiered storage)."),
        _d(
            "log.remote.copy.lag.bytes",
            LONG,
            "-1",
            "Tiered storage copy lag in bytes (no tiered storage in kafkawire).",
        ),
        _d("log.remote.copy.lag.ms", LONG, "0", "Tiered storage copy lag in ms (no tiered storage in kafkawire)."),
        _d("max.decompressed.message.bytes", INT, "2147483639", "Largest decompressed record batch (not enforced)."),
        _d("compression.type", STRING, "producer", "The final compression type for a topic."),
        _d("compression.gzip.level", INT, "-1", "Gzip compression level."),
        _d("compression.lz4.level", INT, "9", "LZ4 compression level."),
        _d("compression.zstd.level", INT, "3", "Zstd compression level."),
        _d("min.insync.replicas", INT, "1", "Minimum number of in-sync replicas for acks=all."),
        _d("unclean.leader.election.enable", BOOLEAN, "false", "Allow out-of-ISR replicas to become leader."),
        _d("offsets.topic.replication.factor", SHORT, "3", "Replication factor of the offsets topic.", True),
        # kafkawire's default is one partition, not Kafka's 50: a single node gains nothing from spreading
        # groups over partitions, and each one costs files and start-up replay. Reported as it is used.
        _d("offsets.topic.num.partitions", INT, "1", "Number of partitions of the offsets topic.", True),
        _d(
            "transaction.state.log.replication.factor", SHORT, "3", "Replication factor of the transaction topic.", True
        ),
        _d("transaction.state.log.min.isr", INT, "2", "min.insync.replicas of the transaction topic.", True),
        # kafkawire's default is one partition, not Kafka's 50, for the reason given at offsets.topic.num.partitions
        _d("transaction.state.log.num.partitions", INT, "1", "Number of partitions of the transaction topic.", True),
        # read by the transaction coordinator (broker/transactions/config.py)
        _d("transaction.max.timeout.ms", INT, "900000", "Largest transaction timeout a producer may ask for.", True),
        _d("transactional.id.expiration.ms", INT, "604800000", "How long an idle transactional id is kept.", True),
        _d("producer.id.expiration.ms", INT, "86400000", "How long an idle producer's state is kept."),
        _d(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            INT,
            "10000",
            "Interval of the check that aborts timed-out transactions.",
            True,
        ),
        _d(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            INT,
            "3600000",
            "Interval of the check that removes expired transactional ids.",
            True,
        ),
        _d("group.initial.rebalance.delay.ms", INT, "3000", "Delay before the first rebalance of a group.", True),
        _d("delete.topic.enable", BOOLEAN, "true", "Enables delete topic.", True),
        _d("num.network.threads", INT, "3", "Threads handling network requests (unused by kafkawire)."),
        _d("num.io.threads", INT, "8", "Threads processing requests (unused by kafkawire)."),
        _d("socket.send.buffer.bytes", INT, "102400", "SO_SNDBUF of the socket server sockets.", True),
        _d("socket.receive.buffer.bytes", INT, "102400", "SO_RCVBUF of the socket server sockets.", True),
        _d("num.recovery.threads.per.data.dir", INT, "2", "Threads used for log recovery (unused)."),
        _d("group.consumer.assignors", LIST, "uniform,range", "Server-side assignors (KIP-848).", True),
        _d("group.consumer.heartbeat.interval.ms", INT, "5000", "Consumer group heartbeat interval.", True),
        _d("group.consumer.session.timeout.ms", INT, "45000", "Consumer group session timeout.", True),
        _d("group.consumer.max.size", INT, "2147483647", "Maximum members of a consumer group.", True),
        _d(
            "group.consumer.assignment.interval.ms",
            INT,
            "1000",
            "Least interval between two target assignments of a consumer group.",
        ),
        # Kafka 4.4's default also has "streams" (KIP-1071 streams groups), which kafkawire does not serve
        _d("group.coordinator.rebalance.protocols", LIST, "classic,consumer", "Enabled rebalance protocols.", True),
        _d("group.min.session.timeout.ms", INT, "6000", "Minimum allowed session timeout.", True),
        _d("group.max.session.timeout.ms", INT, "1800000", "Maximum allowed session timeout.", True),
        _d("group.max.size", INT, "2147483647", "Maximum members of a classic group.", True),
        _d("offset.metadata.max.bytes", INT, "4096", "Maximum size of committed offset metadata.", True),
        _d("offsets.retention.minutes", INT, "10080", "How long committed offsets are kept.", True),
        _d("kafkawire.groups", STRING, None, "kafkawire: group coordinator settings.", True),
        _d("kafkawire.offsets.compact.records", INT, None, "kafkawire: offsets topic compaction threshold.", True),
        _d("kafkawire.offsets.fsync", BOOLEAN, None, "kafkawire: fsync committed offsets.", True),
        _d("kafkawire.transactions.fsync", BOOLEAN, None, "kafkawire: fsync each __transaction_state change.", True),
        _d(
            "kafkawire.transactions.compact.records",
            INT,
            None,
            "kafkawire: transaction log compaction threshold.",
            True,
        ),
        _d("kafkawire.log.fsync.acks.all", BOOLEAN, "true", "Same as kafkawire.acks.all.fsync.", True),
        # the KRaft metadata log (storage/kraft/log.py): its snapshots, segments and retention
        _d(
            "metadata.log.max.record.bytes.between.snapshots",
            LONG,
            "20971520",
            "Bytes of metadata log batches after the last snapshot that start a new one.",
            True,
        ),
        _d("metadata.log.max.snapshot.interval.ms", LONG, "3600000", "Longest time between snapshots (0: none).", True),
        _d("metadata.log.segment.bytes", INT, "1073741824", "Size at which a metadata log segment rolls.", True),
        _d("metadata.max.retention.bytes", LONG, "104857600", "Metadata log and snapshots kept, in bytes.", True),
        _d("metadata.max.retention.ms", LONG, "604800000", "Age of the oldest snapshot kept.", True),
        _d("kafkawire.acks.all.fsync", BOOLEAN, "true", "fsync before acknowledging acks=all produce requests.", True),
        _d("kafkawire.storage", STRING, "segments", "Storage engine: segments or memory.", True),
        _d(
            "kafkawire.fetch.sendfile",
            BOOLEAN,
            "true",
            "kafkawire: Fetch sends stored records with sendfile on plaintext connections (false: writev from the "
            "mapped segments).",
            True,
        ),
        _d(
            "kafkawire.log.scrub.bytes.per.sec",
            LONG,
            "0",
            "kafkawire: bytes per second a background thread reads to re-verify the CRC of every sealed segment, "
            "repairing damage it finds (0: off).",
            True,
        ),
        _d(
            "kafkawire.metrics.listener",
            STRING,
            None,
            "kafkawire: HOST:PORT of the Prometheus /metrics endpoint (unset: no metrics).",
            True,
        ),
    ]
}

# Keys of a Kafka server.properties that mean something only to a multi-node or KRaft cluster: accepted
# silently (no warning) because every Kafka quickstart file has them.
QUIET_KEYS = {
    "process.roles",
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "controller.listener.names",
    "inter.broker.listener.name",
    "listener.security.protocol.map",
    "zookeeper.connect",
    "zookeeper.connection.timeout.ms",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
}


class TopicConfigDef(msgspec.Struct, frozen=True):
    name: str
    type: int
    broker_synonyms: tuple[str, ...]  # broker keys in Kafka's synonym order
    default: str | None
    # an internal config of Kafka's: accepted and described when a topic sets it, never listed otherwise
    internal: bool = False

    @property
    def doc(self) -> str:
        return TOPIC_CONFIG_DOCS.get(self.name, "")


# DescribeConfigs documentation of topic configs (kafkawire's own words)
TOPIC_CONFIG_DOCS = {
    "cleanup.policy": "What happens to old segments: 'delete' drops them by age or size, 'compact' keeps the newest "
    "record of each key (the log cleaner); both, or neither (empty).",
    "compression.type": "Codec the topic's batches are stored with; 'producer' keeps whatever the producer used.",
    "compression.gzip.level": "Gzip level used when the broker itself compresses with gzip.",
    "compression.lz4.level": "LZ4 level used when the broker itself compresses with lz4.",
    "compression.zstd.level": "Zstandard level used when the broker itself compresses with zstd.",
    "delete.retention.ms": "How long tombstones of a compacted topic stay readable.",
    "errors.deadletterqueue.group.enable": "Whether share groups may use this topic as their dead-letter queue.",
    "file.delete.delay.ms": "Pause between dropping a segment from the log and removing its files.",
    "flush.messages": "Records appended between forced flushes to disk.",
    "flush.ms": "Milliseconds between forced flushes to disk.",
    "follower.replication.throttled.replicas": "Replicas whose follower traffic is throttled (single node: nothing to throttle).",
    "index.interval.bytes": "Bytes of records between two offset index entries.",
    "leader.replication.throttled.replicas": "Replicas whose leader traffic is throttled (single node: nothing to throttle).",
    "local.retention.bytes": "Bytes kept locally when tiered storage is on (-2: same as retention.bytes).",
    "local.retention.ms": "Milliseconds kept locally when tiered storage is on (-2: same as retention.ms).",
    "max.compaction.lag.ms": "Longest a record may wait before it becomes eligible for compaction.",
    "max.decompressed.message.bytes": "Largest size a batch may have once decompressed.",
    "max.message.bytes": "Largest record batch the topic accepts, after compression.",
    "message.timestamp.after.max.ms": "How far ahead of the broker's clock a CreateTime timestamp may be.",
    "message.timestamp.before.max.ms": "How far behind the broker's clock a CreateTime timestamp may be.",
    "message.timestamp.type": "Whether records keep the producer's timestamp (CreateTime) or get the broker's (LogAppendTime).",
    "min.cleanable.dirty.ratio": "Share of uncompacted log that makes a partition worth compacting.",
    "min.compaction.lag.ms": "Shortest time a record stays uncompacted.",
    "min.insync.replicas": "In-sync replicas an acks=all write needs.",
    "preallocate": "Whether segment files are allocated at full size when created.",
    "remote.copy.lag.bytes": "Bytes a segment may lag before being copied to tiered storage.",
    "remote.copy.lag.ms": "Milliseconds a segment may lag before being copied to tiered storage.",
    "remote.log.copy.disable": "Stop copying segments to tiered storage.",
    "remote.log.delete.on.disable": "Drop tiered data when tiered storage is turned off for the topic.",
    "remote.storage.enable": "Keep older segments in tiered storage (kafkawire has none).",
    "retention.bytes": "Size a partition may grow to before its oldest segments go (-1: no limit).",
    "retention.ms": "Age after which a segment may go (-1: keep forever).",
    "segment.bytes": "Size at which a new segment file is started.",
    "internal.segment.bytes": "Size at which a new segment file is started, overriding segment.bytes, without its "
    "1 MiB floor: for tests only.",
    "segment.index.bytes": "Size of each segment's offset and time indexes.",
    "segment.jitter.ms": "Random amount taken off segment.ms so segments do not all roll at once.",
    "segment.ms": "Age at which a new segment is started even if the current one is not full.",
    "unclean.leader.election.enable": "Whether a replica outside the ISR may become leader.",
}


# Topic configs: name -> definition with the broker configs that supply their default; Kafka 4.4's set (the
# tiered-storage and dead-letter-queue keys are accepted and reported, and have no effect in kafkawire).
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    c.name: c
    for c in [
        TopicConfigDef("cleanup.policy", LIST, ("log.cleanup.policy",), "delete"),
        TopicConfigDef("compression.type", STRING, ("compression.type",), "producer"),
        TopicConfigDef("compression.gzip.level", INT, ("compression.gzip.level",), "-1"),
        TopicConfigDef("compression.lz4.level", INT, ("compression.lz4.level",), "9"),
        TopicConfigDef("compression.zstd.level", INT, ("compression.zstd.level",), "3"),
        TopicConfigDef("delete.retention.ms", LONG, ("log.cleaner.delete.retention.ms",), "86400000"),
        TopicConfigDef("errors.deadletterqueue.group.enable", BOOLEAN, (), "false"),
        TopicConfigDef("file.delete.delay.ms", LONG, ("log.segment.delete.delay.ms",), "60000"),
        TopicConfigDef("flush.messages", LONG, ("log.flush.interval.messages",), str(LONG_MAX)),
        TopicConfigDef("flush.ms", LONG, ("log.flush.interval.ms",), str(LONG_MAX)),
        TopicConfigDef("follower.replication.throttled.replicas", LIST, (), ""),
        TopicConfigDef("index.interval.bytes", INT, ("log.index.interval.bytes",), "4096"),
        TopicConfigDef("internal.segment.bytes", INT, (), None, internal=True),
        TopicConfigDef("leader.replication.throttled.replicas", LIST, (), ""),
        TopicConfigDef("local.retention.bytes", LONG, ("log.local.retention.bytes",), "-2"),
        TopicConfigDef("local.retention.ms", LONG, ("log.local.retention.ms",), "-2"),
        TopicConfigDef("max.compaction.lag.ms", LONG, ("log.cleaner.max.compaction.lag.ms",), str(LONG_MAX)),
        TopicConfigDef("max.decompressed.message.bytes", INT, ("max.decompressed.message.bytes",), "2147483639"),
        TopicConfigDef("max.message.bytes", INT, ("message.max.bytes",), "1048588"),
        TopicConfigDef("message.timestamp.after.max.ms", LONG, ("log.message.timestamp.after.max.ms",), "3600000"),
        TopicConfigDef(
            "message.timestamp.before.max.ms", LONG, ("log.message.timestamp.before.max.ms",), str(LONG_MAX)
        ),
        TopicConfigDef("message.timestamp.type", STRING, ("log.message.timestamp.type",), "CreateTime"),
        TopicConfigDef("min.cleanable.dirty.ratio", DOUBLE, ("log.cleaner.min.cleanable.ratio",), "0.5"),
        TopicConfigDef("min.compaction.lag.ms", LONG, ("log.cleaner.min.compaction.lag.ms",), "0"),
        TopicConfigDef("min.insync.replicas", INT, ("min.insync.replicas",), "1"),
        TopicConfigDef("preallocate", BOOLEAN, ("log.preallocate",), "false"),
        TopicConfigDef("remote.copy.lag.bytes", LONG, ("log.remote.copy.lag.bytes",), "-1"),
        TopicConfigDef("remote.copy.lag.ms", LONG, ("log.remote.copy.lag.ms",), "0"),
        TopicConfigDef("remote.log.copy.disable", BOOLEAN, (), "false"),
        TopicConfigDef("remote.log.delete.on.disable", BOOLEAN, (), "false"),
        TopicConfigDef("remote.storage.enable", BOOLEAN, (), "false"),
        TopicConfigDef("retention.bytes", LONG, ("log.retention.bytes",), "-1"),
        TopicConfigDef(
            "retention.ms", LONG, ("log.retention.ms", "log.retention.minutes", "log.retention.hours"), "604800000"
        ),
        TopicConfigDef("segment.bytes", INT, ("log.segment.bytes",), "1073741824"),
        TopicConfigDef("segment.index.bytes", INT, ("log.index.size.max.bytes",), "10485760"),
        TopicConfigDef("segment.jitter.ms", LONG, ("log.roll.jitter.ms", "log.roll.jitter.hours"), "0"),
        TopicConfigDef("segment.ms", LONG, ("log.roll.ms", "log.roll.hours"), "604800000"),
        TopicConfigDef("unclean.leader.election.enable", BOOLEAN, ("unclean.leader.election.enable",), "false"),
    ]
}

# Broker keys that are one setting in several units (Kafka's DynamicBrokerConfig.brokerConfigSynonyms)
_BROKER_SYNONYMS = (
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
)

# A broker key in hours/minutes that feeds a topic config in ms
_UNIT_MS = {
    "log.retention.minutes": 60_000,
    "log.retention.hours": 3_600_000,
    "log.roll.hours": 3_600_000,
    "log.roll.jitter.hours": 3_600_000,
}


class ConfigError(ValueError):
    pass


_TYPE_NAMES = {INT: "INT", SHORT: "SHORT", LONG: "LONG", DOUBLE: "DOUBLE"}


def validate_value(type_: int, value: str | None, name: str) -> None:
    """Raise ConfigError when ``value`` does not parse as ``type_`` (Kafka's INVALID_CONFIG), with the reason in
    Kafka's words."""
    if value is None:
        return
    if type_ == BOOLEAN:
        if value.strip().lower() not in ("true", "false"):
            raise ConfigError(
                f"Invalid value {value} for configuration {name}: Expected value to be either true or false"
            )
        return
    if type_ not in _TYPE_NAMES:
        return
    try:
        n = float(value.strip()) if type_ == DOUBLE else int(value.strip())
    except ValueError:
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: Not a number of type {_TYPE_NAMES[type_]}"
        ) from None
    if type_ != DOUBLE:
        bits = {INT: 31, SHORT: 15, LONG: 63}[type_]
        if not -(1 << bits) <= n < (1 << bits):
            raise ConfigError(
                f"Invalid value {value} for configuration {name}: Not a number of type {_TYPE_NAMES[type_]}"
            )


# Lower bounds Kafka 4.4 puts on topic config values. Smaller segments than segment.bytes allows are for tests,
# through internal.segment.bytes, as in Kafka (or the broker's log.segment.bytes, where kafkawire keeps a floor
# of 14 bytes)
_TOPIC_AT_LEAST = {
    "segment.bytes": 1_048_576,
    "segment.ms": 1,
    "segment.jitter.ms": 0,
    "segment.index.bytes": 4,
    "flush.messages": 1,
    "flush.ms": 0,
    "retention.ms": -1,
    "max.message.bytes": 0,
    "index.interval.bytes": 0,
    "delete.retention.ms": 0,
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": 1,
    "file.delete.delay.ms": 0,
    "min.insync.replicas": 1,
    "message.timestamp.before.max.ms": 0,
    "message.timestamp.after.max.ms": 0,
    "local.retention.ms": -2,
    "local.retention.bytes": -2,
}
_TOPIC_ONE_OF = {
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
    "compression.type": ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
}
_CLEANUP_POLICIES = ("compact", "delete")


def validate_topic_config(name: str, value: str | None) -> None:
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        raise ConfigError(f"Unknown topic config name: {name}")
    validate_value(d.type, value, name)
    if value is None:
        return
    if name in _TOPIC_ONE_OF and value.strip() not in _TOPIC_ONE_OF[name]:
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: String must be one of: {', '.join(_TOPIC_ONE_OF[name])}"
        )
    if name == "cleanup.policy":  # an empty list is allowed (neither deletion nor compaction)
        for part in value.split(","):
            if part.strip() and part.strip() not in _CLEANUP_POLICIES:
                raise ConfigError(
                    f"Invalid value {part.strip()} for configuration {name}: String must be one of: "
                    f"{', '.join(_CLEANUP_POLICIES)}"
                )
    low = _TOPIC_AT_LEAST.get(name)
    if low is not None and int(value.strip()) < low:
        raise ConfigError(f"Invalid value {value} for configuration {name}: Value must be at least {low}")
    if name == "min.cleanable.dirty.ratio" and float(value) < 0:
        raise ConfigError(f"Invalid value {value} for configuration {name}: Value must be at least 0")
    if name == "min.cleanable.dirty.ratio" and float(value) > 1:
        raise ConfigError(f"Invalid value {value} for configuration {name}: Value must be no more than 1")


class GroupConfigDef(msgspec.Struct, frozen=True):
    name: str
    type: int
    broker_synonym: str  # the broker config that supplies the default
    default: str
    bounds: tuple[str, str] | None = None  # broker configs bounding the value, inclusive
    choices: tuple[str, ...] | None = None


# Group configs (DescribeConfigs/AlterConfigs on GROUP resources), as Kafka 4.4 defines them: each defaults to
# a broker config. kafkawire keeps them per group; its group coordinator does not apply them.
GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    g.name: g
    for g in [
        GroupConfigDef(
            "consumer.session.timeout.ms",
            INT,
            "group.consumer.session.timeout.ms",
            "45000",
            ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
        ),
        GroupConfigDef(
            "consumer.heartbeat.interval.ms",
            INT,
            "group.consumer.heartbeat.interval.ms",
            "5000",
            ("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
        ),
        GroupConfigDef("consumer.assignment.interval.ms", INT, "group.consumer.assignment.interval.ms", "1000"),
        GroupConfigDef(
            "share.session.timeout.ms",
            INT,
            "group.share.session.timeout.ms",
            "45000",
            ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
        ),
        GroupConfigDef(
            "share.heartbeat.interval.ms",
            INT,
            "group.share.heartbeat.interval.ms",
            "5000",
            ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
        ),
        GroupConfigDef(
            "share.record.lock.duration.ms",
            INT,
            "group.share.record.lock.duration.ms",
            "30000",
            ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
        ),
        GroupConfigDef("share.delivery.count.limit", INT, "group.share.delivery.count.limit", "5"),
        GroupConfigDef("share.partition.max.record.locks", INT, "group.share.partition.max.record.locks", "2000"),
        GroupConfigDef("share.assignment.interval.ms", INT, "group.share.assignment.interval.ms", "1000"),
        GroupConfigDef(
            "share.auto.offset.reset", STRING, "share.auto.offset.reset", "latest", choices=("latest", "earliest")
        ),
        GroupConfigDef(
            "share.isolation.level",
            STRING,
            "share.isolation.level",
            "read_uncommitted",
            choices=("read_committed", "read_uncommitted"),
        ),
        GroupConfigDef("share.renew.acknowledge.enable", BOOLEAN, "share.renew.acknowledge.enable", "true"),
        GroupConfigDef(
            "streams.session.timeout.ms",
            INT,
            "group.streams.session.timeout.ms",
            "45000",
            ("group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
        ),
        GroupConfigDef(
            "streams.heartbeat.interval.ms",
            INT,
            "group.streams.heartbeat.interval.ms",
            "5000",
            ("group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms"),
        ),
        GroupConfigDef("streams.num.standby.replicas", INT, "group.streams.num.standby.replicas", "0"),
        GroupConfigDef("streams.initial.rebalance.delay.ms", INT, "group.streams.initial.rebalance.delay.ms", "3000"),
        GroupConfigDef("streams.assignment.interval.ms", INT, "group.streams.assignment.interval.ms", "1000"),
        GroupConfigDef("streams.assignor.name", STRING, "group.streams.assignors", "sticky"),
        GroupConfigDef("streams.rack.aware.assignment.tags", LIST, "group.streams.rack.aware.assignment.tags", ""),
        GroupConfigDef("errors.deadletterqueue.topic.name", STRING, "errors.deadletterqueue.topic.name", ""),
        GroupConfigDef(
            "errors.deadletterqueue.copy.record.enable", BOOLEAN, "errors.deadletterqueue.copy.record.enable", "false"
        ),
    ]
}

# Defaults of the broker configs that bound group configs (Kafka 4.4's)
GROUP_BOUND_DEFAULTS = {
    "group.consumer.min.session.timeout.ms": "45000",
    "group.consumer.max.session.timeout.ms": "60000",
    "group.consumer.min.heartbeat.interval.ms": "5000",
    "group.consumer.max.heartbeat.interval.ms": "15000",
    "group.share.min.session.timeout.ms": "45000",
    "group.share.max.session.timeout.ms": "60000",
    "group.share.min.heartbeat.interval.ms": "5000",
    "group.share.max.heartbeat.interval.ms": "15000",
    "group.share.min.record.lock.duration.ms": "15000",
    "group.share.max.record.lock.duration.ms": "60000",
    "group.streams.min.session.timeout.ms": "45000",
    "group.streams.max.session.timeout.ms": "60000",
    "group.streams.min.heartbeat.interval.ms": "5000",
    "group.streams.max.heartbeat.interval.ms": "15000",
}


def validate_group_config(name: str, value: str | None, broker_value) -> None:
    """``broker_value(key)``: the broker's value of a bounding config."""
    d = GROUP_CONFIGS.get(name)
    if d is None:
        raise ConfigError(f"Unknown group config name: {name}")
    validate_value(d.type, value, name)
    if value is None:
        return
    if d.choices and value.strip() not in d.choices:
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: String must be one of: {', '.join(d.choices)}"
        )
    if d.bounds:
        lo, hi = (int(broker_value(k) or GROUP_BOUND_DEFAULTS[k]) for k in d.bounds)
        if not lo <= int(value) <= hi:
            raise ConfigError(f"{name} must be in the range {lo} to {hi} inclusive.")


# -- properties files ----------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 5 < len(text):
                try:
                    out.append(chr(int(text[i + 2 : i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    pass
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` syntax: ``key=value``, ``key: value`` or ``key value``, ``#``/``!`` comments,
    backslash line continuations and escapes."""
    props: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        if _continues(line):
            line = line[:-1]
        m = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:]?\s*(.*)$", line, re.S)
        key, value = m.group(1), m.group(2)
        props[_unescape(key)] = _unescape(value)
    return props


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def parse_host_port(text: str, default_port: int = 9092) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT``, ``[v6]:PORT`` or ``HOST``."""
    text = text.strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.lstrip(":")
        return host, int(port) if port else default_port
    if text.count(":") == 1:
        host, port = text.split(":")
        return host, int(port) if port else default_port
    if text.isdigit():
        return "", int(text)
    return text, default_port


def pick_listener(value: str) -> tuple[str, int] | None:
    """The PLAINTEXT (or first non-controller) listener of a ``listeners`` value."""
    entries = [e.strip() for e in value.split(",") if e.strip()]
    chosen = None
    for e in entries:
        name = e.split("://", 1)[0].upper() if "://" in e else "PLAINTEXT"
        if name == "PLAINTEXT":
            chosen = e
            break
        if chosen is None and name != "CONTROLLER":
            chosen = e
    if chosen is None:
        return None
    return parse_host_port(chosen)


AUTHORIZER_KEYS = ("authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found")


def is_security_key(key: str) -> bool:
    from kafkawire.security.listeners import is_security_key as known

    return known(key)


# dict=True: apply_dynamic and the topic defaults keep their caches in the instance's __dict__
class BrokerConfig(msgspec.Struct, dict=True):
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    data_dir: str = "./kafkawire-data"
    node_id: int = 1
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics: bool = True
    message_max_bytes: int = 1048588
    socket_request_max_bytes: int = 104857600
    queued_max_request_bytes: int = 268435456  # queued.max.request.bytes when set (-1: no limit), else 256 MiB
    max_partitions: int = 100_000  # kafkawire.max.partitions; -1: no limit
    controller_mutation_rate: float | None = None  # partitions per second per client id; None: no limit
    controller_quota_window_num: int = 11
    controller_quota_window_size_seconds: int = 1
    acks_all_fsync: bool = True
    # kafkawire.fetch.sendfile: Fetch sends segment ranges with os.sendfile on plaintext connections, as Kafka
    # does (false: views of the mapped segments written with writev). On Linux 6.18 it took 0.17 ms of broker
    # CPU per MB against writev's 0.29, 1.2-1.8x the MB/s (bench_produce_cpu's consume); an older kernel measured
    # it at 2.7x writev's CPU per MB on loopback (README, "Two broker choices")
    fetch_sendfile: bool = True
    scrub_bytes_per_sec: int = 0  # kafkawire.log.scrub.bytes.per.sec; 0: no background verification
    storage: str = "segments"  # or "memory"
    metrics_listener: tuple[str, int] | None = None  # kafkawire.metrics.listener / --metrics; None: off
    properties: dict[str, str] = msgspec.field(default_factory=dict)  # every property given (file + overrides)
    unknown_keys: list[str] = msgspec.field(default_factory=list)
    rack: str | None = None
    # set at run time with (Incremental)AlterConfigs on the broker resource; kept in the KRaft metadata log
    dynamic: dict[str, str] = msgspec.field(default_factory=dict)  # this broker ("<node id>")
    dynamic_default: dict[str, str] = msgspec.field(default_factory=dict)  # cluster-wide default ("")

    group_configs: dict[str, dict[str, str]] = msgspec.field(default_factory=dict)  # group id -> configs set on it

    def __post_init__(self):
        # Kafka 4.4's storage format step records min.insync.replicas as a cluster-wide dynamic default (Eligible
        # Leader Replicas need one); kafkawire's cluster starts with the same record.
        self.dynamic_default.setdefault(
            "min.insync.replicas",
            self.properties.get("min.insync.replicas") or BROKER_CONFIGS["min.insync.replicas"].default,
        )

    # -- derived ------------------------------------------------------------
    @property
    def advertised(self) -> tuple[str, int]:
        host = self.advertised_host
        if not host:
            host = self.host
            if host in ("", "0.0.0.0", "::"):
                host = socket.getfqdn() or "localhost"
        return host, self.advertised_port or self.port

    def broker_value(self, name: str) -> tuple[str | None, int]:
        """(value, source) of a broker config, in Kafka's precedence order."""
        for source, layer in self.broker_layers():
            if name in layer:
                return layer[name], source
        d = BROKER_CONFIGS.get(name)
        return (d.default if d else None), DEFAULT_CONFIG

    def broker_layers(self):
        return (
            (DYNAMIC_BROKER_CONFIG, self.dynamic),
            (DYNAMIC_DEFAULT_BROKER_CONFIG, self.dynamic_default),
            (STATIC_BROKER_CONFIG, self.properties),
        )

    def broker_synonyms(self, name: str) -> list[tuple[str, str | None, int]]:
        """DescribeConfigs synonyms of broker config ``name``, as Kafka 4.4 lists them: nothing when its value
        is null; else, for ``name`` and the keys of its unit family below it (log.retention.ms > .minutes >
        .hours), (key, value, source) of every layer that sets the key, then the key's default."""
        if self.broker_value(name)[0] is None:
            return []
        family = next((f for f in _BROKER_SYNONYMS if name in f), (name,))
        out = []
        for syn in family[family.index(name) :]:
            out.extend((syn, layer[syn], source) for source, layer in self.broker_layers() if syn in layer)
            d = BROKER_CONFIGS.get(syn)
            if d is not None and d.default is not None:
                out.append((syn, d.default, DEFAULT_CONFIG))
        return out

    @property
    def topic_defaults_generation(self) -> object:
        """An object that stays the same until topic defaults may change (``apply_dynamic``): the key for a
        cache of values derived from topic configs, compared by identity."""
        return self.__dict__.setdefault("_topic_defaults", {})

    def topic_default(self, name: str) -> tuple[str, int, str | None]:
        """(value, source, broker synonym that supplied it) of a topic config with no topic override."""
        cache = self.__dict__.setdefault("_topic_defaults", {})
        found = cache.get(name)
        if found is None:
            found = cache[name] = self._topic_default(name)
        return found

    def _topic_default(self, name: str) -> tuple[str, int, str | None]:
        d = TOPIC_CONFIGS[name]
        for source, layer in self.broker_layers():
            for syn in d.broker_synonyms:
                if syn in layer:
                    value = layer[syn]
                    if syn in _UNIT_MS:
                        value = str(int(value) * _UNIT_MS[syn])
                    return value, source, syn
        return d.default, DEFAULT_CONFIG, None

    def topic_value(self, configs: dict[str, str], name: str) -> str:
        if name in configs:
            return configs[name]
        return self.topic_default(name)[0]

    _DYNAMIC_FIELDS = {
        "num.partitions": ("num_partitions", int),
        "default.replication.factor": ("default_replication_factor", int),
        "message.max.bytes": ("message_max_bytes", int),
    }

    def apply_dynamic(self) -> None:
        """Re-resolve the typed fields that dynamic broker configs may change (call after changing them)."""
        self.__dict__.pop("_topic_defaults", None)
        static = self.__dict__.setdefault(
            "_static", {k: getattr(self, f) for k, (f, _) in self._DYNAMIC_FIELDS.items()}
        )
        for key, (attr, conv) in self._DYNAMIC_FIELDS.items():
            value = self.dynamic.get(key, self.dynamic_default.get(key))
            setattr(self, attr, conv(value) if value is not None else static[key])

    # -- loading --------------------------------------------------------------
    @classmethod
    def from_properties(cls, props: dict[str, str]) -> BrokerConfig:
        cfg = cls(properties=dict(props))
        for key, _value in props.items():
            if (
                key not in BROKER_CONFIGS
                and key not in QUIET_KEYS
                and key not in TOPIC_CONFIGS
                and not is_security_key(key)  # read by kafkawire.security.listeners
                and key not in AUTHORIZER_KEYS  # read by kafkawire.security.authorizer
            ):
                cfg.unknown_keys.append(key)
        try:
            if "listeners" in props:
                picked = pick_listener(props["listeners"])
                if picked:
                    cfg.host, cfg.port = picked
            if props.get("advertised.listeners"):
                picked = pick_listener(props["advertised.listeners"])
                if picked:
                    cfg.advertised_host, cfg.advertised_port = picked
            if "log.dirs" in props or "log.dir" in props:
                cfg.data_dir = (props.get("log.dirs") or props["log.dir"]).split(",")[0].strip()
            if "node.id" in props:
                cfg.node_id = int(props["node.id"])
            elif "broker.id" in props and int(props["broker.id"]) >= 0:
                cfg.node_id = int(props["broker.id"])
            if "num.partitions" in props:
                cfg.num_partitions = int(props["num.partitions"])
            if "default.replication.factor" in props:
                cfg.default_replication_factor = int(props["default.replication.factor"])
            if "auto.create.topics.enable" in props:
                cfg.auto_create_topics = _bool(props["auto.create.topics.enable"])
            if "message.max.bytes" in props:
                cfg.message_max_bytes = int(props["message.max.bytes"])
            if "socket.request.max.bytes" in props:
                cfg.socket_request_max_bytes = int(props["socket.request.max.bytes"])
            if "queued.max.request.bytes" in props:
                cfg.queued_max_request_bytes = int(props["queued.max.request.bytes"])
            if "kafkawire.max.partitions" in props:
                cfg.max_partitions = int(props["kafkawire.max.partitions"])
            if props.get("kafkawire.controller.mutation.rate", "").strip():
                rate = float(props["kafkawire.controller.mutation.rate"])
                if not rate > 0:
                    raise ValueError(f"kafkawire.controller.mutation.rate must be above 0, not {rate}")
                cfg.controller_mutation_rate = rate
            if "controller.quota.window.num" in props:
                cfg.controller_quota_window_num = int(props["controller.quota.window.num"])
            if "controller.quota.window.size.seconds" in props:
                cfg.controller_quota_window_size_seconds = int(props["controller.quota.window.size.seconds"])
            for key in ("kafkawire.log.fsync.acks.all", "kafkawire.acks.all.fsync"):
                if key in props:
                    cfg.acks_all_fsync = _bool(props[key])
            if "kafkawire.storage" in props:
                cfg.storage = props["kafkawire.storage"].strip()
            if "kafkawire.fetch.sendfile" in props:
                cfg.fetch_sendfile = _bool(props["kafkawire.fetch.sendfile"])
            if props.get("kafkawire.log.scrub.bytes.per.sec", "").strip():
                rate = int(props["kafkawire.log.scrub.bytes.per.sec"])
                if rate < 0:
                    raise ValueError(f"kafkawire.log.scrub.bytes.per.sec must be 0 (off) or more, not {rate}")
                cfg.scrub_bytes_per_sec = rate
            if props.get("kafkawire.metrics.listener", "").strip():
                cfg.metrics_listener = parse_host_port(props["kafkawire.metrics.listener"].strip(), 9404)
            if props.get("broker.rack"):
                cfg.rack = props["broker.rack"]
        except ValueError as exc:
            raise ConfigError(f"invalid broker configuration: {exc}") from None
        for key in props:
            d = BROKER_CONFIGS.get(key)
            if d is not None:
                validate_value(d.type, props[key], key)
        return cfg

    @classmethod
    def load(cls, path: str | os.PathLike | None = None, **overrides) -> BrokerConfig:
        props: dict[str, str] = {}
        if path is not None:
            with open(path, encoding="utf-8") as f:
                props = parse_properties(f.read())
        cfg = cls.from_properties(props)
        for key, value in overrides.items():
            if value is not None:
                setattr(cfg, key, value)
        return cfg

    def storage_properties(self) -> dict[str, str]:
        """Properties for the storage engine (``StorageConfig.from_properties``)."""
        return dict(self.properties)


def _bool(text: str) -> bool:
    v = text.strip().lower()
    if v not in ("true", "false"):
        raise ValueError(f"not a boolean: {text!r}")
    return v == "true"
