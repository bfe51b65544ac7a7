"""The consumer (asyncio core): of assigned partitions, positions the caller's, or a group member.

With ``group_id`` and ``subscribe()`` the group assigns the partitions and
positions are committed (``kafkawire.client.groups`` runs the membership beside
the fetcher); what follows holds for both.

``assign()`` partitions with a starting point ("earliest", "latest", an
offset, or a timestamp via ``seek_to_timestamp``); positions that are not an
offset yet are resolved with ListOffsets. A background fetcher sends one
Fetch per leader for all of its partitions and keeps up to
``max_buffered_bytes`` of fetched (still encoded) batches ahead of the
reader: the next fetch goes out while the caller decodes the previous one.
Positions advance at fetch time by reading batch headers only.

Two ways to read what was fetched:

* ``getmany()`` -> ``{(topic, partition): [ConsumerRecord, ...]}`` (one
  Python object per record);
* ``poll_arrow()`` -> ``[pyarrow.RecordBatch]`` (one per partition), decoded
  straight into Arrow columns by ``kafkawire.client.arrow`` with no
  per-record Python objects: the path the Spark data source uses.

Transactions: with ``isolation_level=READ_COMMITTED`` the fetch stops at the
last stable offset and records of aborted transactions are dropped (the
Fetch response's aborted-transaction list, ended by the abort markers).
Control batches are never returned.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, NamedTuple, cast

from ..protocol import ApiKey, KafkaError, errors as kerrors
from ..protocol.messages import message_class
from ..protocol.records import CorruptRecordError, iter_batches
from .cluster import STALE_METADATA, ZERO_UUID, Cluster
from .connection import ConnectionClosed, RequestTimeout
from .offsets import EARLIEST, LATEST, READ_COMMITTED, READ_UNCOMMITTED, list_offsets, offset_spec
from .retry import Backoff

if TYPE_CHECKING:  # built at run time by message_class(); the group modules import this one
    from ..protocol.messages import FetchResponse
    from .groups.membership import ClassicMembership, ConsumerMembership

_log = logging.getLogger("kafkawire.client")


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 create time, 1 log append time
    key: bytes | None
    value: bytes | None
    headers: list  # [(str, bytes | None)]


class _Chunk(NamedTuple):
    """Fetched, still-encoded data of one partition."""

    tp: tuple[str, int]
    epoch: int  # the partition's seek epoch when fetched: a seek drops older chunks
    data: memoryview  # complete batches only
    min_offset: int  # records before it are dropped (a fetch inside a batch)
    aborted: list | None  # [(producer_id, first_offset)] for READ_COMMITTED
    high_watermark: int
    end_offset: int = -1  # the offset after its last batch: the consumed position once it is returned


class _PartitionState:
    __slots__ = (
        "position",
        "pending",
        "epoch",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "max_bytes",
        "paused",
        "stop_at",
        "record_epoch",
        "validated_epoch",
        "held",
    )

    def __init__(self, pending):
        self.position: int | None = None
        self.pending = pending  # an offset spec to resolve with ListOffsets, or None
        self.epoch = 0
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.max_bytes = 0
        self.paused = False
        self.stop_at: int | None = None  # no fetches once the position reaches it
        # KIP-320: the leader epoch of the last batch read, and the leader epoch under which the position was
        # last known to be on the leader's log (checked with OffsetForLeaderEpoch when the leader changes)
        self.record_epoch = -1
        self.validated_epoch = -1
        # a group member's partition waiting for its on_partitions_assigned callback, or being revoked: not
        # fetched and none of its records returned (Kafka's pendingOnAssignedCallback / pendingRevocation)
        self.held = False


class AsyncConsumer:
    """``async with AsyncConsumer(bootstrap) as c: c.assign([("t", 0)], offset="earliest"); await c.getmany()``.

    Options (Java client names in brackets): ``auto_offset_reset`` ("earliest", "latest", "none")
    [auto.offset.reset], ``isolation_level`` ("read_uncommitted", "read_committed")
    [isolation.level], ``fetch_max_wait_ms`` [fetch.max.wait.ms], ``fetch_min_bytes``
    [fetch.min.bytes], ``fetch_max_bytes`` [fetch.max.bytes], ``max_partition_fetch_bytes``
    [max.partition.fetch.bytes], ``max_buffered_bytes`` (fetched data kept ahead of the reader),
    ``check_crcs`` [check.crcs], ``request_timeout`` s, ``client_id``, ``backoff``; other keywords go
    to ``Cluster``.

    Consumer groups (``kafkawire.client.groups``): ``group_id`` [group.id] and ``subscribe(topics)`` or
    ``subscribe(pattern=re.compile(...))``; ``group_protocol`` "classic" or "consumer" (KIP-848)
    [group.protocol]; ``partition_assignment_strategy`` names of client-side assignors, "range",
    "roundrobin", "cooperative-sticky" [partition.assignment.strategy]; ``group_remote_assignor``
    "uniform" or "range" for the consumer protocol [group.remote.assignor]; ``group_instance_id``
    [group.instance.id] (static membership); ``session_timeout_ms`` [session.timeout.ms],
    ``heartbeat_interval_ms`` [heartbeat.interval.ms], ``max_poll_interval_ms`` (the rebalance timeout)
    [max.poll.interval.ms]; ``enable_auto_commit`` [enable.auto.commit] and ``auto_commit_interval_ms``
    [auto.commit.interval.ms]. ``commit()``, ``commit_async()``, ``committed()``.
    """

    def __init__(
        self,
        bootstrap="127.0.0.1:9092",
        *,
        auto_offset_reset: str = "latest",
        isolation_level: int | str = READ_UNCOMMITTED,
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 64 << 20,
        max_partition_fetch_bytes: int = 8 << 20,
        max_buffered_bytes: int = 64 << 20,
        check_crcs: bool = False,
        request_timeout: float = 30.0,
        client_id: str = "kafkawire-consumer",
        backoff: Backoff | None = None,
        cluster: Cluster | None = None,
        group_id: str | None = None,
        group_instance_id: str | None = None,
        group_protocol: str = "classic",
        partition_assignment_strategy=("range", "cooperative-sticky"),
        group_remote_assignor: str | None = None,
        session_timeout_ms: int = 45000,
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300000,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        **cluster_options,
    ):
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError("auto_offset_reset is 'earliest', 'latest' or 'none'")
        self.auto_offset_reset = auto_offset_reset
        if isinstance(isolation_level, str):
            isolation_level = (
                READ_COMMITTED if isolation_level.replace("-", "_") == "read_committed" else READ_UNCOMMITTED
            )
        self.isolation_level = isolation_level
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.max_buffered_bytes = max_buffered_bytes
        self.check_crcs = check_crcs
        self.backoff = backoff or Backoff()
        self._own_cluster = cluster is None
        self.cluster = cluster or Cluster(
            bootstrap, client_id=client_id, request_timeout=request_timeout, backoff=self.backoff, **cluster_options
        )
        self._parts: dict[tuple[str, int], _PartitionState] = {}
        self._chunks: deque[_Chunk] = deque()
        self._buffered = 0
        self._fetcher: asyncio.Task | None = None
        # None until made on the loop (an Event belongs to one loop) by the first use that needs them; the
        # fetcher and the readers run after it, so they are typed as always there
        self._data: asyncio.Event = None  # type: ignore[assignment]
        self._room: asyncio.Event = None  # type: ignore[assignment]
        self._changed: asyncio.Event = None  # type: ignore[assignment]
        self._error: BaseException | None = None
        self._closed = False
        self._fetch_attempt = 0
        self._partition_errors = False
        self._epochs = itertools.count(1)
        # consumer groups
        self._consumed: dict[tuple[str, int], int] = {}  # next offset after what polls returned
        self._commit_ready: dict[tuple[str, int], int] = {}  # as of the start of the latest poll (auto-commit)
        # the sync Consumer runs rebalance callbacks on its polling thread: ``_callback_runner(fn, tps)`` queues
        # one and returns a future of its error (or None); ``_callbacks_due()`` makes a waiting poll return
        self._callback_runner = None
        self._callbacks_due = None
        self._subscribed = False
        self.group: ClassicMembership | ConsumerMembership | None = None
        if group_id is not None:
            from .groups.membership import ClassicMembership, ConsumerMembership

            common: dict = dict(
                instance_id=group_instance_id,
                session_timeout_ms=session_timeout_ms,
                heartbeat_interval_ms=heartbeat_interval_ms,
                rebalance_timeout_ms=max_poll_interval_ms,
                auto_commit=enable_auto_commit,
                auto_commit_interval_ms=auto_commit_interval_ms,
            )
            if group_protocol == "classic":
                strategy = (
                    [partition_assignment_strategy]
                    if isinstance(partition_assignment_strategy, str)
                    else list(partition_assignment_strategy)
                )
                names = [n.strip() for item in strategy for n in item.split(",") if n.strip()]
                self.group = ClassicMembership(self, group_id, assignors=names, **common)
            elif group_protocol == "consumer":
                self.group = ConsumerMembership(self, group_id, remote_assignor=group_remote_assignor, **common)
            else:
                raise ValueError("group_protocol is 'classic' or 'consumer'")

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    # -- consumer groups ---------------------------------------------------------------------

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
        """Join the group (``group_id``) for ``topics`` (names) or the topics matching ``pattern``.

        The group decides which partitions this consumer reads; each starts at the group's committed
        offset (``auto_offset_reset`` without one). Rebalance callbacks, each given a sorted
        [(topic, partition)]: ``on_partitions_revoked`` (after the auto-commit, before another member
        gets them), ``on_partitions_assigned``, ``on_partitions_lost`` (when the membership was lost:
        no commit); or a ``listener`` object with methods of those names. Functions or coroutine functions.
        Calling it again changes the subscription (a rebalance).
        """
        from .groups.membership import Listener

        if self.group is None:
            raise ValueError("subscribe() needs a group_id")
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() takes topics or a pattern")
        if pattern is not None:
            import re

            self.group.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            self.group.topics = set()
        else:
            self.group.pattern = None
            self.group.topics = {topics} if isinstance(topics, str) else set(topics)
        self.group.listener = Listener(on_partitions_revoked, on_partitions_assigned, on_partitions_lost, listener)
        self.group._metadata_checked = 0.0
        self.group._known_counts = None
        was = self._subscribed
        self._subscribed = True
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # started by the first poll
        self.group.start()
        if was:
            self.group.request_rejoin()

    def subscription(self) -> list[str]:
        return sorted(self.group.topics) if self.group is not None and self._subscribed else []

    async def unsubscribe(self) -> None:
        """Leave the group (committing and revoking first); ``subscribe`` joins again."""
        if self.group is None or not self._subscribed:
            return
        self._subscribed = False
        await self.group.stop(leave=True)
        self.group.reset()
        self.assign([])

    async def commit(self, offsets: dict | None = None) -> None:
        """Commit ``offsets`` {(topic, partition): next offset}, default: the position after every record
        returned so far by the assigned partitions. Raises ``CommitFailedError`` when the group rebalanced
        meanwhile (the partitions may be another member's now)."""
        if self.group is None:
            raise ValueError("commit() needs a group_id")
        if offsets is None:
            offsets = self._consumed_offsets(self._parts)
        await self.group.commit({(t, int(p)): int(o) for (t, p), o in offsets.items()})

    def commit_async(self, offsets: dict | None = None, callback=None) -> asyncio.Future:
        """Commit without waiting: returns a future; ``callback(offsets, error_or_None)`` when it is done."""
        if offsets is None:
            offsets = self._consumed_offsets(self._parts)
        task = asyncio.get_running_loop().create_task(self.commit(offsets))

        def done(t: asyncio.Task):
            exc = None if t.cancelled() else t.exception()
            if callback is not None:
                callback(offsets, exc)

        task.add_done_callback(done)
        return task

    async def committed(self, tps) -> dict:
        """The group's committed offsets of ``tps``: {(topic, partition): offset or None}."""
        if self.group is None:
            raise ValueError("committed() needs a group_id")
        return await self.group.fetch_committed([(t, int(p)) for t, p in tps])

    def group_metadata(self) -> dict:
        """member_id, generation (classic) or member epoch (consumer protocol), instance_id, protocol,
        assignor, and for the classic protocol whether this member leads the group (runs the assignor).
        A transactional producer's ``send_offsets_to_transaction`` takes it as it is."""
        g = self.group
        if g is None:
            return {}
        return {
            "group_id": g.group_id,
            "member_id": g.member_id,
            "instance_id": g.instance_id,
            "protocol": g.protocol_name,
            "generation": getattr(g, "generation", getattr(g, "epoch", -1)),
            "assignor": getattr(g, "chosen", getattr(g, "remote_assignor", None)),
            "rebalances": g.rebalances,
            "leader": getattr(g, "leader", None),
        }

    async def wait_for_assignment(self, timeout: float | None = None) -> list[tuple[str, int]]:
        """Wait until the group has assigned partitions to this member at least once; its assignment."""
        g = self.group
        if g is None or not self._subscribed:
            raise ValueError("wait_for_assignment() needs subscribe()")
        self._start()
        g.polled()
        g.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        while not g.rebalances:
            if self._error is not None:
                err, self._error = self._error, None
                raise err
            g._changed.clear()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"no assignment from group {g.group_id!r} within {timeout}s")
            try:
                await asyncio.wait_for(g._changed.wait(), left)
            except TimeoutError:
                pass
        return sorted(self._parts)

    def _consumed_offsets(self, tps) -> dict:
        return {tp: self._consumed[tp] for tp in tps if tp in self._consumed}

    def _group_assign(self, starts: dict) -> dict:
        """Add partitions the group gave us (start: committed offset or None for auto_offset_reset), held
        until ``_release`` (after on_partitions_assigned: a seek there decides the first fetch). Returns
        their states for ``_release``."""
        wanted: dict = {tp: None for tp in self._parts}
        wanted.update(starts)
        self.assign(wanted)
        states = {}
        for tp, start in starts.items():
            state = states[tp] = self._parts[tp]
            state.held = True
            if start is not None:
                self._consumed[tp] = start
            else:
                self._consumed.pop(tp, None)
        return states

    def _release(self, states: dict[tuple[str, int], _PartitionState]) -> None:
        """Fetch the partitions ``_group_assign`` held (those still assigned: a rebalance may have moved on)."""
        for tp, state in states.items():
            if self._parts.get(tp) is state:
                state.held = False
        self._poke()

    def _hold(self, tps) -> None:
        """Partitions being revoked: no more fetches, and no poll returns their records any more."""
        for tp in tps:
            state = self._parts.get(tp)
            if state is not None:
                state.held = True

    def _wake_reader(self) -> None:
        """A poll waiting for records looks again (at ``_callbacks_due``)."""
        if self._data is not None:
            self._data.set()

    def _group_unassign(self, tps) -> None:
        self.assign({tp: None for tp in self._parts if tp not in tps})
        for tp in tps:
            self._consumed.pop(tp, None)
            self._commit_ready.pop(tp, None)

    def _fail(self, exc: BaseException) -> None:
        """An error for the reader: raised by the next poll."""
        self._error = exc
        if self._data is not None:
            self._data.set()

    # -- assignment and positions --------------------------------------------------------

    def assign(self, partitions, offset=None) -> None:
        """Consume these partitions: ``[(topic, partition)]`` or ``{(topic, partition): start}``.

        A start is "earliest", "latest" or an offset; default ``auto_offset_reset``.
        Replaces the previous assignment (positions of partitions kept are kept).
        """
        if isinstance(partitions, dict):
            wanted = dict(partitions)
        else:
            wanted = {tuple(tp): offset for tp in partitions}
        new = {}
        for tp, start in wanted.items():
            tp = (tp[0], int(tp[1]))
            state = self._parts.get(tp)
            if state is None or start is not None:
                state = _PartitionState(None)
                self._set_start(state, start if start is not None else self.auto_offset_reset)
            new[tp] = state
        self._parts = new
        self._chunks = deque(c for c in self._chunks if c.tp in new)
        self._recount()
        self._poke()

    def assignment(self) -> list[tuple[str, int]]:
        return list(self._parts)

    def _set_start(self, state: _PartitionState, start) -> None:
        # unique across the consumer, not per partition state: a partition unassigned and assigned again
        # (a group rebalance) gets a new state, and a fetch or chunk of the old one must not match it
        state.epoch = next(self._epochs)
        if isinstance(start, int) and start >= 0:
            state.position, state.pending = start, None
        else:
            state.position, state.pending = None, offset_spec(start)

    def seek(self, tp, offset) -> None:
        """Next fetch of ``tp`` starts at ``offset`` (an int, "earliest" or "latest")."""
        state = self._state(tp)
        self._set_start(state, offset)
        self._drop_chunks(tuple(tp))

    def seek_to_beginning(self, *tps) -> None:
        for tp in tps or list(self._parts):
            self.seek(tp, "earliest")

    def seek_to_end(self, *tps) -> None:
        for tp in tps or list(self._parts):
            self.seek(tp, "latest")

    async def seek_to_timestamp(self, timestamp_ms: int, *tps) -> None:
        """Each partition to the earliest offset whose timestamp is >= ``timestamp_ms`` (the end if none)."""
        wanted = [tuple(tp) for tp in (tps or list(self._parts))]
        found = await list_offsets(
            self.cluster, {tp: int(timestamp_ms) for tp in wanted}, isolation_level=self.isolation_level
        )
        for tp in wanted:
            off = found[tp].offset
            self.seek(tp, off if off >= 0 else "latest")

    async def offsets_for_times(self, timestamps: dict) -> dict:
        return await list_offsets(
            self.cluster, {tuple(tp): int(ts) for tp, ts in timestamps.items()}, isolation_level=self.isolation_level
        )

    async def beginning_offsets(self, tps) -> dict:
        found = await list_offsets(self.cluster, {tuple(tp): EARLIEST for tp in tps})
        return {tp: v.offset for tp, v in found.items()}

    async def end_offsets(self, tps) -> dict:
        found = await list_offsets(
            self.cluster, {tuple(tp): LATEST for tp in tps}, isolation_level=self.isolation_level
        )
        return {tp: v.offset for tp, v in found.items()}

    async def position(self, tp) -> int:
        """The offset of the next record that will be returned for ``tp``."""
        tp = tuple(tp)
        state = self._state(tp)
        for chunk in self._chunks:  # fetched but not yet returned
            if chunk.tp == tp and chunk.epoch == state.epoch:
                return chunk.min_offset
        if state.position is None:
            await self._resolve([tp])
        return cast(int, state.position)  # resolved

    def high_watermark(self, tp) -> int:
        """The partition's high watermark as of the last fetch (-1 before the first)."""
        return self._state(tuple(tp)).high_watermark

    def stop_at(self, tp, offset: int | None) -> None:
        """Fetch ``tp`` only up to ``offset`` (exclusive): for reading a known offset range.

        Batches that start at or after ``offset`` are dropped from fetch responses and no fetch goes out
        once the position reaches it, so at most the rest of the batch holding ``offset - 1`` comes
        back beyond the range. ``None`` removes the limit.
        """
        self._state(tuple(tp)).stop_at = offset
        self._poke()

    def pause(self, *tps) -> None:
        for tp in tps:
            self._state(tuple(tp)).paused = True

    def resume(self, *tps) -> None:
        for tp in tps:
            self._state(tuple(tp)).paused = False
        self._poke()
        if self._data is not None and self._chunks:
            self._data.set()  # what was held back while paused can be returned now

    def _state(self, tp) -> _PartitionState:
        state = self._parts.get((tp[0], int(tp[1])))
        if state is None:
            raise KeyError(f"{tp[0]}-{tp[1]} is not assigned")
        return state

    def _drop_chunks(self, tp) -> None:
        self._chunks = deque(c for c in self._chunks if c.tp != tp)
        self._recount()
        self._poke()

    def _recount(self):
        self._buffered = sum(len(c.data) for c in self._chunks)
        if self._room is not None and self._buffered < self.max_buffered_bytes:
            self._room.set()

    def _poke(self):
        if self._changed is not None:
            self._changed.set()

    async def _resolve(self, tps) -> None:
        specs = {tp: self._parts[tp].pending for tp in tps if self._parts[tp].pending is not None}
        if not specs:
            return
        epochs = {tp: self._parts[tp].epoch for tp in specs}
        found = await list_offsets(self.cluster, specs, isolation_level=self.isolation_level)
        for tp, value in found.items():
            state = self._parts.get(tp)
            if state is not None and state.epoch == epochs[tp] and state.pending is not None:
                state.position, state.pending = value.offset, None

    # -- the fetcher ----------------------------------------------------------------------

    def _start(self):
        if self._closed:
            raise RuntimeError("consumer is closed")
        if self._fetcher is None or self._fetcher.done():
            self._data = asyncio.Event()
            self._room = asyncio.Event()
            self._room.set()
            self._changed = asyncio.Event()
            self._fetcher = asyncio.get_running_loop().create_task(self._fetch_loop())

    async def _fetch_loop(self) -> None:
        while True:
            try:
                while self._buffered >= self.max_buffered_bytes:
                    self._room.clear()
                    await self._room.wait()
                active = [
                    tp
                    for tp, s in self._parts.items()
                    if not s.paused
                    and not s.held
                    and (s.stop_at is None or s.position is None or s.position < s.stop_at)
                ]
                if not active:
                    self._changed.clear()
                    await self._changed.wait()
                    continue
                pending = [tp for tp in active if self._parts[tp].position is None]
                if pending:
                    await self._resolve(pending)
                by_node: dict[int, list] = {}
                for tp in active:
                    state = self._parts.get(tp)
                    if state is None or state.position is None:
                        continue
                    try:
                        leader = await self.cluster.leader(*tp)
                    except KafkaError as exc:
                        if exc.code in STALE_METADATA or exc.retriable:
                            continue
                        raise
                    by_node.setdefault(leader, []).append(tp)
                if not by_node:
                    await self._backoff()
                    continue
                self._changed.clear()
                self._partition_errors = False
                results = await asyncio.gather(
                    *(self._fetch(node, tps) for node, tps in by_node.items()), return_exceptions=True
                )
                got_any = False
                for r in results:
                    if isinstance(r, BaseException):
                        if isinstance(r, (ConnectionClosed, RequestTimeout, OSError, TimeoutError)) or (
                            isinstance(r, KafkaError) and (r.retriable or r.code in STALE_METADATA)
                        ):
                            self.cluster.invalidate()
                            continue
                        raise r
                    got_any = got_any or r
                if got_any:
                    self._fetch_attempt = 0
                elif any(isinstance(r, BaseException) for r in results):
                    await self._backoff(refresh=True)
                elif self._partition_errors:  # e.g. NOT_LEADER_OR_FOLLOWER: metadata refreshes on the next turn
                    await self._backoff()
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # surfaced to the reader by the next poll
                self._error = exc
                self._data.set()
                self._changed.clear()
                await self._changed.wait()

    async def _backoff(self, refresh: bool = False):
        self._fetch_attempt += 1
        await asyncio.sleep(self.backoff.delay(self._fetch_attempt))
        if refresh:
            try:
                await self.cluster.refresh()
            except (OSError, TimeoutError, KafkaError):
                pass

    async def _fetch(self, node: int, tps: list) -> bool:
        """One Fetch to ``node``; returns whether any data arrived."""
        conn = await self.cluster.connection(node)
        # partitions unassigned while we looked up leaders (a group rebalance revokes them at any await)
        tps = [tp for tp in tps if tp in self._parts and self._parts[tp].position is not None]
        tps = [tp for tp in tps if not self._parts[tp].held]
        if not tps:
            return False
        tps = await self._validate_positions(conn, tps)
        if not tps:
            return False
        version = conn.version_for(ApiKey.FETCH)
        topic_ids = {t: (self.cluster.topics[t].topic_id if t in self.cluster.topics else ZERO_UUID) for t, _ in tps}
        if version >= 13 and any(i == ZERO_UUID for i in topic_ids.values()):
            version = 12  # topic ids unknown (old metadata): fetch by name
        cls = message_class("FetchRequest")
        topics: dict[str, list] = {}
        epochs = {}
        state: _PartitionState | None
        for tp in tps:
            state = self._parts[tp]
            epochs[tp] = state.epoch
            topics.setdefault(tp[0], []).append(
                cls.FetchPartition(
                    partition=tp[1],
                    # the leader answers FENCED_LEADER_EPOCH to a client with older metadata, UNKNOWN_LEADER_EPOCH
                    # when it is behind: both refresh metadata (STALE_METADATA), as the Java consumer does
                    current_leader_epoch=self._leader_epoch(tp),
                    fetch_offset=cast(int, state.position),  # partitions without one were left out above
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=max(state.max_bytes, self.max_partition_fetch_bytes),
                )
            )
        req = cls(
            replica_id=-1,
            max_wait_ms=self.fetch_max_wait_ms,
            min_bytes=self.fetch_min_bytes,
            max_bytes=self.fetch_max_bytes,
            isolation_level=self.isolation_level,
            session_id=0,
            session_epoch=-1,
            forgotten_topics_data=[],
            rack_id="",
            topics=[cls.FetchTopic(topic=t, topic_id=topic_ids[t], partitions=ps) for t, ps in topics.items()],
        )
        resp = cast(
            "FetchResponse",
            await conn.request(
                req, version=version, timeout=self.cluster.request_timeout + self.fetch_max_wait_ms / 1000
            ),
        )
        if resp.error_code:
            raise KafkaError(resp.error_code, "Fetch")
        got = False
        for t in resp.responses:
            name = t.topic if version < 13 else self.cluster.topic_names.get(t.topic_id, t.topic)
            for p in t.partitions:
                tp = (name, p.partition_index)
                state = self._parts.get(tp)
                if state is None or state.epoch != epochs.get(tp):
                    continue  # unassigned or sought while the fetch was out
                got |= self._handle_partition(tp, state, p)
        if got:
            self._data.set()
        return got

    def _leader_epoch(self, tp) -> int:
        info = self.cluster.topics.get(tp[0])
        part = info.partitions.get(tp[1]) if info is not None else None
        return part.leader_epoch if part is not None and part.leader_epoch is not None else -1

    async def _validate_positions(self, conn, tps: list) -> list:
        """KIP-320, as the Java consumer: after the leader epoch of a partition changes, ask the leader
        (OffsetForLeaderEpoch) where the epoch of the last batch read ends on its log. If it ends before the
        position, the log was truncated under the consumer (an unclean leader election): the position moves
        back to where the logs diverge (with ``auto_offset_reset`` "none": an error). Returns the partitions
        that may be fetched now."""
        todo = {}
        for tp in tps:
            state = self._parts[tp]
            current = self._leader_epoch(tp)
            if current > state.validated_epoch:
                if state.record_epoch < 0 or current < 0:
                    state.validated_epoch = current  # nothing read yet: nothing to check
                else:
                    todo[tp] = (state, current)
        if not todo:
            return tps
        cls = message_class("OffsetForLeaderEpochRequest")
        topics: dict[str, list] = {}
        for (topic, partition), (state, current) in todo.items():
            topics.setdefault(topic, []).append(
                cls.OffsetForLeaderPartition(
                    partition=partition, current_leader_epoch=current, leader_epoch=state.record_epoch
                )
            )
        version = min(conn.version_for(ApiKey.OFFSET_FOR_LEADER_EPOCH), 4)
        req = cls(replica_id=-1, topics=[cls.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in topics.items()])
        resp = await conn.request(req, version=version)
        retry = set()
        for t in resp.topics:
            for p in t.partitions:
                tp = (t.topic, p.partition)
                if tp not in todo:
                    continue
                state, current = todo[tp]
                if state is not self._parts.get(tp):
                    continue  # unassigned meanwhile
                if p.error_code:
                    if p.error_code in STALE_METADATA or KafkaError(p.error_code).retriable:
                        self.cluster.handle_error(p.error_code, tp[0])
                        self._partition_errors = True
                        retry.add(tp)
                        continue
                    raise KafkaError(p.error_code, f"OffsetForLeaderEpoch {tp[0]}-{tp[1]}")
                state.validated_epoch = current
                if p.end_offset < 0 or p.leader_epoch < 0:  # the leader knows no such epoch: reset by policy
                    if self.auto_offset_reset == "none":
                        raise KafkaError(kerrors.OFFSET_OUT_OF_RANGE, f"{tp[0]}-{tp[1]} epoch {state.record_epoch}")
                    self._set_start(state, self.auto_offset_reset)
                    self._drop_chunks(tp)
                    retry.add(tp)
                elif state.position is not None and p.end_offset < state.position:
                    if self.auto_offset_reset == "none":
                        raise KafkaError(
                            kerrors.OFFSET_OUT_OF_RANGE,
                            f"{tp[0]}-{tp[1]}: log truncated at {p.end_offset} below position {state.position}",
                        )
                    _log.warning(
                        "truncation detected on %s-%d at offset %d: resetting to %d, where the logs diverge",
                        tp[0],
                        tp[1],
                        state.position,
                        p.end_offset,
                    )
                    self.seek(tp, p.end_offset)
                    state.validated_epoch, state.record_epoch = current, p.leader_epoch
                    retry.add(tp)
        return [tp for tp in tps if tp not in retry]

    def _handle_partition(self, tp, state: _PartitionState, p) -> bool:
        code = p.error_code
        if code:
            if code == kerrors.OFFSET_OUT_OF_RANGE:
                if self.auto_offset_reset == "none":
                    raise KafkaError(code, f"{tp[0]}-{tp[1]} offset {state.position}")
                self._set_start(state, self.auto_offset_reset)
                return False
            if code in STALE_METADATA or KafkaError(code).retriable:
                self.cluster.handle_error(code, tp[0])
                self.cluster.invalidate()
                self._partition_errors = True
                return False
            raise KafkaError(code, f"fetching {tp[0]}-{tp[1]}")
        state.high_watermark = p.high_watermark
        state.last_stable_offset = p.last_stable_offset
        state.log_start_offset = p.log_start_offset
        records = p.records
        if not records:
            return False
        view = records if isinstance(records, memoryview) else memoryview(records)
        reader = iter_batches(view)
        next_offset = None
        end = 0
        stop = state.stop_at
        for batch in reader:
            if stop is not None and batch.base_offset >= stop and next_offset is not None:
                break  # past the range the caller reads: leave it unfetched
            if self.check_crcs:
                batch.validate_crc()
            next_offset = batch.last_offset + 1
            end = batch.position + len(batch)
        if next_offset is None:
            if reader.partial_tail_bytes:
                # the first batch is bigger than we asked for (a pre-KIP-74 broker): ask for more next time
                state.max_bytes = max(self.max_partition_fetch_bytes, state.max_bytes) * 2
            return False
        state.max_bytes = 0
        start = cast(int, state.position)  # a partition is fetched from its position
        state.position = max(next_offset, start)
        state.record_epoch = batch.partition_leader_epoch
        aborted = None
        if self.isolation_level == READ_COMMITTED and p.aborted_transactions:
            aborted = sorted((a.producer_id, a.first_offset) for a in p.aborted_transactions)
        self._chunks.append(_Chunk(tp, state.epoch, view[:end], start, aborted, p.high_watermark, state.position))
        self._buffered += end
        return True

    # -- reading ----------------------------------------------------------------------------

    async def _take(self, timeout: float | None, max_bytes: int | None = None) -> list[_Chunk]:
        self._start()
        if self.group is not None:
            # auto-commit commits what earlier polls returned (the caller has processed it by now)
            self._commit_ready = dict(self._consumed)
            if self._subscribed:
                self.group.polled()
                self.group.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = [tp for tp, s in self._parts.items() if s.pending is not None]
        if pending:  # resolve "earliest"/"latest" now, not when the fetcher gets round to it
            await self._resolve(pending)
            self._poke()
        while True:
            if self._error is not None:
                err, self._error = self._error, None
                self._poke()
                raise err
            if self._callbacks_due is not None and self._callbacks_due():
                return []  # the caller runs them on its thread, then polls again
            chunks: list[_Chunk] = []
            size = 0
            kept = []  # data of paused (or held) partitions stays buffered until they are resumed
            while self._chunks and (max_bytes is None or not chunks or size < max_bytes):
                c = self._chunks.popleft()
                state = self._parts.get(c.tp)
                if state is None or state.epoch != c.epoch:
                    continue
                if state.paused or state.held:
                    kept.append(c)
                    continue
                chunks.append(c)
                size += len(c.data)
            if kept:
                self._chunks.extendleft(reversed(kept))
            if chunks:
                self._recount()
                for c in chunks:  # consumed once returned: what a commit of this member covers
                    self._consumed[c.tp] = c.end_offset
                return chunks
            self._data.clear()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return []
            try:
                await asyncio.wait_for(self._data.wait(), left)
            except TimeoutError:
                return []

    async def getmany(self, timeout: float | None = 1.0, max_records: int | None = None) -> dict:
        """Records fetched so far (waiting up to ``timeout`` for some): {(topic, partition): [ConsumerRecord]}."""
        chunks = await self._take(timeout)
        out: dict[tuple[str, int], list] = {}
        for c in chunks:
            out.setdefault(c.tp, []).extend(self._decode(c))
        if max_records is not None:  # put back what does not fit
            return self._limit(out, max_records)
        return {tp: recs for tp, recs in out.items() if recs}

    def _limit(self, out: dict, max_records: int) -> dict:
        kept, n = {}, 0
        for tp, recs in out.items():
            room = max_records - n
            if room <= 0 or not recs:
                if recs:
                    self.seek(tp, recs[0].offset)
                    self._consumed[tp] = recs[0].offset
                continue
            kept[tp] = recs[:room]
            n += len(kept[tp])
            if len(recs) > room:
                self.seek(tp, recs[room].offset)
                self._consumed[tp] = recs[room].offset
        return kept

    async def records(self, timeout: float | None = 1.0) -> list[ConsumerRecord]:
        """``getmany`` flattened into one list."""
        return [r for recs in (await self.getmany(timeout)).values() for r in recs]

    def _decode(self, c: _Chunk) -> list[ConsumerRecord]:
        topic, partition = c.tp
        out: list[ConsumerRecord] = []
        append = out.append
        new = tuple.__new__
        for batch in _visible_batches(c):
            ts_type = 1 if batch.timestamp_type == 1 else 0
            for r in batch.records():
                if r.offset < c.min_offset:
                    continue
                append(
                    new(ConsumerRecord, (topic, partition, r.offset, r.timestamp, ts_type, r.key, r.value, r.headers))
                )
        return out

    async def poll_arrow(
        self, timeout: float | None = 1.0, *, headers: bool = False, max_bytes: int | None = None
    ) -> list:
        """Fetched records as ``pyarrow.RecordBatch`` es (one per partition and poll; schema ``arrow.SCHEMA``)."""
        chunks = await self._take(timeout, max_bytes)
        return decode_chunks_arrow(chunks, headers=headers)

    async def close(self) -> None:
        """Stop; a group member commits (auto-commit), revokes its partitions and leaves the group."""
        if self._closed:
            return
        if self.group is not None and self._subscribed:
            await self.group.stop(leave=True)
        elif self.group is not None:
            await self.group.stop(leave=False)
        self._closed = True
        if self._fetcher is not None:
            self._fetcher.cancel()
            try:
                await self._fetcher
            except BaseException:
                pass
        self._chunks.clear()
        if self._own_cluster:
            await self.cluster.close()


def _visible_batches(c: _Chunk):
    """The data batches of a chunk a reader may see: no control batches, no aborted transactions."""
    aborted = list(c.aborted) if c.aborted else None
    ongoing: set[int] = set()
    for batch in iter_batches(c.data):
        if batch.magic < 2:
            yield batch
            continue
        if aborted is not None:
            # producers whose aborted transaction started at or before this batch
            while aborted and aborted[0][1] <= batch.last_offset:
                ongoing.add(aborted.pop(0)[0])
            if batch.is_control:
                if batch.producer_id in ongoing:
                    ongoing.discard(batch.producer_id)  # the abort marker ends the transaction
                continue
            if batch.is_transactional and batch.producer_id in ongoing:
                continue
        elif batch.is_control:
            continue
        yield batch


def decode_chunks_arrow(chunks, *, headers: bool = False) -> list:
    from .arrow import ArrowColumns

    cols: dict[tuple[str, int], ArrowColumns] = {}
    for c in chunks:
        col = cols.get(c.tp)
        if col is None:
            col = cols[c.tp] = ArrowColumns(c.tp[0], c.tp[1], headers=headers)
        for batch in _visible_batches(c):
            if batch.magic < 2:
                raise CorruptRecordError("the Arrow path reads v2 record batches only (message format 2)")
            col.add_batch(batch, c.min_offset)
    return [col.to_batch() for col in cols.values() if len(col)]


__all__ = ["AsyncConsumer", "ConsumerRecord", "decode_chunks_arrow"]
