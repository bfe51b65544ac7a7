#!/usr/bin/env python3
"""Run kafka-python's own integration tests against kafkawire as an external Kafka, and report.

Steps: download kafka-python's source archive from PyPI (``pip download
--no-binary :all:``), unpack it in a temporary directory, start ``kafkawire
serve`` on a free loopback port, and run the archive's ``test/integration``
suite with ``KAFKA_URI`` pointing at it (kafka-python's fixtures then use the
broker instead of spawning Kafka). Prints pass/fail/error/skip counts and one
line per failing test. A report tool: not run by the pytest suite.

The archive lacks two files the suite imports (``test/__init__.py`` and
``test/service.py``); this tool writes a package marker and a minimal
external-service stand-in (spawning Kafka or ZooKeeper is refused: there is no
JVM Kafka here). ``KAFKA_VERSION`` defaults to the version kafka-python infers
from the broker's ApiVersions, since some tests compare the two.

Usage: python tools/run_kafka_python_integration.py [--target kafkawire|tansu] [--storage disk|memory]
           [--kafka-version X.Y.Z] [--kafka-python-version V] [--timeout SECONDS] [--keep] [-k EXPR]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from peers.peer_harness import BrokerProcess  # noqa: E402

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
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                    f"kafka-python=={version}", "-d", str(download)], check=True)
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
    code = ("import sys; from kafka import KafkaAdminClient; a = KafkaAdminClient(bootstrap_servers=sys.argv[1]); "
            "print('.'.join(map(str, a._manager.broker_version))); a.close()")
    out = subprocess.run([sys.executable, "-c", code, bootstrap], capture_output=True, text=True, timeout=60,
                         cwd=source_root, check=True)
    version = out.stdout.strip().splitlines()[-1]
    return version if version.count(".") >= 2 else version + ".0"


def summarize(junit: Path) -> tuple[Counter, list[tuple[str, str, str]]]:
    counts: Counter = Counter()
    problems = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '').replace('test.integration.', '')}::{case.get('name')}"
        outcome = "passed"
        detail = ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                detail = (child.get("message") or "").strip().splitlines()[0][:160] if child.get("message") else ""
                break
        counts[outcome] += 1
        if outcome in ("failed", "error"):
            problems.append((outcome, name, detail))
    return counts, problems


def main() -> int:
    import kafka

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=["kafkawire", "tansu"], default="kafkawire")
    parser.add_argument("--storage", choices=["disk", "memory"], default="disk")
    parser.add_argument("--kafka-version", help="KAFKA_VERSION for the suite (default: inferred from the broker)")
    parser.add_argument("--kafka-python-version", default=kafka.__version__,
                        help="source archive to test (default: the installed kafka-python, %(default)s)")
    parser.add_argument("--timeout", type=int, default=60, help="per-test timeout in seconds")
    parser.add_argument("--keep", action="store_true", help="keep the sources and broker data, not only the logs")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="kafka-python-integration-"))
    print(f"work directory: {workdir}")
    root = fetch_sources(args.kafka_python_version, workdir)
    kafka_root = workdir / "no-kafka-here"  # the fixtures insist the directory exists; nothing runs from it
    kafka_root.mkdir()

    # The suite's own broker fixture is node 0 (tests assign replicas to broker 0) and lets groups use short
    # session timeouts; give kafkawire the same settings a Kafka test broker would have.
    extra = ["--node-id", "0", "--override", "group.min.session.timeout.ms=1000",
             "--override", "group.initial.rebalance.delay.ms=0"] if args.target == "kafkawire" else []
    broker = BrokerProcess(args.target, data_dir=workdir / "broker", storage=args.storage, extra_args=extra)
    broker.start()
    try:
        version = args.kafka_version or inferred_kafka_version(broker.bootstrap, root)
        print(f"broker: {args.target} ({args.storage}) on {broker.bootstrap}; KAFKA_VERSION={version}; "
              f"kafka-python {args.kafka_python_version} from its source archive")
        junit = workdir / "junit.xml"
        env = dict(os.environ, KAFKA_URI=f"PLAINTEXT://{broker.bootstrap}", KAFKA_VERSION=version,
                   KAFKA_ROOT=str(kafka_root))
        cmd = [sys.executable, "-m", "pytest", "test/integration", "-q", "-p", "no:cacheprovider",
               f"--timeout={args.timeout}", "-o", "addopts=", "-o", "log_level=WARNING", "--tb=line",
               f"--junitxml={junit}"]
        if args.keyword:
            cmd += ["-k", args.keyword]
        with open(workdir / "pytest.log", "wb") as log:
            subprocess.run(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    finally:
        broker.stop()

    counts, problems = summarize(junit)
    total = sum(counts.values())
    print(f"\nkafka-python {args.kafka_python_version} integration tests against {args.target}: {total} tests")
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['error']} errors, "
          f"{counts['skipped']} skipped")
    for outcome, name, detail in problems:
        print(f"  {outcome.upper():6} {name}: {detail}")
    spawned = [name for outcome, name, detail in problems if "servers/resources" in detail]
    if spawned:
        print(f"({len(spawned)} of these set up their own Kafka from the suite's server resources, e.g. with TLS: "
              f"they cannot use an external broker)")
    print(f"full log: {workdir / 'pytest.log'}; broker log: {broker.log_path}")
    if not args.keep:  # keep the logs, drop the sources and the broker's data
        for name in ("download", "src", "broker", "no-kafka-here"):
            shutil.rmtree(workdir / name, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
