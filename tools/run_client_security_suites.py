#!/usr/bin/env python3
"""Run kafka-python's own SSL and SASL integration tests against kafkawire (and Kafka 4.4), and report counts.

kafka-python's source archive (``pip download --no-binary :all:``, as ``run_kafka_python_integration.py``
fetches it) holds ``test/integration/test_ssl_integration.py`` (a raw TLS handshake, its network client
over SSL) and ``test/integration/test_sasl_integration.py`` (admin, produce and consume 100 records, the
network client; each with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 over SASL_PLAINTEXT). Their fixture starts
Kafka itself; ``tools/kafka_python_security_fixture.py`` (a pytest plugin) gives them a broker of the
``--target`` instead, configured as the suite asks. ``--transport SASL_SSL`` runs the SASL tests over
SASL_SSL (the plugin turns the suite's SASL_PLAINTEXT into it), the production setting.

aiokafka's SSL and SASL tests are not run here: its suite needs docker for Kafka and for Kerberos, and
its SSL fixture expects the broker's JKS stores from its image; kafkawire's own tests
(``tests/security/test_clients.py``) run aiokafka's client over every listener type instead.

Prints passed/failed/error/skipped per target, each failing test, and the tests whose outcome differs
between targets. ``tests/security/test_client_suites.py`` runs a bounded subset on kafkawire.

Usage: python tools/run_client_security_suites.py [--target kafkawire,kafka] [--transport SASL_PLAINTEXT|SASL_SSL]
           [--kafka-python-version V] [--timeout S] [-k EXPR] [--keep]
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

from run_kafka_python_integration import fetch_sources  # noqa: E402
from suite_outcomes import failures, print_differences, report  # noqa: E402

import kafka_pins  # noqa: E402

SUITE = ["test/integration/test_ssl_integration.py", "test/integration/test_sasl_integration.py"]


def run_suite(target: str, args, root: Path, workdir: Path) -> dict[str, str]:
    junit = workdir / f"junit-{target}.xml"
    log_path = workdir / f"pytest-{target}.log"
    env = dict(
        os.environ,
        KAFKA_VERSION=args.kafka_version,
        KAFKA_ROOT=str(workdir / "no-kafka-here"),
        KAFKAWIRE_SUITE_TARGET=target,
        KAFKAWIRE_SUITE_WORKDIR=str(workdir / f"brokers-{target}"),
        KAFKAWIRE_SUITE_SASL_TRANSPORT=args.transport,
        PYTHONPATH=os.pathsep.join([str(REPO / "tools"), os.environ.get("PYTHONPATH", "")]),
    )
    env.pop("KAFKA_URI", None)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        *SUITE,
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "kafka_python_security_fixture",
        "-o",
        "addopts=",
        f"--timeout={args.timeout}",
        "--tb=short",
        f"--junitxml={junit}",
    ]
    if args.keyword:
        cmd += ["-k", args.keyword]
    print(f"target: {target}; kafka-python {args.kafka_python_version}; SASL over {args.transport}", flush=True)
    with open(log_path, "wb") as log:
        subprocess.run(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout * 20)
    title = f"kafka-python {args.kafka_python_version} SSL/SASL integration tests against {target}"
    return report(title, junit, log_path)[2]


def main(argv: list[str] | None = None) -> int:
    import kafka

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="kafkawire,kafka", help="comma list of kafkawire, kafka")
    parser.add_argument("--transport", default="SASL_PLAINTEXT", choices=["SASL_PLAINTEXT", "SASL_SSL"])
    parser.add_argument("--kafka-python-version", default=kafka.__version__)
    parser.add_argument("--kafka-version", default=kafka_pins.KAFKA, help="KAFKA_VERSION for the suite")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test")
    parser.add_argument("-k", dest="keyword")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="kafkawire-client-suites-"))
    failed = 0
    try:
        root = fetch_sources(args.kafka_python_version, workdir)
        (workdir / "no-kafka-here").mkdir()
        results = {}
        for target in args.target.split(","):
            results[target] = run_suite(target, args, root, workdir)
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
