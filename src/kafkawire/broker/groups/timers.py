"""Clocks and timers for the group coordinator.

The coordinator never sleeps and never touches the event loop itself: it asks a
``Scheduler`` for the time and for callbacks after a delay. ``LoopScheduler``
runs them on an asyncio loop (the broker); ``FakeScheduler`` runs them when a
test calls ``advance(ms)``, so every timeout of the state machines can be
tested without waiting.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable


class Timer:
    __slots__ = ("_handle", "_owner", "cancelled", "when")

    def __init__(self, handle=None, when: int = 0):
        self._handle = handle
        self._owner: set | None = None  # the LoopScheduler's set of pending timers, left on cancel
        self.cancelled = False
        self.when = when

    def cancel(self) -> None:
        self.cancelled = True
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._owner is not None:
            self._owner.discard(self)
            self._owner = None


class Scheduler:
    def now_ms(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> Timer:  # pragma: no cover - interface
        raise NotImplementedError


class LoopScheduler(Scheduler):
    """Timers on an asyncio event loop; wall-clock milliseconds.

    ``close()`` cancels every timer still pending and turns later ``call_later`` calls into timers that never
    fire: the broker closes its schedulers before it closes storage, so no session expiry or transaction timeout
    runs against a closed log after ``stop()`` (the loop may live on, as in tests and embedded brokers)."""

    def __init__(self, loop):
        self.loop = loop
        self._pending: set[Timer] = set()
        self._closed = False

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> Timer:
        timer = Timer(when=self.now_ms() + max(0, int(delay_ms)))
        if self._closed:
            timer.cancelled = True
            return timer
        pending = self._pending

        def fire():
            timer._handle = None
            pending.discard(timer)
            if not timer.cancelled:
                fn()

        timer._handle = self.loop.call_later(max(0, delay_ms) / 1000.0, fire)
        timer._owner = pending
        pending.add(timer)
        return timer

    def pending(self) -> int:
        return sum(1 for t in self._pending if not t.cancelled)

    def close(self) -> None:
        self._closed = True
        for timer in list(self._pending):
            timer.cancel()
        self._pending.clear()


class FakeScheduler(Scheduler):
    """A manual clock: ``advance(ms)`` runs the timers that fall due, in time order."""

    def __init__(self, start_ms: int = 1_700_000_000_000):
        self._now = start_ms
        self._heap: list = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> Timer:
        timer = Timer(when=self._now + max(0, int(delay_ms)))
        heapq.heappush(self._heap, (timer.when, next(self._seq), timer, fn))
        return timer

    def advance(self, ms: int) -> None:
        target = self._now + ms
        for _ in range(1_000_000):
            if not self._heap or self._heap[0][0] > target:
                break
            when, _, timer, fn = heapq.heappop(self._heap)
            self._now = max(self._now, when)
            if not timer.cancelled:
                timer.cancelled = True
                fn()
        self._now = target

    def pending(self) -> int:
        return sum(1 for e in self._heap if not e[2].cancelled)
