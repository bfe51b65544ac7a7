"""DescribeAcls, CreateAcls, DeleteAcls, as Kafka 4.4 answers them.

With ``authorizer.class.name`` set to Kafka's StandardAuthorizer, the ACLs are kafkawire's
(``kafkawire.security.authorizer``): DescribeAcls answers the ACLs a filter matches, grouped by resource
pattern; CreateAcls checks each creation on its own (INVALID_REQUEST with Kafka's message for a CLUSTER
resource not named kafka-cluster, an empty name, an UNKNOWN or ANY type, pattern type other than LITERAL or
PREFIXED, operation or permission) and stores the valid ones together; DeleteAcls answers each filter with
the ACLs it matched, all removed together. The cluster checks (DESCRIBE for DescribeAcls, ALTER for the
others) are in the authorizer's table, applied before these handlers run. Stores and removals run in the
controller thread (the ACL file is fsynced before the answer).

Without an authorizer Kafka answers SECURITY_DISABLED ("No Authorizer is configured."), and so does kafkawire,
so admin tools get Kafka's answer instead of a dropped connection.

One exception, as Kafka 4.4: a request that names the UNKNOWN value (code 0) of a resource type, pattern type,
operation or permission type (in the DescribeAcls filter, any CreateAcls creation or any DeleteAcls filter) is
not a request Kafka can parse, and Kafka closes the connection without an answer. kafkawire closes that
connection too, and logs why. Other unknown codes (say operation 99) parse, are read as UNKNOWN (Kafka's
``fromCode``), and get the answer of an UNKNOWN value: SECURITY_DISABLED without an authorizer, an error per
creation or filter with one."""

from __future__ import annotations

import logging
from itertools import groupby

from kafkawire.net.server import CloseConnection
from kafkawire.protocol import errors
from kafkawire.protocol.messages import CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse
from kafkawire.security.authorizer.model import (
    Acl,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    known,
)

from ..dispatch import handles

NO_AUTHORIZER = "No Authorizer is configured."
log = logging.getLogger("kafkawire.authorizer")
UNKNOWN = 0  # the UNKNOWN value of ResourceType, PatternType, AclOperation and AclPermissionType


def _refuse_unknown(ctx, api: str, entries, fields: tuple[str, ...]) -> None:
    for entry in entries:
        named = [f for f in fields if getattr(entry, f) == UNKNOWN]
        if named:
            raise CloseConnection(
                f"{api} v{ctx.api_version} (correlation id {ctx.correlation_id}) names UNKNOWN "
                f"for {', '.join(named)}; closing the connection, as Kafka does for a request "
                f"it cannot parse"
            )


def _filter(entry, type_field: str, name_field: str, pattern_field: str, principal_field: str, host_field: str):
    return AclFilter(
        known(ResourceType, getattr(entry, type_field)),
        getattr(entry, name_field),
        known(PatternType, getattr(entry, pattern_field)),
        getattr(entry, principal_field),
        getattr(entry, host_field),
        known(AclOperation, entry.operation),
        known(AclPermissionType, entry.permission_type),
    )


def _names_any(creation) -> bool:
    return (
        creation.resource_type == ResourceType.ANY
        or creation.resource_pattern_type in (PatternType.ANY, PatternType.MATCH)
        or creation.operation == AclOperation.ANY
        or creation.permission_type == AclPermissionType.ANY
    )


@handles("DescribeAcls", 0, 3)
def describe_acls(broker, ctx, body):
    _refuse_unknown(
        ctx, "DescribeAcls", [body], ("resource_type_filter", "pattern_type_filter", "operation", "permission_type")
    )
    R = DescribeAclsResponse
    if broker.authorizer is None:
        return R(throttle_time_ms=0, error_code=errors.SECURITY_DISABLED, error_message=NO_AUTHORIZER, resources=[])
    acl_filter = _filter(
        body, "resource_type_filter", "resource_name_filter", "pattern_type_filter", "principal_filter", "host_filter"
    )
    resources = []
    for (rtype, name, ptype), group in groupby(
        broker.authorizer.acls(acl_filter), key=lambda a: (a.resource_type, a.resource_name, a.pattern_type)
    ):
        resources.append(
            R.DescribeAclsResource(
                resource_type=rtype,
                resource_name=name,
                pattern_type=ptype,
                acls=[
                    R.AclDescription(
                        principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission
                    )
                    for a in group
                ],
            )
        )
    return R(throttle_time_ms=0, error_code=errors.NONE, error_message="", resources=resources)


@handles("CreateAcls", 0, 3)
async def create_acls(broker, ctx, body):
    _refuse_unknown(
        ctx, "CreateAcls", body.creations, ("resource_type", "resource_pattern_type", "operation", "permission_type")
    )
    R = CreateAclsResponse
    if broker.authorizer is None:
        return R(
            throttle_time_ms=0,
            results=[
                R.AclCreationResult(error_code=errors.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
                for _ in body.creations
            ],
        )
    unreadable = [c for c in body.creations if _names_any(c)]
    if unreadable:
        # Kafka cannot make an ACL binding of an ANY (or MATCH) value: the request fails as a whole
        log.warning(
            "CreateAcls v%d (correlation id %d): a creation names ANY or MATCH (%d of %d); answering "
            "UNKNOWN_SERVER_ERROR for all, as Kafka does",
            ctx.api_version,
            ctx.correlation_id,
            len(unreadable),
            len(body.creations),
        )
        return R(
            throttle_time_ms=0,
            results=[
                R.AclCreationResult(error_code=errors.UNKNOWN_SERVER_ERROR, error_message=None) for _ in body.creations
            ],
        )
    acls = [
        Acl(
            known(ResourceType, c.resource_type),
            c.resource_name,
            known(PatternType, c.resource_pattern_type),
            c.principal,
            c.host,
            known(AclOperation, c.operation),
            known(AclPermissionType, c.permission_type),
        )
        for c in body.creations
    ]
    outcomes = await broker.controller_call(broker.authorizer.create, acls)
    return R(
        throttle_time_ms=0,
        results=[
            R.AclCreationResult(error_code=errors.NONE, error_message="")
            if err is None
            else R.AclCreationResult(error_code=err.code, error_message=err.message)
            for err in outcomes
        ],
    )


@handles("DeleteAcls", 0, 3)
async def delete_acls(broker, ctx, body):
    _refuse_unknown(
        ctx, "DeleteAcls", body.filters, ("resource_type_filter", "pattern_type_filter", "operation", "permission_type")
    )
    R = DeleteAclsResponse
    if broker.authorizer is None:
        return R(
            throttle_time_ms=0,
            filter_results=[
                R.DeleteAclsFilterResult(
                    error_code=errors.SECURITY_DISABLED, error_message=NO_AUTHORIZER, matching_acls=[]
                )
                for _ in body.filters
            ],
        )
    filters = [
        _filter(
            f, "resource_type_filter", "resource_name_filter", "pattern_type_filter", "principal_filter", "host_filter"
        )
        for f in body.filters
    ]
    outcomes = await broker.controller_call(broker.authorizer.delete, filters)
    results = []
    for err, matched in outcomes:
        if err is not None:
            results.append(R.DeleteAclsFilterResult(error_code=err.code, error_message=err.message, matching_acls=[]))
            continue
        results.append(
            R.DeleteAclsFilterResult(
                error_code=errors.NONE,
                error_message=None,
                matching_acls=[
                    R.DeleteAclsMatchingAcl(
                        error_code=errors.NONE,
                        error_message=None,
                        resource_type=a.resource_type,
                        resource_name=a.resource_name,
                        pattern_type=a.pattern_type,
                        principal=a.principal,
                        host=a.host,
                        operation=a.operation,
                        permission_type=a.permission,
                    )
                    for a in matched
                ],
            )
        )
    return R(throttle_time_ms=0, filter_results=results)
