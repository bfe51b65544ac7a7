"""SASL on the wire, byte by byte, with kafkawire's protocol connection as a scripted client: the bare
tokens of SaslHandshake v0, the closes Kafka makes (a request before authentication, SaslAuthenticate
before SaslHandshake, an oversized frame before authentication), and the answers on a PLAINTEXT listener."""

from __future__ import annotations

import socket
import struct

import pytest

from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.server import start_in_thread
from kafkawire.protocol import errors
from kafkawire.protocol.connection import NeedData, ProtocolConnection, ResponseReceived, Role
from kafkawire.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)


@pytest.fixture(scope="module")
def broker():
    with socket.socket() as a, socket.socket() as b:
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", 0))
        plain_port, sasl_port = a.getsockname()[1], b.getsockname()[1]
    cfg = BrokerConfig.from_properties(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "sasl.enabled.mechanisms": "PLAIN",
            "kafkawire.sasl.plain.users": "alice:alice-secret",
            "sasl.server.max.receive.size": "4096",
        }
    )
    cfg.storage = "memory"
    with start_in_thread(cfg) as b:
        yield {"PLAINTEXT": plain_port, "SASL_PLAINTEXT": sasl_port}


class Client:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.conn = ProtocolConnection(Role.CLIENT)

    def send(self, body, version: int) -> None:
        self.sock.sendall(self.conn.send_request(body, version))

    def receive(self):
        """The next response, or None when the broker closed the connection."""
        while True:
            event = self.conn.next_event()
            if isinstance(event, ResponseReceived):
                return event.decode().body
            assert isinstance(event, NeedData), event
            data = self.sock.recv(65536)
            if not data:
                return None
            self.conn.receive_data(data)

    def call(self, body, version: int):
        self.send(body, version)
        return self.receive()

    def closed(self) -> bool:
        """True when the broker closes the connection (within the socket timeout) without sending more."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self):
        self.sock.close()


def test_handshake_v0_then_a_bare_plain_token_authenticates(broker):
    client = Client(broker["SASL_PLAINTEXT"])
    answer = client.call(SaslHandshakeRequest(mechanism="PLAIN"), 0)
    assert (answer.error_code, answer.mechanisms) == (0, ["PLAIN"])
    token = b"\0alice\0alice-secret"
    client.sock.sendall(struct.pack(">i", len(token)) + token)  # no Kafka header: v0's bare token
    size = struct.unpack(">i", client.sock.recv(4))[0]
    assert size == 0  # PLAIN answers with an empty token
    assert client.call(MetadataRequest(topics=[]), 1).brokers[0].port == broker["SASL_PLAINTEXT"]
    client.close()


def test_handshake_v0_with_a_wrong_password_is_closed_without_an_answer(broker):
    client = Client(broker["SASL_PLAINTEXT"])
    client.call(SaslHandshakeRequest(mechanism="PLAIN"), 0)
    token = b"\0alice\0wrong"
    client.sock.sendall(struct.pack(">i", len(token)) + token)
    assert client.closed()
    client.close()


def test_authenticate_v2_then_metadata(broker):
    client = Client(broker["SASL_PLAINTEXT"])
    assert client.call(ApiVersionsRequest(), 0).error_code == 0  # allowed before authentication
    assert client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    answer = client.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2)
    assert (answer.error_code, answer.session_lifetime_ms) == (0, 0)
    # authenticated: a second handshake gets Kafka's request handler's answer, and the connection stays
    again = client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert (again.error_code, again.mechanisms) == (errors.ILLEGAL_SASL_STATE, [])
    assert client.call(MetadataRequest(topics=[]), 1).brokers
    client.close()


def test_a_wrong_password_gets_the_error_then_the_close(broker):
    client = Client(broker["SASL_PLAINTEXT"])
    client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    answer = client.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"), 2)
    assert answer.error_code == errors.SASL_AUTHENTICATION_FAILED
    assert answer.error_message == "Authentication failed: Invalid username or password"
    client.send(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2)  # no second guess
    assert client.receive() is None
    client.close()


def test_an_unknown_mechanism_gets_the_enabled_list_then_the_close(broker):
    client = Client(broker["SASL_PLAINTEXT"])
    answer = client.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)
    assert (answer.error_code, answer.mechanisms) == (errors.UNSUPPORTED_SASL_MECHANISM, ["PLAIN"])
    assert client.closed()
    client.close()


def test_a_second_handshake_before_authenticating_gets_illegal_state_then_the_close(broker):
    client = Client(broker["SASL_PLAINTEXT"])
    client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == errors.ILLEGAL_SASL_STATE
    assert client.closed()
    client.close()


@pytest.mark.parametrize(
    "request_body, version",
    [
        (MetadataRequest(topics=[]), 1),  # any request but ApiVersions and SASL
        (SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2),  # before the handshake
    ],
)
def test_requests_out_of_order_close_the_connection_without_an_answer(broker, request_body, version):
    client = Client(broker["SASL_PLAINTEXT"])
    client.send(request_body, version)
    assert client.receive() is None
    client.close()


def test_a_frame_above_the_receive_limit_before_authentication_closes(broker):
    client = Client(broker["SASL_PLAINTEXT"])
    client.sock.sendall(struct.pack(">i", 4097))  # sasl.server.max.receive.size is 4096 here
    assert client.closed()
    client.close()


def test_the_plaintext_listener_keeps_kafkas_answers(broker):
    client = Client(broker["PLAINTEXT"])
    answer = client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert (answer.error_code, answer.mechanisms) == (errors.ILLEGAL_SASL_STATE, [])
    assert client.call(MetadataRequest(topics=[]), 1).brokers[0].port == broker["PLAINTEXT"]
    client.close()


@pytest.fixture
def reauth_broker():
    with socket.socket() as a:
        a.bind(("127.0.0.1", 0))
        port = a.getsockname()[1]
    cfg = BrokerConfig.from_properties(
        {
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
            "sasl.enabled.mechanisms": "PLAIN",
            "kafkawire.sasl.plain.users": "alice:alice-secret,bob:bob-secret",
            "connections.max.reauth.ms": "1000",
        }
    )
    cfg.storage = "memory"
    with start_in_thread(cfg):
        yield port


def _login(client, user="alice", password="alice-secret"):
    assert client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    return client.call(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), 2)


def test_reauthentication_renews_the_session_on_the_same_connection(reauth_broker):
    import time

    client = Client(reauth_broker)
    assert _login(client).session_lifetime_ms == 1000
    time.sleep(0.6)
    assert _login(client).session_lifetime_ms == 1000  # KIP-368: again on the open connection
    time.sleep(0.6)  # past the first session's end, within the second's
    assert client.call(MetadataRequest(topics=[]), 1).brokers
    client.close()


def test_an_expired_session_closes_on_the_next_request(reauth_broker):
    import time

    client = Client(reauth_broker)
    _login(client)
    time.sleep(1.3)
    client.send(MetadataRequest(topics=[]), 1)
    assert client.receive() is None
    client.close()


def test_reauthenticating_as_someone_else_is_refused(reauth_broker):
    client = Client(reauth_broker)
    _login(client)
    answer = _login(client, "bob", "bob-secret")
    assert (answer.error_code, answer.error_message) == (
        errors.SASL_AUTHENTICATION_FAILED,
        "Cannot change principals during re-authentication",
    )
    assert client.closed()
    client.close()
