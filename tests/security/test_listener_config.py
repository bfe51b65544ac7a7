"""Listener configuration fails closed: a listener that cannot be served as configured stops start-up,
and the error names the key to fix."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from kafkawire.broker.config import BrokerConfig
from kafkawire.security.listeners import ListenerError, parse_listeners

JAAS_PLAIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


def _tls(certs, **extra):
    return {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(certs / "broker.p12"),
        "ssl.keystore.password": "kafkawire",
        **extra,
    }


def test_several_listeners_with_their_protocols_and_overrides(certs):
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:9092,SECURE://127.0.0.1:9093,SASL_PLAINTEXT://127.0.0.1:9094,"
        "CONTROLLER://127.0.0.1:9095",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "CONTROLLER:PLAINTEXT",
        "listener.name.secure.ssl.client.auth": "required",
        "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.truststore.type": "PEM",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS_PLAIN,
        **_tls(certs),
    }
    listeners = parse_listeners(props)
    assert [(x.name, x.protocol, x.port) for x in listeners] == [
        ("PLAINTEXT", "PLAINTEXT", 9092),
        ("SECURE", "SSL", 9093),
        ("SASL_PLAINTEXT", "SASL_PLAINTEXT", 9094),
    ]
    assert listeners[1].client_auth == "required" and listeners[1].ssl_context is not None
    assert listeners[2].mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert listeners[2].plain_users == {"alice": "alice-secret"}
    assert BrokerConfig.from_properties(props).unknown_keys == []


def test_pem_keystore_files_load(certs):
    listeners = parse_listeners(
        {
            "listeners": "SSL://127.0.0.1:9093",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs / "broker.pem"),
        }
    )
    assert listeners[0].ssl_context is not None


def test_inline_pem_keystore_loads(certs):
    listeners = parse_listeners(
        {
            "listeners": "SSL://127.0.0.1:9093",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": (certs / "broker-key.pem").read_text(),
            "ssl.keystore.certificate.chain": (certs / "broker-cert.pem").read_text(),
        }
    )
    assert listeners[0].ssl_context is not None


@pytest.mark.parametrize(
    "case, props, key",
    [
        ("no keystore", {"listeners": "SSL://127.0.0.1:9093", "ssl.keystore.type": "PKCS12"}, "ssl.keystore.location"),
        (
            "missing keystore file",
            {
                "listeners": "SSL://127.0.0.1:9093",
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": "/nonexistent/broker.p12",
            },
            "ssl.keystore.location",
        ),
        (
            "JKS, Kafka's default type",
            {"listeners": "SSL://127.0.0.1:9093", "ssl.keystore.location": "/x/broker.jks"},
            "ssl.keystore.type",
        ),
        (
            "bad client auth",
            {"listeners": "SSL://127.0.0.1:9093", "ssl.client.auth": "sometimes", "_tls": True},
            "ssl.client.auth",
        ),
        (
            "client auth without a truststore",
            {"listeners": "SSL://127.0.0.1:9093", "ssl.client.auth": "required", "_tls": True},
            "ssl.truststore.location",
        ),
        (
            "unknown TLS version",
            {"listeners": "SSL://127.0.0.1:9093", "ssl.enabled.protocols": "TLSv9", "_tls": True},
            "ssl.enabled.protocols",
        ),
        (
            "Kafka's default mechanism GSSAPI",
            {"listeners": "SASL_PLAINTEXT://127.0.0.1:9094"},
            "sasl.enabled.mechanisms",
        ),
        (
            "unknown mechanism",
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:9094",
                "sasl.enabled.mechanisms": "PLAIN,FOO",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS_PLAIN,
            },
            "sasl.enabled.mechanisms",
        ),
        (
            "per-listener mechanism",
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:9094",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "GSSAPI",
            },
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms",
        ),
        (
            "PLAIN without users",
            {"listeners": "SASL_PLAINTEXT://127.0.0.1:9094", "sasl.enabled.mechanisms": "PLAIN"},
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        ),
        (
            "a JAAS entry that does not parse",
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:9094",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": "nonsense",
            },
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        ),
        (
            "a negative re-authentication period",
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:9094",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "connections.max.reauth.ms": "-1",
            },
            "connections.max.reauth.ms",
        ),
        ("a listener without a protocol", {"listeners": "CLIENT://127.0.0.1:9094"}, "listener.security.protocol.map"),
        ("a listener that is not NAME://HOST:PORT", {"listeners": "127.0.0.1:9092"}, "listeners"),
    ],
)
def test_a_listener_that_cannot_be_served_refuses_to_start_naming_the_key(certs, case, props, key):
    props = dict(props)
    if props.pop("_tls", False):  # a good keystore, so that the key under test is the one at fault
        props = {**_tls(certs), **props}
    with pytest.raises(ListenerError) as info:
        parse_listeners(props)
    assert str(info.value).startswith(key + ":"), str(info.value)


def test_an_unreadable_key_names_the_key_password(certs, tmp_path):
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key((certs / "broker-key.pem").read_bytes(), None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"right")
    )
    pem = tmp_path / "broker.pem"
    pem.write_bytes(encrypted + (certs / "broker-cert.pem").read_bytes())
    props = {
        "listeners": "SSL://127.0.0.1:9093",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pem),
        "ssl.key.password": "wrong",
    }
    with pytest.raises(ListenerError, match=r"^ssl\.keystore\.location: .*ssl\.key\.password"):
        parse_listeners(props)
    props["ssl.key.password"] = "right"
    assert parse_listeners(props)[0].ssl_context is not None


def test_a_wrong_pkcs12_password_names_the_keystore(certs):
    with pytest.raises(ListenerError, match=r"^ssl\.keystore\.location: cannot open the PKCS12 store"):
        parse_listeners({"listeners": "SSL://127.0.0.1:9093", **_tls(certs, **{"ssl.keystore.password": "nope"})})


def test_binding_every_interface_without_authentication_warns(caplog):
    from kafkawire.security.serving import warn_if_open

    open_listener, local = parse_listeners(
        {
            "listeners": "PLAINTEXT://:9092,LOCAL://127.0.0.1:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,LOCAL:PLAINTEXT",
        }
    )
    with caplog.at_level(logging.WARNING, logger="kafkawire.security"):
        warn_if_open(local)
        assert caplog.records == []
        warn_if_open(open_listener)
    assert "binds every interface" in caplog.text


def test_serve_refuses_to_start_and_names_the_key(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text(
        "listeners=SASL_SSL://127.0.0.1:0\nsasl.enabled.mechanisms=PLAIN\n"
        "ssl.keystore.type=PKCS12\nssl.keystore.location=/nonexistent/broker.p12\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "kafkawire", "serve", str(props), "--data-dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "ssl.keystore.location" in proc.stderr
    assert "listening" not in proc.stderr
