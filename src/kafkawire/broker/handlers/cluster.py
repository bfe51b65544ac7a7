"""DescribeCluster, DescribeLogDirs, and the replica-placement APIs a single node answers trivially
(ElectLeaders, ListPartitionReassignments, AlterPartitionReassignments)."""

from __future__ import annotations

import os
import shutil

from kafkawire.protocol import errors
from kafkawire.protocol.messages import DescribeClusterResponse, DescribeLogDirsResponse
from kafkawire.security.authorizer import rules as acl

from ..dispatch import handles
from ._common import INT32_MIN

BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT = 1, 2


@handles("DescribeCluster", 0, 2)
def describe_cluster(broker, ctx, body):
    """As Kafka 4.4's broker listener answers: a request for the controllers' endpoint (KIP-919) gets
    MISMATCHED_ENDPOINT_TYPE, an unknown endpoint type UNSUPPORTED_ENDPOINT_TYPE; both with an empty
    cluster id and the endpoint type this listener is (brokers)."""
    R = DescribeClusterResponse
    if ctx.api_version >= 1 and body.endpoint_type != BROKERS_ENDPOINT:
        if body.endpoint_type == CONTROLLERS_ENDPOINT:
            code, message = (
                errors.MISMATCHED_ENDPOINT_TYPE,
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
            )
        else:
            code, message = errors.UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {body.endpoint_type}"
        return R(
            throttle_time_ms=0,
            error_code=code,
            error_message=message,
            endpoint_type=BROKERS_ENDPOINT,
            cluster_id="",
            controller_id=-1,
            brokers=[],
        )
    host, port = broker.advertised_for(ctx.connection)
    return R(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=BROKERS_ENDPOINT,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=[
            R.DescribeClusterBroker(
                broker_id=broker.node_id, host=host, port=port, rack=broker.config.rack, is_fenced=False
            )
        ],
        cluster_authorized_operations=acl.operations(broker, ctx, acl.CLUSTER)
        if body.include_cluster_authorized_operations
        else INT32_MIN,
    )


@handles("DescribeLogDirs", 0, 5)
def describe_log_dirs(broker, ctx, body):
    R = DescribeLogDirsResponse
    log_dir = os.path.abspath(broker.config.data_dir)
    failure = getattr(broker.storage, "log_dir_failure", lambda: None)()
    if failure is not None:  # as Kafka reports an offline log dir: the error and nothing else
        return R(
            throttle_time_ms=0,
            error_code=0,
            results=[
                R.DescribeLogDirsResult(
                    error_code=errors.KAFKA_STORAGE_ERROR, log_dir=log_dir, topics=[], total_bytes=-1, usable_bytes=-1
                )
            ],
        )
    wanted = None
    if body.topics is not None:
        wanted = {}
        for t in body.topics:
            wanted.setdefault(t.topic, set()).update(t.partitions)
    by_topic: dict[str, list] = {}
    for info in broker.storage.partitions_info():
        if wanted is not None and (info.topic not in wanted or info.partition not in wanted[info.topic]):
            continue
        by_topic.setdefault(info.topic, []).append(
            R.DescribeLogDirsPartition(
                partition_index=info.partition, partition_size=info.size_bytes, offset_lag=0, is_future_key=False
            )
        )
    total = usable = -1
    try:
        usage = shutil.disk_usage(log_dir if os.path.exists(log_dir) else ".")
        total, usable = usage.total, usage.free
    except OSError:
        pass
    result = R.DescribeLogDirsResult(
        error_code=0,
        log_dir=log_dir,
        topics=[R.DescribeLogDirsTopic(name=n, partitions=ps) for n, ps in sorted(by_topic.items())],
        total_bytes=total,
        usable_bytes=usable,
    )
    return R(throttle_time_ms=0, error_code=0, results=[result])


@handles("ElectLeaders", 0, 2)
def elect_leaders(broker, ctx, body):
    """The single node is every partition's preferred and only leader: nothing to elect."""
    from kafkawire.protocol.messages import ElectLeadersResponse as R

    results = []
    if ctx.api_version >= 1 and body.election_type not in (0, 1):  # preferred, unclean
        # as Kafka 4.4: the request fails and every partition it names is answered INVALID_REQUEST
        why = f"Election type {body.election_type} is neither preferred (0) nor unclean (1)."
        return R(
            throttle_time_ms=0,
            error_code=errors.INVALID_REQUEST,
            replica_election_results=[
                R.ReplicaElectionResult(
                    topic=t.topic,
                    partition_result=[
                        R.PartitionResult(partition_id=p, error_code=errors.INVALID_REQUEST, error_message=why)
                        for p in t.partitions
                    ],
                )
                for t in body.topic_partitions or []
            ],
        )
    if body.topic_partitions is not None:  # null means every partition; those needing nothing are omitted
        topics = broker.storage.topics()
        for t in body.topic_partitions:
            meta = topics.get(t.topic)
            parts = []
            for p in t.partitions:
                if meta is None or not 0 <= p < meta.partitions:
                    parts.append(
                        R.PartitionResult(
                            partition_id=p,
                            error_code=errors.UNKNOWN_TOPIC_OR_PARTITION,
                            error_message="The partition does not exist.",
                        )
                    )
                else:
                    parts.append(
                        R.PartitionResult(
                            partition_id=p,
                            error_code=errors.ELECTION_NOT_NEEDED,
                            error_message="Leader election not needed for topic partition.",
                        )
                    )
            results.append(R.ReplicaElectionResult(topic=t.topic, partition_result=parts))
    return R(throttle_time_ms=0, error_code=0, replica_election_results=results)


@handles("ListPartitionReassignments", 0, 0)
def list_partition_reassignments(broker, ctx, body):
    from kafkawire.protocol.messages import ListPartitionReassignmentsResponse as R

    return R(throttle_time_ms=0, error_code=0, error_message=None, topics=[])


@handles("AlterPartitionReassignments", 0, 1)
def alter_partition_reassignments(broker, ctx, body):
    """Moving replicas needs other nodes: only the no-op assignment [this node] is accepted."""
    from kafkawire.protocol.messages import AlterPartitionReassignmentsResponse as R

    topics = broker.storage.topics()
    responses = []
    for t in body.topics:
        meta = topics.get(t.name)
        parts = []
        for p in t.partitions:
            if meta is None or not 0 <= p.partition_index < meta.partitions:
                code, msg = errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
            elif p.replicas is None:
                code, msg = errors.NO_REASSIGNMENT_IN_PROGRESS, None  # no message, as Kafka's controller
            elif list(p.replicas) != [broker.node_id]:
                code, msg = (
                    errors.INVALID_REPLICA_ASSIGNMENT,
                    f"The proposed assignment {list(p.replicas)} contains brokers that are not registered; only "
                    f"broker {broker.node_id} exists.",
                )
            else:
                code, msg = 0, None
            parts.append(
                R.ReassignablePartitionResponse(partition_index=p.partition_index, error_code=code, error_message=msg)
            )
        responses.append(R.ReassignableTopicResponse(name=t.name, partitions=parts))
    return R(
        throttle_time_ms=0,
        allow_replication_factor_change=body.allow_replication_factor_change if ctx.api_version >= 1 else True,
        error_code=0,
        error_message=None,
        responses=responses,
    )


_QUOTA_ENTITY_TYPES = ("user", "client-id", "ip")
_MATCH_EXACT, _MATCH_DEFAULT, _MATCH_SPECIFIED = 0, 1, 2


def _quota_filter_error(components) -> tuple[int, str] | None:
    """Kafka 4.4's checks of a DescribeClientQuotas filter, in its order: per component, an empty entity
    type, a type named twice, an unknown type (UNSUPPORTED_VERSION), then the match type and whether a
    match string goes with it; after all components, ip together with user or client-id."""
    seen: set[str] = set()
    for c in components:
        kind = c.entity_type
        if not kind:
            return errors.INVALID_REQUEST, "The filter names an empty entity type."
        if kind in seen:
            return errors.INVALID_REQUEST, f"The filter names entity type {kind} more than once."
        if kind not in _QUOTA_ENTITY_TYPES:
            return errors.UNSUPPORTED_VERSION, f"Entity type {kind} is not supported."
        if c.match_type == _MATCH_EXACT:
            if c.match is None:
                return errors.INVALID_REQUEST, f"An exact match of {kind} needs a match string, not null."
        elif c.match_type in (_MATCH_DEFAULT, _MATCH_SPECIFIED):
            if c.match is not None:
                what = "the default" if c.match_type == _MATCH_DEFAULT else "every specified"
                return errors.INVALID_REQUEST, f"A match of {what} {kind} takes no match string."
        else:
            return errors.INVALID_REQUEST, f"Match type {c.match_type} is not known."
        seen.add(kind)
    if "ip" in seen and seen & {"user", "client-id"}:
        return errors.INVALID_REQUEST, "An ip filter cannot be combined with user or client-id filters."
    return None


@handles("DescribeClientQuotas", 0, 1)
def describe_client_quotas(broker, ctx, body):
    """kafkawire enforces no client quotas, so none are configured: a valid filter matches nothing
    (error message "", as Kafka 4.4 answers). An invalid filter gets Kafka's code and no entries (null)."""
    from kafkawire.protocol.messages import DescribeClientQuotasResponse as R

    refused = _quota_filter_error(body.components)
    if refused is not None:
        return R(throttle_time_ms=0, error_code=refused[0], error_message=refused[1], entries=None)
    return R(throttle_time_ms=0, error_code=0, error_message="", entries=[])
