"""Where the broker keeps its ACLs: the one persistence interface of the authorizer.

Each ACL is kept as the fields of KRaft's ``AccessControlEntryRecord`` (an id, the resource type, name and
pattern type, the principal, host, operation and permission type), so that the move of broker metadata into
a metadata log writes these records as they are. Until then a ``path`` holds them as one JSON document,
written atomically (fsynced, renamed) before a change is visible: an acknowledged CreateAcls or DeleteAcls
survives a crash. Without a path (the memory engine) they live as long as the process."""

from __future__ import annotations

import json
import os
import threading
import uuid

from .model import Acl

FILE_NAME = "acls.json"


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
    """ACLs by id. ``change`` applies additions and removals together (one file write)."""

    def __init__(self, path: str | None = None):
        self.path = path
        self._lock = threading.Lock()
        self._by_id: dict[str, Acl] = {}
        if path is not None and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for record in json.load(f)["records"]:
                    self._by_id[record["id"]] = _acl(record)

    def items(self) -> list[tuple[str, Acl]]:
        return list(self._by_id.items())

    def change(self, add: list[Acl], remove: set[str]) -> None:
        with self._lock:
            by_id = {k: v for k, v in self._by_id.items() if k not in remove}
            for acl in add:
                by_id[str(uuid.uuid4())] = acl
            if self.path is not None:
                self._write(by_id)
            self._by_id = by_id

    def _write(self, by_id: dict[str, Acl]) -> None:
        from kafkawire.broker.storage.metadata import write_atomically

        path = self.path
        assert path is not None
        doc = {"version": 1, "records": [_record(k, v) for k, v in sorted(by_id.items(), key=lambda kv: kv[1])]}
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        write_atomically(path, json.dumps(doc, indent=1).encode())
