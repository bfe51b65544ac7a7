"""SASL mechanisms and one connection's SASL state, without sockets: PLAIN, SCRAM-SHA-256 (checked
against RFC 7677's worked example), SCRAM-SHA-512 (against kafka-python's SCRAM client), and the order of
events Kafka's SaslServerAuthenticator enforces."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from kafkawire.protocol import errors
from kafkawire.security.authenticator import ConnectionAuthenticator, SaslState
from kafkawire.security.listeners import Listener
from kafkawire.security.sasl import AuthenticationFailed, PlainServer, parse_jaas, plain_users_from_jaas
from kafkawire.security.scram import CredentialStore, ScramServer, make_credential

# ---------------------------------------------------------------------------------------------- PLAIN


def test_plain_accepts_the_configured_password_and_names_the_user():
    server = PlainServer({"alice": "alice-secret"})
    assert server.step(b"\0alice\0alice-secret") == b""
    assert server.complete and server.principal == "alice"


@pytest.mark.parametrize(
    "token, message",
    [
        (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
        (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password"),
        (b"\0\0x", "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (b"alice\0alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (
            b"bob\0alice\0alice-secret",
            "Authentication failed: Client requested an authorization id that is different from username",
        ),
    ],
)
def test_plain_refuses_with_kafkas_message_and_never_the_password(token, message):
    server = PlainServer({"alice": "alice-secret"})
    with pytest.raises(AuthenticationFailed) as info:
        server.step(token)
    assert str(info.value) == message
    assert "secret" not in str(info.value) and not server.complete


def test_jaas_users_are_read_from_the_plain_login_module_options():
    module, options = parse_jaas(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="a \\"quoted\\" secret";',
        "k",
    )
    assert module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert plain_users_from_jaas(options) == {"admin": "admin-secret", "alice": 'a "quoted" secret'}


# ---------------------------------------------------------------------------------------------- SCRAM

RFC7677 = {  # RFC 7677 section 3: user "user", password "pencil"
    "client_first": b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    "server_nonce": "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    "salt": base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="),
    "server_first": b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    "client_final": b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    "server_final": b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
}


def _rfc_store():
    store = CredentialStore()
    store.apply({("user", "SCRAM-SHA-256"): make_credential("SCRAM-SHA-256", "pencil", 4096, RFC7677["salt"])}, set())
    return store


def test_scram_sha_256_replays_rfc_7677s_example():
    server = ScramServer("SCRAM-SHA-256", _rfc_store(), server_nonce=lambda: RFC7677["server_nonce"])
    assert server.step(RFC7677["client_first"]) == RFC7677["server_first"]
    assert server.step(RFC7677["client_final"]) == RFC7677["server_final"]
    assert server.complete and server.principal == "user"


def test_scram_refuses_a_wrong_proof_and_an_unknown_user_with_the_same_words():
    server = ScramServer("SCRAM-SHA-256", _rfc_store(), server_nonce=lambda: RFC7677["server_nonce"])
    server.step(RFC7677["client_first"])
    bad = RFC7677["client_final"].replace(b"p=dHzb", b"p=eHzb")
    with pytest.raises(AuthenticationFailed) as wrong:
        server.step(bad)
    with pytest.raises(AuthenticationFailed) as unknown:
        ScramServer("SCRAM-SHA-256", _rfc_store()).step(b"n,,n=nobody,r=abc")
    expected = (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
    )
    assert str(wrong.value) == str(unknown.value) == expected
    assert not server.complete


def test_scram_refuses_a_nonce_it_did_not_send_and_a_delegation_token():
    server = ScramServer("SCRAM-SHA-256", _rfc_store(), server_nonce=lambda: RFC7677["server_nonce"])
    server.step(RFC7677["client_first"])
    with pytest.raises(AuthenticationFailed, match="nonce"):
        server.step(RFC7677["client_final"].replace(b"k0,p=", b"k1,p="))
    server = ScramServer("SCRAM-SHA-256", _rfc_store(), server_nonce=lambda: RFC7677["server_nonce"])
    server.step(RFC7677["client_first"])
    with pytest.raises(AuthenticationFailed, match="nonce"):  # the client's part alone
        server.step(b"c=biws,r=rOprNGfwEbeRWgbNEkqO,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")


def test_scram_refuses_a_nonce_with_anything_before_the_combined_one_as_kafka_4_4_does():
    store = CredentialStore()
    store.apply({("carol", "SCRAM-SHA-512"): make_credential("SCRAM-SHA-512", "carol-secret", 4096)}, set())
    server = ScramServer("SCRAM-SHA-512", store)
    first = server.step(b"n,,n=carol,r=cnonce")
    # librdkafka 2.0's client-final message: its own nonce again in front of the combined one
    final, _ = _client_final("SCRAM-SHA-512", "carol-secret", "n=carol,r=cnonce", first, nonce_prefix="cnonce")
    with pytest.raises(AuthenticationFailed, match="nonce"):
        server.step(final)
    assert not server.complete
    with pytest.raises(AuthenticationFailed, match="delegation tokens"):
        ScramServer("SCRAM-SHA-256", _rfc_store()).step(b"n,,n=user,r=abc,tokenauth=true")


def _client_final(
    mechanism: str, password: str, client_first_bare: str, server_first: bytes, nonce_prefix: str = ""
) -> tuple[bytes, bytes]:
    """A SCRAM client's final message and the server signature it expects, computed here from RFC 5802's
    definitions (a second implementation to check the server against)."""
    name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    attrs = dict(a.split("=", 1) for a in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac(name, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored = hashlib.new(name, client_key).digest()
    without_proof = f"c=biws,r={nonce_prefix}{attrs['r']}"
    auth = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
    proof = bytes(a ^ b for a, b in zip(client_key, hmac.new(stored, auth, name).digest()))
    server_sig = hmac.new(hmac.new(salted, b"Server Key", name).digest(), auth, name).digest()
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode(), b"v=" + base64.b64encode(server_sig)


def test_scram_sha_512_with_an_independent_client():
    store = CredentialStore()
    store.apply({("carol", "SCRAM-SHA-512"): make_credential("SCRAM-SHA-512", "carol-secret", 4096)}, set())
    server = ScramServer("SCRAM-SHA-512", store)
    first = server.step(b"n,,n=carol,r=clientnonce")
    final, expected = _client_final("SCRAM-SHA-512", "carol-secret", "n=carol,r=clientnonce", first)
    assert server.step(final) == expected and server.complete


def test_scram_credentials_survive_a_reopen_of_their_file(tmp_path):
    path = tmp_path / "scram.json"
    store = CredentialStore(str(path))
    store.apply({("bob", "SCRAM-SHA-256"): make_credential("SCRAM-SHA-256", "bob-secret", 8192)}, set())
    assert b"bob-secret" not in path.read_bytes()  # only the derived keys are stored
    again = CredentialStore(str(path))
    assert again.users() == {"bob": {"SCRAM-SHA-256": 8192}}
    server = ScramServer("SCRAM-SHA-256", again)
    first = server.step(b"n,,n=bob,r=xyz")
    final, expected = _client_final("SCRAM-SHA-256", "bob-secret", "n=bob,r=xyz", first)
    assert server.step(final) == expected
    again.apply({}, {("bob", "SCRAM-SHA-256")})
    assert CredentialStore(str(path)).users() == {}


# ------------------------------------------------------------------------------------ connection state


def _auth(mechanisms=("PLAIN", "SCRAM-SHA-256")):
    listener = Listener(
        "SASL_PLAINTEXT",
        "SASL_PLAINTEXT",
        "127.0.0.1",
        0,
        mechanisms=tuple(mechanisms),
        plain_users={"alice": "alice-secret"},
    )
    return ConnectionAuthenticator(listener, CredentialStore(), "test")


def test_handshake_then_authenticate_opens_the_connection():
    auth = _auth()
    assert auth.handshake("PLAIN", 1).error_code == 0 and auth.state is SaslState.AUTHENTICATE
    outcome = auth.authenticate(b"\0alice\0alice-secret")
    assert outcome.complete and not outcome.close and auth.principal == "alice"
    # afterwards Kafka's request handler answers both, without closing
    assert auth.handshake("PLAIN", 1).error_code == errors.ILLEGAL_SASL_STATE
    assert not auth.handshake("PLAIN", 1).close
    assert auth.authenticate(b"x").error_code == errors.ILLEGAL_SASL_STATE


def test_a_mechanism_the_listener_does_not_enable_is_refused_and_closes():
    auth = _auth(("PLAIN",))
    outcome = auth.handshake("SCRAM-SHA-512", 1)
    assert (outcome.error_code, outcome.close, auth.state) == (
        errors.UNSUPPORTED_SASL_MECHANISM,
        True,
        SaslState.FAILED,
    )


def test_a_second_handshake_before_authenticating_is_an_illegal_state_and_closes():
    auth = _auth()
    auth.handshake("PLAIN", 1)
    outcome = auth.handshake("PLAIN", 1)
    assert (outcome.error_code, outcome.close) == (errors.ILLEGAL_SASL_STATE, True)


def test_authenticate_without_a_handshake_is_an_illegal_state_and_closes():
    auth = _auth()
    outcome = auth.authenticate(b"\0alice\0alice-secret")
    assert (outcome.error_code, outcome.close, auth.state) == (errors.ILLEGAL_SASL_STATE, True, SaslState.FAILED)


def test_a_wrong_password_fails_once_and_closes():
    auth = _auth()
    auth.handshake("PLAIN", 1)
    outcome = auth.authenticate(b"\0alice\0wrong")
    assert (outcome.error_code, outcome.close) == (errors.SASL_AUTHENTICATION_FAILED, True)
    # the connection gets no second guess
    assert auth.authenticate(b"\0alice\0alice-secret").error_code == errors.ILLEGAL_SASL_STATE


def test_handshake_v0_switches_to_bare_tokens():
    auth = _auth()
    auth.handshake("PLAIN", 0)
    assert auth.state is SaslState.TOKENS
    assert auth.authenticate(b"\0alice\0alice-secret").close  # SaslAuthenticate is not how v0 goes on
    auth = _auth()
    auth.handshake("PLAIN", 0)
    assert auth.raw_token(b"\0alice\0alice-secret").complete


def test_a_token_above_the_receive_limit_is_refused():
    auth = _auth()
    auth.listener.max_receive = 16
    auth.handshake("PLAIN", 1)
    assert auth.authenticate(b"\0alice\0" + b"x" * 20).error_code == errors.SASL_AUTHENTICATION_FAILED


def test_failed_logins_are_logged_with_the_user_and_without_the_password(caplog):
    auth = _auth()
    auth.handshake("PLAIN", 1)
    with caplog.at_level("WARNING", logger="kafkawire.security"):
        auth.authenticate(b"\0alice\0hunter2-wrong")
    assert "alice" in caplog.text and "hunter2" not in caplog.text
