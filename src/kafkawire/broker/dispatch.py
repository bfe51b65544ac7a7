"""API key -> handler, and the versions the broker advertises.

Handlers register with ``@handles("Produce")`` in a module of
``kafkawire.broker.handlers``; every module of that package is imported by
``load_handlers()``, so a new API family (consumer groups, transactions) is
added by dropping in a module, without touching this file. A handler is
``fn(broker, ctx, body)`` returning the response body (or ``None`` for no
response); it may be ``async``. Only registered APIs are advertised, each at
the version range it was registered with (default: every stable version the
spec has).
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable

from kafkawire.protocol import api, api_by_name


@dataclass(frozen=True)
class HandlerSpec:
    api_key: int
    name: str
    fn: Callable
    min_version: int
    max_version: int
    is_async: bool


@dataclass
class RequestContext:
    """What a handler knows about the request besides its body."""

    header: Any  # RequestHeader
    api_version: int
    connection: Any  # kafkawire.net.server.Connection (or None in direct calls)

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


HANDLERS: dict[int, HandlerSpec] = {}


def handles(api_name: str | int, min_version: int | None = None, max_version: int | None = None):
    """Register a handler for an API (by name like "Produce" or by key)."""
    info = api(api_name) if isinstance(api_name, int) else api_by_name(api_name)

    def register(fn):
        import inspect

        HANDLERS[info.key] = HandlerSpec(
            api_key=info.key, name=info.name, fn=fn,
            min_version=info.min_version if min_version is None else min_version,
            max_version=info.max_stable_version if max_version is None else max_version,
            is_async=inspect.iscoroutinefunction(fn))
        return fn

    return register


_loaded = False


def load_handlers() -> dict[int, HandlerSpec]:
    """Import every module of ``kafkawire.broker.handlers`` (registering their handlers); the table."""
    global _loaded
    if not _loaded:
        from . import handlers

        for mod in sorted(m.name for m in pkgutil.iter_modules(handlers.__path__)):
            if not mod.startswith("_"):
                importlib.import_module(f"{handlers.__name__}.{mod}")
        _loaded = True
    return dict(HANDLERS)


def advertised_versions(table: dict[int, HandlerSpec]) -> list[tuple[int, int, int]]:
    return [(k, h.min_version, h.max_version) for k, h in sorted(table.items())]
