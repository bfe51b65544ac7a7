"""ApiVersions: what this broker implements, each API at every version it handles."""

from __future__ import annotations

import re

from kafkawire.protocol import encode_response_parts, errors
from kafkawire.protocol.messages import ApiVersionsResponse

from .. import features
from ..dispatch import advertised_versions, handles

# Kafka's check of ClientSoftwareName / ClientSoftwareVersion (ApiVersionsRequest.isValid)
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def _api_keys(broker):
    cls = ApiVersionsResponse.ApiVersion
    return [cls(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in advertised_versions(broker.handlers)]


def _target_error(broker, body) -> int:
    """v5 (KIP-1242): a client names the cluster and node it means to reach, both or neither (else
    INVALID_REQUEST); naming another cluster or node than this one gets REBOOTSTRAP_REQUIRED, and the
    client goes back to its bootstrap servers. The connection stays open either way, as with Kafka."""
    named_cluster, named_node = body.cluster_id is not None, body.node_id != -1
    if named_cluster != named_node:
        return errors.INVALID_REQUEST
    if named_cluster and (body.cluster_id != broker.cluster_id or body.node_id != broker.node_id):
        return errors.REBOOTSTRAP_REQUIRED
    return 0


@handles("ApiVersions", 0, 5)
def api_versions(broker, ctx, body):
    if ctx.api_version >= 3 and not (
        _SOFTWARE.fullmatch(body.client_software_name or "") and _SOFTWARE.fullmatch(body.client_software_version or "")
    ):
        return ApiVersionsResponse(error_code=errors.INVALID_REQUEST, api_keys=[])
    if ctx.api_version >= 5:
        error = _target_error(broker, body)
        if error:
            return ApiVersionsResponse(error_code=error, api_keys=[])
    if ctx.connection is not None and ctx.api_version >= 3:
        ctx.connection.attributes["client_software"] = (body.client_software_name, body.client_software_version)
    return ApiVersionsResponse(
        error_code=0,
        api_keys=_api_keys(broker),
        throttle_time_ms=0,
        **features.api_versions_fields(ctx.api_version, ApiVersionsResponse),
    )


def unsupported_version_response(broker, correlation_id: int) -> list:
    """UNSUPPORTED_VERSION in a v0 body (header v0), as Kafka answers a request at an ApiVersions version it
    does not know. Like Kafka 4.4's, the body lists one range only, ApiVersions' own (KIP-511): all a client
    reads from it is the highest ApiVersions version to retry at (librdkafka, kafka-python and the Java client
    do so on the same connection), and the full list follows in the answer to that retry."""
    own = [k for k in _api_keys(broker) if k.api_key == ApiVersionsResponse.api_key]
    body = ApiVersionsResponse(error_code=errors.UNSUPPORTED_VERSION, api_keys=own)
    return encode_response_parts(correlation_id, body, 0)
