"""SASL mechanisms, server side, as state machines: a client token in, the server's token out.

Each :class:`SaslServer` runs one exchange: ``step(token)`` returns the bytes to send back, or raises
:class:`AuthenticationFailed` (its message is what the client is told, as Kafka tells it: it never
contains the secret). ``complete`` turns true when the client is authenticated, and ``principal``
names it. No I/O: the broker's handlers and the raw-token path of the connection drive them.

Mechanisms: PLAIN (RFC 4616) here, SCRAM-SHA-256/512 in :mod:`kafkawire.security.scram`.
"""

from __future__ import annotations

import hmac
import re


class AuthenticationFailed(Exception):
    """The client is not authenticated; ``str()`` is the message Kafka's clients are given."""


class SaslServer:
    mechanism = ""
    complete = False
    principal: str | None = None
    user: str | None = None  # the user name claimed, once known (for the log; never the secret)

    def step(self, token: bytes) -> bytes:  # pragma: no cover - each mechanism defines it
        raise NotImplementedError


class PlainServer(SaslServer):
    """SASL/PLAIN: one message ``authzid NUL user NUL password``, answered with nothing. ``users`` maps
    user name to password (from the JAAS ``user_<name>="<password>"`` options, as Kafka's
    PlainServerCallbackHandler reads them)."""

    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]):
        self._users = users

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("SASL/PLAIN exchange already finished")
        parts = bytes(token).split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        self.user = user
        expected = self._users.get(user)
        # compared in constant time, and compared even for an unknown user, so that timing tells nothing
        ok = hmac.compare_digest((expected if expected is not None else "\0" + password).encode(), password.encode())
        if expected is None or not ok:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.complete = True
        self.principal = user
        return b""


# One JAAS entry: LoginModuleClass flag key="value" key=value ... ;
_JAAS_ENTRY = re.compile(r"^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s*(.*?)\s*;?\s*$", re.S)
_JAAS_OPTION = re.compile(r'\s*([\w.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')


def parse_jaas(text: str, key: str) -> tuple[str, dict[str, str]]:
    """(login module class, options) of a ``sasl.jaas.config`` value; ``ValueError`` naming ``key``."""
    m = _JAAS_ENTRY.match(text)
    if not m:
        raise ValueError(f"{key}: not a JAAS entry ('<LoginModule> required key=\"value\" ...;')")
    options: dict[str, str] = {}
    rest = m.group(3)
    pos = 0
    while pos < len(rest):
        if rest[pos:].strip() in ("", ";"):
            break
        om = _JAAS_OPTION.match(rest, pos)
        if not om:
            raise ValueError(f"{key}: cannot read the JAAS options after {rest[:pos]!r}")
        value = om.group(2) if om.group(2) is not None else om.group(3)
        options[om.group(1)] = re.sub(r"\\(.)", r"\1", value)
        pos = om.end()
    return m.group(1), options


def plain_users_from_jaas(options: dict[str, str]) -> dict[str, str]:
    return {k[len("user_") :]: v for k, v in options.items() if k.startswith("user_") and len(k) > len("user_")}
