"""Bootstrap, the metadata cache, leader lookup and one connection per broker.

The cache is refreshed when it is older than ``metadata_max_age``, when a
topic it does not know is asked for, and whenever a caller reports an error
that means the cache is stale (``NOT_LEADER_OR_FOLLOWER``,
``UNKNOWN_TOPIC_OR_PARTITION``, ``LEADER_NOT_AVAILABLE``, ...) through
``invalidate``/``refresh``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..protocol import KafkaError, errors as kerrors
from ..protocol.messages import message_class
from ..security.client import ClientSecurity
from .connection import Connection, ConnectionClosed, RequestTimeout
from .retry import Backoff, Deadline

ZERO_UUID = uuid.UUID(int=0)

# errors that mean "the metadata we acted on is stale: refresh and retry"
STALE_METADATA = frozenset(
    {
        kerrors.NOT_LEADER_OR_FOLLOWER,
        kerrors.UNKNOWN_TOPIC_OR_PARTITION,
        kerrors.LEADER_NOT_AVAILABLE,
        kerrors.FENCED_LEADER_EPOCH,
        kerrors.UNKNOWN_LEADER_EPOCH,
        kerrors.UNKNOWN_TOPIC_ID,
        kerrors.INCONSISTENT_TOPIC_ID,
        kerrors.NOT_CONTROLLER,
        kerrors.BROKER_NOT_AVAILABLE,
        kerrors.REPLICA_NOT_AVAILABLE,
        kerrors.KAFKA_STORAGE_ERROR,
        kerrors.OFFSET_NOT_AVAILABLE,
    }
)


def parse_bootstrap(bootstrap) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` or a list of ``"host:port"`` / ``(host, port)`` -> [(host, port)]."""
    if isinstance(bootstrap, str):
        items = [s.strip() for s in bootstrap.split(",") if s.strip()]
    else:
        items = list(bootstrap)
    out = []
    for item in items:
        if isinstance(item, tuple):
            out.append((item[0], int(item[1])))
            continue
        item = item.removeprefix("PLAINTEXT://").removeprefix("tcp://")
        if item.startswith("["):  # [::1]:9092
            host, _, port = item[1:].partition("]:")
        else:
            host, sep, port = item.rpartition(":")
            if not sep:
                host, port = item, "9092"
        out.append((host or "127.0.0.1", int(port or 9092)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    error_code: int = 0


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    is_internal: bool = False
    error_code: int = 0

    available_partitions: list[int] = field(default_factory=list)  # those with a leader, sorted

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    def available(self) -> list[int]:
        return self.available_partitions


@dataclass
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class Cluster:
    """What the client knows about the cluster, and its connections.

    All methods run on one event loop; create, use and close it there.
    """

    def __init__(
        self,
        bootstrap="127.0.0.1:9092",
        *,
        client_id: str = "kafkawire",
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        metadata_max_age: float = 300.0,
        backoff: Backoff | None = None,
        allow_auto_topic_creation: bool = False,
        max_versions: dict[int, int] | None = None,
        max_in_flight: int = 64,
        security: ClientSecurity | Mapping[str, object] | None = None,
    ):
        self.bootstrap = parse_bootstrap(bootstrap)
        # TLS and SASL from Kafka's client properties (security.protocol, ssl.*, sasl.*), checked here, before
        # any connection
        self.security = security if isinstance(security, ClientSecurity) else ClientSecurity.from_config(security)
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.metadata_max_age = metadata_max_age
        self.backoff = backoff or Backoff()
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.max_versions = max_versions
        self.max_in_flight = max_in_flight
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self._conns: dict[object, Connection] = {}
        self._connecting: dict[object, asyncio.Future] = {}
        self._metadata_at = 0.0
        self._refresh_lock: asyncio.Lock | None = None
        self._closed = False
        self._errors: dict[str, int] = {}  # topic -> error code of its last metadata answer

    # -- connections -----------------------------------------------------------

    def _conn_kwargs(self, node_id):
        return dict(
            client_id=self.client_id,
            request_timeout=self.request_timeout,
            connect_timeout=self.connect_timeout,
            node_id=node_id,
            max_versions=self.max_versions,
            max_in_flight=self.max_in_flight,
            security=self.security,
        )

    async def _open(self, key, host: str, port: int, node_id) -> Connection:
        conn = self._conns.get(key)
        if conn is not None and not conn.closed:
            return conn
        pending = self._connecting.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut = asyncio.get_running_loop().create_future()
        self._connecting[key] = fut
        try:
            conn = await Connection.open(host, port, **self._conn_kwargs(node_id))
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved
            raise
        finally:
            self._connecting.pop(key, None)
        self._conns[key] = conn
        fut.set_result(conn)
        return conn

    async def connection(self, node_id: int) -> Connection:
        """The connection to broker ``node_id`` (opened on first use, reopened after a failure)."""
        if self._closed:
            raise ConnectionClosed("client is closed")
        broker = self.brokers.get(node_id)
        if broker is None:
            await self.refresh()
            broker = self.brokers.get(node_id)
            if broker is None:
                raise KafkaError(kerrors.BROKER_NOT_AVAILABLE, f"broker {node_id} is not in the metadata")
        return await self._open(node_id, broker.host, broker.port, node_id)

    async def any_connection(self) -> Connection:
        """A live connection to some broker: an open one, else a known broker, else a bootstrap server."""
        if self._closed:
            raise ConnectionClosed("client is closed")
        for conn in self._conns.values():
            if not conn.closed:
                return conn
        errors = []
        # (connection key, host, port, node id): a broker's key is its node id, a bootstrap server's its address
        candidates: list[tuple[object, str, int, int | None]] = [
            (b.node_id, b.host, b.port, b.node_id) for b in self.brokers.values()
        ]
        candidates += [(("bootstrap", h, p), h, p, None) for h, p in self.bootstrap]
        for key, host, port, node in candidates:
            try:
                return await self._open(key, host, port, node)
            except (OSError, TimeoutError) as exc:
                errors.append(f"{host}:{port}: {exc}")
        raise ConnectionClosed("no broker reachable: " + "; ".join(errors))

    async def controller(self) -> Connection:
        if self.controller_id < 0 or self.controller_id not in self.brokers:
            await self.refresh()
        if self.controller_id >= 0 and self.controller_id in self.brokers:
            return await self.connection(self.controller_id)
        return await self.any_connection()

    async def close(self) -> None:
        self._closed = True
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            await conn.close()

    # -- metadata --------------------------------------------------------------

    @property
    def metadata_age(self) -> float:
        return time.monotonic() - self._metadata_at

    async def refresh(
        self, topics: list[str] | None = None, *, auto_create: bool | None = None, all_topics: bool = False
    ):
        """Fetch metadata for ``topics`` (default: the topics already cached; ``all_topics``: every topic)."""
        if self._refresh_lock is None:
            self._refresh_lock = asyncio.Lock()
        if topics is None and not all_topics:
            topics = list(self.topics)
        auto = self.allow_auto_topic_creation if auto_create is None else auto_create
        async with self._refresh_lock:
            return await self._with_retries(lambda: self._refresh_once(topics, auto, all_topics), attempts=3)

    async def _with_retries(self, fn, attempts: int):
        for attempt in range(1, attempts + 1):
            try:
                return await fn()
            except (OSError, TimeoutError):  # connection trouble: try again, maybe another broker
                if attempt == attempts:
                    raise
                await asyncio.sleep(self.backoff.delay(attempt))

    async def _refresh_once(self, topics, auto_create: bool, all_topics: bool):
        conn = await self.any_connection()
        req_cls = message_class("MetadataRequest")
        if all_topics:
            req_topics = None
        else:
            req_topics = [req_cls.MetadataRequestTopic(name=t, topic_id=ZERO_UUID) for t in topics]
        req = req_cls(topics=req_topics, allow_auto_topic_creation=auto_create)
        resp = await conn.request(req)
        self._apply(resp, all_topics)
        return resp

    def _apply(self, resp, replace_all: bool) -> None:
        if resp.brokers:
            self.brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
        self.cluster_id = resp.cluster_id
        self.controller_id = resp.controller_id if resp.controller_id is not None else -1
        if replace_all:
            self.topics = {}
            self.topic_names = {}
        for t in resp.topics:
            if t.error_code and t.error_code != kerrors.LEADER_NOT_AVAILABLE:
                # unknown or failed: forget what we knew about it, keep the error for callers
                old = self.topics.pop(t.name, None)
                if old is not None:
                    self.topic_names.pop(old.topic_id, None)
                self._errors[t.name] = t.error_code
                continue
            self._errors.pop(t.name, None)
            info = TopicInfo(t.name, t.topic_id or ZERO_UUID, is_internal=bool(t.is_internal), error_code=t.error_code)
            for p in t.partitions or []:
                info.partitions[p.partition_index] = PartitionInfo(
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch if p.leader_epoch is not None else -1,
                    list(p.replica_nodes or []),
                    list(p.isr_nodes or []),
                    p.error_code,
                )
            info.available_partitions = sorted(p for p, pi in info.partitions.items() if pi.leader >= 0)
            self.topics[t.name] = info
            if info.topic_id != ZERO_UUID:
                self.topic_names[info.topic_id] = t.name
        self._metadata_at = time.monotonic()

    def invalidate(self, topic: str | None = None) -> None:
        """Mark the cache stale (for one topic, or all); the next lookup refreshes it."""
        if topic is None:
            self._metadata_at = 0.0
        else:
            info = self.topics.get(topic)
            if info is not None:
                info.error_code = -1  # forces a refresh on the next topic() call

    async def topic(self, name: str, *, auto_create: bool | None = None, timeout: float | None = None) -> TopicInfo:
        """Metadata for one topic; waits (with backoff) while it is being created or has no leader.

        Raises ``KafkaError(UNKNOWN_TOPIC_OR_PARTITION)`` when the topic does not exist after ``timeout``.
        """
        deadline = Deadline(self.request_timeout if timeout is None else timeout)
        attempt = 0
        while True:
            info = self.topics.get(name)
            fresh = self.metadata_age < self.metadata_max_age
            if (
                info is not None
                and fresh
                and info.error_code == 0
                and info.partitions
                and all(p.leader >= 0 for p in info.partitions.values())
            ):
                return info
            if attempt:
                code = self._errors.get(name, kerrors.LEADER_NOT_AVAILABLE)
                retriable = code in STALE_METADATA or KafkaError(code).retriable
                delay = self.backoff.delay(attempt)
                if not retriable or (deadline.remaining() or 0) <= delay:
                    if info is not None and info.partitions:
                        return info  # some partitions have no leader: let the caller deal with them
                    raise KafkaError(code, f"topic {name!r}")
                await asyncio.sleep(delay)
            attempt += 1
            await self.refresh(sorted(set(self.topics) | {name}), auto_create=auto_create)

    async def leader(self, topic: str, partition: int) -> int:
        info = await self.topic(topic)
        p = info.partitions.get(partition)
        if p is None:
            raise KafkaError(kerrors.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}")
        if p.leader < 0:
            raise KafkaError(kerrors.LEADER_NOT_AVAILABLE, f"{topic}-{partition}")
        return p.leader

    async def leader_connection(self, topic: str, partition: int) -> Connection:
        return await self.connection(await self.leader(topic, partition))

    async def ensure_fresh(self) -> None:
        if self.metadata_age >= self.metadata_max_age:
            await self.refresh()

    def handle_error(self, code: int, topic: str | None = None) -> None:
        """Called by producers/consumers with a partition-level error code: stale metadata -> invalidate."""
        if code in STALE_METADATA:
            self.invalidate(topic)

    async def request_any(self, body, **kw):
        """Send to some broker, retrying once on another connection if this one fails."""
        try:
            conn = await self.any_connection()
            return await conn.request(body, **kw)
        except (ConnectionClosed, RequestTimeout):
            conn = await self.any_connection()
            return await conn.request(body, **kw)
