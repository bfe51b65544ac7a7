#!/usr/bin/env python3
"""Run aiokafka's own SSL and SASL tests against kafkawire (and Kafka 4.4), and report counts.

aiokafka's suite (``tests/`` at the installed release's tag, from ``--source``: a clone or bare git directory,
e.g. the one ``fetch`` mirrors; GitHub otherwise) starts Kafka in docker with four listeners. As
``run_aiokafka_transactions.py`` does, this tool writes a ``docker`` stand-in and appends fixtures to the
suite's ``conftest.py``, here for a broker of the ``--target`` with the same four listeners: PLAINTEXT, SSL
(client certificates required), SASL_PLAINTEXT and SASL_SSL with PLAIN (users ``test`` and ``admin``, as
aiokafka's image) and SCRAM-SHA-256; the certificates are ``kafkawire certs``'s, named as the suite reads
them (``ca.crt``, ``client.crt``, ``client.key``); ``kafka_config.add_scram_user`` is
AlterUserScramCredentials.

Runs the tests that are about TLS and SASL: ``test_producer_ssl``, ``test_ssl_consume`` and in
``tests/test_sasl.py`` the PLAIN and SCRAM ones. Left out: GSSAPI (needs a Kerberos KDC in docker) and the
``test_sasl_deny_*`` ACL tests (authorization is not part of this run; kafkawire has no authorizer yet).

Usage: python tools/run_aiokafka_security.py [--target kafkawire,kafka] [--source DIR] [--timeout S] [-k EXPR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from run_aiokafka_transactions import DOCKER_STANDIN  # noqa: E402
from suite_outcomes import failures, print_differences, report  # noqa: E402

import kafka_pins  # noqa: E402

TESTS = ["tests/test_producer.py", "tests/test_consumer.py", "tests/test_sasl.py"]
SELECTION = (
    "test_producer_ssl or test_ssl_consume or test_sasl_plaintext_basic or test_sasl_plaintext_scram "
    "or test_admin_client_sasl_plaintext_basic or test_admin_client_sasl_plaintext_scrum"
)

CONFTEST_OVERRIDES = """

# --- appended by kafkawire's tools/run_aiokafka_security.py: an external secured broker, no docker ---------
import json as _kw_json


@pytest.fixture(scope="session")
def docker():
    yield None


@pytest.fixture(scope="session")
def kafka_image(request):
    return request.config.getoption("--docker-image")


@pytest.fixture(scope="session")
def ssl_folder():
    return pathlib.Path(os.environ["KAFKAWIRE_AIOKAFKA_CERTS"])


@pytest.fixture(scope="session")
def kafka_server():
    ports = _kw_json.loads(os.environ["KAFKAWIRE_AIOKAFKA_PORTS"])
    yield KafkaServer(
        "127.0.0.1", ports["PLAINTEXT"], ports["SSL"], ports["SASL_PLAINTEXT"], ports["SASL_SSL"], None
    )


class _KafkawireAclManager:
    def list_acl(self):
        return None

    def cleanup(self):
        return None

    def add_acl(self, *args, **kwargs):
        raise NotImplementedError("ACLs are not part of this run")


class _KafkawireConfig:
    def add_scram_user(self, username, password):
        from confluent_kafka.admin import (
            AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion,
        )

        ports = _kw_json.loads(os.environ["KAFKAWIRE_AIOKAFKA_PORTS"])
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
        upsert = UserScramCredentialUpsertion(
            username, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password.encode()
        )
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(30)
        import time as _time

        _time.sleep(1.0)  # Kafka applies a credential from its metadata log just after answering


@pytest.fixture(scope="class")
def acl_manager():
    return _KafkawireAclManager()


@pytest.fixture(scope="class")
def kafka_config():
    return _KafkawireConfig()


@pytest.fixture(scope="class")
def kerberos_utils():
    return None
"""

JAAS_PLAIN = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin" '
    'user_admin="admin" user_test="test";'
)
JAAS_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def fetch_tests(version: str, source: str | None, workdir: Path) -> Path:
    suite = workdir / "suite"
    suite.mkdir()
    if source is None:
        source = str(workdir / "aiokafka.git")
        url = "https://github.com/aio-libs/aiokafka.git"
        subprocess.run(
            ["git", "clone", "-q", "--bare", "--depth", "1", "--branch", f"v{version}", url, source], check=True
        )
    archive = subprocess.run(["git", "-C", source, "archive", f"v{version}", "tests"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(suite)], input=archive.stdout, check=True)
    stubs = suite / "stubs" / "docker"
    stubs.mkdir(parents=True)
    (stubs / "__init__.py").write_text(DOCKER_STANDIN)
    conftest = suite / "tests" / "conftest.py"
    conftest.write_text(conftest.read_text() + CONFTEST_OVERRIDES)
    return suite


def broker_properties(certs: Path, ports: dict[str, int]) -> dict[str, str]:
    listeners = ",".join(f"{n}://127.0.0.1:{ports[n]}" for n in LISTENERS)
    props = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": ",".join(f"{n}:{n}" for n in LISTENERS) + ",CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(certs / "broker.p12"),
        "ssl.keystore.password": "kafkawire",
        "ssl.key.password": "kafkawire",
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(certs / "truststore.p12"),
        "ssl.truststore.password": "kafkawire",
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "num.partitions": "2",
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "1000",
        "auto.create.topics.enable": "true",
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        props[f"listener.name.{listener}.plain.sasl.jaas.config"] = JAAS_PLAIN
        props[f"listener.name.{listener}.scram-sha-256.sasl.jaas.config"] = JAAS_SCRAM
    return props


def start_target(target: str, props: dict, ports: dict, workdir: Path):
    from kafkawire.testing._process import BrokerProcess, free_port

    workdir.mkdir(parents=True)
    if target == "kafka":
        from kafka_reference import ReferenceKafka

        controller = free_port()
        props = dict(props, listeners=props["listeners"] + f",CONTROLLER://127.0.0.1:{controller}")
        props["controller.listener.names"] = "CONTROLLER"
        kafka = ReferenceKafka(workdir / "kafka", port=ports["PLAINTEXT"], config=props)
        kafka.controller_port = controller
        kafka.start()
        return kafka
    path = workdir / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    argv = [sys.executable, "-m", "kafkawire", "serve", str(path), "--data-dir", str(workdir / "data")]
    return BrokerProcess(lambda _bootstrap: argv, workdir / "broker.log", port=ports["PLAINTEXT"]).start()


def run_suite(target: str, args, suite: Path, workdir: Path) -> dict[str, str]:
    import json

    from kafkawire.security.certs import create
    from kafkawire.testing._process import free_port

    certs = workdir / f"certs-{target}"
    create(str(certs), password="kafkawire")
    shutil.copy(certs / "ca.pem", certs / "ca.crt")
    shutil.copy(certs / "client-cert.pem", certs / "client.crt")
    shutil.copy(certs / "client-key.pem", certs / "client.key")
    ports = {n: free_port() for n in LISTENERS}
    broker = start_target(target, broker_properties(certs, ports), ports, workdir / f"broker-{target}")
    junit = workdir / f"junit-{target}.xml"
    log_path = workdir / f"pytest-{target}.log"
    try:
        env = dict(
            os.environ,
            KAFKAWIRE_AIOKAFKA_PORTS=json.dumps(ports),
            KAFKAWIRE_AIOKAFKA_CERTS=str(certs),
            PYTHONPATH=os.pathsep.join([str(suite / "stubs"), os.environ.get("PYTHONPATH", "")]),
        )
        cmd = [sys.executable, "-m", "pytest", *TESTS, "-q", "-p", "no:cacheprovider", "-o", "addopts="]
        cmd += [f"--timeout={args.timeout}", "--tb=short", f"--junitxml={junit}"]
        cmd += [f"--docker-image=external:{args.kafka_version}", "-k", args.keyword or SELECTION]
        with open(log_path, "wb") as log:
            subprocess.run(cmd, cwd=suite, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout * 20)
    finally:
        (broker.close if hasattr(broker, "close") else broker.stop)()
    return report(f"aiokafka {args.aiokafka_version} SSL/SASL tests against {target}", junit, log_path)[2]


def main(argv: list[str] | None = None) -> int:
    import aiokafka

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="kafkawire,kafka")
    parser.add_argument("--source", help="a clone or bare git directory of aiokafka (default: GitHub)")
    parser.add_argument("--aiokafka-version", default=aiokafka.__version__)
    parser.add_argument("--kafka-version", default=kafka_pins.KAFKA)
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("-k", dest="keyword")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="kafkawire-aiokafka-security-"))
    failed = 0
    try:
        suite = fetch_tests(args.aiokafka_version, args.source, workdir)
        results = {}
        for target in args.target.split(","):
            results[target] = run_suite(target, args, suite, workdir)
            failed += failures(results[target])
        print_differences(results)
    finally:
        if args.keep:
            print(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
