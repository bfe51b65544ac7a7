"""API key -> handler, and the versions the broker advertises.

Handlers register with ``@handles("Produce", 0, 13)`` in a module of
``kafkawire.broker.handlers``; every module of that package is imported by
``load_handlers()``, so a new API family (consumer groups, transactions) is
added by dropping in a module, without touching this file. A handler is
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
from dataclasses import dataclass
from typing import Any

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


def handles(api_name: str | int, min_version: int, max_version: int):
    """Register a handler for an API (by name like "Produce" or by key) at versions min..max inclusive."""
    info = api(api_name) if isinstance(api_name, int) else api_by_name(api_name)
    if not info.min_version <= min_version <= max_version <= info.max_version:
        raise ValueError(f"{info.name}: handler range {min_version}-{max_version} is outside the spec's "
                         f"{info.min_version}-{info.max_version}")

    def register(fn):
        import inspect

        HANDLERS[info.key] = HandlerSpec(
            api_key=info.key, name=info.name, fn=fn, min_version=min_version, max_version=max_version,
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


def unreviewed_versions(table: dict[int, HandlerSpec], advertised: list[tuple[int, int, int]]) -> list[str]:
    """What a regenerated spec brought that no handler was written for, one line per API: a stable version
    newer than the handler's stated maximum, and any key or version advertised (``advertised``: the
    ApiVersions answer's (key, min, max)) beyond what a handler states. Empty when every handler has been
    reviewed against the spec."""
    out = []
    for key, h in sorted(table.items()):
        newest = api(key).max_stable_version
        if newest > h.max_version:
            out.append(f"{h.name}: the spec's newest stable version is {newest}, its handler states "
                       f"{h.min_version}-{h.max_version}")
    for key, lo, hi in advertised:
        h = table.get(key)
        if h is None:
            out.append(f"{api(key).name}: advertised {lo}-{hi} without a handler")
        elif lo < h.min_version or hi > h.max_version:
            out.append(f"{h.name}: advertised {lo}-{hi}, its handler states {h.min_version}-{h.max_version}")
    return out


# -- error answers ------------------------------------------------------------------------------------

# request field -> the response field that echoes it, where the schemas name them differently
_ECHO = {"partition": ("partition_index", "index"), "partition_index": ("partition", "index"),
         "index": ("partition_index", "partition"), "topic": ("name", "topic_name"), "name": ("topic", "topic_name"),
         "topic_name": ("name", "topic"), "group": ("group_id",), "group_id": ("group",)}
_INT_KEYS = ("partition_index", "partition", "index")


def error_response(api_key: int, version: int, request, code: int, message: str | None = None):
    """The response Kafka gives when a request of this API fails as a whole: the top-level error code where the
    response has one; else every topic, partition, group or resource the request named, echoed with ``code``
    (and ``message`` where the schema has a message). Built from the response schema, so every API has one."""
    from kafkawire.protocol import message_class

    cls = message_class(api(api_key).response)
    out = cls()
    _fill(cls, out, request, version, code, message)
    return out


def _present(obj, version: int):
    return [f for f in obj._fields if f.present(version)]


def _fill(root, out, request, version: int, code: int, message: str | None) -> None:
    fields = _present(out, version)
    attrs = {f.attr for f in fields}
    if "error_code" in attrs:
        out.error_code = code
        if message is not None and "error_message" in attrs:
            out.error_message = message
        return
    sources = [f for f in _present(request, version) if f.is_array] if request is not None else []
    for f in fields:
        if not (f.is_array and f.is_struct):
            continue
        src = next((s for s in sources if s.attr == f.attr), None)
        if src is None and len(sources) == 1:
            src = sources[0]
        items = getattr(request, src.attr, None) if src is not None else None
        if items is None:
            continue
        elem_cls = root._classes[f.struct.name]
        elems = []
        for item in items:
            elem = elem_cls()
            elem_fields = _present(elem, version)
            if src.is_struct:
                item_attrs = {g.attr: g for g in _present(item, version)}
                for g in elem_fields:
                    if g.is_array or g.is_struct or g.attr in ("error_code", "error_message"):
                        continue
                    same = item_attrs.get(g.attr)
                    if same is None:
                        same = next((item_attrs[a] for a in _ECHO.get(g.attr, ()) if a in item_attrs), None)
                    if same is not None and same.type == g.type and not same.is_array:
                        setattr(elem, g.attr, getattr(item, same.attr))
                _fill(root, elem, item, version, code, message)
            else:  # a list of partition numbers (or names): each becomes an entry
                key = next((g for g in elem_fields if g.attr in _INT_KEYS + ("name",) and g.type == src.type), None)
                if key is not None:
                    setattr(elem, key.attr, item)
                _fill(root, elem, None, version, code, message)
            elems.append(elem)
        setattr(out, f.attr, elems)
