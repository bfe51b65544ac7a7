"""TLS on a listening socket, with the alert of a failed handshake sent before the connection closes.

asyncio's TLS (``asyncio.sslproto.SSLProtocol``, Python 3.11 and later) aborts the transport as soon as the
server's handshake fails, without writing out what OpenSSL put in its outgoing buffer: the TLS alert
(``certificate_required``, ``unknown_ca``, ...). A client then sees a connection reset, not a refusal, and
some retry it until their timeout: the Java client raises ``SslAuthenticationException`` only when it gets
the alert, as Kafka sends it. ``AlertingTLSProtocol`` writes the outgoing buffer before the failure is
handled; a small alert goes out at once (the transport writes straight to the socket when it has nothing
buffered), before the abort closes the socket.

``tls_protocol_factory`` wraps an application protocol factory as ``loop.create_server(ssl=...)`` would,
with this protocol instead of asyncio's; on an interpreter whose ``SSLProtocol`` lacks the methods this
relies on it returns None and the caller passes ``ssl=`` as usual (the handshake still fails, silently).
"""

from __future__ import annotations

import asyncio
import ssl
from asyncio import sslproto
from collections.abc import Callable

_HOOKS = ("_do_handshake", "_process_outgoing", "_on_handshake_complete")
_SUPPORTED = all(hasattr(sslproto.SSLProtocol, name) for name in _HOOKS)


class AlertingTLSProtocol(sslproto.SSLProtocol):
    """asyncio's server-side TLS protocol, except that a failed handshake flushes the alert first."""

    def _do_handshake(self) -> None:
        try:
            self._sslobj.do_handshake()  # type: ignore[attr-defined]
        except (ssl.SSLWantReadError, ssl.SSLSyscallError):
            self._process_outgoing()  # type: ignore[attr-defined]
        except ssl.SSLError as exc:
            self._process_outgoing()  # type: ignore[attr-defined]  # the alert OpenSSL wrote for this failure
            self._on_handshake_complete(exc)  # type: ignore[attr-defined]
        else:
            self._on_handshake_complete(None)  # type: ignore[attr-defined]


def tls_protocol_factory(
    app_factory: Callable[[], asyncio.BaseProtocol], context: ssl.SSLContext, handshake_timeout: float
) -> Callable[[], asyncio.BaseProtocol] | None:
    """A protocol factory for ``loop.create_server`` (without ``ssl=``) serving TLS with ``context``, or None
    where this interpreter's asyncio cannot be extended so."""
    if not _SUPPORTED:
        return None
    loop = asyncio.get_running_loop()

    def make() -> asyncio.BaseProtocol:
        return AlertingTLSProtocol(
            loop, app_factory(), context, None, server_side=True, ssl_handshake_timeout=handshake_timeout
        )

    return make
