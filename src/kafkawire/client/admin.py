"""Admin operations (asyncio), each sent to the broker Kafka's Java Admin (``KafkaAdminClient``) picks.

Every per-topic error in a response is raised as ``KafkaError`` with Kafka's
name and code (``TOPIC_ALREADY_EXISTS (36)``...), unless the caller asks
for the per-topic results.

Routing, with a bootstrap of brokers. In KRaft mode a broker's Metadata names some live broker as
``controller_id`` and that broker forwards controller requests to the active controller:

* the controller (Metadata's ``controller_id``): CreateTopics, DeleteTopics, CreatePartitions,
  ElectLeaders. NOT_CONTROLLER anywhere in a CreateTopics, DeleteTopics or CreatePartitions answer
  forgets the controller, refreshes the metadata and asks again, as the Java Admin does; it does not
  look for it in an ElectLeaders answer, whose top-level error fails the call;
* the broker a resource names: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs of a
  BROKER resource other than the cluster default (``""``), and of a BROKER_LOGGER, one request per
  resource; the other resources (TOPIC, the BROKER default) in one request to any broker;
* each partition's leader, one request per leader: ListOffsets, DeleteRecords, DescribeProducers.
  Partitions answered with a stale-metadata error (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE...)
  or another retriable one are looked up again and retried until ``default_api_timeout`` runs out, and
  so, for DeleteRecords and DescribeProducers, is a topic or partition the metadata does not know yet (it
  may just have been created; Kafka's Admin waits for it the same way); ListOffsets fails on an unknown
  topic at once, as Kafka's does;
* each broker asked about: DescribeLogDirs.

A lost connection or a timed-out request is retried until ``default_api_timeout`` (Kafka's
``default.api.timeout.ms``, 60 s) runs out; a call whose time ran out raises the error it was retrying
for (Kafka's Admin raises a TimeoutException). Two departures fail at once where Kafka's Admin waits for
the timeout: ListOffsets of a partition the fresh metadata does not list (UNKNOWN_TOPIC_OR_PARTITION), and
a resource's broker missing from the metadata (BROKER_NOT_AVAILABLE).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from ..protocol import ApiKey, KafkaError, errors as kerrors
from ..protocol.messages import message_class
from .cluster import STALE_METADATA, ZERO_UUID, Cluster, TopicInfo
from .offsets import READ_UNCOMMITTED, OffsetAndTimestamp, _ask as _ask_offsets, offset_spec
from .retry import Deadline, is_retriable, retry_async

if TYPE_CHECKING:  # built at run time by message_class()
    from ..protocol.messages import (
        CreatePartitionsResponse,
        CreateTopicsResponse,
        DeleteRecordsResponse,
        DeleteTopicsResponse,
        DescribeConfigsResponse,
        DescribeLogDirsResponse,
        DescribeProducersResponse,
        ElectLeadersResponse,
    )

# Connection.request decodes an answer with its API's response class and returns None only for a request
# without a response on the wire (Produce with acks=0): the casts below name the class it returns.

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8

# ElectLeaders' election types
PREFERRED = 0
UNCLEAN = 1

# IncrementalAlterConfigs' operations
SET = 0
DELETE = 1
APPEND = 2
SUBTRACT = 3

# DeleteRecords: delete up to the high watermark (every record a consumer can read)
HIGH_WATERMARK = -1

# a partition's Metadata errors that mean "look it up again" (Java's PartitionLeaderStrategy); others fail it
_LOOKUP_AGAIN = frozenset(
    {
        kerrors.NOT_LEADER_OR_FOLLOWER,
        kerrors.REPLICA_NOT_AVAILABLE,
        kerrors.LEADER_NOT_AVAILABLE,
        kerrors.BROKER_NOT_AVAILABLE,
        kerrors.KAFKA_STORAGE_ERROR,
        kerrors.UNKNOWN_TOPIC_OR_PARTITION,
    }
)
# retries are bounded by the deadline, as the Java Admin's are (its retries default to Integer.MAX_VALUE)
_UNTIL_DEADLINE = 1 << 30

TP = tuple[str, int]


class ConfigResource(NamedTuple):
    """A config resource: ``ConfigResource(RESOURCE_BROKER, "2")``; a plain ``(type, name)`` tuple works too."""

    type: int
    name: str


class AlterConfigOp(NamedTuple):
    """One IncrementalAlterConfigs change: ``op`` is SET, DELETE, APPEND or SUBTRACT (list configs)."""

    name: str
    value: str | None = None
    op: int = SET


@dataclass
class NewPartitions:
    """CreatePartitions: grow a topic to ``total_count`` partitions; ``assignments``: the replicas of each new one."""

    total_count: int
    assignments: list[list[int]] | None = None


class ReplicaInfo(NamedTuple):
    size: int
    offset_lag: int
    is_future: bool


@dataclass
class LogDirDescription:
    """One log directory of a broker (DescribeLogDirs); ``error`` set when the directory is offline."""

    error: KafkaError | None
    replicas: dict[TP, ReplicaInfo]
    total_bytes: int = -1
    usable_bytes: int = -1


class ProducerState(NamedTuple):
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


def _resource(r) -> ConfigResource:
    return r if isinstance(r, ConfigResource) else ConfigResource(int(r[0]), str(r[1]))


def _node_for(resource: ConfigResource) -> int | None:
    """The broker a resource must be sent to, or None for any broker (Java's ``nodeFor``)."""
    if (resource.type == RESOURCE_BROKER and resource.name != "") or resource.type == RESOURCE_BROKER_LOGGER:
        return int(resource.name)
    return None


def _ops(changes) -> list[AlterConfigOp]:
    """``{name: value}`` (SET; None: DELETE) or a list of ``AlterConfigOp`` -> the list."""
    if isinstance(changes, Mapping):
        return [
            AlterConfigOp(k, None, DELETE) if v is None else AlterConfigOp(k, str(v), SET) for k, v in changes.items()
        ]
    return [c if isinstance(c, AlterConfigOp) else AlterConfigOp(*c) for c in changes]


def _error(code: int, message: str | None, fallback: str) -> KafkaError | None:
    return KafkaError(code, message or fallback) if code else None


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: the broker's default
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)


class AsyncAdmin:
    """``async with AsyncAdmin("127.0.0.1:9092") as admin: await admin.create_topics([...])``.

    ``default_api_timeout``: how long a call retries (Kafka's ``default.api.timeout.ms``, 60 s).
    """

    def __init__(
        self,
        bootstrap="127.0.0.1:9092",
        *,
        cluster: Cluster | None = None,
        default_api_timeout: float = 60.0,
        **cluster_options,
    ):
        self._own_cluster = cluster is None
        self.cluster = cluster or Cluster(bootstrap, **cluster_options)
        self.default_api_timeout = default_api_timeout

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def close(self):
        if self._own_cluster:
            await self.cluster.close()

    # -- routing -------------------------------------------------------------------

    async def _controller_call(self, request, *, timeout: float, not_controller: Callable[[Any], bool]):
        """``request`` (or ``request(connection)``, to build it for that broker) to the controller; retried on
        a lost connection and, when ``not_controller(answer)``, on NOT_CONTROLLER, each time after forgetting
        the controller so that it is looked up again."""
        cluster = self.cluster

        async def once():
            conn = await cluster.controller()
            body = request(conn) if callable(request) else request
            answer = await conn.request(body, timeout=timeout + cluster.request_timeout)
            if not_controller(answer):
                raise KafkaError(kerrors.NOT_CONTROLLER, f"{type(body).__name__} to node {conn.node_id}")
            return answer

        def forget(exc, attempt):
            cluster.controller_id = -1  # cluster.controller() refreshes the metadata first

        return await retry_async(
            once, retries=_UNTIL_DEADLINE, backoff=cluster.backoff, timeout=self.default_api_timeout, on_retry=forget
        )

    async def _node_call(self, node: int | None, request):
        """``request`` to broker ``node`` (None: any broker), retried on a lost connection or a timeout."""
        cluster = self.cluster

        async def once():
            conn = await (cluster.connection(node) if node is not None else cluster.any_connection())
            return await conn.request(request)

        return await retry_async(
            once, retries=_UNTIL_DEADLINE, backoff=cluster.backoff, timeout=self.default_api_timeout
        )

    async def _per_leader(
        self,
        tps: Iterable[TP],
        ask: Callable[[int, list[TP]], Awaitable[dict[TP, tuple[int, Any]]]],
        what: str,
        *,
        tolerate_unknown_topics: bool,
    ) -> tuple[dict[TP, Any], dict[TP, KafkaError]]:
        """Send each partition to its leader, one ``ask(node, partitions)`` per leader, until every partition
        has an answer or ``default_api_timeout`` runs out. ``ask`` returns ``{tp: (error code, value)}``.

        -> ({tp: value}, {tp: error}). A stale-metadata or retriable error looks the partition up again.
        ``tolerate_unknown_topics``: a topic or partition the metadata does not know is looked up again too
        (until the timeout: it may just have been created), as Kafka's PartitionLeaderStrategy does by default.
        """
        cluster = self.cluster
        pending = dict.fromkeys(tps)
        done: dict[TP, Any] = {}
        failed: dict[TP, KafkaError] = {}
        last: dict[TP, KafkaError] = {}  # the error a partition is retried for: raised if time runs out
        deadline = Deadline(self.default_api_timeout)
        attempt = 0
        while pending:
            by_leader = await self._leaders(
                list(pending), failed, last, fresh=attempt > 0, tolerate_unknown_topics=tolerate_unknown_topics
            )
            for tp in failed:
                pending.pop(tp, None)
            nodes = list(by_leader.items())
            answers = await asyncio.gather(*(ask(n, ps) for n, ps in nodes), return_exceptions=True)
            for (node, asked), answer in zip(nodes, answers):
                if isinstance(answer, BaseException):
                    if not (is_retriable(answer) or getattr(answer, "code", None) in STALE_METADATA):
                        raise answer
                    for tp in asked:
                        last[tp] = (
                            answer
                            if isinstance(answer, KafkaError)
                            else KafkaError(kerrors.NETWORK_EXCEPTION, str(answer))
                        )
                    continue
                for tp in asked:
                    if tp not in answer:
                        failed[tp] = KafkaError(
                            kerrors.UNKNOWN_SERVER_ERROR, f"{what}: node {node} did not answer for {tp}"
                        )
                        pending.pop(tp, None)
                        continue
                    code, value = answer[tp]
                    if not code:
                        done[tp] = value
                        pending.pop(tp, None)
                    elif code in STALE_METADATA or KafkaError(code).retriable:
                        last[tp] = KafkaError(code, f"{what} {tp[0]}-{tp[1]} on node {node}")
                        cluster.handle_error(code, tp[0])
                    else:
                        failed[tp] = KafkaError(code, f"{what} {tp[0]}-{tp[1]}")
                        pending.pop(tp, None)
            if not pending:
                break
            attempt += 1
            delay = cluster.backoff.delay(attempt)
            if (deadline.remaining() or 0) <= delay:
                for tp in pending:
                    failed[tp] = last.get(tp) or KafkaError(kerrors.REQUEST_TIMED_OUT, f"{what} {tp[0]}-{tp[1]}")
                break
            await asyncio.sleep(delay)
        return done, failed

    async def _leaders(
        self, tps: list[TP], failed: dict, last: dict, *, fresh: bool, tolerate_unknown_topics: bool
    ) -> dict[int, list[TP]]:
        """{leader: partitions} from the metadata (refreshed when ``fresh`` or when a topic is not cached);
        partitions of unknown topics go to ``failed``, leaderless ones stay out (retried)."""
        cluster = self.cluster
        topics = sorted({t for t, _ in tps})
        topic_errors: dict[str, int] = {}
        if fresh or cluster.metadata_age >= cluster.metadata_max_age or any(t not in cluster.topics for t in topics):
            answer = await cluster.refresh(topics, auto_create=False)
            topic_errors = {t.name: t.error_code for t in answer.topics}
        by_leader: dict[int, list[TP]] = defaultdict(list)
        for tp in tps:
            topic, index = tp
            info = cluster.topics.get(topic)
            code = topic_errors.get(topic, 0)
            if info is None or (code and code != kerrors.LEADER_NOT_AVAILABLE):
                code = code or kerrors.UNKNOWN_TOPIC_OR_PARTITION
                retry = (kerrors.LEADER_NOT_AVAILABLE, kerrors.BROKER_NOT_AVAILABLE)
                if code in retry or (tolerate_unknown_topics and code == kerrors.UNKNOWN_TOPIC_OR_PARTITION):
                    last[tp] = KafkaError(code, f"topic {topic!r}")
                else:
                    failed[tp] = KafkaError(code, f"topic {topic!r}")
                continue
            p = info.partitions.get(index)
            if p is None:
                (last if tolerate_unknown_topics else failed)[tp] = KafkaError(
                    kerrors.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{index}"
                )
            elif p.error_code and p.error_code not in _LOOKUP_AGAIN:
                failed[tp] = KafkaError(p.error_code, f"{topic}-{index}")
            elif p.error_code or p.leader < 0:
                last[tp] = KafkaError(p.error_code or kerrors.LEADER_NOT_AVAILABLE, f"{topic}-{index}")
            else:
                by_leader[p.leader].append(tp)
        return by_leader

    @staticmethod
    def _raise_first(results, raise_errors):
        if raise_errors:
            for err in results.values():
                if isinstance(err, KafkaError):
                    raise err

    # -- topics ------------------------------------------------------------------

    async def create_topics(
        self,
        topics: list[NewTopic | str],
        *,
        timeout: float = 30.0,
        validate_only: bool = False,
        raise_errors: bool = True,
        wait: bool = True,
    ) -> dict[str, KafkaError | None]:
        """Create topics. ``wait``: return only once the metadata shows them with leaders."""
        cls = message_class("CreateTopicsRequest")
        items = [NewTopic(t) if isinstance(t, str) else t for t in topics]
        req = cls(
            topics=[
                cls.CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    assignments=[],
                    configs=[cls.CreatableTopicConfig(name=k, value=str(v)) for k, v in t.configs.items()],
                )
                for t in items
            ],
            timeout_ms=int(timeout * 1000),
            validate_only=validate_only,
        )
        resp = cast(
            "CreateTopicsResponse",
            await self._controller_call(
                req,
                timeout=timeout,
                not_controller=lambda r: any(t.error_code == kerrors.NOT_CONTROLLER for t in r.topics),
            ),
        )
        results = {r.name: (KafkaError(r.error_code, r.error_message) if r.error_code else None) for r in resp.topics}
        self._raise_first(results, raise_errors)
        if wait and not validate_only:
            created = [n for n, e in results.items() if e is None]
            if created:
                await self._wait_for(created, present=True, timeout=timeout)
        return results

    async def delete_topics(
        self, names: list[str], *, timeout: float = 30.0, raise_errors: bool = True, wait: bool = True
    ) -> dict[str, KafkaError | None]:
        cls = message_class("DeleteTopicsRequest")
        req = cls(
            topics=[cls.DeleteTopicState(name=n, topic_id=ZERO_UUID) for n in names],
            topic_names=list(names),
            timeout_ms=int(timeout * 1000),
        )
        resp = cast(
            "DeleteTopicsResponse",
            await self._controller_call(
                req,
                timeout=timeout,
                not_controller=lambda r: any(t.error_code == kerrors.NOT_CONTROLLER for t in r.responses),
            ),
        )
        results = {}
        for r in resp.responses:
            name = r.name if r.name is not None else self.cluster.topic_names.get(r.topic_id, str(r.topic_id))
            results[name] = KafkaError(r.error_code, r.error_message) if r.error_code else None
        self._raise_first(results, raise_errors)
        for n, e in results.items():
            if e is None:
                self.cluster.topics.pop(n, None)
        if wait:
            deleted = [n for n, e in results.items() if e is None]
            if deleted:
                await self._wait_for(deleted, present=False, timeout=timeout)
        return results

    async def create_partitions(
        self,
        new_partitions: Mapping[str, int | NewPartitions],
        *,
        timeout: float = 30.0,
        validate_only: bool = False,
        raise_errors: bool = True,
        wait: bool = True,
    ) -> dict[str, KafkaError | None]:
        """Grow topics: ``{topic: total partition count or NewPartitions}`` -> {topic: error or None}.

        Sent to the controller. ``wait``: return only once the metadata shows the new partitions with leaders.
        """
        cls = message_class("CreatePartitionsRequest")
        items = {t: n if isinstance(n, NewPartitions) else NewPartitions(int(n)) for t, n in new_partitions.items()}
        req = cls(
            topics=[
                cls.CreatePartitionsTopic(
                    name=t,
                    count=n.total_count,
                    assignments=None
                    if n.assignments is None
                    else [cls.CreatePartitionsAssignment(broker_ids=list(a)) for a in n.assignments],
                )
                for t, n in items.items()
            ],
            timeout_ms=int(timeout * 1000),
            validate_only=validate_only,
        )
        resp = cast(
            "CreatePartitionsResponse",
            await self._controller_call(
                req,
                timeout=timeout,
                not_controller=lambda r: any(t.error_code == kerrors.NOT_CONTROLLER for t in r.results),
            ),
        )
        results = {
            r.name: _error(r.error_code, r.error_message, f"create partitions of {r.name}") for r in resp.results
        }
        for t in items:
            if t not in results:  # as Kafka's Admin: a topic the answer leaves out fails
                results[t] = KafkaError(kerrors.UNKNOWN_SERVER_ERROR, f"the controller did not answer for {t!r}")
        self._raise_first(results, raise_errors)
        if wait and not validate_only:
            grown = {t: items[t].total_count for t, e in results.items() if e is None}
            if grown:
                await self._wait_for(list(grown), present=True, timeout=timeout, counts=grown)
        return results

    async def _wait_for(self, names, *, present: bool, timeout: float, counts: dict[str, int] | None = None):
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        delay = 0.02
        while True:
            resp = await self.cluster.refresh(list(names), auto_create=False)
            state = {
                t.name: (
                    t.error_code == 0
                    and bool(t.partitions)
                    and all(p.leader_id >= 0 for p in t.partitions)
                    and (counts is None or len(t.partitions) >= counts.get(t.name, 0))
                )
                for t in resp.topics
            }
            if all(state.get(n, False) == present for n in names):
                return
            if loop.time() >= end:
                return  # the broker said yes; metadata propagation is slow, not an error here
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        await self.cluster.refresh(all_topics=True)
        return sorted(n for n, t in self.cluster.topics.items() if include_internal or not t.is_internal)

    async def describe_topics(self, names: list[str] | None = None) -> dict[str, TopicInfo]:
        """Topic metadata (partitions, leaders, replicas, ISR); unknown topics raise."""
        if names is None:
            await self.cluster.refresh(all_topics=True)
            return dict(sorted(self.cluster.topics.items()))
        resp = await self.cluster.refresh(list(names), auto_create=False)
        for t in resp.topics:
            if t.error_code and t.error_code != kerrors.LEADER_NOT_AVAILABLE:
                raise KafkaError(t.error_code, f"topic {t.name!r}")
        return {n: self.cluster.topics[n] for n in names}

    async def describe_cluster(self) -> dict:
        await self.cluster.refresh()
        return {
            "cluster_id": self.cluster.cluster_id,
            "controller_id": self.cluster.controller_id,
            "brokers": sorted(self.cluster.brokers.values(), key=lambda b: b.node_id),
        }

    # -- leaders -------------------------------------------------------------------

    async def elect_leaders(
        self, election_type: int | str = PREFERRED, partitions: Iterable[TP] | None = None, *, timeout: float = 30.0
    ) -> dict[TP, KafkaError | None]:
        """Elect leaders (``PREFERRED`` or ``UNCLEAN``, or their names) of ``partitions`` (None: every partition).

        Sent to the controller. -> {(topic, partition): None if elected, else its error}, as the Java
        Admin's ``partitions()``: ELECTION_NOT_NEEDED when the leader already is the one asked for,
        ELIGIBLE_LEADERS_NOT_AVAILABLE / PREFERRED_LEADER_NOT_AVAILABLE when none can lead. A top-level
        error (v1+) raises, as Kafka's Admin fails the whole call.
        """
        if isinstance(election_type, str):
            election_type = {"preferred": PREFERRED, "unclean": UNCLEAN}[election_type.lower()]
        cls = message_class("ElectLeadersRequest")
        wanted: dict[str, list[int]] | None = None
        if partitions is not None:
            wanted = defaultdict(list)
            for topic, index in partitions:
                wanted[topic].append(int(index))

        def request(conn):
            if election_type != PREFERRED and conn.version_for(ApiKey.ELECT_LEADERS) < 1:
                raise KafkaError(kerrors.UNSUPPORTED_VERSION, "an unclean election needs ElectLeaders v1")
            return cls(
                election_type=election_type,
                topic_partitions=None
                if wanted is None
                else [cls.TopicPartitions(topic=t, partitions=ps) for t, ps in wanted.items()],
                timeout_ms=int(timeout * 1000),
            )

        resp = cast(
            "ElectLeadersResponse",
            await self._controller_call(request, timeout=timeout, not_controller=lambda r: False),
        )
        if resp.error_code:
            raise KafkaError(resp.error_code, "ElectLeaders")
        return {
            (r.topic, p.partition_id): _error(
                p.error_code, p.error_message, f"elect leader of {r.topic}-{p.partition_id}"
            )
            for r in resp.replica_election_results
            for p in r.partition_result
        }

    # -- offsets and records ---------------------------------------------------------

    async def list_offsets(
        self, specs: dict[tuple[str, int], int | str], *, isolation_level: int = READ_UNCOMMITTED
    ) -> dict[tuple[str, int], OffsetAndTimestamp]:
        """{(topic, partition): "earliest" | "latest" | "max_timestamp" | timestamp_ms} -> offsets.

        Asked of each partition's leader; raises the first partition's error.
        """
        wanted = {tp: offset_spec(s) for tp, s in specs.items()}

        def ask(node, tps):
            return _ask_offsets(self.cluster, node, tps, wanted, isolation_level)

        done, failed = await self._per_leader(wanted, ask, "ListOffsets", tolerate_unknown_topics=False)
        self._raise_first(failed, True)
        return done

    async def delete_records(
        self, before: Mapping[TP, int], *, timeout: float | None = None, raise_errors: bool = True
    ) -> dict[TP, int | KafkaError]:
        """Delete the records before an offset: ``{(topic, partition): offset}`` (``HIGH_WATERMARK``: all).

        Sent to each partition's leader. -> {(topic, partition): the new log start offset (low watermark)},
        or with ``raise_errors=False`` its ``KafkaError`` for a partition that failed (OFFSET_OUT_OF_RANGE
        past the high watermark...).
        """
        cls = message_class("DeleteRecordsRequest")
        timeout_ms = int((self.default_api_timeout if timeout is None else timeout) * 1000)

        async def ask(node, tps):
            by_topic: dict[str, list] = defaultdict(list)
            for topic, index in tps:
                by_topic[topic].append(
                    cls.DeleteRecordsPartition(partition_index=index, offset=int(before[(topic, index)]))
                )
            req = cls(
                topics=[cls.DeleteRecordsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                timeout_ms=timeout_ms,
            )
            conn = await self.cluster.connection(node)
            resp = cast(
                "DeleteRecordsResponse",
                await conn.request(req, timeout=timeout_ms / 1000 + self.cluster.request_timeout),
            )
            return {
                (t.name, p.partition_index): (p.error_code, p.low_watermark) for t in resp.topics for p in t.partitions
            }

        done, failed = await self._per_leader(before, ask, "DeleteRecords", tolerate_unknown_topics=True)
        self._raise_first(failed, raise_errors)
        return {tp: done[tp] if tp in done else failed[tp] for tp in before}

    async def describe_producers(
        self, partitions: Iterable[TP], *, broker_id: int | None = None
    ) -> dict[TP, list[ProducerState]]:
        """The active idempotent and transactional producers of partitions, asked of each leader (or of
        ``broker_id``, as the Java Admin's ``brokerId`` option: that broker's replica). Raises the first error."""
        cls = message_class("DescribeProducersRequest")

        async def ask(node, tps):
            by_topic: dict[str, list[int]] = defaultdict(list)
            for topic, index in tps:
                by_topic[topic].append(index)
            req = cls(topics=[cls.TopicRequest(name=t, partition_indexes=ps) for t, ps in by_topic.items()])
            conn = await self.cluster.connection(node)
            resp = cast("DescribeProducersResponse", await conn.request(req))
            return {
                (t.name, p.partition_index): (
                    p.error_code,
                    [
                        ProducerState(
                            s.producer_id,
                            s.producer_epoch,
                            s.last_sequence,
                            s.last_timestamp,
                            s.coordinator_epoch,
                            s.current_txn_start_offset,
                        )
                        for s in p.active_producers
                    ],
                )
                for t in resp.topics
                for p in t.partitions
            }

        tps = list(dict.fromkeys(partitions))
        if broker_id is None:
            done, failed = await self._per_leader(tps, ask, "DescribeProducers", tolerate_unknown_topics=True)
        else:
            answer = await ask(broker_id, tps)
            done = {tp: v for tp, (code, v) in answer.items() if not code}
            failed = {
                tp: KafkaError(code, f"DescribeProducers {tp[0]}-{tp[1]}") for tp, (code, _) in answer.items() if code
            }
        self._raise_first(failed, True)
        return done

    # -- configs -------------------------------------------------------------------

    async def describe_configs(
        self,
        name: str,
        *,
        resource_type: int = RESOURCE_TOPIC,
        keys: list[str] | None = None,
        with_details: bool = False,
    ) -> dict:
        """Configs of a topic (or, with ``resource_type=RESOURCE_BROKER``, a broker id as ``name``).

        A broker's (or BROKER_LOGGER's) are asked of that broker; a topic's and the cluster-wide broker
        default's (``name=""``) of any broker.
        -> {config name: value}, or with ``with_details`` {name: DescribeConfigsResourceResult}.
        """
        cls = message_class("DescribeConfigsRequest")
        req = cls(
            resources=[
                cls.DescribeConfigsResource(
                    resource_type=resource_type, resource_name=str(name), configuration_keys=keys
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        node = _node_for(ConfigResource(resource_type, str(name)))
        resp = cast("DescribeConfigsResponse", await self._node_call(node, req))
        out = {}
        for r in resp.results:
            if r.error_code:
                raise KafkaError(r.error_code, r.error_message or f"describe configs of {name}")
            for c in r.configs:
                out[c.name] = c if with_details else c.value
        return out

    async def incremental_alter_configs(
        self,
        configs: Mapping[Any, Mapping[str, str | None] | Iterable[AlterConfigOp]],
        *,
        validate_only: bool = False,
        raise_errors: bool = True,
    ) -> dict[ConfigResource, KafkaError | None]:
        """Change some configs of resources: ``{(RESOURCE_TOPIC, "events"): {"retention.ms": "1000",
        "cleanup.policy": None}}`` (None deletes) or ``{resource: [AlterConfigOp(name, value, APPEND)]}``.

        A broker's resource goes to that broker, the others in one request to any broker.
        -> {ConfigResource: error or None}.
        """
        cls = message_class("IncrementalAlterConfigsRequest")

        def request(resources):
            return cls(
                resources=[
                    cls.AlterConfigsResource(
                        resource_type=r.type,
                        resource_name=r.name,
                        configs=[
                            cls.AlterableConfig(name=o.name, config_operation=o.op, value=o.value)
                            for o in _ops(changes)
                        ],
                    )
                    for r, changes in resources
                ],
                validate_only=validate_only,
            )

        return await self._alter(configs, request, "IncrementalAlterConfigs", raise_errors)

    async def alter_configs(
        self, configs: Mapping[Any, Mapping[str, str]], *, validate_only: bool = False, raise_errors: bool = True
    ) -> dict[ConfigResource, KafkaError | None]:
        """Replace the dynamic configs of resources (AlterConfigs: a config left out is reset to its default):
        ``{(RESOURCE_BROKER, "2"): {"log.cleaner.threads": "2"}}``. Routed as ``incremental_alter_configs``."""
        cls = message_class("AlterConfigsRequest")

        def request(resources):
            return cls(
                resources=[
                    cls.AlterConfigsResource(
                        resource_type=r.type,
                        resource_name=r.name,
                        configs=[
                            cls.AlterableConfig(name=k, value=None if v is None else str(v)) for k, v in changes.items()
                        ],
                    )
                    for r, changes in resources
                ],
                validate_only=validate_only,
            )

        return await self._alter(configs, request, "AlterConfigs", raise_errors)

    async def _alter(self, configs, request, what: str, raise_errors: bool) -> dict[ConfigResource, KafkaError | None]:
        items = [(_resource(r), changes) for r, changes in configs.items()]
        # one request per broker-bound resource, to that broker; one for all the others, to any broker
        batches: list[tuple[int | None, list]] = [
            (_node_for(r), [(r, c)]) for r, c in items if _node_for(r) is not None
        ]
        rest = [(r, c) for r, c in items if _node_for(r) is None]
        if rest:
            batches.append((None, rest))
        answers = await asyncio.gather(*(self._node_call(node, request(batch)) for node, batch in batches))
        results: dict[ConfigResource, KafkaError | None] = {}
        for (_node, batch), answer in zip(batches, answers):
            got = {
                ConfigResource(r.resource_type, r.resource_name): _error(
                    r.error_code, r.error_message, f"{what} {r.resource_name!r}"
                )
                for r in answer.responses
            }
            for r, _ in batch:
                results[r] = got.get(r, KafkaError(kerrors.UNKNOWN_SERVER_ERROR, f"{what}: no answer for {r}"))
        self._raise_first(results, raise_errors)
        return results

    # -- brokers -------------------------------------------------------------------

    async def describe_log_dirs(self, brokers: Iterable[int] | None = None) -> dict[int, dict[str, LogDirDescription]]:
        """Each broker's log directories and the replicas in them, asked of that broker (default: every
        broker in the metadata). -> {broker id: {log dir: LogDirDescription}}; raises the first error."""
        if brokers is None:
            await self.cluster.refresh()
            brokers = sorted(self.cluster.brokers)
        ids = list(brokers)
        req = message_class("DescribeLogDirsRequest")(topics=None)
        answers = await asyncio.gather(*(self._node_call(b, req) for b in ids))
        out: dict[int, dict[str, LogDirDescription]] = {}
        for b, answer in zip(ids, cast("list[DescribeLogDirsResponse]", answers)):
            dirs = {
                d.log_dir: LogDirDescription(
                    _error(d.error_code, None, f"log dir {d.log_dir} of broker {b}"),
                    {
                        (t.name, p.partition_index): ReplicaInfo(p.partition_size, p.offset_lag, p.is_future_key)
                        for t in d.topics
                        for p in t.partitions
                    },
                    d.total_bytes if d.total_bytes is not None else -1,
                    d.usable_bytes if d.usable_bytes is not None else -1,
                )
                for d in answer.results
            }
            if not dirs:  # as Kafka's Admin: no directory is the top-level error, or (before v3) an authorization one
                code = answer.error_code or kerrors.CLUSTER_AUTHORIZATION_FAILED
                raise KafkaError(code, f"DescribeLogDirs of broker {b}")
            out[b] = dirs
        return out

    async def api_versions(self, node_id: int | None = None) -> dict[int, tuple[int, int]]:
        """The broker's {api_key: (min, max)} as its ApiVersions response said."""
        conn = await (self.cluster.connection(node_id) if node_id is not None else self.cluster.any_connection())
        return dict(conn.broker_versions)
