"""Real clients over TLS and SASL, on kafkawire and on the reference Kafka 4.4 with the same configuration.

One broker per target with six listeners: PLAINTEXT (administration: SCRAM users are created through it),
SSL (client certificates requested), MTLS (SSL, client certificates required), SASL_PLAINTEXT and SASL_SSL
(PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512) and PLAINONLY (SASL_PLAINTEXT with PLAIN alone). The same
``server.properties`` keys go to both brokers (kafkawire skips the CONTROLLER listener Kafka needs).
Each client produces three records and reads them back; the failures (wrong password, unknown user, a
mechanism the listener does not enable, TLS to a plaintext listener and the reverse, no client certificate
where one is required) must reach the client as its normal error, quickly.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid

import pytest

JAAS_PLAIN = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
    'password="alice-secret" user_alice="alice-secret";'
)
JAAS_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
USERS = {
    "PLAIN": ("alice", "alice-secret"),
    "SCRAM-SHA-256": ("bob", "bob-secret"),
    "SCRAM-SHA-512": ("carol", "carol-secret"),
}
LISTENERS = ("PLAINTEXT", "SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL", "PLAINONLY", "OAUTH", "REAUTH")
FAIL_WITHIN = 15.0  # seconds for a refused client to see its error (clients retry; a hang is what is caught)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def secure_properties(certs, ports: dict[str, int], controller_port: int) -> dict[str, str]:
    listeners = ",".join(f"{name}://127.0.0.1:{ports[name]}" for name in LISTENERS)
    props = {
        "listeners": f"{listeners},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": listeners,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,PLAINONLY:SASL_PLAINTEXT,"
        "OAUTH:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(certs / "broker.p12"),
        "ssl.keystore.password": "kafkawire",
        "ssl.key.password": "kafkawire",
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(certs / "truststore.p12"),
        "ssl.truststore.password": "kafkawire",
        "ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.plainonly.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.oauth.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.reauth.sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.reauth.scram-sha-256.sasl.jaas.config": JAAS_SCRAM,
        "listener.name.reauth.connections.max.reauth.ms": "1500",
        "listener.name.oauth.oauthbearer.sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_sub="broker" unsecuredValidatorRequiredScope="kafka";',
    }
    for listener in ("sasl_plaintext", "sasl_ssl", "plainonly"):
        props[f"listener.name.{listener}.plain.sasl.jaas.config"] = JAAS_PLAIN
        props[f"listener.name.{listener}.scram-sha-256.sasl.jaas.config"] = JAAS_SCRAM
        props[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] = JAAS_SCRAM
    return props


class Target:
    def __init__(self, name: str, ports: dict[str, int], certs):
        self.name = name
        self.ports = ports
        self.certs = certs

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def _create_scram_users(bootstrap: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    upserts = [
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret"),
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-secret"),
    ]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(30)


@pytest.fixture(scope="module", params=["kafkawire", "kafka"])
def target(request, certs, tmp_path_factory):
    ports = {name: _free_port() for name in LISTENERS}
    controller_port = _free_port()
    props = secure_properties(certs, ports, controller_port)
    if request.param == "kafkawire":
        from kafkawire.broker.config import BrokerConfig
        from kafkawire.broker.server import start_in_thread

        cfg = BrokerConfig.from_properties(props)
        cfg.data_dir = str(tmp_path_factory.mktemp("kafkawire-secure"))
        broker = start_in_thread(cfg)
        try:
            _create_scram_users(f"127.0.0.1:{ports['PLAINTEXT']}")
            yield Target("kafkawire", ports, certs)
        finally:
            broker.stop()
    else:
        from conftest import reference_unavailable
        from kafka_reference import KafkaUnavailable, ReferenceKafka

        kafka = ReferenceKafka(tmp_path_factory.mktemp("kafka-secure"), port=ports["PLAINTEXT"], config=props)
        kafka.controller_port = controller_port
        try:
            kafka.start()
        except KafkaUnavailable as exc:
            kafka.close()
            reference_unavailable(str(exc))
        try:
            _create_scram_users(kafka.bootstrap)
            target = Target("kafka", ports, certs)
            _wait_until_scram_works(target)  # Kafka applies the credentials from its metadata log shortly after
            yield target
        finally:
            kafka.close()


def _wait_until_scram_works(target: Target) -> None:
    for _ in range(40):
        if all(
            _confluent_error(target, "SASL_PLAINTEXT", mech, *USERS[mech], timeout=5) is None
            for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")
        ):
            return
        time.sleep(0.5)
    raise AssertionError("SCRAM credentials never became usable on the reference Kafka")


# ------------------------------------------------------------------------------------------------ cases

CASES = [  # (listener, mechanism or None, with a client certificate)
    ("SSL", None, False),
    ("SSL", None, True),
    ("MTLS", None, True),
    *[(listener, mech, False) for listener in ("SASL_PLAINTEXT", "SASL_SSL") for mech in USERS],
]


def _protocol(listener: str) -> str:
    return {"MTLS": "SSL", "PLAINONLY": "SASL_PLAINTEXT", "OAUTH": "SASL_PLAINTEXT", "REAUTH": "SASL_PLAINTEXT"}.get(
        listener, listener
    )


def _confluent_conf(
    target: Target, listener: str, mechanism, user=None, password=None, client_cert=False, protocol=None
) -> dict:
    conf = {"bootstrap.servers": target.bootstrap(listener), "security.protocol": protocol or _protocol(listener)}
    if "SSL" in conf["security.protocol"]:
        conf["ssl.ca.location"] = str(target.certs / "ca.pem")
        if client_cert:
            conf["ssl.certificate.location"] = str(target.certs / "client-cert.pem")
            conf["ssl.key.location"] = str(target.certs / "client-key.pem")
    if mechanism:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    return conf


def _records(n=3):
    return [f"record-{i}-{uuid.uuid4().hex[:6]}".encode() for i in range(n)]


def confluent_round_trip(target, listener, mechanism, client_cert, topic):
    from confluent_kafka import Consumer, Producer, TopicPartition

    user, password = USERS.get(mechanism, (None, None))
    conf = _confluent_conf(target, listener, mechanism, user, password, client_cert)
    producer = Producer(conf)
    values = _records()
    for v in values:
        producer.produce(topic, v, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": "g-" + topic, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(values) and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and not msg.error():
            got.append(msg.value())
    consumer.close()
    return values, got


def _kafka_python_kwargs(target, listener, mechanism, client_cert, user=None, password=None, protocol=None):
    kwargs = {"bootstrap_servers": target.bootstrap(listener), "security_protocol": protocol or _protocol(listener)}
    if "SSL" in kwargs["security_protocol"]:
        kwargs["ssl_cafile"] = str(target.certs / "ca.pem")
        if client_cert:
            kwargs["ssl_certfile"] = str(target.certs / "client-cert.pem")
            kwargs["ssl_keyfile"] = str(target.certs / "client-key.pem")
    if mechanism:
        kwargs.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
    return kwargs


def kafka_python_round_trip(target, listener, mechanism, client_cert, topic):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    user, password = USERS.get(mechanism, (None, None))
    kwargs = _kafka_python_kwargs(target, listener, mechanism, client_cert, user, password)
    producer = KafkaProducer(**kwargs)
    values = _records()
    for v in values:
        producer.send(topic, v, partition=0).get(30)
    producer.close()
    consumer = KafkaConsumer(**kwargs, enable_auto_commit=False, consumer_timeout_ms=20000)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == len(values):
            break
    consumer.close()
    return values, got


def aiokafka_round_trip(target, listener, mechanism, client_cert, topic):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    user, password = USERS.get(mechanism, (None, None))
    kwargs = {"bootstrap_servers": target.bootstrap(listener), "security_protocol": _protocol(listener)}
    if "SSL" in kwargs["security_protocol"]:
        kwargs["ssl_context"] = create_ssl_context(
            cafile=str(target.certs / "ca.pem"),
            certfile=str(target.certs / "client-cert.pem") if client_cert else None,
            keyfile=str(target.certs / "client-key.pem") if client_cert else None,
        )
    if mechanism:
        kwargs.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
    values = _records()

    async def run():
        producer = AIOKafkaProducer(**kwargs)
        await producer.start()
        try:
            for v in values:
                await producer.send_and_wait(topic, v, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**kwargs, enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        got = []
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.seek_to_beginning(TopicPartition(topic, 0))
            deadline = time.monotonic() + 30
            while len(got) < len(values) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=1000)
                for msgs in batches.values():
                    got.extend(m.value for m in msgs)
        finally:
            await consumer.stop()
        return got

    return values, asyncio.run(asyncio.wait_for(run(), 90))


CLIENTS = {
    "confluent-kafka": confluent_round_trip,
    "kafka-python": kafka_python_round_trip,
    "aiokafka": aiokafka_round_trip,
}


@pytest.mark.parametrize("client", list(CLIENTS))
@pytest.mark.parametrize(
    "listener, mechanism, client_cert",
    CASES,
    ids=[f"{lst}-{mech or 'TLS'}{'-cert' if cert else ''}" for lst, mech, cert in CASES],
)
def test_client_produces_and_consumes(target, client, listener, mechanism, client_cert):
    topic = f"sec-{client}-{listener}-{mechanism or 'tls'}-{int(client_cert)}-{uuid.uuid4().hex[:6]}".lower()
    values, got = CLIENTS[client](target, listener, mechanism, client_cert, topic)
    assert got == values


# ------------------------------------------------------------------------------------------------ failures


def _confluent_error(
    target,
    listener,
    mechanism,
    user=None,
    password=None,
    client_cert=False,
    protocol=None,
    timeout=FAIL_WITHIN,
    extra=None,
):
    """The first error librdkafka reports while asking for metadata, or None when the metadata came."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors = []
    conf = _confluent_conf(target, listener, mechanism, user, password, client_cert, protocol)
    if extra:  # a mechanism without user and password (OAUTHBEARER)
        conf = {k: v for k, v in conf.items() if k not in ("sasl.username", "sasl.password")} | extra
    admin = AdminClient({**conf, "error_cb": errors.append, "socket.connection.setup.timeout.ms": 10000})
    deadline = time.monotonic() + timeout
    while not errors and time.monotonic() < deadline:  # the first error, as soon as librdkafka reports it
        try:
            admin.list_topics(timeout=0.5)
            return None
        except KafkaException:
            admin.poll(0.1)  # serves error_cb, where librdkafka reports why it cannot connect
    return errors[0] if errors else None


REFUSALS = [  # (what, listener, mechanism, user, password, client cert, client's protocol, librdkafka's words)
    ("wrong password", "SASL_SSL", "SCRAM-SHA-256", "bob", "wrong", False, None, "Authentication failed"),
    ("unknown user", "SASL_PLAINTEXT", "PLAIN", "mallory", "x", False, None, "Invalid username or password"),
    (
        "mechanism not enabled",
        "PLAINONLY",
        "SCRAM-SHA-512",
        "carol",
        "carol-secret",
        False,
        None,
        "Unsupported SASL mechanism",
    ),
    ("TLS to a plaintext listener", "PLAINTEXT", None, None, None, False, "SSL", ""),
    ("plaintext to a TLS listener", "SSL", None, None, None, False, "PLAINTEXT", ""),
    ("no certificate where one is required", "MTLS", None, None, None, False, None, ""),
]


@pytest.mark.parametrize(
    "what, listener, mechanism, user, password, cert, protocol, words", REFUSALS, ids=[r[0] for r in REFUSALS]
)
def test_confluent_kafka_is_refused_quickly_with_its_normal_error(
    target, what, listener, mechanism, user, password, cert, protocol, words
):
    started = time.monotonic()
    error = _confluent_error(target, listener, mechanism, user, password, cert, protocol)
    assert error is not None, f"{what}: the client was let in"
    assert time.monotonic() - started < FAIL_WITHIN
    assert words in error.str(), error.str()


@pytest.mark.parametrize(
    "what, listener, mechanism, user, password",
    [
        ("wrong password", "SASL_SSL", "SCRAM-SHA-512", "carol", "wrong"),
        ("unknown user", "SASL_PLAINTEXT", "PLAIN", "mallory", "x"),
        ("mechanism not enabled", "PLAINONLY", "SCRAM-SHA-256", "bob", "bob-secret"),
    ],
)
def test_kafka_python_is_refused_with_its_normal_error(target, what, listener, mechanism, user, password):
    import kafka.errors as ke
    from kafka import KafkaProducer

    kwargs = _kafka_python_kwargs(target, listener, mechanism, False, user, password)
    # kafka-python 3 retries a refused bootstrap until bootstrap_timeout_ms and then raises a timeout: that is
    # its normal error. It logs SaslAuthenticationFailedError or UnsupportedSaslMechanismError for an attempt
    # that read the broker's answer before the close, and "socket disconnected" for one that saw the close
    # first: a race inside the client, on Kafka 4.4 as on kafkawire (both write the answer and close 100 ms
    # later), so only the refusal is asserted.
    with pytest.raises(ke.KafkaTimeoutError):
        KafkaProducer(**kwargs, bootstrap_timeout_ms=3000).close()


# ------------------------------------------------------------------------------------------------ Java

JAVA_SOURCE = __import__("pathlib").Path(__file__).resolve().parent / "java" / "SecurePeer.java"
JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@pytest.fixture(scope="module")
def java_peer():
    """The Java client (kafka-clients of the pinned Kafka release) compiled once; unavailable Java fails
    under CI, as the reference Kafka does."""
    import kafka_pins
    from conftest import reference_unavailable
    from support.java import JavaProgram, JavaUnavailable

    try:
        return JavaProgram.compile(JAVA_SOURCE, clients=kafka_pins.BROKER)
    except JavaUnavailable as exc:
        reference_unavailable(f"Java client: {exc}")
    except Exception as exc:
        if type(exc).__name__ != "KafkaUnavailable":
            raise
        reference_unavailable(f"kafka-clients {kafka_pins.BROKER}: {exc}")


def _java_properties(target, listener, mechanism, client_cert, user=None, password=None, tmp_path=None) -> str:
    props = {"bootstrap.servers": target.bootstrap(listener), "security.protocol": _protocol(listener)}
    if "SSL" in props["security.protocol"]:
        props.update(
            {
                "ssl.truststore.type": "PKCS12",
                "ssl.truststore.location": str(target.certs / "truststore.p12"),
                "ssl.truststore.password": "kafkawire",
            }
        )
        if client_cert:
            props.update(
                {
                    "ssl.keystore.type": "PKCS12",
                    "ssl.keystore.location": str(target.certs / "client.p12"),
                    "ssl.keystore.password": "kafkawire",
                }
            )
    if mechanism:
        props["sasl.mechanism"] = mechanism
        props["sasl.jaas.config"] = f'{JAAS_MODULES[mechanism]} required username="{user}" password="{password}";'
    path = tmp_path / "client.properties"
    # java.util.Properties: backslashes escape, so none may appear unescaped
    path.write_text("".join(f"{k}={v.replace(chr(92), chr(92) * 2)}\n" for k, v in props.items()))
    return str(path)


@pytest.mark.parametrize(
    "listener, mechanism, client_cert",
    CASES,
    ids=[f"{lst}-{mech or 'TLS'}{'-cert' if cert else ''}" for lst, mech, cert in CASES],
)
def test_java_client_produces_and_consumes(target, java_peer, tmp_path, listener, mechanism, client_cert):
    user, password = USERS.get(mechanism, (None, None))
    topic = f"sec-java-{listener}-{mechanism or 'tls'}-{int(client_cert)}-{uuid.uuid4().hex[:6]}".lower()
    out = java_peer.run(
        "SecurePeer",
        _java_properties(target, listener, mechanism, client_cert, user, password, tmp_path),
        topic,
        "3",
        timeout=120,
    )
    assert out.split() == ["java-0", "java-1", "java-2"]


@pytest.mark.parametrize(
    "what, listener, mechanism, user, password, cert, words",
    [
        ("wrong password", "SASL_SSL", "SCRAM-SHA-256", "bob", "wrong", False, "SaslAuthenticationException"),
        ("unknown user", "SASL_PLAINTEXT", "PLAIN", "mallory", "x", False, "SaslAuthenticationException"),
        (
            "mechanism not enabled",
            "PLAINONLY",
            "SCRAM-SHA-512",
            "carol",
            "carol-secret",
            False,
            "UnsupportedSaslMechanismException",
        ),
        ("no certificate where one is required", "MTLS", None, None, None, False, "SslAuthenticationException"),
    ],
)
def test_java_client_is_refused_with_its_normal_error(
    target, java_peer, tmp_path, what, listener, mechanism, user, password, cert, words
):
    out = java_peer.run(
        "SecurePeer",
        "refused",
        _java_properties(target, listener, mechanism, cert, user, password, tmp_path),
        timeout=120,
    )
    assert out.startswith(words), out


# ------------------------------------------------------------------------------------------------ kcat

# Debian's kcat runs on librdkafka 2.0.2, whose SCRAM client repeats its nonce in the final message: Kafka 4.4
# and kafkawire both refuse it (test_mechanisms.py), so kcat is tried with TLS and PLAIN only
KCAT_CASES = [("SSL", None, True), ("SASL_SSL", "PLAIN", False), ("SASL_PLAINTEXT", "PLAIN", False)]


@pytest.mark.parametrize(
    "listener, mechanism, client_cert", KCAT_CASES, ids=[f"{lst}-{mech or 'TLS'}" for lst, mech, _ in KCAT_CASES]
)
def test_kcat_produces_and_consumes(target, listener, mechanism, client_cert):
    import shutil
    import subprocess

    if shutil.which("kcat") is None:  # tools/run-tests installs it; under CI its absence must not pass
        from conftest import reference_unavailable

        reference_unavailable("kcat is not installed")
    user, password = USERS.get(mechanism, (None, None))
    conf = _confluent_conf(target, listener, mechanism, user, password, client_cert)
    args = ["kcat", "-b", conf.pop("bootstrap.servers"), "-m", "30"]
    for key, value in conf.items():
        args += ["-X", f"{key}={value}"]
    topic = f"sec-kcat-{listener}-{mechanism or 'tls'}-{uuid.uuid4().hex[:6]}".lower()
    values = [f"kcat-{i}" for i in range(3)]
    produced = subprocess.run(
        [*args, "-P", "-t", topic, "-p", "0"], input="\n".join(values).encode() + b"\n", capture_output=True, timeout=60
    )
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = subprocess.run(
        [*args, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"], capture_output=True, timeout=60
    )
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout.decode().split() == values


# ------------------------------------------------------------------------------------------------ KafkaJS

KAFKAJS = __import__("pathlib").Path(__file__).resolve().parent / "node" / "kafkajs_secure.js"
KAFKAJS_CASES = [
    ("SSL", None, True),
    ("SASL_PLAINTEXT", "PLAIN", False),
    *[("SASL_SSL", mech, False) for mech in USERS],
]


def _kafkajs(target, listener, mechanism, client_cert, user, password, mode, topic="", values=()):
    import json
    import shutil
    import subprocess

    node_modules = KAFKAJS.parent.parent.parent / "node" / "node_modules" / "kafkajs"
    if shutil.which("node") is None or not node_modules.is_dir():  # tools/run-tests installs both
        from conftest import reference_unavailable

        reference_unavailable("node or tests/node's kafkajs is not installed")
    job = {
        "brokers": [target.bootstrap(listener)],
        "mode": mode,
        "topic": topic,
        "values": list(values),
        "ssl": None,
        "sasl": None,
    }
    if "SSL" in _protocol(listener):
        job["ssl"] = {"ca": str(target.certs / "ca.pem")}
        if client_cert:
            job["ssl"].update(cert=str(target.certs / "client-cert.pem"), key=str(target.certs / "client-key.pem"))
    if mechanism:
        job["sasl"] = {"mechanism": mechanism.lower(), "username": user, "password": password}
    proc = subprocess.run(["node", str(KAFKAJS)], input=json.dumps(job).encode(), capture_output=True, timeout=90)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize(
    "listener, mechanism, client_cert", KAFKAJS_CASES, ids=[f"{lst}-{mech or 'TLS'}" for lst, mech, _ in KAFKAJS_CASES]
)
def test_kafkajs_produces_and_consumes(target, listener, mechanism, client_cert):
    user, password = USERS.get(mechanism, (None, None))
    topic = f"sec-kafkajs-{listener}-{mechanism or 'tls'}-{uuid.uuid4().hex[:6]}".lower()
    values = [f"kafkajs-{i}" for i in range(3)]
    result = _kafkajs(target, listener, mechanism, client_cert, user, password, "roundtrip", topic, values)
    assert result["consumed"] == values


@pytest.mark.parametrize(
    "what, listener, mechanism, user, password",
    [
        ("wrong password", "SASL_SSL", "SCRAM-SHA-256", "bob", "wrong"),
        ("unknown user", "SASL_PLAINTEXT", "PLAIN", "mallory", "x"),
    ],
)
def test_kafkajs_is_refused_with_its_normal_error(target, what, listener, mechanism, user, password):
    result = _kafkajs(target, listener, mechanism, False, user, password, "refused")
    assert result["error"] == "KafkaJSSASLAuthenticationError", result


# ------------------------------------------------------------------------------------------------ OAUTHBEARER


def test_confluent_kafka_with_an_unsecured_oauthbearer_token(target):
    """librdkafka's built-in unsecured JWT (development only), on a listener with OAUTHBEARER alone."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    conf = {
        "bootstrap.servers": target.bootstrap("OAUTH"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": "principal=alice scope=kafka lifeSeconds=600",
    }
    topic = f"sec-oauth-{uuid.uuid4().hex[:6]}"
    producer = Producer(conf)
    values = _records()
    for v in values:
        producer.produce(topic, v, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": "g-" + topic, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(values) and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and not msg.error():
            got.append(msg.value())
    consumer.close()
    assert got == values


def test_an_oauthbearer_token_without_the_required_scope_is_refused(target):
    error = _confluent_error(
        target,
        "OAUTH",
        "OAUTHBEARER",
        protocol="SASL_PLAINTEXT",
        extra={"enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": "principal=alice scope=other"},
    )
    assert error is not None, "a token without the required scope was let in"
    assert "SASL authentication error" in error.str(), error.str()


# ------------------------------------------------------------------------------------------------ KIP-368


def test_confluent_kafka_reauthenticates_and_keeps_producing(target, caplog):
    """connections.max.reauth.ms=1500 on the REAUTH listener: librdkafka re-authenticates its open connections
    (KIP-368) and every record sent over 4 s is delivered. On kafkawire the log shows more logins than
    connections, so the sessions were renewed in place rather than by reconnecting."""
    from confluent_kafka import Producer

    conf = _confluent_conf(target, "REAUTH", "SCRAM-SHA-256", *USERS["SCRAM-SHA-256"])
    topic = f"sec-reauth-{uuid.uuid4().hex[:6]}"
    delivered = []
    with caplog.at_level("INFO", logger="kafkawire"):
        producer = Producer(conf)
        for i in range(16):
            producer.produce(
                topic, f"r{i}".encode(), partition=0, on_delivery=lambda err, msg: delivered.append(err is None)
            )
            producer.flush(10)
            time.sleep(0.25)
        assert producer.flush(30) == 0
    assert delivered == [True] * 16
    if target.name == "kafkawire":
        logins = caplog.text.count("authenticated as User:bob with SASL SCRAM-SHA-256 on listener REAUTH")
        opened = caplog.text.count("opened on listener REAUTH")
        assert logins > opened >= 1, (logins, opened)
