"""Group membership of a consumer: the coordinator, the classic and the KIP-848 protocols, offset commits.

One membership task per consumer runs on the client's event loop, beside the
fetcher: it finds the group coordinator (FindCoordinator) and talks to it on a
connection of its own (a JoinGroup can wait for a whole rebalance, and a broker
answers one connection's requests in order: fetches must not queue behind it).

``ClassicMembership`` (``group_protocol="classic"``): JoinGroup, SyncGroup
(the leader runs the client-side assignor the coordinator picked), Heartbeat,
LeaveGroup. With assignors that all support it (cooperative-sticky) the
rebalance is incremental (KIP-429): owned partitions are listed in the
subscription and only those that move are revoked, after which the member
rejoins so that they can be handed on. Otherwise it is eager: everything is
revoked before joining.

``ConsumerMembership`` (``group_protocol="consumer"``, KIP-848): one
ConsumerGroupHeartbeat loop; the coordinator computes the assignment
(``group_remote_assignor``: uniform or range) and the member reconciles to it:
revokes what is no longer its, fetches committed offsets of what is new and
acknowledges with its owned partitions in the next heartbeat.

Errors as Kafka's Java client handles them: COORDINATOR_NOT_AVAILABLE,
NOT_COORDINATOR or a lost connection -> find the coordinator again;
REBALANCE_IN_PROGRESS -> rejoin; UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION ->
partitions lost, rejoin (as a new member for an unknown id); KIP-848
FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID -> partitions lost, rejoin at epoch 0;
FENCED_INSTANCE_ID and configuration errors are fatal: raised by the next poll.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from ...protocol import ApiKey, KafkaError, errors as kerrors
from ...protocol.messages import (
    ConsumerGroupHeartbeatRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from ..connection import Connection, ConnectionClosed, RequestTimeout
from .assignors import COOPERATIVE, EAGER, TP, Assignor, CooperativeStickyAssignor, MemberSubscription, assignor
from .protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    subscription_version,
)

if TYPE_CHECKING:
    import re

    from ..consumer import AsyncConsumer

log = logging.getLogger("kafkawire.client.groups")

OFFSETS_BY_NAME = 9  # OffsetCommit/OffsetFetch v10 name topics by id: v9 is the last with names, enough here

COORDINATOR_GONE = frozenset({kerrors.COORDINATOR_NOT_AVAILABLE, kerrors.NOT_COORDINATOR})
FATAL_CLASSIC = frozenset(
    {
        kerrors.FENCED_INSTANCE_ID,
        kerrors.GROUP_AUTHORIZATION_FAILED,
        kerrors.INCONSISTENT_GROUP_PROTOCOL,
        kerrors.GROUP_MAX_SIZE_REACHED,
        kerrors.INVALID_SESSION_TIMEOUT,
        kerrors.INVALID_GROUP_ID,
        kerrors.UNSUPPORTED_VERSION,
    }
)
FATAL_CONSUMER = frozenset(
    {
        kerrors.FENCED_INSTANCE_ID,
        kerrors.GROUP_AUTHORIZATION_FAILED,
        kerrors.UNSUPPORTED_ASSIGNOR,
        kerrors.INVALID_REQUEST,
        kerrors.GROUP_MAX_SIZE_REACHED,
        kerrors.UNSUPPORTED_VERSION,
        kerrors.INVALID_GROUP_ID,
    }
)


def fit(cls, version: int, **fields):
    """``cls(**fields)`` without the fields that ``version`` of the message does not have."""
    have = {f.attr for f in cls._fields if version in f.versions}
    return cls(**{k: v for k, v in fields.items() if k in have})


class GroupError(KafkaError):
    """A group error the consumer cannot recover from (e.g. FENCED_INSTANCE_ID): raised by the next poll."""


class CommitFailedError(KafkaError):
    """A commit the coordinator refused because the group rebalanced (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
    REBALANCE_IN_PROGRESS, FENCED_MEMBER_EPOCH, STALE_MEMBER_EPOCH): the partitions may belong to another
    member now, as Kafka's CommitFailedException says."""


class NoOffsetForPartitionError(KafkaError):
    """Assigned partitions without a committed offset when ``auto_offset_reset="none"``: raised by the next poll
    (Kafka's NoOffsetForPartitionException); those partitions are not read."""


REBALANCED = frozenset(
    {
        kerrors.ILLEGAL_GENERATION,
        kerrors.UNKNOWN_MEMBER_ID,
        kerrors.REBALANCE_IN_PROGRESS,
        kerrors.FENCED_MEMBER_EPOCH,
        kerrors.STALE_MEMBER_EPOCH,
        kerrors.FENCED_INSTANCE_ID,
    }
)


class Listener:
    """The rebalance callbacks (Kafka's ConsumerRebalanceListener); each gets a sorted [(topic, partition)].

    Callbacks may be plain functions or coroutine functions. ``on_partitions_lost`` defaults to
    ``on_partitions_revoked`` as in Kafka (lost partitions are not committed first: they may already
    belong to another member).
    """

    def __init__(
        self, on_partitions_revoked=None, on_partitions_assigned=None, on_partitions_lost=None, listener: Any = None
    ):
        self.revoked = on_partitions_revoked or getattr(listener, "on_partitions_revoked", None)
        self.assigned = on_partitions_assigned or getattr(listener, "on_partitions_assigned", None)
        self.lost = on_partitions_lost or getattr(listener, "on_partitions_lost", None) or self.revoked


class Membership:
    """What both protocols share: the coordinator, commits, committed offsets, applying an assignment."""

    protocol_name = ""

    def __init__(
        self,
        consumer: AsyncConsumer,
        group_id: str,
        *,
        instance_id: str | None,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        rebalance_timeout_ms: int,
        auto_commit: bool,
        auto_commit_interval_ms: int,
    ):
        self.consumer = consumer
        self.cluster = consumer.cluster
        self.group_id = group_id
        self.instance_id = instance_id
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.auto_commit = auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.listener = Listener()
        self.topics: set[str] = set()  # the subscription as topic names (a pattern resolved)
        self.pattern: re.Pattern[str] | None = None
        self.member_id = ""
        self.owned: set[TP] = set()
        self.committed: dict[TP, int] = {}  # what we last committed or found committed
        self.rebalances = 0  # completed assignments (for tests and metrics)
        self._coordinator: Connection | None = None
        self._coordinator_id = -1
        self._task: asyncio.Task | None = None
        self._auto_task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        self._attempt = 0
        self._changed = asyncio.Event()  # set whenever the assignment changes (wait_for_assignment)
        self._metadata_checked = 0.0
        self.last_poll = time.monotonic()
        self.poll_expired = False  # left the group: no poll within max_poll_interval_ms
        self._known_counts: dict[str, int] | None = None  # partitions per subscribed topic at the last check

    # -- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None or self._task.done():
            self.last_poll = time.monotonic()
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self._run())
            if self.auto_commit and (self._auto_task is None or self._auto_task.done()):
                self._auto_task = loop.create_task(self._auto_commit_loop())

    def wake(self) -> None:
        self._wake.set()

    def polled(self) -> None:
        """The application polled: it is alive (max_poll_interval_ms); a member that left for want of polls
        joins again."""
        self.last_poll = time.monotonic()
        if self.poll_expired:
            self.poll_expired = False
            self.wake()

    async def _poll_timeout(self) -> None:
        """No poll within max_poll_interval_ms: as Kafka's client, leave the group so that live members get
        our partitions (a static member only gives them up: its session timeout decides). They are lost to
        us (no commit: the application has stopped consuming them); the next poll joins again."""
        log.warning(
            "group %s: no poll within max_poll_interval_ms (%d ms): leaving the group until the next poll",
            self.group_id,
            self.rebalance_timeout_ms,
        )
        self.poll_expired = True
        try:
            await self._leave("consumer poll timeout has expired")
        finally:
            self._invalidate()
            await self.lose()

    def reset(self) -> None:
        """After ``stop()``: a new membership of the same consumer (``subscribe`` after ``unsubscribe``)."""
        self._stopping = False
        self._task = self._auto_task = None
        self.poll_expired = False
        self._invalidate()

    async def _sleep(self, seconds: float) -> None:
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), max(0.0, seconds))
        except TimeoutError:
            pass

    async def _run(self) -> None:
        while not self._stopping:
            try:
                if not self.poll_expired and time.monotonic() - self.last_poll > self.rebalance_timeout_ms / 1000:
                    await self._poll_timeout()
                if self.poll_expired:
                    await self._sleep(1.0)  # until the next poll wakes us
                    continue
                await self._step()
                self._attempt = 0
            except asyncio.CancelledError:
                raise
            except GroupError as exc:
                log.error("group %s: %s", self.group_id, exc)
                # e.g. another process took our group_instance_id: our partitions are its now (no commit)
                self._invalidate()
                try:
                    await self.lose()
                finally:
                    self.consumer._fail(exc)
                return
            except (KafkaError, OSError, TimeoutError) as exc:
                if isinstance(exc, (ConnectionClosed, RequestTimeout, OSError)) or (
                    isinstance(exc, KafkaError) and exc.code in COORDINATOR_GONE
                ):
                    await self._coordinator_lost()
                self._attempt += 1
                log.info("group %s: %s (retrying)", self.group_id, exc)
                await asyncio.sleep(self.consumer.backoff.delay(self._attempt))
            except Exception as exc:  # a bug or a callback's error: surface it, keep the member alive
                log.exception("group %s: membership step failed", self.group_id)
                self.consumer._fail(exc)
                self._attempt += 1
                await asyncio.sleep(self.consumer.backoff.delay(self._attempt))

    async def _step(self) -> None:
        raise NotImplementedError

    async def stop(self, leave: bool = True) -> None:
        """Commit (auto-commit), revoke everything, leave the group, close the coordinator connection."""
        self._stopping = True
        for task in (self._task, self._auto_task):
            if task is not None and not task.done():
                task.cancel()
                try:
                    await task
                except BaseException:
                    pass
        try:
            if self.owned and self._valid():
                self.consumer._hold(self.owned)
                if self.auto_commit:
                    await self._commit_quietly(self.consumer._consumed_offsets(self.owned))
                await self._callback(self.listener.revoked, sorted(self.owned))
            elif self.owned:
                await self._callback(self.listener.lost, sorted(self.owned))
            if leave:
                await self._leave()
        except (KafkaError, OSError, TimeoutError) as exc:
            log.info("group %s: leaving: %s", self.group_id, exc)
        finally:
            self.owned = set()
            if self._coordinator is not None:
                await self._coordinator.close()
                self._coordinator = None

    async def _leave(self, reason: str = "the consumer is closing") -> None:
        raise NotImplementedError

    def _valid(self) -> bool:
        raise NotImplementedError

    def _invalidate(self) -> None:
        """Forget the generation or epoch: commits with it would be refused."""
        raise NotImplementedError

    # -- the coordinator ---------------------------------------------------------------------------------

    async def coordinator(self) -> Connection:
        conn = self._coordinator
        if conn is not None and not conn.closed:
            return conn
        self._coordinator = None
        any_conn = await self.cluster.any_connection()
        version = any_conn.version_for(ApiKey.FIND_COORDINATOR)
        req = fit(FindCoordinatorRequest, version, key=self.group_id, key_type=0, coordinator_keys=[self.group_id])
        resp: Any = await any_conn.request(req, version=version)
        if version >= 4:
            c = resp.coordinators[0]
            code, node, host, port = c.error_code, c.node_id, c.host, c.port
        else:
            code, node, host, port = resp.error_code, resp.node_id, resp.host, resp.port
        if code:
            raise KafkaError(code, f"FindCoordinator for group {self.group_id!r}")
        # a connection of its own, not in the cluster's pool (see the module docstring)
        conn = await Connection.open(host, port, **self.cluster._conn_kwargs(node))
        self._coordinator, self._coordinator_id = conn, node
        return conn

    async def _coordinator_lost(self) -> None:
        conn, self._coordinator = self._coordinator, None
        if conn is not None:
            await conn.close()

    async def request(self, cls, *, max_version: int | None = None, timeout: float | None = None, **fields):
        """Send a ``cls`` request with ``fields`` to the coordinator at the negotiated version (at most
        ``max_version``); fields the version does not have are left out."""
        conn = await self.coordinator()
        version = conn.version_for(cls.api_key)
        if max_version is not None:
            version = min(version, max_version)
        body = fit(cls, version, **fields)
        try:
            return await conn.request(body, version=version, timeout=timeout)
        except (ConnectionClosed, RequestTimeout, OSError):
            await self._coordinator_lost()
            raise

    # -- commits ------------------------------------------------------------------------------------------

    def _commit_identity(self) -> tuple[int, str]:
        raise NotImplementedError

    async def commit(self, offsets: dict[TP, int]) -> None:
        """Commit ``offsets`` (next offsets to read); retries retriable errors, raises CommitFailedError."""
        if not offsets:
            return
        for attempt in range(1, 6):
            try:
                await self._commit_once(offsets)
                return
            except CommitFailedError:
                raise
            except (KafkaError, OSError, TimeoutError) as exc:
                retriable = isinstance(exc, (OSError, TimeoutError)) or (
                    isinstance(exc, KafkaError) and (exc.retriable or exc.code in COORDINATOR_GONE)
                )
                if isinstance(exc, KafkaError) and exc.code in COORDINATOR_GONE:
                    await self._coordinator_lost()
                if not retriable or attempt == 5:
                    raise
                await asyncio.sleep(self.consumer.backoff.delay(attempt))

    async def _commit_once(self, offsets: dict[TP, int]) -> None:
        generation, member_id = self._commit_identity()
        by_topic: dict[str, list] = {}
        for (t, p), off in sorted(offsets.items()):
            by_topic.setdefault(t, []).append(
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=off, committed_leader_epoch=-1, committed_metadata=""
                )
            )
        resp = await self.request(
            OffsetCommitRequest,
            max_version=OFFSETS_BY_NAME,
            group_id=self.group_id,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=self.instance_id,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        first = 0
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    first = first or p.error_code
                else:
                    self.committed[(t.name, p.partition_index)] = offsets[(t.name, p.partition_index)]
        if first:
            if first in REBALANCED:
                self._on_commit_rebalanced(first)
                raise CommitFailedError(first, f"commit of group {self.group_id!r}: the group rebalanced")
            raise KafkaError(first, f"commit of group {self.group_id!r}")

    def _on_commit_rebalanced(self, code: int) -> None:
        """A commit told us that our membership is stale: let the protocol rejoin."""

    async def _commit_quietly(self, offsets: dict[TP, int]) -> None:
        try:
            await self.commit({tp: o for tp, o in offsets.items() if self.committed.get(tp) != o})
        except (KafkaError, OSError, TimeoutError) as exc:
            log.warning("group %s: auto-commit failed: %s", self.group_id, exc)

    async def _auto_commit_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.auto_commit_interval_ms / 1000)
            if self.owned and self._valid():
                ready = self.consumer._commit_ready
                await self._commit_quietly({tp: o for tp, o in ready.items() if tp in self.owned})

    async def fetch_committed(self, tps) -> dict[TP, int | None]:
        """The group's committed offsets of ``tps`` (None where there is none)."""
        tps = sorted(tps)
        if not tps:
            return {}
        for attempt in range(1, 11):
            try:
                return await self._fetch_committed_once(tps)
            except (KafkaError, OSError, TimeoutError) as exc:
                retriable = isinstance(exc, (OSError, TimeoutError)) or exc.retriable or exc.code in COORDINATOR_GONE
                if isinstance(exc, KafkaError) and exc.code in COORDINATOR_GONE:
                    await self._coordinator_lost()
                if not retriable or attempt == 10:
                    raise
                await asyncio.sleep(self.consumer.backoff.delay(attempt))
        raise AssertionError("unreachable")

    async def _fetch_committed_once(self, tps: list[TP]) -> dict[TP, int | None]:
        conn = await self.coordinator()
        version = min(conn.version_for(ApiKey.OFFSET_FETCH), OFFSETS_BY_NAME)
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        out: dict[TP, int | None] = {}
        if version >= 8:
            G = OffsetFetchRequest.OffsetFetchRequestGroup
            resp = await self.request(
                OffsetFetchRequest,
                max_version=OFFSETS_BY_NAME,
                require_stable=True,
                groups=[
                    G(
                        group_id=self.group_id,
                        member_id=None,
                        member_epoch=-1,
                        topics=[
                            OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                            for t, ps in by_topic.items()
                        ],
                    )
                ],
            )
            group = resp.groups[0]
            if group.error_code:
                raise KafkaError(group.error_code, f"OffsetFetch of group {self.group_id!r}")
            topics = group.topics
        else:
            resp = await self.request(
                OffsetFetchRequest,
                max_version=OFFSETS_BY_NAME,
                group_id=self.group_id,
                require_stable=True,
                topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()
                ],
            )
            if version >= 2 and resp.error_code:
                raise KafkaError(resp.error_code, f"OffsetFetch of group {self.group_id!r}")
            topics = resp.topics
        for t in topics:
            for p in t.partitions:
                if p.error_code:
                    raise KafkaError(p.error_code, f"OffsetFetch {t.name}-{p.partition_index}")
                out[(t.name, p.partition_index)] = p.committed_offset if p.committed_offset >= 0 else None
        return out

    # -- applying an assignment ---------------------------------------------------------------------------

    def _failed(self, fn, exc: BaseException) -> None:
        log.error(
            "group %s: rebalance callback %s failed: %r", self.group_id, getattr(fn, "__name__", fn), exc, exc_info=exc
        )

    async def _callback(self, fn, tps: list[TP], *, wait: bool = True, then=None) -> None:
        """Run a rebalance callback, then ``then()``. Its exception does not stop the rebalance (that would
        leave the group half-done): as in Kafka's client the poll raises it.

        The sync ``Consumer`` gives plain functions to the thread that polls (Kafka's listener contract:
        callbacks run inside poll(), close() or unsubscribe()); that thread raises their errors itself.
        ``wait=False`` (on_partitions_assigned there) goes on without waiting for that poll, so that
        heartbeats continue; ``then`` runs once the callback has.
        """
        runner = self.consumer._callback_runner
        if fn is not None and runner is not None and not inspect.iscoroutinefunction(fn):
            fut = runner(fn, tps)

            def done(f: asyncio.Future) -> None:
                if not f.cancelled() and f.result() is not None:
                    self._failed(fn, f.result())
                if then is not None:
                    then()

            if not wait:
                fut.add_done_callback(done)
                return
            await self._await_polling_thread(fut)
            done(fut)
            return
        try:
            if fn is not None:
                result = fn(tps)
                if inspect.isawaitable(result):
                    await result
        except Exception as exc:
            self._failed(fn, exc)
            self.consumer._fail(exc)
        if then is not None:
            then()

    async def _await_polling_thread(self, fut: asyncio.Future) -> None:
        """Wait until the application's next poll has run a callback, staying alive meanwhile (Kafka's
        heartbeat thread keeps heartbeating while the application has not polled yet)."""
        while not fut.done():
            try:
                await asyncio.wait_for(asyncio.shield(fut), self._heartbeat_every())
            except TimeoutError:
                await self._keep_alive()

    async def _keep_alive(self) -> None:
        """A heartbeat while a rebalance waits for the application (see ``_await_polling_thread``)."""

    def _heartbeat_every(self) -> float:
        return self.heartbeat_interval_ms / 1000

    async def revoke(self, tps: set[TP], *, commit: bool = True) -> None:
        """Stop fetching ``tps``: commit their consumed offsets, then tell the listener."""
        if not tps:
            return
        self.consumer._hold(tps)  # what the commit covers is all that polls return of them
        if commit and self.auto_commit:
            await self._commit_quietly(self.consumer._consumed_offsets(tps))
        try:
            await self._callback(self.listener.revoked, sorted(tps))
        finally:  # even when stop() cancels the wait: the polling thread still runs the queued callback
            self.owned -= tps
            self.consumer._group_unassign(tps)
            self._changed.set()

    async def lose(self) -> None:
        """Our partitions may already be someone else's: no commit, ``on_partitions_lost``."""
        if not self.owned:
            return
        lost = set(self.owned)
        self.consumer._hold(lost)
        try:
            await self._callback(self.listener.lost, sorted(lost))
        finally:
            self.owned -= lost
            self.consumer._group_unassign(lost)
            self._changed.set()

    async def add(self, tps: set[TP]) -> None:
        """Start fetching ``tps`` at the group's committed offsets (``auto_offset_reset`` without one), once
        on_partitions_assigned has run: a seek there decides where reading starts (Kafka's contract)."""
        held: dict = {}
        if tps:
            committed = await self.fetch_committed(tps)
            for tp, off in committed.items():
                if off is not None:
                    self.committed[tp] = off
            self.owned |= tps
            starts = {tp: committed.get(tp) for tp in tps}
            if self.consumer.auto_offset_reset == "none":
                # Kafka's NoOffsetForPartitionException: such partitions are owned but not read
                missing = sorted(tp for tp, off in starts.items() if off is None)
                if missing:
                    starts = {tp: off for tp, off in starts.items() if off is not None}
                    self.consumer._fail(
                        NoOffsetForPartitionError(
                            kerrors.OFFSET_OUT_OF_RANGE, f"no committed offset and auto_offset_reset='none': {missing}"
                        )
                    )
            held = self.consumer._group_assign(starts)
        self.rebalances += 1
        self._changed.set()
        await self._callback(self.listener.assigned, sorted(tps), wait=False, then=lambda: self.consumer._release(held))

    # -- the subscription ---------------------------------------------------------------------------------

    async def resolve_subscription(self, force: bool = False) -> bool:
        """Refresh the topic set of a pattern subscription; True when it changed."""
        now = time.monotonic()
        if not force and now - self._metadata_checked < min(self.cluster.metadata_max_age, 30.0):
            return False
        self._metadata_checked = now
        if self.pattern is None:
            # compared with what the last check saw, not with the cache (the fetcher refreshes it too)
            await self.cluster.refresh(sorted(set(self.cluster.topics) | self.topics))
            counts = {t: self._partition_count(t) for t in self.topics}
            changed = self._known_counts is not None and counts != self._known_counts
            self._known_counts = counts
            return changed
        await self.cluster.refresh(all_topics=True)
        found = {t for t, info in self.cluster.topics.items() if not info.is_internal and self.pattern.fullmatch(t)}
        if found != self.topics:
            self.topics = found
            return True
        return False

    def _partition_count(self, topic: str) -> int:
        info = self.cluster.topics.get(topic)
        return info.num_partitions if info is not None else 0


# ----------------------------------------------------------------------------------------------------------
class ClassicMembership(Membership):
    protocol_name = "classic"

    def __init__(self, consumer: AsyncConsumer, group_id: str, *, assignors: list[str], **kw):
        super().__init__(consumer, group_id, **kw)
        self.assignors: list[Assignor] = [assignor(n) for n in assignors]
        if not self.assignors:
            raise ValueError("partition_assignment_strategy names no assignor")
        # the rebalance protocol every configured assignor supports (Kafka's ConsumerCoordinator rule)
        self.rebalance_protocol = COOPERATIVE if all(COOPERATIVE in a.protocols for a in self.assignors) else EAGER
        for a in self.assignors:
            if isinstance(a, CooperativeStickyAssignor):
                a.cooperative = self.rebalance_protocol == COOPERATIVE
        self.generation = -1
        self.need_rejoin = True
        self.leader = False
        self.chosen: str | None = None

    def _valid(self) -> bool:
        return self.generation >= 0 and bool(self.member_id)

    def _commit_identity(self) -> tuple[int, str]:
        return (self.generation, self.member_id) if self._valid() else (-1, "")

    def _invalidate(self) -> None:
        self.generation = -1
        self.need_rejoin = True

    def _on_commit_rebalanced(self, code: int) -> None:
        self.need_rejoin = True
        self.wake()

    def request_rejoin(self) -> None:
        self.need_rejoin = True
        self.wake()

    async def _step(self) -> None:
        await self.coordinator()
        if await self.resolve_subscription():
            self.need_rejoin = True
        if self.need_rejoin or not self._valid():
            await self._join()
            return
        await self._heartbeat()
        if not self.need_rejoin:
            await self._sleep(self.heartbeat_interval_ms / 1000)

    def _send_heartbeat(self):
        return self.request(
            HeartbeatRequest,
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
        )

    async def _heartbeat(self) -> None:
        code = (await self._send_heartbeat()).error_code
        if not code:
            return
        if code == kerrors.REBALANCE_IN_PROGRESS:
            self.need_rejoin = True
        elif code in (kerrors.UNKNOWN_MEMBER_ID, kerrors.ILLEGAL_GENERATION):
            await self._reset(code)
        elif code in FATAL_CLASSIC:
            raise GroupError(code, f"heartbeat of group {self.group_id!r}")
        else:
            raise KafkaError(code, f"heartbeat of group {self.group_id!r}")

    async def _keep_alive(self) -> None:
        if not self._valid():
            return
        try:
            resp = await self._send_heartbeat()
        except (KafkaError, OSError, TimeoutError) as exc:
            log.info("group %s: heartbeat while a callback waits: %s", self.group_id, exc)
            return
        if resp.error_code:  # the rejoin after the callback finds out what it means
            self.need_rejoin = True

    async def _reset(self, code: int) -> None:
        """Our generation (and for UNKNOWN_MEMBER_ID our member id) is gone: partitions lost, join anew."""
        await self.lose()
        self.generation = -1
        if code == kerrors.UNKNOWN_MEMBER_ID and self.instance_id is None:
            self.member_id = ""
        self.need_rejoin = True

    def _metadata(self) -> list:
        owned = sorted(self.owned)
        return [
            JoinGroupRequest.JoinGroupRequestProtocol(
                name=a.name, metadata=encode_subscription(self.topics, owned, self.generation)
            )
            for a in self.assignors
        ]

    async def _join(self) -> None:
        if self.owned and (self.rebalance_protocol == EAGER or not self._valid()):
            if self._valid():
                await self.revoke(set(self.owned))  # eager: everything goes back before joining
            else:
                await self.lose()
        if self.pattern is not None and not self.topics:
            await self.resolve_subscription(force=True)
        # the coordinator holds a JoinGroup until every member has joined (up to the rebalance timeout)
        resp = await self.request(
            JoinGroupRequest,
            timeout=self.rebalance_timeout_ms / 1000 + 5 + self.cluster.request_timeout,
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type="consumer",
            protocols=self._metadata(),
        )
        code = resp.error_code
        if code == kerrors.MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id
            return
        if code == kerrors.UNKNOWN_MEMBER_ID:
            self.member_id, self.generation = ("" if self.instance_id is None else self.member_id), -1
            return
        if code in (kerrors.ILLEGAL_GENERATION, kerrors.REBALANCE_IN_PROGRESS):
            self.generation = -1 if code == kerrors.ILLEGAL_GENERATION else self.generation
            return
        if code in FATAL_CLASSIC:
            raise GroupError(code, f"JoinGroup of group {self.group_id!r}")
        if code:
            raise KafkaError(code, f"JoinGroup of group {self.group_id!r}")
        self.member_id, self.generation, self.chosen = resp.member_id, resp.generation_id, resp.protocol_name
        self.leader = resp.leader == resp.member_id
        assignments = []
        if self.leader and not getattr(resp, "skip_assignment", False):
            assignments = await self._assign(resp.members)
        sresp = await self.request(
            SyncGroupRequest,
            timeout=self.rebalance_timeout_ms / 1000 + 5 + self.cluster.request_timeout,
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type="consumer",
            protocol_name=self.chosen,
            assignments=assignments,
        )
        code = sresp.error_code
        if code == kerrors.REBALANCE_IN_PROGRESS:
            return  # another round: join again (need_rejoin is still set)
        if code in (kerrors.UNKNOWN_MEMBER_ID, kerrors.ILLEGAL_GENERATION):
            await self._reset(code)
            return
        if code in FATAL_CLASSIC:
            raise GroupError(code, f"SyncGroup of group {self.group_id!r}")
        if code:
            raise KafkaError(code, f"SyncGroup of group {self.group_id!r}")
        self.need_rejoin = False
        assigned = set(decode_assignment(bytes(sresp.assignment)))
        revoked = self.owned - assigned
        if revoked:  # cooperative: give these up, then rejoin so that they can be handed on
            await self.revoke(revoked)
            self.need_rejoin = True
        await self.add(assigned - self.owned)
        log.info(
            "group %s: generation %d member %s: %s", self.group_id, self.generation, self.member_id, sorted(self.owned)
        )

    async def _assign(self, members) -> list:
        chosen = next((a for a in self.assignors if a.name == self.chosen), None)
        if chosen is None:
            raise GroupError(kerrors.INCONSISTENT_GROUP_PROTOCOL, f"the coordinator chose {self.chosen!r}")
        subs: dict[str, MemberSubscription] = {}
        versions: dict[str, int] = {}
        for m in members:
            meta = bytes(m.metadata)
            subs[m.member_id] = decode_subscription(m.member_id, m.group_instance_id, meta)
            versions[m.member_id] = subscription_version(meta)
        topics = sorted({t for s in subs.values() for t in s.topics})
        await self.cluster.refresh(sorted(set(self.cluster.topics) | set(topics)))
        counts = {t: self._partition_count(t) for t in topics}
        result = chosen.assign(subs, counts)
        log.info(
            "group %s: leader of generation %d assigns with %s: %s", self.group_id, self.generation, chosen.name, result
        )
        return [
            SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=m, assignment=encode_assignment(result.get(m, []), versions[m])
            )
            for m in subs
        ]

    async def _leave(self, reason: str = "the consumer is closing") -> None:
        if self.instance_id is not None or not self.member_id:
            return  # a static member keeps its place until its session times out (KIP-345)
        resp = await self.request(
            LeaveGroupRequest,
            timeout=5.0,
            group_id=self.group_id,
            member_id=self.member_id,
            members=[LeaveGroupRequest.MemberIdentity(member_id=self.member_id, group_instance_id=None, reason=reason)],
        )
        if resp.error_code and resp.error_code not in (kerrors.UNKNOWN_MEMBER_ID,):
            log.info("group %s: LeaveGroup: %s", self.group_id, KafkaError(resp.error_code).name)
        self.generation, self.member_id = -1, ""


# ----------------------------------------------------------------------------------------------------------
class ConsumerMembership(Membership):
    """KIP-848: the coordinator assigns; the member heartbeats and reconciles."""

    protocol_name = "consumer"

    def __init__(self, consumer: AsyncConsumer, group_id: str, *, remote_assignor: str | None = None, **kw):
        super().__init__(consumer, group_id, **kw)
        self.remote_assignor = remote_assignor
        # KIP-848 (Kafka 4.0+, ConsumerGroupHeartbeat v1): the member picks its own id
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.interval = self.heartbeat_interval_ms / 1000  # until the coordinator tells us its own
        self._ack = False  # owned partitions changed: say so in the next heartbeat at once
        self._pending: set[tuple[Any, int]] | None = None  # a target assignment with topic ids not yet resolved

    def _valid(self) -> bool:
        return self.epoch > 0

    def _commit_identity(self) -> tuple[int, str]:
        return (self.epoch, self.member_id) if self.epoch > 0 else (-1, "")

    def _invalidate(self) -> None:
        self.epoch = 0

    def request_rejoin(self) -> None:
        self._ack = True  # a subscription change goes out with the next heartbeat
        self.wake()

    async def _step(self) -> None:
        await self.coordinator()
        if await self.resolve_subscription():
            self._ack = True
        await self._heartbeat()
        if not self._ack:
            await self._sleep(self.interval)

    async def _heartbeat(self) -> None:
        self._ack = False
        resp = await self._send_heartbeat()
        code = resp.error_code
        if code in (kerrors.FENCED_MEMBER_EPOCH, kerrors.UNKNOWN_MEMBER_ID):
            log.info("group %s: %s: partitions lost, rejoining at epoch 0", self.group_id, KafkaError(code).name)
            await self.lose()
            self.epoch = 0
            self._ack = True
            return
        if code in FATAL_CONSUMER:
            raise GroupError(code, f"ConsumerGroupHeartbeat of group {self.group_id!r}: {resp.error_message}")
        if code:
            raise KafkaError(code, f"ConsumerGroupHeartbeat of group {self.group_id!r}: {resp.error_message}")
        self._accept(resp)
        if self._pending is not None:
            await self._reconcile()

    def _accept(self, resp) -> None:
        """A successful heartbeat's answer: our epoch, the interval, the target assignment to reconcile."""
        if resp.member_id:
            self.member_id = resp.member_id
        self.epoch = resp.member_epoch
        if resp.heartbeat_interval_ms > 0:
            self.interval = resp.heartbeat_interval_ms / 1000
        if resp.assignment is not None:
            self._pending = {(tp.topic_id, p) for tp in resp.assignment.topic_partitions for p in tp.partitions}

    async def _keep_alive(self) -> None:
        # as Kafka's background thread while the application has not run a callback yet: the session stays
        # alive, a new target waits in _pending for the reconciliation after this one; errors are left to
        # the heartbeat after the callback
        if self.epoch <= 0:
            return
        try:
            resp = await self._send_heartbeat()
        except (KafkaError, OSError, TimeoutError) as exc:
            log.info("group %s: heartbeat while a callback waits: %s", self.group_id, exc)
            return
        if not resp.error_code:
            self._accept(resp)

    def _heartbeat_every(self) -> float:
        return self.interval  # the coordinator's

    async def _send_heartbeat(self):
        ids = {}
        for t, _ in self.owned:
            info = self.cluster.topics.get(t)
            if info is not None:
                ids[t] = info.topic_id
        owned: dict[Any, list[int]] = {}
        for t, p in sorted(self.owned):
            if t in ids:
                owned.setdefault(ids[t], []).append(p)
        T = ConsumerGroupHeartbeatRequest.TopicPartitions
        return await self.request(
            ConsumerGroupHeartbeatRequest,
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.epoch,
            instance_id=self.instance_id,
            rack_id=None,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            subscribed_topic_names=sorted(self.topics),
            subscribed_topic_regex=None,
            server_assignor=self.remote_assignor,
            topic_partitions=[T(topic_id=i, partitions=ps) for i, ps in owned.items()],
        )

    async def _reconcile(self) -> None:
        pending = self._pending
        assert pending is not None
        names = self.cluster.topic_names
        if any(tid not in names for tid, _ in pending):
            await self.cluster.refresh(sorted(set(self.cluster.topics) | self.topics))
            names = self.cluster.topic_names
        unresolved = [tid for tid, _ in pending if tid not in names]
        if unresolved:  # metadata does not know the topic yet: the next heartbeat tries again
            log.info("group %s: assignment names unknown topic ids %s", self.group_id, unresolved)
            return
        target = {(names[tid], p) for tid, p in pending}
        self._pending = None
        revoked = self.owned - target
        added = target - self.owned
        if revoked:
            await self.revoke(revoked)
        if added or not self.rebalances:
            await self.add(added)
        if revoked or added:
            self._ack = True
            log.info("group %s: epoch %d member %s: %s", self.group_id, self.epoch, self.member_id, sorted(self.owned))

    async def _leave(self, reason: str = "the consumer is closing") -> None:
        if not self.epoch and not self.owned:
            return
        epoch = -2 if self.instance_id is not None else -1  # -2: a static member leaves for now (KIP-848)
        await self.request(
            ConsumerGroupHeartbeatRequest,
            timeout=5.0,
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.instance_id,
            rack_id=None,
            rebalance_timeout_ms=-1,
            subscribed_topic_names=None,
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=None,
        )
        self.epoch = 0


__all__ = [
    "ClassicMembership",
    "CommitFailedError",
    "ConsumerMembership",
    "GroupError",
    "Listener",
    "Membership",
    "NoOffsetForPartitionError",
]
