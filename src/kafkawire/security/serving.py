"""The broker's listeners on asyncio: each listener's hooks for ``kafkawire.net.server.FramedServer``
(TLS principal, SASL state per connection, the bare tokens of SaslHandshake v0), and the answers the
SASL handlers build from a connection's :class:`~kafkawire.security.authenticator.ConnectionAuthenticator`."""

from __future__ import annotations

import asyncio
import logging
import socket

from kafkawire.net.server import CloseConnection

from .authenticator import ConnectionAuthenticator, SaslState
from .listeners import Listener
from .principal import apply_rules, subject_name
from .scram import CredentialStore

log = logging.getLogger("kafkawire.security")

SASL = "sasl"  # connection attribute: the ConnectionAuthenticator of a SASL listener's connection
PRINCIPAL = "principal"  # connection attribute: "User:<name>" once known (TLS certificate or SASL)
LISTENER = "listener"


class ListenerSecurity:
    """The ``security`` hooks of one listener's ``FramedServer``."""

    def __init__(self, listener: Listener, credentials: CredentialStore):
        self.listener = listener
        self.credentials = credentials
        self.server = None  # the FramedServer, once made

    def connection_made(self, conn) -> None:
        listener = self.listener
        attrs = conn.attributes
        attrs[LISTENER] = listener
        if listener.tls and conn.transport is not None:
            cert = conn.transport.get_extra_info("peercert")
            if cert:  # verified against the truststore by the handshake (ssl.client.auth requested/required)
                try:
                    attrs[PRINCIPAL] = "User:" + apply_rules(listener.principal_rules, subject_name(cert))
                except ValueError as exc:
                    raise CloseConnection(str(exc)) from None
            else:
                attrs[PRINCIPAL] = "User:ANONYMOUS"
        if listener.sasl:
            attrs[SASL] = ConnectionAuthenticator(listener, self.credentials, conn.peer)
            conn.protocol.require_authentication()
            # before authentication nobody may make the broker buffer more than a SASL token's worth
            conn.protocol.max_frame = min(conn.protocol.max_frame, listener.max_receive)
        elif PRINCIPAL not in attrs:
            attrs[PRINCIPAL] = "User:ANONYMOUS"

    def token_received(self, token: bytes, conn):
        """A bare token (SaslHandshake v0): the mechanism's answer as a bare frame; a failure closes the
        connection after the failed-login delay, with no answer (v0 clients read none)."""
        auth: ConnectionAuthenticator = conn.attributes[SASL]
        outcome = auth.raw_token(token)
        if outcome.close:
            return close_later(
                auth.listener.failed_auth_delay_ms,
                f"SASL authentication failed: {outcome.error_message or 'illegal SASL state'}",
            )
        frame = conn.protocol.send_sasl_token(outcome.token)
        if outcome.complete:
            conn.protocol.end_sasl_tokens()
            opened(conn, auth)  # v0 clients cannot re-authenticate: no session lifetime for them
        return [frame]


def opened(conn, auth: ConnectionAuthenticator, session_lifetime_ms: int = 0) -> None:
    """The connection is authenticated: every API, and frames up to socket.request.max.bytes. With a session
    lifetime (connections.max.reauth.ms), authentication is required again when it ends: a request other than
    ApiVersions and the SASL ones after that closes the connection, as Kafka closes an expired session's, and
    nothing is checked per request meanwhile (a timer re-arms the protocol connection's check)."""
    conn.protocol.authenticated()
    conn.protocol.max_frame = conn.server.max_frame
    conn.attributes[PRINCIPAL] = f"User:{auth.principal}"
    timer = conn.attributes.pop(_EXPIRY, None)
    if timer is not None:
        timer.cancel()
    if session_lifetime_ms > 0:
        conn.attributes[_EXPIRY] = asyncio.get_running_loop().call_later(session_lifetime_ms / 1000.0, _expired, conn)


_EXPIRY = "sasl_session_expiry"


def _expired(conn) -> None:
    if not conn.closed:
        log.info(
            "connection %s from %s: SASL session expired (connections.max.reauth.ms); authentication required again",
            conn.id,
            conn.peer,
        )
        conn.protocol.require_authentication()


async def close_later(delay_ms: int, reason: str):
    """Close (no answer) after the failed-login delay."""
    await asyncio.sleep(delay_ms / 1000.0)
    raise CloseConnection(reason)


def advertised_address(listener: Listener, bound_port: int) -> tuple[str, int]:
    host = listener.advertised_host or listener.host
    if host in ("", "0.0.0.0", "::"):
        host = socket.getfqdn() or "localhost"
    return host, listener.advertised_port or bound_port


def warn_if_open(listener: Listener) -> None:
    """Binding every interface with nobody authenticated is allowed, and said at start."""
    if listener.host in ("", "0.0.0.0", "::") and (
        listener.protocol == "PLAINTEXT" or (listener.protocol == "SSL" and listener.client_auth == "none")
    ):
        log.warning(
            "listener %s binds every interface (%s://%s:%d) and authenticates nobody: any client that "
            "reaches this host can read, write and delete every topic",
            listener.name,
            listener.protocol,
            listener.host,
            listener.port,
        )


__all__ = [
    "ListenerSecurity",
    "SaslState",
    "opened",
    "close_later",
    "advertised_address",
    "warn_if_open",
    "SASL",
    "PRINCIPAL",
    "LISTENER",
]
