"""API key -> handler, and the versions the broker advertises.

Handlers register with ``@handles("Produce", 0, 13)`` in a module of
``kafkawire.broker.handlers``; every module of that package is imported by
``load_handlers()``, so a new API family (consumer groups, transactions) is
added by dropping in a module, without touching this file. A broker starts
from ``handler_table()`` instead: the same table read from
``handlers/_table.py``, which ``tools/gen_handler_table.py`` writes from those
decorators, so that no handler module is imported before the first answer
(they took ~30 ms of a ~200 ms start); each is imported by the first request
for one of its APIs. A handler is
``fn(broker, ctx, body)`` returning the response body (or ``None`` for no
response); it may be ``async``. Only registered APIs are advertised, each at
exactly the version range it was registered with. The range is always written
out: a regenerated spec (a new Kafka release) brings new versions, and each one
is advertised only once a handler has been raised to implement it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

import msgspec

from kafkawire.protocol import api, api_by_name


class HandlerSpec(msgspec.Struct, frozen=True):
    api_key: int
    name: str
    fn: Callable
    min_version: int
    max_version: int
    is_async: bool


# dict=True: the ACL filter (security/authorizer/entries.py) hangs the denied entries' answers on the context
class RequestContext(msgspec.Struct, dict=True):
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


def handles(api_name: str | int, min_version: int, max_version: int):
    """Register a handler for an API (by name like "Produce" or by key) at versions min..max inclusive."""
    info = api(api_name) if isinstance(api_name, int) else api_by_name(api_name)
    if not info.min_version <= min_version <= max_version <= info.max_version:
        raise ValueError(
            f"{info.name}: handler range {min_version}-{max_version} is outside the spec's "
            f"{info.min_version}-{info.max_version}"
        )

    def register(fn):
        import inspect

        HANDLERS[info.key] = HandlerSpec(
            api_key=info.key,
            name=info.name,
            fn=fn,
            min_version=min_version,
            max_version=max_version,
            is_async=inspect.iscoroutinefunction(fn),
        )
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


def handler_table() -> dict[int, HandlerSpec]:
    """The table a broker serves with, its modules not imported: each entry's ``fn`` imports the handler's
    module on its first call (the first request for that API) and puts the module's own entries in the
    calling broker's table. Ranges and names come from ``handlers/_table.py``; a stale file (a ``@handles``
    changed without running ``tools/gen_handler_table.py``) fails that first request, and the tests."""
    if _loaded:
        return dict(HANDLERS)
    from .handlers._table import TABLE

    return {
        key: HandlerSpec(key, name, _deferred(key, module), lo, hi, is_async)
        for key, name, lo, hi, module, _function, is_async in TABLE
    }


def preload(key: int) -> None:
    """Import the handler module of API ``key`` now: its first request then finds it imported (and still checks
    it against ``handlers/_table.py`` and puts its entries in the calling broker's table)."""
    from .handlers._table import TABLE

    for k, _name, _lo, _hi, module, _function, _is_async in TABLE:
        if k == key:
            importlib.import_module(f"{__package__}.handlers.{module}")


def _deferred(key: int, module: str) -> Callable:
    def first_request(broker, ctx, body):
        from .handlers._table import TABLE

        importlib.import_module(f"{__package__}.handlers.{module}")  # its @handles lines fill HANDLERS
        stated = {k: (name, lo, hi, fn, is_async) for k, name, lo, hi, m, fn, is_async in TABLE if m == module}
        for k, expected in stated.items():
            real = HANDLERS.get(k)
            found = real and (real.name, real.min_version, real.max_version, real.fn.__name__, real.is_async)
            if found != expected:
                raise RuntimeError(
                    f"broker/handlers/_table.py states {expected} for API key {k}, handlers.{module} {found}: "
                    "run python tools/gen_handler_table.py"
                )
        table = getattr(broker, "handlers", None)
        if isinstance(table, dict):  # later requests go straight to the handlers (an entry a test swapped stays)
            for k in stated:
                if getattr(getattr(table.get(k), "fn", None), "deferred_to", None) == module:
                    table[k] = HANDLERS[k]
        return HANDLERS[key].fn(broker, ctx, body)

    first_request.deferred_to = module  # type: ignore[attr-defined]
    return first_request


def advertised_versions(table: dict[int, HandlerSpec]) -> list[tuple[int, int, int]]:
    return [(k, h.min_version, h.max_version) for k, h in sorted(table.items())]


def unreviewed_versions(table: dict[int, HandlerSpec], advertised: list[tuple[int, int, int]]) -> list[str]:
    """What a regenerated spec brought that no handler was written for, one line per API: a stable version
    newer than the handler's stated maximum, and any key or version advertised (``advertised``: the
    ApiVersions answer's (key, min, max)) beyond what a handler states. Empty when every handler has been
    reviewed against the spec."""
    out = []
    for key, h in sorted(table.items()):
        newest = api(key).max_stable_version
        if newest > h.max_version:
            out.append(
                f"{h.name}: the spec's newest stable version is {newest}, its handler states "
                f"{h.min_version}-{h.max_version}"
            )
    for key, lo, hi in advertised:
        h = table.get(key)
        if h is None:
            out.append(f"{api(key).name}: advertised {lo}-{hi} without a handler")
        elif lo < h.min_version or hi > h.max_version:
            out.append(f"{h.name}: advertised {lo}-{hi}, its handler states {h.min_version}-{h.max_version}")
    return out


# -- error answers ------------------------------------------------------------------------------------


def error_response(api_key: int, version: int, request, code: int, message: str | None = None):
    """The answer Kafka gives when a request of this API fails as a whole (its ``getErrorResponse``): see
    ``error_answers``. None for a Produce with acks=0, which gets no answer."""
    from .error_answers import error_response as build

    return build(api_key, version, request, code, message)
