"""Synchronous API: ``Producer``, ``Consumer``, ``Admin``.

The asyncio core runs on a private event loop in one daemon thread per
process (``LoopThread.get()``), started on first use; the sync classes hand
coroutines to it and wait for their results. Plain threads, Spark worker
processes and scripts need no event loop of their own. After a ``fork``
the child gets a new loop thread (the parent's does not survive the fork);
clients created before the fork must not be used in the child.

``Producer.produce`` does not make one cross-thread call per record: records
are queued in a thread-safe deque and the loop thread drains it in bursts,
so producing from a plain thread costs a few microseconds per record.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import os
import threading
import time
from typing import Any

from .admin import AsyncAdmin, NewTopic
from .consumer import AsyncConsumer
from .producer import AsyncProducer, DeliveryGroup, RecordFuture, RecordMetadata


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop when it is installed (a dependency on POSIX), else asyncio's.

    ``KAFKAWIRE_CLIENT_LOOP=asyncio`` forces the standard loop.
    """
    if os.environ.get("KAFKAWIRE_CLIENT_LOOP", "").lower() != "asyncio":
        try:
            import uvloop

            return uvloop.new_event_loop()
        except ImportError:
            pass
    return asyncio.new_event_loop()


class LoopThread:
    """An asyncio event loop running forever in a daemon thread."""

    _instance: LoopThread | None = None
    _lock = threading.Lock()

    def __init__(self):
        self.loop = _new_loop()
        self.pid = os.getpid()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._main, name="kafkawire-client-loop", daemon=True)
        self.thread.start()
        self._ready.wait()

    def _main(self):
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()

    @classmethod
    def get(cls) -> LoopThread:
        inst = cls._instance
        if inst is None or inst.pid != os.getpid() or not inst.thread.is_alive():
            with cls._lock:
                inst = cls._instance
                if inst is None or inst.pid != os.getpid() or not inst.thread.is_alive():
                    inst = cls._instance = LoopThread()
        return inst

    def submit(self, coro) -> concurrent.futures.Future:
        """Schedule ``coro`` on the loop; its future, not waited for."""
        if threading.current_thread() is self.thread:
            raise RuntimeError("a sync kafkawire call was made on the client's own event loop thread")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro, timeout: float | None = None):
        """Run ``coro`` on the loop and wait for its result (raising its exception)."""
        fut = self.submit(coro)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"no result within {timeout}s") from None
        except BaseException:
            # e.g. KeyboardInterrupt while waiting: a poll left running would take records nobody reads
            # (and a group member would count them as consumed and commit them)
            fut.cancel()
            raise


class _SyncBase:
    # the async client wrapped; each subclass declares its class. None once closed (close() is idempotent).
    _core: Any = None

    def __init__(self):
        self._loop_thread = LoopThread.get()

    def _run(self, coro, timeout: float | None = None):
        return self._loop_thread.run(coro, timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self._core is not None:
            core, self._core = self._core, None
            self._run(core.close())

    def __del__(self):  # best effort: do not leak sockets of a forgotten client
        try:
            if self._core is not None and self._loop_thread.pid == os.getpid():
                asyncio.run_coroutine_threadsafe(self._core.close(), self._loop_thread.loop)
        except Exception:
            pass


class Producer(_SyncBase):
    """Synchronous producer. Options as ``AsyncProducer`` (acks, compression, batch_size, linger_ms, ...).

    ``produce()`` queues a record and returns a ``RecordFuture`` of its
    ``RecordMetadata`` (``result(timeout)``, ``exception()``, ``done()``,
    ``add_done_callback``); ``on_delivery(metadata_or_None, error_or_None)``
    is called (on the client's loop thread) when it is known. ``flush()`` waits for all.
    """

    def __init__(self, bootstrap="127.0.0.1:9092", **options):
        super().__init__()
        self._core: AsyncProducer = AsyncProducer(bootstrap, **options)  # None after close(): a later call fails
        self._queue: collections.deque = collections.deque()
        self._scheduled = False
        self._qlock = threading.Lock()
        self._run(self._core.start())

    def produce(
        self,
        topic: str,
        value=None,
        key=None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers=None,
        on_delivery=None,
    ) -> RecordFuture:
        """Queue one record; returns its ``RecordFuture`` (``.result(timeout)`` -> ``RecordMetadata``)."""
        core = self._core
        if core is None:
            raise RuntimeError("producer is closed")
        if core._buffered > core.buffer_memory:
            self._run(self._wait_for_space())
        fut = RecordFuture()
        if on_delivery is not None:
            fut.add_done_callback(
                lambda f: (
                    on_delivery(None, f._result)
                    if isinstance(f._result, BaseException)
                    else on_delivery(f._result, None)
                )
            )
        self._queue.append((topic, value, key, partition, timestamp, headers, fut))
        if not self._scheduled:
            with self._qlock:
                if not self._scheduled:
                    self._scheduled = True
                    self._loop_thread.loop.call_soon_threadsafe(self._drain)
        return fut

    async def _wait_for_space(self):
        await asyncio.sleep(0)
        self._drain()
        core = self._core
        while core._buffered > core.buffer_memory:
            core._space.clear()
            core._wakeup.set()
            await core._space.wait()

    def _drain(self):
        """On the loop thread: move queued records into the async producer."""
        with self._qlock:
            self._scheduled = False
        queue = self._queue
        core = self._core
        pop = queue.popleft
        while queue:
            item = pop()
            if core is None:
                item[6]._set(RuntimeError("producer is closed"))
                continue
            try:
                core._enqueue(*item)
            except Exception as exc:
                item[6]._set(exc)

    def produce_many(
        self, topic, values, keys=None, *, partitions=None, headers=None, timestamps=None
    ) -> DeliveryGroup:
        """Queue many records with one call into the client's thread (see ``AsyncProducer.send_many``).

        Returns a ``DeliveryGroup``: ``group.result(timeout)`` waits until every record has its result,
        then ``delivered``, ``failed``, ``errors`` and ``raise_first()`` tell how it went. Much cheaper
        per record than ``produce`` (the Arrow/Spark sink path).
        """
        if self._core is None:
            raise RuntimeError("producer is closed")
        return self._run(self._many(topic, values, keys, partitions, headers, timestamps))

    def produce_many_nowait(
        self, topic, values, keys=None, *, partitions=None, headers=None, timestamps=None
    ) -> concurrent.futures.Future:
        """``produce_many`` without waiting for the client's thread to queue the records: returns at once a
        ``concurrent.futures.Future`` of the ``DeliveryGroup`` (its ``result()`` raises what
        ``produce_many`` would have raised). The caller can prepare its next records while the client's
        thread partitions and encodes these (the Spark sink reads its next Arrow batch meanwhile).

        The arrays must not change until the future is done. Calls are queued in the order made, but a
        call waiting for ``buffer_memory`` lets a later one pass: wait for the future of one call before
        making the next when the order matters (as for ``produce_many``)."""
        if self._core is None:
            raise RuntimeError("producer is closed")
        return self._loop_thread.submit(self._many(topic, values, keys, partitions, headers, timestamps))

    async def _many(self, topic, values, keys, partitions, headers, timestamps):
        self._drain()  # records produced before keep their order
        core = self._core
        while core._buffered > core.buffer_memory:
            core._space.clear()
            core._wakeup.set()
            await core._space.wait()
        return core.send_many(topic, values, keys, partitions=partitions, headers=headers, timestamps=timestamps)

    def flush(self, timeout: float | None = None) -> None:
        self._run(self._flush(timeout))

    async def _flush(self, timeout):
        self._drain()
        await self._core.flush(timeout)

    # -- transactions (``transactional_id=``; see ``AsyncProducer``) -----------------------------------

    def init_transactions(self, timeout: float | None = None) -> None:
        """Get the transactional id's producer id and epoch (fencing an older producer with the same id)."""
        self._run(self._core.init_transactions(), timeout)

    def begin_transaction(self) -> None:
        self._run(self._begin())

    async def _begin(self):
        self._drain()  # records produced before belong to no transaction: they fail as the async core says
        self._core.begin_transaction()

    def send_offsets_to_transaction(self, offsets: dict, group_metadata, timeout: float | None = None) -> None:
        """Commit ``{(topic, partition): next offset}`` of ``group_metadata`` (``Consumer.group_metadata()``,
        or a group id) with the transaction."""
        self._run(self._core.send_offsets_to_transaction(offsets, group_metadata), timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send what was produced, then commit; raises the error that failed the transaction, if any."""
        self._run(self._end(True), timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._run(self._end(False), timeout)

    async def _end(self, commit: bool):
        self._drain()  # records produce() queued before the call belong to the transaction
        if commit:
            await self._core.commit_transaction()
        else:
            await self._core.abort_transaction()

    def send(self, topic: str, value=None, key=None, timeout: float | None = None, **kw) -> RecordMetadata:
        """Produce one record and wait for its result."""
        fut = self.produce(topic, value, key, **kw)
        self.flush(timeout)
        return fut.result(timeout)

    def close(self, timeout: float | None = None):
        if self._core is not None:
            self._run(self._close(timeout))

    async def _close(self, timeout):
        self._drain()
        core, self._core = self._core, None
        await core.close(timeout)


class Consumer(_SyncBase):
    """Synchronous consumer (options as ``AsyncConsumer``): of assigned partitions, or with ``group_id`` and
    ``subscribe()`` a consumer group member (``kafkawire.client.groups``).

    ``assign``, ``seek*`` are immediate; ``poll``/``poll_arrow`` wait up to
    ``timeout`` seconds; the fetcher, and a group member's heartbeats and
    auto-commits, keep running in the loop thread between polls.

    Rebalance callbacks run as Kafka's ConsumerRebalanceListener's do: on the
    thread that calls ``poll`` (or ``close``, ``unsubscribe``,
    ``wait_for_assignment``), inside that call. No record of a newly assigned
    partition is returned, nor fetched, before its ``on_partitions_assigned``
    has returned (a ``seek`` there decides the first record); a revoked
    partition's records stop before ``on_partitions_revoked``. What a callback
    raises, that call raises (the rebalance itself completes).
    """

    def __init__(self, bootstrap="127.0.0.1:9092", **options):
        super().__init__()
        self._core: AsyncConsumer = AsyncConsumer(bootstrap, **options)  # None after close(): a later call fails
        # callbacks the group membership (on the loop thread) waits to have run: (fn, partitions, future of
        # the error or None); the polling thread runs them in order
        self._calls: collections.deque = collections.deque()
        self._calls_queued = threading.Event()
        self._in_callback = threading.local()
        self._closing = False
        loop = self._loop_thread.loop
        core = self._core
        calls, queued = self._calls, self._calls_queued  # not self: a forgotten Consumer is still collected

        def run_callback(fn, tps) -> asyncio.Future:
            fut = loop.create_future()
            calls.append((fn, tps, fut))
            queued.set()
            core._wake_reader()
            return fut

        core._callback_runner = run_callback
        core._callbacks_due = lambda: bool(calls)

    def _run_callbacks(self, nested: bool = False) -> None:
        """Run the queued rebalance callbacks on this thread; raise the first error (after running all, as
        Kafka's onJoinComplete does). Inside a callback only ``nested`` calls run them: a callback that
        polls leaves them to the outer call (in order), one that closes must not wait for itself."""
        outer = getattr(self._in_callback, "active", False)
        if outer and not nested:
            return
        first = None
        calls = self._calls
        loop = self._loop_thread.loop
        while calls:
            fn, tps, fut = calls.popleft()
            error = None
            self._in_callback.active = True
            try:
                fn(tps)
            except Exception as exc:
                error = exc
                first = first or exc
            finally:  # the membership waits for it (even after a KeyboardInterrupt)
                self._in_callback.active = outer
                loop.call_soon_threadsafe(_settle, fut, error)
        if first is not None:
            raise first

    def _run_serving_callbacks(self, coro):
        """``_run(coro)`` that runs the callbacks it waits for (close, unsubscribe) on this thread."""
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop_thread.loop)
        fut.add_done_callback(lambda _: self._calls_queued.set())
        first = None
        try:
            while True:
                self._calls_queued.clear()
                try:
                    self._run_callbacks(nested=True)
                except Exception as exc:
                    first = first or exc
                if fut.done() and not self._calls:
                    break
                self._calls_queued.wait()
        except BaseException:
            fut.cancel()
            raise
        result = fut.result()
        if first is not None:
            raise first
        return result

    def _polling(self, take, timeout: float | None):
        """Callbacks first, then ``take(seconds)`` on the loop; a take that returns early because a callback
        was queued meanwhile polls again for the time left once it has run."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._run_callbacks()
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            out = self._run(take(left))
            if out or not self._calls or getattr(self._in_callback, "active", False):
                return out

    # -- consumer groups ------------------------------------------------------------------------

    def subscribe(
        self,
        topics=None,
        *,
        pattern=None,
        listener=None,
        on_partitions_revoked=None,
        on_partitions_assigned=None,
        on_partitions_lost=None,
    ) -> None:
        """Join the group for ``topics`` or ``pattern`` (see ``AsyncConsumer.subscribe``); polls read what
        the group assigns. Callbacks run inside poll() on its thread (see the class) and may call this consumer."""
        self._call(
            self._core.subscribe,
            topics,
            pattern=pattern,
            listener=listener,
            on_partitions_revoked=on_partitions_revoked,
            on_partitions_assigned=on_partitions_assigned,
            on_partitions_lost=on_partitions_lost,
        )

    def subscription(self) -> list[str]:
        return self._core.subscription()

    def unsubscribe(self) -> None:
        """Leave the group (commit, revoke, LeaveGroup); ``subscribe`` joins again."""
        self._run_serving_callbacks(self._core.unsubscribe())

    def commit(self, offsets: dict | None = None, timeout: float | None = None) -> None:
        """Commit and wait: ``offsets`` {(topic, partition): next offset}, default what polls returned."""
        self._run(self._core.commit(offsets), timeout)

    def commit_async(self, offsets: dict | None = None, callback=None) -> concurrent.futures.Future:
        """Commit without waiting; a ``concurrent.futures.Future``; ``callback(offsets, error_or_None)``
        runs on the client's loop thread when the commit is done."""

        async def start():
            return self._core.commit_async(offsets, callback)

        task = self._run(start())

        async def wait():
            return await task

        return asyncio.run_coroutine_threadsafe(wait(), self._loop_thread.loop)

    def committed(self, tps, timeout: float | None = None) -> dict:
        return self._run(self._core.committed(tps), timeout)

    def group_metadata(self) -> dict:
        return self._core.group_metadata()

    def wait_for_assignment(self, timeout: float | None = None) -> list:
        """Block until the group has assigned this member its partitions (possibly none); returns them."""
        return self._run_serving_callbacks(self._core.wait_for_assignment(timeout))

    def _call(self, fn, *args, **kw):
        async def call():
            return fn(*args, **kw)

        return self._run(call())

    def assign(self, partitions, offset=None) -> None:
        self._call(self._core.assign, partitions, offset)

    def assignment(self):
        return self._core.assignment()

    def seek(self, tp, offset) -> None:
        self._call(self._core.seek, tp, offset)

    def seek_to_beginning(self, *tps) -> None:
        self._call(self._core.seek_to_beginning, *tps)

    def seek_to_end(self, *tps) -> None:
        self._call(self._core.seek_to_end, *tps)

    def seek_to_timestamp(self, timestamp_ms: int, *tps) -> None:
        self._run(self._core.seek_to_timestamp(timestamp_ms, *tps))

    def position(self, tp) -> int:
        return self._run(self._core.position(tp))

    def high_watermark(self, tp) -> int:
        return self._core.high_watermark(tp)

    def beginning_offsets(self, tps) -> dict:
        return self._run(self._core.beginning_offsets(tps))

    def end_offsets(self, tps) -> dict:
        return self._run(self._core.end_offsets(tps))

    def offsets_for_times(self, timestamps: dict) -> dict:
        return self._run(self._core.offsets_for_times(timestamps))

    def stop_at(self, tp, offset: int | None) -> None:
        """Do not fetch ``tp`` past ``offset`` (see ``AsyncConsumer.stop_at``): for reading an offset range."""
        self._call(self._core.stop_at, tp, offset)

    def pause(self, *tps):
        self._call(self._core.pause, *tps)

    def resume(self, *tps):
        self._call(self._core.resume, *tps)

    def getmany(self, timeout: float | None = 1.0, max_records: int | None = None) -> dict:
        return self._polling(lambda left: self._core.getmany(left, max_records), timeout)

    def poll(self, timeout: float | None = 1.0, max_records: int | None = None) -> list:
        """Records fetched so far as one list of ``ConsumerRecord`` (waiting up to ``timeout`` for some)."""
        return [r for recs in self.getmany(timeout, max_records).values() for r in recs]

    def poll_arrow(self, timeout: float | None = 1.0, *, headers: bool = False, max_bytes: int | None = None) -> list:
        """Fetched records as ``pyarrow.RecordBatch`` es; decoded on the caller's thread.

        Fetching continues in the loop thread while this thread decodes.
        """
        from .consumer import decode_chunks_arrow

        chunks = self._polling(lambda left: self._core._take(left, max_bytes), timeout)
        return decode_chunks_arrow(chunks, headers=headers)

    def __iter__(self):
        while True:
            yield from self.poll(1.0)

    def close(self):
        """Close; a group member commits (auto-commit), revokes and leaves its group first."""
        core = self._core
        if core is None or self._closing:
            return
        self._closing = True  # _core stays until closed: on_partitions_revoked may still commit
        try:
            self._run_serving_callbacks(core.close())
        finally:
            self._core = None

    def __del__(self):
        # nobody polls a forgotten consumer: closing it must not wait for callbacks that would never run
        core = self._core
        if core is not None and core.group is not None:
            from .groups.membership import Listener

            core.group.listener = Listener()
        super().__del__()


def _settle(fut: asyncio.Future, error: BaseException | None) -> None:
    if not fut.done():
        fut.set_result(error)


class Admin(_SyncBase):
    """Synchronous admin client: every ``AsyncAdmin`` method, blocking."""

    def __init__(self, bootstrap="127.0.0.1:9092", **options):
        super().__init__()
        self._core: AsyncAdmin = AsyncAdmin(bootstrap, **options)  # None after close(): a later call fails

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._core, name)
        if not callable(attr) or not asyncio.iscoroutinefunction(attr):
            return attr

        def call(*args, **kw):
            return self._run(attr(*args, **kw))

        call.__name__ = name
        call.__doc__ = attr.__doc__
        return call


__all__ = ["Admin", "Consumer", "LoopThread", "NewTopic", "Producer"]
