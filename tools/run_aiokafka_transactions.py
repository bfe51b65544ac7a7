#!/usr/bin/env python3
"""Run aiokafka's own transactional integration tests against kafkawire (and Apache Kafka) and report.

aiokafka's sdist has no tests and its suite starts Kafka in docker (``--docker-image``); this tool takes the
suite from aiokafka's git repository at the installed release's tag (``--source`` a local clone or bare git
directory instead), writes a ``docker`` stand-in module (nothing is pulled or run) and appends fixtures to
the suite's ``conftest.py`` that hand every test an external broker: ``kafkawire serve`` or the reference
Kafka (``tools/kafka_reference.py``), both on loopback with the settings aiokafka's image has
(``num.partitions=2``, short group timings). ``kafka_version`` is what ``--kafka-version`` says (default
the reference release), as the image tag would.

Runs ``tests/test_transactional_producer.py`` and ``tests/test_transactional_consumer.py`` (``--tests``
for others) once per ``--target`` and prints pass/fail counts, each failure, and the tests whose outcome
differs between targets. A report tool, not part of the pytest suite (a run takes minutes).

Usage: python tools/run_aiokafka_transactions.py [--target kafkawire,kafka] [--source DIR] [--timeout S] [-k EXPR]
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
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tools"))

from suite_outcomes import print_differences, report  # noqa: E402

import kafka_pins  # noqa: E402
from peers.peer_harness import BrokerProcess, KafkaBroker  # noqa: E402

TRANSACTION_TESTS = ["tests/test_transactional_producer.py", "tests/test_transactional_consumer.py"]
# aiokafka's test image: two partitions per auto-created topic; the group timings of kafkawire's other runs
SETTINGS = {"num.partitions": "2", "group.min.session.timeout.ms": "1000", "group.initial.rebalance.delay.ms": "0"}

DOCKER_STANDIN = '''\
"""Written by kafkawire's tools/run_aiokafka_transactions.py: no docker here, the broker is external."""


class _Container:
    pass


class models:
    class containers:
        Container = _Container


def from_env():
    raise RuntimeError("this run has no docker: the broker under test is external")
'''

CONFTEST_OVERRIDES = """

# --- appended by kafkawire's tools/run_aiokafka_transactions.py: an external broker, no docker -------------
@pytest.fixture(scope="session")
def docker():
    yield None


@pytest.fixture(scope="session")
def kafka_image(request):
    return request.config.getoption("--docker-image")


@pytest.fixture(scope="session")
def ssl_folder():
    return None


@pytest.fixture(scope="session")
def kafka_server():
    host, port = os.environ["KAFKAWIRE_AIOKAFKA_BOOTSTRAP"].rsplit(":", 1)
    yield KafkaServer(host, int(port), 0, 0, 0, None)


@pytest.fixture(scope="class")
def acl_manager():
    return None


@pytest.fixture(scope="class")
def kafka_config():
    return None


@pytest.fixture(scope="class")
def kerberos_utils():
    return None
"""


def fetch_tests(version: str, source: str | None, workdir: Path) -> Path:
    """aiokafka's ``tests`` directory at tag ``v<version>`` in ``workdir/suite``."""
    suite = workdir / "suite"
    suite.mkdir()
    if source is None:
        clone = workdir / "aiokafka.git"
        subprocess.run(
            [
                "git",
                "clone",
                "--quiet",
                "--bare",
                "--depth",
                "1",
                "--branch",
                f"v{version}",
                "https://github.com/aio-libs/aiokafka.git",
                str(clone),
            ],
            check=True,
        )
        source, rev = str(clone), "HEAD"
    else:
        tags = subprocess.run(
            ["git", "-C", source, "tag", "--list", f"v{version}"], capture_output=True, text=True, check=True
        ).stdout.split()
        rev = f"v{version}" if tags else "HEAD"
        if not tags:
            print(f"note: {source} has no tag v{version}; using its HEAD", flush=True)
    archive = subprocess.run(["git", "-C", source, "archive", rev, "tests"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(suite)], input=archive, check=True)
    stubs = suite / "stubs" / "docker"
    stubs.mkdir(parents=True)
    (stubs / "__init__.py").write_text(DOCKER_STANDIN)
    conftest = suite / "tests" / "conftest.py"
    conftest.write_text(conftest.read_text() + CONFTEST_OVERRIDES)
    return suite


def make_target(target: str, data_dir: Path):
    if target == "kafka":
        return KafkaBroker(data_dir, SETTINGS)
    extra = [a for k, v in SETTINGS.items() for a in ("--override", f"{k}={v}")]
    return BrokerProcess(target, data_dir=data_dir, storage="disk", extra_args=extra)


def run_suite(target: str, args, suite: Path, workdir: Path):
    broker = make_target(target, workdir / f"broker-{target}")
    broker.start()
    log_path = workdir / f"pytest-{target}.log"
    junit = workdir / f"junit-{target}.xml"
    try:
        print(f"broker: {target} on {broker.bootstrap}; aiokafka {args.aiokafka_version}", flush=True)
        env = dict(
            os.environ,
            KAFKAWIRE_AIOKAFKA_BOOTSTRAP=broker.bootstrap,
            PYTHONPATH=os.pathsep.join([str(suite / "stubs"), os.environ.get("PYTHONPATH", "")]),
        )
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            *args.tests,
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            f"--timeout={args.timeout}",
            "--tb=short",
            f"--junitxml={junit}",
            f"--docker-image=external:{args.kafka_version}",
        ]
        if args.keyword:
            cmd += ["-k", args.keyword]
        with open(log_path, "wb") as log:
            subprocess.run(cmd, cwd=suite, env=env, stdout=log, stderr=subprocess.STDOUT)
    finally:
        broker.stop()
    return report(f"aiokafka {args.aiokafka_version} transactional tests against {target}", junit, log_path)


def main() -> int:
    import aiokafka

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="kafkawire,kafka", help="comma list of kafkawire, kafka")
    parser.add_argument("--source", help="a clone or bare git directory of aiokafka (default: clone from GitHub)")
    parser.add_argument(
        "--aiokafka-version",
        default=aiokafka.__version__,
        help="tag of the suite (default: the installed aiokafka, %(default)s)",
    )
    parser.add_argument(
        "--kafka-version",
        default=kafka_pins.KAFKA,
        help="the version the suite's version checks see (default: %(default)s)",
    )
    parser.add_argument("--tests", nargs="+", default=TRANSACTION_TESTS)
    parser.add_argument("--timeout", type=int, default=60, help="per-test timeout in seconds")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    args = parser.parse_args()
    targets = [t.strip() for t in args.target.split(",") if t.strip()]
    if not targets or any(t not in ("kafkawire", "kafka") for t in targets):
        parser.error(f"--target: expected kafkawire and/or kafka, got {args.target!r}")
    workdir = Path(tempfile.mkdtemp(prefix="aiokafka-transactions-"))
    print(f"work directory: {workdir}")
    suite = fetch_tests(args.aiokafka_version, args.source, workdir)
    results = {t: run_suite(t, args, suite, workdir) for t in targets}
    print_differences({t: outcomes for t, (_, _, outcomes) in results.items()})
    for t in targets:
        shutil.rmtree(workdir / f"broker-{t}", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
