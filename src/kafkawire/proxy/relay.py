"""The asyncio relay: local listeners, one upstream connection per client connection, bytes both ways.

Requests go upstream exactly as they arrive, chunk by chunk, as soon as they arrive. Responses are
forwarded frame by frame, as the observer side of a :class:`~kafkawire.protocol.connection.ProtocolConnection`
fed with both directions finds them and pairs them with their requests; those that carry broker addresses
(:mod:`kafkawire.proxy.addresses`) are rewritten, every other frame goes on as the bytes that came. A
response of ``STREAM_MIN`` bytes or more is not held: its bytes go on as they arrive, but for the last
``TAIL_HELD`` of a Produce or Fetch whose KIP-951 NodeEndpoints (its last bytes) may need rewriting; when
they do, the frame's length is already sent, so the hint is withdrawn (its tag renamed, same length) and
the client refreshes its metadata, which the proxy rewrites. A streamed response is skimmed by the observer
(:mod:`kafkawire.protocol.skim`: its error codes read as it passes, only the held tail kept) unless what is
reported needs it whole (:attr:`Proxy.skimming`). A frame
that does not decode is forwarded untouched and reported; only a stream whose framing is lost (an
impossible size) ends the connection, as the broker or client would end it.

One listener takes bootstrap connections (to the first upstream address that accepts); one more per
upstream node id, bound when a response first names that node, leads to that node's upstream address.

Each socket is a :class:`~kafkawire.proxy.pipe.Pipe` (a protocol that hands on the ``bytes`` it is given,
without asyncio streams' two extra copies). Bounded: a socket stops reading with ``CHUNK`` bytes
unread, a frame is at most ``max_frame``, each writer is drained before the next read (asyncio's write
buffer limits), and a connection with more than ``MAX_IN_FLIGHT``
unanswered requests is closed, as is a connection beyond ``max_connections``. A client can hold at most one
frame per direction in the proxy's memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkawire.protocol.api_keys import ApiKey
from kafkawire.protocol.connection import (
    NeedData,
    ProtocolConnection,
    ProtocolViolation,
    RequestReceived,
    ResponseReceived,
    Role,
    SaslTokenReceived,
    StreamEnded,
)
from kafkawire.protocol.framing import frame_size_prefix
from kafkawire.protocol.primitives import ProtocolError
from kafkawire.protocol.skim import Skim
from kafkawire.tools.pcap import Connection

from .addresses import (
    WITHDRAWN_TAG,
    AddressMap,
    TooManyBrokers,
    endpoints_in_tail,
    rewrite_response,
    rewrites,
    tail_endpoints,
    withdraw_node_endpoints,
)
from .pcapng import Flow, PcapngWriter
from .pipe import Pipe
from .report import Exchange, Reporter, api_name

CHUNK = 1024 * 1024
# Responses this large go on to the client while they arrive (a Fetch of megabytes would otherwise reach
# the client only after the proxy had all of it: twice the transfer time). Those that may carry broker
# addresses in their tail (KIP-951) keep their last TAIL_HELD bytes until the whole frame is in.
STREAM_MIN = 256 * 1024
TAIL_HELD = 64 * 1024
MAX_IN_FLIGHT = 1024
MAX_CONNECTIONS = 4096  # client connections at once; more are closed on accept (each holds an upstream socket)
DEFAULT_MAX_FRAME = 128 * 1024 * 1024  # responses (a Fetch) can be far larger than a request
CONNECT_TIMEOUT = 10.0
LINGER = 5.0  # after the client's EOF, how long its last responses may take
_SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
# Server tokens of a SaslHandshake v0 exchange (bare tokens, no SaslAuthenticate): after this many the
# mechanism is done and Kafka frames follow. A mechanism not listed keeps the connection in token mode.
_SERVER_TOKENS = {"PLAIN": 1, "SCRAM-SHA-256": 2, "SCRAM-SHA-512": 2, "OAUTHBEARER": 1}


@dataclass
class ProxyConfig:
    listen_host: str = "127.0.0.1"
    listen_port: int = 19092
    upstreams: list[tuple[str, int]] = field(default_factory=list)
    advertised_host: str | None = None  # what clients are told; the listen host by default
    broker_port_base: int | None = None  # node id N listens on base + N; ephemeral ports by default
    upstream_ssl: ssl.SSLContext | None = None
    listen_ssl: ssl.SSLContext | None = None
    max_frame: int = DEFAULT_MAX_FRAME
    max_connections: int = MAX_CONNECTIONS
    stream_min: int = STREAM_MIN  # responses this large go on while they arrive (and are skimmed, see Proxy)
    skim: bool = True  # False: every response decoded whole (``--decode-all``)


def parse_address(text: str, default_port: int = 9092) -> tuple[str, int]:
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default_port
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    return host, int(port)


def _label(ep: tuple[str, int]) -> str:
    host, port = ep
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Proxy:
    def __init__(
        self,
        config: ProxyConfig,
        reporter: Reporter,
        pcap: PcapngWriter | None = None,
        clock: Callable[[], int] = time.time_ns,
    ):
        if not config.upstreams:
            raise ValueError("at least one upstream address is needed")
        self.config = config
        self.reporter = reporter
        self.pcap = pcap
        self.clock = clock
        self.tap = None  # a kafkawire.ui.Tap when the console runs: each pair is published to it as well
        advertised = config.advertised_host or config.listen_host
        self.addresses = AddressMap(advertised, self._bind_broker)
        self._servers: list[asyncio.Server] = []
        self._pending_servers: list[asyncio.Task] = []
        self._sessions: set[asyncio.Task] = set()
        self._ids = 0
        self.port: int | None = None
        self.broker_ports: dict[int, int] = self.addresses.local_port

    @property
    def skimming(self) -> bool:
        """Whether a streamed response may be skimmed (its error codes read as it passes, its records never
        gathered) instead of decoded whole. Everything the proxy reports of a response but ``--annotate``
        and the console's frames comes from its error codes: the summary, the lines and JSON (whose topics
        and summary come from the request, which is decoded whole), the filters (topics are the request's),
        ``--errors-only``; ``--pcap`` writes the bytes forwarded, not the observer's. So a response is
        decoded whole only with ``--annotate`` (the reporter's ``needs_bodies``) or while a browser
        watches the console's live view (the hex and tree of each frame)."""
        if not self.config.skim or self.reporter.needs_bodies:
            return False
        tap = self.tap
        return tap is None or not tap.subscribers

    async def start(self) -> Proxy:
        sock = self._listen_socket(self.config.listen_port)
        self.port = sock.getsockname()[1]
        self._servers.append(await self._serve(sock, None))
        return self

    def _listen_socket(self, port: int) -> socket.socket:
        infos = socket.getaddrinfo(self.config.listen_host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _name, addr = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        return sock

    def _bind_broker(self, node_id: int) -> int:
        """Called while a response is rewritten: bind now (the port goes into that response), serve as soon as the
        loop runs (connections wait in the backlog until then)."""
        base = self.config.broker_port_base
        sock = self._listen_socket(base + node_id if base is not None else 0)
        port = sock.getsockname()[1]
        task = asyncio.get_running_loop().create_task(self._serve_broker(sock, node_id))
        self._pending_servers.append(task)
        return port

    async def _serve_broker(self, sock: socket.socket, node_id: int) -> None:
        self._servers.append(await self._serve(sock, node_id))

    async def _serve(self, sock: socket.socket, node_id: int | None) -> asyncio.Server:
        def accepted(pipe: Pipe) -> None:
            self._accept(pipe, pipe, node_id)

        return await asyncio.get_running_loop().create_server(
            lambda: Pipe(CHUNK, accepted), sock=sock, ssl=self.config.listen_ssl
        )

    async def close(self) -> None:
        for task in self._pending_servers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for server in self._servers:
            server.close()
        for task in list(self._sessions):
            task.cancel()
        if self._sessions:
            await asyncio.gather(*self._sessions, return_exceptions=True)
        for server in self._servers:
            with contextlib.suppress(Exception):
                await server.wait_closed()

    def _accept(self, reader: Pipe, writer: Pipe, node_id: int | None) -> None:
        if len(self._sessions) >= self.config.max_connections:
            peer = writer.get_extra_info("peername") or ("?", 0)
            self.reporter.note(f"{_label(peer[:2])}: refused, {len(self._sessions)} connections already")
            writer.close()
            return
        task = asyncio.get_running_loop().create_task(self._session(reader, writer, node_id))
        self._sessions.add(task)
        task.add_done_callback(self._sessions.discard)

    async def _connect(self, node_id: int | None):
        if node_id is None:
            targets = list(self.config.upstreams)
        else:
            up = self.addresses.target(node_id)
            targets = [(up.host, up.port)] if up is not None else []
        problems = []
        for host, port in targets:
            try:
                _transport, pipe = await asyncio.wait_for(
                    asyncio.get_running_loop().create_connection(
                        lambda: Pipe(CHUNK),
                        host,
                        port,
                        ssl=self.config.upstream_ssl,
                        server_hostname=host if self.config.upstream_ssl else None,
                    ),
                    CONNECT_TIMEOUT,
                )
                return (host, port), pipe, pipe
            except (OSError, TimeoutError, ssl.SSLError) as exc:
                problems.append(f"{_label((host, port))}: {exc}")
        raise ConnectionError("; ".join(problems) or f"no upstream address known for node {node_id}")

    async def _session(self, reader: Pipe, writer: Pipe, node_id: int | None) -> None:
        self._ids += 1
        cid = self._ids
        peer = writer.get_extra_info("peername") or ("?", 0)
        local = writer.get_extra_info("sockname") or ("?", 0)
        self.reporter.connections += 1
        try:
            upstream, ureader, uwriter = await self._connect(node_id)
        except ConnectionError as exc:
            self.reporter.note(f"#{cid} {_label(peer[:2])}: cannot reach upstream: {exc}")
            writer.close()
            return
        _set_nodelay(writer)
        _set_nodelay(uwriter)
        conn = Connection(cid, (str(peer[0]), int(peer[1])), (str(upstream[0]), int(upstream[1])))
        flow = (
            self.pcap.flow((str(peer[0]), int(peer[1])), (str(local[0]), int(local[1])), self.clock())
            if self.pcap is not None
            else None
        )
        session = _Session(self, conn, reader, writer, ureader, uwriter, flow)
        try:
            await session.run()
        finally:
            for w in (writer, uwriter):
                w.close()
            for w in (writer, uwriter):
                with contextlib.suppress(Exception):
                    await w.wait_closed()
            if flow is not None:
                flow.close(self.clock())


def _set_nodelay(writer: Pipe) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Session:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: Proxy, conn: Connection, reader, writer, ureader, uwriter, flow: Flow | None):
        self.proxy = proxy
        self.conn = conn
        self.reader, self.writer = reader, writer
        self.ureader, self.uwriter = ureader, uwriter
        self.flow = flow
        self.observer = ProtocolConnection(Role.OBSERVER, max_frame=proxy.config.max_frame, skim=self._skim)
        self.requests: dict[int, tuple[int, bytes | bytearray]] = {}  # correlation id -> (time read, payload)
        self.sasl_mechanism: dict[int, str] = {}  # correlation id of a SaslHandshake v0 -> mechanism
        self.server_tokens_left: int | None = None
        self.to_client: list[bytes] = []
        self.closing: str | None = None
        self.streamed: dict[int, int] = {}  # correlation id -> bytes of its frame held back (the tail)
        self.skimmed: set[int] = set()  # correlation ids of streamed responses the observer skims
        self.responses = _Frames(self._stream_decision, proxy.config.max_frame)
        # requests go upstream as they arrive anyway: a large one is only gathered for the observer
        self.requests_in = _Frames(
            lambda _corr, size: (0, True) if size >= STREAM_MIN else None, proxy.config.max_frame
        )

    async def run(self) -> None:
        up = asyncio.ensure_future(self._client_to_upstream())
        down = asyncio.ensure_future(self._upstream_to_client())
        try:
            done, _ = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
            if up in done and down not in done and self.closing is None:
                # the client is done sending: its last answers may still come, for a while
                await asyncio.wait({down}, timeout=LINGER)
        finally:
            for task in (up, down):
                task.cancel()
            await asyncio.gather(up, down, return_exceptions=True)
            for ex in self._unanswered():
                self._report(ex)
            if self.closing:
                self.proxy.reporter.note(f"{self.conn.label}: {self.closing}")

    def _report(self, ex: Exchange) -> None:
        """Describing is best effort: bytes that break a describer must not break the connection."""
        tap = self.proxy.tap
        if tap is not None:  # before the reporter describes: the console describes on its own, later
            tap.publish(
                ex.connection,
                ex.request_payload,
                ex.response_payload,
                time_ns=ex.time_ns,
                latency_ns=ex.latency_ns,
                api_key=ex.api_key,
                api_version=ex.api_version,
                correlation_id=ex.correlation_id,
                problem=ex.problem,
                rewritten=ex.rewritten,
                skim=ex.skim,
            )
        try:
            self.proxy.reporter.exchange(ex)
        except Exception as exc:  # any peer input that trips the describer: report, go on
            self.proxy.reporter.note(
                f"{self.conn.label}: {ex.api_name} corr={ex.correlation_id} not described: {type(exc).__name__}: {exc}"
            )

    def _unanswered(self) -> list[Exchange]:
        out = []
        for corr, (t, payload) in self.requests.items():
            key, version = (int.from_bytes(payload[0:2], "big", signed=True), int.from_bytes(payload[2:4], "big"))
            out.append(
                Exchange(
                    t,
                    self.conn,
                    key,
                    version,
                    corr,
                    request_payload=payload,
                    problem="no response before the connection closed",
                )
            )
        self.requests.clear()
        return out

    # -- client -> upstream: the bytes go on at once, the observer reads them after
    async def _client_to_upstream(self) -> None:
        reader, uwriter, observer = self.reader, self.uwriter, self.observer
        flow = self.flow
        try:
            while True:
                chunks = await reader.read_chunks()
                if not chunks:
                    observer.receive_eof(from_client=True)
                    self._events()
                    if uwriter.can_write_eof():
                        uwriter.write_eof()
                    return
                uwriter.writelines(chunks)
                for data in chunks:
                    if flow is not None:
                        flow.data(True, data, self.proxy.clock())
                    for piece, _sent in self.requests_in.split(data):
                        if piece:
                            observer.receive_data(piece, from_client=True)
                            self._events()
                            if self.closing:
                                return
                await uwriter.drain()
        except (ConnectionError, OSError, ssl.SSLError) as exc:
            self.closing = self.closing or f"client connection failed: {exc}"

    # -- upstream -> client: frame by frame, rewritten where they carry broker addresses
    async def _upstream_to_client(self) -> None:
        ureader, writer, observer = self.ureader, self.writer, self.observer
        flow = self.flow
        frames = self.responses
        try:
            while True:
                chunks = await ureader.read_chunks()
                if not chunks:
                    observer.receive_eof(from_client=False)
                    self._events()
                    self._flush(writer, flow)
                    return
                wrote = False
                # piece by piece: a streamed frame's bytes go out after every frame completed before them
                for data in chunks:
                    for piece, forward in frames.split(data):
                        if forward:
                            self._flush(writer, flow)
                            writer.write(forward)
                            if flow is not None:
                                flow.data(False, bytes(forward), self.proxy.clock())
                            wrote = True
                        if piece:
                            observer.receive_data(piece, from_client=False)
                            self._events()
                        if self.closing:
                            break
                    if self.closing:
                        break
                if self.to_client:
                    self._flush(writer, flow)
                    wrote = True
                if wrote:
                    await writer.drain()
                if self.closing:
                    return
        except (ConnectionError, OSError, ssl.SSLError) as exc:
            self.closing = self.closing or f"upstream connection failed: {exc}"

    def _stream_decision(self, correlation_id: int, size: int) -> tuple[int, bool] | None:
        """Called by :class:`_Frames` when a response frame's size and correlation id are in: the
        bytes of it to hold back until it is whole (0: none) and whether the observer needs it whole (False:
        it skims it), or None to hold it all (not streamed)."""
        if size < self.proxy.config.stream_min or self.observer.sasl_tokens or self.server_tokens_left is not None:
            return None
        pending = self.requests.get(correlation_id)
        if pending is None or correlation_id in self.sasl_mechanism:
            return None
        payload = pending[1]
        key, version = int.from_bytes(payload[0:2], "big", signed=True), int.from_bytes(payload[2:4], "big")
        if not rewrites(key, version):
            held = 0
        elif endpoints_in_tail(key, version):
            held = min(TAIL_HELD, size - 4)
        else:
            return None
        self.streamed[correlation_id] = held
        if self.proxy.skimming:
            self.skimmed.add(correlation_id)
            return held, False
        return held, True

    def _skim(self, _api_key: int, _api_version: int, correlation_id: int, _size: int) -> bool:
        """The observer asks, at the same frame start where :meth:`_stream_decision` was asked."""
        return correlation_id in self.skimmed

    def _flush(self, writer, flow: Flow | None) -> None:
        out, self.to_client = self.to_client, []
        if not out:
            return
        writer.writelines(out)
        if flow is not None:
            flow.data(False, b"".join(out), self.proxy.clock())

    # -- events of both directions, taken right after each feed (so each pump gets those of its own bytes)
    def _events(self) -> None:
        observer = self.observer
        while True:
            event = observer.next_event()
            kind = type(event)
            if kind is NeedData or kind is StreamEnded:
                return
            if kind is RequestReceived:
                self._request(event)
            elif kind is ResponseReceived:
                self._response(event)
            elif kind is SaslTokenReceived:
                self._token(event)
            elif kind is ProtocolViolation:
                self._violation(event)
                if event.fatal:
                    return

    def _request(self, event: RequestReceived) -> None:
        now = self.proxy.clock()
        payload = event.payload  # the observer's own copy: kept as it is, not copied again
        if not event.expects_response:
            self._report(
                Exchange(
                    now, self.conn, event.api_key, event.api_version, event.correlation_id, request_payload=payload
                )
            )
            return
        if len(self.requests) >= MAX_IN_FLIGHT:
            self.closing = f"more than {MAX_IN_FLIGHT} requests unanswered: connection closed"
            return
        self.requests[event.correlation_id] = (now, payload)
        if event.api_key == _SASL_HANDSHAKE and event.api_version == 0:
            try:
                self.sasl_mechanism[event.correlation_id] = event.decode().body.mechanism  # type: ignore[attr-defined]
            except (ProtocolError, KeyError):
                pass

    def _response(self, event: ResponseReceived) -> None:
        if event.skim is not None:
            self._skimmed_response(event, event.skim)
            return
        now = self.proxy.clock()
        payload = event.payload
        ex_time, request = self.requests.pop(event.correlation_id, (now, b""))
        ex = Exchange(
            ex_time,
            self.conn,
            event.api_key,
            event.api_version,
            event.correlation_id,
            request_payload=request,
            latency_ns=now - ex_time,
        )
        try:
            rewrite = rewrite_response(event.api_key, event.api_version, payload, self.proxy.addresses)
        except TooManyBrokers as exc:
            ex.problem = f"response not rewritten: {exc}"
            rewrite = None
        except Exception as exc:  # a body that does not decode or re-encode goes on untouched
            ex.problem = f"response not rewritten, forwarded as received: {type(exc).__name__}: {exc}"
            rewrite = None
        held = self.streamed.pop(event.correlation_id, None)
        if held is not None:  # its first bytes went on as they came: the held tail goes now
            tail = payload[len(payload) - held :] if held else b""
            if rewrite is not None:
                tail = self._withdraw(event, payload, held, ex)
            if tail:
                self.to_client.append(tail)
        else:
            if rewrite is not None:
                ex.rewritten = rewrite.changed
                payload = rewrite.payload
            self.to_client += (frame_size_prefix(len(payload)), payload)  # two buffers, one writelines
        ex.response_payload = payload
        mechanism = self.sasl_mechanism.pop(event.correlation_id, None)
        if mechanism is not None and len(payload) >= 6 and payload[4:6] == b"\0\0":  # error_code 0
            self.observer.start_sasl_tokens()  # SaslHandshake v0 accepted: bare tokens follow
            self.server_tokens_left = _SERVER_TOKENS.get(mechanism.upper())
        self._report(ex)

    def _skimmed_response(self, event: ResponseReceived, skim: Skim) -> None:
        """A streamed response the observer skimmed: its bytes went on as they came but for the held tail,
        which :class:`_Frames` kept; its NodeEndpoints (if any) are found from the tagged fields' offsets."""
        now = self.proxy.clock()
        corr = event.correlation_id
        self.skimmed.discard(corr)
        ex_time, request = self.requests.pop(corr, (now, b""))
        ex = Exchange(
            ex_time,
            self.conn,
            event.api_key,
            event.api_version,
            corr,
            request_payload=request,
            latency_ns=now - ex_time,
            skim=skim,
        )
        held = self.streamed.pop(corr, 0)
        tail = self.responses.tails.pop(corr, b"")
        endpoints = [t for t in skim.tags if t[0] == 0 and t[2] > 1]  # tag 0 with at least one node
        if endpoints and endpoints_in_tail(event.api_key, event.api_version):
            if skim.problem or len(skim.tags) != 1:
                self.closing = "a streamed response's broker addresses cannot be rewritten: connection closed"
                ex.problem = f"{self.closing} ({skim.problem or 'tagged fields other than NodeEndpoints'})"
                tail = b""
            else:
                tail = self._withdraw_skimmed(event, skim, tail, held, endpoints[0][1], ex)
        if tail:
            self.to_client.append(tail)
        self._report(ex)

    def _withdraw_skimmed(self, event: ResponseReceived, skim: Skim, tail, held: int, at: int, ex: Exchange) -> bytes:
        """The held tail of a skimmed response that names brokers: the proxy learns them (a local port for
        each, ready for the client's metadata refresh) and withdraws the hint, as :meth:`_withdraw` does."""
        start = skim.size - held
        if at - 1 < start:  # the tagged fields' count (one byte: one field) must be in the tail too
            return self._rename_tag(tail, skim.size, held, at, ex)
        try:
            for node in tail_endpoints(event.api_key, event.api_version, tail[at - 1 - start :]):
                self.proxy.addresses.learn(node.node_id, node.host, node.port)
        except Exception as exc:  # cannot be read: the client must not be misled
            self.closing = f"a streamed response's broker addresses cannot be rewritten ({exc}): connection closed"
            ex.problem = self.closing
            return b""
        return self._rename_tag(tail, skim.size, held, at, ex)

    def _rename_tag(self, tail, size: int, held: int, at: int, ex: Exchange) -> bytes:
        """The held tail with the tag number at payload offset ``at`` renamed (see :meth:`_withdraw`)."""
        start = size - held
        if at < start:
            self.closing = "a streamed response's broker addresses begin before its held tail: connection closed"
            ex.problem = self.closing
            return b""
        out = bytearray(tail)
        out[at - start] = WITHDRAWN_TAG
        ex.problem = "NodeEndpoints withdrawn (the response was streamed): the client refreshes its metadata"
        return bytes(out)

    def _withdraw(self, event: ResponseReceived, payload, held: int, ex: Exchange) -> bytes:
        """The held tail of a streamed response whose NodeEndpoints needed rewriting, with them withdrawn."""
        try:
            at = withdraw_node_endpoints(event.api_key, event.api_version, payload)
        except Exception as exc:  # cannot be made right at the same length: the client must not be misled
            self.closing = f"a streamed response's broker addresses cannot be rewritten ({exc}): connection closed"
            ex.problem = self.closing
            return b""
        return self._rename_tag(payload[len(payload) - held :], len(payload), held, at, ex)

    def _token(self, event: SaslTokenReceived) -> None:
        self.proxy.reporter.sasl_tokens += 1
        if event.from_client:
            return  # already forwarded as it came
        self.to_client += (frame_size_prefix(len(event.token)), event.token)
        if self.server_tokens_left is not None:
            self.server_tokens_left -= 1
            if self.server_tokens_left <= 0:
                self.server_tokens_left = None
                self.observer.end_sasl_tokens()

    def _violation(self, event: ProtocolViolation) -> None:
        who = "client" if event.from_client else "upstream"
        payload = event.payload
        if not event.fatal and not event.from_client and payload:
            # framed, but answering nothing known or too short to say: goes on as it came
            self.to_client += (frame_size_prefix(len(payload)), bytes(payload))
        self._report(
            Exchange(
                self.proxy.clock(),
                self.conn,
                None,
                None,
                event.correlation_id,
                problem=f"{who}: {event.message} (stream offset {event.offset})"
                + ("; connection closed" if event.fatal else "; forwarded"),
            )
        )
        if event.fatal:
            self.closing = f"{who} broke the framing: {event.message}"


class _Frames:
    """Where each frame starts and ends in one direction's byte stream, so that a large response can be
    forwarded while it arrives, and a large frame either way reaches the observer in one piece. ``split(data)`` yields (piece, bytes to forward now) in stream order; the
    caller feeds each piece to the observer after forwarding, so the decision for a frame (``decide``,
    called once its size and correlation id are in) sees every event of the frames before it. Framing
    problems are the observer's to report: a size out of bounds stops streaming for the connection.

    ``decide`` answers None (not streamed: the pieces go to the observer, which gathers the frame) or (bytes
    held back, whole): ``whole`` gathers the frame here for the observer; otherwise (the observer skims it)
    only the held tail is kept, in ``tails[correlation id]`` once the frame is complete."""

    __slots__ = ("decide", "max_frame", "head", "left", "forward", "broken", "body", "filled", "tail", "corr", "tails")

    def __init__(self, decide: Callable[[int, int], tuple[int, bool] | None], max_frame: int):
        self.decide = decide
        self.max_frame = max_frame
        self.head = bytearray()  # the first 8 bytes of the frame (size, correlation id) while they come
        self.left = 0  # bytes of the current frame not yet seen (after its head)
        self.forward = 0  # of those, how many go on as they come
        self.broken = False
        # a streamed frame's bytes after its head, gathered here and given to the observer whole: one copy
        # into a buffer of the right size, where feeding them piece by piece would regrow the observer's
        self.body: bytearray | None = None
        self.filled = 0
        self.tail: bytearray | None = None  # a skimmed frame's held tail while it comes
        self.corr = 0
        self.tails: dict[int, bytearray] = {}

    def split(self, data):
        if self.broken:
            yield data, b""
            return
        view = memoryview(data)
        pos, n = 0, len(view)
        while pos < n:
            if self.left == 0 and len(self.head) < 8:
                take = view[pos : pos + 8 - len(self.head)]
                self.head += take
                pos += len(take)
                if len(self.head) < 8:
                    yield take, b""
                    return
                size = int.from_bytes(self.head[0:4], "big", signed=True)
                if size < 4 or size > self.max_frame:
                    self.broken = True
                    yield bytes(take), b""
                    yield view[pos:], b""
                    return
                self.corr = int.from_bytes(self.head[4:8], "big", signed=True)
                decision = self.decide(self.corr, size)
                self.left = size - 4
                self.tail = None
                if decision is None:
                    self.forward = 0
                    head_out = b""
                else:
                    held, whole = decision
                    self.forward = size + 4 - held - 8
                    head_out = bytes(self.head)
                    if whole and self.left:
                        self.body, self.filled = bytearray(self.left), 0
                    else:
                        self.tail = bytearray()
                self.head.clear()
                if self.left == 0 and self.tail is not None:
                    self.tails[self.corr], self.tail = self.tail, None
                yield take, head_out
                if self.left == 0:
                    continue
            take = view[pos : pos + self.left]
            pos += len(take)
            self.left -= len(take)
            out = b""
            if self.forward > 0:
                out = take[: self.forward]
                self.forward -= len(out)
            body = self.body
            if body is None:
                tail = self.tail
                if tail is not None:
                    if len(out) < len(take):
                        tail += take[len(out) :]
                    if not self.left:
                        self.tails[self.corr] = tail
                        self.tail = None
                yield take, out
                continue
            body[self.filled : self.filled + len(take)] = take
            self.filled += len(take)
            if self.left:
                yield b"", out
            else:
                self.body = None
                yield body, out


__all__ = ["CHUNK", "DEFAULT_MAX_FRAME", "Proxy", "ProxyConfig", "parse_address", "api_name"]
