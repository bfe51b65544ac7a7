"""Metadata: the single node leads every partition; topics are auto-created when enabled.

Kafka 4.4's rules for a request that names topics (checked against the reference Kafka, see
``tests/broker/test_metadata_topic_ids.py``):

- v10/v11 carry a topic id field but do not serve it: a topic with a non-zero id or a null name
  fails the whole request with INVALID_REQUEST (every requested topic echoed with that code, no
  brokers, no cluster id, controller -1).
- v12+: as soon as one non-zero topic id is present, names are ignored and topics are resolved by
  id only; an id no topic has gets UNKNOWN_TOPIC_ID with a null name. Without ids, a null name
  fails the whole request with UNKNOWN_SERVER_ERROR (what Kafka 4.4 answers; kept for fidelity).
- Requested topics are a set: a repeated name or id is answered once. Kafka lists unknown ids
  first, then the topics it found, then the names it could not serve.
"""

from __future__ import annotations

from kafkawire.protocol import errors
from kafkawire.protocol.messages import MetadataResponse
from kafkawire.security.authorizer import rules as acl

from ..dispatch import handles
from ..storage import base as sb
from ._common import (
    CLUSTER_OPERATIONS,
    INT32_MIN,
    TOPIC_OPERATIONS,
    ZERO_UUID,
    create_topic,
    find_topic,
    log,
    storage_error_code,
    topic_name_problem,
)

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition
Broker = MetadataResponse.MetadataResponseBroker


def topic_metadata(broker, meta, with_ops: bool) -> Topic:
    node = broker.node_id
    partitions = [
        Partition(
            error_code=0,
            partition_index=p,
            leader_id=node,
            leader_epoch=broker.leader_epochs.current(meta.name, p),
            replica_nodes=[node],
            isr_nodes=[node],
            offline_replicas=[],
        )
        for p in range(meta.partitions)
    ]
    return Topic(
        error_code=0,
        name=meta.name,
        topic_id=meta.topic_id,
        is_internal=meta.name in INTERNAL_TOPICS,
        partitions=partitions,
        topic_authorized_operations=TOPIC_OPERATIONS if with_ops else INT32_MIN,
    )


def request_error(requested, code: int) -> MetadataResponse:
    """The whole request failed: each requested topic echoed with ``code`` (Kafka's error response; a null
    name comes back as "" at every version)."""
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[],
        cluster_id=None,
        controller_id=-1,
        topics=[
            Topic(error_code=code, name=t.name if t.name is not None else "", topic_id=t.topic_id, partitions=[])
            for t in requested
        ],
        cluster_authorized_operations=INT32_MIN,
        error_code=code,
    )


def _by_id(broker, requested, with_ops: bool) -> list:
    """v12+ with at least one non-zero id: topics resolved by id only (names ignored)."""
    unknown, found, seen = [], [], set()
    for t in requested:
        tid = t.topic_id
        if tid == ZERO_UUID or tid in seen:
            continue
        seen.add(tid)
        meta = find_topic(broker, topic_id=tid)
        if meta is None:
            unknown.append(Topic(error_code=errors.UNKNOWN_TOPIC_ID, name=None, topic_id=tid, partitions=[]))
        else:
            found.append(topic_metadata(broker, meta, with_ops))
    return unknown + found


def _by_name(broker, version: int, body, requested, with_ops: bool) -> list:
    may_create = broker.config.auto_create_topics and (version < 4 or body.allow_auto_topic_creation)
    found, failed, seen = [], [], set()
    for t in requested:
        name = t.name
        if name in seen:
            continue
        seen.add(name)
        meta = find_topic(broker, name)
        if meta is None:
            if topic_name_problem(name) is not None:
                failed.append(Topic(error_code=errors.INVALID_TOPIC_EXCEPTION, name=name, partitions=[]))
                continue
            if not may_create or name in INTERNAL_TOPICS:  # the coordinators create their own topics
                failed.append(
                    Topic(error_code=errors.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=ZERO_UUID, partitions=[])
                )
                continue
            try:
                meta = create_topic(broker, name, broker.config.num_partitions)
            except sb.TopicExistsError:
                meta = find_topic(broker, name)
            except Exception as exc:
                log.warning("auto-creating topic %s failed: %s", name, exc)
                failed.append(Topic(error_code=storage_error_code(exc), name=name, partitions=[]))
                continue
        found.append(topic_metadata(broker, meta, with_ops))
    return found + failed


@handles("Metadata", 0, 13)
def metadata(broker, ctx, body):
    version = ctx.api_version
    host, port = broker.advertised_for(ctx.connection)
    with_ops = bool(body.include_topic_authorized_operations) if version >= 8 else False
    requested = body.topics
    denied: list = []  # topics the principal may not describe (or create), with ACLs
    if requested is None or (version == 0 and not requested):
        # internal topics (the coordinators' logs) are listed too, flagged is_internal, as Kafka does;
        # clients leave them out themselves (exclude.internal.topics)
        listed = broker.storage.topics().values()
        if broker.authorizer is not None:  # a listing leaves out what the principal may not describe
            listed = [m for m in listed if acl.allowed(broker, ctx, acl.Op.DESCRIBE, acl.TOPIC, m.name)]
        topics = [topic_metadata(broker, m, with_ops) for m in listed]
    elif version >= 10 and version < 12 and any(t.name is None or t.topic_id != ZERO_UUID for t in requested):
        return request_error(requested, errors.INVALID_REQUEST)
    elif version >= 12 and any(t.topic_id != ZERO_UUID for t in requested):
        topics = _by_id(broker, requested, with_ops)
        if broker.authorizer is not None:
            denied = [t for t in topics if t.name is not None and not acl.may_describe_topic(broker, ctx, t.name)]
            topics = [t for t in topics if t not in denied]
            denied = [
                Topic(error_code=errors.TOPIC_AUTHORIZATION_FAILED, name=None, topic_id=t.topic_id) for t in denied
            ]
    elif any(t.name is None for t in requested):
        return request_error(requested, errors.UNKNOWN_SERVER_ERROR)
    else:
        if broker.authorizer is not None:
            may_create = broker.config.auto_create_topics and (version < 4 or body.allow_auto_topic_creation)
            requested, denied = acl.metadata_topics(broker, ctx, requested, may_create, INTERNAL_TOPICS)
        topics = _by_name(broker, version, body, requested, with_ops)
    cluster_ops = INT32_MIN
    if 8 <= version <= 10 and body.include_cluster_authorized_operations:
        cluster_ops = CLUSTER_OPERATIONS
    if broker.authorizer is not None:
        if with_ops:  # Kafka's authorized operations of each topic it answers for
            for t in topics:
                t.topic_authorized_operations = acl.operations(broker, ctx, acl.TOPIC, t.name)
        if cluster_ops != INT32_MIN:
            cluster_ops = acl.operations(broker, ctx, acl.CLUSTER) if acl.allowed(broker, ctx, acl.Op.DESCRIBE) else 0
        topics = topics + denied
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[Broker(node_id=broker.node_id, host=host, port=port, rack=broker.config.rack)],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
        cluster_authorized_operations=cluster_ops,
        error_code=0,
    )
