"""SASL/OAUTHBEARER (RFC 7628) with Kafka's unsecured JWS tokens, for development: the token is a JWS with
``"alg": "none"`` and no signature, as Kafka's OAuthBearerUnsecuredValidatorCallbackHandler accepts it.
Anyone can mint one: never use it where authentication matters (kafkawire has no JWKS-verified tokens yet,
and a listener configured for them refuses to start).

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
import time

from .sasl import AuthenticationFailed, SaslServer

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


class OAuthBearerServer(SaslServer):
    mechanism = "OAUTHBEARER"

    def __init__(self, principal_claim: str = "sub", required_scope: tuple[str, ...] = (), clock_skew_ms: int = 0):
        self._options = {
            "principal_claim": principal_claim,
            "required_scope": required_scope,
            "clock_skew_ms": clock_skew_ms,
        }
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
        try:
            principal = validate_unsecured(auth[len("Bearer ") :].strip(), **self._options)  # type: ignore[arg-type]
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
