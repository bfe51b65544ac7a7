"""ACLs with the semantics of Kafka's StandardAuthorizer: the model (``model``), the matching and the
Create/Describe/DeleteAcls logic (``standard``), the persistence (``store``) and the table of what each API
checks (``rules``)."""

from .model import Acl, AclFilter, AclOperation, AclPermissionType, PatternType, ResourceType
from .standard import StandardAuthorizer
from .store import AclStore

__all__ = [
    "Acl",
    "AclFilter",
    "AclOperation",
    "AclPermissionType",
    "AclStore",
    "PatternType",
    "ResourceType",
    "StandardAuthorizer",
]
