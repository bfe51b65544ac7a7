"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's broker runs them, sans-IO.

A credential is what Kafka stores per user and mechanism: salt, iteration count, StoredKey and
ServerKey (never the password, never the salted password). AlterUserScramCredentials sends the
salted password; the broker derives the two keys from it and forgets it.

:class:`ScramServer` is the server side of one exchange: ``step(token)`` takes the client's message
and returns the server's, or raises :class:`~kafkawire.security.sasl.AuthenticationFailed`.
Kafka's departures from the RFC are kept: the client's first message may carry extensions after the
nonce (``tokenauth=true`` asks for a delegation token, which kafkawire does not have, so it is
refused), and an authorization id must equal the user name.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import threading

import msgspec

from .sasl import AuthenticationFailed, SaslServer

# Kafka's ScramMechanism: its id in AlterUserScramCredentials, hash, and the iteration bounds it accepts
log = logging.getLogger(__name__)

MECHANISMS = {"SCRAM-SHA-256": (1, "sha256", 4096, 16384), "SCRAM-SHA-512": (2, "sha512", 4096, 16384)}
MECHANISM_BY_ID = {v[0]: k for k, v in MECHANISMS.items()}
DEFAULT_ITERATIONS = 8192


class ScramCredential(msgspec.Struct, frozen=True):
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with HMAC of the mechanism's hash."""
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism][1], password, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    name = MECHANISMS[mechanism][1]
    client_key = _hmac(name, salted, b"Client Key")
    return ScramCredential(salt, iterations, hashlib.new(name, client_key).digest(), _hmac(name, salted, b"Server Key"))


def make_credential(
    mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    import secrets  # here and at a SCRAM exchange: not among the modules every broker start imports (~1.5 ms)

    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(
        mechanism, salted_password(mechanism, password.encode(), salt, iterations), salt, iterations
    )


def _random_nonce() -> str:
    import secrets

    return secrets.token_urlsafe(24)


class CredentialStore:
    """SCRAM credentials by (user, mechanism). With a ``path`` every change is written to that JSON file
    atomically (fsynced, renamed) before it is visible, so an acknowledged AlterUserScramCredentials
    survives a crash; without one (the memory engine) they live as long as the process."""

    def __init__(self, path: str | None = None, *, metadata_log=None):
        self.path = path
        self._lock = threading.Lock()
        self._creds: dict[tuple[str, str], ScramCredential] = {}
        # With the data directory's KRaft metadata log (storage.metadata.metadata_log_of), credentials are
        # UserScramCredentialRecords there, as in Kafka; ``path`` is then an older kafkawire's file, moved
        # into the log once.
        self._metadata_log = metadata_log
        if metadata_log is not None:
            self._load_from_metadata_log(metadata_log)
            return
        if path is not None and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for entry in json.load(f)["credentials"]:
                    self._creds[(entry["user"], entry["mechanism"])] = ScramCredential(
                        base64.b64decode(entry["salt"]),
                        int(entry["iterations"]),
                        base64.b64decode(entry["stored_key"]),
                        base64.b64decode(entry["server_key"]),
                    )

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._creds.get((user, mechanism))

    def users(self) -> dict[str, dict[str, int]]:
        """user -> {mechanism: iterations}."""
        out: dict[str, dict[str, int]] = {}
        for (user, mech), cred in sorted(self._creds.items()):
            out.setdefault(user, {})[mech] = cred.iterations
        return out

    def apply(self, upserts: dict[tuple[str, str], ScramCredential], deletes: set[tuple[str, str]]) -> None:
        """Change several credentials at once (one file write)."""
        with self._lock:
            creds = dict(self._creds)
            for key in deletes:
                creds.pop(key, None)
            creds.update(upserts)
            if self._metadata_log is not None:
                self._metadata_log.save_scram(
                    {
                        (u, MECHANISMS[m][0]): (c.salt, c.iterations, c.stored_key, c.server_key)
                        for (u, m), c in upserts.items()
                    },
                    {(u, MECHANISMS[m][0]) for u, m in deletes if m in MECHANISMS},
                )
            elif self.path is not None:
                self._write(creds)
            self._creds = creds

    def _load_from_metadata_log(self, metadata_log) -> None:
        for (user, mech), r in metadata_log.scram_credentials().items():
            if mech in MECHANISM_BY_ID:
                self._creds[(user, MECHANISM_BY_ID[mech])] = ScramCredential(
                    bytes(r.salt), r.iterations, bytes(r.stored_key), bytes(r.server_key)
                )
        if self.path is not None and os.path.exists(self.path):
            legacy = CredentialStore(self.path)._creds
            if legacy and not self._creds:
                self.apply(legacy, set())
                log.info("%d SCRAM credentials moved from %s into the KRaft metadata log", len(legacy), self.path)
            from kafkawire.broker.storage.metadata import set_aside_migrated

            set_aside_migrated(self.path)

    def _write(self, creds) -> None:
        from kafkawire.broker.storage.metadata import write_atomically

        doc = {
            "version": 1,
            "credentials": [
                {
                    "user": u,
                    "mechanism": m,
                    "iterations": c.iterations,
                    "salt": base64.b64encode(c.salt).decode(),
                    "stored_key": base64.b64encode(c.stored_key).decode(),
                    "server_key": base64.b64encode(c.server_key).decode(),
                }
                for (u, m), c in sorted(creds.items())
            ],
        }
        path = self.path
        assert path is not None
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        write_atomically(path, json.dumps(doc, indent=1).encode())


def _saslname(text: str) -> str:
    """RFC 5802's saslname: ``=2C`` is a comma and ``=3D`` an equals sign; any other ``=`` is malformed."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "=":
            code = text[i + 1 : i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise AuthenticationFailed("Invalid SCRAM user name encoding")
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _attributes(text: str) -> list[tuple[str, str]]:
    out = []
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1 and not key.isidentifier():
            raise AuthenticationFailed("Invalid SCRAM message")
        out.append((key, value))
    return out


# The message Kafka gives for a SaslException from the SCRAM server (unknown user, wrong proof): the same
# words whichever it was
_INVALID = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


class ScramServer(SaslServer):
    """One SCRAM exchange, server side: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, store: CredentialStore, server_nonce=None):
        if mechanism not in MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism][1]
        self._store = store
        self._stage = 0
        self._credential: ScramCredential | None = None
        self._gs2 = b""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        # the server's part of the nonce: random; a test passes a function to replay RFC 7677's example
        self._server_nonce = server_nonce or _random_nonce

    def _invalid(self) -> AuthenticationFailed:
        return AuthenticationFailed(_INVALID.format(self.mechanism))

    def step(self, token: bytes) -> bytes:
        if self.complete or self._stage > 1:
            raise AuthenticationFailed("SCRAM exchange already finished")
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SCRAM message: not UTF-8") from None
        if self._stage == 0:
            return self._client_first(text)
        return self._client_final(text)

    def _client_first(self, text: str) -> bytes:
        # gs2-header: "n" (no channel binding; kafkawire offers none), then an optional authzid, then ","
        flag, sep, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep or not sep2 or flag not in ("n", "y"):
            raise AuthenticationFailed("Invalid SCRAM client first message")
        attrs = _attributes(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise AuthenticationFailed("Invalid SCRAM client first message")
        user = _saslname(attrs[0][1])
        extensions = dict(attrs[2:])
        if extensions.get("tokenauth", "").lower() == "true":
            raise AuthenticationFailed("Authentication failed: delegation tokens are not supported by kafkawire")
        if authzid:
            if not authzid.startswith("a=") or _saslname(authzid[2:]) != user:
                raise AuthenticationFailed(
                    "Authentication failed: Client requested an authorization id that is different from username"
                )
        self.user = user
        self._credential = self._store.get(user, self.mechanism)
        if self._credential is None:
            raise self._invalid()
        self._gs2 = text[: len(flag) + len(authzid) + 2].encode()
        self._client_first_bare = bare
        self._nonce = attrs[1][1] + self._server_nonce()
        cred = self._credential
        self._server_first = f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        self._stage = 1
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise AuthenticationFailed("Invalid SCRAM client final message")
        attrs = dict(_attributes(without_proof))
        self._stage = 2
        # exactly the combined nonce (RFC 5802), as Kafka 4.4 checks it: librdkafka 2.0's doubled client nonce
        # (kcat on Debian's 2.0.2) is refused by both
        if attrs.get("r") != self._nonce:
            raise AuthenticationFailed("Invalid SCRAM client final message: nonce does not match")
        try:
            binding = base64.b64decode(attrs.get("c", ""), validate=True)
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise AuthenticationFailed("Invalid SCRAM client final message") from None
        if binding != self._gs2:
            raise AuthenticationFailed("Invalid SCRAM client final message: channel binding does not match")
        cred = self._credential
        assert cred is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self._hash, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise self._invalid()
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), cred.stored_key):
            raise self._invalid()
        self.complete = True
        self.principal = self.user
        return b"v=" + base64.b64encode(_hmac(self._hash, cred.server_key, auth_message))
