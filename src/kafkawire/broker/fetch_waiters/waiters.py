"""Long-poll support: Fetch requests wait here until a partition they read gets new data."""

from __future__ import annotations

import asyncio


class FetchWaiters:
    def __init__(self):
        self._by_key: dict[tuple[str, int], set[asyncio.Event]] = {}

    def register(self, keys) -> asyncio.Event:
        event = asyncio.Event()
        for key in keys:
            self._by_key.setdefault(key, set()).add(event)
        event.keys = list(keys)  # type: ignore[attr-defined]
        return event

    def unregister(self, event: asyncio.Event) -> None:
        for key in event.keys:  # type: ignore[attr-defined]
            waiting = self._by_key.get(key)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._by_key[key]

    def notify(self, topic: str, partition: int) -> None:
        waiting = self._by_key.get((topic, partition))
        if waiting:
            for event in waiting:
                event.set()

    def notify_topic(self, topic: str) -> None:
        for (t, _), waiting in list(self._by_key.items()):
            if t == topic:
                for event in waiting:
                    event.set()

    def wake_all(self) -> None:
        for waiting in list(self._by_key.values()):
            for event in waiting:
                event.set()

    def __len__(self) -> int:
        return len(self._by_key)
