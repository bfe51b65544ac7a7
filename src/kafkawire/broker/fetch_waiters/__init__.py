"""Fetch long polling: the requests waiting for new data, by partition (one per broker, ``broker.waiters``)."""

from .waiters import FetchWaiters

__all__ = ["FetchWaiters"]
