"""Where the broker keeps its ACLs: the one persistence interface of the authorizer.

Each ACL is KRaft's ``AccessControlEntryRecord`` (an id, the resource type, name and pattern type, the
principal, host, operation and permission type). With the data directory's metadata log
(``storage.metadata.metadata_log_of``) a CreateAcls or DeleteAcls is one fsynced batch of
AccessControlEntryRecords and RemoveAccessControlEntryRecords there before it is visible, as Kafka's
controller writes them, so an acknowledged change survives a crash and Kafka 4.4 started on the directory
enforces the same ACLs. An older kafkawire's ``__kafkawire_meta/acls.json`` (the same fields as one JSON
document) is moved into the log once. Without a log (the memory engine) the ACLs live as long as the
process."""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid

from .model import Acl

FILE_NAME = "acls.json"

log = logging.getLogger("kafkawire.broker")


def _record(acl_id: str, acl: Acl) -> dict:
    return {
        "id": acl_id,
        "resourceType": acl.resource_type,
        "resourceName": acl.resource_name,
        "patternType": acl.pattern_type,
        "principal": acl.principal,
        "host": acl.host,
        "operation": acl.operation,
        "permissionType": acl.permission,
    }


def _record_fields(acl: Acl) -> dict:
    """The AccessControlEntryRecord fields of ``acl`` (all but the id), by the generated codec's names."""
    return {
        "resource_type": acl.resource_type,
        "resource_name": acl.resource_name,
        "pattern_type": acl.pattern_type,
        "principal": acl.principal,
        "host": acl.host,
        "operation": acl.operation,
        "permission_type": acl.permission,
    }


def _acl_of_record(r) -> Acl:
    return Acl(r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host, r.operation, r.permission_type)


def _acl(record: dict) -> Acl:
    return Acl(
        record["resourceType"],
        record["resourceName"],
        record["patternType"],
        record["principal"],
        record["host"],
        record["operation"],
        record["permissionType"],
    )


class AclStore:
    """ACLs by id. ``change`` applies additions and removals together (one metadata-log batch, or one file
    write)."""

    def __init__(self, path: str | None = None, *, metadata_log=None):
        self.path = path
        self._lock = threading.Lock()
        self._by_id: dict[str, Acl] = {}
        self._metadata_log = metadata_log
        if metadata_log is not None:
            for acl_id, r in metadata_log.acls().items():
                self._by_id[str(acl_id)] = _acl_of_record(r)
            if path is not None and os.path.exists(path):
                self._migrate(path)
            return
        if path is not None and os.path.exists(path):
            self._by_id.update(self._read_file(path))

    @staticmethod
    def _read_file(path: str) -> dict[str, Acl]:
        with open(path, encoding="utf-8") as f:
            return {record["id"]: _acl(record) for record in json.load(f)["records"]}

    def _migrate(self, path: str) -> None:
        """An older kafkawire's acls.json into the metadata log, once (the file is then set aside)."""
        from kafkawire.broker.storage.metadata import set_aside_migrated

        legacy = self._read_file(path)
        if legacy and not self._by_id:
            self._metadata_log.save_acls({uuid.UUID(k): _record_fields(v) for k, v in legacy.items()}, set())
            self._by_id.update(legacy)
            log.info("%d ACLs moved from %s into the KRaft metadata log", len(legacy), path)
        set_aside_migrated(path)

    def items(self) -> list[tuple[str, Acl]]:
        return list(self._by_id.items())

    def change(self, add: list[Acl], remove: set[str]) -> None:
        with self._lock:
            by_id = {k: v for k, v in self._by_id.items() if k not in remove}
            added = {str(uuid.uuid4()): acl for acl in add}
            by_id.update(added)
            if self._metadata_log is not None:
                self._metadata_log.save_acls(
                    {uuid.UUID(k): _record_fields(v) for k, v in added.items()},
                    {uuid.UUID(k) for k in remove if k in self._by_id},
                )
            elif self.path is not None:
                self._write(by_id)
            self._by_id = by_id

    def _write(self, by_id: dict[str, Acl]) -> None:
        from kafkawire.broker.storage.metadata import write_atomically

        path = self.path
        assert path is not None
        doc = {"version": 1, "records": [_record(k, v) for k, v in sorted(by_id.items(), key=lambda kv: kv[1])]}
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        write_atomically(path, json.dumps(doc, indent=1).encode())
