"""KafkaJS (npm) against the broker: admin (create, metadata, cluster, offsets, delete) and producer.

The node script ``tests/node/kafkajs_peer.js`` does the KafkaJS side; the
records it produced are read back here with librdkafka and checked in full.
KafkaJS's consumer only reads as a group member, so its read-back test also
exercises the broker's group coordinator.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .peer_harness import (
    Rec,
    assert_readback,
    by_partition,
    confluent_consume,
    confluent_create_topic,
    confluent_produce,
    end_offsets,
    make_records,
)

NODE_DIR = Path(__file__).resolve().parent.parent / "node"
SCRIPT = NODE_DIR / "kafkajs_peer.js"


def _node_unavailable() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (NODE_DIR / "node_modules" / "kafkajs").is_dir():
        return "kafkajs is not installed: run `npm install` in tests/node (tools/run-tests does)"
    return None


pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(_node_unavailable() is not None, reason=_node_unavailable() or ""),
]


def b64(data: bytes | None):
    return None if data is None else base64.b64encode(data).decode()


def run_kafkajs(job: dict) -> dict:
    proc = subprocess.run(
        ["node", str(SCRIPT)],
        input=json.dumps(job).encode(),
        capture_output=True,
        timeout=90,
        cwd=NODE_DIR,
        env=dict(os.environ, KAFKAJS_NO_PARTITIONER_WARNING="1"),
    )
    assert proc.returncode == 0, f"kafkajs_peer.js exited {proc.returncode}:\n{proc.stderr.decode()[-4000:]}"
    return json.loads(proc.stdout)


@pytest.mark.parametrize(
    "compression,idempotent",
    [
        pytest.param("none", False, marks=pytest.mark.tansu_gap("ListOffsets latest is the last batch's base + 1")),
        pytest.param("gzip", True, marks=pytest.mark.tansu_gap("InitProducerId v1 answers UNKNOWN_SERVER_ERROR")),
    ],
)
def test_admin_and_producer(broker, topic, compression, idempotent):
    partitions = 3
    records = make_records(300, partitions, seed=300 + idempotent, null_header_values=False)
    middle = by_partition(records)[1][40]
    job = {
        "brokers": [broker.bootstrap],
        "topic": topic,
        "partitions": partitions,
        "compression": compression,
        "idempotent": idempotent,
        "timestampQuery": middle.timestamp,
        "records": [
            {
                "partition": r.partition,
                "key": b64(r.key),
                "value": b64(r.value),
                "headers": [[k, b64(v)] for k, v in r.headers],
                "timestamp": r.timestamp,
            }
            for r in records
        ],
    }
    result = run_kafkajs(job)

    assert result["created"] is True
    assert result["createdAgain"] is False
    assert result["topicsBefore"] == [topic]
    nodes = result["cluster"]["brokers"]
    assert [(n["host"], n["port"]) for n in nodes] == [(broker.host, broker.port)]
    node_id = nodes[0]["nodeId"]
    assert result["cluster"]["controller"] == node_id
    (md,) = result["metadata"]
    assert md["name"] == topic
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"], p["error"]) for p in md["partitions"]] == [
        (p, node_id, [node_id], [node_id], 0) for p in range(partitions)
    ]

    delivered = [tuple(d) for d in result["delivered"]]
    got = confluent_consume(broker.bootstrap, topic, partitions, len(records))
    assert_readback(records, got, delivered=delivered)

    ends = end_offsets(records, partitions)
    assert [(o["partition"], o["low"], o["high"]) for o in result["offsets"]] == [
        (p, 0, ends[p]) for p in range(partitions)
    ]
    # Partition 1's 41st record is the first there at or after its own timestamp.
    index = records.index(middle)
    assert {o["partition"]: o["offset"] for o in result["byTimestamp"]}[1] == delivered[index][1] == 40

    assert result["scratchAfterDelete"] == []


def test_group_consumer_reads_everything(broker, topic):
    """Records from librdkafka, read by a KafkaJS group member subscribed from the beginning."""
    partitions = 3
    confluent_create_topic(broker.bootstrap, topic, partitions)
    records = make_records(300, partitions, seed=310, null_header_values=False)
    delivered = confluent_produce(broker.bootstrap, topic, records, {"compression.type": "gzip"})
    result = run_kafkajs(
        {
            "mode": "consume",
            "brokers": [broker.bootstrap],
            "topic": topic,
            "groupId": f"kafkajs-{topic}",
            "count": len(records),
            "timeoutMs": 60000,
        }
    )

    def unb64(text):
        return None if text is None else base64.b64decode(text)

    got = [
        (
            m["offset"],
            Rec(
                m["partition"],
                unb64(m["key"]),
                unb64(m["value"]),
                tuple((k, unb64(v)) for k, v in m["headers"]),
                m["timestamp"],
            ),
        )
        for m in result["consumed"]
    ]
    assert_readback(records, got, delivered=delivered)
