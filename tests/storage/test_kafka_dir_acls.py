"""ACLs cross over with the data directory: kafkawire keeps them in the KRaft metadata log as Kafka's
controller does (AccessControlEntryRecord, RemoveAccessControlEntryRecord), so Kafka 4.4 started on a
directory kafkawire wrote enforces and lists the same ACLs, and kafkawire started on it again sees what Kafka
added and removed. An older kafkawire's ``__kafkawire_meta/acls.json`` is moved into the log once."""

from __future__ import annotations

import json
import os

import pytest
from kafka_dir import kafka_on, kafkawire_on

pytest.importorskip("confluent_kafka")

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener's principal (and the controller's) may do all
}


def _binding(topic: str, principal: str, operation: str, pattern: str = "LITERAL", *, as_filter: bool = False):
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return (AclBindingFilter if as_filter else AclBinding)(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType[pattern],
        principal,
        "*",
        AclOperation[operation],
        AclPermissionType.ALLOW,
    )


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _acls(bootstrap: str) -> set[tuple[str, str, str, str]]:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    any_acl = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    admin = _admin(bootstrap)  # kept while its futures are waited on: a collected client cancels them
    found = admin.describe_acls(any_acl, request_timeout=30).result(timeout=60)
    return {(b.name, b.resource_pattern_type.name, b.principal, b.operation.name) for b in found}


def _create(bootstrap: str, *bindings) -> None:
    admin = _admin(bootstrap)
    for future in admin.create_acls(list(bindings), request_timeout=30).values():
        future.result(timeout=60)


def _delete(bootstrap: str, topic: str, principal: str, operation: str) -> None:
    admin = _admin(bootstrap)
    exact = _binding(topic, principal, operation, as_filter=True)
    for future in admin.delete_acls([exact], request_timeout=30).values():
        future.result(timeout=60)


def _metadata_records(logs) -> list[str]:
    from kafkawire.broker.storage.kraft.log import decode_batch_records
    from kafkawire.protocol.records import iter_batches

    names = []
    for segment in sorted((logs / "__cluster_metadata-0").glob("*.log")):
        for batch in iter_batches(segment.read_bytes()):
            names += [name for _offset, name, _message in decode_batch_records(batch)]
    return names


def test_acls_cross_over_between_kafkawire_and_kafka(tmp_path):
    wire = kafkawire_on(tmp_path, **AUTHORIZER)
    try:
        _create(
            wire.bootstrap,
            _binding("orders", "User:alice", "READ"),
            _binding("pay", "User:bob", "WRITE", "PREFIXED"),
            _binding("gone", "User:carol", "READ"),
        )
        _delete(wire.bootstrap, "gone", "User:carol", "READ")
        made_by_kafkawire = _acls(wire.bootstrap)
    finally:
        wire.stop()
    assert made_by_kafkawire == {("orders", "LITERAL", "User:alice", "READ"), ("pay", "PREFIXED", "User:bob", "WRITE")}
    assert not (tmp_path / "logs" / "__kafkawire_meta").exists()
    names = _metadata_records(tmp_path / "logs")
    assert names.count("AccessControlEntryRecord") == 3 and names.count("RemoveAccessControlEntryRecord") == 1

    kafka = kafka_on(tmp_path, **AUTHORIZER)
    try:
        assert _acls(kafka.bootstrap) == made_by_kafkawire
        _create(kafka.bootstrap, _binding("audit", "User:dave", "DESCRIBE"))
        _delete(kafka.bootstrap, "orders", "User:alice", "READ")
        made_by_kafka = _acls(kafka.bootstrap)
    finally:
        kafka.stop()
    assert made_by_kafka == {("pay", "PREFIXED", "User:bob", "WRITE"), ("audit", "LITERAL", "User:dave", "DESCRIBE")}

    wire = kafkawire_on(tmp_path, **AUTHORIZER)
    try:
        assert _acls(wire.bootstrap) == made_by_kafka
    finally:
        wire.stop()


def test_an_older_kafkawire_acl_file_is_moved_into_the_metadata_log(tmp_path):
    logs = tmp_path / "logs"
    wire = kafkawire_on(tmp_path, **AUTHORIZER)  # a data directory with a metadata log
    wire.stop()
    meta = logs / "__kafkawire_meta"
    os.makedirs(meta)
    record = {
        "id": "0c6f0a4e-54a8-4a5e-9a43-3f3f2b1e8e01",
        "resourceType": 2,  # TOPIC
        "resourceName": "legacy",
        "patternType": 3,  # LITERAL
        "principal": "User:erin",
        "host": "*",
        "operation": 3,  # READ
        "permissionType": 3,  # ALLOW
    }
    (meta / "acls.json").write_text(json.dumps({"version": 1, "records": [record]}))

    wire = kafkawire_on(tmp_path, **AUTHORIZER)
    try:
        assert _acls(wire.bootstrap) == {("legacy", "LITERAL", "User:erin", "READ")}
    finally:
        wire.stop()
    assert not meta.exists() and (logs / "kafkawire-acls.json.migrated").exists()
    assert _metadata_records(logs).count("AccessControlEntryRecord") == 1
    wire = kafkawire_on(tmp_path, **AUTHORIZER)  # once: the next start reads the log alone
    try:
        assert _acls(wire.bootstrap) == {("legacy", "LITERAL", "User:erin", "READ")}
    finally:
        wire.stop()
