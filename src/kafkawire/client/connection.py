"""One asyncio connection to one Kafka broker.

* framing and correlation ids come from ``kafkawire.protocol.connection``
  (the client side of one ``ProtocolConnection``): every request gets the
  next correlation id; responses are matched by id (Kafka answers in order,
  but matching by id makes a late or missing response harmless);
* pipelining: any number of requests may be in flight at once (bounded by
  ``max_in_flight``); ``request()`` only waits for its own response;
* ApiVersions negotiation when the connection opens: per API, the highest
  version both sides support (``negotiate``). A broker that does not know
  our ApiVersions version answers UNSUPPORTED_VERSION with its own range, and
  we ask again at the highest version it supports;
* timeouts: a request that gets no answer within its timeout raises
  ``RequestTimeout`` and closes the connection (what the Java client does:
  a connection that lost a response cannot be trusted to be in sync);
* security (``security``: a ``kafkawire.security.client.ClientSecurity``,
  read from Kafka's client properties): TLS around the socket, then after
  ApiVersions a SASL login (SaslHandshake v1, SaslAuthenticate carrying the
  mechanism's tokens, the mechanisms sans-IO in ``security/sasl_client.py``).
  When the broker gives the session a lifetime (KIP-368,
  ``connections.max.reauth.ms``), the first request after 85-95% of it
  waits for those in flight, logs in again on the same connection, and
  goes on: as the Java client, which re-authenticates before it sends.
  A refused login or TLS handshake raises ``AuthenticationFailed``, which
  is not retried.

Requests whose API has no response on the wire (Produce with ``acks=0``)
complete when written.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from ..protocol import ApiKey, KafkaError, ProtocolError, api, errors as kerrors
from ..protocol.connection import (
    NeedData,
    ProtocolConnection,
    ProtocolViolation,
    ResponseReceived,
    Role,
    StreamEnded,
    Violation,
)
from ..protocol.framing import DEFAULT_MAX_FRAME
from ..protocol.messages import Message, message_class
from ..protocol.negotiation import negotiate, ranges_from_response, supported_ranges
from ..security.client import ClientSecurity
from ..security.sasl_client import SaslClientError

if TYPE_CHECKING:  # built at run time by message_class()
    from ..protocol.messages import ApiVersionsResponse

API_VERSIONS = ApiKey.API_VERSIONS
SASL_HANDSHAKE = ApiKey.SASL_HANDSHAKE
SASL_AUTHENTICATE = ApiKey.SASL_AUTHENTICATE
log = logging.getLogger("kafkawire.client")
_READ_SIZE = 1 << 20  # bytes asked of the stream per read (its buffer limit)

CLIENT_SOFTWARE_NAME = "kafkawire-python"
try:  # pragma: no cover - metadata is present when installed
    from importlib.metadata import version as _dist_version

    CLIENT_SOFTWARE_VERSION = _dist_version("kafkawire")
except Exception:  # pragma: no cover
    CLIENT_SOFTWARE_VERSION = "0.0.0"


class ConnectionClosed(KafkaError, OSError):
    """The connection failed or closed while a request was pending: Kafka's NETWORK_EXCEPTION (13), retriable.

    Also an ``OSError``, so code that catches socket errors catches it.
    """

    def __init__(self, message: str = "connection closed"):
        KafkaError.__init__(self, kerrors.NETWORK_EXCEPTION, message)


class RequestTimeout(KafkaError, TimeoutError):
    """No response within the request timeout: Kafka's REQUEST_TIMED_OUT (7), retriable.

    Also a ``TimeoutError``. The connection it happened on is closed.
    """

    def __init__(self, message: str = "request timed out"):
        KafkaError.__init__(self, kerrors.REQUEST_TIMED_OUT, message)


class AuthenticationFailed(KafkaError):
    """The broker refused the login (SASL) or the TLS handshake failed: not retriable, as Kafka's
    AuthenticationException. ``code`` is SASL_AUTHENTICATION_FAILED, or UNSUPPORTED_SASL_MECHANISM /
    ILLEGAL_SASL_STATE as the broker answered. The connection it happened on is closed."""

    def __init__(self, message: str, code: int = kerrors.SASL_AUTHENTICATION_FAILED):
        super().__init__(code, message)


class UnsupportedApi(KafkaError):
    """The broker supports no version of this API that we can speak."""

    def __init__(self, api_name: str, broker_range=None):
        super().__init__(
            kerrors.UNSUPPORTED_VERSION,
            f"broker does not support {api_name}" + (f" (it has {broker_range})" if broker_range else ""),
        )


class Connection:
    """A connection to one broker. Create with ``await Connection.open(host, port)``."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "kafkawire",
        request_timeout: float = 30.0,
        max_in_flight: int = 64,
        max_frame: int = DEFAULT_MAX_FRAME,
        node_id: int | None = None,
        max_versions: Mapping[int, int] | None = None,
        security: ClientSecurity | None = None,
    ):
        self.host = host
        self.port = port
        self.node_id = node_id
        self.request_timeout = request_timeout
        self._protocol = ProtocolConnection(Role.CLIENT, max_frame=max_frame, client_id=client_id)
        self._slots = asyncio.Semaphore(max_in_flight)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task | None = None
        self._closed = False
        self._close_reason: BaseException | None = None
        self._max_versions = dict(max_versions or {})
        #: {api_key: (min, max)} as the broker announced it
        self.broker_versions: dict[int, tuple[int, int]] = {}
        #: {api_key: version} negotiated: the highest version both sides support
        self.versions: dict[int, int] = {}
        self.security = security
        #: the SASL principal's session: logins on this connection, and when the next one is due (loop time)
        self.logins = 0
        self._reauth_at: float | None = None
        self._reauthenticating: asyncio.Task | None = None

    @property
    def client_id(self) -> str | None:
        """The client id in the header of every request (kept by the protocol connection, which writes them)."""
        return self._protocol.client_id

    @client_id.setter
    def client_id(self, value: str | None) -> None:
        self._protocol.client_id = value

    @property
    def max_frame(self) -> int:
        """The largest response frame accepted; a larger size prefix closes the connection."""
        return self._protocol.max_frame

    @max_frame.setter
    def max_frame(self, value: int) -> None:
        self._protocol.max_frame = value

    def __repr__(self):
        state = "closed" if self._closed else "open"
        return (
            f"<Connection {self.host}:{self.port} node={self.node_id} {state} in_flight={len(self._protocol.pending)}>"
        )

    # -- lifecycle -------------------------------------------------------------

    @classmethod
    async def open(cls, host: str, port: int, *, connect_timeout: float = 10.0, **kwargs) -> Connection:
        conn = cls(host, port, **kwargs)
        await conn._connect(connect_timeout)
        return conn

    async def _connect(self, connect_timeout: float) -> None:
        security = self.security
        tls: dict = {}
        if security is not None and security.ssl_context is not None:
            tls = {"ssl": security.ssl_context, "server_hostname": self.host, "ssl_handshake_timeout": connect_timeout}
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, limit=1 << 20, **tls), connect_timeout
            )
        except TimeoutError:
            raise RequestTimeout(f"connecting to {self.host}:{self.port} timed out after {connect_timeout}s") from None
        except ssl.SSLError as exc:  # a refused certificate (either side), or no TLS at the other end
            raise AuthenticationFailed(f"TLS handshake with {self.host}:{self.port} failed: {exc}") from exc
        except OSError as exc:
            if tls and isinstance(exc, ConnectionResetError):  # the broker dropped the handshake
                raise AuthenticationFailed(f"TLS handshake with {self.host}:{self.port} failed: {exc}") from exc
            raise ConnectionClosed(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())
        try:
            await self._negotiate()
            if security is not None and security.sasl:
                await self._authenticate()
        except ConnectionClosed as exc:
            await self.close()
            if tls and not self.versions:  # TLS accepted, then closed before ApiVersions: a refused certificate
                raise AuthenticationFailed(f"{self.host}:{self.port} closed the TLS connection: {exc}") from exc
            raise
        except BaseException:
            await self.close()
            raise

    async def _authenticate(self) -> None:
        """One SASL login: SaslHandshake, then SaslAuthenticate until the mechanism is done."""
        security = self.security
        assert security is not None and security.mechanism is not None
        where = f"{self.host}:{self.port}"
        if not self.supports(SASL_HANDSHAKE, 1) or not self.supports(SASL_AUTHENTICATE):
            raise AuthenticationFailed(f"{where} has no SaslHandshake v1 and SaslAuthenticate")
        handshake = await self._send(message_class("SaslHandshakeRequest")(mechanism=security.mechanism))
        if handshake.error_code == kerrors.UNSUPPORTED_SASL_MECHANISM:
            enabled = ", ".join(handshake.mechanisms or [])
            raise AuthenticationFailed(
                f"{where} does not enable SASL mechanism {security.mechanism} (it enables: {enabled})",
                handshake.error_code,
            )
        if handshake.error_code:  # ILLEGAL_SASL_STATE: a listener that is not SASL, or a login out of turn
            raise AuthenticationFailed(f"{where} refused SaslHandshake", handshake.error_code)
        mechanism = security.sasl_client()
        token: bytes | None = mechanism.first()
        auth_cls = message_class("SaslAuthenticateRequest")
        lifetime_ms = 0
        while token is not None:
            resp = await self._send(auth_cls(auth_bytes=token))
            if resp.error_code:
                raise AuthenticationFailed(
                    resp.error_message or f"{security.mechanism} login to {where} refused", resp.error_code
                )
            lifetime_ms = getattr(resp, "session_lifetime_ms", 0) or 0
            try:
                token = mechanism.step(resp.auth_bytes or b"")
            except SaslClientError as exc:
                raise AuthenticationFailed(f"{security.mechanism} login to {where}: {exc}") from None
        self.logins += 1
        if lifetime_ms > 0:
            # as the Java client: again after 85-95% of the session, so that logins of many connections spread out
            self._reauth_at = asyncio.get_running_loop().time() + lifetime_ms / 1000.0 * random.uniform(0.85, 0.95)
        else:
            self._reauth_at = None

    async def _reauthenticate(self) -> None:
        """Let the requests in flight finish (new ones wait for this), then log in again (KIP-368)."""
        try:
            waiting = [p.tag for p in self._protocol.pending.values() if p.tag is not None]
            if waiting:
                await asyncio.wait(waiting)
            await self._authenticate()
            log.debug("re-authenticated to %s:%d (login %d)", self.host, self.port, self.logins)
        except BaseException as exc:
            await self.close(exc if isinstance(exc, Exception) else None)
            raise
        finally:
            self._reauthenticating = None

    async def _send(self, body: Message):
        """A request that bypasses the re-authentication gate: the login's own requests."""
        return await self._request(body, None, None, None)

    async def _negotiate(self) -> None:
        info = api(API_VERSIONS)
        ours = supported_ranges()
        version = ours[API_VERSIONS][1]
        body_cls = message_class("ApiVersionsRequest")
        for _ in range(3):
            body = body_cls(client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=CLIENT_SOFTWARE_VERSION)
            # an ApiVersions request always has a response, decoded by its API's response class
            resp = cast("ApiVersionsResponse", await self.request(body, version=version))
            if resp.error_code == kerrors.UNSUPPORTED_VERSION:
                theirs = ranges_from_response(resp.api_keys).get(API_VERSIONS)
                # the broker tells us its range (in a v0-shaped body); ask again at its highest
                new: int | None  # None: no lower version left to try
                new = min(theirs[1], ours[API_VERSIONS][1]) if theirs else 0
                if new >= version or new < info.min_version:
                    new = 0 if version > 0 else None
                if new is None:
                    raise KafkaError(resp.error_code, "ApiVersions negotiation failed")
                version = new
                continue
            if resp.error_code:
                raise KafkaError(resp.error_code, "ApiVersions")
            self.broker_versions = ranges_from_response(resp.api_keys)
            mine = dict(ours)
            for key, hi in self._max_versions.items():
                if key in mine:
                    mine[key] = (mine[key][0], min(mine[key][1], hi))
            self.versions = negotiate(mine, self.broker_versions)
            return
        raise KafkaError(kerrors.UNSUPPORTED_VERSION, "ApiVersions negotiation did not converge")

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self, reason: BaseException | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_reason = reason
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:
                pass
        task = self._read_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            try:
                await task
            except BaseException:
                pass
        self._fail_pending(reason or ConnectionClosed(f"connection to {self.host}:{self.port} closed"))

    def _fail_pending(self, exc: BaseException) -> None:
        for pending in self._protocol.forget_all():
            fut = pending.tag
            if not fut.done():
                fut.set_exception(exc if isinstance(exc, Exception) else ConnectionClosed(str(exc)))
                fut.exception()  # retrieved: a request whose waiter is gone must not log a warning

    # -- requests --------------------------------------------------------------

    def version_for(self, api_key: int) -> int:
        """The negotiated version of an API; ``UnsupportedApi`` if there is none."""
        v = self.versions.get(api_key)
        if v is None:
            raise UnsupportedApi(api(api_key).name, self.broker_versions.get(api_key))
        return v

    def supports(self, api_key: int, min_version: int = 0) -> bool:
        v = self.versions.get(api_key)
        return v is not None and v >= min_version

    async def request(
        self,
        body: Message,
        *,
        version: int | None = None,
        timeout: float | None = None,
        expect_response: bool | None = None,
    ) -> Message | None:
        """Send ``body`` and return the decoded response body (None for a request without a response on
        the wire: Produce with ``acks=0``, or ``expect_response=False``).

        ``version``: the API version to use (default: the negotiated one).
        Kafka error codes inside the response are *not* raised here: every
        API reports them at a different level; callers check them.
        """
        if self._closed:
            raise self._closed_error()
        if self._reauthenticating is not None or (
            self._reauth_at is not None and asyncio.get_running_loop().time() >= self._reauth_at
        ):
            if self._reauthenticating is None:
                self._reauth_at = None
                self._reauthenticating = asyncio.get_running_loop().create_task(self._reauthenticate())
            await asyncio.shield(self._reauthenticating)
            if self._closed:
                raise self._closed_error()
        return await self._request(body, version, timeout, expect_response)

    async def _request(self, body: Message, version, timeout, expect_response) -> Message | None:
        key = body.api_key
        assert key is not None, f"{body.name} is not a request"  # headers and data payloads have no API key
        if version is None:
            version = self.version_for(key)
        timeout = self.request_timeout if timeout is None else timeout
        await self._slots.acquire()
        try:
            fut: asyncio.Future | None = asyncio.get_running_loop().create_future()
            cid, parts = self._protocol.send_request_parts(body, version, tag=fut, expect_response=expect_response)
            if self._protocol.expected(cid) is None:
                fut = None  # no response on the wire (Produce with acks=0): done once written
            writer = self._writer
            assert writer is not None  # set by _connect, which open() (the way to get a Connection) runs first
            try:
                writer.writelines(parts)
                await writer.drain()
            except (OSError, RuntimeError) as exc:
                self._protocol.forget(cid)
                err: KafkaError = ConnectionClosed(f"write to {self.host}:{self.port} failed: {exc}")
                await self.close(err)
                raise err from exc
            if fut is None:
                return None
            try:
                return await asyncio.wait_for(asyncio.shield(fut), timeout)
            except TimeoutError:
                self._protocol.forget(cid)
                err = RequestTimeout(
                    f"{api(key).name} v{version} to {self.host}:{self.port} got no response within {timeout}s"
                )
                await self.close(err)
                raise err from None
        finally:
            self._slots.release()

    def _closed_error(self) -> Exception:
        reason = self._close_reason
        if isinstance(reason, Exception):
            return ConnectionClosed(f"connection to {self.host}:{self.port} is closed ({reason})")
        return ConnectionClosed(f"connection to {self.host}:{self.port} is closed")

    async def _read_loop(self) -> None:
        reader = self._reader
        assert reader is not None  # _connect sets it before it starts this task
        protocol = self._protocol
        try:
            while True:
                data = await reader.read(_READ_SIZE)
                if data:
                    protocol.receive_data(data)
                else:
                    protocol.receive_eof()
                while True:
                    event = protocol.next_event()
                    kind = type(event)
                    if kind is ResponseReceived:
                        fut = event.tag
                        if fut.done():
                            continue
                        try:  # an ApiVersions UNSUPPORTED_VERSION answer is read as v0 (the protocol's rule)
                            resp = event.decode()
                        except Exception as exc:  # a decode failure fails only that request
                            fut.set_exception(exc)
                            continue
                        fut.set_result(resp.body)
                    elif kind is NeedData:
                        break
                    elif kind is StreamEnded:
                        raise asyncio.IncompleteReadError(b"", None)
                    elif kind is ProtocolViolation and event.kind is not Violation.UNKNOWN_CORRELATION_ID:
                        raise ProtocolError(event.message)  # framing lost, or a response without an id
                    # else: a response whose request timed out (unknown correlation id): dropped
        except asyncio.CancelledError:
            raise
        except (asyncio.IncompleteReadError, OSError) as exc:
            err = ConnectionClosed(
                f"connection to {self.host}:{self.port} closed by the peer"
                if isinstance(exc, asyncio.IncompleteReadError)
                else f"connection to {self.host}:{self.port} failed: {exc}"
            )
            self._closed = True
            self._close_reason = err
            self._fail_pending(err)
        except Exception as exc:
            self._closed = True
            self._close_reason = exc
            self._fail_pending(ConnectionClosed(f"connection to {self.host}:{self.port} broken: {exc}"))
        finally:
            if self._writer is not None and self._closed:
                try:
                    self._writer.close()
                except Exception:
                    pass
