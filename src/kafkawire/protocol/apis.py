"""The API key registry: what every Kafka API is, derived from the spec.

For each API key: its name, version range (the union of the current and the legacy Kafka release),
lowest flexible version, listeners, whether the newest version is unstable,
and whether any version carries records.
"""

from __future__ import annotations

import functools

import msgspec

from .api_keys import ApiKey
from .schema import MessageSummary, message_names, message_summary


class ApiInfo(msgspec.Struct, frozen=True):
    key: int
    name: str  # "Produce", "ApiVersions", ...
    min_version: int
    max_version: int
    flexible_min: int | None  # lowest flexible version, None if never flexible
    listeners: tuple[str, ...]
    latest_version_unstable: bool
    carries_records: bool
    request: str  # message class names
    response: str
    former_name: str | None = None  # the API's name before a rename (key 74: ListClientMetricsResources)

    def is_flexible(self, version: int) -> bool:
        return self.flexible_min is not None and version >= self.flexible_min

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    @property
    def max_stable_version(self) -> int:
        return self.max_version - 1 if self.latest_version_unstable else self.max_version


@functools.cache
def _registry() -> dict[int, ApiInfo]:
    # summaries, not message_spec: the registry needs no field of the ~200 messages, most never used by a process
    requests: dict[int, MessageSummary] = {}
    responses: dict[int, MessageSummary] = {}
    for name in message_names():
        spec = message_summary(name)
        if spec.api_key is None:  # headers and data payloads; every request and response has its key
            continue
        if spec.kind == "request":
            requests[spec.api_key] = spec
        elif spec.kind == "response":
            responses[spec.api_key] = spec
    out = {}
    for key in sorted(requests):
        req, resp = requests[key], responses[key]
        assert req.valid.hi is not None  # a message's valid range is closed (spec/messages.json: "valid": [lo, hi])
        out[key] = ApiInfo(
            key=key,
            name=req.name.removesuffix("Request"),
            min_version=req.valid.lo,
            max_version=req.valid.hi,
            flexible_min=req.flexible_floor,
            listeners=req.listeners,
            latest_version_unstable=req.latest_version_unstable,
            carries_records=req.has_records or resp.has_records,
            request=req.name,
            response=resp.name,
            former_name=req.former_name.removesuffix("Request") if req.former_name else None,
        )
    return out


def all_apis() -> dict[int, ApiInfo]:
    return dict(_registry())


def api(key: int) -> ApiInfo:
    """KeyError for a key Kafka does not define."""
    return _registry()[key]


@functools.cache
def api_by_name(name: str) -> ApiInfo:
    for info in _registry().values():
        if info.name == name or info.request == name:
            return info
    for info in _registry().values():
        if info.former_name is not None and name in (info.former_name, info.former_name + "Request"):
            return info
    raise KeyError(name)


# read once: an enum attribute costs ~50 ns per lookup on Python 3.11, and these run for every request and answer
_CONTROLLED_SHUTDOWN, _API_VERSIONS = ApiKey.CONTROLLED_SHUTDOWN, ApiKey.API_VERSIONS


def request_header_version(api_key: int, api_version: int) -> int:
    # ControlledShutdown v0 predates the client id in the header.
    if api_key == _CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if api(api_key).is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    # The ApiVersions response header stays v0 so that a client can always read it,
    # whatever version it asked for (the response may be an UNSUPPORTED_VERSION reply).
    if api_key == _API_VERSIONS:
        return 0
    return 1 if api(api_key).is_flexible(api_version) else 0
