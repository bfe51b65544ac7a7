"""DescribeAcls, CreateAcls, DeleteAcls: what Kafka answers when no authorizer is configured
(SECURITY_DISABLED, "No Authorizer is configured."), so admin tools get Kafka's answer instead of a
dropped connection."""
from __future__ import annotations

from kafkawire.protocol import errors
from kafkawire.protocol.messages import CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse

from ..dispatch import handles

NO_AUTHORIZER = "No Authorizer is configured."


@handles("DescribeAcls", 0, 3)
def describe_acls(broker, ctx, body):
    return DescribeAclsResponse(throttle_time_ms=0, error_code=errors.SECURITY_DISABLED, error_message=NO_AUTHORIZER,
                                resources=[])


@handles("CreateAcls", 0, 3)
def create_acls(broker, ctx, body):
    R = CreateAclsResponse
    return R(throttle_time_ms=0, results=[R.AclCreationResult(error_code=errors.SECURITY_DISABLED,
                                                              error_message=NO_AUTHORIZER)
                                          for _ in body.creations])


@handles("DeleteAcls", 0, 3)
def delete_acls(broker, ctx, body):
    R = DeleteAclsResponse
    return R(throttle_time_ms=0, filter_results=[R.DeleteAclsFilterResult(error_code=errors.SECURITY_DISABLED,
                                                                          error_message=NO_AUTHORIZER,
                                                                          matching_acls=[])
                                                 for _ in body.filters])
