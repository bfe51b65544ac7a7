"""ListConfigResources (KIP-1142; v0 was ListClientMetricsResources): the resources whose configs
DescribeConfigs can show, filtered by resource type, as Kafka 4.4 lists them.

- TOPIC: every topic (internal ones too); BROKER and BROKER_LOGGER: this node's id;
- GROUP: the groups that have dynamic group configs; kafkawire keeps none, so none are listed;
- CLIENT_METRICS: client-metrics subscriptions; kafkawire has none (no client telemetry, KIP-714).

An empty filter means every type. A type outside these five fails the request with
UNSUPPORTED_VERSION, Kafka's answer. v0 has no filter and lists the client-metrics resources only.
"""

from __future__ import annotations

from kafkawire.protocol import errors
from kafkawire.protocol.messages import ListConfigResourcesResponse as R

from ..dispatch import handles

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED = {TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP}


@handles("ListConfigResources", 0, 1)
def list_config_resources(broker, ctx, body):
    wanted = set(body.resource_types) if ctx.api_version >= 1 else {CLIENT_METRICS}
    if wanted - SUPPORTED:
        return R(throttle_time_ms=0, error_code=errors.UNSUPPORTED_VERSION, config_resources=[])
    wanted = wanted or SUPPORTED
    found: list[tuple[str, int]] = []
    # in Kafka's order: groups, client metrics, broker loggers, brokers, topics
    if BROKER_LOGGER in wanted:
        found.append((str(broker.node_id), BROKER_LOGGER))
    if BROKER in wanted:
        found.append((str(broker.node_id), BROKER))
    if TOPIC in wanted:
        found.extend((name, TOPIC) for name in broker.storage.topics())
    return R(
        throttle_time_ms=0,
        error_code=0,
        config_resources=[R.ConfigResource(resource_name=n, resource_type=t) for n, t in found],
    )
