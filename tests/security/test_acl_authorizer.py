"""The StandardAuthorizer's matching rules, on kafkawire's authorizer alone (the same rules are compared with
Kafka 4.4's answers in test_acl_matrix.py): literal, wildcard and prefixed patterns, principals and hosts,
implied operations, DENY over ALLOW, super.users, allow.everyone.if.no.acl.found, the creation checks,
filters, and ACLs kept across a restart."""

from __future__ import annotations

from kafkawire.protocol import errors
from kafkawire.security.authorizer import Acl, AclFilter, AclStore, StandardAuthorizer
from kafkawire.security.authorizer.model import (
    AclOperation as Op,
    AclPermissionType as Perm,
    PatternType as Pat,
    ResourceType as Res,
)

TOPIC, GROUP, CLUSTER = Res.TOPIC, Res.GROUP, Res.CLUSTER
ALICE, BOB = "User:alice", "User:bob"
HOST = "127.0.0.1"


def acl(name, op, perm=Perm.ALLOW, principal=ALICE, host="*", pattern=Pat.LITERAL, rtype=TOPIC):
    return Acl(rtype, name, pattern, principal, host, op, perm)


def authorizer(*acls, **kw) -> StandardAuthorizer:
    a = StandardAuthorizer(AclStore(None), **kw)
    assert a.create(list(acls)) == [None] * len(acls)
    return a


def may(a, op, name, principal=ALICE, host=HOST, rtype=TOPIC) -> bool:
    return a.authorize(principal, host, op, rtype, name)


def test_a_literal_acl_matches_its_name_only():
    a = authorizer(acl("orders", Op.READ))
    assert may(a, Op.READ, "orders")
    assert not may(a, Op.READ, "orders2")
    assert not may(a, Op.READ, "order")
    assert not may(a, Op.WRITE, "orders")
    assert not may(a, Op.READ, "orders", principal=BOB)


def test_a_prefixed_acl_matches_every_name_it_begins():
    a = authorizer(acl("pay", Op.WRITE, pattern=Pat.PREFIXED))
    assert may(a, Op.WRITE, "pay") and may(a, Op.WRITE, "payments") and not may(a, Op.WRITE, "pa")


def test_the_wildcard_resource_and_principal_and_host():
    a = authorizer(acl("*", Op.READ, principal="User:*"), acl("x", Op.WRITE, host="10.0.0.1"))
    assert may(a, Op.READ, "anything", principal=BOB)
    assert not may(a, Op.WRITE, "x")  # from 127.0.0.1
    assert may(a, Op.WRITE, "x", host="10.0.0.1")


def test_allow_of_read_write_delete_alter_implies_describe_and_alter_configs_implies_describe_configs():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE):
        assert may(authorizer(acl("t", op)), Op.DESCRIBE, "t"), op
    for op in (Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS):
        assert not may(authorizer(acl("t", op)), Op.DESCRIBE, "t"), op
    assert may(authorizer(acl("t", Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS, "t")
    assert not may(authorizer(acl("t", Op.DESCRIBE_CONFIGS)), Op.ALTER_CONFIGS, "t")


def test_deny_wins_and_a_deny_of_read_does_not_deny_describe():
    a = authorizer(acl("t", Op.ALL), acl("t", Op.READ, Perm.DENY))
    assert not may(a, Op.READ, "t")
    assert may(a, Op.WRITE, "t") and may(a, Op.DESCRIBE, "t")
    b = authorizer(acl("t", Op.READ), acl("*", Op.ALL, Perm.DENY, principal="User:*"))
    assert not may(b, Op.READ, "t")
    c = authorizer(acl("t", Op.READ), acl("t", Op.READ, Perm.DENY, pattern=Pat.PREFIXED))
    assert not may(c, Op.READ, "t")


def test_super_users_may_do_anything_even_when_denied():
    a = authorizer(acl("t", Op.ALL, Perm.DENY, principal="User:admin"), super_users=frozenset({"User:admin"}))
    assert may(a, Op.DELETE, "t", principal="User:admin")
    assert a.authorize("User:admin", HOST, Op.ALTER, CLUSTER, "kafka-cluster")


def test_allow_everyone_if_no_acl_found_applies_only_to_resources_without_any_acl():
    a = authorizer(acl("t", Op.READ, principal=BOB), allow_if_no_acl=True)
    assert may(a, Op.WRITE, "other")
    assert not may(a, Op.READ, "t")  # an ACL exists for t (for bob): alice is denied
    b = authorizer(acl("t", Op.READ, principal=BOB))
    assert not may(b, Op.WRITE, "other")


def test_authorized_operations_bitfield():
    a = authorizer(acl("t", Op.READ), acl("t", Op.ALTER_CONFIGS))
    bits = a.authorized_operations(ALICE, HOST, TOPIC, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)
    su = authorizer(super_users=frozenset({ALICE}))
    assert su.authorized_operations(ALICE, HOST, TOPIC, "t") == 3576  # every topic operation


def test_authorize_by_resource_type_for_an_idempotent_producer():
    a = authorizer(acl("pay", Op.WRITE, pattern=Pat.PREFIXED))
    assert a.authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
    b = authorizer(acl("payments", Op.WRITE), acl("pay", Op.WRITE, Perm.DENY, pattern=Pat.PREFIXED))
    assert not b.authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
    assert not authorizer().authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)


def test_creation_checks_answer_invalid_request_with_kafkas_messages():
    a = StandardAuthorizer(AclStore(None))
    results = a.create(
        [
            acl("other-cluster", Op.ALTER, rtype=CLUSTER),
            acl("", Op.READ),
            acl("t", Op.READ, rtype=Res.ANY),
            acl("t", Op.READ, pattern=Pat.MATCH),
            acl("t", Op.ANY),
            acl("t", Op.READ, Perm.ANY),
            acl("t", Op.READ),
            acl("t", Op.READ),  # the same ACL twice: stored once, both succeed
        ]
    )
    assert [r.code if r else 0 for r in results] == [errors.INVALID_REQUEST] * 6 + [0, 0]
    assert [r.message for r in results if r] == [
        "The only valid name for the CLUSTER resource is kafka-cluster",
        "Invalid empty resource name",
        "Invalid resourceType ANY",
        "Invalid patternType MATCH",
        "Invalid operation ANY",
        "Invalid permissionType ANY",
    ]
    assert len(a.acls(AclFilter(Res.ANY, None, Pat.ANY, None, None, Op.ANY, Perm.ANY))) == 1


def test_filters_any_match_and_exact_names():
    a = authorizer(
        acl("pay", Op.READ, pattern=Pat.PREFIXED), acl("payments", Op.READ), acl("*", Op.READ), acl("other", Op.READ)
    )

    def names(pattern, name):
        return sorted(x.resource_name for x in a.acls(AclFilter(TOPIC, name, pattern, None, None, Op.ANY, Perm.ANY)))

    assert names(Pat.MATCH, "payments") == ["*", "pay", "payments"]
    assert names(Pat.ANY, "payments") == ["payments"]
    assert names(Pat.LITERAL, None) == ["*", "other", "payments"]
    assert names(Pat.PREFIXED, None) == ["pay"]
    deleted = a.delete([AclFilter(TOPIC, "payments", Pat.MATCH, ALICE, None, Op.READ, Perm.ALLOW)])
    assert deleted[0][0] is None and sorted(x.resource_name for x in deleted[0][1]) == ["*", "pay", "payments"]
    assert names(Pat.ANY, None) == ["other"]
    unknown = a.delete([AclFilter(TOPIC, None, Pat.ANY, None, None, 0, Perm.ANY)])
    assert unknown[0][0].code == errors.INVALID_REQUEST and unknown[0][0].message == "Unknown entryFilter."


def test_acls_are_kept_across_a_restart(tmp_path):
    path = str(tmp_path / "acls.json")
    a = StandardAuthorizer(AclStore(path))
    a.create([acl("t", Op.READ), acl("g", Op.READ, rtype=GROUP)])
    a.delete([AclFilter(GROUP, None, Pat.ANY, None, None, Op.ANY, Perm.ANY)])
    again = StandardAuthorizer(AclStore(path))
    assert may(again, Op.READ, "t") and not may(again, Op.READ, "g", rtype=GROUP)
    assert again.acls(AclFilter(Res.ANY, None, Pat.ANY, None, None, Op.ANY, Perm.ANY)) == [acl("t", Op.READ)]


def test_the_authorizer_is_kafkas_class_or_nothing():
    import pytest

    from kafkawire.security.authorizer.standard import configured

    assert not configured({})
    assert configured({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    with pytest.raises(ValueError, match="authorizer.class.name"):
        configured({"authorizer.class.name": "com.example.MyAuthorizer"})
    a = StandardAuthorizer.from_properties(
        {"super.users": "User:admin; User:ops", "allow.everyone.if.no.acl.found": "true"}, AclStore(None)
    )
    assert a.super_users == {"User:admin", "User:ops"} and a.allow_if_no_acl


def _broker(data_dir, **props):
    from kafkawire.broker.config import BrokerConfig
    from kafkawire.broker.server import start_in_thread

    cfg = BrokerConfig.from_properties(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "authorizer.class.name": STANDARD, **props}
    )
    cfg.data_dir = str(data_dir)
    return start_in_thread(cfg)


STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANY_ACL = {
    "resource_type_filter": Res.ANY,
    "resource_name_filter": None,
    "pattern_type_filter": Pat.ANY,
    "principal_filter": None,
    "host_filter": None,
    "operation": Op.ANY,
    "permission_type": Perm.ANY,
}


def _call(broker, api, data, version=3):
    import sys
    from pathlib import Path

    tools = str(Path(__file__).resolve().parents[2] / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    from conformance_suite.build import build
    from conformance_suite.transport import Connection

    with Connection("127.0.0.1", broker.port) as conn:
        return conn.request(build(api, version, data), version)


def test_the_broker_keeps_acls_across_a_restart_and_refuses_who_may_not(tmp_path):
    creation = {
        "resource_type": Res.TOPIC,
        "resource_name": "orders",
        "resource_pattern_type": Pat.PREFIXED,
        "principal": ALICE,
        "host": "*",
        "operation": Op.WRITE,
        "permission_type": Perm.ALLOW,
    }
    broker = _broker(tmp_path, **{"super.users": "User:ANONYMOUS"})
    try:
        created = _call(broker, "CreateAcls", {"creations": [creation]})
        assert [(r.error_code, r.error_message) for r in created.results] == [(0, "")]
    finally:
        broker.stop()
    broker = _broker(tmp_path, **{"super.users": "User:ANONYMOUS"})
    try:
        described = _call(broker, "DescribeAcls", ANY_ACL)
        assert [(r.resource_name, r.pattern_type, [a.principal for a in r.acls]) for r in described.resources] == [
            ("orders", Pat.PREFIXED, [ALICE])
        ]
    finally:
        broker.stop()
    broker = _broker(tmp_path)  # no super user: the same connection may not describe the cluster's ACLs
    try:
        assert _call(broker, "DescribeAcls", ANY_ACL).error_code == errors.CLUSTER_AUTHORIZATION_FAILED
    finally:
        broker.stop()
