"""kafkawire's admin client on the three-broker Kafka 4.4 cluster: each call goes to the broker Kafka's Java
Admin picks, and does what it says.

Where a request went is seen on the wire, by ``kafkawire proxy`` in front of the cluster (one listener per
broker, ``--json --annotate``: every exchange with the upstream broker it went to and both frames' fields),
not by asking the client what it thinks it did; Kafka 4.4's own Admin (``AdminRouting.java``) makes the same
calls through the same proxy and is held to the same rules (KafkaAdminClient, bootstrap servers): ElectLeaders
and CreatePartitions to the node the client's metadata names as controller (in KRaft a live broker, which
forwards them to the active controller); DescribeConfigs and IncrementalAlterConfigs of BROKER "n" to node n;
DeleteRecords to each partition's leader, one request per leader; DescribeLogDirs to each broker asked about."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kafkawire.client import Admin, AsyncAdmin, KafkaError, Producer
from kafkawire.client.admin import (
    PREFERRED,
    RESOURCE_BROKER,
    ConfigResource,
)
from kafkawire.protocol import errors as kerrors, message_class

from .conftest import node_down, wait_until
from .test_client import create
from kafka_pins import KAFKA  # tools/, on sys.path through tests/conftest.py
from support.java import JavaProgram

pytestmark = pytest.mark.kafka_cluster

KAFKA_MESSAGE_MAX_BYTES = "1048588"  # Kafka's default message.max.bytes


def _produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    with Producer(bootstrap) as producer:
        for p in range(partitions):
            for i in range(per_partition):
                producer.produce(topic, b"%d" % i, partition=p)
        producer.flush(60)


class Proxy:
    """``kafkawire proxy --json --annotate`` in front of the cluster; ``exchanges()`` once stopped."""

    def __init__(self, cluster, out_path):
        # its output goes to a file: a pipe nobody reads until the end fills and stalls the proxy
        self.out_path = out_path
        with open(out_path, "w") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "kafkawire",
                    "proxy",
                    "--listen",
                    "127.0.0.1:0",
                    "--upstream",
                    cluster.bootstrap,
                    "--json",
                    "--annotate",
                ],
                stdout=out,
                stderr=subprocess.PIPE,
                text=True,
            )
        found = re.search(r"listening on (127\.0\.0\.1:\d+)", self.proc.stderr.readline())
        if not found:
            self.proc.kill()
            raise AssertionError("no listening line from the proxy")
        self.bootstrap = found.group(1)
        self.node_of_port = {n.port: n.node_id for n in cluster.nodes}
        self.out = ""

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate(timeout=30)
        self.out = self.out_path.read_text()

    def exchanges(self, client_id: str) -> list[dict]:
        return [
            ex
            for ex in map(json.loads, (line for line in self.out.splitlines() if line.startswith("{")))
            if ex.get("client_id") == client_id and ex.get("api_name")
        ]

    def requests(self, client_id: str, api_name: str) -> list[tuple[int, dict]]:
        """[(node id it went to, {path: value} of the request's fields)] for ``client_id``'s ``api_name`` requests."""
        return [
            (self.node_of_port[ex["upstream"][1]], _fields(ex, "request"))
            for ex in self.exchanges(client_id)
            if ex["api_name"] == api_name
        ]

    def controller_checks(self, client_id: str, api_name: str, *, own_metadata_only: bool) -> list[tuple[int, int]]:
        """[(node an ``api_name`` request went to, ControllerId of the last Metadata answer the client had kept
        before sending it)]: equal pairs are Kafka's ControllerNodeProvider.

        kafkawire's client keeps every Metadata answer. The Java Admin keeps only those of its own metadata
        requests, which ask for no topic (``own_metadata_only``); a describeTopics or a deleteRecords leader
        lookup is a call of its own whose answer it does not keep."""
        out = []
        exchanges = self.exchanges(client_id)
        kept = [
            m
            for m in exchanges
            if m["api_name"] == "Metadata" and (not own_metadata_only or _fields(m, "request").get("body.Topics") == 0)
        ]
        for ex in exchanges:
            if ex["api_name"] != api_name:
                continue
            answered = [m for m in kept if m["time_ns"] + m["latency_ms"] * 1e6 <= ex["time_ns"]]
            latest = max(answered, key=lambda m: m["time_ns"] + m["latency_ms"] * 1e6)
            out.append((self.node_of_port[ex["upstream"][1]], _fields(latest, "response")["body.ControllerId"]))
        return out


def _fields(ex: dict, side: str) -> dict:
    return {e["path"]: e["value"] for e in ex.get(f"{side}_annotations", []) if "path" in e}


def _ask_node(bootstrap: str, node_id: int, request):
    """``request`` sent to node ``node_id`` itself; its answer."""

    async def ask():
        async with AsyncAdmin(bootstrap) as admin:
            return await (await admin.cluster.connection(node_id)).request(request)

    return asyncio.run(ask())


def _partitions_in(fields: dict) -> set[int]:
    return {v for k, v in fields.items() if k.endswith(".PartitionIndex")}


def test_each_call_goes_to_the_broker_kafkas_admin_picks(kafka_cluster, topic_name, tmp_path):
    """kafkawire's admin, then Kafka 4.4's Java Admin (tests/cluster/AdminRouting.java), make the same calls
    through one proxy; each request of either goes to the broker the Java Admin's rules name."""
    java = JavaProgram.require(Path(__file__).with_name("AdminRouting.java"), clients=f"kafka-{KAFKA}")
    info = create(kafka_cluster, topic_name, partitions=3)
    leaders = {p: info.partitions[p].leader for p in range(3)}
    assert len(set(leaders.values())) == 3, leaders  # Kafka spreads the leaders of a new topic
    _produce(kafka_cluster.bootstrap, topic_name, 3, 10)
    proxy = Proxy(kafka_cluster, tmp_path / "proxy.jsonl")
    try:
        with Admin(proxy.bootstrap, client_id="kafkawire-admin-routing") as admin:
            admin.describe_topics([topic_name])
            elected = admin.elect_leaders(PREFERRED, [(topic_name, p) for p in range(3)])
            deleted = admin.delete_records({(topic_name, p): 4 + p for p in range(3)})
            broker2 = ConfigResource(RESOURCE_BROKER, "2")
            admin.describe_configs("2", resource_type=RESOURCE_BROKER, keys=["message.max.bytes"])
            admin.incremental_alter_configs(
                {broker2: {"message.max.bytes": KAFKA_MESSAGE_MAX_BYTES}}, validate_only=True
            )
            dirs = admin.describe_log_dirs([1, 3])
            grown = admin.create_partitions({topic_name: 4}, wait=False)
        java.run("AdminRouting", proxy.bootstrap, topic_name, "3", "6", "5", timeout=120)
    finally:
        proxy.stop()

    assert set(elected) == {(topic_name, p) for p in range(3)}
    assert all(e is not None and e.name == "ELECTION_NOT_NEEDED" for e in elected.values()), elected
    assert deleted == {(topic_name, p): 4 + p for p in range(3)}
    assert grown == {topic_name: None}
    assert sorted(dirs) == [1, 3]
    for node, by_dir in dirs.items():
        replicas = {tp for d in by_dir.values() for tp in d.replicas if tp[0] == topic_name}
        assert replicas == {(topic_name, p) for p in range(3)}, (node, replicas)

    for client in ("kafkawire-admin-routing", "java-admin-routing"):
        for api in ("ElectLeaders", "CreatePartitions"):
            (sent,) = proxy.controller_checks(client, api, own_metadata_only=client.startswith("java"))
            assert sent[0] == sent[1], f"{client}: {api} to node {sent[0]}, the controller was {sent[1]}"
        sent = proxy.requests(client, "DeleteRecords")
        assert sorted((node, sorted(_partitions_in(fields))) for node, fields in sent) == sorted(
            (leader, [p]) for p, leader in leaders.items()
        ), client
        assert [node for node, _ in proxy.requests(client, "DescribeConfigs")] == [2], client
        assert [node for node, _ in proxy.requests(client, "IncrementalAlterConfigs")] == [2], client
        assert sorted(node for node, _ in proxy.requests(client, "DescribeLogDirs")) == [1, 3], client


def test_delete_records_on_partitions_led_by_different_brokers(kafka_cluster, topic_name):
    info = create(kafka_cluster, topic_name, partitions=3)
    assert len({p.leader for p in info.partitions.values()}) == 3
    _produce(kafka_cluster.bootstrap, topic_name, 3, 20)
    with Admin(kafka_cluster.bootstrap) as admin:
        assert admin.delete_records({(topic_name, 0): 5, (topic_name, 1): 20, (topic_name, 2): -1}) == {
            (topic_name, 0): 5,
            (topic_name, 1): 20,
            (topic_name, 2): 20,
        }
        starts = admin.list_offsets({(topic_name, p): "earliest" for p in range(3)})
        assert {p: starts[(topic_name, p)].offset for p in range(3)} == {0: 5, 1: 20, 2: 20}
        past = admin.delete_records({(topic_name, 0): 21}, raise_errors=False)
        assert past[(topic_name, 0)].name == "OFFSET_OUT_OF_RANGE"


def test_create_partitions_is_seen_by_every_broker(kafka_cluster, topic_name):
    create(kafka_cluster, topic_name, partitions=2)
    with Admin(kafka_cluster.bootstrap) as admin:
        assert admin.create_partitions({topic_name: 5}) == {topic_name: None}
        with pytest.raises(KafkaError) as exc:
            admin.create_partitions({topic_name: 3})
        assert exc.value.name == "INVALID_PARTITIONS"
    for node in kafka_cluster.nodes:  # each broker's own metadata, not one broker's

        def count(node=node):
            with Admin(node.bootstrap) as one:
                return one.describe_topics([topic_name])[topic_name].num_partitions

        wait_until(lambda: count() == 5, 30, f"5 partitions in node {node.node_id}'s metadata")


def test_broker_config_set_on_node_2_is_answered_by_node_2_only(kafka_cluster):
    broker2 = ConfigResource(RESOURCE_BROKER, "2")
    with Admin(kafka_cluster.bootstrap) as admin:
        try:
            assert admin.incremental_alter_configs({broker2: {"message.max.bytes": "1000123"}}) == {broker2: None}

            def values():
                return {
                    n: admin.describe_configs(str(n), resource_type=RESOURCE_BROKER, keys=["message.max.bytes"])[
                        "message.max.bytes"
                    ]
                    for n in (1, 2, 3)
                }

            wait_until(
                lambda: values() == {1: KAFKA_MESSAGE_MAX_BYTES, 2: "1000123", 3: KAFKA_MESSAGE_MAX_BYTES},
                30,
                "message.max.bytes set on node 2 alone",
            )
            # node 1 does not answer for node 2 (Kafka: INVALID_REQUEST, "Unexpected broker id"): the routing matters
            cls = message_class("DescribeConfigsRequest")
            request = cls(
                resources=[
                    cls.DescribeConfigsResource(
                        resource_type=RESOURCE_BROKER, resource_name="2", configuration_keys=["message.max.bytes"]
                    )
                ],
                include_synonyms=False,
                include_documentation=False,
            )
            assert _ask_node(kafka_cluster.bootstrap, 1, request).results[0].error_code == kerrors.INVALID_REQUEST
        finally:
            admin.incremental_alter_configs({broker2: {"message.max.bytes": None}})


def test_preferred_election_after_the_leader_moved(kafka_cluster, topic_name):
    """Stop the preferred leader of a partition, restart it, elect: it leads again, by this election.

    The cluster's own balancer (``leader.imbalance.check.interval.seconds=10``) makes the same election
    some seconds after the preferred replica is back in the ISR, so the test asks as soon as it can
    (PREFERRED_LEADER_NOT_AVAILABLE until the replica has caught up) and checks the answer was an election,
    not ELECTION_NOT_NEEDED; if the balancer won that race (a window of about 0.2 s in 10 s), the cycle is
    done once more."""
    info = create(kafka_cluster, topic_name, partitions=1)
    preferred = info.partitions[0].replicas[0]
    assert info.partitions[0].leader == preferred
    tp = (topic_name, 0)
    with Admin(kafka_cluster.bootstrap) as admin:
        for _cycle in range(2):
            with node_down(kafka_cluster, preferred):
                wait_until(
                    lambda: admin.describe_topics([topic_name])[topic_name].partitions[0].leader not in (preferred, -1),
                    60,
                    "another leader",
                )
                moved_to = admin.describe_topics([topic_name])[topic_name].partitions[0].leader

            def elect():
                error = admin.elect_leaders(PREFERRED, [tp])[tp]
                return "elected" if error is None else error.name

            outcome = wait_until(
                lambda: (r := elect()) != "PREFERRED_LEADER_NOT_AVAILABLE" and r, 60, "an answer", interval=0.1
            )
            if outcome == "elected":
                break
            assert outcome == "ELECTION_NOT_NEEDED"  # the balancer was first: go round again
        assert outcome == "elected", f"the balancer elected {preferred} first twice"
        assert moved_to != preferred
    for node in kafka_cluster.nodes:

        def leader(node=node):
            with Admin(node.bootstrap) as one:
                return one.describe_topics([topic_name])[topic_name].partitions[0].leader

        wait_until(lambda: leader() == preferred, 30, f"node {node.node_id} naming {preferred} leader")
