"""kafkawire's own client over TLS and SASL, on kafkawire and on the reference Kafka 4.4 with the same listeners.

The brokers are test_clients.py's (``target``: the same ``server.properties`` on both). The client is
configured only with Kafka's client property names (``security.protocol``, ``ssl.*``, ``sasl.*``), as a
``client.properties`` file would give them. Each case produces three records and reads them back; the
refusals must raise ``AuthenticationFailed`` (not retried) within seconds, with the broker's reason.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from kafkawire.client import AsyncConsumer, AsyncProducer
from kafkawire.client.connection import AuthenticationFailed, Connection
from kafkawire.protocol import errors as kerrors
from kafkawire.security.client import ClientSecurity

from .test_clients import USERS, Target, _protocol, target  # noqa: F401  (target: the module's brokers)

FAIL_WITHIN = 10.0


def client_properties(target: Target, listener: str, mechanism=None, *, cert=None, jaas=False, user=None, pw=None):
    props: dict[str, object] = {"security.protocol": _protocol(listener)}
    certs = target.certs
    if "SSL" in props["security.protocol"]:
        props["ssl.truststore.location"] = str(certs / "truststore.p12")  # Java's form: a PKCS12 truststore
        props["ssl.truststore.password"] = "kafkawire"
        if cert == "pkcs12":
            props.update({"ssl.keystore.location": str(certs / "client.p12"), "ssl.keystore.password": "kafkawire"})
        elif cert == "pem":  # librdkafka's form
            props.update(
                {
                    "ssl.ca.location": str(certs / "ca.pem"),
                    "ssl.certificate.location": str(certs / "client-cert.pem"),
                    "ssl.key.location": str(certs / "client-key.pem"),
                }
            )
    if mechanism:
        default_user, default_pw = USERS.get(mechanism, (None, None))
        user, pw = user or default_user, pw if pw is not None else default_pw
        props["sasl.mechanism"] = mechanism
        if jaas:  # the Java client's form
            module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
            props["sasl.jaas.config"] = (
                f'org.apache.kafka.common.security.{module} required username="{user}" password="{pw}";'
            )
        else:
            props.update({"sasl.username": user, "sasl.password": pw})
    return props


async def _round_trip(target: Target, listener: str, props: dict) -> list[bytes]:
    topic = f"kw-client-{listener}-{uuid.uuid4().hex[:8]}".lower()
    values = [f"v{i}-{uuid.uuid4().hex[:6]}".encode() for i in range(3)]
    async with AsyncProducer(target.bootstrap(listener), security=props, linger_ms=0) as producer:
        for v in values:
            await producer.send_and_wait(topic, v, partition=0)
    consumer = AsyncConsumer(target.bootstrap(listener), security=props, auto_offset_reset="earliest")
    try:
        consumer.assign([(topic, 0)], offset="earliest")
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout=1.0)).values():
                got += [r.value for r in records]
    finally:
        await consumer.close()
    assert got == values
    return got


CASES = [  # (id, listener, mechanism, options)
    ("SSL-truststore", "SSL", None, {}),
    ("SSL-pem-cert", "SSL", None, {"cert": "pem"}),
    ("MTLS-pkcs12-cert", "MTLS", None, {"cert": "pkcs12"}),
    ("SASL_SSL-SCRAM-SHA-256", "SASL_SSL", "SCRAM-SHA-256", {}),
    ("SASL_SSL-SCRAM-SHA-512-jaas", "SASL_SSL", "SCRAM-SHA-512", {"jaas": True}),
    ("SASL_SSL-PLAIN", "SASL_SSL", "PLAIN", {}),
    ("SASL_PLAINTEXT-PLAIN-jaas", "SASL_PLAINTEXT", "PLAIN", {"jaas": True}),
    ("SASL_PLAINTEXT-SCRAM-SHA-512", "SASL_PLAINTEXT", "SCRAM-SHA-512", {}),
]


@pytest.mark.parametrize("listener, mechanism, options", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_kafkawire_client_produces_and_consumes(target, listener, mechanism, options):
    asyncio.run(_round_trip(target, listener, client_properties(target, listener, mechanism, **options)))


def test_kafkawire_client_with_an_unsecured_oauthbearer_token(target):
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope="kafka";',
    }
    asyncio.run(_round_trip(target, "OAUTH", props))


def test_kafkawire_client_oauthbearer_token_without_the_required_scope_is_refused(target):
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": "true",
        "sasl.oauthbearer.config": "principal=alice scope=other",
    }
    exc = _refused(target, "OAUTH", props)
    assert exc.code == kerrors.SASL_AUTHENTICATION_FAILED


def _refused(target: Target, listener: str, props: dict) -> AuthenticationFailed:
    async def connect():
        security = ClientSecurity.from_config(props)
        host, port = target.bootstrap(listener).split(":")
        conn = await Connection.open(host, int(port), security=security, connect_timeout=FAIL_WITHIN)
        await conn.close()

    start = time.monotonic()
    with pytest.raises(AuthenticationFailed) as info:
        asyncio.run(connect())
    assert time.monotonic() - start < FAIL_WITHIN
    return info.value


REFUSALS = [  # (id, listener, mechanism, options, expected code, words in the message)
    ("wrong password", "SASL_SSL", "SCRAM-SHA-256", {"pw": "wrong"}, kerrors.SASL_AUTHENTICATION_FAILED, "invalid"),
    ("unknown user", "SASL_PLAINTEXT", "PLAIN", {"user": "mallory", "pw": "x"}, kerrors.SASL_AUTHENTICATION_FAILED, ""),
    ("mechanism not enabled", "PLAINONLY", "SCRAM-SHA-512", {}, kerrors.UNSUPPORTED_SASL_MECHANISM, "PLAIN"),
    ("no certificate where one is required", "MTLS", None, {}, kerrors.SASL_AUTHENTICATION_FAILED, "TLS"),
]


@pytest.mark.parametrize(
    "listener, mechanism, options, code, words", [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_kafkawire_client_is_refused_fast(target, listener, mechanism, options, code, words):
    exc = _refused(target, listener, client_properties(target, listener, mechanism, **options))
    assert exc.code == code, exc
    assert words.lower() in str(exc).lower()


def test_kafkawire_client_speaking_tls_to_a_plaintext_listener_is_refused_fast(target):
    props = client_properties(target, "SSL", None)
    exc = _refused(target, "PLAINTEXT", props)
    assert "TLS" in str(exc)


def test_kafkawire_client_refuses_a_broker_certificate_it_does_not_trust(target, tmp_path):
    from kafkawire.security.certs import create

    create(str(tmp_path), password="other")  # another CA: the broker's certificate is not signed by it
    exc = _refused(target, "SSL", {"security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "ca.pem")})
    assert "certificate verify failed" in str(exc)


def test_kafkawire_client_reauthenticates_when_the_session_ends(target):
    """The REAUTH listener gives sessions 1.5 s (connections.max.reauth.ms): a producer sending for 4 s logs in
    again on the same connection, and every record is acknowledged."""

    async def run():
        props = client_properties(target, "SASL_PLAINTEXT", "SCRAM-SHA-256")
        topic = f"kw-reauth-{uuid.uuid4().hex[:8]}"
        async with AsyncProducer(target.bootstrap("REAUTH"), security=props, linger_ms=0) as producer:
            sent = 0
            deadline = time.monotonic() + 4.0
            while time.monotonic() < deadline:
                await producer.send_and_wait(topic, b"x%d" % sent, partition=0)
                sent += 1
                await asyncio.sleep(0.05)
            conns = [c for c in producer.cluster._conns.values() if not c.closed]
            assert conns and max(c.logins for c in conns) >= 2, [(c, c.logins) for c in conns]
        return sent

    assert asyncio.run(run()) > 10


def test_security_configuration_errors_name_the_key(certs):
    cases = [
        ({"security.protocol": "SASL_SSL2"}, "security.protocol"),
        ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"}, "ssl.ca.location"),
        ({"security.protocol": "SSL", "ssl.truststore.location": str(certs / "truststore.p12")}, "ssl.truststore"),
        ({"security.protocol": "SSL", "ssl.truststore.type": "JKS", "ssl.truststore.location": "x.jks"}, "JKS"),
        ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism"),  # Kafka's default GSSAPI
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.username"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}, "oauth_cb"),
        (
            {"security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem"), "ssl.key.location": "k.pem"},
            "ssl.certificate.location",
        ),
    ]
    for props, key in cases:
        with pytest.raises(ValueError) as info:
            ClientSecurity.from_config(props)
        assert key in str(info.value), (props, info.value)


def test_cli_commands_take_a_command_config_file_and_x_properties(target, tmp_path):
    """``kafkawire produce`` with a client.properties file (SASL_SSL, SCRAM-SHA-512 in Kafka's JAAS form, a
    PKCS12 truststore), ``kafkawire consume`` with the same settings as ``-X`` options."""
    import subprocess
    import sys

    props = client_properties(target, "SASL_SSL", "SCRAM-SHA-512", jaas=True)
    config = tmp_path / "client.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    topic = f"kw-cli-{uuid.uuid4().hex[:8]}"

    def kw(*args, input=None):
        return subprocess.run(
            [sys.executable, "-m", "kafkawire", *args, "--bootstrap", target.bootstrap("SASL_SSL")],
            input=input,
            capture_output=True,
            timeout=90,
        )

    produced = kw("produce", topic, "--command-config", str(config), input=b"a\nb\nc\n")
    assert produced.returncode == 0, produced.stderr.decode()
    x_options = [arg for k, v in props.items() for arg in ("-X", f"{k}={v}")]
    consumed = kw("consume", topic, "--from-beginning", "--max-messages", "3", "--timeout", "20", *x_options)
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout.split() == [b"a", b"b", b"c"]
    refused = kw("apis", "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=PLAIN", *x_options[2:6])
    assert refused.returncode != 0 and b"sasl.username" in refused.stderr, refused.stderr
