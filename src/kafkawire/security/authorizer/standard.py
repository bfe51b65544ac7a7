"""Kafka's StandardAuthorizer (``org.apache.kafka.metadata.authorizer``), on kafkawire's ACL store.

A request's principal and client address are authorized for one operation on one resource as Kafka does:

- a principal named in ``super.users`` may do everything;
- the ACLs that apply to a resource are those of its type whose pattern is the LITERAL name, the LITERAL
  wildcard ``*``, or a PREFIXED prefix of the name; one whose principal is the request's or ``User:*``, whose
  host is the client's address or ``*``, and whose operation is the requested one or ALL matches;
- an ALLOW ACL for READ, WRITE, DELETE or ALTER also allows DESCRIBE, and one for ALTER_CONFIGS also allows
  DESCRIBE_CONFIGS; a DENY ACL denies only its own operation (or ALL);
- a matching DENY wins over any ALLOW; no matching ALLOW denies;
- when no ACL at all applies to the resource (for anyone, any operation), ``allow.everyone.if.no.acl.found``
  decides (default false: denied).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from kafkawire.protocol import errors

from .model import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    Acl,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    describe_acl,
)
from .store import AclStore

log = logging.getLogger("kafkawire.authorizer")

AUTHORIZER_CLASS_KEY = "authorizer.class.name"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SUPER_USERS_KEY = "super.users"
ALLOW_IF_NO_ACL_KEY = "allow.everyone.if.no.acl.found"
KEYS = (AUTHORIZER_CLASS_KEY, SUPER_USERS_KEY, ALLOW_IF_NO_ACL_KEY)

_IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})
_VALID_OPERATIONS = frozenset(AclOperation) - {AclOperation.UNKNOWN, AclOperation.ANY}


@dataclass(frozen=True)
class ApiError:
    code: int
    message: str | None


class _Index:
    """The ACLs of each resource type by LITERAL name and by PREFIXED name (rebuilt on each change)."""

    def __init__(self, acls: list[Acl]):
        self.literal: dict[tuple[int, str], list[Acl]] = {}
        self.prefixed: dict[tuple[int, str], list[Acl]] = {}
        self.longest_prefix: dict[int, int] = {}
        for acl in acls:
            if acl.pattern_type == PatternType.LITERAL:
                self.literal.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
            else:
                self.prefixed.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
                longest = self.longest_prefix.get(acl.resource_type, 0)
                self.longest_prefix[acl.resource_type] = max(longest, len(acl.resource_name))

    def applicable(self, resource_type: int, name: str) -> list[Acl]:
        out = list(self.literal.get((resource_type, name), ()))
        if name != WILDCARD:
            out.extend(self.literal.get((resource_type, WILDCARD), ()))
        for end in range(1, min(len(name), self.longest_prefix.get(resource_type, 0)) + 1):
            out.extend(self.prefixed.get((resource_type, name[:end]), ()))
        return out


def parse_super_users(text: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


def configured(properties: dict[str, str]) -> bool:
    """Whether ``authorizer.class.name`` enables the authorizer; ValueError for a class kafkawire lacks."""
    name = (properties.get(AUTHORIZER_CLASS_KEY) or "").strip()
    if not name:
        return False
    if name != STANDARD_AUTHORIZER:
        raise ValueError(
            f"{AUTHORIZER_CLASS_KEY}={name}: kafkawire implements {STANDARD_AUTHORIZER} only; refusing to start "
            f"with an authorizer it cannot apply"
        )
    return True


class StandardAuthorizer:
    def __init__(self, store: AclStore, super_users: frozenset[str] = frozenset(), allow_if_no_acl: bool = False):
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._lock = threading.Lock()  # one change at a time (the controller thread and tests)
        self._index = _Index([acl for _, acl in store.items()])

    @classmethod
    def from_properties(cls, properties: dict[str, str], store: AclStore) -> StandardAuthorizer:
        allow = (properties.get(ALLOW_IF_NO_ACL_KEY) or "false").strip().lower()
        if allow not in ("true", "false"):
            raise ValueError(f"{ALLOW_IF_NO_ACL_KEY}={allow}: expected true or false")
        return cls(store, parse_super_users(properties.get(SUPER_USERS_KEY)), allow == "true")

    # -- authorization ------------------------------------------------------------------------------------
    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        found_resource_acls = False
        allowed = False
        for acl in self._index.applicable(resource_type, name):
            found_resource_acls = True
            result = _result(acl, operation, principal, host)
            if result == AclPermissionType.DENY:
                return False
            if result == AclPermissionType.ALLOW:
                allowed = True
        if allowed:
            return True
        return self.allow_if_no_acl if not found_resource_acls else False

    def authorize_cluster(self, principal: str, host: str, operation: int) -> bool:
        return self.authorize(principal, host, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorized_operations(self, principal: str, host: str, resource_type: int, name: str) -> int:
        """Kafka's authorized-operations bitfield: bit ``1 << code`` for each supported operation allowed."""
        return sum(
            1 << op
            for op in SUPPORTED_OPERATIONS[ResourceType(resource_type)]
            if self.authorize(principal, host, op, resource_type, name)
        )

    def authorize_by_resource_type(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Whether some resource of the type may be acted on (Kafka's ``Authorizer.authorizeByResourceType``:
        an idempotent producer without IDEMPOTENT_WRITE on the cluster may still write some topic)."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow_literal: set[str] = set()
        allow_prefixed: set[str] = set()
        for acl in self.acls(
            AclFilter(resource_type, None, PatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)
        ):
            if acl.host not in (host, WILDCARD) or acl.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if acl.operation not in (operation, AclOperation.ALL):
                continue
            literal = acl.pattern_type == PatternType.LITERAL
            if acl.permission == AclPermissionType.DENY:
                if literal and acl.resource_name == WILDCARD:
                    return False
                (deny_literal if literal else deny_prefixed).add(acl.resource_name)
            elif acl.permission == AclPermissionType.ALLOW:
                if literal and acl.resource_name == WILDCARD:
                    return True
                (allow_literal if literal else allow_prefixed).add(acl.resource_name)
        for name in allow_literal:
            if name not in deny_literal and not _dominated(name, deny_prefixed):
                return True
        return any(not _dominated(name, deny_prefixed) for name in allow_prefixed)

    # -- DescribeAcls, CreateAcls, DeleteAcls -------------------------------------------------------------
    def acls(self, acl_filter: AclFilter) -> list[Acl]:
        return sorted({acl for _, acl in self.store.items() if acl_filter.matches(acl)})

    def create(self, acls: list[Acl]) -> list[ApiError | None]:
        """Kafka's controller: each ACL checked on its own; the valid ones stored together (an ACL that exists
        already is not stored twice). One result per ACL, None where created."""
        results: list[ApiError | None] = []
        with self._lock:
            existing = {acl for _, acl in self.store.items()}
            new: list[Acl] = []
            for acl in acls:
                problem = _invalid(acl)
                if problem is not None:
                    results.append(ApiError(errors.INVALID_REQUEST, problem))
                    continue
                if acl not in existing:
                    existing.add(acl)
                    new.append(acl)
                results.append(None)
            if new:
                self.store.change(new, set())
                self._index = _Index([acl for _, acl in self.store.items()])
                for acl in new:
                    log.info("ACL created: %s", describe_acl(acl))
        return results

    def delete(self, filters: list[AclFilter]) -> list[tuple[ApiError | None, list[Acl]]]:
        """Each filter's matching ACLs, all removed together; an UNKNOWN value in a filter is its error."""
        results: list[tuple[ApiError | None, list[Acl]]] = []
        with self._lock:
            items = self.store.items()
            remove: set[str] = set()
            for acl_filter in filters:
                unknown = acl_filter.unknown_part()
                if unknown is not None:
                    results.append((ApiError(errors.INVALID_REQUEST, f"Unknown {unknown}."), []))
                    continue
                matched = [(k, acl) for k, acl in items if acl_filter.matches(acl)]
                remove.update(k for k, _ in matched)
                results.append((None, [acl for _, acl in matched]))
            if remove:
                gone = [acl for k, acl in items if k in remove]
                self.store.change([], remove)
                self._index = _Index([acl for _, acl in self.store.items()])
                for acl in gone:
                    log.info("ACL deleted: %s", describe_acl(acl))
        return results


def _result(acl: Acl, operation: int, principal: str, host: str) -> int | None:
    """ALLOW or DENY when ``acl`` matches the principal, host and operation; None when it does not."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != AclOperation.ALL:
        if acl.permission == AclPermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if acl.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif acl.operation != operation:
                return None
        elif acl.operation != operation:
            return None
    return AclPermissionType.ALLOW if acl.permission == AclPermissionType.ALLOW else AclPermissionType.DENY


def _dominated(name: str, deny_prefixed: set[str]) -> bool:
    return any(name[:end] in deny_prefixed for end in range(1, len(name) + 1))


def _invalid(acl: Acl) -> str | None:
    """Why Kafka refuses to create ``acl`` (the broker's checks, then the controller's), or None."""
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if acl.resource_name == "":
        return "Invalid empty resource name"
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {_name(ResourceType, acl.resource_type)}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {_name(PatternType, acl.pattern_type)}"
    if acl.operation not in _VALID_OPERATIONS:
        return f"Invalid operation {_name(AclOperation, acl.operation)}"
    if acl.permission not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return f"Invalid permissionType {_name(AclPermissionType, acl.permission)}"
    return None


def _name(enum, code: int) -> str:
    try:
        return enum(code).name
    except ValueError:
        return "UNKNOWN"
