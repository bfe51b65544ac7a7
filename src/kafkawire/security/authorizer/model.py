"""The ACL model of Kafka's ``org.apache.kafka.common.acl`` and ``resource`` packages: the codes the wire
carries for resource types, pattern types, operations and permissions, one ACL (a resource pattern and an
access-control entry), and the filters of DescribeAcls and DeleteAcls with Kafka's matching rules."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


Op = AclOperation
WILDCARD = "*"  # a LITERAL resource name matching every name, and the host matching every host
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource

# The operations an authorized-operations bitfield reports for each resource type (Kafka's
# AclEntry.supportedOperations): bit ``1 << code`` set for each one the principal may do.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        Op.READ,
        Op.WRITE,
        Op.CREATE,
        Op.DESCRIBE,
        Op.DELETE,
        Op.ALTER,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (
        Op.CREATE,
        Op.CLUSTER_ACTION,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
        Op.IDEMPOTENT_WRITE,
        Op.ALTER,
        Op.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}


def all_operations_bitfield(resource_type: ResourceType) -> int:
    """The bitfield with every supported operation set (what a broker without an authorizer reports)."""
    return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type])


@dataclass(frozen=True, order=True)
class Acl:
    """One ACL: who (``principal``, "User:name" or "User:*") from where (``host``, an address or "*") may or
    may not (``permission``) do what (``operation``) on which resources (type, name, LITERAL or PREFIXED)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


def known(enum, code: int) -> int:
    """``code`` when ``enum`` has it, else UNKNOWN (0), as Kafka's ``fromCode`` reads a code it lacks."""
    try:
        return int(enum(code))
    except ValueError:
        return UNKNOWN_CODE


def _code_name(enum, code: int) -> str:
    try:
        return enum(code).name
    except ValueError:
        return str(code)


def describe_acl(acl: Acl) -> str:
    """An ACL as Kafka's log lines show one."""
    return (
        f"(pattern=ResourcePattern(resourceType={_code_name(ResourceType, acl.resource_type)}, "
        f"name={acl.resource_name}, patternType={_code_name(PatternType, acl.pattern_type)}), "
        f"entry=(principal={acl.principal}, host={acl.host}, "
        f"operation={_code_name(AclOperation, acl.operation)}, "
        f"permissionType={_code_name(AclPermissionType, acl.permission)}))"
    )


@dataclass(frozen=True)
class AclFilter:
    """A DescribeAcls or DeleteAcls filter (Kafka's AclBindingFilter). ``None`` for a name, principal or host
    matches any value; ANY for a code matches any code; pattern type MATCH matches the ACLs that would apply
    to the named resource (the literal name, the wildcard, and the prefixes of the name)."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def unknown_part(self) -> str | None:
        """Which half of the filter holds an UNKNOWN code, in Kafka's words; None when neither does."""
        if UNKNOWN_CODE in (self.resource_type, self.pattern_type):
            return "patternFilter"
        if UNKNOWN_CODE in (self.operation, self.permission):
            return "entryFilter"
        return None

    def matches(self, acl: Acl) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: Acl) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != acl.pattern_type:
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, acl.pattern_type):
            return self.resource_name == acl.resource_name
        # MATCH
        if acl.pattern_type == PatternType.LITERAL:
            return self.resource_name == acl.resource_name or acl.resource_name == WILDCARD
        if acl.pattern_type == PatternType.PREFIXED:
            return self.resource_name.startswith(acl.resource_name)
        return False

    def _matches_entry(self, acl: Acl) -> bool:
        return (
            (self.principal is None or self.principal == acl.principal)
            and (self.host is None or self.host == acl.host)
            and (self.operation == AclOperation.ANY or self.operation == acl.operation)
            and (self.permission == AclPermissionType.ANY or self.permission == acl.permission)
        )


UNKNOWN_CODE = 0
