"""What passes through the proxy: one :class:`Exchange` per request/response pair, filtered, printed as a
line, a JSON object or the annotated byte tree, and counted for the summary printed on exit.

The description of a frame (topics and partitions, record counts, every non-zero error code with its
path) is the one ``kafkawire pcap`` prints: both build a :class:`kafkawire.tools.pcap.Event` and ask
:func:`~kafkawire.tools.pcap.summary`, :func:`~kafkawire.tools.pcap.error_names` and
:func:`~kafkawire.tools.pcap.topic_partitions`. The proxy decodes for this after it has forwarded the
bytes, never before.

A response the relay skimmed (:mod:`kafkawire.protocol.skim`: a large Fetch whose error codes were read as
it passed, its records never gathered) has no payload here, only ``skim``: its size and error codes. Its
line says so (``<- skimmed``) and its JSON has ``"response_skimmed": true``; a skim that could not read the
whole body is a ``problem``, never a silent "no errors".
"""

from __future__ import annotations

import datetime
import fnmatch
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import TextIO

from kafkawire.protocol import apis
from kafkawire.protocol.annotate import AnnotationError, annotate_request, annotate_response
from kafkawire.protocol.api_keys import ApiKey
from kafkawire.protocol.connection import response_body_version
from kafkawire.protocol.errors import error_for
from kafkawire.protocol.primitives import ProtocolError
from kafkawire.protocol.records.batch import HEADER_SIZE, header_summary
from kafkawire.protocol.rpc import decode_request, decode_response
from kafkawire.protocol.skim import Skim
from kafkawire.tools.pcap import Connection, Event, error_names, topic_partitions, walk


def api_name(api_key: int | None) -> str:
    if api_key is None:
        return "?"
    try:
        return apis.api(api_key).name
    except KeyError:
        return f"api{api_key}"


@dataclass
class Exchange:
    """A request and its response (``response`` empty for an acks=0 Produce, or a connection that closed
    first), or a frame that could not be paired (``api_key`` None, ``problem`` says why)."""

    time_ns: int  # when the request was read
    connection: Connection  # client address > upstream broker address
    api_key: int | None
    api_version: int | None
    correlation_id: int | None
    request_payload: bytes | bytearray = b""  # without the size prefix, as the client sent it
    response_payload: bytes | bytearray = b""  # without the size prefix, as the client received it
    latency_ns: int | None = None
    client_id: str | None = None
    rewritten: list[tuple[int, str, str]] = field(default_factory=list)
    problem: str | None = None  # a frame that did not decode, an unmatched response...
    skim: Skim | None = None  # a skimmed response: its size and error codes (``response_payload`` is empty)
    # filled by describe()
    errors: list[str] = field(default_factory=list)
    topics: dict[str, list[int]] = field(default_factory=dict)
    request_summary: str = ""
    response_summary: str = ""

    @property
    def api_name(self) -> str:
        return api_name(self.api_key)

    @property
    def request(self) -> bytes:
        """The request frame, size prefix included (b"" when there is none); made when asked."""
        return _framed(self.request_payload)

    @property
    def response(self) -> bytes:
        return _framed(self.response_payload)

    @property
    def request_size(self) -> int:
        return len(self.request_payload) + 4 if self.request_payload else 0

    @property
    def response_size(self) -> int:
        if self.skim is not None:
            return self.skim.size + 4
        return len(self.response_payload) + 4 if self.response_payload else 0

    @property
    def answered(self) -> bool:
        return bool(self.response_payload) or self.skim is not None


def _framed(payload) -> bytes:
    return len(payload).to_bytes(4, "big") + payload if payload else b""


def client_id_of(payload) -> str | None:
    """The client id of a request payload, read from its header alone (None when null or cut short)."""
    if len(payload) < 10:
        return None
    n = int.from_bytes(payload[8:10], "big", signed=True)
    if n < 0 or len(payload) < 10 + n:
        return None
    return bytes(payload[10 : 10 + n]).decode("utf-8", "replace")


_MAX_TOPIC_IDS = 100_000


def describe(ex: Exchange, topic_names: dict[str, str] | None = None, *, errors_only: bool = False) -> None:
    """Decode both frames (after forwarding) and fill errors, topics and the summaries; a frame that does not
    decode is named in ``problem`` and described as far as it went. ``topic_names`` (topic id -> name) is
    learnt from Metadata responses and names the topics of requests that carry ids only (Fetch v13+).
    ``errors_only``: the client id and the response's error codes, no more (for the summary alone)."""
    if ex.api_key is None:
        return
    names = topic_names if topic_names is not None else {}
    req_event = resp_event = None
    if ex.request_payload and errors_only:
        ex.client_id = client_id_of(ex.request_payload)
    elif ex.request_payload:
        req_event = Event(
            "request",
            ex.connection,
            True,
            0,
            ex.time_ns,
            ex.api_key,
            ex.api_version,
            ex.correlation_id,
            topic_names=names,
        )
        try:
            req_event.message = decode_request(ex.request_payload, framed=False, strict=False)
            ex.client_id = req_event.message.header.client_id
        except (ProtocolError, KeyError) as exc:
            req_event.error = exc if isinstance(exc, ProtocolError) else None
            ex.problem = ex.problem or f"request does not decode: {exc}"
    if ex.skim is not None:
        ex.errors = skim_error_names(ex.skim)
        ex.response_summary = "skimmed (error codes read, records not decoded)"
        if ex.errors:
            ex.response_summary += " errors: " + ", ".join(ex.errors)
        if ex.skim.problem:
            ex.problem = ex.problem or f"skimmed response, error codes not all read: {ex.skim.problem}"
    elif ex.response_payload:
        resp_event = Event(
            "response",
            ex.connection,
            False,
            0,
            ex.time_ns,
            ex.api_key,
            ex.api_version,
            ex.correlation_id,
            topic_names=names,
        )
        try:
            version = response_body_version(ex.api_key, ex.api_version or 0, ex.response_payload)
            resp_event.message = decode_response(ex.response_payload, ex.api_key, version, framed=False, strict=False)
        except (ProtocolError, KeyError) as exc:
            ex.problem = ex.problem or f"response does not decode: {exc}"
        else:
            if ex.api_key == ApiKey.METADATA and topic_names is not None and len(topic_names) < _MAX_TOPIC_IDS:
                for t in resp_event.message.body.topics:  # type: ignore[attr-defined]
                    tid = getattr(t, "topic_id", None)
                    if tid is not None and tid.int and t.name:  # the zero id: a version without ids
                        topic_names[str(tid)] = t.name
    topics: dict[str, list[int]] = {}
    for ev in (req_event, resp_event):
        if ev is not None and ev.message is not None:
            for t, parts in topic_partitions(ev).items():
                topics.setdefault(t, []).extend(p for p in parts if p not in topics.get(t, []))
    ex.topics = topics
    if req_event is not None and req_event.message is not None:
        ex.request_summary = summary(req_event)
    if resp_event is not None and resp_event.message is not None:
        ex.errors = error_names(resp_event)
        if not errors_only:
            ex.response_summary = summary(resp_event)


def skim_error_names(skim: Skim) -> list[str]:
    """A skim's error codes as :func:`kafkawire.tools.pcap.error_names` writes them (``path=NAME``)."""
    return [f"{path}={error_for(code).name}" for path, code in skim.errors]


# fields that identify what a request is about, shown when present and not empty (as `kafkawire pcap` does)
_KEYS = (
    "group_id",
    "key",
    "transactional_id",
    "member_id",
    "generation_id",
    "protocol_name",
    "acks",
    "fetch_offset",
    "session_id",
)


def summary(event: Event) -> str:
    """Topics and partitions, identifying fields, record counts and offsets, error codes. Like
    :func:`kafkawire.tools.pcap.summary`, but records are counted from the v2 batch headers, never decoded
    one by one: the proxy describes every Produce and Fetch that passes."""
    assert event.message is not None
    parts = []
    tps = topic_partitions(event)
    if tps:
        parts.append(" ".join(f"{t}[{','.join(map(str, sorted(set(p))))}]" if p else t for t, p in tps.items()))
    body = event.message.body
    version = event.api_version or 0
    for attr in _KEYS:
        if attr in body._attrs and body._fields[body._attrs.index(attr)].present(version):
            value = getattr(body, attr)
            if value not in (None, "", -1):
                parts.append(f"{attr}={value}")
    count, first, last = _records(event)
    if count:
        parts.append(f"{count} records" + (f" @{first}..{last}" if not event.from_client else ""))
    if event.api_key == ApiKey.API_VERSIONS and not event.from_client:
        parts.append(f"{len(body.api_keys)} APIs")  # type: ignore[attr-defined]
    errors = error_names(event)
    if errors:
        parts.append("errors: " + ", ".join(errors))
    return " ".join(parts)


def _records(event: Event) -> tuple[int, int, int]:
    """(records, first offset, last offset) of every records field, from the v2 batch headers (the legacy
    message sets of Produce before v3 are not counted)."""
    count, first, last = 0, -1, -1
    assert event.message is not None
    for _path, f, v in walk(event.message.body, event.api_version or 0):
        if f.type != "records" or not v:
            continue
        pos, end = 0, len(v)
        while end - pos >= HEADER_SIZE:
            length = int.from_bytes(v[pos + 8 : pos + 12], "big", signed=True)
            if v[pos + 16] != 2 or length <= 0:  # a legacy message set (not counted), or damage
                break
            base, last_offset, _ts, n = header_summary(v, pos)
            first = base if first < 0 else first
            last = last_offset
            count += n
            pos += 12 + length
    return count, first, last


@dataclass
class Filters:
    apis: set[str] = field(default_factory=set)  # lower-case names and key numbers as text
    client_ids: list[str] = field(default_factory=list)  # glob patterns
    topics: list[str] = field(default_factory=list)  # glob patterns
    errors_only: bool = False

    def accepts(self, ex: Exchange) -> bool:
        if self.apis and ex.api_name.lower() not in self.apis and str(ex.api_key) not in self.apis:
            return False
        if self.client_ids and not any(fnmatch.fnmatchcase(ex.client_id or "", p) for p in self.client_ids):
            return False
        if self.topics and not any(fnmatch.fnmatchcase(t, p) for t in ex.topics for p in self.topics):
            return False
        if self.errors_only and not (ex.errors or ex.problem):
            return False
        return True


def _kb(n: int) -> str:
    return f"{n} B" if n < 10_000 else f"{n / 1024:.1f} KiB" if n < 10_000_000 else f"{n / 1048576:.1f} MiB"


def to_line(ex: Exchange) -> str:
    t = datetime.datetime.fromtimestamp(ex.time_ns / 1e9, datetime.UTC)
    head = f"{t:%H:%M:%S.%f} {ex.connection.label}"
    if ex.api_key is None:
        return f"{head} !! {ex.problem}"
    parts = [
        head,
        f"client={ex.client_id}" if ex.client_id is not None else "client=?",
        f"{ex.api_name} v{ex.api_version}",
        f"corr={ex.correlation_id}",
    ]
    parts.append(f"{ex.latency_ns / 1e6:.3f} ms" if ex.latency_ns is not None else "no response")
    parts.append(f"{_kb(ex.request_size)}>{_kb(ex.response_size)}" if ex.answered else _kb(ex.request_size))
    if ex.request_summary:
        parts.append(f"-> {ex.request_summary}")
    if ex.response_summary:
        parts.append(f"<- {ex.response_summary}")
    elif ex.errors:
        parts.append("errors: " + ", ".join(ex.errors))
    if ex.rewritten:
        parts.append("rewrote " + " ".join(f"{n}:{a}=>{b}" for n, a, b in ex.rewritten))
    if ex.problem:
        parts.append(f"!! {ex.problem}")
    return " ".join(parts)


def _annotated(frame: bytes, api_key: int | None, api_version: int | None, request: bool) -> tuple[list, str | None]:
    try:
        if request:
            return annotate_request(frame).events, None
        return annotate_response(frame, api_key, api_version).events, None  # type: ignore[arg-type]
    except AnnotationError as exc:
        return exc.events, str(exc)
    except (ProtocolError, KeyError) as exc:
        return [], str(exc)


def to_annotated_text(ex: Exchange) -> str:
    from kafkawire.cli.decode import render

    out = [to_line(ex)]
    for frame, request in ((ex.request, True), (ex.response, False)):
        if not frame:
            continue
        events, error = _annotated(frame, ex.api_key, ex.api_version, request)
        out.append("  request:" if request else "  response:")
        out.extend("    " + row for row in render(frame, events).splitlines())
        if error:
            out.append(f"    error: {error}")
    return "\n".join(out)


def to_json(ex: Exchange, annotate: bool = False) -> str:
    out = {
        "time": datetime.datetime.fromtimestamp(ex.time_ns / 1e9, datetime.UTC).isoformat().replace("+00:00", "Z"),
        "time_ns": ex.time_ns,
        "connection": ex.connection.id,
        "client": list(ex.connection.client),
        "upstream": list(ex.connection.server),
        "client_id": ex.client_id,
        "api_key": ex.api_key,
        "api_name": ex.api_name if ex.api_key is not None else None,
        "api_version": ex.api_version,
        "correlation_id": ex.correlation_id,
        "latency_ms": None if ex.latency_ns is None else round(ex.latency_ns / 1e6, 3),
        "request_bytes": ex.request_size,
        "response_bytes": ex.response_size,
        "errors": ex.errors,
        "topics": ex.topics,
        "request_summary": ex.request_summary,
        "response_summary": ex.response_summary,
        "response_skimmed": ex.skim is not None,
        "rewritten": [{"node_id": n, "upstream": a, "local": b} for n, a, b in ex.rewritten],
        "problem": ex.problem,
    }
    if annotate:
        for name, frame, request in (("request", ex.request, True), ("response", ex.response, False)):
            if frame:
                events, error = _annotated(frame, ex.api_key, ex.api_version, request)
                out[f"{name}_annotations"] = [e.to_dict() for e in events]
                if error:
                    out[f"{name}_annotation_error"] = error
    return json.dumps(out, ensure_ascii=False, default=str)


class Histogram:
    """Latencies in buckets about 2% wide from 1 µs up (bounded memory however long the proxy runs)."""

    _BASE = math.log(1.02)

    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()
        self.n = 0
        self.max_ns = 0

    def add(self, ns: int) -> None:
        self.counts[int(math.log(max(ns, 1000) / 1000) / self._BASE)] += 1
        self.n += 1
        self.max_ns = max(self.max_ns, ns)

    def percentile(self, q: float) -> float:
        """Milliseconds (the bucket's upper bound), 0 with no samples."""
        if not self.n:
            return 0.0
        rank = max(1, math.ceil(q * self.n))
        seen = 0
        for bucket in sorted(self.counts):
            seen += self.counts[bucket]
            if seen >= rank:
                return min(1000 * math.exp((bucket + 1) * self._BASE), self.max_ns) / 1e6
        return self.max_ns / 1e6


@dataclass
class ApiStats:
    requests: int = 0
    with_errors: int = 0
    request_bytes: int = 0
    response_bytes: int = 0
    latency: Histogram = field(default_factory=Histogram)


class Reporter:
    """Prints the exchanges that pass the filters and counts every one for the summary."""

    def __init__(
        self,
        out: TextIO,
        *,
        fmt: str = "text",
        annotate: bool = False,
        filters: Filters | None = None,
        quiet: bool = False,
    ):
        self.out = out
        self.fmt = fmt
        self.annotate = annotate
        self.filters = filters or Filters()
        self.quiet = quiet
        self.per_api: dict[str, ApiStats] = {}
        self.errors: Counter[str] = Counter()
        self.problems: Counter[str] = Counter()
        self.connections = 0
        self.sasl_tokens = 0
        self.notes: list[str] = []
        self.topic_names: dict[str, str] = {}  # topic id -> name, from Metadata responses

    @property
    def needs_bodies(self) -> bool:
        """Whether what is printed needs every response decoded whole (the annotated fields): otherwise a
        large response's error codes are enough, and the relay may skim it."""
        return self.annotate and not self.quiet

    def exchange(self, ex: Exchange) -> None:
        describe(ex, self.topic_names, errors_only=self.quiet)
        if ex.api_key is not None:
            stats = self.per_api.setdefault(ex.api_name, ApiStats())
            stats.requests += 1
            stats.request_bytes += ex.request_size
            stats.response_bytes += ex.response_size
            if ex.latency_ns is not None:
                stats.latency.add(ex.latency_ns)
            if ex.errors:
                stats.with_errors += 1
            for e in ex.errors:
                self.errors[f"{ex.api_name} {e.rsplit('=', 1)[-1]}"] += 1
        if ex.problem:
            self.problems[ex.problem.split(":", 1)[0]] += 1
        if self.quiet or not self.filters.accepts(ex):
            return
        if self.fmt == "json":
            line = to_json(ex, self.annotate)
        elif self.annotate:
            line = to_annotated_text(ex)
        else:
            line = to_line(ex)
        print(line, file=self.out, flush=True)

    def note(self, text: str) -> None:
        """A connection-level event (connect failure, violation): printed unless quiet, kept for the summary."""
        if len(self.notes) < 1000:
            self.notes.append(text)
        if not self.quiet:
            if self.fmt == "json":
                print(json.dumps({"note": text}), file=self.out, flush=True)
            else:
                print(f"!! {text}", file=self.out, flush=True)

    def summary(self) -> str:
        total = sum(s.requests for s in self.per_api.values())
        lines = [
            f"kafkawire proxy: {self.connections} connections, {total} requests"
            + (f", {self.sasl_tokens} SASL tokens" if self.sasl_tokens else "")
        ]
        if self.per_api:
            rows = [("API", "requests", "errors", "p50 ms", "p90 ms", "p99 ms", "max ms", "req bytes", "resp bytes")]
            for name, s in sorted(self.per_api.items(), key=lambda kv: -kv[1].requests):
                h = s.latency
                rows.append(
                    (
                        name,
                        str(s.requests),
                        str(s.with_errors),
                        f"{h.percentile(0.5):.3f}",
                        f"{h.percentile(0.9):.3f}",
                        f"{h.percentile(0.99):.3f}",
                        f"{h.max_ns / 1e6:.3f}",
                        str(s.request_bytes),
                        str(s.response_bytes),
                    )
                )
            widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
            for r in rows:
                lines.append(
                    "  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                )
        if self.errors:
            lines.append("error codes: " + ", ".join(f"{k} x{v}" for k, v in self.errors.most_common()))
        if self.problems:
            lines.append("problems: " + ", ".join(f"{k} x{v}" for k, v in self.problems.most_common()))
        return "\n".join(lines)
