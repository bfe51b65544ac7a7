"""Retries with exponential backoff and jitter, for retriable errors only.

Retriable: a ``KafkaError`` whose code Kafka marks retriable
(``error_for(code).retriable``), a closed connection, a request timeout.
The Java client's defaults: ``retry.backoff.ms=100``,
``retry.backoff.max.ms=1000``, jitter of +-20%.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass

from ..protocol import KafkaError


def is_retriable(exc: BaseException) -> bool:
    if isinstance(exc, KafkaError):
        return exc.retriable
    return bool(getattr(exc, "retriable", False))


@dataclass
class Backoff:
    initial: float = 0.1
    maximum: float = 1.0
    multiplier: float = 2.0
    jitter: float = 0.2

    def delay(self, attempt: int) -> float:
        """Delay before retry number ``attempt`` (1 = first retry)."""
        base = min(self.maximum, self.initial * self.multiplier ** max(0, attempt - 1))
        if self.jitter:
            base *= 1 + random.uniform(-self.jitter, self.jitter)
        return max(0.0, base)


class Deadline:
    """A point in time (monotonic); ``remaining()`` is never negative."""

    def __init__(self, timeout: float | None):
        self.at = None if timeout is None else time.monotonic() + timeout

    def remaining(self) -> float | None:
        return None if self.at is None else max(0.0, self.at - time.monotonic())

    @property
    def expired(self) -> bool:
        return self.at is not None and time.monotonic() >= self.at


async def retry_async(
    fn, *, retries: int = 5, backoff: Backoff | None = None, timeout: float | None = None, on_retry=None
):
    """Call ``await fn()`` until it succeeds, a non-retriable error, ``retries`` or ``timeout`` run out.

    ``on_retry(exc, attempt)`` (may be async) runs before each retry, e.g. to refresh metadata.
    """
    backoff = backoff or Backoff()
    deadline = Deadline(timeout)
    attempt = 0
    while True:
        try:
            return await fn()
        except Exception as exc:
            attempt += 1
            if not is_retriable(exc) or attempt > retries:
                raise
            delay = backoff.delay(attempt)
            left = deadline.remaining()
            if left is not None and left <= delay:
                raise
            if on_retry is not None:
                res = on_retry(exc, attempt)
                if asyncio.iscoroutine(res):
                    await res
            await asyncio.sleep(delay)
