"""KafkaJS consumer group (subscribe, run, commit, two-member rebalance) and admin group calls."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .harness import create_topic, produce

NODE_DIR = Path(__file__).resolve().parent.parent / "node"
SCRIPT = NODE_DIR / "groups-kafkajs.js"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (NODE_DIR / "node_modules" / "kafkajs").is_dir(),
    reason="node or kafkajs missing (npm install in tests/node)",
)


def test_kafkajs_consumer_group(broker, topic):
    partitions = 6
    create_topic(broker.bootstrap, topic, partitions)
    produce(broker.bootstrap, topic, list(range(300)), partitions)
    group = f"kjs-{topic}"
    job = {"brokers": [broker.bootstrap], "topic": topic, "group": group, "partitions": partitions, "expected": 300}
    proc = subprocess.run(
        ["node", str(SCRIPT)],
        input=json.dumps(job).encode(),
        capture_output=True,
        timeout=150,
        cwd=NODE_DIR,
        env=dict(os.environ, KAFKAJS_NO_PARTITIONER_WARNING="1"),
    )
    assert proc.returncode == 0, proc.stderr.decode()[-4000:]
    out = json.loads(proc.stdout)
    assert out["seen"] == list(range(300))
    a, b = out["assignments"]["c1"], out["assignments"]["c2"]
    assert sorted(a + b) == list(range(partitions))
    committed = {
        int(p["partition"]): int(p["offset"]) for t in out["offsets"] if t["topic"] == topic for p in t["partitions"]
    }
    assert committed == {p: 50 for p in range(partitions)}
    assert any(g["groupId"] == group and g["protocolType"] == "consumer" for g in out["listed"]["groups"])
    stable = out["describedStable"][0]
    assert stable["state"] == "Stable" and stable["members"] == 2 and stable["protocolType"] == "consumer"
    assert out["described"][0]["state"] == "Empty"
