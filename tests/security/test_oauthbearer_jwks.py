"""SASL/OAUTHBEARER with verified tokens: a JWKS file, tokens signed with a test key (RSA and EC), Kafka's keys.

The validator alone (what it accepts and each reason it refuses), the listener configuration failing closed,
then brokers: kafkawire and the reference Kafka 4.4 with the same ``server.properties`` (Kafka's
OAuthBearerValidatorCallbackHandler reading a ``file:`` JWKS; Kafka 4 reads such URLs only when the JVM's
``org.apache.kafka.sasl.oauthbearer.allowed.urls`` lists them), with kafkawire's client and confluent-kafka
(librdkafka) logging in with signed tokens and being refused with bad ones.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
import uuid

import jwt  # PyJWT[crypto]: the test extra (tools/run-tests installs it)
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from kafkawire.security.listeners import ListenerError, parse_listeners
from kafkawire.security.oauthbearer import JwksValidator

ISSUER = "https://issuer.test"
AUDIENCE = "kafka-test"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


class Keys:
    """Two signing keys published in a JWKS file, and one that is not (a forger's)."""

    def __init__(self, directory):
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwks = {"keys": [self._jwk(self.rsa, "rsa-1", "RS256"), self._jwk(self.ec, "ec-1", "ES256")]}
        self.path = directory / "jwks.json"
        self.path.write_text(json.dumps(jwks))
        self.url = self.path.as_uri()

    @staticmethod
    def _jwk(key, kid: str, alg: str) -> dict:
        algorithm = jwt.algorithms.RSAAlgorithm if alg.startswith("RS") else jwt.algorithms.ECAlgorithm
        jwk = json.loads(algorithm.to_jwk(key.public_key()))
        jwk.update({"kid": kid, "alg": alg, "use": "sig"})
        return jwk

    def token(self, sub="alice", *, kid="rsa-1", key=None, alg=None, lifetime=600, **claims) -> str:
        now = int(time.time())
        payload = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + lifetime, "scope": "kafka"}
        payload.update(claims)
        payload = {k: v for k, v in payload.items() if v is not None}
        signer = key or (self.rsa if kid == "rsa-1" else self.ec)
        return jwt.encode(
            payload, signer, algorithm=alg or ("RS256" if kid == "rsa-1" else "ES256"), headers={"kid": kid}
        )


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    return Keys(tmp_path_factory.mktemp("jwks"))


def _validator(keys, **kw) -> JwksValidator:
    return JwksValidator(keys.url, issuer=ISSUER, audience=(AUDIENCE,), **kw)


def test_signed_tokens_name_their_subject_and_scopes(keys):
    validator = _validator(keys)
    assert validator.validate(keys.token("alice")) == ("alice", ["kafka"])
    assert validator.validate(keys.token("bob", kid="ec-1", scope="read write")) == ("bob", ["read", "write"])


def _bad_tokens(keys):
    public_pem = keys.rsa.public_key().public_bytes(
        __import__("cryptography.hazmat.primitives.serialization", fromlist=["Encoding"]).Encoding.PEM,
        __import__(
            "cryptography.hazmat.primitives.serialization", fromlist=["PublicFormat"]
        ).PublicFormat.SubjectPublicKeyInfo,
    )
    unsigned = jwt.encode(
        {"sub": "alice", "exp": int(time.time()) + 60, "iat": int(time.time())}, None, algorithm="none"
    )
    return [
        ("a key not in the JWKS", keys.token(key=keys.forger), "Signature verification failed"),
        ("wrong issuer", keys.token(iss="https://other.test"), "issuer"),
        ("wrong audience", keys.token(aud="someone-else"), "audience"),
        ("expired", keys.token(lifetime=-120), "expired"),
        ("issued in the future", keys.token(iat=int(time.time()) + 600), "iat"),
        ("no exp", keys.token(exp=None), "exp"),
        ("no subject", keys.token(sub=None), "sub"),
        ("unknown kid", keys.token(kid="rsa-2", key=keys.rsa, alg="RS256"), "no key"),
        ("alg none", unsigned, "algorithm"),
        ("HS256 with the public key as secret", _hs256_with(public_pem), "algorithm"),
        ("not a JWT", "not.a.jwt", ""),
    ]


def _hs256_with(secret: bytes) -> str:
    import base64
    import hashlib
    import hmac

    def part(obj) -> bytes:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=")

    now = int(time.time())
    body = (
        part({"alg": "HS256", "kid": "rsa-1"})
        + b"."
        + part({"sub": "mallory", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 60})
    )
    sig = base64.urlsafe_b64encode(hmac.new(secret, body, hashlib.sha256).digest()).rstrip(b"=")
    return (body + b"." + sig).decode()


def test_bad_tokens_are_refused_with_the_reason(keys):
    validator = _validator(keys)
    for what, token, words in _bad_tokens(keys):
        with pytest.raises(ValueError) as info:
            validator.validate(token)
        assert words.lower() in str(info.value).lower(), (what, info.value)


def test_clock_skew_lets_a_just_expired_token_in(keys):
    token = keys.token(lifetime=-10)
    assert _validator(keys, clock_skew_s=30).validate(token)[0] == "alice"
    with pytest.raises(ValueError, match="expired"):
        _validator(keys, clock_skew_s=0).validate(token)


def _props(keys, listener="OAUTH", port=9094, **extra) -> dict:
    props = {
        "listeners": f"{listener}://127.0.0.1:{port}",
        "listener.security.protocol.map": f"{listener}:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        f"listener.name.{listener.lower()}.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        f"listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
        ),
        "sasl.oauthbearer.jwks.endpoint.url": keys.url,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
    }
    props.update(extra)
    return props


def test_listener_configuration_fails_closed_naming_the_key(keys, tmp_path):
    handler_key = "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class"
    (tmp_path / "empty.json").write_text('{"keys": []}')
    cases = [
        ({"sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "missing.json").as_uri()}, "sasl.oauthbearer.jwks"),
        ({"sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "empty.json").as_uri()}, "sasl.oauthbearer.jwks"),
        ({"sasl.oauthbearer.jwks.endpoint.url": "http://idp.test/jwks"}, "sasl.oauthbearer.jwks"),
        ({"sasl.oauthbearer.jwks.endpoint.url": ""}, "sasl.oauthbearer.jwks.endpoint.url"),
        ({handler_key: "com.example.MyHandler"}, handler_key),
        ({handler_key: ""}, "sasl.oauthbearer.jwks.endpoint.url"),  # a JWKS URL without the validator class
        ({"sasl.oauthbearer.expected.audience": ""}, "sasl.oauthbearer.expected.audience"),  # Kafka 4.4 refuses too
    ]
    for change, key in cases:
        props = _props(keys)
        props.update(change)
        props = {k: v for k, v in props.items() if v != ""}
        with pytest.raises(ListenerError) as info:
            parse_listeners(props)
        assert str(info.value).startswith(key), (change, info.value)
    [listener] = parse_listeners(_props(keys))
    assert isinstance(listener.oauth_options["validator"], JwksValidator)


# ------------------------------------------------------------------------------------------------ brokers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", params=["kafkawire", "kafka"])
def broker(request, keys, tmp_path_factory):
    port, plain_port = _free_port(), _free_port()
    props = _props(keys, port=port)
    props["listeners"] += f",PLAINTEXT://127.0.0.1:{plain_port}"
    props["listener.security.protocol.map"] += ",PLAINTEXT:PLAINTEXT"
    props["advertised.listeners"] = f"OAUTH://127.0.0.1:{port},PLAINTEXT://127.0.0.1:{plain_port}"
    if request.param == "kafkawire":
        from kafkawire.broker.config import BrokerConfig
        from kafkawire.broker.server import start_in_thread

        cfg = BrokerConfig.from_properties(props)
        cfg.data_dir = str(tmp_path_factory.mktemp("kafkawire-jwks"))
        thread = start_in_thread(cfg)
        try:
            yield f"127.0.0.1:{port}"
        finally:
            thread.stop()
    else:
        from conftest import reference_unavailable
        from kafka_reference import KafkaUnavailable, ReferenceKafka

        controller = _free_port()
        props["listeners"] += f",CONTROLLER://127.0.0.1:{controller}"
        props["listener.security.protocol.map"] += ",CONTROLLER:PLAINTEXT"
        props.update(
            {
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
            }
        )
        kafka = ReferenceKafka(
            tmp_path_factory.mktemp("kafka-jwks"),
            port=plain_port,
            config=props,
            jvm_args=(f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={keys.url}",),
        )
        kafka.controller_port = controller
        try:
            kafka.start()
        except KafkaUnavailable as exc:
            kafka.close()
            reference_unavailable(str(exc))
        try:
            yield f"127.0.0.1:{port}"
        finally:
            kafka.close()


def _kafkawire_round_trip(bootstrap: str, token: str) -> list[bytes]:
    from kafkawire.client import AsyncConsumer, AsyncProducer

    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda: (token, time.time() + 600),
    }
    topic = f"jwks-{uuid.uuid4().hex[:8]}"

    async def run():
        async with AsyncProducer(bootstrap, security=props, linger_ms=0) as producer:
            for i in range(3):
                await producer.send_and_wait(topic, b"v%d" % i, partition=0)
        consumer = AsyncConsumer(bootstrap, security=props)
        consumer.assign([(topic, 0)], offset="earliest")
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        try:
            while len(got) < 3 and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout=1.0)).values():
                    got += [r.value for r in records]
        finally:
            await consumer.close()
        return got

    return asyncio.run(run())


def test_kafkawire_client_with_a_signed_token(broker, keys):
    assert _kafkawire_round_trip(broker, keys.token("alice")) == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize("what", ["a key not in the JWKS", "wrong issuer", "wrong audience", "expired", "alg none"])
def test_kafkawire_client_with_a_bad_token_is_refused(broker, keys, what):
    from kafkawire.client.connection import AuthenticationFailed, Connection
    from kafkawire.protocol import errors as kerrors
    from kafkawire.security.client import ClientSecurity

    token = {w: t for w, t, _ in _bad_tokens(keys)}[what]
    security = ClientSecurity.from_config(
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "oauth_cb": lambda: (token, 0)}
    )
    host, port = broker.split(":")

    async def connect():
        conn = await Connection.open(host, int(port), security=security, connect_timeout=10)
        await conn.close()

    start = time.monotonic()
    with pytest.raises(AuthenticationFailed) as info:
        asyncio.run(connect())
    assert info.value.code == kerrors.SASL_AUTHENTICATION_FAILED
    assert time.monotonic() - start < 10


def _confluent_error(bootstrap: str, token: str, timeout: float = 10.0) -> str | None:
    """None when librdkafka (oauth_cb giving this token) gets the metadata, else the first error it reports."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[str] = []
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: (token, time.time() + 600),
            "error_cb": lambda err: errors.append(err.str()),
        }
    )
    deadline = time.monotonic() + timeout
    while not errors and time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=0.5)
            return None
        except KafkaException:
            admin.poll(0.1)  # serves error_cb, where librdkafka says why it cannot log in
    return errors[0] if errors else "no metadata and no error"


def test_librdkafka_with_a_signed_token_and_a_forged_one(broker, keys):
    assert _confluent_error(broker, keys.token("alice", kid="ec-1")) is None
    error = _confluent_error(broker, keys.token("mallory", key=keys.forger))
    assert error is not None and "SASL authentication error" in error, error


def test_allow_unverified_audience_accepts_any_aud(keys):
    props = _props(keys, **{"sasl.oauthbearer.allow.unverified.audience": "true"})
    del props["sasl.oauthbearer.expected.audience"]
    [listener] = parse_listeners(props)
    assert listener.oauth_options["validator"].validate(keys.token(aud="anyone"))[0] == "alice"
