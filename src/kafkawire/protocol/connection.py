"""One Kafka protocol connection, sans-IO: bytes in, events out, bytes to send back.

A :class:`ProtocolConnection` knows Kafka's framing (a 4-byte big-endian size, then header and
body), the request header prefix (API key, API version, correlation id), which response belongs
to which request, and the rules that follow from them. It opens no socket and imports no event
loop: the asyncio server (``kafkawire.net.server``), the asyncio client
(``kafkawire.client.connection``) and the capture dissector (``kafkawire.tools.pcap``) are shells
around it, and so is anything else that speaks Kafka (a proxy).

Roles::

    SERVER    receives requests, encodes responses
    CLIENT    encodes requests (numbering them), receives responses matched to them
    OBSERVER  fed both directions of someone else's connection; pairs responses with requests

Use: ``receive_data(data)`` whenever bytes arrive (the observer says which way they went),
``receive_eof()`` when the stream ends, then call ``next_event()`` until it returns
:data:`NEED_DATA` (an instance of :class:`NeedData`). A server shell that reads into buffers it is given
(asyncio's ``BufferedProtocol``) may first ask ``direct_buffer()``: for a large request whose size prefix is
in, it is the rest of that request's own payload buffer, to read into and confirm with ``direct_received(n)``
(its bytes then cross no stream buffer). Events are frozen msgspec structs:

* :class:`RequestReceived` -- API key, version, correlation id and the payload (header and body,
  no size prefix). Nothing past the 8-byte prefix is decoded until ``decode()`` is called: the
  broker's produce path moves record bytes and never pays for more.
* :class:`ResponseReceived` -- the same for a response, with the API key and version taken from
  the request it answers (a response names neither), the ``tag`` given with that request, and
  ``overtook``: the requests sent before it and still unanswered (Kafka answers in order on a
  connection; an observer reports when a peer does not).
* :class:`SaslTokenReceived` -- a bare SASL token (see below).
* :class:`ProtocolViolation` -- the peer broke the protocol: a negative size, a frame above
  ``max_frame`` (the broker's ``socket.request.max.bytes``), a frame too short for its header, a
  response to no outstanding request, a stream that ends inside a frame, a request before
  authentication. A ``fatal`` violation means the byte stream cannot be trusted any more (its
  framing is lost, or the peer may not go on); ``next_event()`` then returns the same violation
  for ever. A short frame or a response with an unknown correlation id is not fatal: the framing
  held, and the shell decides (Kafka closes the connection on a short request).
* :class:`StreamEnded` -- ``receive_eof()`` was called and every complete frame was taken.

Encoding: ``send_request(body, api_version)`` (client) returns the frame and remembers the
correlation id it chose; ``send_response(request, body)`` (server) encodes the answer to a
:class:`RequestReceived`. The ``*_parts`` forms return a list of buffers instead of one joined
``bytes`` (records pass through uncopied, for ``writelines``).

ApiVersions, the one request a peer must be able to answer whatever its version:

* a server that receives an ApiVersions request at a version it does not support answers with a
  v0 body (and the v0 response header ApiVersions always uses) carrying UNSUPPORTED_VERSION:
  ``RequestReceived.response_version`` is 0 for it, and ``send_response`` encodes at that version;
* a client reads an ApiVersions response with the v0 header always, and reads its body at v0 when
  the error code leading the body is UNSUPPORTED_VERSION (``ResponseReceived.body_version``).

Produce with ``acks=0`` has no response: the connection reads ``acks`` from the request's header
end (no body decode) and does not wait for an answer to it.

SASL (the slot; the mechanisms live in the broker and the client):

* With SaslHandshake v0 and no SaslAuthenticate, the tokens after the handshake travel as bare
  length-prefixed frames with no Kafka header. ``start_sasl_tokens()`` switches the connection
  (both directions, for an observer) so that frames arrive as :class:`SaslTokenReceived`;
  ``send_sasl_token(token)`` frames one; ``end_sasl_tokens()`` switches back once the mechanism
  says authentication is complete (only the mechanism knows when). A frame already returned as
  an event is never re-read: switch before asking for the next event.
* ``require_authentication()`` (server) makes every request but ApiVersions, SaslHandshake and
  SaslAuthenticate a fatal ``not_authenticated`` violation until ``authenticated()`` is called, as
  Kafka closes a connection that sends other requests before authenticating. Re-authentication
  (KIP-368) sends SaslHandshake and SaslAuthenticate as ordinary requests on an authenticated
  connection, so it needs no framing change; a mechanism that wants other requests refused
  meanwhile calls ``require_authentication()`` again.

Skimming (observer): ``skim(api_key, api_version, correlation_id, size)``, given to the constructor, is asked
once per response frame, as soon as its size and correlation id are in. When it answers True the frame is not
gathered: its bytes are walked as they arrive by a :class:`~kafkawire.protocol.skim.Skimmer` (error codes read,
records stepped over by length, nothing kept), and its :class:`ResponseReceived` carries ``skim`` (size, error
codes, top-level tagged fields) and an empty ``payload``. A relay that forwards a Fetch of megabytes and
reports only its error codes never copies its records.

Frame-level entry points for a caller that finds frames itself (the capture dissector, which
resynchronises after bytes missing from a capture): ``observe_request(payload)``,
``observe_response(payload)``, ``expected(correlation_id)`` and ``forget(correlation_id)``.
"""

from __future__ import annotations

import enum
import itertools
import struct
import sys
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import msgspec

from . import apis
from .api_keys import ApiKey
from .framing import DEFAULT_MAX_FRAME, frame_size_prefix
from .messages import Message
from .primitives import DecodeError, read_uvarint
from .rpc import (
    Request,
    Response,
    decode_request,
    decode_response,
    encode_request_parts,
    encode_response_parts,
    request_header,
)
from .skim import Skim, Skimmer

__all__ = [
    "Role",
    "ProtocolConnection",
    "NeedData",
    "NEED_DATA",
    "RequestReceived",
    "ResponseReceived",
    "SaslTokenReceived",
    "ProtocolViolation",
    "StreamEnded",
    "PendingRequest",
    "Violation",
    "frame_size_problem",
    "response_body_version",
    "produce_acks",
    "SASL_PRE_AUTH_KEYS",
]

_SIZE = struct.Struct(">i")
_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id
_FRAME_PREFIX = struct.Struct(">ihhi")  # size, then the request prefix
_FRAME_CORR = struct.Struct(">ii")  # size, then a response's correlation id
_PAYLOADS = (bytes, bytearray)
_INT16 = struct.Struct(">h")
# plain ints: compared once per frame, where an IntEnum attribute lookup would cost more than the test
_PRODUCE = int(ApiKey.PRODUCE)
_API_VERSIONS = int(ApiKey.API_VERSIONS)
_UNSUPPORTED_VERSION = 35  # Kafka's error code (kafkawire.protocol.errors.UNSUPPORTED_VERSION)
SASL_PRE_AUTH_KEYS = frozenset({_API_VERSIONS, int(ApiKey.SASL_HANDSHAKE), int(ApiKey.SASL_AUTHENTICATE)})


class Role(enum.Enum):
    SERVER = "server"
    CLIENT = "client"
    OBSERVER = "observer"


class Violation(enum.StrEnum):
    """What a :class:`ProtocolViolation` is about (its ``kind``)."""

    NEGATIVE_SIZE = "negative_size"
    FRAME_TOO_LARGE = "frame_too_large"
    SHORT_FRAME = "short_frame"  # shorter than the header prefix it must start with
    UNKNOWN_CORRELATION_ID = "unknown_correlation_id"
    TRUNCATED = "truncated"  # the stream ended inside a frame
    NOT_AUTHENTICATED = "not_authenticated"


# --------------------------------------------------------------------------- events


class NeedData(msgspec.Struct, frozen=True):
    """Nothing complete to report; ``frame_size`` is the size of the frame being received, once its
    prefix is in (a server reserves memory for it before the rest arrives)."""

    frame_size: int | None = None


NEED_DATA = NeedData()


class RequestReceived(msgspec.Struct, frozen=True):
    api_key: int
    api_version: int
    correlation_id: int
    payload: Any  # header and body without the size prefix (off a server's stream: a writable bytearray)
    offset: int = 0  # where the frame's size prefix starts in the client's byte stream
    response_version: int = -1  # the version its response is encoded at (the ApiVersions rule); -1: api_version

    @property
    def expects_response(self) -> bool:
        """False for a Produce with acks=0 (read from the header end when asked, not for every request)."""
        return self.api_key != _PRODUCE or produce_acks(self.payload, self.api_version) != 0

    def decode(self, *, strict: bool = False) -> Request:
        """Header and body, decoded (``DecodeError``/``UnsupportedVersionError`` when they do not)."""
        return decode_request(self.payload, framed=False, strict=strict)


class ResponseReceived(msgspec.Struct, frozen=True):
    api_key: int
    api_version: int  # of the request it answers
    correlation_id: int
    payload: Any  # header and body without the size prefix
    offset: int = 0  # where the frame's size prefix starts in the server's byte stream
    tag: Any = None  # what the caller attached to the request
    overtook: tuple[int, ...] = ()  # correlation ids of earlier requests still unanswered
    skim: Skim | None = None  # a skimmed frame (observer): its size and error codes; ``payload`` is then empty

    @property
    def body_version(self) -> int:
        return response_body_version(self.api_key, self.api_version, self.payload)

    def decode(self, *, strict: bool = False) -> Response:
        return decode_response(self.payload, self.api_key, self.body_version, framed=False, strict=strict)


class SaslTokenReceived(msgspec.Struct, frozen=True):
    token: bytes
    from_client: bool
    offset: int = 0


class ProtocolViolation(msgspec.Struct, frozen=True):
    kind: Violation
    message: str
    from_client: bool  # which way the offending bytes went
    offset: int  # stream offset of the offending frame
    fatal: bool
    size: int | None = None
    correlation_id: int | None = None
    payload: Any = b""  # the frame's payload when it was whole (an unmatched response)


class StreamEnded(msgspec.Struct, frozen=True):
    from_client: bool


# Events made per frame: a struct's own __init__ (C) is the cheapest way to build one, positional in field order.
_new_request = RequestReceived
_new_response = ResponseReceived


class PendingRequest(NamedTuple):
    api_key: int
    api_version: int
    tag: Any


# --------------------------------------------------------------------------- rules


def frame_size_problem(size: int, max_frame: int) -> tuple[Violation, str] | None:
    """Why a frame size prefix is impossible, or None when it is fine."""
    if 0 <= size <= max_frame:
        return None
    kind = Violation.NEGATIVE_SIZE if size < 0 else Violation.FRAME_TOO_LARGE
    return kind, f"frame size {size} is outside [0, {max_frame}]"


def response_body_version(api_key: int, api_version: int, payload) -> int:
    """The version a response body is read at: the request's, except that an ApiVersions answer whose
    error code is UNSUPPORTED_VERSION comes in a v0 body (its header is v0 at every version)."""
    if (
        api_key == _API_VERSIONS
        and api_version > 0
        and len(payload) >= 6
        and _INT16.unpack_from(payload, 4)[0] == _UNSUPPORTED_VERSION
    ):
        return 0
    return api_version


def produce_acks(payload, api_version: int) -> int | None:
    """``acks`` of a Produce request payload, read after the header without decoding the body; None if
    the bytes do not reach it."""
    try:
        pos = 8
        (n,) = _INT16.unpack_from(payload, pos)  # client id
        pos += 2 + max(n, 0)
        flexible = apis.api(_PRODUCE).is_flexible(api_version)
        if flexible:  # header tagged fields: a count, then (tag, size, bytes) each
            count, pos = read_uvarint(payload, pos)
            for _ in range(count):
                _tag, pos = read_uvarint(payload, pos)
                size, pos = read_uvarint(payload, pos)
                pos += size
        if api_version >= 3:  # transactional id comes first from v3
            if flexible:
                n, pos = read_uvarint(payload, pos)
                pos += max(n - 1, 0)
            else:
                (n,) = _INT16.unpack_from(payload, pos)
                pos += 2 + max(n, 0)
        return _INT16.unpack_from(payload, pos)[0]
    except (struct.error, DecodeError, IndexError):
        return None


def _response_version(api_key: int, api_version: int, api_versions: tuple[int, int]) -> int:
    if api_key == _API_VERSIONS and not api_versions[0] <= api_version <= api_versions[1]:
        return 0
    return api_version


# --------------------------------------------------------------------------- one direction's bytes


# request frames of this many bytes or more may be handed over as their buffer (``_Inbound.take``)
_HANDOVER_MIN = 64 * 1024
# A request of this many bytes or more is read straight into its own buffer (``direct_buffer``) once its size
# prefix is in: a 512 KiB produce request then crosses no stream buffer (received the copying way, each byte
# was copied twice more, into a bytes object and then the stream's bytearray: ~0.12 ms/MB of the broker's CPU).
DIRECT_MIN = 64 * 1024
_BYTEARRAY_BASE = sys.getsizeof(bytearray())  # an empty bytearray's size: the rest of getsizeof is its allocation


class _Inbound:
    """Bytes received one way and not yet returned as frames."""

    __slots__ = (
        "buf",
        "pos",
        "base",
        "eof",
        "from_client",
        "skimmer",
        "skim_left",
        "skim_frame",
        "declined",
        "direct",
        "direct_filled",
        "direct_done",
    )

    def __init__(self, from_client: bool):
        self.buf = bytearray()
        self.pos = 0  # consumed up to here; compacted when more data arrives
        self.base = 0  # stream offset of buf[0]
        self.eof = False
        self.from_client = from_client
        self.skimmer: Skimmer | None = None  # the frame being skimmed (observer): its bytes bypass buf
        self.skim_left = 0  # of that frame's payload, bytes not yet fed
        self.skim_frame: tuple = ()  # (correlation id, stream offset of its size prefix)
        self.declined = -1  # stream offset of the frame ``skim`` said no to (it is asked once per frame)
        # a request read straight into its own payload buffer (``ProtocolConnection.direct_buffer``): while
        # it fills, ``buf`` is empty and ``base`` is already the stream offset just after it
        self.direct: bytearray | None = None
        self.direct_filled = 0
        self.direct_done: bytearray | None = None  # filled, not yet returned: the next frame

    def add(self, data) -> None:
        if self.direct is not None:  # bytes given the copying way while a direct read is under way
            data = self._fill_direct(data)
            if not data:
                return
        self.compact()
        left = self.skim_left
        if left:  # the rest of a skimmed frame goes to its skimmer, never into buf
            n = len(data)
            if n <= left:
                self.skimmer.feed(data)  # type: ignore[union-attr]
                self.skim_left = left - n
                self.base += n
                return
            with memoryview(data) as view:
                self.skimmer.feed(view[:left])  # type: ignore[union-attr]
                self.skim_left = 0
                self.base += left
                self.buf += view[left:]
            return
        self.buf += data

    def _fill_direct(self, data):
        """Copy the start of ``data`` into the direct frame; what is left over (the bytes after it)."""
        frame = self.direct
        filled = self.direct_filled
        n = min(len(frame) - filled, len(data))
        with memoryview(data) as view:
            frame[filled : filled + n] = view[:n]
            rest = bytes(view[n:]) if n < len(view) else b""
        self.filled_direct(n)
        return rest

    def filled_direct(self, n: int) -> bool:
        """``n`` more bytes of the direct frame are in; True when that completes it."""
        self.direct_filled += n
        if self.direct_filled < len(self.direct):  # type: ignore[arg-type]
            return False
        self.direct_done, self.direct = self.direct, None
        return True

    def compact(self) -> None:
        """Drop the bytes already returned (done when a caller has taken every whole frame, so that a large
        request's bytes are not held until more data arrives, and one memmove serves many frames)."""
        if self.pos:
            del self.buf[: self.pos]
            self.base += self.pos
            self.pos = 0

    @property
    def buffered(self) -> int:
        direct = self.direct_filled + 4 if self.direct is not None else 0
        done = len(self.direct_done) + 4 if self.direct_done is not None else 0
        return len(self.buf) - self.pos + direct + done

    def take(self, pos: int, end: int) -> bytearray:
        """``buf[pos:end]``, a request frame's payload, as a bytearray of its own; the bytes up to ``end`` are
        consumed. A large frame that is most of the buffer is the buffer itself, handed over with the bytes
        around it cut off, instead of a copy (for a 1 MB produce request the copy was ~4% of the broker's CPU):
        CPython drops a bytearray's head by moving its start and its tail by shortening it, copying neither while
        what is left fills at least half the allocation; the bytes after the frame (the next one's start) go to
        a new buffer."""
        buf = self.buf
        size = end - pos
        if (
            size >= _HANDOVER_MIN
            and len(buf) - end < size  # copying the bytes after it costs less than copying it
            and size * 2 >= sys.getsizeof(buf) - _BYTEARRAY_BASE  # the allocation: no copy when shrunk to size
        ):
            rest = buf[end:]
            try:
                del buf[end:]
                del buf[:pos]
            except BufferError:  # a view of the buffer is alive: it cannot be resized (the first del raised)
                pass
            else:
                self.buf = rest
                self.base += end
                self.pos = 0
                return buf
        self.pos = end
        return buf[pos:end]


# --------------------------------------------------------------------------- the connection


class ProtocolConnection:
    """See the module docstring."""

    def __init__(
        self,
        role: Role,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        client_id: str | None = "kafkawire",
        api_versions: tuple[int, int] | None = None,
        first_correlation_id: int = 1,
        skim: Callable[[int, int, int, int], bool] | None = None,
    ):
        self.role = role
        #: observer: asked (api key, api version, correlation id, size) for each response frame; True: skim it
        self.skim = skim
        self._server = role is Role.SERVER
        self._client = role is Role.CLIENT
        self.max_frame = max_frame
        self.client_id = client_id
        info = apis.api(_API_VERSIONS)
        #: ApiVersions versions this side answers (server); others get the v0 UNSUPPORTED_VERSION answer
        self.api_versions = api_versions or (info.min_version, info.max_version)
        self._from_client = _Inbound(True)  # requests (server, observer)
        self._from_server = _Inbound(False)  # responses (client, observer)
        self._pending: dict[int, PendingRequest] = {}  # correlation id -> request (client, observer)
        self._ids = itertools.count(first_correlation_id)
        self._sasl_tokens = False
        self._auth_required = False
        self._broken: ProtocolViolation | None = None
        self._plain = True  # not broken, no SASL token mode, no authentication required: the fast path applies
        self._events: deque = deque()  # observer: events in the order their frames completed
        self.last_correlation_id: int | None = None  # of the last send_request

    def __repr__(self) -> str:
        return (
            f"<ProtocolConnection {self.role.value} pending={len(self._pending)}"
            f"{' sasl-tokens' if self._sasl_tokens else ''}{' broken' if self._broken else ''}>"
        )

    # -- input --------------------------------------------------------------------
    def receive_data(self, data, *, from_client: bool | None = None) -> None:
        """Bytes from the peer (for an observer: ``from_client`` says which way they went)."""
        if self._broken is not None:
            return  # the stream is out of step: nothing after the violation means anything
        inbound = self._inbound(from_client)
        inbound.add(data)
        if self.role is Role.OBSERVER:
            self._observe(inbound)

    def direct_buffer(self) -> memoryview | None:
        """A server's buffer for the peer's next bytes when they belong in a request's own payload: the
        unfilled rest of the next request, when it has DIRECT_MIN bytes or more and its size prefix is in.
        Read into it, then call ``direct_received(n)``. None: read into any buffer and ``receive_data`` it.
        Only on a plain connection (no SASL token framing, authenticated): frames that need more checks
        before they are trusted take the copying way."""
        if not (self._plain and self._server):
            return None
        inbound = self._from_client
        frame = inbound.direct
        if frame is None:
            if inbound.direct_done is not None:
                return None  # one frame at a time: the filled one goes out first
            buf = inbound.buf
            pos = inbound.pos
            have = len(buf) - pos
            if have < 4:
                return None
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < DIRECT_MIN or size > self.max_frame or have >= 4 + size:
                return None
            frame = bytearray(size)
            with memoryview(buf) as view:
                frame[: have - 4] = view[pos + 4 :]
            inbound.direct = frame
            inbound.direct_filled = have - 4
            inbound.base += pos + 4 + size  # buf is empty until the frame is in; what comes next starts there
            inbound.pos = 0
            inbound.buf = bytearray()
        return memoryview(frame)[inbound.direct_filled :]

    def direct_received(self, nbytes: int) -> bool:
        """``nbytes`` were read into the ``direct_buffer()``; True when the request is now whole (the next
        ``next_event()`` returns it)."""
        return self._from_client.filled_direct(nbytes)

    def receive_eof(self, *, from_client: bool | None = None) -> None:
        inbound = self._inbound(from_client)
        inbound.eof = True
        if self.role is Role.OBSERVER and self._broken is None:
            self._observe(inbound)

    def _inbound(self, from_client: bool | None) -> _Inbound:
        role = self.role
        if role is Role.SERVER:
            return self._from_client
        if role is Role.CLIENT:
            return self._from_server
        if from_client is None:
            raise ValueError("an observer needs from_client=True or False with each piece of data")
        return self._from_client if from_client else self._from_server

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as events."""
        return self._from_client.buffered + self._from_server.buffered

    @property
    def broken(self) -> ProtocolViolation | None:
        return self._broken

    # -- events -------------------------------------------------------------------
    def next_event(self):
        """The next event; :data:`NEED_DATA` (or a ``NeedData`` with the size of the frame in progress)
        when no whole frame is buffered."""
        if self._plain:  # the common case, a whole well-formed frame buffered, without the general path's calls
            if self._server:
                inbound = self._from_client
                if inbound.direct_done is not None:  # read into its own buffer: it comes before what buf holds
                    return self._next_event()
                buf = inbound.buf
                pos = inbound.pos
                if len(buf) - pos >= 12:
                    size, key, version, corr = _FRAME_PREFIX.unpack_from(buf, pos)
                    end = pos + 4 + size
                    if 8 <= size <= self.max_frame and end <= len(buf):
                        offset = inbound.base + pos
                        return _new_request(
                            key,
                            version,
                            corr,
                            inbound.take(pos + 4, end),
                            offset,
                            version if key != _API_VERSIONS else _response_version(key, version, self.api_versions),
                        )
            elif self._client:
                inbound = self._from_server
                buf = inbound.buf
                pos = inbound.pos
                if len(buf) - pos >= 8:
                    size, corr = _FRAME_CORR.unpack_from(buf, pos)
                    end = pos + 4 + size
                    pending = self._pending
                    if 4 <= size <= self.max_frame and end <= len(buf) and corr in pending:
                        found = pending.pop(corr)
                        inbound.pos = end
                        with memoryview(buf) as view:  # bytes: one copy, and the decoders read them faster
                            payload = bytes(view[pos + 4 : end])
                        return _new_response(
                            found.api_key,
                            found.api_version,
                            corr,
                            payload,
                            inbound.base + pos,
                            found.tag,
                            self._overtaken(corr),
                        )
        return self._next_event()

    def _next_event(self):
        if self._broken is not None:
            return self._broken
        if self.role is Role.OBSERVER:
            return self._events.popleft() if self._events else NEED_DATA
        inbound = self._from_client if self.role is Role.SERVER else self._from_server
        payload = self._frame(inbound)
        if type(payload) not in _PAYLOADS:
            return payload  # NeedData, a violation or the end
        offset = inbound.base + inbound.pos - len(payload) - 4
        if self._sasl_tokens:
            return SaslTokenReceived(bytes(payload), inbound.from_client, offset)
        if self.role is Role.SERVER:
            return self._request(payload, offset)
        return self._response(payload, offset)

    def events(self):
        """``next_event()`` until it needs data (or for ever returns the same fatal violation: stops)."""
        while True:
            event = self.next_event()
            yield event
            if type(event) is NeedData or type(event) is StreamEnded or event is self._broken:
                return

    def _frame(self, inbound: _Inbound):
        """The next whole frame's payload, else NeedData / a violation / StreamEnded. The payload is a copy: a
        writable bytearray for requests (a broker may patch record batches in place), bytes otherwise (which
        the decoders read faster)."""
        done = inbound.direct_done
        if done is not None:  # read into its own buffer; base + pos - len - 4 is still its offset (buf unread)
            inbound.direct_done = None
            return done
        if inbound.direct is not None:
            return self._end(inbound) if inbound.eof else NeedData(len(inbound.direct))
        buf = inbound.buf
        pos = inbound.pos
        avail = len(buf) - pos
        if avail < 4:
            if inbound.eof:
                return self._end(inbound)
            inbound.compact()
            return NEED_DATA
        (size,) = _SIZE.unpack_from(buf, pos)
        if size < 0 or size > self.max_frame:
            kind, message = frame_size_problem(size, self.max_frame)  # type: ignore[misc]
            return self._fatal(ProtocolViolation(kind, message, inbound.from_client, inbound.base + pos, True, size))
        end = pos + 4 + size
        if end > len(buf):
            if inbound.eof:
                return self._end(inbound)
            inbound.compact()
            return NeedData(size)
        if inbound.from_client:
            return inbound.take(pos + 4, end)
        inbound.pos = end
        with memoryview(buf) as view:  # one copy, straight into bytes
            return bytes(view[pos + 4 : end])

    def _end(self, inbound: _Inbound):
        if inbound.direct is not None:
            size = len(inbound.direct)
            return self._fatal(
                ProtocolViolation(
                    Violation.TRUNCATED,
                    f"stream ends inside a frame: {inbound.direct_filled + 4} of {size + 4} bytes",
                    inbound.from_client,
                    inbound.base - size - 4,
                    True,
                    size,
                )
            )
        if inbound.buffered:
            pos = inbound.base + inbound.pos
            need = _SIZE.unpack_from(inbound.buf, inbound.pos)[0] + 4 if inbound.buffered >= 4 else 4
            return self._fatal(
                ProtocolViolation(
                    Violation.TRUNCATED,
                    f"stream ends inside a frame: {inbound.buffered} of {need} bytes",
                    inbound.from_client,
                    pos,
                    True,
                    need - 4 if need > 4 else None,
                )
            )
        return StreamEnded(inbound.from_client)

    def _fatal(self, violation: ProtocolViolation) -> ProtocolViolation:
        self._broken = violation
        self._plain = False
        return violation

    def _update_plain(self) -> None:
        self._plain = self._broken is None and not self._sasl_tokens and not self._auth_required

    # -- requests -----------------------------------------------------------------
    def _request(self, payload, offset: int, tag: Any = None, register: bool = False):
        if len(payload) < 8:
            violation = ProtocolViolation(
                Violation.SHORT_FRAME,
                f"request of {len(payload)} bytes is shorter than the 8-byte header prefix",
                True,
                offset,
                False,
                len(payload),
                payload=payload,
            )
            return violation  # framed correctly: whether to go on is the caller's call (Kafka closes)
        key, version, corr = _PREFIX.unpack_from(payload, 0)
        if self._auth_required and key not in SASL_PRE_AUTH_KEYS:
            try:
                name = apis.api(key).name
            except KeyError:
                name = f"API key {key}"
            return self._fatal(
                ProtocolViolation(
                    Violation.NOT_AUTHENTICATED,
                    f"{name} v{version} request (correlation id {corr}) before authentication",
                    True,
                    offset,
                    True,
                    len(payload),
                    corr,
                )
            )
        if register and (key != _PRODUCE or produce_acks(payload, version) != 0):
            self._pending[corr] = PendingRequest(key, version, tag)
        return _new_request(key, version, corr, payload, offset, _response_version(key, version, self.api_versions))

    def send_request_parts(
        self,
        body: Message,
        api_version: int,
        *,
        tag: Any = None,
        correlation_id: int | None = None,
        expect_response: bool | None = None,
    ) -> tuple[int, list]:
        """(correlation id, buffers of the frame). The response is expected unless ``expect_response`` is
        False or the body is a Produce with acks=0; ``tag`` comes back on its :class:`ResponseReceived`."""
        self._require(Role.CLIENT, "send requests")
        if correlation_id is None:
            correlation_id = next(self._ids) & 0x7FFFFFFF
        key = body.api_key
        if key is None:
            raise ValueError(f"{type(body).__name__} is not a request")
        header = request_header(key, api_version, correlation_id, self.client_id)
        parts = encode_request_parts(header, body)
        if expect_response is None:
            expect_response = not (key == _PRODUCE and getattr(body, "acks", -1) == 0)
        if expect_response:
            self._pending[correlation_id] = PendingRequest(key, api_version, tag)
        return correlation_id, parts

    def send_request(self, body: Message, api_version: int, **kwargs) -> bytes:
        """The whole frame; the correlation id chosen is ``last_correlation_id``."""
        self.last_correlation_id, parts = self.send_request_parts(body, api_version, **kwargs)
        return b"".join(parts)

    # -- responses ----------------------------------------------------------------
    def _response(self, payload, offset: int):
        if len(payload) < 4:
            violation = ProtocolViolation(
                Violation.SHORT_FRAME,
                f"response of {len(payload)} bytes has no correlation id",
                False,
                offset,
                False,
                len(payload),
                payload=payload,
            )
            return violation
        (corr,) = _SIZE.unpack_from(payload, 0)
        pending = self._pending
        found = pending.pop(corr, None)
        if found is None:
            return ProtocolViolation(
                Violation.UNKNOWN_CORRELATION_ID,
                f"response with correlation id {corr} answers no outstanding request",
                False,
                offset,
                False,
                len(payload),
                corr,
                payload,
            )
        return _new_response(found.api_key, found.api_version, corr, payload, offset, found.tag, self._overtaken(corr))

    def _overtaken(self, corr: int) -> tuple[int, ...]:
        """Correlation ids of requests sent before ``corr`` and still unanswered (``_pending`` is in send order;
        ids only wrap after 2**31 requests)."""
        pending = self._pending
        if pending and next(iter(pending)) < corr:
            return tuple(c for c in pending if c < corr)
        return ()

    def send_response_parts(self, request: RequestReceived, body: Message) -> list:
        """Buffers of the answer to ``request``, at its ``response_version`` (v0 for an ApiVersions
        request at a version this side does not support)."""
        self._require(Role.SERVER, "send responses")
        version = request.response_version if request.response_version >= 0 else request.api_version
        return encode_response_parts(request.correlation_id, body, version)

    def send_response(self, request: RequestReceived, body: Message) -> bytes:
        return b"".join(self.send_response_parts(request, body))

    # -- pending requests ---------------------------------------------------------
    @property
    def pending(self) -> dict[int, PendingRequest]:
        """Requests waiting for their response, oldest first (a copy)."""
        return dict(self._pending)

    def expected(self, correlation_id: int) -> PendingRequest | None:
        return self._pending.get(correlation_id)

    def forget(self, correlation_id: int) -> PendingRequest | None:
        """Stop waiting for a response (its request timed out, or its frame was lost); a response that
        still comes is then an unknown correlation id."""
        return self._pending.pop(correlation_id, None)

    def forget_all(self) -> list[PendingRequest]:
        pending, self._pending = self._pending, {}
        return list(pending.values())

    # -- SASL ---------------------------------------------------------------------
    def start_sasl_tokens(self) -> None:
        """From the next frame on, frames are bare SASL tokens (SaslHandshake v0 without SaslAuthenticate)."""
        self._sasl_tokens = True
        self._update_plain()

    def end_sasl_tokens(self) -> None:
        self._sasl_tokens = False
        self._update_plain()

    @property
    def sasl_tokens(self) -> bool:
        return self._sasl_tokens

    def send_sasl_token(self, token: bytes) -> bytes:
        if not self._sasl_tokens:
            raise RuntimeError("send_sasl_token outside SASL token mode (start_sasl_tokens first)")
        return frame_size_prefix(len(token)) + bytes(token)

    def require_authentication(self) -> None:
        """Requests other than ApiVersions, SaslHandshake and SaslAuthenticate are a fatal violation until
        ``authenticated()``."""
        self._require(Role.SERVER, "require authentication")
        self._auth_required = True
        self._update_plain()

    def authenticated(self) -> None:
        self._auth_required = False
        self._update_plain()

    # -- observer -----------------------------------------------------------------
    def observe_request(self, payload, *, offset: int = 0, tag: Any = None):
        """A whole request frame's payload seen going to the server: :class:`RequestReceived` (its response
        is then expected, unless acks=0) or a non-fatal SHORT_FRAME violation."""
        self._require(Role.OBSERVER, "observe frames")
        return self._request(payload, offset, tag, register=True)

    def observe_response(self, payload, *, offset: int = 0):
        """A whole response frame's payload: :class:`ResponseReceived` paired with its request, or a non-fatal
        violation (no such outstanding request, or too short to name one)."""
        self._require(Role.OBSERVER, "observe frames")
        return self._response(payload, offset)

    def _observe(self, inbound: _Inbound) -> None:
        events = self._events
        for _ in range(len(inbound.buf) + 2):  # each round takes a frame or stops
            if inbound.skimmer is not None:
                if inbound.skim_left:
                    if inbound.eof:
                        events.append(self._skim_truncated(inbound))
                    return
                events.append(self._skimmed(inbound))
                continue
            if (
                self.skim is not None
                and not inbound.from_client
                and not self._sasl_tokens
                and self._start_skim(inbound)
            ):
                continue
            payload = self._frame(inbound)
            if type(payload) not in _PAYLOADS:
                if type(payload) is not NeedData:
                    events.append(payload)  # the end, or a fatal violation
                return
            offset = inbound.base + inbound.pos - len(payload) - 4
            if self._sasl_tokens:
                events.append(SaslTokenReceived(bytes(payload), inbound.from_client, offset))
            elif inbound.from_client:
                events.append(self._request(payload, offset, register=True))
            else:
                events.append(self._response(payload, offset))

    def _start_skim(self, inbound: _Inbound) -> bool:
        """At a response frame's start: when ``skim`` wants it, its skimmer takes the bytes in (and, through
        ``_Inbound.add``, those that follow)."""
        buf, pos = inbound.buf, inbound.pos
        if len(buf) - pos < 8:
            return False
        if inbound.base + pos == inbound.declined:
            return False
        size, corr = _FRAME_CORR.unpack_from(buf, pos)
        if size < 4 or size > self.max_frame:
            return False  # the general path reports it
        found = self._pending.get(corr)
        if found is None or not self.skim(found.api_key, found.api_version, corr, size):  # type: ignore[misc]
            inbound.declined = inbound.base + pos
            return False
        skimmer = Skimmer(found.api_key, found.api_version, size)
        end = min(len(buf), pos + 4 + size)
        with memoryview(buf) as view:
            skimmer.feed(view[pos + 4 : end])
        inbound.skimmer = skimmer
        inbound.skim_left = pos + 4 + size - end
        inbound.skim_frame = (corr, inbound.base + pos)
        inbound.pos = end
        inbound.compact()
        return True

    def _skimmed(self, inbound: _Inbound) -> ResponseReceived:
        skimmer, inbound.skimmer = inbound.skimmer, None
        corr, offset = inbound.skim_frame
        found = self._pending.pop(corr)
        return _new_response(
            found.api_key,
            found.api_version,
            corr,
            b"",
            offset,
            found.tag,
            self._overtaken(corr),
            skimmer.result(),  # type: ignore[union-attr]
        )

    def _skim_truncated(self, inbound: _Inbound) -> ProtocolViolation:
        corr, offset = inbound.skim_frame
        skimmer = inbound.skimmer
        assert skimmer is not None
        return self._fatal(
            ProtocolViolation(
                Violation.TRUNCATED,
                f"stream ends inside a frame: {skimmer.size + 4 - inbound.skim_left} of {skimmer.size + 4} bytes",
                False,
                offset,
                True,
                skimmer.size,
                corr,
            )
        )

    def _require(self, role: Role, what: str) -> None:
        if self.role is not role:
            raise RuntimeError(f"a {self.role.value} connection does not {what}")
