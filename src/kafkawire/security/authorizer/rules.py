"""What each API checks before it runs, as data: Kafka's KafkaApis checks that decide a request as a whole.

``WHOLE_REQUEST`` lists, per API, the operation on the resource the request names (the cluster, or the group
or transactional id in one of its fields) and the error Kafka answers when it is denied: the request's error
answer (``kafkawire.broker.error_answers``, Kafka's ``getErrorResponse``) with that code. The broker applies
the table before the handler runs (:func:`denied`). Checks that decide per topic or per group of a request
(Metadata's filtering, CreateTopics, ...) are thin calls from those handlers to the helpers here."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kafkawire.protocol import errors

from .model import CLUSTER_NAME, AclOperation, ResourceType

Op = AclOperation


@dataclass(frozen=True)
class Check:
    operation: AclOperation
    resource_type: ResourceType = ResourceType.CLUSTER
    field: str | None = None  # the request field naming the resource; None: the cluster
    error: int = errors.CLUSTER_AUTHORIZATION_FAILED
    skip_empty: bool = False  # no check when the field is empty or null (InitProducerId without a transactional id)
    says_why: bool = False  # the answer carries a message (Kafka throws, and the error answer takes its text)
    since: int = 0  # the versions the check applies to
    until: int = 1 << 15


def _cluster(op: AclOperation) -> Check:
    """A check that Kafka makes with ``authorizeClusterOperation``: denied, the error answer says why."""
    return Check(op, says_why=True)


def _group(op: AclOperation, field: str = "group_id") -> Check:
    return Check(op, ResourceType.GROUP, field, errors.GROUP_AUTHORIZATION_FAILED)


def _txn(op: AclOperation, **kw) -> Check:
    return Check(
        op, ResourceType.TRANSACTIONAL_ID, "transactional_id", errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, **kw
    )


WHOLE_REQUEST: dict[str, tuple[Check, ...]] = {
    "DescribeAcls": (_cluster(Op.DESCRIBE),),
    "CreateAcls": (_cluster(Op.ALTER),),
    "DeleteAcls": (_cluster(Op.ALTER),),
    "AlterPartitionReassignments": (_cluster(Op.ALTER),),
    "ListPartitionReassignments": (_cluster(Op.DESCRIBE),),
    "DescribeUserScramCredentials": (Check(Op.DESCRIBE),),
    "AlterUserScramCredentials": (_cluster(Op.ALTER),),
    "UpdateFeatures": (Check(Op.ALTER),),
    "DescribeClientQuotas": (Check(Op.DESCRIBE_CONFIGS),),
    "AlterClientQuotas": (Check(Op.ALTER_CONFIGS),),
    "ElectLeaders": (Check(Op.ALTER),),
    "DescribeLogDirs": (Check(Op.DESCRIBE),),
    "DescribeQuorum": (Check(Op.DESCRIBE),),
    "AlterReplicaLogDirs": (Check(Op.ALTER),),
    "ListConfigResources": (Check(Op.DESCRIBE_CONFIGS),),
    # v4+ is sent by brokers only; v0-3 by producers, whose topics are checked in entries.py
    "AddPartitionsToTxn": (
        Check(Op.CLUSTER_ACTION, since=4),
        Check(
            Op.WRITE,
            ResourceType.TRANSACTIONAL_ID,
            "v3_and_below_transactional_id",
            errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            until=3,
        ),
    ),
    "JoinGroup": (_group(Op.READ),),
    "SyncGroup": (_group(Op.READ),),
    "Heartbeat": (_group(Op.READ),),
    "LeaveGroup": (_group(Op.READ),),
    "ConsumerGroupHeartbeat": (_group(Op.READ),),
    # a transactional producer's batches: WRITE on its transactional id (Kafka checks the batches' flag; clients
    # name a transactional id exactly when they send transactional batches)
    "Produce": (_txn(Op.WRITE, skip_empty=True),),
    "OffsetCommit": (_group(Op.READ),),
    "OffsetDelete": (_group(Op.DELETE),),
    "TxnOffsetCommit": (_txn(Op.WRITE), _group(Op.READ)),
    "EndTxn": (_txn(Op.WRITE),),
    "AddOffsetsToTxn": (_txn(Op.WRITE), _group(Op.READ)),
    "InitProducerId": (_txn(Op.WRITE, skip_empty=True),),
}


def principal(ctx) -> str:
    """The request's principal ("User:name"): the connection's, User:ANONYMOUS where none authenticated."""
    conn = ctx.connection
    attrs = getattr(conn, "attributes", None) or {}
    return attrs.get("principal") or "User:ANONYMOUS"


def host(ctx) -> str:
    """The client's address, as Kafka compares it with an ACL's host."""
    peer = getattr(ctx.connection, "peer", "") or ""
    address = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return address.strip("[]")


def allowed(broker, ctx, operation: int, resource_type: int = ResourceType.CLUSTER, name: str = CLUSTER_NAME) -> bool:
    """Whether the request may do ``operation`` on the resource; always, without an authorizer."""
    authz = broker.authorizer
    return authz is None or authz.authorize(principal(ctx), host(ctx), operation, resource_type, name)


def operations(broker, ctx, resource_type: int, name: str = CLUSTER_NAME) -> int:
    """The authorized-operations bitfield of a resource for this request (all supported ones without an
    authorizer, as Kafka)."""
    from .model import all_operations_bitfield

    authz = broker.authorizer
    if authz is None:
        return all_operations_bitfield(ResourceType(resource_type))
    return authz.authorized_operations(principal(ctx), host(ctx), resource_type, name)


def denied(broker, ctx, api_name: str, body) -> tuple[int, str | None] | None:
    """The error code and message of the first ``WHOLE_REQUEST`` check the request fails, or None."""
    authz = broker.authorizer
    if authz is None:
        return None
    checks = WHOLE_REQUEST.get(api_name)
    if not checks:
        return None
    who, where = principal(ctx), host(ctx)
    for check in checks:
        if not check.since <= ctx.api_version <= check.until:
            continue
        name = CLUSTER_NAME if check.field is None else getattr(body, check.field, None)
        if check.field is not None and not name:
            if check.skip_empty:
                continue
            name = name or ""
        if not authz.authorize(who, where, check.operation, check.resource_type, name):
            why = None
            if check.says_why:
                why = f"{api_name} from {who} at {where} needs {check.operation.name} permission on the cluster"
            return check.error, why
    if api_name == "ConsumerGroupHeartbeat" and body.subscribed_topic_names:
        # a member may subscribe only to topics it may describe: one it may not fails the heartbeat
        if not all(
            authz.authorize(who, where, Op.DESCRIBE, ResourceType.TOPIC, n) for n in body.subscribed_topic_names
        ):
            return errors.TOPIC_AUTHORIZATION_FAILED, None
    if api_name == "InitProducerId" and not getattr(body, "transactional_id", None):
        # an idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (Kafka 2.8+)
        if not authz.authorize_cluster(who, where, Op.IDEMPOTENT_WRITE) and not authz.authorize_by_resource_type(
            who, where, Op.WRITE, ResourceType.TOPIC
        ):
            return errors.CLUSTER_AUTHORIZATION_FAILED, None
    return None


# -- the per-topic checks of Metadata ---------------------------------------------------------------------
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


def may_describe_topic(broker, ctx, name: str) -> bool:
    return allowed(broker, ctx, Op.DESCRIBE, TOPIC, name)


def metadata_topics(broker, ctx, requested: list, may_create: bool, internal: tuple[str, ...]):
    """Kafka's Metadata checks of named topics: (the requested topics it goes on to answer, the answers of
    those it may not). A topic the principal may not describe is TOPIC_AUTHORIZATION_FAILED whether or not it
    exists (its existence is not disclosed); one that does not exist and would be created needs CREATE on
    the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED."""
    from kafkawire.protocol.messages import MetadataResponse

    Topic = MetadataResponse.MetadataResponseTopic
    zero = uuid.UUID(int=0)
    kept, no_create, no_describe, seen = [], [], [], set()
    create_on_cluster = None
    topics = broker.storage.topics()
    for t in requested:
        if t.name in seen:
            continue
        seen.add(t.name)
        if not may_describe_topic(broker, ctx, t.name):
            no_describe.append(Topic(error_code=errors.TOPIC_AUTHORIZATION_FAILED, name=t.name, topic_id=zero))
            continue
        if may_create and t.name not in topics:
            if create_on_cluster is None:
                create_on_cluster = allowed(broker, ctx, Op.CREATE)
            if not create_on_cluster and not allowed(broker, ctx, Op.CREATE, TOPIC, t.name):
                no_create.append(
                    Topic(
                        error_code=errors.TOPIC_AUTHORIZATION_FAILED,
                        name=t.name,
                        topic_id=zero,
                        is_internal=t.name in internal,
                    )
                )
                continue
        kept.append(t)
    return kept, no_create + no_describe


def split_describable(broker, ctx, names: list[str], listing: bool) -> tuple[list[str], list[str]]:
    """(the topic names the principal may describe, those it may not: none when ``listing``, where Kafka
    leaves them out rather than refusing them)."""
    ok = [n for n in names if may_describe_topic(broker, ctx, n)]
    return ok, [] if listing else [n for n in names if n not in set(ok)]


# -- the per-topic checks of CreateTopics and DeleteTopics -------------------------------------------------
TOPIC_DENIED = "Topic authorization failed."


def may_on_topic(
    broker, ctx, operation: int, name: str, *, or_cluster: bool = False, or_cluster_op: int | None = None
) -> bool:
    """``operation`` on the topic, or (``or_cluster``) the same operation on the cluster, or (``or_cluster_op``)
    another one on the cluster: Kafka's controller lets CREATE or DELETE on the cluster stand for every topic."""
    if broker.authorizer is None:
        return True
    cluster_op = operation if or_cluster else or_cluster_op
    if cluster_op is not None and allowed(broker, ctx, cluster_op):
        return True
    return allowed(broker, ctx, operation, TOPIC, name)


def configs_visible(broker, ctx, created: list) -> list:
    """The created topics (``(result, ...)`` tuples) whose configs the principal may describe; the others get
    ``topic_config_error_code`` TOPIC_AUTHORIZATION_FAILED and no partition count, factor or configs."""
    if broker.authorizer is None:
        return created
    kept = []
    for item in created:
        if allowed(broker, ctx, Op.DESCRIBE_CONFIGS, TOPIC, item[0].name):
            kept.append(item)
        else:
            item[0].topic_config_error_code = errors.TOPIC_AUTHORIZATION_FAILED
    return kept
