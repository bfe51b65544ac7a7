"""SASL mechanisms, client side, as state machines: the server's token in, the client's next token out.

The mirror of :mod:`kafkawire.security.sasl`: each :class:`SaslClient` runs one exchange. ``first()`` is the
client's initial response; ``step(server_token)`` returns the next token to send, or None when the exchange
is over on the client's side; a server answer that does not check out raises :class:`SaslClientError`
(SCRAM's server signature, a malformed challenge). No I/O: ``kafkawire.client.connection`` carries the
tokens in SaslAuthenticate requests.

Mechanisms: PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802, RFC 7677, as Kafka runs them: no channel binding)
and OAUTHBEARER (RFC 7628: a bearer token from a provider, or Kafka's unsecured development token).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import unicodedata
from collections.abc import Callable

from .scram import MECHANISMS as SCRAM_MECHANISMS, salted_password


class SaslClientError(Exception):
    """The server's SASL answer is not what the mechanism expects: the client does not trust it."""


class SaslClient:
    mechanism = ""
    complete = False

    def first(self) -> bytes:  # pragma: no cover - each mechanism defines it
        raise NotImplementedError

    def step(self, server_token: bytes) -> bytes | None:
        """The answer to the server's token; None: nothing more to send."""
        self.complete = True
        return None


class PlainClient(SaslClient):
    mechanism = "PLAIN"

    def __init__(self, username: str, password: str, authzid: str = ""):
        self._message = f"{authzid}\0{username}\0{password}".encode()

    def first(self) -> bytes:
        return self._message


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramClient(SaslClient):
    """client-first -> server-first -> client-final -> server-final (the server's signature is checked)."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None):
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._hash = SCRAM_MECHANISMS[mechanism][1]
        # SASLprep reduced to NFKC: what Kafka's Java client applies (it does not map or prohibit further)
        self._password = unicodedata.normalize("NFKC", password).encode()
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._auth_message = b""
        self._server_key = b""
        self._stage = 0

    def first(self) -> bytes:
        return b"n,," + self._first_bare.encode()

    def step(self, server_token: bytes) -> bytes | None:
        if self._stage == 0:
            return self._client_final(bytes(server_token).decode("utf-8", "replace"))
        if self._stage == 1:
            self._verify(bytes(server_token).decode("utf-8", "replace"))
            return None
        raise SaslClientError("SCRAM exchange already finished")

    def _client_final(self, server_first: str) -> bytes:
        attrs = dict(part.split("=", 1) for part in server_first.split(",") if "=" in part)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if "e" in attrs:
            raise SaslClientError(f"SCRAM server error: {attrs['e']}")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce) or salt is None:
            raise SaslClientError("invalid SCRAM server first message")
        try:
            salt_bytes = base64.b64decode(salt, validate=True)
            rounds = int(iterations)
        except ValueError:
            raise SaslClientError("invalid SCRAM server first message") from None
        low, high = SCRAM_MECHANISMS[self.mechanism][2], 1 << 20
        if not low <= rounds <= high:  # a server may not make the client spin for ever
            raise SaslClientError(f"SCRAM iteration count {rounds} outside [{low}, {high}]")
        salted = salted_password(self.mechanism, self._password, salt_bytes, rounds)
        client_key = hmac.new(salted, b"Client Key", self._hash).digest()
        stored_key = hashlib.new(self._hash, client_key).digest()
        self._server_key = hmac.new(salted, b"Server Key", self._hash).digest()
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        self._auth_message = f"{self._first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, self._auth_message, self._hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._stage = 1
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify(self, server_final: str) -> None:
        self._stage = 2
        attrs = dict(part.split("=", 1) for part in server_final.split(",") if "=" in part)
        if "e" in attrs:
            raise SaslClientError(f"SCRAM server error: {attrs['e']}")
        expected = hmac.new(self._server_key, self._auth_message, self._hash).digest()
        try:
            given = base64.b64decode(attrs.get("v", ""), validate=True)
        except ValueError:
            given = b""
        if not hmac.compare_digest(given, expected):
            raise SaslClientError("the SCRAM server's signature does not match: not the broker holding the credential")
        self.complete = True


#: A token provider: returns (token, lifetime end in seconds since the epoch), as confluent-kafka's oauth_cb
TokenProvider = Callable[[], "tuple[str, float]"]


def unsecured_token(principal: str, *, scope: tuple[str, ...] = (), lifetime_s: float = 3600.0) -> tuple[str, float]:
    """Kafka's unsecured development token (a JWS with ``alg: none``), as its OAuthBearerUnsecuredLoginCallbackHandler
    and librdkafka's ``enable.sasl.oauthbearer.unsecure.jwt`` make it: anyone can make one."""

    def part(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).rstrip(b"=").decode()

    now = time.time()
    claims: dict = {"sub": principal, "iat": int(now), "exp": int(now + lifetime_s)}
    if scope:
        claims["scope"] = list(scope)
    return f"{part({'alg': 'none'})}.{part(claims)}.", now + lifetime_s


class OAuthBearerClient(SaslClient):
    """``n,,^Aauth=Bearer <token>^A^A``; a refusal comes back as a JSON error, acknowledged with ``^A``."""

    mechanism = "OAUTHBEARER"

    def __init__(self, token: str, extensions: dict[str, str] | None = None):
        self._token = token
        self._extensions = dict(extensions or {})
        self.error: str | None = None

    def first(self) -> bytes:
        ext = "".join(f"{k}={v}\x01" for k, v in sorted(self._extensions.items()))
        return f"n,,\x01auth=Bearer {self._token}\x01{ext}\x01".encode()

    def step(self, server_token: bytes) -> bytes | None:
        if server_token:  # RFC 7628's error answer: the client acknowledges it, the server then fails the login
            self.error = bytes(server_token).decode("utf-8", "replace")
            return b"\x01"
        self.complete = True
        return None
