"""asyncio shell for a Kafka server: requests in, responses out in request order.

A ``FramedServer`` accepts connections and, per connection, feeds the bytes to
the server side of a ``kafkawire.protocol.connection.ProtocolConnection``,
which splits them into frames (rejecting a size above ``max_frame`` before
buffering it); each request's payload goes to ``handler(payload, connection)``
and the server writes the
results back in the order the requests arrived, however many are in flight
(pipelining). Memory for requests is bounded across connections: a frame's
whole size is reserved from ``max_queued_bytes`` (Kafka's
``queued.max.request.bytes``) when its size prefix arrives and released once its
request is answered; a connection whose next frame finds the budget spent stops
being read until other requests free it (as Kafka mutes channels when its
memory pool is empty). A frame is let in whenever anything is left of the
budget, so one larger than it still goes through alone. The handler returns:

- a list of buffers (written with ``transport.writelines``, nothing joined); a
  buffer may also be a file range (an object with ``fileno()``, ``position``,
  ``len()`` and ``view()`` or ``tobytes()``, as the broker's stored segments
  give), which a plaintext connection sends with ``os.sendfile`` (see
  ``_send_direct``) and a TLS one maps into memory,
- ``None`` when the request gets no response (Kafka's acks=0 produce),
- an awaitable resolving to either of those (long polls, slow storage),

or raises ``CloseConnection`` to drop the connection (after the responses to
earlier requests are written), as Kafka does for a request it cannot parse. A
handler that answers and then wants the connection closed (a failed SASL login)
calls ``connection.close_after_response(reason)`` before returning.

Security (one ``FramedServer`` per listener): ``ssl_context`` makes it a TLS
listener (the handshake completes before ``connection_made``); ``security``, when
given, is told of each new connection (``connection_made(conn)``, which may
require authentication on ``conn.protocol``) and receives the bare SASL tokens
of SaslHandshake v0 (``token_received(token, conn)``, answered like a request).
A request the protocol connection refuses before authentication closes the
connection, as Kafka does.
"""

from __future__ import annotations

import asyncio
import errno
import inspect
import itertools
import logging
import os
import socket
import time
from collections import deque

from kafkawire.protocol.connection import (
    NeedData,
    ProtocolConnection,
    ProtocolViolation,
    RequestReceived,
    Role,
    SaslTokenReceived,
    Violation,
)

from . import malloc
from .tls import tls_protocol_factory

log = logging.getLogger("kafkawire.net")
TLS_HANDSHAKE_TIMEOUT = 10.0  # seconds a TLS client has to finish its handshake

_SIZE_VIOLATIONS = (Violation.NEGATIVE_SIZE, Violation.FRAME_TOO_LARGE)
MAX_IN_FLIGHT = 256
COALESCE_BELOW = (
    16 * 1024
)  # response pieces smaller than this are joined before writing  # requests buffered per connection before reading pauses
# file ranges shorter than this are read into memory and written with the rest (a sendfile call costs more
# than copying a few pages)
SENDFILE_MIN = 32 * 1024
READ_BUFFER_BYTES = 256 * 1024  # the most one read takes when it does not go straight into a request
_IOV_MAX = 1024  # buffers per writev call (Linux's IOV_MAX)
_BYTES_TYPES = (bytes, bytearray, memoryview)
_ids = itertools.count(1)


def _is_file_range(buf) -> bool:
    return type(buf) not in _BYTES_TYPES and hasattr(buf, "fileno") and hasattr(buf, "position")


def _in_memory(region):
    """A file range as a buffer for the transport: mapped (``view()``, no copy) where it can be, else read."""
    view = getattr(region, "view", None)
    return view() if view is not None else region.tobytes()


class CloseConnection(Exception):
    """Raised by a handler: close this connection; the message says why (it is logged)."""


class _Slot:
    __slots__ = ("done", "buffers", "close_reason", "close_delay", "reserved")

    def __init__(self, reserved: int = 0):
        self.done = False
        self.buffers = None
        self.close_reason = None
        self.close_delay = 0.0  # seconds between writing the answer and closing
        self.reserved = reserved  # request bytes counted in the server's budget until answered


class Connection(asyncio.BufferedProtocol):
    def __init__(self, server: FramedServer):
        self.server = server
        self.id = next(_ids)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.closed = False
        self.close_reason: str | None = None
        self.close_kind: str | None = None  # why it closed, one of a few words (counted by FramedServer)
        self.protocol = ProtocolConnection(Role.SERVER, max_frame=server.max_frame)
        self._held: RequestReceived | None = None  # a whole request waiting for room in the memory budget
        self._slots: deque[_Slot] = deque()
        self._reading_paused = False
        self._writing_paused = False
        self._closing_after: _Slot | None = None
        self._tasks: set[asyncio.Task] = set()
        self._out: list = []  # buffers of finished responses not yet handed to the transport
        self._receiving = False
        self._frame_reserved = 0  # budget held for the frame being received
        self._waiting_memory = False  # reading paused until the budget has room
        self.last_active = time.monotonic()
        self.attributes: dict = {}  # per-connection state handlers may keep (e.g. SASL, client software)
        self._close_requested: str | None = None  # close_after_response() during the handler's call
        self._close_delay = 0.0
        # the socket's descriptor when file ranges may go out with os.sendfile (plaintext), else None
        self.sendfile_fd: int | None = None
        self._direct = False  # the last get_buffer() gave the direct buffer of a large request

    # -- asyncio.Protocol ---------------------------------------------------
    def connection_made(self, transport):
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            if self.server.ssl_context is None and hasattr(os, "sendfile"):
                try:
                    self.sendfile_fd = sock.fileno()
                except (AttributeError, OSError):
                    self.sendfile_fd = None
        self.server._connections.add(self)
        self.server.connections_opened += 1
        log.info(
            "connection %d from %s opened%s",
            self.id,
            self.peer,
            f" on listener {self.server.name}" if self.server.name else "",
        )
        if self.server.security is not None:
            try:
                self.server.security.connection_made(self)
            except CloseConnection as exc:
                self.abort(str(exc), kind="authentication")

    def connection_lost(self, exc):
        self.closed = True
        self.server._connections.discard(self)
        for task in list(self._tasks):
            task.cancel()
        self._release_all()
        reason = self.close_reason or (f"error: {exc}" if exc else "closed by peer")
        kind = self.close_kind or ("io_error" if exc else "peer")
        closed = self.server.connections_closed
        closed[kind] = closed.get(kind, 0) + 1
        log.info("connection %d from %s closed (%s)", self.id, self.peer, reason)
        for cb in self.server.on_connection_closed:
            try:
                cb(self)
            except Exception:  # pragma: no cover - callbacks must not break the loop
                log.exception("connection close callback failed")

    def pause_writing(self):
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self):
        self._writing_paused = False
        self._update_reading()

    # Read as a BufferedProtocol: into the server's scratch buffer, copied once into the stream's buffer, or,
    # for the rest of a large request whose size prefix is in and whose memory is reserved, straight into the
    # buffer the handler gets (ProtocolConnection.direct_buffer).
    def get_buffer(self, sizehint):
        if self._frame_reserved and not self.closed:
            view = self.protocol.direct_buffer()
            if view is not None:
                self._direct = True
                return view
        self._direct = False
        return self.server._scratch_view

    def buffer_updated(self, nbytes):
        if self.closed or self._closing_after is not None:
            return
        self.server.bytes_received += nbytes
        self.last_active = time.monotonic()
        if self._direct:
            if self.protocol.direct_received(nbytes):
                # whole: handled once this read is over, when the loop no longer holds the buffer it read into
                # (a handler may then do anything with the payload, resizing included)
                asyncio.get_running_loop().call_soon(self._process_later)
            return
        self.protocol.receive_data(self.server._scratch_view[:nbytes])
        self._process()

    def _process_later(self) -> None:
        if not self.closed and self._closing_after is None and not self._waiting_memory:
            self._process()

    def _process(self) -> None:
        """Handle every whole request buffered (each payload a writable copy: handlers may patch records in
        place), reserving each frame's size from the memory budget as soon as its size prefix is in."""
        next_event = self.protocol.next_event
        server = self.server
        self._receiving = True  # responses made while reading are written once, at the end
        while not self.closed and self._closing_after is None:
            if self._held is None:
                event = next_event()
            else:
                event, self._held = self._held, None
            kind = type(event)
            if kind is RequestReceived:
                payload = event.payload
                reserved = self._frame_reserved
                if reserved:
                    self._frame_reserved = 0
                else:
                    reserved = len(payload) + 4
                    if reserved > malloc.LARGE and malloc.tuned is None:
                        malloc.keep_large_buffers()
                    if not server._reserve(reserved):
                        self._held = event
                        self._wait_for_memory()
                        break
                self._handle(payload, reserved)
            elif kind is NeedData:
                size = event.frame_size
                if size is not None:
                    if not self._frame_reserved:
                        self._reserve(size + 4)
                    if size >= malloc.LARGE and malloc.tuned is None:
                        malloc.keep_large_buffers()  # before the frame's buffers are allocated (net/malloc.py)
                break
            elif kind is SaslTokenReceived:
                self._handle(event.token, 0, self.server.security.token_received)
            elif kind is ProtocolViolation:
                if event.kind in _SIZE_VIOLATIONS:
                    limit = (
                        "socket.request.max.bytes"
                        if self.protocol.max_frame == server.max_frame
                        else "sasl.server.max.receive.size, before authentication"
                    )
                    self.abort(f"{event.message} ({limit})", kind="frame_too_large")
                    return
                if event.fatal:  # a request before authentication: Kafka closes without an answer
                    self.abort(event.message, kind="authentication")
                    return
                # a request too short for its header prefix: the handler says why it cannot answer it
                self._handle(event.payload, 0)
            else:  # pragma: no cover - a server connection makes no other events
                raise AssertionError(f"unexpected {event!r}")
        self._receiving = False
        self._write_out()
        self._update_reading()

    def _reserve(self, n: int) -> bool:
        """Take ``n`` bytes of the server's budget for the frame being received; if there is no room, stop
        reading until there is."""
        if self.server._reserve(n):
            self._frame_reserved = n
            return True
        self._wait_for_memory()
        return False

    def _wait_for_memory(self) -> None:
        self._waiting_memory = True
        self.server._memory_waiters.append(self)

    def eof_received(self):
        return False  # close our side too

    # -- request handling ---------------------------------------------------
    def _memory_available(self) -> None:
        """The server's budget has room again: read on (the frames already buffered first)."""
        self._waiting_memory = False
        if self.closed:
            return
        self._update_reading()
        if self._closing_after is None:
            self._process()

    def _answered(self, slot: _Slot) -> None:
        if slot.reserved:
            reserved, slot.reserved = slot.reserved, 0
            self.server._release(reserved)

    def _release_all(self) -> None:
        if self._frame_reserved:
            reserved, self._frame_reserved = self._frame_reserved, 0
            self.server._release(reserved)
        for slot in self._slots:
            self._answered(slot)
        self._held = None

    def close_after_response(self, reason: str, delay: float = 0.0) -> None:
        """Called by a handler: write its answer (and those before it), then close, ``delay`` seconds later
        (Kafka's delayed close after a failed login); nothing after it is read."""
        self._close_requested = reason
        self._close_delay = delay

    def _handle(self, payload: bytes, reserved: int = 0, handler=None) -> None:
        # A request gets a slot (its place in the answer order) only when earlier ones are still unanswered or
        # its own answer is not ready yet; a synchronous answer with nothing in flight (the common case) goes
        # straight to the output.
        slot = self._slot(reserved) if self._slots else None
        try:
            result = (handler or self.server.handler)(payload, self)
        except CloseConnection as exc:
            self._close_at(slot or self._slot(reserved), str(exc))
            return
        except Exception as exc:  # handler bug: drop the connection, keep the server
            log.exception("connection %d from %s: request handler failed", self.id, self.peer)
            self._close_at(
                slot or self._slot(reserved), f"internal error: {type(exc).__name__}: {exc}", "internal_error"
            )
            return
        if self._close_requested is not None:
            self._answer_then_close(slot or self._slot(reserved), result)
            return
        if result is not None and type(result) is not list and inspect.isawaitable(result):  # lists: no inspect
            slot = slot or self._slot(reserved)
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            task.add_done_callback(lambda t, s=slot: self._finished(t, s))
        elif slot is None:
            if reserved:
                self.server._release(reserved)
            if result and not self.closed:
                self._out.extend(result)
            self._flush()
        else:
            slot.done = True
            slot.buffers = result
            self._answered(slot)
            self._flush()

    def _answer_then_close(self, slot: _Slot, result) -> None:
        reason, self._close_requested = self._close_requested, None
        if self.close_kind is None:
            self.close_kind = "authentication"
        slot.close_reason = reason
        slot.close_delay = self._close_delay
        self._closing_after = slot  # read nothing more
        if result is not None and type(result) is not list and inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            task.add_done_callback(lambda t, s=slot: self._finished(t, s))
            return
        slot.done = True
        slot.buffers = result
        self._answered(slot)
        self._flush()

    def _slot(self, reserved: int) -> _Slot:
        slot = _Slot(reserved)
        self._slots.append(slot)
        return slot

    def _finished(self, task: asyncio.Task, slot: _Slot) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            self._answered(slot)
            return
        exc = task.exception()
        if isinstance(exc, CloseConnection):
            self._close_at(slot, str(exc))
            return
        if exc is not None:
            log.error("connection %d from %s: request handler failed", self.id, self.peer, exc_info=exc)
            self._close_at(slot, f"internal error: {type(exc).__name__}: {exc}", "internal_error")
            return
        slot.done = True
        slot.buffers = task.result()
        self._answered(slot)
        self._flush()

    def _close_at(self, slot: _Slot, reason: str, kind: str = "request_error") -> None:
        if self.close_kind is None:
            self.close_kind = kind
        self._answered(slot)
        slot.done = True
        slot.close_reason = reason
        self._closing_after = slot
        self._flush()

    def _flush(self) -> None:
        slots = self._slots
        out = self._out
        while slots and slots[0].done:
            slot = slots.popleft()
            if slot.close_reason is not None:
                if slot.buffers and not self.closed:  # the answer that comes before the close (a failed login)
                    out.extend(slot.buffers)
                self._write_out()
                if slot.close_delay > 0:
                    asyncio.get_running_loop().call_later(slot.close_delay, self.abort, slot.close_reason, True)
                    return
                self.abort(slot.close_reason, graceful=True)
                return
            if slot.buffers and not self.closed:
                out.extend(slot.buffers)
        if not self._receiving:
            self._write_out()
            self._update_reading()
        elif len(out) > 256:
            self._write_out()
        # else: _process writes and updates reading once it has handled every buffered request

    @property
    def sendfile(self) -> bool:
        """Whether file ranges in responses go out with ``os.sendfile`` (plaintext connections)."""
        return self.sendfile_fd is not None

    def _write_out(self) -> None:
        """Hand pending response buffers to the transport: small pieces joined (fewer, larger writes), large
        ones (stored record batches) passed as they are; file ranges sent from their file (``_send_direct``)
        or read into memory."""
        out = self._out
        if not out or self.closed or self.transport is None:
            out.clear()
            return
        self._out = []
        self.last_active = time.monotonic()
        ranges = [i for i, b in enumerate(out) if type(b) not in _BYTES_TYPES and _is_file_range(b)]
        if ranges:
            if self.sendfile_fd is not None and self.transport.get_write_buffer_size() == 0:
                out = self._send_direct(out)
                if not out or self.closed:
                    return
            for i, b in enumerate(out):
                if type(b) not in _BYTES_TYPES and _is_file_range(b):
                    out[i] = _in_memory(b)
        if len(out) == 1:
            self.server.bytes_sent += len(out[0])
            self.transport.write(out[0])
            return
        merged, small = [], []
        sent = 0
        for b in out:
            n = len(b)
            sent += n
            if n < COALESCE_BELOW:
                small.append(b)
            else:
                if small:
                    merged.append(b"".join(small) if len(small) > 1 else small[0])
                    small = []
                merged.append(b)
        if small:
            merged.append(b"".join(small) if len(small) > 1 else small[0])
        self.server.bytes_sent += sent
        if len(merged) == 1:
            self.transport.write(merged[0])
        else:
            self.transport.writelines(merged)

    def _send_direct(self, out: list) -> list:
        """Write ``out`` straight to the socket while the kernel takes it: bytes with ``writev``, long file
        ranges with ``os.sendfile`` (page cache to socket, no copy through Python); returns what is left,
        for the transport to buffer. Only called when the transport's buffer is empty, so nothing it holds
        can be overtaken; once the socket is full the rest goes through the transport as usual.

        The bytes are counted as sent (``bytes_sent``) before they are written, and what was not written taken
        off again: a client can read a response as soon as the kernel takes it, and a metrics scrape from
        another thread after that read must count it (the transport path counts before writing too)."""
        fd = self.sendfile_fd
        pending: list = []  # bytes not yet written, in order
        sent = 0
        expected = sum(map(len, out))
        self.server.bytes_sent += expected
        try:
            for k, b in enumerate(out):
                if type(b) in _BYTES_TYPES or not _is_file_range(b):
                    pending.append(b)
                    continue
                if len(b) < SENDFILE_MIN:
                    pending.append(_in_memory(b))
                    continue
                if pending:
                    n, left = _writev_all(fd, pending)
                    sent += n
                    if left:
                        return left + out[k:]
                    pending = []
                position, length = b.position, len(b)
                done = 0
                while done < length:
                    try:
                        n = os.sendfile(fd, b.fileno(), position + done, length - done)
                    except BlockingIOError:
                        break
                    if n == 0:
                        break
                    done += n
                sent += done
                if done < length:  # the socket is full: the rest of the range as bytes, after it the rest
                    return [_in_memory(b)[done:], *out[k + 1 :]]
            if pending:
                n, left = _writev_all(fd, pending)
                sent += n
                return left
            return []
        except OSError as exc:
            kind = "peer" if exc.errno in (errno.EPIPE, errno.ECONNRESET) else "io_error"
            self.abort(f"sending a response failed: {exc}", kind=kind)
            return []
        finally:  # what was not written here: the transport path counts what it is then handed
            self.server.bytes_sent -= expected - sent

    def _update_reading(self) -> None:
        if self.closed or self.transport is None:
            return
        should_pause = self._writing_paused or len(self._slots) >= MAX_IN_FLIGHT or self._waiting_memory
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    # -- closing ------------------------------------------------------------
    def abort(self, reason: str, graceful: bool = False, kind: str | None = None) -> None:
        """Close the connection; ``reason`` goes to the log, ``kind`` (a word) to the close counts."""
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        if self.close_kind is None:
            self.close_kind = kind or "other"
        log.warning("connection %d from %s: closing: %s", self.id, self.peer, reason)
        for task in list(self._tasks):
            task.cancel()
        self._release_all()
        if self.transport is not None:
            if graceful:
                self.transport.close()  # written responses still go out
            else:
                self.transport.abort()


def _writev_all(fd: int, buffers: list) -> tuple[int, list]:
    """``os.writev`` until done or the socket is full: (bytes written, the buffers not written)."""
    written_total = 0
    views = buffers
    while views:
        try:
            n = os.writev(fd, views[:_IOV_MAX])
        except BlockingIOError:
            return written_total, views
        written_total += n
        i = 0
        while i < len(views) and n >= len(views[i]):
            n -= len(views[i])
            i += 1
        views = views[i:]
        if n:
            views[0] = memoryview(views[0])[n:]
            return written_total, views  # a short write: the socket is full
    return written_total, []


class FramedServer:
    def __init__(
        self,
        handler,
        host: str,
        port: int,
        *,
        max_frame: int,
        backlog: int = 1024,
        idle_timeout: float | None = None,
        max_queued_bytes: int = -1,
        ssl_context=None,
        security=None,
        name: str = "",
    ):
        self.handler = handler
        self.ssl_context = ssl_context  # an ssl.SSLContext: a TLS listener
        self.security = security  # see the module docstring
        self.name = name  # the listener's name, for the logs
        self.max_queued_bytes = max_queued_bytes  # -1: no limit
        self.queued_bytes = 0  # reserved by frames being received and requests not yet answered
        self._memory_waiters: deque[Connection] = deque()
        self.idle_timeout = idle_timeout  # seconds; Kafka's connections.max.idle.ms
        self._reaper: asyncio.Task | None = None
        self.host = host
        self.port = port
        self.max_frame = max_frame
        self.backlog = backlog
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[Connection] = set()
        self.on_connection_closed: list = []
        # traffic counts, plain ints kept on the event loop (read by the broker's metrics at scrape time)
        self.connections_opened = 0
        self.connections_closed: dict[str, int] = {}  # close kind -> connections
        self.bytes_received = 0
        self.bytes_sent = 0
        # what every connection of this listener reads into (Connection.get_buffer) and copies out of at once:
        # its loop reads one connection at a time, so one buffer serves them all (not one per connection)
        self._scratch_view = memoryview(bytearray(READ_BUFFER_BYTES))

    def _reserve(self, n: int) -> bool:
        if self.max_queued_bytes < 0 or self.queued_bytes < self.max_queued_bytes:
            self.queued_bytes += n
            return True
        return False

    def _release(self, n: int) -> None:
        self.queued_bytes -= n
        if self._memory_waiters and self.queued_bytes < self.max_queued_bytes:
            # every waiter tries again, in the order they waited; those that find no room wait again
            loop = asyncio.get_running_loop()
            waiters, self._memory_waiters = self._memory_waiters, deque()
            for conn in waiters:
                if not conn.closed:
                    loop.call_soon(conn._memory_available)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        host = self.host or None  # "" binds every interface
        factory = lambda: Connection(self)  # noqa: E731
        tls: dict = {}
        if self.ssl_context is not None:
            # TLS that sends the alert of a failed handshake (net/tls.py), else asyncio's own
            alerting = tls_protocol_factory(factory, self.ssl_context, TLS_HANDSHAKE_TIMEOUT)
            if alerting is not None:
                factory = alerting
            else:
                tls = {"ssl": self.ssl_context, "ssl_handshake_timeout": TLS_HANDSHAKE_TIMEOUT}
        self._server = await loop.create_server(
            factory, host, self.port, reuse_address=True, backlog=self.backlog, **tls
        )
        if self.port == 0:
            self.port = self._server.sockets[0].getsockname()[1]
        if self.idle_timeout:
            self._reaper = asyncio.ensure_future(self._reap_idle())

    async def _reap_idle(self) -> None:
        """Close connections that have had no traffic and no request in flight for ``idle_timeout``."""
        every = max(0.05, min(self.idle_timeout / 4, 10.0))
        while True:
            await asyncio.sleep(every)
            now = time.monotonic()
            for conn in list(self._connections):
                if not conn._slots and now - conn.last_active > self.idle_timeout:
                    conn.abort(
                        f"idle for more than {self.idle_timeout * 1000:.0f} ms (connections.max.idle.ms)",
                        graceful=True,
                        kind="idle",
                    )

    @property
    def sockets(self):
        return self._server.sockets if self._server else ()

    @property
    def connections(self) -> set[Connection]:
        return set(self._connections)

    async def close(self, wait: float = 1.0) -> None:
        """Stop listening and abort every connection; wait at most ``wait`` seconds for the listener to close."""
        if self._server is None:
            return
        if self._reaper is not None:
            self._reaper.cancel()
        self._server.close()
        for conn in list(self._connections):
            if conn.transport is not None:
                conn.closed = True
                conn.close_reason = conn.close_reason or "server shutting down"
                conn.close_kind = conn.close_kind or "shutdown"
                for task in list(conn._tasks):
                    task.cancel()
                conn.transport.abort()
        try:
            await asyncio.wait_for(self._server.wait_closed(), wait)
        except (TimeoutError, Exception):
            pass
        self._server = None
