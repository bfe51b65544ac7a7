"""The bounded tap through which a broker or the proxy shows its request/response pairs to the console.

The side that serves Kafka clients calls :meth:`Tap.publish` (a deque append and an event set, on its own
event loop; nothing is decoded there). The console's worker (:meth:`Tap.run`) takes the pairs off that
queue, describes them (API, client id, topics, error codes, summaries, as ``kafkawire proxy`` prints them)
and hands each to every browser's :class:`Subscription`. Every queue drops its oldest entry when full: a
slow browser, or a console that cannot keep up, loses old exchanges and never slows the broker or proxy.
Frames are kept up to ``frame_bytes`` each (the hex view of a larger frame shows its first bytes).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from kafkawire.protocol.skim import Skim
from kafkawire.proxy.report import Exchange, describe
from kafkawire.tools.pcap import Connection

KEEP = 500  # exchanges kept for the list and the detail view
PENDING = 2000  # published, not yet described
SUBSCRIBER_QUEUE = 1000  # described, not yet sent to one browser
FRAME_BYTES = 256 * 1024  # of each frame kept for the hex view


@dataclass
class TapEntry:
    """One exchange as the console shows it."""

    id: int
    exchange: Exchange
    request_truncated: bool = False
    response_truncated: bool = False
    summary: dict = field(default_factory=dict)


class Subscription:
    """One browser's view of the stream: a bounded queue, oldest dropped first."""

    def __init__(self, maxlen: int):
        self.queue: deque[dict] = deque(maxlen=maxlen)
        self.ready = asyncio.Event()
        self.dropped = 0

    def put(self, item: dict) -> None:
        if len(self.queue) == self.queue.maxlen:
            self.dropped += 1
        self.queue.append(item)
        self.ready.set()

    async def get_all(self, timeout: float) -> list[dict]:
        """What is queued (waiting up to ``timeout`` for something); [] on timeout."""
        if not self.queue:
            self.ready.clear()
            try:
                await asyncio.wait_for(self.ready.wait(), timeout)
            except TimeoutError:
                return []
        out = list(self.queue)
        self.queue.clear()
        return out


class Tap:
    def __init__(
        self,
        *,
        keep: int = KEEP,
        pending: int = PENDING,
        subscriber_queue: int = SUBSCRIBER_QUEUE,
        frame_bytes: int = FRAME_BYTES,
    ):
        self.frame_bytes = frame_bytes
        self.subscriber_queue = subscriber_queue
        self._pending: deque[TapEntry] = deque(maxlen=pending)
        self._wake: asyncio.Event | None = None
        self.entries: OrderedDict[int, TapEntry] = OrderedDict()
        self.keep = keep
        self.subscribers: set[Subscription] = set()
        self.published = 0
        self.dropped = 0  # published pairs the worker never saw (it fell behind)
        self.topic_names: dict[str, str] = {}
        self._ids = itertools.count(1)

    # -- the serving side: cheap, never blocks, never decodes
    def publish(
        self,
        connection: Connection,
        request: bytes | bytearray,
        response: bytes | bytearray = b"",
        *,
        time_ns: int | None = None,
        latency_ns: int | None = None,
        api_key: int | None = None,
        api_version: int | None = None,
        correlation_id: int | None = None,
        problem: str | None = None,
        rewritten: list | None = None,
        skim: Skim | None = None,
    ) -> None:
        """A request and its response payloads (no size prefix). Only the first ``frame_bytes`` of each are
        copied."""
        limit = self.frame_bytes
        if api_key is None and len(request) >= 8:
            api_key = int.from_bytes(request[0:2], "big", signed=True)
            api_version = int.from_bytes(request[2:4], "big")
            correlation_id = int.from_bytes(request[4:8], "big", signed=True)
        ex = Exchange(
            time_ns if time_ns is not None else time.time_ns(),
            connection,
            api_key,
            api_version,
            correlation_id,
            request_payload=bytes(request[:limit]),
            response_payload=bytes(response[:limit]),
            latency_ns=latency_ns,
            rewritten=list(rewritten or ()),
            problem=problem,
            skim=skim,
        )
        entry = TapEntry(next(self._ids), ex, len(request) > limit, len(response) > limit)
        if len(self._pending) == self._pending.maxlen:
            self.dropped += 1
        self._pending.append(entry)
        self.published += 1
        if self._wake is not None:
            self._wake.set()

    # -- the console's side
    def subscribe(self) -> Subscription:
        sub = Subscription(self.subscriber_queue)
        self.subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self.subscribers.discard(sub)

    def recent(self) -> list[dict]:
        return [e.summary for e in self.entries.values()]

    async def run(self) -> None:
        """Describe what was published and fan it out, a bounded batch at a time (yielding in between)."""
        self._wake = asyncio.Event()
        while True:
            if not self._pending:
                self._wake.clear()
                await self._wake.wait()
            for _ in range(min(len(self._pending), 64)):
                self._take(self._pending.popleft())
            await asyncio.sleep(0)

    def drain(self) -> None:
        """Describe everything pending now (tests; the worker does this in batches)."""
        while self._pending:
            self._take(self._pending.popleft())

    def _take(self, entry: TapEntry) -> None:
        ex = entry.exchange
        if not (entry.request_truncated or entry.response_truncated):
            try:
                describe(ex, self.topic_names)
            except Exception as exc:  # peer bytes that trip the describer: shown as a problem, never fatal
                ex.problem = ex.problem or f"not described: {type(exc).__name__}: {exc}"
        else:
            from kafkawire.proxy.report import client_id_of

            ex.client_id = client_id_of(ex.request_payload)
            ex.problem = ex.problem or f"larger than {self.frame_bytes} bytes: first bytes kept, not described"
        entry.summary = summarize(entry)
        self.entries[entry.id] = entry
        while len(self.entries) > self.keep:
            self.entries.popitem(last=False)
        for sub in list(self.subscribers):
            sub.put(entry.summary)


def summarize(entry: TapEntry) -> dict:
    ex = entry.exchange
    return {
        "id": entry.id,
        "time_ms": ex.time_ns // 1_000_000,
        "connection": ex.connection.label,
        "client_id": ex.client_id,
        "api_key": ex.api_key,
        "api": ex.api_name if ex.api_key is not None else None,
        "version": ex.api_version,
        "correlation_id": ex.correlation_id,
        "latency_ms": None if ex.latency_ns is None else round(ex.latency_ns / 1e6, 3),
        "request_bytes": ex.request_size,
        "response_bytes": ex.response_size,
        "topics": sorted(ex.topics),
        "errors": ex.errors,
        "request_summary": ex.request_summary,
        "response_summary": ex.response_summary,
        "problem": ex.problem,
    }


__all__ = ["FRAME_BYTES", "KEEP", "Subscription", "Tap", "TapEntry", "summarize"]
