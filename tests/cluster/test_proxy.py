"""``kafkawire proxy`` in front of the three-broker Kafka: one listener per broker, traffic to all three shown."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

import pytest

from kafkawire.client import Producer

from .test_client import create, read_all

pytestmark = pytest.mark.kafka_cluster


def test_proxy_shows_traffic_to_every_broker(kafka_cluster, topic_name):
    create(kafka_cluster, topic_name)
    proxy = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kafkawire",
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            kafka_cluster.bootstrap,
            "--json",
            "--topic",
            topic_name,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        found = re.search(r"listening on (127\.0\.0\.1:\d+)", proxy.stderr.readline())
        assert found, "no listening line from the proxy"
        through = found.group(1)
        with Producer(through) as producer:
            for i in range(600):
                producer.produce(topic_name, b"%d" % i, key=b"%d" % i)
            producer.flush(60)
        records = read_all(through, topic_name, 6, 600)
        assert sorted(int(r.value) for r in records) == list(range(600))
    finally:
        proxy.send_signal(signal.SIGTERM)
        out, _ = proxy.communicate(timeout=30)
    exchanges = [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"api_name"' in line]
    by_api: dict[str, set[int]] = {}
    for ex in exchanges:
        by_api.setdefault(ex["api_name"], set()).add(ex["upstream"][1])
    brokers = {n.port for n in kafka_cluster.nodes}
    assert by_api.get("Produce") == brokers, by_api
    assert by_api.get("Fetch") == brokers, by_api
