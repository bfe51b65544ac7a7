"""``kafkawire pcap``: the Kafka requests and responses in a pcap or pcapng capture.

One line per request and per response: time (UTC), connection, direction
(``->`` request, ``<-`` response), API name and version, correlation id and a
short summary (topics and partitions, record counts, error codes by name).
Responses are paired with their requests by correlation id per connection.
Frames that do not decode show the DecodeError with its byte offset (counted
after the frame's 4-byte size, as ``kafkawire decode --unframed`` does); gaps in
the capture are reported and the stream picked up again at the next frame.

``--json`` prints one JSON object a line; ``--annotate`` adds every field of
each frame (the ``kafkawire decode`` tree). Connections are Kafka when their
server port is one of ``--port`` (default 9092) or, unless
``--no-autodetect``, when the client's first bytes read as a Kafka request.

Exit status: 0 all decoded, 1 some frame did not decode, 2 unreadable capture.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys

from kafkawire.protocol.annotate import AnnotationError, annotate_request, annotate_response
from kafkawire.tools.capture import CaptureError, CaptureReader
from kafkawire.tools.pcap import DEFAULT_PORTS, Dissector, Event, error_names, summary, topic_partitions

from .decode import _jsonable, render


def configure(parser: argparse.ArgumentParser, name: str = "pcap") -> None:
    parser.add_argument("file", help="the capture (pcap or pcapng; '-' for stdin)")
    parser.add_argument(
        "--port", "-p", type=int, action="append", help="a Kafka server port (repeatable; default 9092)"
    )
    parser.add_argument(
        "--no-autodetect",
        dest="autodetect",
        action="store_false",
        help="only the given ports, no guessing from the first bytes",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--annotate", action="store_true", help="every field of every frame")


_CHUNK = 1 << 20


def run(args) -> int:
    try:
        fh = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")
    except OSError as exc:
        print(f"kafkawire pcap: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    reader = CaptureReader()
    dissector = Dissector(args.port or DEFAULT_PORTS, autodetect=args.autodetect)
    failed = False

    def emit(events) -> None:
        nonlocal failed
        for event in events:
            failed |= event.error is not None
            print(to_json(event, args.annotate) if args.json else to_text(event, args.annotate))

    try:
        with fh:
            while chunk := fh.read(_CHUNK):  # the capture is read as a stream, never whole
                for packet in reader.feed(chunk):
                    emit(dissector.packet(packet))
        if reader.format is None:
            raise CaptureError(f"{reader.pending} bytes is too short for a capture file", 0)
    except CaptureError as exc:
        print(f"kafkawire pcap: {args.file}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"kafkawire pcap: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    emit(dissector.finish())
    if reader.pending:
        print(f"kafkawire pcap: the capture ends inside a packet ({reader.pending} bytes ignored)", file=sys.stderr)
    s = dissector.stats
    print(
        f"kafkawire pcap: {s.packets} packets, {s.kafka_connections} Kafka connections "
        f"({s.other_connections} other), {s.requests} requests, {s.responses} responses, "
        f"{s.decode_errors} not decoded, {s.gaps} gaps ({s.gap_bytes} bytes), "
        f"{s.retransmitted_segments} retransmitted segments, {s.unanswered} unanswered",
        file=sys.stderr,
    )
    return 1 if failed else 0


def _time(ns: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ns / 1e9, datetime.UTC)


def _annotations(event: Event):
    """(events, error) of the decode CLI's annotator for the event's frame; None when it has no frame."""
    if event.kind == "request" and event.frame:
        try:
            return annotate_request(event.frame).events, None
        except AnnotationError as exc:
            return exc.events, exc
    if event.kind == "response" and event.frame and event.api_key is not None:
        try:
            return annotate_response(event.frame, event.api_key, event.api_version).events, None
        except AnnotationError as exc:
            return exc.events, exc
    return None


def to_text(event: Event, annotate: bool = False) -> str:
    arrow = {"request": "->", "response": "<-"}.get(event.kind, "!!")
    side = "client" if event.from_client else "server"
    head = f"{_time(event.time_ns):%H:%M:%S.%f} {event.connection.label} {arrow}"
    if event.kind in ("request", "response"):
        name = f"{event.api_name} v{event.api_version}" if event.api_key is not None else "?"
        line = f"{head} {name} corr={event.correlation_id}"
        if event.client_id:
            line += f" client={event.client_id}"
        if event.request_time_ns is not None:
            line += f" ({(event.time_ns - event.request_time_ns) / 1e6:.3f} ms)"
        text = summary(event)
        line += f" {text}" if text else ""
    else:
        what = (
            f" ({event.api_name} v{event.api_version} corr={event.correlation_id})" if event.api_key is not None else ""
        )
        line = f"{head} {event.kind} in {side} stream{what}: {event.note}"
    if annotate:
        found = _annotations(event)
        if found is not None:
            events, error = found
            line += "\n" + "\n".join("    " + row for row in render(event.frame, events).splitlines())
            if error is not None:
                line += f"\n    error: {error}"
    return line


def to_json(event: Event, annotate: bool = False) -> str:
    out = {
        "time": _time(event.time_ns).isoformat().replace("+00:00", "Z"),
        "time_ns": event.time_ns,
        "packet": event.packet,
        "connection": event.connection.id,
        "client": list(event.connection.client),
        "server": list(event.connection.server),
        "kind": event.kind,
        "from": "client" if event.from_client else "server",
        "stream_offset": event.stream_offset,
        "api_key": event.api_key,
        "api_name": event.api_name,
        "api_version": event.api_version,
        "correlation_id": event.correlation_id,
    }
    if event.kind == "request":
        out["client_id"] = event.client_id
    if event.request_time_ns is not None:
        out["request_packet"] = event.request_packet
        out["latency_ms"] = round((event.time_ns - event.request_time_ns) / 1e6, 3)
    if event.kind in ("request", "response"):
        out["length"] = len(event.frame)
        out["summary"] = summary(event)
        out["topics"] = topic_partitions(event)
        out["errors"] = error_names(event)
    if event.note:
        out["note"] = event.note
    if event.error is not None:
        e = event.error
        out["error"] = {
            "problem": getattr(e, "problem", str(e)),
            "path": getattr(e, "path", ""),
            "offset": getattr(e, "offset", None),
            "text": str(e),
        }
    if annotate:
        found = _annotations(event)
        if found is not None:
            out["annotations"] = [a.to_dict() for a in found[0]]
        if event.message is not None:
            out["value"] = _jsonable(event.message.body.to_dict())
    return json.dumps(out, ensure_ascii=False, default=str)
