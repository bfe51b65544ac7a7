"""SASL/OAUTHBEARER with unsecured (alg none) tokens: what is accepted, what is refused and how."""

from __future__ import annotations

import base64
import json

import pytest

from kafkawire.security.listeners import ListenerError, parse_listeners
from kafkawire.security.oauthbearer import INVALID_TOKEN, OAuthBearerServer, validate_unsecured
from kafkawire.security.sasl import AuthenticationFailed

NOW = 1_800_000_000.0


def _jws(payload: dict, header: dict | None = None) -> str:
    def part(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part(header or {'alg': 'none'})}.{part(payload)}."


def test_a_valid_token_names_its_subject():
    assert validate_unsecured(_jws({"sub": "alice", "exp": NOW + 60, "iat": NOW}), now=NOW) == "alice"


@pytest.mark.parametrize(
    "token, why",
    [
        (_jws({"sub": "alice", "exp": NOW - 1}), "expired"),
        (_jws({"sub": "alice", "exp": NOW + 60, "iat": NOW + 30}), "issued in the future"),
        (_jws({"exp": NOW + 60}), "no sub claim"),
        (_jws({"sub": "alice"}), "no numeric exp"),
        (_jws({"sub": "alice", "exp": NOW + 60}, {"alg": "HS256"}), "alg is not none"),
        (_jws({"sub": "alice", "exp": NOW + 60})[:-1] + "c2ln", "empty signature"),
        ("not-a-token", "unsecured JWS"),
    ],
)
def test_bad_tokens_are_refused_with_the_reason(token, why):
    with pytest.raises(ValueError, match=why):
        validate_unsecured(token, now=NOW)


def test_required_scope_and_principal_claim_options():
    token = _jws({"user": "bob", "exp": NOW + 60, "scope": "read kafka"})
    assert validate_unsecured(token, principal_claim="user", required_scope=("kafka",), now=NOW) == "bob"
    with pytest.raises(ValueError, match="required scope"):
        validate_unsecured(token, principal_claim="user", required_scope=("admin",), now=NOW)


def _first(token: str, authzid: str = "") -> bytes:
    return f"n,{authzid},\x01auth=Bearer {token}\x01\x01".encode()


def test_the_server_accepts_a_good_token_with_an_empty_answer():
    import time

    server = OAuthBearerServer()
    assert server.step(_first(_jws({"sub": "alice", "exp": time.time() + 600}))) == b""
    assert server.complete and server.principal == "alice"


def test_a_refused_token_gets_the_error_document_then_fails_on_the_acknowledgement():
    server = OAuthBearerServer()
    assert server.step(_first(_jws({"sub": "alice", "exp": 1}))) == INVALID_TOKEN
    assert not server.complete
    with pytest.raises(AuthenticationFailed, match="expired"):
        server.step(b"\x01")


def test_an_authorization_id_other_than_the_principal_is_refused():
    import time

    with pytest.raises(AuthenticationFailed, match="authorization id"):
        OAuthBearerServer().step(_first(_jws({"sub": "alice", "exp": time.time() + 600}), "a=bob"))


def test_verified_tokens_are_refused_at_start_naming_the_key():
    with pytest.raises(
        ListenerError, match=r"^listener\.name\.sasl_plaintext\.sasl\.oauthbearer\.jwks\.endpoint\.url:"
    ):
        parse_listeners(
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:9094",
                "sasl.enabled.mechanisms": "OAUTHBEARER",
                "listener.name.sasl_plaintext.sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks",
            }
        )


def test_jaas_options_configure_the_validator():
    [listener] = parse_listeners(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:9094",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredValidatorRequiredScope="a,b" unsecuredValidatorAllowableClockSkewMs="500";',
        }
    )
    assert listener.oauth_options == {"principal_claim": "sub", "required_scope": ("a", "b"), "clock_skew_ms": 500}
