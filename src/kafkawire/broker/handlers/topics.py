"""CreateTopics, DeleteTopics, CreatePartitions, DescribeTopicPartitions."""
from __future__ import annotations

from kafkawire.protocol import errors
from kafkawire.protocol.messages import (CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse,
                                         DescribeTopicPartitionsResponse)

from ..config import TOPIC_CONFIGS, ConfigError, validate_topic_config
from ..dispatch import handles
from ..storage import base as sb
from ._common import (INT32_MIN, TOPIC_OPERATIONS, ZERO_UUID, create_topic, find_topic, log, storage_error_code,
                      topic_name_problem)

MAX_PARTITIONS = 1_000_000
MAX_RESPONSE_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit default
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


class Invalid(Exception):
    def __init__(self, code: int, message: str):
        self.code, self.message = code, message
        super().__init__(message)


def _replication_problem(broker, rf: int) -> str:
    return (f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be "
            f"reached because only 1 broker(s) are registered.")


def _check_assignment(broker, broker_ids) -> None:
    if list(broker_ids) != [broker.node_id]:
        raise Invalid(errors.INVALID_REPLICA_ASSIGNMENT,
                      f"The manual partition assignment includes broker(s) {list(broker_ids)}, but only broker "
                      f"{broker.node_id} exists and each partition has exactly one replica.")


def _topic_config_entries(broker, configs: dict):
    from .configs import topic_config_entry

    R = CreateTopicsResponse
    out = []
    for name in sorted(TOPIC_CONFIGS):
        value, source, _, read_only, sensitive = topic_config_entry(broker, configs, name)
        out.append(R.CreatableTopicConfigs(name=name, value=value, read_only=read_only, config_source=source,
                                           is_sensitive=sensitive))
    return out


def _validate_create(broker, t) -> tuple[int, dict]:
    problem = topic_name_problem(t.name)
    if problem:
        raise Invalid(errors.INVALID_TOPIC_EXCEPTION, problem)
    if find_topic(broker, t.name) is not None:
        raise Invalid(errors.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            raise Invalid(errors.INVALID_REQUEST,
                          "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be "
                          "used at the same time.")
        indexes = sorted(a.partition_index for a in t.assignments)
        if indexes != list(range(len(indexes))):
            raise Invalid(errors.INVALID_REPLICA_ASSIGNMENT,
                          "Partitions should be a consecutive 0-based integer sequence")
        for a in t.assignments:
            _check_assignment(broker, a.broker_ids)
        partitions = len(indexes)
    else:
        partitions = broker.config.num_partitions if t.num_partitions == -1 else t.num_partitions
        rf = broker.config.default_replication_factor if t.replication_factor == -1 else t.replication_factor
        if partitions <= 0 or partitions > MAX_PARTITIONS:
            raise Invalid(errors.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if rf <= 0:
            raise Invalid(errors.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
        if rf != 1:
            raise Invalid(errors.INVALID_REPLICATION_FACTOR, _replication_problem(broker, rf))
    configs = {}
    for c in t.configs:
        try:
            validate_topic_config(c.name, c.value)
        except ConfigError as exc:
            raise Invalid(errors.INVALID_CONFIG, str(exc)) from None
        if c.value is not None:
            configs[c.name] = c.value
    return partitions, configs


@handles("CreateTopics", 0, 7)
def create_topics(broker, ctx, body):
    version = ctx.api_version
    R = CreateTopicsResponse
    names = [t.name for t in body.topics]
    dupes = {n for n in names if names.count(n) > 1}
    results = []
    seen = set()
    for t in body.topics:
        res = R.CreatableTopicResult(name=t.name, topic_id=ZERO_UUID, error_code=0, error_message=None,
                                     num_partitions=-1, replication_factor=-1, configs=[] if version >= 5 else None)
        if t.name in dupes:
            if t.name in seen:
                continue
            seen.add(t.name)
            res.error_code = errors.INVALID_REQUEST
            res.error_message = f"Create topics request from client `{ctx.client_id}` contains multiple entries " \
                                f"for the following topics: {t.name}"
            results.append(res)
            continue
        results.append(res)
        try:
            partitions, configs = _validate_create(broker, t)
            if not body.validate_only:
                meta = create_topic(broker, t.name, partitions, configs)
                res.topic_id = meta.topic_id
        except Invalid as exc:
            res.error_code, res.error_message = exc.code, exc.message
        except sb.StorageError as exc:
            res.error_code, res.error_message = storage_error_code(exc), str(exc)
        if res.error_code:
            res.configs = [] if version >= 5 else None
            if version < 1:
                res.error_message = None
            continue
        if version >= 5:
            res.num_partitions = partitions
            res.replication_factor = 1
            res.configs = _topic_config_entries(broker, configs)
    return R(throttle_time_ms=0, topics=results)


def _delete(broker, meta) -> None:
    broker.storage.delete_topic(meta.name)
    broker.producers.forget_topic(meta.name)
    broker.fetch_sessions.forget_topic(meta.name, meta.topic_id)
    broker.waiters.notify_topic(meta.name)
    log.info("deleted topic %s (id %s)", meta.name, meta.topic_id)


@handles("DeleteTopics", 0, 6)
def delete_topics(broker, ctx, body):
    version = ctx.api_version
    R = DeleteTopicsResponse
    wanted = [(n, None) for n in body.topic_names] if version < 6 else [(t.name, t.topic_id) for t in body.topics]
    results = []
    for name, topic_id in wanted:
        res = R.DeletableTopicResult(name=name, topic_id=topic_id or ZERO_UUID, error_code=0, error_message=None)
        results.append(res)
        if name is not None:
            meta = find_topic(broker, name)
            if meta is None:
                res.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
        else:
            meta = find_topic(broker, topic_id=topic_id)
            if meta is None:
                res.error_code = errors.UNKNOWN_TOPIC_ID
                continue
            res.name = meta.name
        res.topic_id = meta.topic_id
        try:
            _delete(broker, meta)
        except sb.StorageError as exc:
            res.error_code, res.error_message = storage_error_code(exc), str(exc)
        if version < 5:
            res.error_message = None
    return R(throttle_time_ms=0, responses=results)


@handles("CreatePartitions", 0, 3)
def create_partitions(broker, ctx, body):
    R = CreatePartitionsResponse
    results = []
    for t in body.topics:
        res = R.CreatePartitionsTopicResult(name=t.name, error_code=0, error_message=None)
        results.append(res)
        meta = find_topic(broker, t.name)
        try:
            if meta is None:
                raise Invalid(errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
            if t.count < meta.partitions:
                raise Invalid(errors.INVALID_PARTITIONS, f"Topic currently has {meta.partitions} partitions, which "
                                                         f"is higher than the requested {t.count}.")
            if t.count == meta.partitions:
                raise Invalid(errors.INVALID_PARTITIONS, f"Topic already has {meta.partitions} partitions.")
            if t.count > MAX_PARTITIONS:
                raise Invalid(errors.INVALID_PARTITIONS, "Too many partitions.")
            if t.assignments is not None:
                if len(t.assignments) != t.count - meta.partitions:
                    raise Invalid(errors.INVALID_REPLICA_ASSIGNMENT,
                                  f"Attempted to add {t.count - meta.partitions} additional partition(s), but only "
                                  f"{len(t.assignments)} assignment(s) were specified.")
                for a in t.assignments:
                    _check_assignment(broker, a.broker_ids)
            if not body.validate_only:
                broker.storage.add_partitions(t.name, t.count)
                log.info("topic %s now has %d partitions", t.name, t.count)
        except Invalid as exc:
            res.error_code, res.error_message = exc.code, exc.message
        except sb.StorageError as exc:
            res.error_code, res.error_message = storage_error_code(exc), str(exc)
    return R(throttle_time_ms=0, results=results)


@handles("DescribeTopicPartitions", 0, 0)
def describe_topic_partitions(broker, ctx, body):
    """Kafka 4.4's answers, checked against the reference: the requested names sorted and answered once;
    at most ``min(ResponsePartitionLimit, 2000)`` partitions (at least one) with NextCursor where the
    answer stops. A cursor with a negative partition or naming a topic outside the request, and an
    empty topic name, fail the whole request (INVALID_REQUEST; the empty name UNKNOWN_SERVER_ERROR, as
    Kafka answers it), every requested topic echoed with the code. A missing topic still carries the
    authorized operations (what an unauthorized client could not see), and a missing internal topic
    is flagged internal."""
    R = DescribeTopicPartitionsResponse
    node = broker.node_id
    all_topics = broker.storage.topics()
    if body.topics:
        names = sorted({t.name for t in body.topics})
    else:
        names = sorted(all_topics)
    cursor = body.cursor

    def request_error(code):
        return R(throttle_time_ms=0, next_cursor=None, topics=[R.DescribeTopicPartitionsResponseTopic(
            error_code=code, name=t.name, topic_id=ZERO_UUID, partitions=[], topic_authorized_operations=INT32_MIN)
            for t in body.topics])

    if body.topics and any(not t.name for t in body.topics):
        return request_error(errors.UNKNOWN_SERVER_ERROR)
    start_partition = 0
    if cursor is not None:
        if cursor.partition_index < 0 or (body.topics and cursor.topic_name not in names):
            return request_error(errors.INVALID_REQUEST)
        names = [n for n in names if n >= cursor.topic_name]
        start_partition = cursor.partition_index
    limit = min(max(body.response_partition_limit, 1), MAX_RESPONSE_PARTITIONS)
    topics, next_cursor = [], None
    budget = limit
    for i, name in enumerate(names):
        meta = all_topics.get(name)
        if meta is None:
            problem = topic_name_problem(name)
            topics.append(R.DescribeTopicPartitionsResponseTopic(
                error_code=errors.INVALID_TOPIC_EXCEPTION if problem else errors.UNKNOWN_TOPIC_OR_PARTITION,
                name=name, topic_id=ZERO_UUID, is_internal=name in INTERNAL_TOPICS, partitions=[],
                topic_authorized_operations=TOPIC_OPERATIONS))
            continue
        first = start_partition if (cursor is not None and name == cursor.topic_name) else 0
        if budget <= 0:
            next_cursor = R.Cursor(topic_name=name, partition_index=first)
            break
        end = min(meta.partitions, first + budget)
        parts = [R.DescribeTopicPartitionsResponsePartition(
            error_code=0, partition_index=p, leader_id=node, leader_epoch=broker.leader_epoch, replica_nodes=[node],
            isr_nodes=[node], eligible_leader_replicas=[], last_known_elr=[], offline_replicas=[])
            for p in range(first, end)]
        budget -= len(parts)
        topics.append(R.DescribeTopicPartitionsResponseTopic(
            error_code=0, name=name, topic_id=meta.topic_id, is_internal=name in INTERNAL_TOPICS, partitions=parts,
            topic_authorized_operations=TOPIC_OPERATIONS))
        if end < meta.partitions:
            next_cursor = R.Cursor(topic_name=name, partition_index=end)
            break
    return R(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)

