"""CreateTopics, DeleteTopics, CreatePartitions, DescribeTopicPartitions."""

from __future__ import annotations

import asyncio
import math
import time
import uuid

from kafkawire.protocol import errors
from kafkawire.protocol.messages import (
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DescribeTopicPartitionsResponse,
)
from kafkawire.security.authorizer import rules as acl

from ..config import TOPIC_CONFIGS, ConfigError, validate_topic_config
from ..dispatch import handles
from ..storage import base as sb
from ._common import INT32_MIN, ZERO_UUID, log, storage_error_code, topic_name_problem

MAX_PARTITIONS = 1_000_000
MAX_RECORDS_PER_OPERATION = 10_000  # Kafka's controller: metadata records one request may create
MAX_RESPONSE_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit default
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
OFFSETS_TOPIC = "__consumer_offsets"
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
TOO_MANY_NEW_PARTITIONS = "Excessively large number of additional partitions per request."
TOO_MANY_RECORDS = "Unable to perform excessively large batch operation."
QUOTA_EXCEEDED = "The throttling quota has been exceeded."


class Invalid(Exception):
    def __init__(self, code: int, message: str | None):
        self.code, self.message = code, message
        super().__init__(message)


def _replication_problem(broker, rf: int) -> str:
    return (
        f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be "
        f"reached because only 1 broker(s) are registered."
    )


def _check_assignment(broker, broker_ids) -> None:
    if list(broker_ids) != [broker.node_id]:
        raise Invalid(
            errors.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes broker(s) {list(broker_ids)}, but only broker "
            f"{broker.node_id} exists and each partition has exactly one replica.",
        )


def _topic_config_entries(broker, configs: dict):
    from .configs import topic_config_entry

    R = CreateTopicsResponse
    out = []
    for name in sorted(TOPIC_CONFIGS):
        if TOPIC_CONFIGS[name].internal and name not in configs:
            continue
        value, source, _, read_only, sensitive = topic_config_entry(broker, configs, name)
        out.append(
            R.CreatableTopicConfigs(
                name=name, value=value, read_only=read_only, config_source=source, is_sensitive=sensitive
            )
        )
    return out


def _validate_create(broker, t, existing) -> tuple[int, dict]:
    problem = topic_name_problem(t.name)
    if problem:
        raise Invalid(errors.INVALID_TOPIC_EXCEPTION, problem)
    if t.name in existing or t.name == OFFSETS_TOPIC:
        # the group coordinator's log: Kafka has made it by the time clients use groups; kafkawire makes it on
        # first use, and never lets a client create it with other settings
        raise Invalid(errors.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            raise Invalid(
                errors.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be "
                "used at the same time.",
            )
        indexes = sorted(a.partition_index for a in t.assignments)
        if indexes != list(range(len(indexes))):
            raise Invalid(
                errors.INVALID_REPLICA_ASSIGNMENT, "Partitions should be a consecutive 0-based integer sequence"
            )
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
        if c.value is None:
            raise Invalid(errors.INVALID_CONFIG, f"Null value not supported for topic configs: {c.name}")
        try:
            validate_topic_config(c.name, c.value)
        except ConfigError as exc:
            raise Invalid(errors.INVALID_CONFIG, str(exc)) from None
        if c.value is not None:
            configs[c.name] = c.value
    return partitions, configs


# -- the controller's limits ----------------------------------------------------------------------------


class MutationQuota:
    """Kafka's ``controller_mutation_rate`` quota: a token bucket per client id, refilled at ``rate``
    partition mutations per second up to ``rate * controller.quota.window.num *
    controller.quota.window.size.seconds``. Each created, added or deleted partition takes a token; the
    bucket may go negative, and while it is negative the client is over its quota for ``-tokens / rate``
    seconds."""

    def __init__(self, rate: float, window_num: int, window_seconds: int):
        self.rate = rate
        self.burst = rate * max(window_num, 1) * max(window_seconds, 1)
        self._buckets: dict[str, tuple[float, float]] = {}

    def _tokens(self, client: str, now: float) -> float:
        tokens, last = self._buckets.get(client, (self.burst, now))
        return min(self.burst, tokens + (now - last) * self.rate)

    def throttle_ms(self, client: str) -> int:
        """How long ``client`` is over its quota (0: within it)."""
        tokens = self._tokens(client, time.monotonic())
        return 0 if tokens >= 0 else math.ceil(-tokens / self.rate * 1000)

    def record(self, client: str, mutations: int) -> None:
        now = time.monotonic()
        self._buckets[client] = (self._tokens(client, now) - mutations, now)
        if len(self._buckets) > 10_000:  # forget full buckets so that many client ids cannot grow this
            self._buckets = {
                c: (t, at) for c, (t, at) in self._buckets.items() if t + (now - at) * self.rate < self.burst
            }


class _Unlimited:
    def throttle_ms(self, client: str) -> int:
        return 0

    def record(self, client: str, mutations: int) -> None:
        pass


def _quota(broker):
    quota = broker.__dict__.get("_mutation_quota")
    if quota is None:
        rate = broker.config.controller_mutation_rate
        quota = (
            MutationQuota(
                rate, broker.config.controller_quota_window_num, broker.config.controller_quota_window_size_seconds
            )
            if rate
            else _Unlimited()
        )
        broker.__dict__["_mutation_quota"] = quota
    return quota


class _Admission:
    """One request's way through the quota: strict (Kafka's answer THROTTLING_QUOTA_EXCEEDED per topic,
    for CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) or permissive (older versions: every
    mutation is accepted and the response is held back for the throttle time)."""

    def __init__(self, broker, ctx, strict: bool):
        self.quota, self.client, self.strict = _quota(broker), ctx.client_id, strict

    def admit(self, mutations: int) -> bool:
        if self.strict and self.quota.throttle_ms(self.client) > 0:
            return False
        self.quota.record(self.client, mutations)
        return True

    async def finish(self) -> int:
        """throttle_time_ms for the response (after the delay, for permissive versions)."""
        throttle = self.quota.throttle_ms(self.client)
        if throttle and not self.strict:
            await asyncio.sleep(throttle / 1000)
        return throttle


def _partition_cap_problem(broker, existing, adding: int) -> str | None:
    cap = broker.config.max_partitions
    total = sum(m.partitions for m in existing.values()) + adding
    if cap >= 0 and total > cap:
        return (
            f"The request would bring this broker to {total} partitions, more than "
            f"kafkawire.max.partitions={cap} allows."
        )
    return None


async def _controller(broker, fn, *args):
    """Run ``fn(*args)`` in the broker's controller thread (topic changes, one at a time, off the loop)."""
    return await broker.controller_call(fn, *args)


# -- CreateTopics ---------------------------------------------------------------------------------------


def _requested_partitions(broker, t) -> int:
    if t.assignments:
        return len(t.assignments)
    return broker.config.num_partitions if t.num_partitions == -1 else max(t.num_partitions, 0)


@handles("CreateTopics", 0, 7)
async def create_topics(broker, ctx, body):
    """Validated on the loop, created in the controller thread; requests queue on the controller lock so
    that each sees the topics of the one before. Kafka's controller limits, checked with the reference:
    more than 10,000 partitions in one request, or more than 10,000 metadata records (a topic, each
    partition, each config), fail every topic with POLICY_VIOLATION."""
    async with broker.controller_lock():
        return await _create_topics(broker, ctx, body)


async def _create_topics(broker, ctx, body):
    version = ctx.api_version
    R = CreateTopicsResponse
    names = [t.name for t in body.topics]
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    existing = broker.storage.topics()
    results, todo, seen = [], [], set()  # todo: (result, topic, partitions, configs)
    for t in body.topics:
        res = R.CreatableTopicResult(
            name=t.name,
            topic_id=ZERO_UUID,
            error_code=0,
            error_message=None,
            num_partitions=-1,
            replication_factor=-1,
            configs=[] if version >= 5 else None,
        )
        if counts[t.name] > 1:
            if t.name in seen:
                continue
            seen.add(t.name)
            res.error_code = errors.INVALID_REQUEST
            res.error_message = (
                f"Create topics request from client `{ctx.client_id}` contains multiple entries "
                f"for the following topics: {t.name}"
            )
            results.append(res)
            continue
        results.append(res)
        if not acl.may_on_topic(broker, ctx, acl.Op.CREATE, t.name, or_cluster=True):
            res.error_code, res.error_message = errors.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
            continue
        try:
            partitions, configs = _validate_create(broker, t, existing)
            todo.append((res, t, partitions, configs))
        except Invalid as exc:
            res.error_code, res.error_message = exc.code, exc.message
    batch_problem = None
    if sum(_requested_partitions(broker, t) for t in body.topics if counts[t.name] == 1) > MAX_RECORDS_PER_OPERATION:
        batch_problem = TOO_MANY_PARTITIONS
    elif sum(1 + p + len(c) for _r, _t, p, c in todo) > MAX_RECORDS_PER_OPERATION:
        batch_problem = TOO_MANY_RECORDS
    if batch_problem:
        for res in results:
            res.error_code, res.error_message = errors.POLICY_VIOLATION, batch_problem
        todo = []
    admission = _Admission(broker, ctx, strict=version >= 6)
    accepted, adding = [], 0
    for res, t, partitions, configs in todo:
        problem = _partition_cap_problem(broker, existing, adding + partitions)
        if problem:
            res.error_code, res.error_message = errors.POLICY_VIOLATION, problem
        elif body.validate_only:
            res.topic_id = uuid.uuid4()  # as Kafka: the id the topic would have had
            accepted.append((res, t, partitions, configs))
        elif not admission.admit(partitions):
            res.error_code, res.error_message = errors.THROTTLING_QUOTA_EXCEEDED, QUOTA_EXCEEDED
        else:
            accepted.append((res, t, partitions, configs))
            adding += partitions
    if accepted and not body.validate_only:
        made = await _controller(
            broker, broker.storage.create_topics, [sb.NewTopic(t.name, p, c) for _res, t, p, c in accepted]
        )
        for (res, t, partitions, configs), meta in zip(accepted, made):
            if isinstance(meta, sb.StorageError):
                res.error_code, res.error_message = storage_error_code(meta), str(meta)
            else:
                res.topic_id = meta.topic_id
                log.info(
                    "created topic %s with %d partitions (id %s)%s",
                    t.name,
                    partitions,
                    meta.topic_id,
                    f" and configs {configs}" if configs else "",
                )
    throttle = await admission.finish()
    ok = [(res, p, c) for res, _t, p, c in accepted if not res.error_code]
    ok = acl.configs_visible(broker, ctx, ok)  # with ACLs: DESCRIBE_CONFIGS on each topic, else not described
    # the per-topic config listings are the bulk of a large answer: built in the controller thread
    await _controller(broker, _describe_created, broker, ok, version)
    for res in results:
        if res.error_code:
            res.configs = [] if version >= 5 else None
            if version < 1:
                res.error_message = None
    return R(throttle_time_ms=throttle if version >= 2 else 0, topics=results)


def _describe_created(broker, ok, version) -> None:
    if version < 5:
        return
    for res, partitions, configs in ok:
        res.num_partitions = partitions
        res.replication_factor = 1
        res.configs = _topic_config_entries(broker, configs)


# -- DeleteTopics ---------------------------------------------------------------------------------------


def _forget(broker, meta) -> None:
    broker.producers.forget_topic(meta.name)
    broker.fetch_sessions.forget_topic(meta.name, meta.topic_id)
    broker.waiters.notify_topic(meta.name)
    if meta.name == OFFSETS_TOPIC and broker.group_coordinator is not None:
        broker.group_coordinator.unload()  # the groups go with it; the next group request starts afresh
    log.info("deleted topic %s (id %s)", meta.name, meta.topic_id)


@handles("DeleteTopics", 0, 6)
async def delete_topics(broker, ctx, body):
    async with broker.controller_lock():
        return await _delete_topics(broker, ctx, body)


async def _delete_topics(broker, ctx, body):
    """As Kafka 4.4's controller: a topic named twice (by name, or by id, or by its name and its id) is
    not deleted and gets one INVALID_REQUEST answer; so does an entry with both a name and an id or with
    neither. From v5 every error carries a message (Kafka's controller fills in the error's own text)."""
    version = ctx.api_version
    R = DeleteTopicsResponse
    existing = broker.storage.topics()
    results = []

    def answer(name, topic_id, code=0, message=None):
        res = R.DeletableTopicResult(name=name, topic_id=topic_id or ZERO_UUID, error_code=code, error_message=message)
        results.append(res)
        return res

    names: dict[str, int] = {}  # name -> times given
    ids: dict[uuid.UUID, int] = {}  # id -> times given
    for name in body.topic_names if version < 6 else []:
        names[name] = names.get(name, 0) + 1
    for t in body.topics if version >= 6 else []:
        if t.name is None and t.topic_id == ZERO_UUID:
            answer(None, ZERO_UUID, errors.INVALID_REQUEST, "A topic needs a name or an id.")
        elif t.name is None:
            ids[t.topic_id] = ids.get(t.topic_id, 0) + 1
        elif t.topic_id == ZERO_UUID:
            names[t.name] = names.get(t.name, 0) + 1
        else:
            answer(t.name, t.topic_id, errors.INVALID_REQUEST, "A topic may be given by name or by id, not both.")
    for name, times in names.items():
        if times > 1:
            answer(name, ZERO_UUID, errors.INVALID_REQUEST, f"Topic {name} is named more than once.")
    for topic_id, times in ids.items():
        if times > 1:
            answer(None, topic_id, errors.INVALID_REQUEST, f"Topic id {topic_id} is given more than once.")
    by_id = {m.topic_id: m for m in existing.values()}
    chosen: dict[uuid.UUID, tuple] = {}  # id -> (name given or None, meta)
    spoiled: set[uuid.UUID] = {i for i, times in ids.items() if times > 1}
    for topic_id, times in ids.items():
        if times > 1:
            continue
        meta = by_id.get(topic_id)
        if meta is None:
            answer(None, topic_id, errors.UNKNOWN_TOPIC_ID, f"No topic has id {topic_id}.")
        elif not acl.may_on_topic(
            broker, ctx, acl.Op.DELETE, meta.name, or_cluster=True
        ):  # the name only if describable
            shown = (
                meta.name
                if acl.may_on_topic(broker, ctx, acl.Op.DESCRIBE, meta.name, or_cluster_op=acl.Op.DELETE)
                else None
            )
            answer(shown, topic_id, errors.TOPIC_AUTHORIZATION_FAILED, acl.TOPIC_DENIED)
        else:
            chosen[topic_id] = (None, meta)
    for name, times in names.items():
        if times > 1:
            continue
        meta = existing.get(name)
        if not acl.may_on_topic(broker, ctx, acl.Op.DESCRIBE, name, or_cluster_op=acl.Op.DELETE) or (
            meta is not None and not acl.may_on_topic(broker, ctx, acl.Op.DELETE, name, or_cluster=True)
        ):  # with ACLs: whether it exists is not disclosed to whoever may not describe it
            answer(name, ZERO_UUID, errors.TOPIC_AUTHORIZATION_FAILED, acl.TOPIC_DENIED)
        elif meta is None:
            answer(name, ZERO_UUID, errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        elif meta.topic_id in spoiled or meta.topic_id in chosen:
            chosen.pop(meta.topic_id, None)
            spoiled.add(meta.topic_id)
            answer(
                name, meta.topic_id, errors.INVALID_REQUEST, f"Topic {name} is also given by its id {meta.topic_id}."
            )
        else:
            chosen[meta.topic_id] = (name, meta)
    admission = _Admission(broker, ctx, strict=version >= 5)
    doomed = []  # (result, meta)
    for _given, meta in chosen.values():
        res = answer(meta.name, meta.topic_id)
        if not admission.admit(meta.partitions):
            res.error_code, res.error_message = errors.THROTTLING_QUOTA_EXCEEDED, QUOTA_EXCEEDED
            continue
        doomed.append((res, meta))
    if doomed:
        outcome = await _controller(broker, broker.storage.delete_topics, [m.name for _res, m in doomed])
        for (res, meta), failure in zip(doomed, outcome):
            if failure is None:
                _forget(broker, meta)
            else:
                res.error_code, res.error_message = storage_error_code(failure), str(failure)
    throttle = await admission.finish()
    if version < 5:
        for res in results:
            res.error_message = None
    # Kafka shuffles its answers; kafkawire lists them in the order the topics were asked for
    asked = [(n, ZERO_UUID) for n in body.topic_names] if version < 6 else [(t.name, t.topic_id) for t in body.topics]
    first: dict = {}
    for i, (n, i_d) in enumerate(asked):
        if n is not None:
            first.setdefault(n, i)
        if i_d != ZERO_UUID:
            first.setdefault(i_d, i)
    results.sort(key=lambda r: min(first.get(r.name, len(asked)), first.get(r.topic_id, len(asked))))
    return R(throttle_time_ms=throttle if version >= 1 else 0, responses=results)


# -- CreatePartitions -----------------------------------------------------------------------------------


@handles("CreatePartitions", 0, 3)
async def create_partitions(broker, ctx, body):
    """Kafka's controller refuses more than 10,000 new partitions in one request (POLICY_VIOLATION on
    every topic, checked with the reference)."""
    async with broker.controller_lock():
        return await _create_partitions(broker, ctx, body)


async def _create_partitions(broker, ctx, body):
    R = CreatePartitionsResponse
    existing = broker.storage.topics()
    results, todo = [], []  # todo: (result, topic, current count)
    for t in body.topics:
        res = R.CreatePartitionsTopicResult(name=t.name, error_code=0, error_message=None)
        results.append(res)
        meta = existing.get(t.name)
        try:
            if meta is None:
                raise Invalid(errors.UNKNOWN_TOPIC_OR_PARTITION, None)  # no message, as Kafka's controller
            if t.count < meta.partitions:
                raise Invalid(
                    errors.INVALID_PARTITIONS,
                    f"Topic currently has {meta.partitions} partitions, which is higher than the requested {t.count}.",
                )
            if t.count == meta.partitions:
                raise Invalid(errors.INVALID_PARTITIONS, f"Topic already has {meta.partitions} partitions.")
            if t.count > MAX_PARTITIONS:
                raise Invalid(errors.INVALID_PARTITIONS, "Too many partitions.")
            if t.assignments is not None:
                if len(t.assignments) != t.count - meta.partitions:
                    raise Invalid(
                        errors.INVALID_REPLICA_ASSIGNMENT,
                        f"Attempted to add {t.count - meta.partitions} additional partition(s), but only "
                        f"{len(t.assignments)} assignment(s) were specified.",
                    )
                for a in t.assignments:
                    _check_assignment(broker, a.broker_ids)
            todo.append((res, t, meta.partitions))
        except Invalid as exc:
            res.error_code, res.error_message = exc.code, exc.message
    if sum(t.count - current for _res, t, current in todo) > MAX_RECORDS_PER_OPERATION:
        for res, _t, _current in todo:
            res.error_code, res.error_message = errors.POLICY_VIOLATION, TOO_MANY_NEW_PARTITIONS
        todo = []
    admission = _Admission(broker, ctx, strict=ctx.api_version >= 3)
    accepted, adding = [], 0
    for res, t, current in todo:
        problem = _partition_cap_problem(broker, existing, adding + t.count - current)
        if problem:
            res.error_code, res.error_message = errors.POLICY_VIOLATION, problem
        elif body.validate_only:
            continue
        elif not admission.admit(t.count - current):
            res.error_code, res.error_message = errors.THROTTLING_QUOTA_EXCEEDED, QUOTA_EXCEEDED
        else:
            accepted.append((res, t))
            adding += t.count - current
    if accepted:
        grown = await _controller(
            broker, broker.storage.add_partitions_batch, [(t.name, t.count) for _r, t in accepted]
        )
        for (res, t), meta in zip(accepted, grown):
            if isinstance(meta, sb.StorageError):
                res.error_code, res.error_message = storage_error_code(meta), str(meta)
            else:
                log.info("topic %s now has %d partitions", t.name, t.count)
    throttle = await admission.finish()
    return R(throttle_time_ms=throttle, results=results)


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
    denied = []  # with ACLs: what the principal may not describe (left out of a listing, refused by name)
    if broker.authorizer is not None:
        names, denied = acl.split_describable(broker, ctx, names, listing=not body.topics)
    cursor = body.cursor

    def request_error(code):
        return R(
            throttle_time_ms=0,
            next_cursor=None,
            topics=[
                R.DescribeTopicPartitionsResponseTopic(
                    error_code=code,
                    name=t.name,
                    topic_id=ZERO_UUID,
                    partitions=[],
                    topic_authorized_operations=INT32_MIN,
                )
                for t in body.topics
            ],
        )

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
    for _i, name in enumerate(names):
        meta = all_topics.get(name)
        if meta is None:
            problem = topic_name_problem(name)
            topics.append(
                R.DescribeTopicPartitionsResponseTopic(
                    error_code=errors.INVALID_TOPIC_EXCEPTION if problem else errors.UNKNOWN_TOPIC_OR_PARTITION,
                    name=name,
                    topic_id=ZERO_UUID,
                    is_internal=name in INTERNAL_TOPICS,
                    partitions=[],
                    topic_authorized_operations=acl.operations(broker, ctx, acl.TOPIC, name),
                )
            )
            continue
        first = start_partition if (cursor is not None and name == cursor.topic_name) else 0
        if budget <= 0:
            next_cursor = R.Cursor(topic_name=name, partition_index=first)
            break
        end = min(meta.partitions, first + budget)
        parts = [
            R.DescribeTopicPartitionsResponsePartition(
                error_code=0,
                partition_index=p,
                leader_id=node,
                leader_epoch=broker.leader_epochs.current(name, p),
                replica_nodes=[node],
                isr_nodes=[node],
                eligible_leader_replicas=[],
                last_known_elr=[],
                offline_replicas=[],
            )
            for p in range(first, end)
        ]
        budget -= len(parts)
        topics.append(
            R.DescribeTopicPartitionsResponseTopic(
                error_code=0,
                name=name,
                topic_id=meta.topic_id,
                is_internal=name in INTERNAL_TOPICS,
                partitions=parts,
                topic_authorized_operations=acl.operations(broker, ctx, acl.TOPIC, name),
            )
        )
        if end < meta.partitions:
            next_cursor = R.Cursor(topic_name=name, partition_index=end)
            break
    topics += [
        R.DescribeTopicPartitionsResponseTopic(
            error_code=errors.TOPIC_AUTHORIZATION_FAILED,
            name=name,
            topic_id=ZERO_UUID,
            partitions=[],
            topic_authorized_operations=INT32_MIN,
        )
        for name in denied
    ]
    return R(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)
