"""The broker: one node that is leader and only replica of every partition.

``Broker`` owns the storage, the dispatch table and the state that outlives a
request (fetch sessions, idempotent producers, fetch waiters, the group
coordinator: each a package of its own under ``broker/``); ``FramedServer``
puts it on a socket. ``start_in_thread`` runs a whole broker on its own event
loop in a background thread (tests, notebooks).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from kafkawire.net.server import CloseConnection, FramedServer
from kafkawire.protocol import (
    ApiKey,
    DecodeError,
    UnsupportedVersionError,
    api,
    decode_request,
    encode_response_parts,
    errors,
)
from kafkawire.protocol.rpc import peek_request_prefix

from . import dispatch
from .config import BrokerConfig
from .dispatch import RequestContext
from .fetch_sessions import FetchSessionCache
from .fetch_waiters import FetchWaiters
from .groups import GroupConfig, GroupCoordinator, LoopScheduler
from .producer_state import ProducerStateManager
from .producer_state.state import PRODUCER_ID_EXPIRATION_MS
from .storage.base import Storage
from .storage.engines import open_engine
from .transactions import TransactionCoordinator, TxnConfig
from .transactions.markers import BrokerMarkerWriter

log = logging.getLogger("kafkawire.broker")

# topic changes: a connection's later requests wait for their answer, as Kafka reads nothing more from a
# connection until it has answered its request (so a Metadata pipelined after CreateTopics sees the topic)
TOPIC_CHANGES = frozenset({ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS})
_BARRIER = "kafkawire.broker.topic-change"
# how long a stopping broker waits for the appends under way in its storage threads: they take milliseconds
STOP_STORAGE_WAIT_S = 1.0
# how long a stopping broker waits for its listeners' connections to close
STOP_LISTENERS_WAIT_S = 1.0


def open_storage(config: BrokerConfig) -> Storage:
    """The engine the configuration names (``segments`` on disk by default, or ``memory``); an engine that
    cannot load stops the start with the reason (``EngineUnavailableError``), never a quiet switch to memory."""
    props = config.storage_properties()
    props["node.id"] = str(config.node_id)
    if not config.acks_all_fsync:
        props["kafkawire.log.fsync.acks.all"] = "false"
    return open_engine(config.storage, config.data_dir, props)


class PartitionQueue:
    """Storage work waiting for one partition (see ``Broker.submit_append``)."""

    __slots__ = ("pending", "running")

    def __init__(self):
        self.pending: list = []
        self.running = False


def _run_group(group) -> list:
    """In a storage thread: run a partition's queued appends in order, one fsync for the group."""
    need_sync = any(durable for _plog, _fn, durable, _fut in group)
    out, synced = [], False
    last = len(group) - 1
    for i, (_plog, fn, _durable, _fut) in enumerate(group):
        try:
            result, synced_now = fn(need_sync and i == last)
            out.append((True, result))
            synced = synced_now
        except BaseException as exc:  # reported to that request only
            out.append((False, exc))
            synced = False
    if need_sync and not synced:  # the last one failed or was a duplicate: fsync what the group wrote
        try:
            group[-1][0].flush()
        except BaseException as exc:
            out = [(False, exc) if ok else (ok, v) for ok, v in out]
    return out


def _answer(entries, results) -> None:
    """Each queued append's future gets its result (or its error) from the storage thread's run."""
    for (*_, fut), (ok, value) in zip(entries, results):
        if not fut.done():
            fut.set_result(value) if ok else fut.set_exception(value)


def _fail(entries, failure: BaseException) -> None:
    for *_, fut in entries:
        # a loop already closed: the broker stopped without this work (a storage thread that never came back);
        # no one waits on the future any more, and setting it would raise
        if not fut.done() and not fut.get_loop().is_closed():
            fut.set_exception(failure)


def _run_groups(groups) -> list:
    """In a storage thread: ``_run_group`` for each partition's group in turn (one hand-over for them all)."""
    return [_run_group(group) for group in groups]


class Broker:
    def __init__(self, config: BrokerConfig, storage: Storage | None = None):
        from kafkawire.security.listeners import parse_listeners

        self.config = config
        self.node_id = config.node_id
        # every listener checked (TLS contexts built) before anything opens: a listener that cannot be served
        # as configured stops start-up here with the key named (kafkawire.security.listeners)
        self.listeners = parse_listeners(
            config.properties, (config.host, config.port), (config.advertised_host, config.advertised_port)
        )
        self.storage = storage if storage is not None else open_storage(config)
        self.handlers = dispatch.handler_table()  # each handler module imported by its first request
        # Broker-wide state, one owner (a package under broker/) each, created here and reached by handlers
        # through this object: long-poll waiters, fetch sessions, idempotent producers, and the coordinators,
        # which start() creates (they replay their internal topic and run timers on the event loop).
        self.waiters = FetchWaiters()
        self.fetch_sessions = FetchSessionCache()
        self.producers = ProducerStateManager(
            lambda: int(self.config.broker_value("producer.id.expiration.ms")[0] or PRODUCER_ID_EXPIRATION_MS)
        )
        self.storage.producer_state = self.producers  # what its producer snapshots hold
        self.group_coordinator: GroupCoordinator | None = None
        self._scheduler: LoopScheduler | None = None
        self.txn_coordinator: TransactionCoordinator | None = None
        # storage appends run in a thread for engines that touch files, in order per partition
        self.storage_in_thread = self.storage.blocking
        self._executor = (
            ThreadPoolExecutor(max_workers=4, thread_name_prefix="kafkawire-storage")
            if self.storage_in_thread
            else None
        )
        self._queues: dict[tuple[str, int], PartitionQueue] = {}
        self._drains: set[asyncio.Task] = set()  # storage work under way: stop() waits for it before closing
        # topic changes (CreateTopics, DeleteTopics, CreatePartitions) run one at a time in their own thread,
        # as Kafka's controller does them, so that file I/O and fsyncs never hold up the event loop
        self._controller = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafkawire-controller")
        self._controller_lock: asyncio.Lock | None = None
        self.started_ms = int(time.time() * 1000)
        self.server: FramedServer | None = None  # the first listener's (the one --listen sets)
        self.servers: list[FramedServer] = []  # one per listener
        self.metadata_log = _metadata_log(config, self.storage)
        # every partition's current leader epoch (from the metadata log) and epoch history (leader-epoch-checkpoint)
        self.leader_epochs = _leader_epochs(config, self.metadata_log)
        self._epoch_writer: threading.Thread | None = None  # start-up's checkpoint writes (_become_leader)
        self._stopping = False
        self.scram_credentials = _credential_store(config, self.storage)
        # ACLs (kafkawire.security.authorizer) when authorizer.class.name names Kafka's StandardAuthorizer
        self.authorizer = _authorizer(config, self.storage)
        self._background: list[asyncio.Task] = []
        self.metrics = None  # a metrics.BrokerMetrics while kafkawire.metrics.listener / --metrics is set

    # -- addresses ------------------------------------------------------------
    @property
    def advertised(self) -> tuple[str, int]:
        host, port = self.config.advertised
        if self.server is not None and not self.config.advertised_port and self.config.port == 0:
            port = self.server.port
        return host, port

    def advertised_for(self, conn) -> tuple[str, int]:
        """The address a client reaches this broker at on the listener it came in through."""
        server = getattr(conn, "server", None)
        if server is None or getattr(server, "security", None) is None:
            return self.advertised
        from kafkawire.security.serving import advertised_address

        return advertised_address(server.security.listener, server.port)

    @property
    def cluster_id(self) -> str:
        return self.storage.cluster_id

    # -- requests ---------------------------------------------------------------
    def handle(self, payload: bytes, conn):
        """The net layer's handler: a response (list of buffers), None, or an awaitable of either."""
        attributes = getattr(conn, "attributes", None)
        barrier = attributes.get(_BARRIER) if attributes is not None else None
        if barrier is not None:
            if not barrier.done():
                return self._after(barrier, payload, conn)
            del attributes[_BARRIER]
        result = self._handle(payload, conn)
        if (
            attributes is not None
            and type(result) is not list  # an answer made at once (most requests): no inspect
            and inspect.isawaitable(result)
            and peek_request_prefix(payload)[0] in TOPIC_CHANGES
        ):
            result = attributes[_BARRIER] = asyncio.ensure_future(result)
        return result

    async def _after(self, barrier, payload, conn):
        await asyncio.wait([barrier])
        result = self.handle(payload, conn)
        return await result if inspect.isawaitable(result) else result

    def _handle(self, payload: bytes, conn):
        try:
            key, version, correlation_id = peek_request_prefix(payload)
        except DecodeError as exc:
            raise CloseConnection(f"unparsable request header: {exc}") from None
        spec = self.handlers.get(key)
        if spec is None:
            try:
                name = api(key).name
            except KeyError:
                name = "unknown"
            raise CloseConnection(f"unsupported API key {key} ({name}) v{version}, correlation id {correlation_id}")
        if not spec.min_version <= version <= spec.max_version:
            if key == ApiKey.API_VERSIONS:
                from .handlers.versions import unsupported_version_response

                log.warning(
                    "connection %s: ApiVersions v%d is not supported; answering UNSUPPORTED_VERSION",
                    getattr(conn, "id", "?"),
                    version,
                )
                return unsupported_version_response(self, correlation_id)
            raise CloseConnection(
                f"{spec.name} v{version} is outside the supported range "
                f"{spec.min_version}-{spec.max_version}, correlation id {correlation_id}"
            )
        try:
            request = decode_request(payload, framed=False, strict=False)
        except (DecodeError, UnsupportedVersionError) as exc:
            raise CloseConnection(
                f"{spec.name} v{version} request (correlation id {correlation_id}) does not decode: {exc}"
            ) from None
        ctx = RequestContext(request.header, version, conn)
        handler, body_in = spec.fn, request.body
        if self.authorizer is not None:
            refused = self._refused(spec, ctx, request.body)
            if refused is not None:
                return refused
            from kafkawire.security.authorizer.entries import narrow

            body_in, handler = narrow(self, ctx, spec, request.body, handler)  # denied entries answered apart
        metrics = self.metrics
        started = time.perf_counter() if metrics is not None else 0.0
        try:
            body = handler(self, ctx, body_in)
        except CloseConnection:
            raise
        except Exception as exc:
            answer = self._failed(spec, ctx, request.body, exc)
            if metrics is not None:
                metrics.request_done(key, version, started, request.body, None, answer)
            return answer
        if hasattr(type(body), "__await__"):  # a coroutine or future (inspect.isawaitable costs more per request)
            return self._finish_async(spec, ctx, request.body, body, started)
        answer = self._encode(spec, ctx, request.body, body)
        if metrics is not None:
            metrics.request_done(key, version, started, request.body, body, answer)
        return answer

    async def _finish_async(self, spec, ctx, request, pending, started=0.0):
        try:
            response = await pending
        except (CloseConnection, asyncio.CancelledError):
            raise
        except Exception as exc:
            response = None
            answer = self._failed(spec, ctx, request, exc)
        else:
            answer = self._encode(spec, ctx, request, response)
        if self.metrics is not None and started:
            self.metrics.request_done(spec.api_key, ctx.api_version, started, request, response, answer)
        return answer

    def _refused(self, spec, ctx, request):
        """The error answer of a request the authorizer's whole-request checks deny (Kafka's code for the
        resource: CLUSTER_, GROUP_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED); None when it may run."""
        from kafkawire.security.authorizer.rules import denied

        refusal = denied(self, ctx, spec.name, request)
        if refusal is None:
            return None
        code, message = refusal
        log.info(
            "%s v%d denied to %s: %s",
            spec.name,
            ctx.api_version,
            getattr(ctx.connection, "peer", "?"),
            errors.error_for(code).name,
        )
        body = dispatch.error_response(spec.api_key, ctx.api_version, request, code, message)
        return encode_response_parts(ctx.correlation_id, body, ctx.api_version) if body is not None else None

    def _encode(self, spec, ctx, request, response):
        if response is None or isinstance(response, list):
            return response  # no response (acks=0), or one the handler encoded itself
        try:
            return encode_response_parts(ctx.correlation_id, response, ctx.api_version)
        except Exception as exc:
            return self._failed(spec, ctx, request, exc, "its response does not encode")

    def _failed(self, spec, ctx, request, exc, what="the handler failed"):
        """A request failed: answer it as Kafka does, with UNKNOWN_SERVER_ERROR in the error response the
        API's schema gives (``dispatch.error_response``); close the connection only when even that cannot be
        encoded. Either way one line names the API, version, correlation id and client, then the traceback."""
        where = (
            f"{spec.name} v{ctx.api_version} (correlation id {ctx.correlation_id}, client {ctx.client_id!r}, "
            f"connection {getattr(ctx.connection, 'id', '?')} from {getattr(ctx.connection, 'peer', '?')})"
        )
        try:
            body = dispatch.error_response(spec.api_key, ctx.api_version, request, errors.UNKNOWN_SERVER_ERROR)
            answer = encode_response_parts(ctx.correlation_id, body, ctx.api_version) if body is not None else None
        except Exception as second:
            if self.metrics is not None:
                self.metrics.error(spec.api_key, errors.UNKNOWN_SERVER_ERROR)
            log.error(
                "%s: %s (%s: %s), and the error answer does not encode either (%s: %s); closing the connection",
                where,
                what,
                type(exc).__name__,
                exc,
                type(second).__name__,
                second,
                exc_info=exc,
            )
            raise CloseConnection(f"{where}: {what}: {type(exc).__name__}: {exc}") from None
        if answer is None:  # a Produce with acks=0: its client reads no answer, so Kafka closes the connection
            log.error(
                "%s: %s (%s: %s); acks=0, no error answer: closing the connection",
                where,
                what,
                type(exc).__name__,
                exc,
                exc_info=exc,
            )
            if self.metrics is not None:
                self.metrics.error(spec.api_key, errors.UNKNOWN_SERVER_ERROR)
            raise CloseConnection(f"{where}: {what} (acks=0): {type(exc).__name__}: {exc}")
        log.error("%s: %s (%s: %s); answered UNKNOWN_SERVER_ERROR", where, what, type(exc).__name__, exc, exc_info=exc)
        if self.metrics is not None:
            self.metrics.error(spec.api_key, errors.UNKNOWN_SERVER_ERROR)
        return answer

    # -- topic changes ------------------------------------------------------------
    def controller_lock(self) -> asyncio.Lock:
        """Held by a topic-changing request from its validation until its answer: each sees the one before."""
        if self._controller_lock is None:
            self._controller_lock = asyncio.Lock()
        return self._controller_lock

    async def controller_call(self, fn, *args):
        """``fn(*args)`` in the controller thread."""
        return await asyncio.get_running_loop().run_in_executor(self._controller, fn, *args)

    # -- storage work in order per partition -----------------------------------
    def partition_idle(self, topic: str, partition: int) -> bool:
        """No storage work is queued or running for the partition (so work may run inline, in order)."""
        return (topic, partition) not in self._queues

    def submit_append(self, topic: str, partition: int, plog, fn, durable: bool) -> asyncio.Future:
        """Queue ``fn(durable) -> (result, synced)`` for the partition; the future gets ``result``.

        Work of one partition runs in arrival order, in the storage thread pool. Everything queued while the
        previous group ran is taken as one group: its appends go to storage in order and only the last one
        carries ``durable=True`` when any of them needs it, so one fsync covers the whole group (group
        commit) before any of them is acknowledged."""
        key = (topic, partition)
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = PartitionQueue()
        fut = asyncio.get_running_loop().create_future()
        queue.pending.append((plog, fn, durable, fut))
        if not queue.running:
            queue.running = True
            self._start_drain(self._drain(key, queue))
        return fut

    def submit_appends(self, items: list) -> list[asyncio.Future]:
        """``submit_append`` for each (topic, partition, plog, fn, durable) of one request, in one job for the
        partitions with nothing queued (each partition's work still runs in its arrival order: a partition
        busy, or named twice, is queued as ``submit_append`` queues it). An append that must be fsynced runs as
        a job of its own: the request's fsyncs then overlap in the storage threads instead of following each
        other in one (the hand-over saved is small beside an fsync)."""
        if len(items) == 1:
            return [self.submit_append(*items[0])]
        loop = asyncio.get_running_loop()
        futures, together = [], []
        for topic, partition, plog, fn, durable in items:
            key = (topic, partition)
            if durable or key in self._queues:
                futures.append(self.submit_append(topic, partition, plog, fn, durable))
                continue
            queue = self._queues[key] = PartitionQueue()
            queue.running = True
            fut = loop.create_future()
            futures.append(fut)
            together.append((key, queue, (plog, fn, durable, fut)))
        if together:
            self._start_drain(self._drain_together(together))
        return futures

    async def _drain_together(self, together: list) -> None:
        loop = asyncio.get_running_loop()
        entries = [entry for _key, _queue, entry in together]
        stopped = False
        try:
            results = await loop.run_in_executor(self._executor, _run_groups, [[entry] for entry in entries])
            _answer(entries, [result for (result,) in results])
        except BaseException as exc:
            stopped = not isinstance(exc, Exception)  # cancelled: the broker is stopping
            _fail(entries, RuntimeError("broker shutting down") if stopped else exc)
            raise
        finally:
            for key, queue, _entry in together:
                if queue.pending and not stopped:  # work queued meanwhile: the partition's own turn goes on
                    self._start_drain(self._drain(key, queue))
                else:
                    self._end_turn(key, queue)

    def _start_drain(self, work) -> None:
        task = asyncio.ensure_future(work)
        self._drains.add(task)
        task.add_done_callback(self._drains.discard)

    async def _finish_storage_work(self, wait: float) -> bool:
        """Stopping: the appends under way in the storage threads finish and get their answers before storage
        is flushed and closed (listeners are closed by now: no new work comes). Bounded by ``wait`` seconds: a
        disk that never answers does not keep the broker from stopping; the log says what was left. True when
        nothing was."""
        deadline = time.monotonic() + wait
        while self._drains:  # a turn that ends with work queued hands over to a new one
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning("stopping with storage work of %d partition(s) still under way", len(self._queues))
                for task in self._drains:  # their produces get "broker shutting down"; the threads are left
                    task.cancel()
                await asyncio.wait(set(self._drains))
                return False
            await asyncio.wait(set(self._drains), timeout=left)
        return True

    async def _drain(self, key, queue: PartitionQueue) -> None:
        loop = asyncio.get_running_loop()
        group: list = []
        try:
            while queue.pending:
                group = list(queue.pending)
                queue.pending.clear()
                _answer(group, await loop.run_in_executor(self._executor, _run_group, group))
        except BaseException as exc:  # the group in the thread gets no answer: its produces get an error
            _fail(group, exc if isinstance(exc, Exception) else RuntimeError("broker shutting down"))
            raise
        finally:
            self._end_turn(key, queue)

    def _end_turn(self, key, queue: PartitionQueue) -> None:
        """The partition has no storage work running. Work still queued means the broker is stopping (a
        turn ends with its queue empty otherwise): it is failed rather than left waiting."""
        queue.running = False
        _fail(queue.pending, RuntimeError("broker shutting down"))
        queue.pending.clear()
        if self._queues.get(key) is queue:
            del self._queues[key]

    # -- broker-wide state ---------------------------------------------------------
    def _timers(self) -> LoopScheduler:
        """The coordinators' one scheduler on this broker's loop; ``stop()`` closes it before storage."""
        if self._scheduler is None:
            self._scheduler = LoopScheduler(asyncio.get_running_loop())
        return self._scheduler

    def current_group_coordinator(self) -> GroupCoordinator:
        """The group coordinator serving requests now. After ``__consumer_offsets`` was deleted under it (it
        unloaded, as Kafka's does when it loses its partitions) a new one starts from what is left."""
        coord = self.group_coordinator
        if coord is None or coord.unloaded:
            config = GroupConfig.from_properties(getattr(self.config, "properties", {}) or {})
            coord = GroupCoordinator(self.storage, config, self._timers(), leader_epochs=self.leader_epochs)
            coord.start()
            self.group_coordinator = coord
        return coord

    def start_txn_coordinator(self) -> TransactionCoordinator:
        """Create the transaction coordinator, which replays __transaction_state and finishes what it left."""
        config = TxnConfig.from_properties(getattr(self.config, "properties", {}) or {})
        coord = TransactionCoordinator(
            self.storage,
            lambda: self.producers.allocate()[0],
            BrokerMarkerWriter(self),
            config,
            self._timers(),
            groups=lambda: self.group_coordinator,
            leader_epochs=self.leader_epochs,
        )
        self.txn_coordinator = coord
        coord.start()
        return coord

    # -- lifecycle ----------------------------------------------------------------
    async def start(self) -> None:
        if self.metadata_log is not None:  # file reads and fsyncs: in the storage thread
            leading = asyncio.get_running_loop().run_in_executor(self._executor, self._become_leader)
            try:
                _prepare_first_connection()  # while that thread mostly waits for its fsyncs
            finally:
                await leading
        self.current_group_coordinator()  # replays __consumer_offsets before serving
        self.start_txn_coordinator()  # then __transaction_state (completing transactions tells the groups)
        idle_ms = int(self.config.broker_value("connections.max.idle.ms")[0])
        from kafkawire.security.serving import ListenerSecurity, warn_if_open

        try:
            for listener in self.listeners:
                security = ListenerSecurity(listener, self.scram_credentials)
                server = FramedServer(
                    self.handle,
                    listener.host,
                    listener.port,
                    max_frame=self.config.socket_request_max_bytes,
                    max_queued_bytes=self.config.queued_max_request_bytes,
                    idle_timeout=idle_ms / 1000.0 if idle_ms > 0 else None,
                    ssl_context=listener.ssl_context,
                    security=security,
                    name=listener.name,
                )
                security.server = server
                server.on_connection_closed.append(self._connection_closed)
                await server.start()
                self.servers.append(server)
                warn_if_open(listener)
                log.info(
                    "listener %s (%s) on %s:%d", listener.name, listener.protocol, listener.host or "*", server.port
                )
        except BaseException:
            for server in self.servers:
                await server.close()
            raise
        self.server = self.servers[0]
        if self.config.metrics_listener is not None:  # fails closed: no prometheus-client, or the port is taken
            from .metrics import BrokerMetrics

            try:
                metrics = BrokerMetrics(self)
                metrics.serve(*self.config.metrics_listener)
            except BaseException:
                for server in self.servers:
                    await server.close()
                raise
            self.metrics = metrics
            log.info("metrics on http://%s:%d/metrics", self.config.metrics_listener[0] or "*", metrics.port)
        self._background.append(asyncio.ensure_future(self._housekeeping()))
        host, port = self.advertised
        log.info(
            "kafkawire broker %d listening on %s:%d (advertised %s:%d), cluster id %s, storage %s",
            self.node_id,
            self.config.host or "*",
            self.server.port,
            host,
            port,
            self.cluster_id,
            type(self.storage).__name__,
        )

    def _become_leader(self) -> None:
        """Start-up, before serving: this node is elected leader of its partitions again (PartitionChangeRecords,
        each a leader epoch up, as Kafka's controller writes them when a node restarts) and each partition's
        epoch history gets the new epoch at its log end (leader-epoch-checkpoint)."""
        self.metadata_log.become_leader()  # a new quorum epoch opened by a LeaderChange, as each Kafka start
        elected = self.metadata_log.elect_leaders()
        partitions = []
        for name, meta in self.storage.topics().items():
            for p in range(meta.partitions):
                plog = self.storage.partition(name, p)
                self.leader_epochs.cache(name, p, plog)
                partitions.append((name, p, plog))
        if elected:
            log.info("leader of %d partitions again, each one leader epoch up", elected)
        # The checkpoints are written (each durably) in the background, not before serving: 1,000 partitions
        # are 1,000 fsynced files, most of a second. Until a partition's is written its epoch lives in memory
        # (answers use it); the first append in the new epoch writes it first (produce's save), and a crash
        # before then is mended on the next start from the batches' own epochs (_recover_from_batches).
        self._epoch_writer = threading.Thread(
            target=self._write_epoch_checkpoints, args=(partitions,), name="leader-epoch-checkpoints", daemon=True
        )
        self._epoch_writer.start()

    def _write_epoch_checkpoints(self, partitions) -> None:
        for name, p, plog in partitions:
            if self._stopping:
                return  # the stop writes what is left (_resign_leadership)
            try:
                self.leader_epochs.save(name, p, plog)
            except Exception:
                log.exception("writing the leader epoch checkpoint of %s-%d failed", name, p)

    def _resign_leadership(self) -> None:
        """A clean stop: the epoch histories written, then the partitions left leaderless in the metadata log as
        Kafka's controlled shutdown leaves them (the next start, kafkawire's or Kafka's, elects this node)."""
        for name, meta in self.storage.topics().items():
            for p in range(meta.partitions):
                try:
                    self.leader_epochs.save(name, p, self.storage.partition(name, p))
                except Exception:
                    log.exception("writing the leader epoch checkpoint of %s-%d failed", name, p)
        self.metadata_log.resign_leaders()

    def _connection_closed(self, conn) -> None:
        if self.group_coordinator is not None and hasattr(self.group_coordinator, "connection_closed"):
            self.group_coordinator.connection_closed(conn)

    async def _housekeeping(self) -> None:
        """Retention and time-based flushes on a timer."""
        retention_every = int(self.config.broker_value("log.retention.check.interval.ms")[0]) / 1000.0
        last_retention = time.monotonic()
        # an internal config of Kafka's (defined, never described): read from the properties as given
        props = getattr(self.config, "properties", {}) or {}
        expiry_every = int(props.get("producer.id.expiration.check.interval.ms", 600_000)) / 1000.0
        last_expiry = time.monotonic()
        while True:
            await asyncio.sleep(1.0)
            now_ms = int(time.time() * 1000)
            try:
                if self.metadata_log is not None:  # a snapshot due by time starts (written in its own thread)
                    self.metadata_log.maybe_snapshot(now_ms)
                if self._executor is not None:
                    await asyncio.get_running_loop().run_in_executor(self._executor, self.storage.flush_due, now_ms)
                else:
                    self.storage.flush_due(now_ms)
                if time.monotonic() - last_retention >= retention_every:
                    last_retention = time.monotonic()
                    if self._executor is not None:
                        deleted = await asyncio.get_running_loop().run_in_executor(
                            self._executor, self.storage.enforce_retention, now_ms
                        )
                    else:
                        deleted = self.storage.enforce_retention(now_ms)
                    if deleted:
                        log.info("retention deleted %d segments", deleted)
                if time.monotonic() - last_expiry >= expiry_every:
                    last_expiry = time.monotonic()
                    await self._expire_producers(now_ms)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("housekeeping failed")

    async def _expire_producers(self, now_ms: int) -> None:
        """Kafka's periodic producer expiration check: each partition whose producer state is loaded drops its
        idle producers, in the partition's turn of the storage work (after the appends queued before it)."""
        producers, pending = self.producers, []
        for topic, partition in producers.loaded_partitions():
            try:
                plog = self.storage.partition(topic, partition)
            except Exception:  # noqa: BLE001 - deleted since: its state went with it
                continue

            def expire(_durable, topic=topic, partition=partition, plog=plog):
                return producers.remove_expired(topic, partition, now_ms, plog.open_transactions()), False

            if self.storage_in_thread:
                pending.append(self.submit_append(topic, partition, plog, expire, False))
            else:
                expire(False)
        for outcome in await asyncio.gather(*pending, return_exceptions=True):
            if isinstance(outcome, Exception):
                log.warning("producer expiration check failed: %s", outcome)

    async def stop(self, budget: float | None = None) -> None:
        """Stop serving, let the appends under way finish, then flush and close storage.

        ``budget``: seconds for everything stop waits on (listeners closing, the metrics server, the storage
        threads' appends), shared in that order; flushing and closing storage come after and always run, so a
        caller that must be gone within a time passes it here rather than cutting stop() off from outside,
        which would leave storage unflushed and the next start recovering its logs."""
        deadline = None if budget is None else time.monotonic() + budget

        def left(cap: float) -> float:
            return cap if deadline is None else max(0.0, min(cap, deadline - time.monotonic()))

        self._stopping = True
        if self.txn_coordinator is not None:
            self.txn_coordinator.stop()
        for task in self._background:
            task.cancel()
        self._background.clear()
        for server in self.servers:
            await server.close(left(STOP_LISTENERS_WAIT_S))
        if self.metrics is not None:  # its HTTP server stops within its poll interval: off the event loop
            metrics, self.metrics = self.metrics, None
            closing = asyncio.get_running_loop().run_in_executor(None, metrics.close)
            try:
                await asyncio.wait_for(asyncio.shield(closing), None if deadline is None else left(math.inf))
            except TimeoutError:
                log.warning("stopping without waiting for the metrics server to stop")
        self.waiters.wake_all()
        storage_idle = await self._finish_storage_work(left(STOP_STORAGE_WAIT_S))
        if self._scheduler is not None:  # no session expiry or transaction timeout runs against closed storage
            self._scheduler.close()
        self._controller.shutdown(wait=True)  # a topic change under way finishes before storage closes
        try:
            self.storage.flush()
        except Exception:
            log.exception("flushing storage on shutdown failed")
        if self.metadata_log is not None:
            if self._epoch_writer is not None:
                self._epoch_writer.join()
            try:
                self._resign_leadership()
            except Exception:
                log.exception("writing the partitions' leaderless state on shutdown failed")
            self.metadata_log.close()  # a snapshot being written is finished
        try:
            self.storage.close()
        except Exception:
            log.exception("closing storage failed")
        if self._executor is not None:  # a storage thread that never came back is not waited for again
            self._executor.shutdown(wait=storage_idle, cancel_futures=True)
        log.info("kafkawire broker %d stopped", self.node_id)


def _prepare_first_connection() -> None:
    """What a client's first connection needs whatever the client: the API registry (every connection's framing
    reads it), the ApiVersions handler (KIP-35: a client's first request) and response header v0 (KIP-511: every
    ApiVersions answer has it). Made while the storage thread waits for the metadata log's fsyncs, not after
    them while the first client waits (each ~1-5 ms of CPU, all made at the first connection otherwise)."""
    from kafkawire.protocol import all_apis, message_class

    all_apis()
    dispatch.preload(ApiKey.API_VERSIONS)
    message_class("ResponseHeader").codec(0)


def _leader_epochs(config: BrokerConfig, metadata_log):
    from kafkawire.broker.storage.kraft.leader_epochs import LeaderEpochs

    if metadata_log is None:
        return LeaderEpochs(None)

    def partition_dir(topic: str, partition: int) -> str | None:
        path = os.path.join(config.data_dir, f"{topic}-{partition}")  # Kafka's layout, which the engines share
        return path if os.path.isdir(path) else None

    return LeaderEpochs(metadata_log, partition_dir)


def _metadata_log(config: BrokerConfig, storage: Storage):
    """The data directory's KRaft metadata log for engines that keep files (None for the memory engine), with
    the dynamic broker configs it holds applied: the cluster default ("") and this node's."""
    from kafkawire.broker.storage.metadata import metadata_log_of

    if not storage.blocking:
        return None
    metadata_log = metadata_log_of(config.data_dir)
    metadata_log.configure(config.properties)  # snapshot, segment and retention settings
    config.dynamic_default.update(metadata_log.configs(4, ""))
    config.dynamic.update(metadata_log.configs(4, str(config.node_id)))
    config.apply_dynamic()
    return metadata_log


def _credential_store(config: BrokerConfig, storage: Storage):
    """SCRAM credentials in the data directory's KRaft metadata log, as Kafka keeps them, for engines that keep
    files (an older kafkawire's ``__kafkawire_meta/scram-credentials.json`` moved there once); in memory for
    the memory engine."""
    from kafkawire.broker.storage.metadata import metadata_log_of
    from kafkawire.security.scram import CredentialStore

    if not storage.blocking:
        return CredentialStore(None)
    return CredentialStore(
        os.path.join(config.data_dir, "__kafkawire_meta", "scram-credentials.json"),
        metadata_log=metadata_log_of(config.data_dir),
    )


def _authorizer(config: BrokerConfig, storage: Storage):
    """The StandardAuthorizer when ``authorizer.class.name`` names it (ACLs in the KRaft metadata log beside the
    SCRAM credentials, in memory for the memory engine); None otherwise, and ACL requests answer SECURITY_DISABLED, as Kafka's."""
    if not (config.properties.get("authorizer.class.name") or "").strip():
        return None  # unset: the authorizer's package is not imported at all (~3 ms of every start without ACLs)
    from kafkawire.security.authorizer import AclStore, StandardAuthorizer
    from kafkawire.security.authorizer.standard import configured
    from kafkawire.security.authorizer.store import FILE_NAME

    if not configured(config.properties):
        return None
    if not storage.blocking:
        return StandardAuthorizer.from_properties(config.properties, AclStore(None))
    from kafkawire.broker.storage.metadata import metadata_log_of

    store = AclStore(
        os.path.join(config.data_dir, "__kafkawire_meta", FILE_NAME), metadata_log=metadata_log_of(config.data_dir)
    )
    return StandardAuthorizer.from_properties(config.properties, store)


class BrokerThread:
    """A broker on its own event loop in a daemon thread: ``with start_in_thread(cfg) as b: b.port``."""

    def __init__(self, config: BrokerConfig, storage: Storage | None = None):
        self.config = config
        self._storage = storage
        self.loop: asyncio.AbstractEventLoop | None = None
        self.broker: Broker | None = None
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="kafkawire-broker", daemon=True)

    def start(self) -> BrokerThread:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        try:
            self.broker = Broker(self.config, self._storage)
            self.loop.run_until_complete(self.broker.start())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            self.loop.run_forever()
        finally:
            self.loop.run_until_complete(self.broker.stop())
            self.loop.close()
            self._stopped.set()

    @property
    def port(self) -> int:
        return self.broker.server.port

    @property
    def address(self) -> tuple[str, int]:
        return self.config.host or "127.0.0.1", self.port

    @property
    def bootstrap(self) -> str:
        host, port = self.address
        return f"{host}:{port}"

    def call(self, fn, *args):
        """Run ``fn(*args)`` on the broker's loop and return its result (for tests)."""
        import concurrent.futures

        fut: concurrent.futures.Future = concurrent.futures.Future()

        def run():
            try:
                fut.set_result(fn(*args))
            except BaseException as exc:
                fut.set_exception(exc)

        self.loop.call_soon_threadsafe(run)
        return fut.result(10)

    def stop(self) -> None:
        if self.loop is not None and not self._stopped.is_set():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._stopped.wait(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start_in_thread(config: BrokerConfig | None = None, storage: Storage | None = None, **overrides) -> BrokerThread:
    """Start a broker in a background thread (defaults: memory storage, a free port on 127.0.0.1)."""
    if config is None:
        config = BrokerConfig(port=0, storage="memory")
    for key, value in overrides.items():
        setattr(config, key, value)
    return BrokerThread(config, storage).start()


def install_event_loop_policy() -> str:
    """uvloop when installed; returns the loop's name."""
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"
