"""The producer (asyncio core): batching by size and linger, every codec, idempotence.

``send()`` appends a record to the open batch of its partition and returns a
future of its ``RecordMetadata``; a batch is sent when it is full
(``batch_size`` bytes, uncompressed), when it is ``linger_ms`` old, or on
``flush()``. One ProduceRequest per broker carries at most one batch per
partition; requests to different brokers (and for different partitions) are
in flight at the same time.

Idempotence (on by default, as in the Java client since 3.0): the producer
gets a producer id and epoch with InitProducerId, numbers each partition's
batches with sequence numbers, and keeps one batch in flight per partition,
so a retried batch is written once and in order. It needs ``acks=-1``
("all"): it is on by default with acks="all" and off by default with other acks.

Transactions (``transactional_id=``): ``init_transactions()``, then per transaction
``begin_transaction()``, sends, ``send_offsets_to_transaction(offsets, group_metadata)``,
``commit_transaction()`` or ``abort_transaction()``; idempotence is forced on. The
coordinator conversation, the transaction version and the error classes are in
``kafkawire.client.transactions``.

Retries: a batch that fails with a retriable error (``error_for(code).retriable``,
a lost connection or a timeout) is retried with backoff, metadata refreshed
first when the error says it is stale, until ``delivery_timeout`` passes.
Other errors fail the batch's futures with ``KafkaError``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, NamedTuple, cast

from ..protocol import ApiKey, KafkaError, errors as kerrors
from ..protocol.messages import message_class
from ..protocol.records import BatchBuilder, Compression, codec_available
from ..protocol.records.batch import HEADER_SIZE
from .cluster import STALE_METADATA, Cluster, TopicInfo
from .connection import ConnectionClosed, RequestTimeout
from .partitioner import DefaultPartitioner
from .retry import Backoff
from .transactions import TransactionManager

if TYPE_CHECKING:  # built at run time by message_class(); numpy and the columnar records only with send_many
    import numpy as np

    from ..protocol.messages import InitProducerIdResponse, ProduceResponse
    from ..protocol.records.columnar import ColumnarRecords

# answers meaning the broker no longer knows our producer id or its sequences
_PRODUCER_STATE_LOST = frozenset({kerrors.UNKNOWN_PRODUCER_ID, kerrors.OUT_OF_ORDER_SEQUENCE_NUMBER})
NO_TIMESTAMP = -1


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int  # -1 when unknown (acks=0, or a duplicate the broker had already written)
    timestamp: int  # the record's timestamp, or the broker's log append time


class RecordFuture:
    """The result of one record sent through the sync API: ``result(timeout)``, ``done()``, callbacks.

    Lighter than ``concurrent.futures.Future`` (a producer makes one per record): set on the client's
    loop thread, waited for on any thread through one shared condition.
    """

    __slots__ = ("_result", "_done", "_callbacks")
    _cond = threading.Condition()
    _waiters = 0

    def __init__(self):
        self._result = None
        self._done = False
        self._callbacks = None

    def done(self) -> bool:
        return self._done

    def add_done_callback(self, fn) -> None:
        """``fn(future)``, called at once if done, else on the client's loop thread when it is."""
        if self._done:
            fn(self)
            return
        if self._callbacks is None:
            self._callbacks = []
        self._callbacks.append(fn)
        if self._done and fn in self._callbacks:  # finished meanwhile on the loop thread
            self._callbacks.remove(fn)
            fn(self)

    def _set(self, result) -> None:
        if self._done:
            return
        self._result = result
        self._done = True
        callbacks, self._callbacks = self._callbacks, None
        if callbacks:
            for fn in callbacks:
                try:
                    fn(self)
                except Exception:  # a user callback must not break the producer
                    import logging

                    logging.getLogger("kafkawire.client").exception("delivery callback failed")
        if RecordFuture._waiters:
            with RecordFuture._cond:
                RecordFuture._cond.notify_all()

    def _wait(self, timeout):
        if self._done:
            return
        cond = RecordFuture._cond
        with cond:
            RecordFuture._waiters += 1
            try:
                if not cond.wait_for(lambda: self._done, timeout):
                    raise TimeoutError(f"no delivery result within {timeout}s")
            finally:
                RecordFuture._waiters -= 1

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's ``RecordMetadata``; raises its ``KafkaError`` if it failed."""
        self._wait(timeout)
        if isinstance(self._result, BaseException):
            raise self._result
        return self._result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._result if isinstance(self._result, BaseException) else None


class DeliveryGroup:
    """The outcome of ``send_many``: how many records were delivered, how many failed, the first errors.

    ``await group.wait()`` on the loop, ``group.result(timeout)`` from any thread (both return the
    group once every record has its result); ``raise_first()`` raises the first error, if any.
    """

    __slots__ = ("count", "delivered", "failed", "errors", "_done", "_waiters")
    MAX_ERRORS = 20

    def __init__(self, count: int):
        self.count = count
        self.delivered = 0
        self.failed = 0
        self.errors: list[tuple[int | None, BaseException]] = []  # (record index if known, error)
        self._done = count == 0
        self._waiters: list[asyncio.Future] = []

    def done(self) -> bool:
        return self._done

    def _ok(self) -> None:
        self.delivered += 1
        if self.delivered + self.failed >= self.count:
            self._finish()

    def _fail(self, exc: BaseException, index: int | None = None) -> None:
        self.failed += 1
        if len(self.errors) < self.MAX_ERRORS:
            self.errors.append((index, exc))
        if self.delivered + self.failed >= self.count:
            self._finish()

    def _ok_many(self, count: int) -> None:
        """``count`` records of one batch delivered (the Arrow path: one call per batch, not per record)."""
        self.delivered += count
        if self.delivered + self.failed >= self.count:
            self._finish()

    def _fail_many(self, exc: BaseException, count: int) -> None:
        self.failed += count
        if len(self.errors) < self.MAX_ERRORS:
            self.errors.append((None, exc))
        if self.delivered + self.failed >= self.count:
            self._finish()

    def _finish(self) -> None:
        self._done = True
        for w in self._waiters:
            if not w.done():
                w.set_result(self)
        self._waiters = []
        if RecordFuture._waiters:
            with RecordFuture._cond:
                RecordFuture._cond.notify_all()

    async def wait(self) -> DeliveryGroup:
        if not self._done:
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            await fut
        return self

    def result(self, timeout: float | None = None) -> DeliveryGroup:
        if not self._done:
            cond = RecordFuture._cond
            with cond:
                RecordFuture._waiters += 1
                try:
                    if not cond.wait_for(lambda: self._done, timeout):
                        raise TimeoutError(f"records not all delivered within {timeout}s")
                finally:
                    RecordFuture._waiters -= 1
        return self

    def raise_first(self) -> None:
        if self.errors:
            raise self.errors[0][1]

    def __repr__(self):
        return f"<DeliveryGroup {self.delivered}/{self.count} delivered, {self.failed} failed>"


class _Member:
    """The sink shared by the records of one ``send_many`` call."""

    __slots__ = ("group",)

    def __init__(self, group: DeliveryGroup):
        self.group = group

    def _set(self, result) -> None:
        if isinstance(result, BaseException):
            self.group._fail(result)
        else:
            self.group._ok()


def _headers_size(headers) -> int:
    """An upper bound of the encoded size of record headers."""
    return sum(len(k) * 3 + (len(v) if v is not None else 0) + 10 for k, v in headers) + 5


def _acks(value) -> int:
    if value in ("all", "-1", -1):
        return -1
    return int(value)


class _ColumnarJob(NamedTuple):
    """Records of one ``send_many`` call with Arrow columns, for one topic."""

    records: ColumnarRecords
    partitions: np.ndarray | None  # int64 (-1: choose)
    group: DeliveryGroup


class _Plan:
    """Rows of one columnar call put in batches but not yet encoded: per row (in the order the batches take
    them) its offset delta, its batch's base timestamp and its body length; per batch section
    (builder, index of the placeholder in its parts, first row, end row)."""

    __slots__ = ("deltas", "base_ts", "body", "sections")

    def __init__(self, n: int):
        import numpy as np

        self.deltas = np.empty(n, np.int64)
        self.base_ts = np.empty(n, np.int64)
        self.body = np.empty(n, np.int64)
        self.sections: list = []


def _is_arrow(obj) -> bool:
    return type(obj).__module__.startswith("pyarrow")


def _as_pylist(col, n: int) -> list:
    if _is_arrow(col):
        return col.to_pylist()
    return list(col) if len(col) == n else [col] * n


def _int_column(col, n: int, null: int):
    """An int64 numpy array of ``col`` (Arrow array or sequence; nulls/None become ``null``)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if _is_arrow(col):
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ms")).cast(pa.int64())
        col = pc.fill_null(col.cast(pa.int64()), null)
        out = np.array(col.to_numpy(zero_copy_only=False), np.int64)
    else:
        out = np.array([null if v is None else v for v in col], np.int64)
    if len(out) != n:
        raise ValueError("one partition/timestamp per record")
    return out


class _Batch:
    __slots__ = (
        "tp",
        "builder",
        "futures",
        "created",
        "closed",
        "attempts",
        "payload",
        "sequence",
        "deadline",
        "timestamps",
        "size",
        "pid",
        "bulk",
    )

    def __init__(self, tp, builder, deadline):
        self.tp = tp
        self.builder = builder
        self.futures: list[asyncio.Future] = []
        # records appended from columns (send_many with Arrow arrays), after any in ``futures``:
        # (DeliveryGroup, how many), completed once per batch
        self.bulk: list[tuple[DeliveryGroup, int]] = []
        self.timestamps: list[int] = []
        self.created = time.monotonic()
        self.closed = False
        self.attempts = 0
        self.payload: bytes | None = None
        self.sequence = -1
        self.deadline = deadline
        self.size = 0
        self.pid = -1


class AsyncProducer:
    """``async with AsyncProducer("127.0.0.1:9092") as p: fut = await p.send("t", b"v"); await fut``.

    Options (Java client names in brackets): ``acks`` ("all"/-1, 1, 0) [acks], ``compression``
    ("none", "gzip", "snappy", "lz4", "zstd") [compression.type], ``batch_size`` bytes, uncompressed
    [batch.size], ``linger_ms`` [linger.ms], ``enable_idempotence`` [enable.idempotence],
    ``delivery_timeout`` s [delivery.timeout.ms], ``request_timeout`` s [request.timeout.ms],
    ``buffer_memory`` bytes [buffer.memory], ``max_request_size`` bytes per ProduceRequest,
    ``partitioner`` (``DefaultPartitioner``: murmur2 / sticky), ``backoff`` [retry.backoff.ms,
    retry.backoff.max.ms], ``allow_auto_topic_creation``, ``client_id``, ``transactional_id``
    [transactional.id], ``transaction_timeout_ms`` [transaction.timeout.ms], ``max_block`` s
    [max.block.ms: how long a transactional call retries], ``transaction_version`` (at most this
    transaction version; default: what the broker finalized); other keywords go to ``Cluster``
    (``metadata_max_age``, ``connect_timeout``, ``max_versions``, ...).
    """

    def __init__(
        self,
        bootstrap="127.0.0.1:9092",
        *,
        acks="all",
        compression="none",
        batch_size: int = 1 << 20,
        linger_ms: float = 5,
        enable_idempotence: bool | None = None,
        delivery_timeout: float = 120.0,
        request_timeout: float = 30.0,
        buffer_memory: int = 64 << 20,
        partitioner=None,
        client_id: str = "kafkawire-producer",
        backoff: Backoff | None = None,
        max_request_size: int = 16 << 20,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
        max_block: float = 60.0,
        transaction_version: int | None = None,
        cluster: Cluster | None = None,
        allow_auto_topic_creation: bool = True,
        **cluster_options,
    ):
        self.acks = _acks(acks)
        self.compression = Compression.parse(compression)
        if not codec_available(self.compression):
            raise ValueError(f"compression {self.compression.name.lower()} needs a package that is not installed")
        self.batch_size = batch_size
        self.linger = linger_ms / 1000.0
        # as the Java client: on by default with acks=all, off by default otherwise, an error if asked for
        # with acks other than all
        if enable_idempotence and self.acks != -1:
            raise ValueError("enable_idempotence needs acks='all' (-1)")
        if transactional_id is not None and (enable_idempotence is False or self.acks != -1):
            raise ValueError("a transactional producer is idempotent: it needs acks='all' and enable_idempotence")
        self.idempotent = self.acks == -1 if enable_idempotence is None else bool(enable_idempotence)
        self.delivery_timeout = delivery_timeout
        self.request_timeout = request_timeout
        self.buffer_memory = buffer_memory
        self.max_request_size = max_request_size
        self._refreshing: asyncio.Task | None = None
        self._reset_task: asyncio.Task | None = None
        self.partitioner = partitioner or DefaultPartitioner()
        self.backoff = backoff or Backoff()
        self._own_cluster = cluster is None
        self.cluster = cluster or Cluster(
            bootstrap,
            client_id=client_id,
            request_timeout=request_timeout,
            backoff=self.backoff,
            allow_auto_topic_creation=allow_auto_topic_creation,
            **cluster_options,
        )
        self.producer_id = -1
        self.producer_epoch = -1
        self._sequences: dict[tuple[str, int], int] = {}
        self._queues: dict[tuple[str, int], deque[_Batch]] = {}
        self._in_flight: set[tuple[str, int]] = set()
        self._waiting_meta: dict[str, list] = {}  # topic -> records waiting for its metadata
        self._meta_tasks: dict[str, asyncio.Task] = {}
        self._buffered = 0
        self._unfinished = 0  # records sent but not yet completed
        # None until _ensure_loop_objects makes them on the loop (an Event belongs to one loop); every
        # other use runs after it, so they are typed as always there
        self._wakeup: asyncio.Event = None  # type: ignore[assignment]
        self._idle: asyncio.Event = None  # type: ignore[assignment]
        self._space: asyncio.Event = None  # type: ignore[assignment]
        self._sender: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self._flushing = 0
        self._closed = False
        self._init_lock: asyncio.Lock | None = None
        self.transactional_id = transactional_id
        self._txn = (
            TransactionManager(self, transactional_id, transaction_timeout_ms, max_block, transaction_version)
            if transactional_id is not None
            else None
        )

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def start(self) -> None:
        """Connect and (with idempotence) get a producer id. Called by the first ``send`` too."""
        self._ensure_loop_objects()
        if self._txn is not None:
            return  # the producer id comes from init_transactions()
        if self.idempotent and self.producer_id < 0:
            if self._init_lock is None:
                self._init_lock = asyncio.Lock()
            async with self._init_lock:
                if self.producer_id < 0:
                    await self._init_producer_id()

    def _ensure_loop_objects(self):
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
            self._idle = asyncio.Event()
            self._idle.set()
            self._space = asyncio.Event()
            self._space.set()
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send_loop())

    async def _init_producer_id(self) -> None:
        cls = message_class("InitProducerIdRequest")
        attempt = 0
        while True:
            try:
                conn = await self.cluster.any_connection()
                if not conn.supports(ApiKey.INIT_PRODUCER_ID):
                    # a broker older than Kafka 0.11: no idempotence (the Java client would refuse)
                    logging.getLogger("kafkawire.client").warning(
                        "broker %s:%s has no InitProducerId: producing without idempotence", conn.host, conn.port
                    )
                    self.idempotent = False
                    return
                # the timeout is Integer.MAX_VALUE as the Java client sends it without a transactional id
                resp = cast(
                    "InitProducerIdResponse",
                    await conn.request(
                        cls(transactional_id=None, transaction_timeout_ms=0x7FFFFFFF, producer_id=-1, producer_epoch=-1)
                    ),
                )
                if resp.error_code:
                    raise KafkaError(resp.error_code, "InitProducerId")
                self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
                self._sequences.clear()
                return
            except (KafkaError, OSError, TimeoutError) as exc:
                attempt += 1
                retriable = getattr(exc, "retriable", False) or isinstance(exc, OSError)
                if not retriable or attempt > 10:
                    raise
                await asyncio.sleep(self.backoff.delay(attempt))

    # -- transactions ----------------------------------------------------------------

    def _transaction(self) -> TransactionManager:
        if self._txn is None:
            raise RuntimeError("the producer has no transactional_id")
        return self._txn

    async def init_transactions(self) -> None:
        """Get the transactional id's producer id and epoch, fencing any older producer with the same id
        and ending (aborting) what it left open. Once, before the first transaction."""
        txn = self._transaction()
        self._ensure_loop_objects()
        await txn.init()

    def begin_transaction(self) -> None:
        """Start a transaction: what is sent until the commit or abort belongs to it."""
        self._transaction().begin()

    async def send_offsets_to_transaction(self, offsets: dict, group_metadata) -> None:
        """Commit a consumer group's offsets ``{(topic, partition): next offset}`` (or ``(offset, metadata)``)
        with the transaction: visible only if it commits. ``group_metadata``: the consumer's
        ``group_metadata()`` (its generation and member id let the group refuse a member that was
        replaced), or a group id."""
        await self._transaction().send_offsets(offsets, group_metadata)

    async def commit_transaction(self) -> None:
        """Send everything queued, then commit; raises the error if a record or an offset commit of the
        transaction failed (then ``abort_transaction()``)."""
        await self._transaction().end(commit=True)

    async def abort_transaction(self) -> None:
        """Drop the records not sent yet, wait for those in flight, abort: none of it is ever read by a
        read_committed consumer."""
        await self._transaction().end(commit=False)

    def _fail_unsent(self, which, exc: BaseException) -> None:
        """Fail the queued batches of the partitions ``which(tp)`` picks that were never sent."""
        for tp, queue in self._queues.items():
            if not which(tp):
                continue
            in_flight = queue[0] if queue and tp in self._in_flight else None
            for batch in [b for b in queue if b.payload is None and b is not in_flight]:
                queue.remove(batch)  # not _dequeue: the partition's batch in flight stays in flight
                self._buffered -= batch.size
                for fut in batch.futures:
                    self._complete(fut, exc)
                self._complete_bulk(batch, exc)
        if self._space is not None and self._buffered <= self.buffer_memory:
            self._space.set()

    # -- appending -----------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value=None,
        key=None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers=None,
    ) -> asyncio.Future:
        """Queue one record; returns a future of its ``RecordMetadata`` (or a ``KafkaError``).

        Waits only while more than ``buffer_memory`` bytes are queued.
        """
        await self.start()
        while self._buffered > self.buffer_memory:
            self._space.clear()
            self._wakeup.set()
            await self._space.wait()
        return self.send_nowait(topic, value, key, partition=partition, timestamp=timestamp, headers=headers)

    async def send_and_wait(self, topic: str, value=None, key=None, **kw) -> RecordMetadata:
        return await (await self.send(topic, value, key, **kw))

    def send_nowait(
        self,
        topic: str,
        value=None,
        key=None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers=None,
    ) -> asyncio.Future:
        """Like ``send`` but never waits (call on the event loop's thread, after ``start()``)."""
        fut = asyncio.get_running_loop().create_future()
        self._enqueue(topic, value, key, partition, timestamp, headers, fut)
        return fut

    def send_many(self, topic, values, keys=None, *, partitions=None, headers=None, timestamps=None) -> DeliveryGroup:
        """Queue many records in one call (on the loop's thread); returns one ``DeliveryGroup`` for all.

        ``topic``: a name, or one per record; ``values`` a sequence; ``keys``, ``partitions``,
        ``headers``, ``timestamps``: ``None`` or one per record (items may be ``None``). No
        per-record future or metadata object is made: the group counts deliveries and keeps the
        first errors (``await group.wait()`` or, from another thread, ``group.result(timeout)``).
        Queues past ``buffer_memory`` (callers bound what they hand over).

        With ``values`` a pyarrow array (and ``keys``, ``partitions``, ``timestamps`` arrays or ``None``),
        the records go the columnar way (``_send_columns``): no per-record Python.
        """
        if _is_arrow(values):
            return self._send_columns(topic, values, keys, partitions, headers, timestamps)
        n = len(values)
        group = DeliveryGroup(n)
        member = _Member(group)
        enqueue = self._enqueue
        single = isinstance(topic, str)
        for i in range(n):
            try:
                enqueue(
                    topic if single else topic[i],
                    values[i],
                    keys[i] if keys is not None else None,
                    partitions[i] if partitions is not None else None,
                    timestamps[i] if timestamps is not None else None,
                    headers[i] if headers is not None else None,
                    member,
                )
            except Exception as exc:
                group._fail(exc, i)
        return group

    def _enqueue(self, topic, value, key, partition, timestamp, headers, sink) -> None:
        """Queue one record whose result goes to ``sink`` (an asyncio future or a ``RecordFuture``)."""
        if self._closed:
            raise RuntimeError("producer is closed")
        if self._txn is not None:
            self._txn.check_send()
        if self._wakeup is None:
            self._ensure_loop_objects()
        if type(value) is str:
            value = value.encode()
        if type(key) is str:
            key = key.encode()
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        if headers:
            if isinstance(headers, dict):
                headers = list(headers.items())
            headers = [(k, v.encode() if isinstance(v, str) else v) for k, v in headers]
        rec = (key, value, headers, timestamp, partition, sink)
        self._unfinished += 1
        if self._unfinished == 1:
            self._idle.clear()
        info = self._topic_or_wait(topic, rec)
        if info is not None:
            self._append(topic, info, rec)

    def _topic_or_wait(self, topic: str, item):
        """The topic's metadata; or None, with ``item`` (a record or a columnar job) queued behind the topic's
        metadata fetch (started by the first waiter), in arrival order with those before it."""
        info = self.cluster.topics.get(topic)
        if info is None or not info.partitions or topic in self._waiting_meta:
            waiting = self._waiting_meta.get(topic)
            if waiting is None:
                waiting = self._waiting_meta[topic] = []
                self._spawn(self._fetch_metadata(topic))
            waiting.append(item)
            return None
        return info

    # -- appending from columns (the Arrow path) ------------------------------------------------

    def _send_columns(self, topic, values, keys, partitions, headers, timestamps) -> DeliveryGroup:
        """``send_many`` with Arrow columns: partitions (murmur2 over the key column, sticky for null keys),
        record batches and delivery counts are computed per column and per batch, not per record.

        The result is what the per-record path makes of the same records: the same partitions and
        batches byte for byte (tests/client/test_columnar_producer.py). Headers (``headers``: a list
        column, or one list per row) are the one per-record step, for the rows that have some.
        """
        import numpy as np
        import pyarrow as pa

        from ..protocol.records.columnar import ColumnarRecords

        n = len(values)
        group = DeliveryGroup(n)
        if n == 0:
            return group
        if self._closed:
            raise RuntimeError("producer is closed")
        if self._txn is not None:
            self._txn.check_send()
        if self._wakeup is None:
            self._ensure_loop_objects()
        if timestamps is None:
            ts = np.full(n, int(time.time() * 1000), np.int64)
        else:
            ts = _int_column(timestamps, n, -1)
            if (ts < 0).any():
                ts[ts < 0] = int(time.time() * 1000)
        if headers is not None and _is_arrow(headers):
            if isinstance(headers, pa.ChunkedArray):
                headers = headers.combine_chunks()
            headers = headers.to_pylist() if headers.null_count < n else None
        parts = None if partitions is None else _int_column(partitions, n, -1)
        records = ColumnarRecords(keys, values, ts, headers)
        self._unfinished += n
        self._idle.clear()
        if isinstance(topic, str):
            self._route_columns(topic, _ColumnarJob(records, parts, group))
        else:  # a topic per row: one job per topic, its rows in their order
            names = np.asarray(_as_pylist(topic, n), dtype=object)
            for name in dict.fromkeys(names.tolist()):
                rows = np.nonzero(names == name)[0]
                job = _ColumnarJob(records.take(rows), None if parts is None else parts[rows], group)
                if name is None:
                    self._fail_rows(group, len(rows), ValueError("a record has no topic"))
                else:
                    self._route_columns(name, job)
        return group

    def _route_columns(self, topic: str, job: _ColumnarJob) -> None:
        info = self._topic_or_wait(topic, job)
        if info is not None:
            self._append_columns(topic, info, job)

    def _fail_rows(self, group: DeliveryGroup, count: int, exc: BaseException) -> None:
        group._fail_many(exc, count)
        self._unfinished -= count
        if self._unfinished <= 0:
            self._unfinished = 0
            self._idle.set()

    def _append_columns(self, topic: str, info: TopicInfo, job: _ColumnarJob) -> None:
        import numpy as np

        from .partitioner import partitions_for_keys

        records, group = job.records, job.group
        n = len(records)
        chosen = np.full(n, -1, np.int64) if job.partitions is None else job.partitions.copy()
        given = chosen >= 0
        if given.any():
            unknown = given & ~np.isin(chosen, np.fromiter(info.partitions, np.int64))
            if unknown.any():
                bad = int(chosen[unknown][0])
                err = KafkaError(kerrors.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} has no partition {bad}")
                self._fail_rows(group, int(unknown.sum()), err)
                chosen[unknown] = -2  # left out
        keyed = (chosen == -1) & (records.klen >= 0)
        if keyed.any():
            chosen[keyed] = partitions_for_keys(records.keys, info.num_partitions)[keyed]
        unkeyed = np.nonzero(chosen == -1)[0]
        if len(unkeyed):
            chosen[unkeyed] = self._sticky_partitions(topic, info, records.take(unkeyed, columns=False))
        kept = np.nonzero(chosen >= 0)[0]
        # numpy's stable sort of 16-bit integers is a radix sort (one pass, no comparisons)
        narrow = np.int16 if info.num_partitions <= np.iinfo(np.int16).max else np.int64
        order = kept[np.argsort(chosen[kept].astype(narrow), kind="stable")]
        if not len(order):
            return
        by_partition = chosen[order]
        cuts = [0, *(np.nonzero(np.diff(by_partition))[0] + 1).tolist(), len(order)]
        # the sticky choice above told the partitioner of the batches it closes; told twice, it would
        # move on from a partition it has just picked again
        notify = not len(unkeyed)
        # first every partition's rows go into batches (sizes only), then all of them are encoded at once
        # and each batch gets its slice of the one buffer
        sorted_rows = records.take(order, columns=False)
        plan = _Plan(len(order))
        for a, b in zip(cuts, cuts[1:]):
            self._append_rows((topic, int(by_partition[a])), sorted_rows, a, b, group, plan, notify)
        encoded = records.encode_rows(order, plan.deltas, plan.base_ts, plan.body)
        for builder, i, a, b in plan.sections:
            if encoded is not None:
                data, ends = encoded
                builder._parts[i] = data[ends[a] : ends[b]]
            else:  # a call too large for one buffer: batch by batch
                one = records.take(order[a:b])
                builder._parts[i] = one.encode(0, b - a, int(plan.deltas[a]), int(plan.base_ts[a]), plan.body[a:b])

    def _open_state(self, tp) -> tuple[int, bool, int, int | None]:
        """(size, not empty, next offset delta, base timestamp) of the batch the next record of ``tp`` joins."""
        queue = self._queues.get(tp)
        batch = queue[-1] if queue and not queue[-1].closed else None
        if batch is None:
            return HEADER_SIZE, False, 0, None
        b = batch.builder
        return b._size, b._count > 0, b._last_delta + 1, b._base_ts

    def _fill(self, state, records, start: int, stop: int):
        """How many of ``records[start:stop]`` the batch in ``state`` (``_open_state``) takes, as ``_append``
        decides one record at a time: a record that would take the batch past ``batch_size`` (by the same
        estimate) closes it first, and a batch that reached ``batch_size`` closes after the record.

        Returns (count, closed before record ``start + count``, closed after it, encoded size of each
        record taken, their body lengths, base timestamp)."""
        import numpy as np

        size0, nonempty, delta0, base_ts = state
        limit = self.batch_size
        # a record takes at least 7 bytes: the window never needs to reach further
        cap = min(stop, start + max(1, (limit - size0) // 7 + 2))
        bts = int(records.timestamps[start]) if base_ts is None else base_ts
        enc, body = records.sizes(start, cap, delta0, bts)
        total = np.cumsum(enc)
        too_big = size0 + (total - enc) + records.room[start:cap] > limit
        if not nonempty:
            too_big[0] = False
        full = size0 + total >= limit
        width = cap - start
        before = int(np.argmax(too_big)) if too_big.any() else width
        after = int(np.argmax(full)) + 1 if full.any() else width
        count = min(before, after, width)
        return count, count == before < width, count == after and full.any(), enc[:count], body[:count], bts

    def _sticky_partitions(self, topic: str, info: TopicInfo, records):
        """Partitions of null-key records as ``DefaultPartitioner`` picks them one by one: the sticky
        partition until its batch closes (the record that closes it before itself still goes there)."""
        import numpy as np

        out = np.empty(len(records), np.int64)
        states: dict = {}
        start, n = 0, len(records)
        while start < n:
            p = self.partitioner.partition(topic, None, info.num_partitions, info.available_partitions)
            state = states.get(p) or self._open_state((topic, p))
            count, before, after, enc, _, bts = self._fill(state, records, start, n)
            out[start : start + count] = p
            state = (state[0] + int(enc.sum()), state[1] or count > 0, state[2] + count, bts)
            start += count
            if before or after:
                self.partitioner.on_batch_closed(topic, p)
                state = (HEADER_SIZE, False, 0, None)
                if before:  # the record that did not fit opens the next batch of the same partition
                    count, _, after, enc, _, bts = self._fill(state, records, start, start + 1)
                    out[start] = p
                    start += 1
                    state = (HEADER_SIZE, False, 0, None) if after else (HEADER_SIZE + int(enc[0]), True, 1, bts)
            states[p] = state
        return out

    def _append_rows(
        self, tp: tuple[str, int], records, start: int, n: int, group: DeliveryGroup, plan: _Plan, notify: bool
    ) -> None:
        """Append records ``start:n`` of ``records`` (one partition's, in order; sizes and timestamps only) to
        the batches of ``tp``. Each batch takes a placeholder section, which ``_append_columns`` fills in
        once every row is in a batch; ``plan`` gets where it is and each row's offset delta, base timestamp
        and body length."""
        import numpy as np

        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        while start < n:
            batch = queue[-1] if queue and not queue[-1].closed else None
            if batch is None:
                batch = self._new_batch(tp)
                queue.append(batch)
                if len(queue) == 1:
                    self._wakeup.set()  # the sender arms its linger timer
            b = batch.builder
            count, before, after, enc, body, bts = self._fill(
                (b._size, b._count > 0, b._last_delta + 1, b._base_ts), records, start, n
            )
            if count:
                size = int(enc.sum())
                stop = start + count
                first = b._last_delta + 1
                plan.deltas[start:stop] = np.arange(first, first + count)
                plan.base_ts[start:stop] = bts
                plan.body[start:stop] = body
                b.append_section(None, count, size, bts, int(records.timestamps[start:stop].max()))
                plan.sections.append((b, len(b._parts) - 1, start, stop))
                batch.size += size
                self._buffered += size
                if batch.bulk and batch.bulk[-1][0] is group:
                    batch.bulk[-1] = (group, batch.bulk[-1][1] + count)
                else:
                    batch.bulk.append((group, count))
                start = stop
            if before or after:
                self._close_batch(batch, notify)

    def _spawn(self, coro):
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _fetch_metadata(self, topic: str) -> None:
        try:
            info = await self.cluster.topic(topic, timeout=min(self.delivery_timeout, self.request_timeout * 2))
        except Exception as exc:
            for rec in self._waiting_meta.pop(topic, []):
                if type(rec) is _ColumnarJob:
                    self._fail_rows(rec.group, len(rec.records), exc)
                else:
                    self._complete(rec[5], exc)
            return
        for rec in self._waiting_meta.pop(topic, []):
            if type(rec) is _ColumnarJob:
                self._append_columns(topic, info, rec)
            else:
                self._append(topic, info, rec)
        self._wakeup.set()

    def _append(self, topic: str, info: TopicInfo, rec) -> None:
        key, value, headers, timestamp, partition, fut = rec
        if partition is None:
            partition = self.partitioner.partition(topic, key, info.num_partitions, info.available_partitions)
        elif partition not in info.partitions:
            self._complete(fut, KafkaError(kerrors.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} has no partition {partition}"))
            return
        tp = (topic, partition)
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        batch = queue[-1] if queue and not queue[-1].closed else None
        if batch is not None and batch.bulk:  # a future's index is its offset delta: none after columnar rows
            self._close_batch(batch)
            batch = None
        if (
            batch is not None
            and batch.builder._size
            + (len(value) if value else 0)
            + (len(key) if key else 0)
            + (_headers_size(headers) if headers else 0)
            + 32
            > self.batch_size
        ):
            self._close_batch(batch)
            batch = None
        if batch is None:
            batch = self._new_batch(tp)
            queue.append(batch)
            if len(queue) == 1:
                self._wakeup.set()  # the sender arms its linger timer
        builder = batch.builder
        before = builder._size
        try:
            builder.append(key, value, headers, timestamp)
        except (TypeError, ValueError) as exc:
            self._complete(fut, exc)
            if builder._count == 0:
                queue.remove(batch)
            return
        grown = builder._size - before
        batch.size += grown
        self._buffered += grown
        batch.futures.append(fut)
        batch.timestamps.append(timestamp)
        if builder._size >= self.batch_size:
            self._close_batch(batch)

    def _new_batch(self, tp) -> _Batch:
        builder = BatchBuilder(
            compression=self.compression,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            max_batch_size=self.batch_size,
            transactional=self._txn is not None,
        )
        return _Batch(tp, builder, time.monotonic() + self.delivery_timeout)

    def _close_batch(self, batch: _Batch, notify: bool = True) -> None:
        if not batch.closed:
            batch.closed = True
            if notify:
                self.partitioner.on_batch_closed(*batch.tp)
            self._wakeup.set()

    def _complete(self, fut, result) -> None:
        t = type(fut)
        if t is RecordFuture or t is _Member:
            fut._set(result)
        elif not fut.done():
            if isinstance(result, BaseException):
                fut.set_exception(result)
            else:
                fut.set_result(result)
        self._unfinished -= 1
        if self._unfinished <= 0:
            self._unfinished = 0
            self._idle.set()

    # -- flushing and closing ------------------------------------------------------------

    async def flush(self, timeout: float | None = None) -> None:
        """Send every queued record now and wait until each has its result."""
        if self._wakeup is None:
            return
        self._flushing += 1
        try:
            self._wakeup.set()
            await asyncio.wait_for(self._idle.wait(), timeout)
        finally:
            self._flushing -= 1

    async def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        try:
            if self._wakeup is not None:
                await self.flush(timeout)
        finally:
            self._closed = True
            if self._txn is not None:
                await self._txn.close()
            if self._sender is not None:
                self._sender.cancel()
                try:
                    await self._sender
                except BaseException:
                    pass
            for task in list(self._tasks):
                task.cancel()
            err = KafkaError(kerrors.UNKNOWN_SERVER_ERROR, "producer closed before the record was sent")
            for queue in self._queues.values():
                for batch in queue:
                    for fut in batch.futures:
                        self._complete(fut, err)
                    self._complete_bulk(batch, err)
            self._queues.clear()
            if self._own_cluster:
                await self.cluster.close()

    # -- the sender ----------------------------------------------------------------------

    async def _send_loop(self) -> None:
        while True:
            timeout = self._drain()
            self._wakeup.clear()
            if timeout is None:
                await self._wakeup.wait()
            else:
                try:
                    await asyncio.wait_for(self._wakeup.wait(), max(timeout, 0.0005))
                except TimeoutError:
                    pass

    def _drain(self) -> float | None:
        """Start sending every ready batch; returns seconds until the next one gets ready (None: none)."""
        now = time.monotonic()
        next_ready = None
        by_node: dict[int, list[_Batch]] = {}
        for tp, queue in self._queues.items():
            if not queue or tp in self._in_flight:
                continue
            batch = queue[0]
            ready_at = batch.created + self.linger
            if not (batch.closed or self._flushing or now >= ready_at or len(queue) > 1):
                next_ready = ready_at - now if next_ready is None else min(next_ready, ready_at - now)
                continue
            info = self.cluster.topics.get(tp[0])
            part = info.partitions.get(tp[1]) if info else None
            if part is None or part.leader < 0:
                self._in_flight.add(tp)  # wait for metadata before trying again
                self._spawn(self._await_leader(batch))
                continue
            if self._txn is not None and not self._txn.ready_to_send(tp):
                continue  # AddPartitionsToTxn first (transaction version 1); it wakes the sender
            self._close_batch(batch)
            self._in_flight.add(tp)
            by_node.setdefault(part.leader, []).append(batch)
        for node, batches in by_node.items():
            group: list[_Batch] = []
            size = 0
            for b in batches:  # several requests rather than one above max_request_size
                if group and size + b.size > self.max_request_size:
                    self._spawn(self._send_batches(node, group))
                    group, size = [], 0
                group.append(b)
                size += b.size
            self._spawn(self._send_batches(node, group))
        if self.cluster.metadata_age > self.cluster.metadata_max_age and self._refreshing is None:
            self._refreshing = self._spawn(self._refresh_metadata())
        return next_ready

    async def _refresh_metadata(self) -> None:
        """Periodic refresh (``metadata_max_age``): new partitions and moved leaders show up."""
        try:
            await self.cluster.refresh()
        except Exception:
            pass  # the next send's errors will tell
        finally:
            self._refreshing = None

    async def _await_leader(self, batch: _Batch) -> None:
        try:
            try:
                await self.cluster.refresh(sorted({batch.tp[0]} | set(self.cluster.topics)))
            except Exception:
                pass
            info = self.cluster.topics.get(batch.tp[0])
            part = info.partitions.get(batch.tp[1]) if info else None
            if part is None or part.leader < 0:
                batch.attempts += 1
                if time.monotonic() >= batch.deadline:
                    self._fail_batch(
                        batch, KafkaError(kerrors.LEADER_NOT_AVAILABLE, f"{batch.tp[0]}-{batch.tp[1]} has no leader")
                    )
                    return
                await asyncio.sleep(self.backoff.delay(batch.attempts))
        finally:
            self._in_flight.discard(batch.tp)
            self._wakeup.set()

    def _payload(self, batch: _Batch) -> bytes:
        if batch.payload is None:
            builder = batch.builder
            if self.idempotent:
                seq = self._sequences.get(batch.tp, 0)
                builder.producer_id = self.producer_id
                builder.producer_epoch = self.producer_epoch
                builder.base_sequence = seq
                batch.sequence = seq
                self._sequences[batch.tp] = (seq + builder.record_count) & 0x7FFFFFFF
            batch.payload = builder.build()
            batch.pid = self.producer_id
            if not self.idempotent:
                builder._parts = None  # the encoded records live in the payload now
        return batch.payload

    async def _send_batches(self, node: int, batches: list[_Batch]) -> None:
        cls = message_class("ProduceRequest")
        try:
            topics: dict[str, list] = {}
            for b in batches:
                topics.setdefault(b.tp[0], []).append(cls.PartitionProduceData(index=b.tp[1], records=self._payload(b)))
                b.attempts += 1
            infos = {t: self.cluster.topics.get(t) for t in topics}
            req = cls(
                transactional_id=self.transactional_id,
                acks=self.acks,
                timeout_ms=int(self.request_timeout * 1000),
                topic_data=[
                    cls.TopicProduceData(
                        name=t,
                        # None (the field is typed UUID) only if the topic's metadata went since its batches
                        topic_id=info.topic_id if (info := infos[t]) else None,  # type: ignore[arg-type]
                        partition_data=ps,
                    )
                    for t, ps in topics.items()
                ],
            )
            try:
                conn = await self.cluster.connection(node)
                version = self._txn.produce_version(conn) if self._txn is not None else None
                resp = cast(
                    "ProduceResponse | None",
                    await conn.request(req, version=version, timeout=self.request_timeout + 5),
                )
            except (ConnectionClosed, RequestTimeout, OSError, TimeoutError) as exc:
                for b in batches:
                    self._retry_or_fail(b, KafkaError(kerrors.NETWORK_EXCEPTION, str(exc)), stale=True)
                return
            except KafkaError as exc:
                for b in batches:
                    self._retry_or_fail(b, exc, stale=exc.code in STALE_METADATA)
                return
            if resp is None:  # acks=0
                for b in batches:
                    self._succeed(b, -1, -1)
                return
            answers = {}
            p: ProduceResponse.PartitionProduceResponse | None
            for t in resp.responses:
                name = t.name if t.name else self.cluster.topic_names.get(t.topic_id)
                for p in t.partition_responses:
                    answers[(name, p.index)] = p
            for b in batches:
                p = answers.get(b.tp)
                if p is None:
                    self._retry_or_fail(b, KafkaError(kerrors.UNKNOWN_SERVER_ERROR, "no answer for the partition"))
                elif p.error_code == 0:
                    self._succeed(b, p.base_offset, p.log_append_time_ms)
                elif p.error_code == kerrors.DUPLICATE_SEQUENCE_NUMBER:
                    self._succeed(b, -1, -1)  # written by an earlier attempt
                else:
                    msg = p.error_message
                    if p.record_errors:
                        msg = (
                            (msg or "")
                            + " "
                            + "; ".join(
                                f"record {e.batch_index}: {e.batch_index_error_message}" for e in p.record_errors
                            )
                        )
                    self._retry_or_fail(b, KafkaError(p.error_code, msg), stale=p.error_code in STALE_METADATA)
        except Exception as exc:  # a bug or an encode error must not leave futures hanging
            for b in batches:
                if b.tp in self._in_flight:
                    self._fail_batch(b, exc)
        finally:
            self._wakeup.set()

    def _succeed(self, batch: _Batch, base_offset: int, log_append_time: int) -> None:
        self._dequeue(batch)
        topic, partition = batch.tp
        for i, (fut, ts) in enumerate(zip(batch.futures, batch.timestamps)):
            if type(fut) is _Member:  # a send_many record: counted, no metadata object
                fut.group._ok()
                self._unfinished -= 1
                continue
            self._complete(
                fut,
                RecordMetadata(
                    topic,
                    partition,
                    base_offset + i if base_offset >= 0 else -1,
                    log_append_time if log_append_time not in (None, -1) else ts,
                ),
            )
        if batch.bulk:
            self._complete_bulk(batch, None)
        if self._unfinished <= 0:
            self._unfinished = 0
            self._idle.set()

    def _complete_bulk(self, batch: _Batch, exc: BaseException | None) -> None:
        """The columnar rows of ``batch``: one count per ``send_many`` call, not one call per record."""
        bulk, batch.bulk = batch.bulk, []
        for group, count in bulk:
            if exc is None:
                group._ok_many(count)
            else:
                group._fail_many(exc, count)
            self._unfinished -= count
        if bulk and self._unfinished <= 0:
            self._unfinished = 0
            self._idle.set()

    def _dequeue(self, batch: _Batch) -> None:
        queue = self._queues.get(batch.tp)
        if queue and queue[0] is batch:
            queue.popleft()
        elif queue and batch in queue:
            queue.remove(batch)
        self._in_flight.discard(batch.tp)
        self._buffered -= batch.size
        if self._buffered <= self.buffer_memory and self._space is not None:
            self._space.set()

    def _fail_batch(self, batch: _Batch, exc: BaseException) -> None:
        if self._txn is not None:
            self._txn.fail(exc)  # the transaction can no longer commit (or the producer is fenced)
        self._dequeue(batch)
        for fut in batch.futures:
            self._complete(fut, exc)
        self._complete_bulk(batch, exc)

    def _retry_or_fail(self, batch: _Batch, exc: KafkaError, stale: bool = False) -> None:
        if self._txn is not None and exc.code in _PRODUCER_STATE_LOST:
            # a transactional producer does not start over with a new id: the transaction must abort
            self._fail_batch(batch, exc)
            return
        if self.idempotent and exc.code in _PRODUCER_STATE_LOST and time.monotonic() < batch.deadline:
            # the broker lost our producer state (e.g. it restarted, or our id expired): like the Java
            # client, start over with a new producer id and sequence 0, and send the batch again
            self._spawn(self._reset_and_retry(batch))
            return
        if stale:
            self.cluster.handle_error(kerrors.NOT_LEADER_OR_FOLLOWER, batch.tp[0])
        retriable = exc.retriable or exc.code in STALE_METADATA
        if not retriable or time.monotonic() + self.backoff.delay(batch.attempts) >= batch.deadline:
            self._fail_batch(batch, exc)
            return
        # keep the batch (and its sequence) at the head of its queue; try again after a backoff
        self._spawn(self._retry_later(batch, stale))

    async def _reset_and_retry(self, batch: _Batch) -> None:
        try:
            if batch.pid == self.producer_id:  # not reset since this batch was built
                if self._reset_task is None or self._reset_task.done():
                    self._reset_task = self._spawn(self._new_producer_id())
                await asyncio.shield(self._reset_task)
            batch.payload = None  # rebuilt with the new id and sequence when sent
            await asyncio.sleep(self.backoff.delay(batch.attempts))
        except Exception as exc:
            self._fail_batch(batch, exc)
        finally:
            self._in_flight.discard(batch.tp)
            self._wakeup.set()

    async def _new_producer_id(self) -> None:
        self.producer_id, self.producer_epoch = -1, -1
        await self._init_producer_id()
        self._sequences.clear()

    async def _retry_later(self, batch: _Batch, stale: bool) -> None:
        try:
            await asyncio.sleep(self.backoff.delay(batch.attempts))
            if stale:
                try:
                    await self.cluster.refresh(sorted({batch.tp[0]} | set(self.cluster.topics)))
                except Exception:
                    pass
        finally:
            self._in_flight.discard(batch.tp)
            self._wakeup.set()
