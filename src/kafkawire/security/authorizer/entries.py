"""Per-entry checks, as data: the requests whose topics, groups, transactional ids or config resources are
authorized one by one, each denied entry answered with Kafka's code while the others go on.

``PER_ENTRY`` names, per API, the request array whose entries are checked, the response array that answers
them, and for an entry the resource, the operation and the error code. :func:`narrow` runs before the handler:
it takes the denied entries out of the request (the handler sees only the others) and keeps their answers,
built by ``kafkawire.broker.error_answers`` (Kafka's ``getErrorResponse`` shapes: offsets -1, no records, ...)
with the code. :func:`merge` puts those answers into the handler's response; a handler that encodes its own
response (Fetch) calls it before encoding."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from dataclasses import dataclass

from kafkawire.protocol import errors

from .model import CLUSTER_NAME, AclOperation, ResourceType
from .rules import allowed

Op = AclOperation
TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
# a config resource's type (DescribeConfigs, AlterConfigs): the ACL resource and the code of a denial
_CONFIG_RESOURCES = {
    2: (TOPIC, errors.TOPIC_AUTHORIZATION_FAILED),
    4: (CLUSTER, errors.CLUSTER_AUTHORIZATION_FAILED),  # a broker
    8: (CLUSTER, errors.CLUSTER_AUTHORIZATION_FAILED),  # a broker's loggers
    16: (CLUSTER, errors.CLUSTER_AUTHORIZATION_FAILED),  # client metrics
    32: (GROUP, errors.GROUP_AUTHORIZATION_FAILED),
}

Decision = tuple[int, str, int, int]  # resource type, name, operation, error code


@dataclass(frozen=True)
class PerEntry:
    request_field: str
    response_field: str
    decide: Callable[[object, object, object], Decision | None]  # (broker, request, entry) -> what to check or None
    since: int = 0  # the first version the request has the array
    until: int = 1 << 15  # the last one
    says_why: bool = False  # a denied entry carries the error's text (Kafka builds it from the exception)
    # the answers of denied entries, where the API's error answer has none per entry: (entries, code) -> answers
    answer: Callable[[list, int], list] | None = None


def _topic(op: AclOperation, attr: str = "name"):
    """A topic entry, named (``attr``) or, in newer versions, given by id: an id no topic has is left to the
    handler (UNKNOWN_TOPIC_ID, as Kafka answers before any authorization)."""

    def decide(broker, body, e) -> Decision | None:
        name = _topic_name(broker, e, attr)
        return None if name is None else (TOPIC, name, op, errors.TOPIC_AUTHORIZATION_FAILED)

    return decide


def _group(op: AclOperation):
    return lambda broker, body, e: (
        GROUP,
        e if isinstance(e, str) else e.group_id,
        op,
        errors.GROUP_AUTHORIZATION_FAILED,
    )


def _transactional_id(op: AclOperation):
    def decide(broker, body, transactional_id) -> Decision:
        return TXN, transactional_id, op, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    return decide


def _fetch_answers(topics: list, code: int) -> list:
    """Fetch's denied topics, by name or by id (its error answer has no entries from v13, where a whole-request
    failure is the top-level code alone)."""
    from kafkawire.protocol.messages import FetchResponse as R

    return [
        R.FetchableTopicResponse(
            topic=t.topic,
            topic_id=t.topic_id,
            partitions=[
                R.PartitionData(
                    partition_index=p.partition,
                    error_code=code,
                    high_watermark=-1,
                    last_stable_offset=-1,
                    log_start_offset=-1,
                    aborted_transactions=[],
                    preferred_read_replica=-1,
                    records=b"",
                )
                for p in t.partitions
            ],
        )
        for t in topics
    ]


def _offset_delete_answers(topics: list, code: int) -> list:
    from kafkawire.protocol.messages import OffsetDeleteResponse as R

    return [
        R.OffsetDeleteResponseTopic(
            name=t.name,
            partitions=[
                R.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=code)
                for p in t.partitions
            ],
        )
        for t in topics
    ]


def _coordinator(broker, body, key) -> Decision:
    if body.key_type == 1:
        return TXN, key, Op.DESCRIBE, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return GROUP, key, Op.DESCRIBE, errors.GROUP_AUTHORIZATION_FAILED


def _config(op: AclOperation):
    def decide(broker, body, e) -> Decision | None:
        found = _CONFIG_RESOURCES.get(e.resource_type)
        if found is None:
            return None
        rtype, code = found
        return rtype, CLUSTER_NAME if rtype == CLUSTER else e.resource_name, op, code

    return decide


PER_ENTRY: dict[str, PerEntry] = {
    "Produce": PerEntry("topic_data", "responses", _topic(Op.WRITE)),
    "Fetch": PerEntry("topics", "responses", _topic(Op.READ, "topic"), answer=_fetch_answers),
    "ListOffsets": PerEntry("topics", "topics", _topic(Op.DESCRIBE)),
    "OffsetForLeaderEpoch": PerEntry("topics", "topics", _topic(Op.DESCRIBE, "topic")),
    "OffsetCommit": PerEntry("topics", "topics", _topic(Op.READ)),
    "TxnOffsetCommit": PerEntry("topics", "topics", _topic(Op.READ)),
    "DeleteRecords": PerEntry("topics", "topics", _topic(Op.DELETE)),
    "OffsetDelete": PerEntry("topics", "topics", _topic(Op.READ), answer=_offset_delete_answers),
    "CreatePartitions": PerEntry("topics", "results", _topic(Op.ALTER)),
    "DescribeProducers": PerEntry("topics", "topics", _topic(Op.READ), says_why=True),
    "OffsetFetch": PerEntry("topics", "topics", _topic(Op.DESCRIBE), until=7),
    "FindCoordinator": PerEntry("coordinator_keys", "coordinators", _coordinator, since=4),
    "DescribeGroups": PerEntry("groups", "groups", _group(Op.DESCRIBE)),
    "DeleteGroups": PerEntry("groups_names", "results", _group(Op.DELETE)),
    "DescribeConfigs": PerEntry("resources", "results", _config(Op.DESCRIBE_CONFIGS)),
    "AlterConfigs": PerEntry("resources", "responses", _config(Op.ALTER_CONFIGS)),
    "IncrementalAlterConfigs": PerEntry("resources", "responses", _config(Op.ALTER_CONFIGS), says_why=True),
    "DescribeTransactions": PerEntry("transactional_ids", "transaction_states", _transactional_id(Op.DESCRIBE)),
}


@dataclass(frozen=True)
class Listed:
    """A response array listing resources: entries the principal may not ``operation`` are left out (unless
    it may ``cluster_operation`` on the cluster), and with ``bitfield`` set each entry whose bitfield was
    asked for (not INT32_MIN) gets the principal's authorized operations on it."""

    response_field: str
    resource_type: ResourceType
    name_field: str
    operation: AclOperation | None = None  # None: nothing left out
    cluster_operation: AclOperation | None = None
    bitfield: str | None = None


LISTED: dict[str, Listed] = {
    "ListGroups": Listed("groups", GROUP, "group_id", Op.DESCRIBE, cluster_operation=Op.DESCRIBE),
    "ListTransactions": Listed("transaction_states", TXN, "transactional_id", Op.DESCRIBE),
    "DescribeGroups": Listed("groups", GROUP, "group_id", bitfield="authorized_operations"),
    "ConsumerGroupDescribe": Listed("groups", GROUP, "group_id", bitfield="authorized_operations"),
}
INT32_MIN = -(1 << 31)

_PENDING = "_acl_denied"  # the RequestContext attribute holding the denied entries' answers


def narrow(broker, ctx, spec, body, fn):
    """(the request the handler gets, the handler): unchanged when every entry may go on; otherwise the request
    without the denied entries and a handler whose response gets their answers."""
    listed = LISTED.get(spec.name)
    if listed is not None:
        fn = _listing(broker, listed, fn)
    if spec.name == "AddPartitionsToTxn" and ctx.api_version <= 3:
        return _narrow_add_partitions(broker, ctx, spec, body, fn)
    if spec.name == "OffsetFetch" and ctx.api_version >= 8:
        return _narrow_offset_fetch(broker, ctx, body, fn)
    rule = PER_ENTRY.get(spec.name)
    if rule is None or not rule.since <= ctx.api_version <= rule.until:
        return body, fn
    items = getattr(body, rule.request_field, None)
    if not items:
        return body, fn
    kept, denied = [], {}  # code -> entries
    for item in items:
        decision = rule.decide(broker, body, item)
        if decision is None or allowed(broker, ctx, decision[2], decision[0], decision[1]):
            kept.append(item)
        else:
            denied.setdefault(decision[3], []).append(item)
    if not denied:
        return body, fn
    from kafkawire.broker.dispatch import error_response

    answers = []
    for code, entries in denied.items():
        if rule.answer is not None:
            answers.extend(rule.answer(entries, code))
            continue
        only_denied = copy.copy(body)
        setattr(only_denied, rule.request_field, entries)
        why = errors.error_for(code).message if rule.says_why else None
        refused = error_response(spec.api_key, ctx.api_version, only_denied, code, why)
        if refused is not None:
            answers.extend(getattr(refused, rule.response_field))
    setattr(ctx, _PENDING, (rule.response_field, answers))
    narrowed = copy.copy(body)
    setattr(narrowed, rule.request_field, kept)

    def handler(broker_, ctx_, body_):
        result = fn(broker_, ctx_, body_)
        if inspect.isawaitable(result):
            return _merged_later(ctx_, result)
        return merge(ctx_, result)

    return narrowed, handler


def _listing(broker, listed: Listed, fn):
    def handler(broker_, ctx, body):
        result = fn(broker_, ctx, body)
        if inspect.isawaitable(result):
            return _listed_later(broker, ctx, listed, result)
        return _list(broker, ctx, listed, result)

    return handler


async def _listed_later(broker, ctx, listed, pending):
    return _list(broker, ctx, listed, await pending)


def _list(broker, ctx, listed: Listed, response):
    if response is None or isinstance(response, list):
        return response
    from .rules import operations

    entries = getattr(response, listed.response_field, None) or []
    if listed.operation is not None and not (
        listed.cluster_operation is not None and allowed(broker, ctx, listed.cluster_operation)
    ):
        entries = [
            e
            for e in entries
            if allowed(broker, ctx, listed.operation, listed.resource_type, getattr(e, listed.name_field))
        ]
    if listed.bitfield is not None:
        for e in entries:
            if getattr(e, listed.bitfield) != INT32_MIN:
                setattr(
                    e, listed.bitfield, operations(broker, ctx, listed.resource_type, getattr(e, listed.name_field))
                )
    setattr(response, listed.response_field, entries)
    return response


def _narrow_offset_fetch(broker, ctx, body, fn):
    """OffsetFetch v8+ (groups): a group the principal may not describe is GROUP_AUTHORIZATION_FAILED with no
    topics; within the others, a named topic it may not describe is TOPIC_AUTHORIZATION_FAILED in each
    partition, and a request for all topics leaves such topics out."""
    from kafkawire.protocol.messages import OffsetFetchResponse as R

    denied_groups: dict[int, object] = {}  # position in the request -> answer
    denied_topics: dict[int, list] = {}  # position -> answers of its denied topics
    listing: set[int] = set()  # positions asking for all topics
    kept_groups = []
    for i, g in enumerate(body.groups):
        if not allowed(broker, ctx, Op.DESCRIBE, GROUP, g.group_id):
            denied_groups[i] = R.OffsetFetchResponseGroup(
                group_id=g.group_id, topics=[], error_code=errors.GROUP_AUTHORIZATION_FAILED
            )
            continue
        narrowed = copy.copy(g)
        if g.topics is None:
            listing.add(i)
        else:
            kept, refused = [], []
            for t in g.topics:
                name = _topic_name(broker, t)
                if name is not None and allowed(broker, ctx, Op.DESCRIBE, TOPIC, name):
                    kept.append(t)
                else:
                    refused.append(_refused_topic(R, t))
            narrowed.topics = kept
            denied_topics[i] = refused
        kept_groups.append((i, narrowed))
    if not denied_groups and not any(denied_topics.values()) and not listing:
        return body, fn
    request = copy.copy(body)
    request.groups = [g for _i, g in kept_groups]

    def merged(response):
        if response is None or isinstance(response, list):
            return response
        answered = iter(response.groups)
        out = []
        for i, _g in enumerate(body.groups):
            if i in denied_groups:
                out.append(denied_groups[i])
                continue
            group = next(answered)
            if i in listing:
                group.topics = [t for t in group.topics if _may_describe(broker, ctx, t)]
            group.topics = list(group.topics) + denied_topics.get(i, [])
            out.append(group)
        response.groups = out
        return response

    def handler(broker_, ctx_, body_):
        result = fn(broker_, ctx_, body_)
        if inspect.isawaitable(result):
            return _then(result, merged)
        return merged(result)

    return request, handler


def _narrow_add_partitions(broker, ctx, spec, body, fn):
    """AddPartitionsToTxn v0-3: WRITE on every topic, or nothing is added: the topics the producer may not
    write get TOPIC_AUTHORIZATION_FAILED and the others OPERATION_NOT_ATTEMPTED (Kafka's answer)."""
    refused = {t.name for t in body.v3_and_below_topics if not allowed(broker, ctx, Op.WRITE, TOPIC, t.name)}
    if not refused:
        return body, fn
    from kafkawire.broker.dispatch import error_response

    def handler(broker_, ctx_, body_):
        answer = error_response(spec.api_key, ctx_.api_version, body_, errors.OPERATION_NOT_ATTEMPTED)
        for topic in answer.results_by_topic_v3_and_below:
            if topic.name in refused:
                for p in topic.results_by_partition:
                    p.partition_error_code = errors.TOPIC_AUTHORIZATION_FAILED
        return answer

    return body, handler


def _topic_name(broker, t, attr: str = "name") -> str | None:
    """The name of a request's topic entry: its name, or the name of the topic its id names (None: no such
    topic)."""
    name = getattr(t, attr, None)
    if name:
        return name
    topic_id = getattr(t, "topic_id", None)
    if topic_id is None or topic_id.int == 0:
        return None
    from kafkawire.broker.storage.base import UnknownTopicError

    try:
        return broker.storage.topic_by_id(topic_id).name
    except UnknownTopicError:  # an id no topic has: the handler answers it
        return None


def _may_describe(broker, ctx, t) -> bool:
    name = _topic_name(broker, t)
    return name is not None and allowed(broker, ctx, Op.DESCRIBE, TOPIC, name)


def _refused_topic(R, t):
    topic = R.OffsetFetchResponseTopics(
        partitions=[
            R.OffsetFetchResponsePartitions(
                partition_index=p,
                committed_offset=-1,
                committed_leader_epoch=-1,
                metadata="",
                error_code=errors.TOPIC_AUTHORIZATION_FAILED,
            )
            for p in t.partition_indexes
        ]
    )
    for attr in ("name", "topic_id"):
        if hasattr(t, attr):
            setattr(topic, attr, getattr(t, attr))
    return topic


async def _then(pending, then):
    return then(await pending)


async def _merged_later(ctx, pending):
    return merge(ctx, await pending)


def merge(ctx, response):
    """The response with the denied entries' answers added (once); a response that is None (acks=0) or
    already encoded is returned as it is."""
    pending = getattr(ctx, _PENDING, None)
    if pending is None or response is None or isinstance(response, list):
        return response
    delattr(ctx, _PENDING)
    field, answers = pending
    setattr(response, field, list(getattr(response, field) or []) + answers)
    return response
