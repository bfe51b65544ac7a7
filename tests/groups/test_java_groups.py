"""The Java client (3.9.1 and the reference release's own, 4.x): KafkaConsumer subscribe (classic and KIP-848
consumer protocols) and AdminClient group calls."""

from __future__ import annotations

from pathlib import Path

import pytest

import kafka_pins
from .harness import create_topic, produce
from support.java import JavaProgram

SOURCE = Path(__file__).parent / "java" / "GroupsTool.java"


@pytest.mark.parametrize("clients", [None, kafka_pins.BROKER], ids=["clients-3.9.1", f"clients-{kafka_pins.KAFKA}"])
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_java_consumer_and_admin(broker, topic, protocol, clients):
    tool = JavaProgram.require(SOURCE, clients=clients)
    create_topic(broker.bootstrap, topic, 4)
    produce(broker.bootstrap, topic, list(range(200)), 4)
    group = f"java-{topic}"
    out = tool.run("GroupsTool", broker.bootstrap, topic, group, "200", protocol, timeout=180)
    kv = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert kv["consumed"] == "200"
    assert kv["assignment"] == "0,1,2,3"
    assert kv["committedByConsumer"] == "200"
    assert kv["stableState"] == "Stable"
    assert kv["stableMembers"] == "1"
    assert kv["stableAssignor"] == ("range" if protocol == "classic" else "uniform")
    assert kv["stableMemberPartitions"] == "4"
    assert kv["coordinator"] == "1"
    assert kv["listed"] == "true"
    assert kv["offsetSum"] == "200" and kv["offsetPartitions"] == "4"
    assert kv["emptyState"] == "Empty"
    assert kv["offsetPartitionsAfterDelete"] == "3"
    assert kv["listedAfterDelete"] == "false"
    assert kv["deleteUnknown"] == "GroupIdNotFoundException"
