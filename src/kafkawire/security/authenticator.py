"""One connection's SASL authentication, as Kafka's SaslServerAuthenticator runs it, sans-IO.

States (``state``)::

    HANDSHAKE     ApiVersions and SaslHandshake allowed          --SaslHandshake v1--> AUTHENTICATE
                                                                 --SaslHandshake v0--> TOKENS
    AUTHENTICATE  SaslAuthenticate carries the tokens            --mechanism done----> COMPLETE
    TOKENS        bare length-prefixed tokens (no Kafka header)  --mechanism done----> COMPLETE
    COMPLETE      authenticated: every API served
    FAILED        the answer (if any) is written, then the connection is closed

What Kafka does, and so this: a mechanism the listener does not enable gets UNSUPPORTED_SASL_MECHANISM
with the enabled list, then the connection closes; a SaslHandshake during AUTHENTICATE gets
ILLEGAL_SASL_STATE and the close; a SaslAuthenticate before the handshake closes without an answer; a
failed login gets SASL_AUTHENTICATION_FAILED (or, with v0 bare tokens, nothing) and the close after
``connection.failed.authentication.delay.ms``, so one connection tries one password per delay. Failures are
logged with the peer, mechanism and claimed user name, never the token.
"""

from __future__ import annotations

import enum
import logging

import msgspec

from kafkawire.protocol import errors

from .listeners import Listener
from .sasl import AuthenticationFailed, PlainServer, SaslServer
from .scram import MECHANISMS, CredentialStore, ScramServer

log = logging.getLogger("kafkawire.security")


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    TOKENS = "tokens"
    COMPLETE = "complete"
    FAILED = "failed"


class Outcome(msgspec.Struct, frozen=True):
    """What to answer and whether to close afterwards (``close``) or open up (``complete``)."""

    error_code: int = 0
    error_message: str | None = None
    token: bytes = b""
    close: bool = False
    complete: bool = False
    session_lifetime_ms: int = 0  # after a completed login: re-authenticate within this (KIP-368); 0: never


class ConnectionAuthenticator:
    def __init__(self, listener: Listener, credentials: CredentialStore, peer: str = "?"):
        self.listener = listener
        self.credentials = credentials
        self.peer = peer
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._server: SaslServer | None = None
        self.reauthenticating = False

    def handshake(self, mechanism: str, version: int) -> Outcome:
        if self.state is SaslState.COMPLETE:
            if not self.listener.reauth_ms or version < 1:
                # an authenticated connection: Kafka's request handler answers, without closing
                return Outcome(errors.ILLEGAL_SASL_STATE)
            # re-authentication (KIP-368): the same mechanism again, on the same connection
            if mechanism != self.mechanism:
                self.state = SaslState.FAILED
                log.warning(
                    "connection from %s: re-authentication with %r after %s refused",
                    self.peer,
                    mechanism[:64],
                    self.mechanism,
                )
                return Outcome(errors.ILLEGAL_SASL_STATE, close=True)
            self.reauthenticating = True
            self.state = SaslState.HANDSHAKE
        if self.state is not SaslState.HANDSHAKE:
            self.state = SaslState.FAILED
            return Outcome(errors.ILLEGAL_SASL_STATE, close=True)
        if mechanism not in self.listener.mechanisms:
            self.state = SaslState.FAILED
            log.warning(
                "connection from %s: SASL mechanism %r is not enabled on listener %s (enabled: %s)",
                self.peer,
                mechanism[:64],
                self.listener.name,
                ", ".join(self.listener.mechanisms),
            )
            return Outcome(errors.UNSUPPORTED_SASL_MECHANISM, close=True)
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._server = PlainServer(self.listener.plain_users)
        elif mechanism == "OAUTHBEARER":
            # imported on first use: a broker without an OAUTHBEARER listener never needs it at start
            from .oauthbearer import OAuthBearerServer

            self._server = OAuthBearerServer(**self.listener.oauth_options)
        else:
            self._server = ScramServer(mechanism, self.credentials)
        self.state = SaslState.AUTHENTICATE if version >= 1 else SaslState.TOKENS
        return Outcome()

    def authenticate(self, token: bytes) -> Outcome:
        """A SaslAuthenticate request's ``auth_bytes``."""
        if self.state is SaslState.COMPLETE:
            return Outcome(
                errors.ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication"
            )
        if self.state is not SaslState.AUTHENTICATE:
            self.state = SaslState.FAILED
            return Outcome(
                errors.ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate request during SASL handshake", close=True
            )
        return self._step(token)

    def raw_token(self, token: bytes) -> Outcome:
        """A bare token after SaslHandshake v0 (a failure has no answer: v0 clients read none)."""
        if self.state is not SaslState.TOKENS:
            self.state = SaslState.FAILED
            return Outcome(errors.ILLEGAL_SASL_STATE, close=True)
        return self._step(token)

    def _step(self, token: bytes) -> Outcome:
        server = self._server
        assert server is not None
        if len(token) > self.listener.max_receive:
            self.state = SaslState.FAILED
            return Outcome(
                errors.SASL_AUTHENTICATION_FAILED, "SASL token above sasl.server.max.receive.size", close=True
            )
        try:
            answer = server.step(token)
        except AuthenticationFailed as exc:
            self.state = SaslState.FAILED
            log.warning(
                "connection from %s: SASL %s authentication failed for user %r on listener %s: %s",
                self.peer,
                self.mechanism,
                (server.user or "")[:128],
                self.listener.name,
                exc,
            )
            return Outcome(errors.SASL_AUTHENTICATION_FAILED, str(exc), close=True)
        if server.complete:
            self.state = SaslState.COMPLETE
            if self.reauthenticating and server.principal != self.principal:
                self.state = SaslState.FAILED
                log.warning(
                    "connection from %s: re-authentication as User:%s on a connection of User:%s refused",
                    self.peer,
                    server.principal,
                    self.principal,
                )
                return Outcome(
                    errors.SASL_AUTHENTICATION_FAILED, "Cannot change principals during re-authentication", close=True
                )
            self.reauthenticating = False
            self.principal = server.principal
            log.info(
                "connection from %s: authenticated as User:%s with SASL %s on listener %s",
                self.peer,
                self.principal,
                self.mechanism,
                self.listener.name,
            )
            return Outcome(token=answer, complete=True, session_lifetime_ms=self.listener.reauth_ms)
        return Outcome(token=answer)


__all__ = ["ConnectionAuthenticator", "Outcome", "SaslState", "MECHANISMS"]
