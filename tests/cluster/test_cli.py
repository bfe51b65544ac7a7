"""``kafkawire topics/produce/consume/apis`` against the three-broker Kafka 4.4 cluster, as a user runs them."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.kafka_cluster


def kafkawire(*args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "kafkawire", *args], input=stdin, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_cli_round_trip_over_the_cluster(kafka_cluster, topic_name):
    bootstrap = ["--bootstrap", kafka_cluster.bootstrap]
    kafkawire("topics", "create", topic_name, "--partitions", "6", "--replication-factor", "3", *bootstrap)
    described = kafkawire("topics", "describe", topic_name, *bootstrap)
    for node_id in (1, 2, 3):  # leaders on every broker, shown by the CLI
        assert f"Leader: {node_id}\t" in described, described
    lines = [f"k{i}\tv{i}" for i in range(60)]
    kafkawire("produce", topic_name, "--key-separator", "\t", *bootstrap, stdin="\n".join(lines) + "\n")
    out = kafkawire("consume", topic_name, "--from-beginning", "--max-messages", "60", "--print-key", *bootstrap)
    assert sorted(out.splitlines()) == sorted(lines)
    apis = kafkawire("apis", *bootstrap)
    for node in kafka_cluster.nodes:  # every broker of the metadata was asked
        assert f"{node.port}" in apis, apis
