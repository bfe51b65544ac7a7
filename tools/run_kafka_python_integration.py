#!/usr/bin/env python3
"""Run kafka-python's own integration tests against kafkawire (and Apache Kafka) as an external broker, and report.

Steps: download kafka-python's source archive from PyPI (``pip download
--no-binary :all:``), unpack it in a temporary directory, start ``kafkawire
serve`` on a free loopback port, and run the archive's ``test/integration``
suite with ``KAFKA_URI`` pointing at it (kafka-python's fixtures then use the
broker instead of spawning Kafka). Prints pass/fail/error/skip counts and one
line per failing test. A report tool: not run by the pytest suite.

The archive lacks two files the suite imports (``test/__init__.py`` and
``test/service.py``); this tool writes a package marker and a minimal
external-service stand-in (spawning Kafka or ZooKeeper is refused: there is no
JVM Kafka spawned by the suite here). ``KAFKA_VERSION`` defaults to the
version kafka-python infers from the broker's ApiVersions, since some tests
compare the two.

``--target`` takes a comma list: ``kafka`` is Apache Kafka itself, the pinned
reference release (``tools/kafka_reference.py``), run with the same node id
and group settings as kafkawire. With several targets the suite runs once per
target (one download) and the report ends with every test whose outcome
differs between them; ``--target kafkawire,kafka`` measures kafkawire against
the reference.

``--override KEY=VALUE`` adds a broker setting on every target (not Tansu), e.g. ``num.partitions=4``,
which kafka-python's own fixture sets: its transactional tests commit offsets of a partition 1 of an
auto-created topic (``-k transaction --override num.partitions=4``).

Usage: python tools/run_kafka_python_integration.py [--target kafkawire,kafka,tansu] [--storage disk|memory]
           [--kafka-version X.Y.Z] [--kafka-python-version V] [--timeout SECONDS] [--keep] [-k EXPR]
           [--override KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tools"))

from suite_outcomes import print_differences, report  # noqa: E402

from peers.peer_harness import BrokerProcess, KafkaBroker  # noqa: E402

# What the suite's own broker fixture would have: node 0 (tests assign replicas to broker 0), short group
# session timeouts allowed, no initial rebalance delay.
NODE_ID = 0
GROUP_SETTINGS = {"group.min.session.timeout.ms": "1000", "group.initial.rebalance.delay.ms": "0"}

SERVICE_STANDIN = '''\
"""Written by kafkawire's tools/run_kafka_python_integration.py: the broker is always external here."""


class ExternalService:
    def __init__(self, host, port):
        self.host, self.port = host, port

    def start(self):
        pass

    def stop(self):
        pass

    def dump_logs(self):
        pass

    def wait_for(self, pattern, timeout=30):
        return True


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("this run has no Kafka or ZooKeeper to spawn: the broker under test is external")
'''


def fetch_sources(version: str, workdir: Path) -> Path:
    download = workdir / "download"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"kafka-python=={version}",
            "-d",
            str(download),
        ],
        check=True,
    )
    (archive,) = [p for p in download.iterdir() if p.name.endswith((".tar.gz", ".zip"))]
    with tarfile.open(archive) as tar:
        tar.extractall(workdir / "src", filter="data")
    (root,) = [p for p in (workdir / "src").iterdir() if p.is_dir()]
    if not (root / "test" / "integration").is_dir():
        raise SystemExit(f"{archive.name} has no test/integration directory")
    (root / "test" / "__init__.py").touch()
    if not (root / "test" / "service.py").exists():
        (root / "test" / "service.py").write_text(SERVICE_STANDIN)
    return root


def inferred_kafka_version(bootstrap: str, source_root: Path) -> str:
    code = (
        "import sys; from kafka import KafkaAdminClient; a = KafkaAdminClient(bootstrap_servers=sys.argv[1]); "
        "print('.'.join(map(str, a._manager.broker_version))); a.close()"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, bootstrap], capture_output=True, text=True, timeout=60, cwd=source_root, check=True
    )
    version = out.stdout.strip().splitlines()[-1]
    return version if version.count(".") >= 2 else version + ".0"


def make_target(target: str, data_dir: Path, storage: str, overrides: dict[str, str] | None = None):
    settings = {**GROUP_SETTINGS, **(overrides or {})}
    if target == "kafka":
        broker = KafkaBroker(data_dir, settings)
        broker.kafka.node_id = NODE_ID
        return broker
    extra = ["--node-id", str(NODE_ID)] + [a for k, v in settings.items() for a in ("--override", f"{k}={v}")]
    return BrokerProcess(target, data_dir=data_dir, storage=storage, extra_args=extra if target == "kafkawire" else [])


def run_suite(target: str, args, root: Path, workdir: Path, kafka_root: Path):
    """One run of the suite against a fresh broker of ``target``; returns (counts, problems, outcomes, log)."""
    overrides = dict(o.split("=", 1) for o in args.override)
    broker = make_target(target, workdir / f"broker-{target}", args.storage, overrides)
    broker.start()
    log_path = workdir / f"pytest-{target}.log"
    try:
        version = args.kafka_version or inferred_kafka_version(broker.bootstrap, root)
        storage = "" if target == "kafka" else f" ({args.storage})"
        print(
            f"broker: {target}{storage} on {broker.bootstrap}; KAFKA_VERSION={version}; "
            f"kafka-python {args.kafka_python_version} from its source archive",
            flush=True,
        )
        junit = workdir / f"junit-{target}.xml"
        env = dict(
            os.environ, KAFKA_URI=f"PLAINTEXT://{broker.bootstrap}", KAFKA_VERSION=version, KAFKA_ROOT=str(kafka_root)
        )
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "test/integration",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--timeout={args.timeout}",
            "-o",
            "addopts=",
            "-o",
            "log_level=WARNING",
            "--tb=line",
            f"--junitxml={junit}",
        ]
        if args.keyword:
            cmd += ["-k", args.keyword]
        with open(log_path, "wb") as log:
            subprocess.run(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    finally:
        broker.stop()
        if target == "kafka":
            shutil.copy(broker.kafka.log_path, workdir / "kafka.log")
    title = f"kafka-python {args.kafka_python_version} integration tests against {target}"
    counts, problems, outcomes = report(title, junit, log_path)
    spawned = [name for outcome, name, detail in problems if "servers/resources" in detail]
    if spawned:
        print(
            f"({len(spawned)} of these set up their own Kafka from the suite's server resources, e.g. with TLS: "
            f"they cannot use an external broker)"
        )
    return counts, problems, outcomes


def main() -> int:
    import kafka

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--target",
        default="kafkawire",
        help="comma list of kafkawire, kafka (the reference Apache Kafka), tansu (default: %(default)s)",
    )
    parser.add_argument("--storage", choices=["disk", "memory"], default="disk")
    parser.add_argument("--kafka-version", help="KAFKA_VERSION for the suite (default: inferred from the broker)")
    parser.add_argument(
        "--kafka-python-version",
        default=kafka.__version__,
        help="source archive to test (default: the installed kafka-python, %(default)s)",
    )
    parser.add_argument("--timeout", type=int, default=60, help="per-test timeout in seconds")
    parser.add_argument("--keep", action="store_true", help="keep the sources and broker data, not only the logs")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker setting for every target (repeatable), e.g. num.partitions=4",
    )
    args = parser.parse_args()
    if any("=" not in o for o in args.override):
        parser.error("--override takes KEY=VALUE")
    targets = [t.strip() for t in args.target.split(",") if t.strip()]
    unknown = [t for t in targets if t not in ("kafkawire", "kafka", "tansu")]
    if unknown or not targets:
        parser.error(f"--target: unknown {unknown or 'empty list'}")

    workdir = Path(tempfile.mkdtemp(prefix="kafka-python-integration-"))
    print(f"work directory: {workdir}")
    root = fetch_sources(args.kafka_python_version, workdir)
    kafka_root = workdir / "no-kafka-here"  # the fixtures insist the directory exists; nothing runs from it
    kafka_root.mkdir()

    results = {target: run_suite(target, args, root, workdir, kafka_root) for target in targets}
    print_differences({t: outcomes for t, (_, _, outcomes) in results.items()})
    if not args.keep:  # keep the logs, drop the sources and the brokers' data
        for name in ("download", "src", "no-kafka-here", *(f"broker-{t}" for t in targets)):
            shutil.rmtree(workdir / name, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
