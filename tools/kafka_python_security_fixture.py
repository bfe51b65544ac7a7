"""A pytest plugin for kafka-python's own SSL and SASL integration tests: their broker fixture, on kafkawire or Kafka.

kafka-python's ``test/integration/fixtures.py`` starts Kafka from a local distribution with JKS stores and a
JAAS file. Loaded with ``-p kafka_python_security_fixture`` (``tools/run_client_security_suites.py`` does), this
plugin replaces ``KafkaFixture.instance`` with a broker of ``KAFKAWIRE_SUITE_TARGET`` (``kafkawire``: ``kafkawire
serve`` through ``kafkawire.testing.BrokerProcess``; ``kafka``: the reference Kafka 4.4 of
``tools/kafka_reference.py``) configured as the suite's own would be: a listener of the asked transport
(SSL, SASL_PLAINTEXT, SASL_SSL) with the asked mechanism, the suite's user ``alice``/``alice-secret`` (a PLAIN
user, or a SCRAM credential created with AlterUserScramCredentials), certificates from ``kafkawire certs``
with the CA where the suite looks for it (``ssl_dir/ca-cert``). A PLAINTEXT listener beside it is the
readiness probe and the administration path. Everything the tests then do goes through kafka-python.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

USER, PASSWORD = "alice", "alice-secret"


def _free_port() -> int:
    from kafkawire.testing._process import free_port

    return free_port("127.0.0.1")


def _properties(transport: str, mechanism: str | None, certs: Path, admin_port: int, port: int) -> dict[str, str]:
    listeners = f"PLAINTEXT://127.0.0.1:{admin_port},SECURED://127.0.0.1:{port}"
    props = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,SECURED:{transport},CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "num.partitions": "4",
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "1000",
    }
    if transport in ("SSL", "SASL_SSL"):
        props.update(
            {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(certs / "broker.p12"),
                "ssl.keystore.password": "kafkawire",
                "ssl.key.password": "kafkawire",
            }
        )
    if mechanism:
        props["sasl.enabled.mechanisms"] = mechanism
        module = (
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";'
            if mechanism == "PLAIN"
            else "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        )
        props[f"listener.name.secured.{mechanism.lower()}.sasl.jaas.config"] = module
    return props


def _create_scram_user(bootstrap: str, mechanism: str) -> None:
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    mech = ScramMechanism.SCRAM_SHA_256 if mechanism == "SCRAM-SHA-256" else ScramMechanism.SCRAM_SHA_512
    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(mech, 4096), PASSWORD.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)


def _wait_for_login(port: int, transport: str, mechanism: str, ca: Path, timeout: float = 60.0) -> None:
    from confluent_kafka.admin import AdminClient

    conf = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": transport,
        "sasl.mechanism": mechanism,
        "sasl.username": USER,
        "sasl.password": PASSWORD,
    }
    if transport == "SASL_SSL":
        conf["ssl.ca.location"] = str(ca)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            AdminClient(conf).list_topics(timeout=3)
            return
        except Exception:
            time.sleep(0.5)
    raise RuntimeError(f"the SCRAM user never could log in on 127.0.0.1:{port}")


class _Logs:
    def __init__(self, path: Path):
        self.path = path

    def dump_logs(self):
        if self.path.exists():
            sys.stderr.write(self.path.read_text(errors="replace")[-4000:])


def _secured_fixture_class(base):
    class SecuredBroker(base):
        """kafka-python's KafkaFixture, as far as its tests use it, over a kafkawire or Kafka broker."""

        def __init__(self, transport="PLAINTEXT", sasl_mechanism=None, partitions=4, replicas=1, tmp_dir=None, **_):
            self.external = False
            self.running = False
            self.host = "127.0.0.1"
            self.transport = transport.upper()
            if self.transport == "SASL_PLAINTEXT" and os.environ.get("KAFKAWIRE_SUITE_SASL_TRANSPORT") == "SASL_SSL":
                self.transport = "SASL_SSL"  # the suite's SASL tests, over TLS as in production
            self.sasl_mechanism = sasl_mechanism.upper() if sasl_mechanism else None
            self.partitions, self.replicas = partitions, replicas
            self.broker_user, self.broker_password = USER, PASSWORD
            self.zookeeper = None
            self.work = Path(str(tmp_dir)) if tmp_dir is not None else Path(os.environ["KAFKAWIRE_SUITE_WORKDIR"])
            self.work = self.work / f"broker-{self.transport}-{self.sasl_mechanism or 'none'}-{time.monotonic_ns()}"
            self.work.mkdir(parents=True)
            self.ssl_dir = str(self.work / "ssl")
            self.target = os.environ.get("KAFKAWIRE_SUITE_TARGET", "kafkawire")
            self._broker = None
            self.child = _Logs(self.work / "broker.log")

        def open(self):
            self.start()

        def start(self):
            if self.running:
                return True
            from kafkawire.security.certs import create

            certs = Path(self.ssl_dir)
            create(str(certs), password="kafkawire")
            shutil.copy(certs / "ca.pem", certs / "ca-cert")  # where the suite's client settings look
            admin_port, self.port = _free_port(), _free_port()
            props = _properties(self.transport, self.sasl_mechanism, certs, admin_port, self.port)
            if self.target == "kafka":
                from kafka_reference import ReferenceKafka

                controller = _free_port()
                props["listeners"] += f",CONTROLLER://127.0.0.1:{controller}"
                props["controller.listener.names"] = "CONTROLLER"
                broker = ReferenceKafka(self.work / "kafka", port=admin_port, config=props)
                broker.controller_port = controller
                broker.node_id = 0
                self.child = _Logs(broker.log_path)
            else:
                from kafkawire.testing._process import BrokerProcess

                path = self.work / "server.properties"
                path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
                data = self.work / "data"
                broker = BrokerProcess(
                    lambda _bootstrap: [
                        sys.executable,
                        "-m",
                        "kafkawire",
                        "serve",
                        str(path),
                        "--data-dir",
                        str(data),
                        "--node-id",
                        "0",
                    ],
                    self.work / "broker.log",
                    port=admin_port,
                )
            broker.start()
            self._broker = broker
            if self.sasl_mechanism and self.sasl_mechanism.startswith("SCRAM"):
                _create_scram_user(f"127.0.0.1:{admin_port}", self.sasl_mechanism)
                # Kafka applies the credential from its metadata log a little after answering: wait for a login
                _wait_for_login(self.port, self.transport, self.sasl_mechanism, certs / "ca.pem")
            self.running = True
            return True

        def stop(self):
            if self._broker is not None:
                (self._broker.close if hasattr(self._broker, "close") else self._broker.stop)()
                self._broker = None
            self.running = False

        def close(self):
            self.stop()

        def __del__(self):
            pass

        def dump_logs(self):
            self.child.dump_logs()

        def get_topic_names(self):
            from kafka import KafkaAdminClient

            admin = KafkaAdminClient(**self._enrich_client_params({}, client_id="topic_lister"))
            try:
                return admin.list_topics()
            finally:
                admin.close()

    return SecuredBroker


def pytest_configure(config):
    from test.integration import fixtures  # kafka-python's, from the source tree under test

    secured = _secured_fixture_class(fixtures.KafkaFixture)

    def instance(cls, broker_id, **params):
        if params.get("external"):
            raise RuntimeError("this run starts its own secured broker; do not set KAFKA_URI")
        fixture = secured(**params)
        fixture.open()
        return fixture

    fixtures.KafkaFixture.instance = classmethod(instance)
