"""Kafka traffic in a capture, sans-IO: capture bytes in, requests and responses out.

:class:`Dissector` takes packets (from :func:`kafkawire.tools.capture.read_packets`
or anywhere else), puts each TCP connection's two byte streams back in order
(:mod:`kafkawire.tools.reassembly`), splits them into Kafka frames and hands
each to the observer side of that connection's
:class:`kafkawire.protocol.connection.ProtocolConnection`, which pairs every
response with its request by correlation id (a response names neither its API
nor its version), knows that an acks=0 Produce gets no response and how an
ApiVersions answer is read; both are decoded with :mod:`kafkawire.protocol`.
The dissector keeps the frame-finding the capture needs and a live connection
does not: after bytes the capture lacks, or in a capture that starts
mid-connection, it scans for a plausible frame start and only trusts it once it
decodes. A response that overtakes an earlier unanswered request says so in its
``note``. It yields :class:`Event` s: ``request`` and
``response`` (decoded, or carrying the :class:`DecodeError`), ``gap`` (bytes
the capture lacks), ``skip`` (bytes passed over to find the next frame after a
gap or a capture that starts mid-connection) and ``error`` (an impossible frame
size).

Which connections are Kafka: those to one of ``ports``; with ``autodetect``
also any whose client opens with bytes that read as a Kafka request header
(a plausible size, a known API key at a version it has, a sane client id).

:func:`summary` and :func:`error_names` describe an event in a line.

Not handled: IP fragments (counted in ``Stats.not_tcp``), TLS (the bytes do
not read as Kafka), SASL tokens sent bare after a SaslHandshake v0 (they show
as frames that do not decode), and autodetection of connections whose start
the capture missed (a listed port works for those).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from kafkawire.protocol import ApiKey, apis
from kafkawire.protocol.connection import (
    PendingRequest,
    ProtocolConnection,
    ResponseReceived,
    Role,
    frame_size_problem,
    response_body_version,
)
from kafkawire.protocol.errors import error_for
from kafkawire.protocol.framing import DEFAULT_MAX_FRAME
from kafkawire.protocol.messages import Struct
from kafkawire.protocol.primitives import DecodeError, ProtocolError
from kafkawire.protocol.rpc import Request, Response, decode_request, decode_response

from .capture import NotTcp, Packet, Segment, read_packets, tcp_segment
from .reassembly import Data, Gap, HalfStream

DEFAULT_PORTS = (9092,)
_SIZE = struct.Struct(">i")
_PREFIX = struct.Struct(">ihhi")  # size, api key, api version, correlation id
_DETECT_BYTES = 14  # size, key, version, correlation id, client id length
_RESYNC_KEEP = _DETECT_BYTES - 1


@dataclass(frozen=True)
class Connection:
    id: int  # 1-based, in order of first packet
    client: tuple[str, int]
    server: tuple[str, int]

    @property
    def label(self) -> str:
        return f"#{self.id} {_endpoint(self.client)}>{_endpoint(self.server)}"


def _endpoint(ep: tuple[str, int]) -> str:
    host, port = ep
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class Event:
    kind: str  # request | response | gap | skip | error
    connection: Connection
    from_client: bool
    packet: int  # number of the packet that completed the frame (Wireshark's frame number)
    time_ns: int
    api_key: int | None = None
    api_version: int | None = None
    correlation_id: int | None = None
    client_id: str | None = None
    frame: bytes = b""  # size prefix included
    stream_offset: int = 0  # where the frame starts in its direction's byte stream
    message: Request | Response | None = None
    error: ProtocolError | None = None
    note: str = ""
    request_time_ns: int | None = None  # responses: when the paired request completed
    request_packet: int | None = None
    topic_names: dict = field(default_factory=dict, repr=False)  # topic id -> name, learnt from the capture

    @property
    def api_name(self) -> str | None:
        if self.api_key is None:
            return None
        try:
            return apis.api(self.api_key).name
        except KeyError:
            return f"api{self.api_key}"

    @property
    def body(self):
        return None if self.message is None else self.message.body


@dataclass
class Stats:
    packets: int = 0
    tcp_segments: int = 0
    not_tcp: dict[str, int] = field(default_factory=dict)
    kafka_connections: int = 0
    other_connections: int = 0
    requests: int = 0
    responses: int = 0
    decode_errors: int = 0
    gaps: int = 0
    gap_bytes: int = 0
    retransmitted_segments: int = 0
    unanswered: int = 0  # requests still waiting for a response at the end (acks=0 produce excluded)


def looks_like_request(data, pos: int = 0, max_frame: int = DEFAULT_MAX_FRAME) -> bool:
    """Whether the bytes at ``pos`` can start a framed Kafka request (at least 12 of them needed)."""
    if len(data) - pos < 12:
        return False
    size, key, version, _corr = _PREFIX.unpack_from(data, pos)
    if size < 10 or size > max_frame:
        return False
    try:
        info = apis.api(key)
    except KeyError:
        return False
    if not info.supports(version):
        return False
    if apis.request_header_version(key, version) >= 1 and len(data) - pos >= 14:
        (n,) = struct.unpack_from(">h", data, pos + 12)
        if n < -1 or n > size - 10:
            return False
    return True


# --------------------------------------------------------------------------- one direction's frames


class _Frames:
    def __init__(self, from_client: bool, resync: bool, max_frame: int):
        self.from_client = from_client
        self.max_frame = max_frame
        self.buf = bytearray()
        self.offset = 0  # stream offset of buf[0]
        self.resync = resync
        self.tentative = False  # the frame at buf[0] was found by scanning; a failure resumes the scan
        self.skipped = 0
        self.skip_from = 0
        self.alternatives: list[int] = []  # plausible frame starts behind an unfinished guessed one
        self.alt_scanned = 0


class _Conn:
    def __init__(self, conn: Connection | None, a, b):
        self.info = conn
        self.ends = (a, b)
        self.half = {a: HalfStream(), b: HalfStream()}
        self.client = None if conn is None else conn.client
        self.kafka: bool | None = None  # None: not decided yet
        self.held: list[tuple[tuple, object]] = []  # pieces waiting for the decision
        self.rejected: set = set()  # endpoints whose first bytes are not a request
        self.frames: dict = {}
        self.protocol: ProtocolConnection | None = None  # pairs requests and responses (tags: (time_ns, packet))
        self.finished: set = set()
        self.mid_stream = False
        self.client_id: bytes | None = None  # the last one this connection's requests carried


class Dissector:
    """Feed packets, take events. ``finish()`` at the end flushes what the capture left open."""

    def __init__(
        self, ports: Iterable[int] = DEFAULT_PORTS, *, autodetect: bool = True, max_frame: int = DEFAULT_MAX_FRAME
    ):
        self.ports = frozenset(ports)
        self.autodetect = autodetect
        self.max_frame = max_frame
        self.stats = Stats()
        self._conns: dict[frozenset, _Conn] = {}
        self._count = 0
        self._last = (0, 0)
        self.topic_names: dict[str, str] = {}

    # -- packets -----------------------------------------------------------------
    def packet(self, packet: Packet) -> list[Event]:
        self.stats.packets += 1
        self._last = (packet.number, packet.time_ns)
        try:
            seg = tcp_segment(packet)
        except NotTcp as exc:
            reason = str(exc)
            self.stats.not_tcp[reason] = self.stats.not_tcp.get(reason, 0) + 1
            return []
        self.stats.tcp_segments += 1
        return self.segment(seg, packet.number, packet.time_ns)

    def segment(self, seg: Segment, number: int, time_ns: int) -> list[Event]:
        src, dst = (seg.src, seg.sport), (seg.dst, seg.dport)
        key = frozenset((src, dst))
        conn = self._conns.get(key)
        events: list[Event] = []
        if conn is not None and seg.syn and not seg.has_ack and conn.half[src].next > 0:
            events += self._close(conn, number, time_ns)  # the ports are reused by a new connection
            conn = None
        if conn is None:
            conn = self._open(seg, src, dst)
        sender, receiver = conn.half[src], conn.half[dst]
        if seg.syn:
            sender.syn(seg.seq)
        pieces: list = []
        if seg.has_ack:
            pieces += [(dst, p) for p in receiver.acked(seg.ack, number, time_ns)]
        before = sender.retransmitted
        pieces += [(src, p) for p in sender.segment(seg.seq, seg.payload, number, time_ns, fin=seg.fin)]
        self.stats.retransmitted_segments += sender.retransmitted - before
        for end, piece in pieces:
            events += self._piece(conn, end, piece)
        if seg.rst:
            events += self._close(conn, number, time_ns)
        elif sender.fin_at is not None and sender.next >= sender.fin_at and src not in conn.finished:
            conn.finished.add(src)
            for piece in sender.finish(number, time_ns):
                events += self._piece(conn, src, piece)
            if len(conn.finished) == 2:
                events += self._close(conn, number, time_ns)
        return events

    def finish(self) -> list[Event]:
        """End of capture: deliver what waits behind holes, report frames left incomplete."""
        events: list[Event] = []
        number, time_ns = self._last
        for conn in list(self._conns.values()):
            events += self._close(conn, number, time_ns)
        return events

    # -- connections ---------------------------------------------------------------
    def _open(self, seg: Segment, src, dst) -> _Conn:
        conn = _Conn(None, src, dst)
        self._conns[frozenset((src, dst))] = conn
        if seg.syn:
            conn.client = dst if seg.has_ack else src
        elif seg.dport in self.ports:
            conn.client = src
        elif seg.sport in self.ports:
            conn.client = dst
        conn.mid_stream = not seg.syn
        if conn.client is not None:
            server = dst if conn.client == src else src
            if server[1] in self.ports:
                self._decide(conn, True)
            elif not self.autodetect:
                self._decide(conn, False)
        elif not self.autodetect:
            self._decide(conn, False)
        return conn

    def _decide(self, conn: _Conn, kafka: bool) -> list[Event]:
        conn.kafka = kafka
        events: list[Event] = []
        if not kafka:
            self.stats.other_connections += 1
            conn.held = []
            return events
        for end in conn.ends:
            conn.frames[end] = _Frames(end == conn.client, conn.mid_stream, self.max_frame)
        conn.protocol = ProtocolConnection(Role.OBSERVER, max_frame=self.max_frame)
        held, conn.held = conn.held, []
        for end, piece in held:
            events += self._piece(conn, end, piece)
        return events

    def _close(self, conn: _Conn, number: int, time_ns: int) -> list[Event]:
        events: list[Event] = []
        for end in conn.ends:
            for piece in conn.half[end].finish(number, time_ns):
                events += self._piece(conn, end, piece)
        if conn.kafka is None:
            events += self._detect(conn, final=True)
        if conn.kafka:
            for end in conn.ends:
                events += self._flush(conn, end, number, time_ns)
            self.stats.unanswered += len(conn.protocol.pending)
        for end in conn.ends:
            self.stats.gap_bytes += conn.half[end].gap_bytes
            conn.half[end].gap_bytes = 0
        key = frozenset(conn.ends)
        if self._conns.get(key) is conn:
            del self._conns[key]
        return events

    def _detect(self, conn: _Conn, final: bool = False) -> list[Event]:
        """Decide from the held pieces whether the connection is Kafka (and, mid-stream, who is the client)."""
        candidates = [conn.client] if conn.client is not None else list(conn.ends)
        if (
            conn.client is not None
            and any(e != conn.client for e, _ in conn.held)
            and not any(e == conn.client for e, _ in conn.held)
        ):
            return self._decide(conn, False)  # the server spoke first: Kafka clients always do
        for end in candidates:
            head = bytearray()
            for e, piece in conn.held:
                if e == end and isinstance(piece, Data) and piece.offset == len(head):
                    head += piece.data
                    if len(head) >= _DETECT_BYTES:
                        break
            if len(head) < _DETECT_BYTES and not (final and len(head) >= 12):
                continue  # not enough bytes yet to tell
            if looks_like_request(head, 0, self.max_frame):
                conn.client = end
                return self._decide(conn, True)
            conn.rejected.add(end)
        if final or all(end in conn.rejected for end in candidates):
            return self._decide(conn, False)
        return []

    # -- bytes -------------------------------------------------------------------
    def _piece(self, conn: _Conn, end, piece) -> list[Event]:
        if conn.kafka is False:
            return []
        if conn.kafka is None:
            conn.held.append((end, piece))
            return self._detect(conn)
        if conn.info is None:  # numbered when its first bytes arrive: connections without data do not count
            self.stats.kafka_connections += 1
            self._count += 1
            a, b = conn.ends
            conn.info = Connection(self._count, conn.client, b if conn.client == a else a)
        frames = conn.frames[end]
        if isinstance(piece, Gap):
            return self._gap(conn, frames, piece)
        if not frames.buf:
            frames.offset = piece.offset
        frames.buf += piece.data
        return self._split(conn, frames, piece.packet, piece.time_ns)

    def _event(self, conn: _Conn, frames: _Frames, kind: str, packet: int, time_ns: int, **kw) -> Event:
        return Event(kind, conn.info, frames.from_client, packet, time_ns, topic_names=self.topic_names, **kw)

    def _learn_topic_ids(self, event: Event) -> None:
        # Metadata (and other) responses name a topic and give its id side by side
        for _path, f, v in walk(event.message.body, event.api_version):
            if f.is_array and f.struct is not None and isinstance(v, list):
                for item in v:
                    attrs = item._attrs
                    if "topic_id" in attrs and ("name" in attrs or "topic" in attrs):
                        name = getattr(item, "name" if "name" in attrs else "topic")
                        topic_id = item.topic_id
                        if isinstance(name, str) and name and topic_id is not None and int(topic_id):
                            self.topic_names[str(topic_id)] = name

    def _gap(self, conn: _Conn, frames: _Frames, gap: Gap) -> list[Event]:
        self.stats.gaps += 1
        note = f"{gap.size} bytes {gap.reason} at stream offset {gap.offset}"
        kw: dict = {}
        if frames.buf and not frames.resync:
            note += f"; the frame in progress ({len(frames.buf)} bytes captured) is lost"
            if len(frames.buf) >= 12:
                _size, key, version, corr = _PREFIX.unpack_from(frames.buf, 0)
                if frames.from_client and looks_like_request(frames.buf, 0, self.max_frame):
                    kw = dict(api_key=key, api_version=version, correlation_id=corr)
                    # its response, if captured, still pairs (acks=0 read from what arrived)
                    conn.protocol.observe_request(bytes(frames.buf[4:]), tag=(gap.time_ns, gap.packet))
                elif not frames.from_client:
                    corr = _SIZE.unpack_from(frames.buf, 4)[0]
                    lost = conn.protocol.forget(corr)
                    if lost is not None:
                        kw = dict(api_key=lost.api_key, api_version=lost.api_version, correlation_id=corr)
        events = [self._event(conn, frames, "gap", gap.packet, gap.time_ns, stream_offset=gap.offset, note=note, **kw)]
        if frames.resync:
            self._drop(frames, len(frames.buf))
        frames.buf.clear()
        frames.offset = gap.offset + gap.size
        frames.resync = True
        frames.tentative = False
        return events

    def _flush(self, conn: _Conn, end, number: int, time_ns: int) -> list[Event]:
        frames = conn.frames[end]
        events = self._skipped(conn, frames, number, time_ns, len(frames.buf) if frames.resync else 0)
        if frames.buf and not frames.resync:
            need = _SIZE.unpack_from(frames.buf, 0)[0] + 4 if len(frames.buf) >= 4 else 4
            events.append(
                self._event(
                    conn,
                    frames,
                    "gap",
                    number,
                    time_ns,
                    stream_offset=frames.offset,
                    note=f"stream ends inside a frame: {len(frames.buf)} of {need} bytes",
                )
            )
        frames.buf.clear()
        return events

    def _skipped(self, conn, frames: _Frames, number, time_ns, extra: int = 0) -> list[Event]:
        n = frames.skipped + extra
        frames.skipped = 0
        if not n:
            return []
        return [
            self._event(
                conn,
                frames,
                "skip",
                number,
                time_ns,
                stream_offset=frames.skip_from,
                note=f"{n} bytes passed over looking for the start of a frame",
            )
        ]

    def _plausible(self, conn: _Conn, frames: _Frames, pos: int) -> bool:
        buf = frames.buf
        if frames.from_client:
            if not looks_like_request(buf, pos, self.max_frame):
                return False
            if (
                conn.client_id is not None
                and len(buf) - pos >= 14
                and apis.request_header_version(*struct.unpack_from(">hh", buf, pos + 4)) >= 1
            ):
                # a client keeps its client id: a different one is a false start
                (n,) = struct.unpack_from(">h", buf, pos + 12)
                if n >= 0 and len(buf) - pos >= 14 + n and bytes(buf[pos + 14 : pos + 14 + n]) != conn.client_id:
                    return False
            return True
        if len(buf) - pos < 8:
            return False
        size, corr = struct.unpack_from(">ii", buf, pos)
        return 4 <= size <= self.max_frame and conn.protocol.expected(corr) is not None

    def _split(self, conn: _Conn, frames: _Frames, packet: int, time_ns: int) -> list[Event]:
        events: list[Event] = []
        buf = frames.buf
        for _ in range(len(buf) + 1):  # each round consumes at least one byte or stops
            if frames.resync:
                found = next((p for p in range(len(buf) - 11) if self._plausible(conn, frames, p)), None)
                if found is None:
                    drop = max(0, len(buf) - _RESYNC_KEEP)
                    self._drop(frames, drop)
                    break
                self._drop(frames, found)
                frames.resync = False
                frames.tentative = True
            if len(buf) < 4:
                break
            (size,) = _SIZE.unpack_from(buf, 0)
            if frame_size_problem(size, self.max_frame) is not None:
                if frames.tentative:
                    self._retry(frames)
                    continue
                events.append(
                    self._event(
                        conn,
                        frames,
                        "error",
                        packet,
                        time_ns,
                        stream_offset=frames.offset,
                        note=f"impossible frame size {size}; looking for the next frame",
                    )
                )
                frames.resync = True
                self._drop(frames, 1)
                continue
            if len(buf) < 4 + size:
                if frames.tentative:  # a whole frame further on that decodes beats an unfinished guess
                    alternative = self._decodable_start(conn, frames, 1)
                    if alternative is not None:
                        self._drop(frames, alternative)
                        continue
                break
            frame = bytes(buf[: 4 + size])
            offset = frames.offset
            event = self._decode(conn, frames, frame, packet, time_ns, offset, commit=not frames.tentative)
            if event is None:  # a scanned start that does not decode: keep scanning after it
                self._retry(frames)
                continue
            del buf[: 4 + size]
            frames.offset += 4 + size
            frames.alternatives.clear()
            frames.alt_scanned = 0
            frames.tentative = False
            events += self._skipped(conn, frames, packet, time_ns)
            events.append(event)
        return events

    def _decodable_start(self, conn: _Conn, frames: _Frames, start: int) -> int | None:
        """The first position after ``start`` where a whole frame decodes; positions are scanned once."""
        buf = frames.buf
        for p in range(max(start, frames.alt_scanned), len(buf) - 11):
            if self._plausible(conn, frames, p):
                frames.alternatives.append(p)
        frames.alt_scanned = max(frames.alt_scanned, len(buf) - 11)
        for p in list(frames.alternatives):
            size = _SIZE.unpack_from(buf, p)[0]
            if p + 4 + size > len(buf):
                continue
            frames.alternatives.remove(p)
            frame = bytes(buf[p : p + 4 + size])
            try:
                if frames.from_client:
                    decode_request(frame)
                else:
                    found = conn.protocol.expected(_SIZE.unpack_from(frame, 4)[0])
                    if found is None:
                        continue
                    _decode_response(frame, found)
            except ProtocolError:
                continue
            return p
        return None

    def _drop(self, frames: _Frames, n: int) -> None:
        if n <= 0:
            return
        if not frames.skipped:
            frames.skip_from = frames.offset
        frames.skipped += n
        del frames.buf[:n]
        frames.offset += n
        frames.alternatives.clear()  # positions have moved
        frames.alt_scanned = 0

    def _retry(self, frames: _Frames) -> None:
        frames.tentative = False
        frames.resync = True
        self._drop(frames, 1)

    # -- frames ------------------------------------------------------------------
    def _decode(
        self, conn: _Conn, frames: _Frames, frame: bytes, packet: int, time_ns: int, offset: int, commit: bool
    ) -> Event | None:
        """The event for one whole frame; None when a scanned (uncommitted) frame does not decode."""
        protocol = conn.protocol
        payload = frame[4:]
        if frames.from_client:
            _size, key, version, corr = _PREFIX.unpack_from(frame, 0) if len(frame) >= 12 else (0, None, None, None)
            event = self._event(
                conn,
                frames,
                "request",
                packet,
                time_ns,
                api_key=key,
                api_version=version,
                correlation_id=corr,
                frame=frame,
                stream_offset=offset,
            )
            try:
                event.message = decode_request(frame)
                event.client_id = event.message.header.client_id
                if event.message.header_version >= 1:
                    conn.client_id = event.client_id.encode()
            except ProtocolError as exc:
                if not commit:
                    return None
                event.error = exc if isinstance(exc, DecodeError) else DecodeError(str(exc), offset=4)
            # even when it did not decode: the response then pairs and says why
            protocol.observe_request(payload, offset=offset, tag=(time_ns, packet))
            self.stats.requests += 1
        else:
            corr = _SIZE.unpack_from(frame, 4)[0] if len(frame) >= 8 else None
            event = self._event(
                conn, frames, "response", packet, time_ns, correlation_id=corr, frame=frame, stream_offset=offset
            )
            if not commit:  # a scanned start: only a response to a request seen, and one that decodes, is taken
                found = protocol.expected(corr) if corr is not None else None
                if found is None:
                    return None
                try:
                    event.message = _decode_response(frame, found)
                except ProtocolError:
                    return None
            observed = protocol.observe_response(payload, offset=offset)
            if type(observed) is not ResponseReceived:
                event.error = DecodeError(
                    f"no request with correlation id {corr} seen on this connection", offset=4, message="ResponseHeader"
                )
            else:
                event.api_key, event.api_version = observed.api_key, observed.api_version
                event.request_time_ns, event.request_packet = observed.tag
                if observed.overtook:
                    event.note = (
                        "answered before the earlier request"
                        + ("s" if len(observed.overtook) > 1 else "")
                        + " with correlation id "
                        + ", ".join(map(str, observed.overtook))
                    )
                if event.message is None:
                    try:
                        event.message = _decode_response(
                            frame, PendingRequest(observed.api_key, observed.api_version, None)
                        )
                    except ProtocolError as exc:
                        event.error = exc if isinstance(exc, DecodeError) else DecodeError(str(exc), offset=4)
            self.stats.responses += 1
        if event.error is not None:
            self.stats.decode_errors += 1
        elif event.message is not None and not event.from_client:
            self._learn_topic_ids(event)
        return event


def _decode_response(frame: bytes, request: PendingRequest) -> Response:
    """A framed response to ``request``, its body read at the version the protocol's rules give."""
    try:
        apis.api(request.api_key)
    except KeyError:  # a key kafkawire's spec does not have
        raise DecodeError(f"unknown API key {request.api_key}", offset=4, message="response") from None
    version = response_body_version(request.api_key, request.api_version, memoryview(frame)[4:])
    return decode_response(frame, request.api_key, version)


def dissect(
    data: bytes, ports: Iterable[int] = DEFAULT_PORTS, *, autodetect: bool = True, dissector: Dissector | None = None
) -> Iterator[Event]:
    """Every event of a whole pcap/pcapng file, in the order the frames complete."""
    d = dissector or Dissector(ports, autodetect=autodetect)
    for packet in read_packets(data):
        yield from d.packet(packet)
    yield from d.finish()


# --------------------------------------------------------------------------- describing events


def walk(value, version: int, path: str = ""):
    """(path, FieldSpec, value) for every field present at ``version``, depth first."""
    if not isinstance(value, Struct):
        return
    for f, attr in zip(value._fields, value._attrs):
        if not f.present(version):
            continue
        v = getattr(value, attr)
        p = f"{path}.{attr}" if path else attr
        yield p, f, v
        if isinstance(v, Struct):
            yield from walk(v, version, p)
        elif isinstance(v, list):
            for i, item in enumerate(v):
                yield from walk(item, version, f"{p}[{i}]")


def error_names(event: Event) -> list[str]:
    """Every non-zero error code in the message, as ``path=NAME``."""
    if event.message is None:
        return []
    out = []
    for path, f, v in walk(event.message.body, event.api_version):
        if f.type == "int16" and f.name == "ErrorCode" and v:
            out.append(f"{path}={error_for(v).name}")
    return out


def topic_partitions(event: Event) -> dict[str, list[int]]:
    """Topic (name, or id when the version names topics by id) -> partition indexes mentioned."""
    out: dict[str, list[int]] = {}
    if event.message is None:
        return out
    for _path, f, v in walk(event.message.body, event.api_version):
        if (
            f.is_array
            and f.struct is not None
            and isinstance(v, list)
            and ("topic" in f.attr or "topic" in f.struct.name.lower())
        ):
            for item in v:
                name = _topic_name(item, event.api_version)
                if name is None:
                    continue
                name = event.topic_names.get(name, name)
                parts = out.setdefault(name, [])
                for pf, pattr in zip(item._fields, item._attrs):
                    if pf.is_array and pf.struct is not None and "partition" in pattr and pf.present(event.api_version):
                        for p in getattr(item, pattr):
                            idx = _partition_index(p, event.api_version)
                            if idx is not None:
                                parts.append(idx)
                    elif (
                        pattr in ("partitions", "partition_indexes")
                        and pf.type == "int32"
                        and pf.is_array
                        and pf.present(event.api_version)
                    ):
                        parts.extend(getattr(item, pattr))
            break  # the outermost topic list only
    return out


def _topic_name(item, version: int):
    for f, attr in zip(item._fields, item._attrs):
        if not f.present(version):
            continue
        if attr in ("name", "topic", "topic_name") and f.type == "string":
            return getattr(item, attr)
    for f, attr in zip(item._fields, item._attrs):
        if f.present(version) and attr == "topic_id":
            return str(getattr(item, attr))
    return None


def _partition_index(p, version: int):
    for f, attr in zip(p._fields, p._attrs):
        if (
            f.present(version)
            and attr in ("partition_index", "partition", "index", "partition_id")
            and f.type == "int32"
        ):
            return getattr(p, attr)
    return None


def record_offsets(event: Event) -> list[int]:
    """Offsets of the records carried by the message (Produce requests, Fetch responses), in order."""
    from kafkawire.protocol.records import iter_batches

    out: list[int] = []
    if event.message is None:
        return out
    for _path, f, v in walk(event.message.body, event.api_version):
        if f.type == "records" and v:
            for batch in iter_batches(v):
                out.extend(r.offset for r in batch.records())
    return out


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
    """A short description: topics and partitions, record counts, errors, a few identifying fields."""
    if event.kind not in ("request", "response"):
        return event.note
    if event.message is None:
        return f"DecodeError: {event.error}"
    parts = []
    tps = topic_partitions(event)
    if tps:
        parts.append(" ".join(f"{t}[{','.join(map(str, sorted(set(p))))}]" if p else t for t, p in tps.items()))
    body = event.message.body
    for attr in _KEYS:
        if attr in body._attrs and body._fields[body._attrs.index(attr)].present(event.api_version):
            value = getattr(body, attr)
            if value not in (None, "", -1):
                parts.append(f"{attr}={value}")
    try:
        offsets = record_offsets(event)
    except Exception as exc:  # damaged batches: say so, do not stop
        parts.append(f"records unreadable: {exc}")
    else:
        if offsets:
            parts.append(
                f"{len(offsets)} records" + (f" @{offsets[0]}..{offsets[-1]}" if event.from_client is False else "")
            )
    if event.api_key == ApiKey.API_VERSIONS and not event.from_client:
        parts.append(f"{len(body.api_keys)} APIs")
    errors = error_names(event)
    if errors:
        parts.append("errors: " + ", ".join(errors))
    if event.note:
        parts.append(event.note)
    return " ".join(parts)
