"""Metadata: the single node leads every partition; topics are auto-created when enabled."""
from __future__ import annotations

from kafkawire.protocol import errors
from kafkawire.protocol.messages import MetadataResponse

from ..dispatch import handles
from ..storage import base as sb
from ._common import (CLUSTER_OPERATIONS, INT32_MIN, TOPIC_OPERATIONS, ZERO_UUID, create_topic, find_topic,
                      log, storage_error_code, topic_name_problem)

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition
Broker = MetadataResponse.MetadataResponseBroker


def topic_metadata(broker, meta, with_ops: bool) -> Topic:
    node = broker.node_id
    partitions = [Partition(error_code=0, partition_index=p, leader_id=node, leader_epoch=broker.leader_epoch,
                            replica_nodes=[node], isr_nodes=[node], offline_replicas=[])
                  for p in range(meta.partitions)]
    return Topic(error_code=0, name=meta.name, topic_id=meta.topic_id, is_internal=meta.name in INTERNAL_TOPICS,
                 partitions=partitions, topic_authorized_operations=TOPIC_OPERATIONS if with_ops else INT32_MIN)


@handles("Metadata", 0, 13)
def metadata(broker, ctx, body):
    version = ctx.api_version
    host, port = broker.advertised
    with_ops = bool(body.include_topic_authorized_operations) if version >= 8 else False
    requested = body.topics
    if requested is None or (version == 0 and not requested):
        # internal topics (the coordinators' logs) are listed too, flagged is_internal, as Kafka does;
        # clients leave them out themselves (exclude.internal.topics)
        topics = [topic_metadata(broker, m, with_ops) for m in broker.storage.topics().values()]
    else:
        may_create = broker.config.auto_create_topics and (version < 4 or body.allow_auto_topic_creation)
        topics = []
        seen = set()
        for t in requested:
            name = t.name
            if name is None:
                meta = find_topic(broker, topic_id=t.topic_id)
                if meta is None:
                    topics.append(Topic(error_code=errors.UNKNOWN_TOPIC_ID, name=None, topic_id=t.topic_id,
                                        partitions=[]))
                    continue
                topics.append(topic_metadata(broker, meta, with_ops))
                continue
            if name in seen:
                continue
            seen.add(name)
            meta = find_topic(broker, name)
            if meta is None:
                problem = topic_name_problem(name)
                if problem is not None:
                    topics.append(Topic(error_code=errors.INVALID_TOPIC_EXCEPTION, name=name, partitions=[]))
                    continue
                if may_create and name not in INTERNAL_TOPICS:  # the coordinators create their own topics
                    try:
                        meta = create_topic(broker, name, broker.config.num_partitions)
                    except sb.TopicExistsError:
                        meta = find_topic(broker, name)
                    except Exception as exc:
                        log.warning("auto-creating topic %s failed: %s", name, exc)
                        topics.append(Topic(error_code=storage_error_code(exc), name=name, partitions=[]))
                        continue
                else:
                    topics.append(Topic(error_code=errors.UNKNOWN_TOPIC_OR_PARTITION, name=name,
                                        topic_id=ZERO_UUID, partitions=[]))
                    continue
            topics.append(topic_metadata(broker, meta, with_ops))
    cluster_ops = INT32_MIN
    if 8 <= version <= 10 and body.include_cluster_authorized_operations:
        cluster_ops = CLUSTER_OPERATIONS
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[Broker(node_id=broker.node_id, host=host, port=port, rack=broker.config.rack)],
        cluster_id=broker.cluster_id, controller_id=broker.node_id, topics=topics,
        cluster_authorized_operations=cluster_ops, error_code=0)
