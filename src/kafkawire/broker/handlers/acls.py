"""DescribeAcls, CreateAcls, DeleteAcls: what Kafka answers when no authorizer is configured
(SECURITY_DISABLED, "No Authorizer is configured."), so admin tools get Kafka's answer instead of a
dropped connection.

One exception, as Kafka 4.4: a request that names the UNKNOWN value (code 0) of a resource type,
pattern type, operation or permission type (in the DescribeAcls filter, any CreateAcls creation or any
DeleteAcls filter) is not a request Kafka can parse, and Kafka closes the connection without an answer.
kafkawire closes that connection too, and logs why. Other unknown codes (say operation 99) parse, and
get SECURITY_DISABLED like any request."""

from __future__ import annotations

from kafkawire.net.server import CloseConnection
from kafkawire.protocol import errors
from kafkawire.protocol.messages import CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse

from ..dispatch import handles

NO_AUTHORIZER = "No Authorizer is configured."
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


@handles("DescribeAcls", 0, 3)
def describe_acls(broker, ctx, body):
    _refuse_unknown(
        ctx, "DescribeAcls", [body], ("resource_type_filter", "pattern_type_filter", "operation", "permission_type")
    )
    return DescribeAclsResponse(
        throttle_time_ms=0, error_code=errors.SECURITY_DISABLED, error_message=NO_AUTHORIZER, resources=[]
    )


@handles("CreateAcls", 0, 3)
def create_acls(broker, ctx, body):
    _refuse_unknown(
        ctx, "CreateAcls", body.creations, ("resource_type", "resource_pattern_type", "operation", "permission_type")
    )
    R = CreateAclsResponse
    return R(
        throttle_time_ms=0,
        results=[
            R.AclCreationResult(error_code=errors.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
            for _ in body.creations
        ],
    )


@handles("DeleteAcls", 0, 3)
def delete_acls(broker, ctx, body):
    _refuse_unknown(
        ctx, "DeleteAcls", body.filters, ("resource_type_filter", "pattern_type_filter", "operation", "permission_type")
    )
    R = DeleteAclsResponse
    return R(
        throttle_time_ms=0,
        filter_results=[
            R.DeleteAclsFilterResult(error_code=errors.SECURITY_DISABLED, error_message=NO_AUTHORIZER, matching_acls=[])
            for _ in body.filters
        ],
    )
