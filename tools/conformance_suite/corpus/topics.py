"""Metadata, topic administration, configs, log dirs, leaders and reassignments."""

from __future__ import annotations

from . import INTERNAL, RANDOM_ID, for_each


def _two(s):
    s.create_topic(s.name(), partitions=2)


# -- Metadata -------------------------------------------------------------------


def _md(s, v, topics, *, auto=False, ops=False, label="", keep=None):
    return s.probe(
        "Metadata",
        v,
        {
            "topics": topics,
            "allow_auto_topic_creation": auto,
            "include_cluster_authorized_operations": ops,
            "include_topic_authorized_operations": ops,
        },
        label=label,
        keep_names=keep,
    )


def _mine(s):
    return lambda name: name.startswith(s.prefix)


def _auto_create(s, v):
    if v >= 4:  # before v4 every Metadata request may create topics; the name is per version
        _md(s, v, [{"name": s.name(f"auto{v}")}], auto=True)


for_each(
    "Metadata",
    {
        "by-name": lambda s, v: _md(s, v, [{"name": s.name()}]),
        "by-name-with-operations": lambda s, v: _md(s, v, [{"name": s.name()}], ops=True),
        "unknown-topic": lambda s, v: _md(s, v, [{"name": s.name("missing")}]) if v >= 4 else None,
        "auto-create": _auto_create,
        "known-and-unknown": lambda s, v: (
            _md(s, v, [{"name": s.name()}, {"name": s.name("missing")}]) if v >= 4 else None
        ),
        "all-topics": lambda s, v: _md(s, v, None if v >= 1 else [], keep=_mine(s)),
        "no-topics": lambda s, v: _md(s, v, []) if v >= 1 else None,
        "invalid-name": lambda s, v: _md(s, v, [{"name": "bad name!"}]),
        "empty-name": lambda s, v: _md(s, v, [{"name": ""}]) if v >= 4 else None,
        "internal-topic": lambda s, v: _md(s, v, [{"name": INTERNAL}]),
        "duplicate-name": lambda s, v: _md(s, v, [{"name": s.name()}, {"name": s.name()}]),
        "by-id": lambda s, v: _md(s, v, [{"name": None, "topic_id": s.tid(s.name())}]) if v >= 10 else None,
        "unknown-id": lambda s, v: _md(s, v, [{"name": None, "topic_id": RANDOM_ID}]) if v >= 10 else None,
    },
    setup=_two,
)


# -- CreateTopics ----------------------------------------------------------------------


def _create(s, v, topics, *, validate=False, timeout=30000, label=""):
    return s.probe(
        "CreateTopics",
        v,
        {
            "topics": [
                {
                    "name": t.get("name", s.name(f"v{v}")),
                    "num_partitions": t.get("partitions", 1),
                    "replication_factor": t.get("rf", 1),
                    "assignments": t.get("assignments", []),
                    "configs": [{"name": k, "value": val} for k, val in t.get("configs", {}).items()],
                }
                for t in topics
            ],
            "timeout_ms": timeout,
            "validate_only": validate,
        },
        label=label,
    )


for_each(
    "CreateTopics",
    {
        "one-partition": lambda s, v: _create(s, v, [{}]),
        "three-partitions-with-config": lambda s, v: _create(
            s, v, [{"partitions": 3, "configs": {"retention.ms": "3600000", "cleanup.policy": "compact"}}]
        ),
        "defaults": lambda s, v: _create(s, v, [{"partitions": -1, "rf": -1}]),
        "already-exists": lambda s, v: (_create(s, v, [{}]), _create(s, v, [{}], label="again")),
        "replication-factor-3": lambda s, v: _create(s, v, [{"rf": 3}]),
        "replication-factor-0": lambda s, v: _create(s, v, [{"rf": 0}]),
        "zero-partitions": lambda s, v: _create(s, v, [{"partitions": 0}]),
        "negative-partitions": lambda s, v: _create(s, v, [{"partitions": -5}]),
        "unknown-config": lambda s, v: _create(s, v, [{"configs": {"no.such.config": "1"}}]),
        "invalid-config-value": lambda s, v: _create(s, v, [{"configs": {"retention.ms": "soon"}}]),
        "null-config-value": lambda s, v: _create(s, v, [{"configs": {"retention.ms": None}}]),
        "invalid-name": lambda s, v: _create(s, v, [{"name": "bad name!"}]),
        "name-dot": lambda s, v: _create(s, v, [{"name": "."}]),
        "empty-name": lambda s, v: _create(s, v, [{"name": ""}]),
        "long-name": lambda s, v: _create(s, v, [{"name": s.name(f"v{v}-") + "x" * 250}]),
        "internal-topic": lambda s, v: _create(s, v, [{"name": INTERNAL}]),
        "duplicate-in-request": lambda s, v: _create(s, v, [{}, {}]),
        "validate-only": lambda s, v: (
            _create(s, v, [{"partitions": 2}], validate=True),
            s.probe(
                "Metadata",
                s.top("Metadata"),
                {"topics": [{"name": s.name(f"v{v}")}], "allow_auto_topic_creation": False},
                label="after",
            ),
        ),
        "manual-assignment": lambda s, v: _create(
            s,
            v,
            [
                {
                    "partitions": -1,
                    "rf": -1,
                    "assignments": [
                        {"partition_index": 0, "broker_ids": [s.broker.node_id]},
                        {"partition_index": 1, "broker_ids": [s.broker.node_id]},
                    ],
                }
            ],
        ),
        "assignment-unknown-broker": lambda s, v: _create(
            s, v, [{"partitions": -1, "rf": -1, "assignments": [{"partition_index": 0, "broker_ids": [77]}]}]
        ),
        "assignment-with-count": lambda s, v: _create(
            s, v, [{"partitions": 2, "assignments": [{"partition_index": 0, "broker_ids": [s.broker.node_id]}]}]
        ),
        "too-many-partitions": lambda s, v: _create(s, v, [{"partitions": 20000}]),
        "no-topics": lambda s, v: s.probe("CreateTopics", v, {"topics": [], "timeout_ms": 1000}),
    },
)


# -- DeleteTopics ------------------------------------------------------------------------


def _delete(s, v, names=(), ids=(), label=""):
    return s.probe(
        "DeleteTopics",
        v,
        {
            "topic_names": list(names),
            "timeout_ms": 30000,
            "topics": [{"name": n, "topic_id": _zero()} for n in names] + [{"name": None, "topic_id": i} for i in ids],
        },
        label=label,
    )


def _zero():
    import uuid

    return uuid.UUID(int=0)


def _delete_fresh(s, v, by_id=False):
    name = s.name(f"v{v}")
    s.create_topic(name)
    if by_id and v >= 6:
        _delete(s, v, ids=[s.tid(name)])
    else:
        _delete(s, v, names=[name])
    s.wait_until(
        lambda: (
            s.call("Metadata", None, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
            .topics[0]
            .error_code
            != 0
        )
    )
    s.probe(
        "Metadata", s.top("Metadata"), {"topics": [{"name": name}], "allow_auto_topic_creation": False}, label="after"
    )


def _delete_twice(s, v, how):
    """A topic named twice in one request: neither broker deletes it (Metadata after shows it)."""
    name = s.name(f"v{v}")
    s.create_topic(name)
    if v < 6 and how != "names":
        return
    tid = s.tid(name) if v >= 6 else None
    if how == "names":
        _delete(s, v, names=[name, name])
    elif how == "ids":
        _delete(s, v, ids=[tid, tid])
    elif how == "name-and-id":
        _delete(s, v, names=[name], ids=[tid])
    elif how == "one-entry-both":
        s.probe("DeleteTopics", v, {"timeout_ms": 30000, "topics": [{"name": name, "topic_id": tid}]})
    elif how == "one-entry-neither":
        s.probe("DeleteTopics", v, {"timeout_ms": 30000, "topics": [{"name": None, "topic_id": _zero()}]})
    s.probe(
        "Metadata", s.top("Metadata"), {"topics": [{"name": name}], "allow_auto_topic_creation": False}, label="after"
    )


for_each(
    "DeleteTopics",
    {
        "by-name": lambda s, v: _delete_fresh(s, v),
        "named-twice": lambda s, v: _delete_twice(s, v, "names"),
        "id-twice": lambda s, v: _delete_twice(s, v, "ids"),
        "name-and-its-id": lambda s, v: _delete_twice(s, v, "name-and-id"),
        "entry-with-name-and-id": lambda s, v: _delete_twice(s, v, "one-entry-both"),
        "entry-with-neither": lambda s, v: _delete_twice(s, v, "one-entry-neither"),
        "by-id": lambda s, v: _delete_fresh(s, v, by_id=True),
        "unknown-name": lambda s, v: _delete(s, v, names=[s.name("missing")]),
        "unknown-id": lambda s, v: _delete(s, v, ids=[RANDOM_ID]) if v >= 6 else None,
        # Not asked: deleting __consumer_offsets, which both brokers allow; it would take every group down with it.
        "invalid-name": lambda s, v: _delete(s, v, names=["bad name!"]),
        "no-topics": lambda s, v: _delete(s, v),
        "twice": lambda s, v: (_delete_fresh(s, v), _delete(s, v, names=[s.name(f"v{v}")], label="again")),
    },
)


# -- CreatePartitions -------------------------------------------------------------------------


def _grow(s, v, count, *, name=None, validate=False, assignments=None, fresh=True):
    name = name or s.name(f"v{v}")
    if fresh:
        s.create_topic(name, partitions=1)
    return s.probe(
        "CreatePartitions",
        v,
        {
            "topics": [{"name": name, "count": count, "assignments": assignments}],
            "timeout_ms": 30000,
            "validate_only": validate,
        },
    )


for_each(
    "CreatePartitions",
    {
        "grow-to-3": lambda s, v: _grow(s, v, 3),
        "same-count": lambda s, v: _grow(s, v, 1),
        "shrink": lambda s, v: _grow(s, v, 0),
        "validate-only": lambda s, v: _grow(s, v, 4, validate=True),
        "with-assignment": lambda s, v: _grow(s, v, 2, assignments=[{"broker_ids": [s.broker.node_id]}]),
        "assignment-wrong-count": lambda s, v: _grow(s, v, 3, assignments=[{"broker_ids": [s.broker.node_id]}]),
        "assignment-unknown-broker": lambda s, v: _grow(s, v, 2, assignments=[{"broker_ids": [42]}]),
        "unknown-topic": lambda s, v: _grow(s, v, 2, name=s.name("missing"), fresh=False),
        "internal-topic": lambda s, v: _grow(s, v, 60, name=INTERNAL, fresh=False, validate=True),
        "too-many": lambda s, v: _grow(s, v, 20000),
    },
)


# -- DescribeTopicPartitions ---------------------------------------------------------------------


def _dtp(s, v, names, *, limit=2000, cursor=None):
    return s.probe(
        "DescribeTopicPartitions",
        v,
        {"topics": [{"name": n} for n in names], "response_partition_limit": limit, "cursor": cursor},
    )


def _three(s):
    s.create_topic(s.name(), partitions=3)


for_each(
    "DescribeTopicPartitions",
    {
        "by-name": lambda s, v: _dtp(s, v, [s.name()]),
        "unknown-topic": lambda s, v: _dtp(s, v, [s.name("missing")]),
        "partition-limit": lambda s, v: _dtp(s, v, [s.name()], limit=2),
        "cursor": lambda s, v: _dtp(s, v, [s.name()], cursor={"topic_name": s.name(), "partition_index": 1}),
        "cursor-unknown-topic": lambda s, v: _dtp(
            s, v, [s.name()], cursor={"topic_name": s.name("zz"), "partition_index": 0}
        ),
        "internal-topic": lambda s, v: _dtp(s, v, [INTERNAL], limit=3),
        "two-topics": lambda s, v: _dtp(s, v, [s.name(), s.name("missing")]),
    },
    setup=_three,
)


# -- DescribeConfigs / AlterConfigs / IncrementalAlterConfigs ------------------------------------------

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
TOPIC_KEYS = [
    "retention.ms",
    "cleanup.policy",
    "segment.bytes",
    "max.message.bytes",
    "min.insync.replicas",
    "message.timestamp.type",
    "compression.type",
]
BROKER_KEYS = [
    "num.partitions",
    "default.replication.factor",
    "auto.create.topics.enable",
    "log.retention.hours",
    "message.max.bytes",
    "log.segment.bytes",
    "offsets.retention.minutes",
]


def _describe_configs(s, v, resources, *, synonyms=False, docs=False, label=""):
    return s.probe(
        "DescribeConfigs",
        v,
        {
            "resources": [
                {"resource_type": t, "resource_name": n, "configuration_keys": keys} for t, n, keys in resources
            ],
            "include_synonyms": synonyms,
            "include_documentation": docs,
        },
        label=label,
    )


def _configured(s):
    s.create_topic(s.name(), configs={"retention.ms": "3600000", "cleanup.policy": "compact"})


for_each(
    "DescribeConfigs",
    {
        "topic-keys": lambda s, v: _describe_configs(s, v, [(TOPIC, s.name(), TOPIC_KEYS)]),
        "topic-keys-synonyms": lambda s, v: _describe_configs(s, v, [(TOPIC, s.name(), TOPIC_KEYS)], synonyms=True),
        "topic-all": lambda s, v: _describe_configs(s, v, [(TOPIC, s.name(), None)]),
        # synonyms are compared in the order sent (precedence order), several levels deep for broker keys
        "topic-all-synonyms": lambda s, v: _describe_configs(s, v, [(TOPIC, s.name(), None)], synonyms=True),
        "broker-keys-synonyms": lambda s, v: _describe_configs(
            s, v, [(BROKER, str(s.broker.node_id), BROKER_KEYS)], synonyms=True
        ),
        "topic-unknown-key": lambda s, v: _describe_configs(s, v, [(TOPIC, s.name(), ["no.such.config"])]),
        "unknown-topic": lambda s, v: _describe_configs(s, v, [(TOPIC, s.name("missing"), None)]),
        "internal-topic": lambda s, v: _describe_configs(s, v, [(TOPIC, INTERNAL, ["cleanup.policy"])]),
        "broker-keys": lambda s, v: _describe_configs(s, v, [(BROKER, str(s.broker.node_id), BROKER_KEYS)]),
        "broker-default-resource": lambda s, v: _describe_configs(s, v, [(BROKER, "", ["num.partitions"])]),
        "unknown-broker": lambda s, v: _describe_configs(s, v, [(BROKER, "77", ["num.partitions"])]),
        "broker-name-not-a-number": lambda s, v: _describe_configs(s, v, [(BROKER, "abc", None)]),
        "broker-logger": lambda s, v: _describe_configs(
            s, v, [(BROKER_LOGGER, str(s.broker.node_id), ["kafka.server.KafkaApis"])]
        ),
        "unknown-resource-type": lambda s, v: _describe_configs(s, v, [(99, "x", None)]),
        "group-resource": lambda s, v: _describe_configs(
            s, v, [(32, s.name("group"), ["consumer.session.timeout.ms"])]
        ),
        "documentation": lambda s, v: _describe_configs(s, v, [(TOPIC, s.name(), ["retention.ms"])], docs=True),
        "two-resources": lambda s, v: _describe_configs(
            s, v, [(TOPIC, s.name(), ["retention.ms"]), (TOPIC, s.name("missing"), ["retention.ms"])]
        ),
    },
    setup=_configured,
)


def _alter(s, v, resources, *, validate=False, label=""):
    return s.probe(
        "AlterConfigs",
        v,
        {
            "resources": [
                {
                    "resource_type": t,
                    "resource_name": n,
                    "configs": [{"name": k, "value": val} for k, val in cfg.items()],
                }
                for t, n, cfg in resources
            ],
            "validate_only": validate,
        },
        label=label,
    )


def _config_view(s, name):
    answer = s.call(
        "DescribeConfigs",
        None,
        {
            "resources": [
                {
                    "resource_type": TOPIC,
                    "resource_name": name,
                    "configuration_keys": ["retention.ms", "cleanup.policy"],
                }
            ]
        },
    )
    return [(c.name, c.value) for c in answer.results[0].configs]


def _settle(s, name, before, answer, validate):
    """A successful change is applied through Kafka's metadata log, after the answer: wait until it shows."""
    if not validate and hasattr(answer, "responses") and all(r.error_code == 0 for r in answer.responses):
        s.wait_until(lambda: _config_view(s, name) != before)


def _alter_fresh(s, v, cfg, *, validate=False, kind=TOPIC, name=None):
    name = name or s.name(f"v{v}")
    mine = kind == TOPIC and name.startswith(s.prefix)
    if mine:
        s.create_topic(name, configs={"cleanup.policy": "compact"})
        before = _config_view(s, name)
    answer = _alter(s, v, [(kind, name, cfg)], validate=validate)
    if mine:
        _settle(s, name, before, answer, validate)
        _describe_configs(
            s, s.top("DescribeConfigs"), [(TOPIC, name, ["retention.ms", "cleanup.policy"])], label="after"
        )


for_each(
    "AlterConfigs",
    {
        "set": lambda s, v: _alter_fresh(s, v, {"retention.ms": "7200000"}),
        "validate-only": lambda s, v: _alter_fresh(s, v, {"retention.ms": "7200000"}, validate=True),
        "unknown-config": lambda s, v: _alter_fresh(s, v, {"no.such.config": "1"}),
        "invalid-value": lambda s, v: _alter_fresh(s, v, {"retention.ms": "soon"}),
        "null-value": lambda s, v: _alter_fresh(s, v, {"retention.ms": None}),
        "unknown-topic": lambda s, v: _alter_fresh(s, v, {"retention.ms": "1"}, name="missing-" + s.prefix),
        "broker": lambda s, v: _alter_fresh(
            s, v, {"log.cleaner.threads": "2"}, kind=BROKER, name=str(s.broker.node_id), validate=True
        ),
        "unknown-resource-type": lambda s, v: _alter_fresh(s, v, {"a": "b"}, kind=99, name="x"),
    },
)


def _iac(s, v, ops, *, name=None, validate=False, kind=TOPIC, fresh=True):
    name = name or s.name(f"v{v}")
    if fresh:
        s.create_topic(name, configs={"cleanup.policy": "compact"})
        before = _config_view(s, name)
    answer = s.probe(
        "IncrementalAlterConfigs",
        v,
        {
            "resources": [
                {
                    "resource_type": kind,
                    "resource_name": name,
                    "configs": [{"name": k, "config_operation": op, "value": val} for k, op, val in ops],
                }
            ],
            "validate_only": validate,
        },
    )
    if fresh:
        if hasattr(answer, "responses"):
            _settle(s, name, before, answer, validate)
        _describe_configs(
            s, s.top("DescribeConfigs"), [(TOPIC, name, ["retention.ms", "cleanup.policy"])], label="after"
        )


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
for_each(
    "IncrementalAlterConfigs",
    {
        "set": lambda s, v: _iac(s, v, [("retention.ms", SET, "7200000")]),
        "delete": lambda s, v: _iac(s, v, [("cleanup.policy", DELETE, None)]),
        "append": lambda s, v: _iac(s, v, [("cleanup.policy", APPEND, "delete")]),
        "subtract": lambda s, v: _iac(s, v, [("cleanup.policy", SUBTRACT, "compact")]),
        "append-to-scalar": lambda s, v: _iac(s, v, [("retention.ms", APPEND, "5")]),
        "invalid-operation": lambda s, v: _iac(s, v, [("retention.ms", 9, "5")]),
        "unknown-config": lambda s, v: _iac(s, v, [("no.such.config", SET, "1")]),
        "invalid-value": lambda s, v: _iac(s, v, [("retention.ms", SET, "soon")]),
        "set-null": lambda s, v: _iac(s, v, [("retention.ms", SET, None)]),
        "validate-only": lambda s, v: _iac(s, v, [("retention.ms", SET, "1000")], validate=True),
        "duplicate-key": lambda s, v: _iac(s, v, [("retention.ms", SET, "1000"), ("retention.ms", DELETE, None)]),
        "unknown-topic": lambda s, v: _iac(s, v, [("retention.ms", SET, "1")], name=s.name("missing"), fresh=False),
        "broker-validate": lambda s, v: _iac(
            s,
            v,
            [("log.cleaner.threads", SET, "2")],
            kind=BROKER,
            name=str(s.broker.node_id),
            validate=True,
            fresh=False,
        ),
    },
)


# -- DescribeLogDirs, ElectLeaders, reassignments -------------------------------------------------------


def _filled(s):
    s.create_topic(s.name(), partitions=2)
    s.produce(s.name(), 0, 3)


def _logdirs(s, v, topics, keep=None):
    return s.probe("DescribeLogDirs", v, {"topics": topics}, keep_names=keep)


for_each(
    "DescribeLogDirs",
    {
        "topic": lambda s, v: _logdirs(s, v, [{"topic": s.name(), "partitions": [0, 1]}]),
        "unknown-partition": lambda s, v: _logdirs(s, v, [{"topic": s.name(), "partitions": [0, 5]}]),
        "unknown-topic": lambda s, v: _logdirs(s, v, [{"topic": s.name("missing"), "partitions": [0]}]),
        "all": lambda s, v: _logdirs(s, v, None, keep=lambda n: n.startswith(s.prefix)),
        "none": lambda s, v: _logdirs(s, v, []),
    },
    setup=_filled,
)


def _elect(s, v, parts, *, kind=0):
    return s.probe(
        "ElectLeaders",
        v,
        {
            "election_type": kind,
            "timeout_ms": 10000,
            "topic_partitions": None if parts is None else [{"topic": t, "partitions": p} for t, p in parts],
        },
    )


for_each(
    "ElectLeaders",
    {
        "preferred": lambda s, v: _elect(s, v, [(s.name(), [0, 1])]),
        "unclean": lambda s, v: _elect(s, v, [(s.name(), [0])], kind=1),
        "unknown-partition": lambda s, v: _elect(s, v, [(s.name(), [7])]),
        "unknown-topic": lambda s, v: _elect(s, v, [(s.name("missing"), [0])]),
        "invalid-type": lambda s, v: _elect(s, v, [(s.name(), [0])], kind=5),
        "empty": lambda s, v: _elect(s, v, []),
    },
    setup=_two,
)


def _reassign(s, v, parts, name=None):
    return s.probe(
        "AlterPartitionReassignments",
        v,
        {
            "timeout_ms": 10000,
            "allow_replication_factor_change": True,
            "topics": [
                {"name": name or s.name(), "partitions": [{"partition_index": p, "replicas": r} for p, r in parts]}
            ],
        },
    )


for_each(
    "AlterPartitionReassignments",
    {
        "same-replicas": lambda s, v: _reassign(s, v, [(0, [s.broker.node_id])]),
        "unknown-broker": lambda s, v: _reassign(s, v, [(0, [9])]),
        "cancel-none-in-progress": lambda s, v: _reassign(s, v, [(0, None)]),
        "empty-replicas": lambda s, v: _reassign(s, v, [(0, [])]),
        "duplicate-replicas": lambda s, v: _reassign(s, v, [(0, [s.broker.node_id, s.broker.node_id])]),
        "unknown-partition": lambda s, v: _reassign(s, v, [(5, [s.broker.node_id])]),
        "unknown-topic": lambda s, v: _reassign(s, v, [(0, [s.broker.node_id])], name=s.name("missing")),
    },
    setup=_two,
)

for_each(
    "ListPartitionReassignments",
    {
        "all": lambda s, v: s.probe(
            "ListPartitionReassignments",
            v,
            {"timeout_ms": 10000, "topics": None},
            keep_names=lambda n: n.startswith(s.prefix),
        ),
        "topic": lambda s, v: s.probe(
            "ListPartitionReassignments",
            v,
            {"timeout_ms": 10000, "topics": [{"name": s.name(), "partition_indexes": [0, 1]}]},
        ),
        "unknown-partition": lambda s, v: s.probe(
            "ListPartitionReassignments",
            v,
            {"timeout_ms": 10000, "topics": [{"name": s.name(), "partition_indexes": [4]}]},
        ),
        "unknown-topic": lambda s, v: s.probe(
            "ListPartitionReassignments",
            v,
            {"timeout_ms": 10000, "topics": [{"name": s.name("missing"), "partition_indexes": [0]}]},
        ),
    },
    setup=_two,
)


# -- AlterReplicaLogDirs, ListConfigResources, DescribeQuorum ---------------------------------------------


def _log_dir_setup(s):
    _two(s)
    answer = s.call("DescribeLogDirs", None, {"topics": []})
    s.state["log_dir"] = answer.results[0].log_dir if answer.results else "/nowhere"


def _move(s, v, path, name=None, parts=(0,)):
    return s.probe(
        "AlterReplicaLogDirs",
        v,
        {"dirs": [{"path": path, "topics": [{"name": name or s.name(), "partitions": list(parts)}]}]},
    )


for_each(
    "AlterReplicaLogDirs",
    {
        "same-dir": lambda s, v: _move(s, v, s.state["log_dir"]),
        "unknown-dir": lambda s, v: _move(s, v, "/no/such/log/dir"),
        "unknown-partition": lambda s, v: _move(s, v, s.state["log_dir"], parts=(0, 9)),
        "unknown-topic": lambda s, v: _move(s, v, s.state["log_dir"], name=s.name("missing")),
        "none": lambda s, v: s.probe("AlterReplicaLogDirs", v, {"dirs": []}),
    },
    setup=_log_dir_setup,
)

for_each(
    "ListConfigResources",
    {
        "topics": lambda s, v: s.probe(
            "ListConfigResources", v, {"resource_types": [TOPIC]}, keep_names=lambda n: n.startswith(s.prefix)
        ),
        "brokers": lambda s, v: s.probe("ListConfigResources", v, {"resource_types": [BROKER]}),
        "unknown-type": lambda s, v: s.probe("ListConfigResources", v, {"resource_types": [99]}),
        "all-types": lambda s, v: s.probe(
            "ListConfigResources",
            v,
            {"resource_types": []},
            keep_names=lambda n: not n.startswith("cf") or n.startswith(s.prefix),
        ),
    },
    setup=_two,
)

for_each(
    "DescribeQuorum",
    {
        "metadata-partition": lambda s, v: s.probe(
            "DescribeQuorum",
            v,
            {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
        ),
        "unknown-partition": lambda s, v: s.probe(
            "DescribeQuorum",
            v,
            {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 3}]}]},
        ),
        "other-topic": lambda s, v: s.probe(
            "DescribeQuorum", v, {"topics": [{"topic_name": s.name("x"), "partitions": [{"partition_index": 0}]}]}
        ),
        "none": lambda s, v: s.probe("DescribeQuorum", v, {"topics": []}),
    },
)
