"""SASL/OAUTHBEARER (RFC 7628) with Kafka's two validators:

* verified tokens (:class:`JwksValidator`, Kafka's OAuthBearerValidatorCallbackHandler): a JWS signed by one of
  the keys of ``sasl.oauthbearer.jwks.endpoint.url`` (a ``file:`` URL, read again every
  ``sasl.oauthbearer.jwks.endpoint.refresh.ms``, or an https URL, fetched off the event loop by PyJWT's
  client), with ``exp`` and ``iat`` required, ``sasl.oauthbearer.expected.issuer`` and
  ``sasl.oauthbearer.expected.audience`` checked when set, ``sasl.oauthbearer.clock.skew.seconds`` (30) of
  slack, the principal in ``sasl.oauthbearer.sub.claim.name`` (sub) and the scopes in
  ``sasl.oauthbearer.scope.claim.name`` (scope). ``alg: none`` and HMAC algorithms are refused (a public
  key must never be usable as an HMAC secret);
* Kafka's unsecured JWS tokens, for development: ``"alg": "none"`` and no signature, as Kafka's
  OAuthBearerUnsecuredValidatorCallbackHandler accepts them. Anyone can mint one: never use it where
  authentication matters.

Exchange: the client's initial response ``n,[a=authzid],^Aauth=Bearer <token>^A[key=value^A]...^A``; an
accepted token is answered with nothing. A refused one is answered with ``{"status":"invalid_token"}``; the
client acknowledges with a lone ``^A`` and authentication fails (SASL_AUTHENTICATION_FAILED), as Kafka does.

Checks, with Kafka's option names (``unsecuredValidator*`` options of the listener's
``oauthbearer.sasl.jaas.config``): a header whose ``alg`` is ``none``, a payload with the principal claim
(``sub``, or ``unsecuredValidatorPrincipalClaimName``), an ``exp`` in the future and an ``iat`` not in the
future (``unsecuredValidatorAllowableClockSkewMs`` of slack, default 0), and every scope of
``unsecuredValidatorRequiredScope`` in ``scope``.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from dataclasses import dataclass, field

from .sasl import AuthenticationFailed, SaslServer

log = logging.getLogger("kafkawire.security")
INVALID_TOKEN = b'{"status":"invalid_token"}'


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def validate_unsecured(
    token: str,
    *,
    principal_claim: str = "sub",
    required_scope: tuple[str, ...] = (),
    clock_skew_ms: int = 0,
    now: float | None = None,
) -> str:
    """The principal of an unsecured JWS, or ``ValueError`` saying why it is refused."""
    parts = token.split(".")
    if len(parts) != 3 or parts[2] != "":
        raise ValueError("not an unsecured JWS (header.payload. with an empty signature)")
    try:
        header = json.loads(_b64url(parts[0]))
        payload = json.loads(_b64url(parts[1]))
    except (ValueError, UnicodeDecodeError):
        raise ValueError("the JWS header or payload is not base64url JSON") from None
    if not isinstance(header, dict) or header.get("alg") != "none":
        raise ValueError("the JWS header's alg is not none")
    if not isinstance(payload, dict):
        raise ValueError("the JWS payload is not a JSON object")
    now_ms = (time.time() if now is None else now) * 1000
    principal = payload.get(principal_claim)
    if not isinstance(principal, str) or not principal:
        raise ValueError(f"no {principal_claim} claim")
    exp = payload.get("exp")
    if not isinstance(exp, (int, float)) or isinstance(exp, bool):
        raise ValueError("no numeric exp claim")
    if exp * 1000 + clock_skew_ms <= now_ms:
        raise ValueError("the token has expired")
    iat = payload.get("iat")
    if iat is not None and (not isinstance(iat, (int, float)) or iat * 1000 - clock_skew_ms > now_ms):
        raise ValueError("the token was issued in the future")
    scope = payload.get("scope", [])
    scopes = set(scope.split() if isinstance(scope, str) else scope if isinstance(scope, list) else [])
    missing = [s for s in required_scope if s not in scopes]
    if missing:
        raise ValueError(f"the token lacks the required scope {missing}")
    return principal


# asymmetric signatures only: Kafka's validator (jose4j) takes the key's algorithm from the JWKS; an HMAC
# algorithm would let anyone holding the public key sign
SIGNATURE_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
MAX_JWKS_BYTES = 1 << 20  # a JWKS file larger than this is refused (keys are a few hundred bytes each)


@dataclass
class JwksValidator:
    """Kafka's verified-token validator for one listener; ``validate(token)`` is the principal and scopes, or
    ``ValueError`` saying why the token is refused. The keys are read when the listener is configured (a
    missing or unreadable key set stops ``serve`` with the key named) and read again in a background thread
    once ``refresh_ms`` has passed or a token names a key not yet known (at most once a second): validation
    itself never waits for a file or the network, and a failed refresh keeps the keys already read."""

    jwks_url: str
    issuer: str | None = None
    audience: tuple[str, ...] = ()
    clock_skew_s: int = 30
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    refresh_ms: int = 3_600_000
    _keys: dict = field(default_factory=dict, repr=False)
    _loaded_at: float = 0.0
    _refreshing: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self):
        if not self.jwks_url.startswith(("file:", "https://")):
            raise ValueError(f"{self.jwks_url!r} is neither a file: nor an https:// URL")
        self._keys = self._read_keys()
        self._loaded_at = time.monotonic()

    def _read_keys(self) -> dict:
        import jwt  # PyJWT[crypto], the oauth extra

        if self.jwks_url.startswith("file:"):
            from urllib.parse import unquote, urlparse

            source = unquote(urlparse(self.jwks_url).path)
            with open(source, "rb") as f:
                data = f.read(MAX_JWKS_BYTES + 1)
            if len(data) > MAX_JWKS_BYTES:
                raise ValueError(f"{source} is larger than {MAX_JWKS_BYTES} bytes")
            text = data.decode("utf-8", "replace")
            try:
                keys = jwt.PyJWKSet.from_json(text).keys
            except (jwt.exceptions.PyJWTError, ValueError) as exc:
                raise ValueError(f"{source} is not a JSON Web Key Set: {exc}") from None
        else:
            source = self.jwks_url
            try:
                keys = jwt.PyJWKClient(source, cache_jwk_set=False, timeout=10).get_signing_keys()
            except jwt.exceptions.PyJWTError as exc:
                raise ValueError(f"cannot read the JSON Web Key Set at {source}: {exc}") from None
        usable = {k.key_id: k for k in keys if k.public_key_use in (None, "sig")}
        if not usable:
            raise ValueError(f"{source} holds no signing key")
        return usable

    def _refresh_soon(self, unknown_key: bool) -> None:
        age = time.monotonic() - self._loaded_at
        if age < (1.0 if unknown_key else self.refresh_ms / 1000.0) or not self._refreshing.acquire(blocking=False):
            return

        def refresh():
            try:
                self._keys = self._read_keys()
            except (OSError, ValueError) as exc:  # keep the keys already read: a rotation half-written must not
                log.warning("JWKS %s not refreshed, keeping the keys read before: %s", self.jwks_url, exc)
            finally:
                self._loaded_at = time.monotonic()
                self._refreshing.release()

        threading.Thread(target=refresh, name="kafkawire-jwks-refresh", daemon=True).start()

    def _key_for(self, token: str):
        import jwt

        self._refresh_soon(unknown_key=False)
        kid = jwt.get_unverified_header(token).get("kid")
        keys = self._keys
        if kid in keys:
            return keys[kid]
        if kid is None and len(keys) == 1:
            return next(iter(keys.values()))
        self._refresh_soon(unknown_key=True)
        raise ValueError(f"no key {kid!r} in the JWKS")

    def validate(self, token: str) -> tuple[str, list[str]]:
        import jwt

        try:
            algorithm = jwt.get_unverified_header(token).get("alg")
            if algorithm not in SIGNATURE_ALGORITHMS:
                raise ValueError(f"the token's algorithm {algorithm!r} is not an accepted signature algorithm")
            key = self._key_for(token)
            options = {"require": ["exp", "iat"], "verify_aud": bool(self.audience)}
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                audience=list(self.audience) or None,
                issuer=self.issuer or None,
                leeway=self.clock_skew_s,
                options=options,  # type: ignore[arg-type]
            )
        except jwt.exceptions.PyJWTError as exc:
            raise ValueError(str(exc) or type(exc).__name__) from None
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal:
            raise ValueError(f"no {self.principal_claim} claim")
        scope = claims.get(self.scope_claim, [])
        scopes = scope.split() if isinstance(scope, str) else [s for s in scope if isinstance(s, str)]
        return principal, scopes


class OAuthBearerServer(SaslServer):
    mechanism = "OAUTHBEARER"

    def __init__(
        self,
        principal_claim: str = "sub",
        required_scope: tuple[str, ...] = (),
        clock_skew_ms: int = 0,
        validator: JwksValidator | None = None,
    ):
        self._options = {
            "principal_claim": principal_claim,
            "required_scope": required_scope,
            "clock_skew_ms": clock_skew_ms,
        }
        self._validator = validator
        self._refused: str | None = None

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("SASL/OAUTHBEARER exchange already finished")
        if self._refused is not None:  # the client's acknowledgement of the error answer
            raise AuthenticationFailed(f"Authentication failed: {self._refused}")
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message: not UTF-8") from None
        gs2, sep, rest = text.partition("\x01")
        if not sep or not gs2.startswith("n,") or not gs2.endswith(","):
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message")
        authzid = gs2[2:-1]
        fields = dict(kv.split("=", 1) for kv in rest.split("\x01") if "=" in kv)
        auth = fields.get("auth", "")
        if not auth.startswith("Bearer "):
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message: no Bearer token")
        token = auth[len("Bearer ") :].strip()
        try:
            if self._validator is not None:
                principal, _scopes = self._validator.validate(token)
            else:
                principal = validate_unsecured(token, **self._options)  # type: ignore[arg-type]
        except ValueError as exc:
            self._refused = str(exc)
            return INVALID_TOKEN
        if authzid and authzid != f"a={principal}":
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from the token's principal"
            )
        self.user = principal
        self.complete = True
        self.principal = principal
        return b""
