"""The ACL matrix: kafkawire and Kafka 4.4 with the same ACLs give the same answers.

Both brokers run with ``authorizer.class.name`` set to Kafka's StandardAuthorizer, a PLAINTEXT listener whose
principal (User:ANONYMOUS) is a super user (set-up goes through it) and a SASL_PLAINTEXT listener with PLAIN
users: alice, granted a set of ACLs (literal, prefixed, a DENY over an ALLOW, an implied DESCRIBE, another
host, a group, a transactional id, DESCRIBE on the cluster), and bob, granted nothing. Every probe is sent as
alice and as bob to both brokers, at the highest version both serve, and the answers are compared after the
conformance suite's normalisation (``tools/conformance_suite/normalise.py``: broker ids, addresses, topic ids,
member ids and free-text messages): the same error codes, the same topics listed or hidden, the same
authorized-operations bitfields. The ACL APIs themselves (invalid creations, filters, deletions) are compared
as the super user. One broker of each, started once for the module."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import uuid
from pathlib import Path

import pytest

TOOLS = str(Path(__file__).resolve().parents[2] / "tools")
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

from conformance_suite.build import build  # noqa: E402
from conformance_suite.normalise import Normaliser  # noqa: E402
from conformance_suite.transport import Closed, Connection, NoAnswer, Undecodable  # noqa: E402

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

# resource types, pattern types, operations, permissions (Kafka's codes)
TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
ANY_TYPE, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 10, 11, 12
DENY, ALLOW, ANY = 2, 3, 1

TOPICS = ["acl-read", "acl-pfx-1", "acl-denied", "acl-conf", "acl-hidden", "acl-host"]


def _acl(rtype, name, op, perm=ALLOW, principal="User:alice", host="*", pattern=LITERAL):
    return {
        "resource_type": rtype,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": host,
        "operation": op,
        "permission_type": perm,
    }


ACLS = [
    _acl(TOPIC, "acl-read", READ),
    _acl(TOPIC, "acl-pfx-", WRITE, pattern=PREFIXED),
    _acl(TOPIC, "acl-pfx-", CREATE, pattern=PREFIXED),
    _acl(TOPIC, "acl-denied", ALL),
    _acl(TOPIC, "acl-denied", DESCRIBE, DENY),
    _acl(TOPIC, "acl-conf", ALTER_CONFIGS),
    _acl(TOPIC, "acl-host", READ, host="10.1.2.3"),
    _acl(GROUP, "acl-group", READ),
    _acl(GROUP, "acl-group", DELETE),
    _acl(TXN, "acl-txn", WRITE),
    _acl(CLUSTER, "kafka-cluster", DESCRIBE),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _properties(plain: int, sasl: int, controller: int) -> dict[str, str]:
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},"
        f"CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:ANONYMOUS",
    }


class Peer:
    """One broker: its listeners, the versions it serves, a connection per principal."""

    def __init__(self, label: str, plain: int, sasl: int, node_id: int):
        self.label = label
        self.plain, self.sasl, self.node_id = plain, sasl, node_id
        self.conns: dict[str, Connection] = {}
        self.norm = Normaliser(node_id)

    def conn(self, who: str) -> Connection:
        if who not in self.conns or self.conns[who].sock is None:
            if who == "admin":
                c = Connection("127.0.0.1", self.plain, client_id="acl-matrix")
            else:
                c = Connection("127.0.0.1", self.sasl, client_id="acl-matrix")
                hs = c.request(build("SaslHandshake", 1, {"mechanism": "PLAIN"}), 1)
                assert hs.error_code == 0, (self.label, hs)
                token = b"\0" + who.encode() + b"\0" + USERS[who].encode()
                auth = c.request(build("SaslAuthenticate", 2, {"auth_bytes": token}), 2)
                assert auth.error_code == 0, (self.label, who, auth)
            self.conns[who] = c
        return self.conns[who]

    def call(self, who: str, api: str, version: int, data: dict):
        answer = self.conn(who).request(build(api, version, data), version)
        if not isinstance(answer, (Closed, NoAnswer, Undecodable)):
            self.norm.learn(answer)
        return answer

    def topic_id(self, name: str) -> uuid.UUID:
        """This broker's id of topic ``name`` (learned from its answers); for a topic it lacks, an id no
        broker has."""
        for topic_id, bound in self.norm.topic_ids.items():
            if bound == name:
                return topic_id
        return uuid.UUID(int=0x5EED)

    def close(self) -> None:
        for c in self.conns.values():
            c.close()


def _versions(peer: Peer) -> dict[int, int]:
    answer = peer.call(
        "admin", "ApiVersions", 3, {"client_software_name": "acl-matrix", "client_software_version": "1"}
    )
    return {k.api_key: k.max_version for k in answer.api_keys}


def _until(what: str, fn, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f}s: {what}")
        time.sleep(0.2)


def _set_up(peer: Peer) -> None:
    created = peer.call(
        "admin",
        "CreateTopics",
        5,
        {
            "topics": [
                {"name": t, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
                for t in TOPICS
            ],
            "timeout_ms": 30000,
        },
    )
    assert all(t.error_code == 0 for t in created.topics), created
    answer = peer.call("admin", "CreateAcls", 3, {"creations": ACLS})
    assert [r.error_code for r in answer.results] == [0] * len(ACLS), answer

    def acls_visible():
        d = peer.call("admin", "DescribeAcls", 3, _filter())
        return sum(len(r.acls) for r in d.resources) == len(ACLS)

    _until(f"{peer.label}: ACLs visible", acls_visible)

    def topics_visible():
        m = peer.call("admin", "Metadata", 12, {"topics": None, "allow_auto_topic_creation": False})
        return {t.name for t in m.topics if t.error_code == 0} >= set(TOPICS)

    _until(f"{peer.label}: topics visible", topics_visible)

    def coordinator(key, key_type):
        f = peer.call("admin", "FindCoordinator", 4, {"key_type": key_type, "coordinator_keys": [key]})
        return f.coordinators[0].error_code == 0

    _until(f"{peer.label}: group coordinator", lambda: coordinator("acl-group", 0), 60)
    _until(f"{peer.label}: transaction coordinator", lambda: coordinator("acl-txn", 1), 60)

    def producer_id(transactional_id):
        data = dict(PROBES["init-producer-idempotent"][1], transactional_id=transactional_id)
        return peer.call("admin", "InitProducerId", 5, data).error_code == 0

    _until(f"{peer.label}: transactional producer id", lambda: producer_id("acl-warm-up"), 60)
    _until(f"{peer.label}: idempotent producer id", lambda: producer_id(None), 60)


def _filter(**kw) -> dict:
    base = {
        "resource_type_filter": ANY_TYPE,
        "resource_name_filter": None,
        "pattern_type_filter": ANY,
        "principal_filter": None,
        "host_filter": None,
        "operation": ANY,
        "permission_type": ANY,
    }
    base.update(kw)
    return base


def _records(**batch) -> bytes:
    from kafkawire.protocol.records import build_batch

    return build_batch([(None, b"v")], base_timestamp=1_700_000_000_000, base_sequence=0 if batch else -1, **batch)


def _fetch_data(topics: list[dict], *, session_id: int = 0, epoch: int = -1, min_bytes: int = 1) -> dict:
    """A Fetch of partition 0 from offset 0 of each topic (``{"topic": name}`` or ``{"topic_id": id}``), at once
    (max_wait_ms 0), outside a session unless ``session_id``/``epoch`` say otherwise."""
    partition = {
        "partition": 0,
        "current_leader_epoch": -1,
        "fetch_offset": 0,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": min_bytes,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [dict(t, partitions=[partition]) for t in topics],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def _join(group: str) -> dict:
    return {
        "group_id": group,
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 10000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
        "reason": None,
    }


SOME = ["acl-read", "acl-pfx-1", "acl-hidden", "acl-missing"]  # granted READ, granted WRITE, nothing, absent

# label -> (API, data[, version]); sent as alice and as bob, at the highest version both serve unless given
PROBES: dict[str, tuple[str, dict]] = {
    "metadata-all": (
        "Metadata",
        {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": True},
    ),
    "metadata-named": (
        "Metadata",
        {
            "topics": [
                {"name": n} for n in ["acl-read", "acl-hidden", "acl-denied", "acl-host", "acl-pfx-1", "acl-missing"]
            ],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": True,
        },
    ),
    "describe-cluster": (
        "DescribeCluster",
        {"include_cluster_authorized_operations": True, "endpoint_type": 1, "include_fenced_brokers": False},
    ),
    "describe-topic-partitions": (
        "DescribeTopicPartitions",
        {
            "topics": [{"name": n} for n in ["acl-read", "acl-hidden", "acl-conf", "acl-missing"]],
            "response_partition_limit": 100,
            "cursor": None,
        },
    ),
    "describe-acls": ("DescribeAcls", _filter()),
    "create-topics": (
        "CreateTopics",
        {
            "topics": [
                {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
                for n in ("acl-pfx-created", "acl-other-created")
            ],
            "timeout_ms": 30000,
            "validate_only": True,
        },
    ),
    "delete-topics": (
        "DeleteTopics",
        {"topics": [{"name": "acl-hidden"}], "topic_names": ["acl-hidden"], "timeout_ms": 30000},
    ),
    "create-acls": ("CreateAcls", {"creations": [_acl(TOPIC, "acl-x", READ, principal="User:bob")]}),
    "delete-acls": ("DeleteAcls", {"filters": [_filter(resource_name_filter="acl-nothing")]}),
    "list-reassignments": ("ListPartitionReassignments", {"timeout_ms": 1000, "topics": None}),
    "alter-reassignments": ("AlterPartitionReassignments", {"timeout_ms": 1000, "topics": []}),
    # users named: Kafka 4.4 answers a denied request for all users (null) with no answer at all (an NPE)
    "describe-scram": ("DescribeUserScramCredentials", {"users": [{"name": "alice"}]}),
    "alter-scram": ("AlterUserScramCredentials", {"deletions": [{"name": "nobody", "mechanism": 1}], "upsertions": []}),
    "describe-log-dirs": ("DescribeLogDirs", {"topics": None}),
    "describe-client-quotas": ("DescribeClientQuotas", {"components": [], "strict": False}),
    "alter-client-quotas": ("AlterClientQuotas", {"entries": [], "validate_only": True}),
    "elect-leaders": ("ElectLeaders", {"election_type": 0, "topic_partitions": None, "timeout_ms": 1000}),
    "update-features": ("UpdateFeatures", {"timeout_ms": 1000, "feature_updates": [], "validate_only": True}),
    "join-granted-group": ("JoinGroup", _join("acl-group")),
    "join-other-group": ("JoinGroup", _join("acl-other-group")),
    "heartbeat-other-group": (
        "Heartbeat",
        {"group_id": "acl-other-group", "generation_id": 1, "member_id": "m", "group_instance_id": None},
    ),
    "init-producer-txn": (
        "InitProducerId",
        {
            "transactional_id": "acl-txn",
            "transaction_timeout_ms": 60000,
            "producer_id": -1,
            "producer_epoch": -1,
            "enable2_pc": False,
            "keep_prepared_txn": False,
        },
    ),
    "init-producer-other-txn": (
        "InitProducerId",
        {
            "transactional_id": "acl-other-txn",
            "transaction_timeout_ms": 60000,
            "producer_id": -1,
            "producer_epoch": -1,
            "enable2_pc": False,
            "keep_prepared_txn": False,
        },
    ),
    "init-producer-idempotent": (
        "InitProducerId",
        {
            "transactional_id": None,
            "transaction_timeout_ms": 60000,
            "producer_id": -1,
            "producer_epoch": -1,
            "enable2_pc": False,
            "keep_prepared_txn": False,
        },
    ),
    "end-txn-other": (
        "EndTxn",
        {"transactional_id": "acl-other-txn", "producer_id": 1, "producer_epoch": 0, "committed": False},
    ),
    "add-offsets-other-group": (
        "AddOffsetsToTxn",
        {"transactional_id": "acl-txn", "producer_id": 1, "producer_epoch": 0, "group_id": "acl-other-group"},
    ),
    "produce": (
        "Produce",
        {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 5000,
            "topic_data": [{"name": n, "partition_data": [{"index": 0, "records": _records()}]} for n in SOME],
        },
        12,  # by name (v13 names topics by id)
    ),
    "produce-transactional-other-txn": (
        "Produce",
        {
            "transactional_id": "acl-other-txn",
            "acks": -1,
            "timeout_ms": 5000,
            "topic_data": [
                {
                    "name": "acl-pfx-1",
                    "partition_data": [
                        {"index": 0, "records": _records(producer_id=1, producer_epoch=0, transactional=True)}
                    ],
                }
            ],
        },
        12,
    ),
    "add-partitions-to-txn": (
        "AddPartitionsToTxn",
        {
            "v3_and_below_transactional_id": "acl-txn",
            "v3_and_below_producer_id": 1,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": n, "partitions": [0]} for n in ("acl-pfx-1", "acl-read")],
        },
        3,  # as producers send it (v4+ is for brokers)
    ),
    "alter-replica-log-dirs": ("AlterReplicaLogDirs", {"dirs": []}),
    "list-config-resources": ("ListConfigResources", {"resource_types": []}),
    "consumer-group-heartbeat": (
        "ConsumerGroupHeartbeat",
        {
            "group_id": "acl-group",
            "member_id": "Xn7Jb3DJRRKcgGmWqUuZ3g",
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout_ms": 5000,
            "subscribed_topic_names": ["acl-read", "acl-hidden"],
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": [],
        },
    ),
    "offset-delete": (
        "OffsetDelete",
        {"group_id": "acl-group", "topics": [{"name": n, "partitions": [{"partition_index": 0}]} for n in SOME]},
    ),
    "fetch": (
        "Fetch",
        _fetch_data([{"topic": n} for n in SOME]),
        12,  # by name (v13 names topics by id)
    ),
    "fetch-by-id": (
        "Fetch",
        lambda peer: _fetch_data([{"topic_id": peer.topic_id(n)} for n in SOME]),
    ),
    "produce-by-id": (
        "Produce",
        lambda peer: {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 5000,
            "topic_data": [
                {"topic_id": peer.topic_id(n), "partition_data": [{"index": 0, "records": _records()}]} for n in SOME
            ],
        },
    ),
    "list-offsets": (
        "ListOffsets",
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {"name": n, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}
                for n in SOME
            ],
            "timeout_ms": 1000,
        },
    ),
    "offset-for-leader-epoch": (
        "OffsetForLeaderEpoch",
        {
            "replica_id": -1,
            "topics": [
                {"topic": n, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}
                for n in SOME
            ],
        },
    ),
    "offset-commit": (
        "OffsetCommit",
        {
            "group_id": "acl-group",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [
                {
                    "name": n,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 0,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
                for n in SOME
            ],
        },
        9,  # by name (v10 names topics by id)
    ),
    "offset-commit-other-group": (
        "OffsetCommit",
        {
            "group_id": "acl-other-group",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [],
        },
        9,
    ),
    "offset-fetch": (
        "OffsetFetch",
        {
            "groups": [
                {"group_id": "acl-group", "topics": [{"name": n, "partition_indexes": [0]} for n in SOME]},
                {"group_id": "acl-group", "topics": None},
                {"group_id": "acl-other-group", "topics": None},
            ],
            "require_stable": False,
        },
        8,  # by name
    ),
    "find-group-coordinators": ("FindCoordinator", {"key_type": 0, "coordinator_keys": ["acl-group", "acl-other"]}),
    "find-txn-coordinators": ("FindCoordinator", {"key_type": 1, "coordinator_keys": ["acl-txn", "acl-other-txn"]}),
    "describe-groups": (
        "DescribeGroups",
        {"groups": ["acl-group", "acl-other-group"], "include_authorized_operations": True},
    ),
    "list-groups": ("ListGroups", {"states_filter": [], "types_filter": []}),
    "delete-groups": ("DeleteGroups", {"groups_names": ["acl-other-group", "acl-group"]}),
    "describe-configs": (
        "DescribeConfigs",
        {
            "resources": [
                {"resource_type": 2, "resource_name": n, "configuration_keys": ["cleanup.policy"]}
                for n in ("acl-conf", "acl-read", "acl-hidden")
            ]
            + [{"resource_type": 4, "resource_name": "1", "configuration_keys": ["log.retention.hours"]}],
            "include_synonyms": False,
            "include_documentation": False,
        },
    ),
    "incremental-alter-configs": (
        "IncrementalAlterConfigs",
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": n,
                    "configs": [{"name": "retention.ms", "config_operation": 0, "value": "100000"}],
                }
                for n in ("acl-conf", "acl-read")
            ],
            "validate_only": True,
        },
    ),
    "create-partitions": (
        "CreatePartitions",
        {
            "topics": [{"name": n, "count": 2, "assignments": None} for n in SOME],
            "timeout_ms": 5000,
            "validate_only": True,
        },
    ),
    "delete-records": (
        "DeleteRecords",
        {
            "topics": [{"name": n, "partitions": [{"partition_index": 0, "offset": 0}]} for n in SOME],
            "timeout_ms": 5000,
        },
    ),
    "describe-producers": ("DescribeProducers", {"topics": [{"name": n, "partition_indexes": [0]} for n in SOME]}),
    "describe-transactions": ("DescribeTransactions", {"transactional_ids": ["acl-txn", "acl-other-txn"]}),
    "list-transactions": (
        "ListTransactions",
        {"state_filters": [], "producer_id_filters": [], "duration_filter": -1, "transactional_id_pattern": None},
    ),
    # last: creates a topic that later listings would show
    "metadata-auto-create": (
        "Metadata",
        {"topics": [{"name": "acl-pfx-auto"}], "allow_auto_topic_creation": True},
    ),
}

# the ACL APIs as the super user: invalid creations, filters, deletions
ADMIN_PROBES: list[tuple[str, str, dict]] = [
    (
        "create-invalid",
        "CreateAcls",
        {
            "creations": [
                _acl(CLUSTER, "other-cluster", ALTER),
                _acl(TOPIC, "", READ),
                _acl(ANY_TYPE, "t", READ),
                _acl(TOPIC, "t", READ, pattern=MATCH),
                _acl(TOPIC, "t", ANY),
                _acl(TOPIC, "t", READ, perm=ANY),
                _acl(TOPIC, "t", 99),
                _acl(TOPIC, "acl-del", READ, principal="User:carol"),
                _acl(TOPIC, "acl-del", WRITE, principal="User:carol", pattern=PREFIXED),
                _acl(TOPIC, "acl-del", WRITE, principal="User:carol", pattern=PREFIXED),
            ]
        },
    ),
    (
        "describe-match",
        "DescribeAcls",
        _filter(resource_type_filter=TOPIC, resource_name_filter="acl-pfx-1", pattern_type_filter=MATCH),
    ),
    ("describe-prefixed", "DescribeAcls", _filter(pattern_type_filter=PREFIXED)),
    ("describe-principal", "DescribeAcls", _filter(principal_filter="User:carol")),
    ("describe-host", "DescribeAcls", _filter(host_filter="10.1.2.3")),
    ("describe-op-99", "DescribeAcls", _filter(operation=99)),
    (
        "delete",
        "DeleteAcls",
        {
            "filters": [
                _filter(principal_filter="User:carol", pattern_type_filter=LITERAL),
                _filter(resource_name_filter="nothing"),
                _filter(operation=99),
            ]
        },
    ),
    ("describe-after-delete", "DescribeAcls", _filter(principal_filter="User:carol")),
]


def _tree(peer: Peer, answer, version: int):
    tree = peer.norm.tree(answer, version, keep_names=lambda n: n.startswith("acl-") or n == "kafka-cluster")
    return json.loads(json.dumps(_sort_acls(tree), default=str))


def _sort_acls(tree):
    """ACL lists come from hash sets in Kafka: compared as sorted lists."""
    if isinstance(tree, dict):
        out = {k: _sort_acls(v) for k, v in tree.items()}
        for key in ("resources", "acls", "matching_acls"):
            if isinstance(out.get(key), list):
                out[key] = sorted(out[key], key=lambda d: json.dumps(d, sort_keys=True, default=str))
        return out
    if isinstance(tree, list):
        return [_sort_acls(v) for v in tree]
    return tree


def _run(peer: Peer, versions: dict[int, int]) -> dict[str, object]:
    from kafkawire.protocol import api_by_name

    out: dict[str, object] = {}
    for label, api, data in ADMIN_PROBES:
        v = versions[api_by_name(api).key]
        out[f"admin/{label}"] = _tree(peer, peer.call("admin", api, v, data), v)
    for who in ("alice", "bob"):
        for label, (api, data, *pinned) in PROBES.items():
            v = versions.get(api_by_name(api).key)
            if v is not None and pinned:
                v = min(v, pinned[0])
            if v is None:
                out[f"{who}/{label}"] = f"{api} is not served by both brokers"
                continue
            if callable(data):  # data naming this broker's topic ids
                data = data(peer)
            out[f"{who}/{label}"] = _tree(peer, peer.call(who, api, v, data), v)
    return out


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    """kafkawire and Kafka 4.4 with the same listeners, users and ACLs, set up: [kafkawire, kafka]."""
    from kafkawire.broker.config import BrokerConfig
    from kafkawire.broker.server import start_in_thread

    from conftest import reference_unavailable
    from kafka_reference import KafkaUnavailable, ReferenceKafka

    kw_ports = (_free_port(), _free_port(), _free_port())
    kafka_ports = (_free_port(), _free_port(), _free_port())
    cfg = BrokerConfig.from_properties(_properties(*kw_ports))
    cfg.data_dir = str(tmp_path_factory.mktemp("kafkawire-acl"))
    broker = start_in_thread(cfg)
    kafka = ReferenceKafka(tmp_path_factory.mktemp("kafka-acl"), port=kafka_ports[0], config=_properties(*kafka_ports))
    kafka.controller_port = kafka_ports[2]
    peers = [Peer("kafkawire", kw_ports[0], kw_ports[1], cfg.node_id), Peer("kafka", kafka_ports[0], kafka_ports[1], 1)]
    try:
        try:
            kafka.start()
        except KafkaUnavailable as exc:
            reference_unavailable(str(exc))
        try:
            for peer in peers:
                _set_up(peer)
        except Exception as exc:  # reported by every test, without starting the brokers again for each
            peers = exc
        yield peers
    finally:
        for peer in peers if isinstance(peers, list) else ():
            peer.close()
        kafka.close()
        broker.stop()


@pytest.fixture(scope="module")
def answers(brokers):
    if isinstance(brokers, Exception):
        return brokers
    try:
        theirs = [_versions(p) for p in brokers]
        versions = {k: min(theirs[0][k], theirs[1][k]) for k in theirs[0].keys() & theirs[1].keys()}
        results = [_run(p, versions) for p in brokers]
    except Exception as exc:  # reported by every test, without running the probes again for each
        return exc
    if os.environ.get("ACL_MATRIX_DUMP"):  # for a side-by-side read
        Path(os.environ["ACL_MATRIX_DUMP"]).write_text(json.dumps(results, indent=1, default=str))
    return results


LABELS = [f"admin/{label}" for label, _, _ in ADMIN_PROBES] + [
    f"{who}/{label}" for who in ("alice", "bob") for label in PROBES
]


def _created_by_its_first_metadata(ours, kafkas) -> bool:
    """Auto-creation, explained in tools/conformance_suite/explained.toml ("Metadata/auto-create"): Kafka's
    first answer says the topic is not there yet (the controller creates it), kafkawire's already lists it. The
    authorization outcome is the same: neither refuses it."""
    (mine,), (theirs,) = ours["topics"], kafkas["topics"]
    return mine["error_code"] == 0 and theirs["error_code"] in (0, 3, 5)


EXPLAINED = {"alice/metadata-auto-create": _created_by_its_first_metadata}


@pytest.mark.parametrize("label", LABELS)
def test_same_answer_as_kafka(answers, label):
    if isinstance(answers, Exception):
        raise answers
    ours, kafkas = answers[0][label], answers[1][label]
    if label in EXPLAINED:
        assert EXPLAINED[label](ours, kafkas), (label, ours, kafkas)
        return
    assert ours == kafkas, (
        f"{label}\nkafkawire: {json.dumps(ours, indent=1, default=str)}\nkafka:     {json.dumps(kafkas, indent=1, default=str)}"
    )


def test_the_matrix_sees_a_denial_and_a_grant(answers):
    """The matrix is not vacuous: bob is refused where alice is let through."""
    if isinstance(answers, Exception):
        raise answers
    alice, bob = answers[1]["alice/describe-acls"], answers[1]["bob/describe-acls"]
    assert alice["error_code"] == 0 and bob["error_code"] == 31  # CLUSTER_AUTHORIZATION_FAILED


JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "AclAdmin.java"


def test_java_admin_client_acl_calls_round_trip(brokers):
    """The Java AdminClient (kafka-clients of the pinned release) creates, describes and deletes ACLs; the
    outcome of every call, the bindings listed and deleted, and the refusals of a user without ALTER are the
    same on kafkawire as on Kafka 4.4."""
    if isinstance(brokers, Exception):
        raise brokers
    import kafka_pins
    from conftest import reference_unavailable
    from support.java import JavaProgram, JavaUnavailable

    try:
        program = JavaProgram.compile(JAVA_SOURCE, clients=kafka_pins.BROKER)
    except JavaUnavailable as exc:
        reference_unavailable(f"Java client: {exc}")
    outputs = [
        program.run(
            "AclAdmin", f"127.0.0.1:{p.plain}", f"127.0.0.1:{p.sasl}", "bob", USERS["bob"], timeout=120
        ).splitlines()
        for p in brokers
    ]
    assert outputs[0] == outputs[1], "\n".join(["kafkawire:", *outputs[0], "kafka:", *outputs[1]])
    out = outputs[0]
    assert "create CLUSTER LITERAL not-the-cluster User:dave * ALTER ALLOW -> InvalidRequestException" in out
    assert "describe principal 4" in out and "describe match java-orders 2" in out
    assert "delete topic acls 2" in out and "delete the rest 2" in out and "describe after delete 0" in out
    assert "create as bob -> ClusterAuthorizationException" in out


def _session_fetch(peer: Peer, topic: str, session_id: int, epoch: int):
    """bob's Fetch v12 (by name): a new session naming ``topic`` (epoch 0), or an incremental one naming nothing."""
    named = [{"topic": topic}] if epoch == 0 else []
    data = _fetch_data(named, session_id=session_id, epoch=epoch, min_bytes=0)
    return peer.call("bob", "Fetch", 12, data)


def test_a_read_acl_taken_away_stops_a_fetch_session(brokers):
    """A fetch session's partitions are authorized on every request, not only when first named: bob reads a
    topic in a session, his READ ACL is deleted, and his next incremental fetch (naming nothing) answers the
    session's partition with TOPIC_AUTHORIZATION_FAILED, on kafkawire as on Kafka 4.4. (The ACL is gone again
    at the end, so the module's other tests see the ACLs they set up.)"""
    if isinstance(brokers, Exception):
        raise brokers
    topic = "acl-session"
    grant = _acl(TOPIC, topic, READ, principal="User:bob")
    trees = []
    for peer in brokers:
        created = peer.call(
            "admin",
            "CreateTopics",
            5,
            {
                "topics": [
                    {"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
                ],
                "timeout_ms": 30000,
            },
        )
        assert created.topics[0].error_code == 0, created
        assert [r.error_code for r in peer.call("admin", "CreateAcls", 3, {"creations": [grant]}).results] == [0]

        def readable(peer=peer):
            first = _session_fetch(peer, topic, 0, 0)
            return first if first.error_code == 0 and first.responses[0].partitions[0].error_code == 0 else None

        first = _until(f"{peer.label}: bob reads {topic}", readable)
        assert first.session_id != 0
        exact = _filter(
            resource_type_filter=TOPIC, resource_name_filter=topic, principal_filter="User:bob", operation=READ
        )
        deleted = peer.call("admin", "DeleteAcls", 3, {"filters": [exact]})
        assert [len(r.matching_acls) for r in deleted.filter_results] == [1], deleted

        epochs = iter(range(1, 1000))  # each answered incremental fetch moves the session to the next epoch

        def refused(peer=peer, session=first.session_id, epochs=epochs):
            answer = _session_fetch(peer, topic, session, next(epochs))
            codes = [p.error_code for t in answer.responses for p in t.partitions]
            return answer if codes == [29] else None  # TOPIC_AUTHORIZATION_FAILED

        trees.append(_tree(peer, _until(f"{peer.label}: the session refused", refused), 12))
    ours, kafkas = trees
    assert ours == kafkas, f"kafkawire: {ours}\nkafka:     {kafkas}"
