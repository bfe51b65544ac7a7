"""DescribeConfigs as Kafka 4.4 reports configs: sources, synonyms, types, read-only flags, defaults."""

from __future__ import annotations

from kafkawire.broker import config as C
from kafkawire.protocol.messages import DescribeConfigsRequest as R

from .helpers import create_topic
from .reference import reference_client, unique, wait_for_topic

TOPIC, BROKER = 2, 4
# kafkawire's own keys (durability, storage engine, group coordinator), which Kafka does not have
OWN = {n for n in C.BROKER_CONFIGS if n.startswith("kafkawire.")}
# broker keys whose definition differs from Kafka 4.4's on purpose
DEVIATIONS = {
    "listeners": "read-only: kafkawire cannot add listeners at run time",
    "group.coordinator.rebalance.protocols": "no 'streams' (KIP-1071 streams groups are not served)",
    "offsets.topic.num.partitions": "default 1, not 50: a single node gains nothing from more (README)",
    "transaction.state.log.num.partitions": "default 1, not 50, as offsets.topic.num.partitions (README)",
}


def describe(client, rtype, name, keys=None):
    res = client.call(
        R(
            resources=[R.DescribeConfigsResource(resource_type=rtype, resource_name=name, configuration_keys=keys)],
            include_synonyms=True,
            include_documentation=True,
        ),
        4,
    ).results[0]
    assert res.error_code == 0, res
    return {c.name: c for c in res.configs}


def definition(entry):
    """(type, read-only, sensitive, default) of a described config; the default is its DEFAULT_CONFIG synonym."""
    default = (
        entry.value
        if entry.config_source == C.DEFAULT_CONFIG
        else next((s.value for s in entry.synonyms if s.source == C.DEFAULT_CONFIG), None)
    )
    return entry.config_type, entry.read_only, entry.is_sensitive, default


def test_keys_kafkawire_serve_sets_are_static_broker_configs(client, broker):
    entries = describe(client, BROKER, str(broker.config.node_id))
    host, port = broker.address
    listener = f"PLAINTEXT://{host}:{port}"
    for name, value in (
        ("advertised.listeners", listener),
        ("listeners", listener),
        ("node.id", str(broker.config.node_id)),
        ("broker.id", str(broker.config.node_id)),
        ("log.dirs", broker.config.data_dir),
    ):
        e = entries[name]
        assert (e.value, e.config_source) == (value, C.STATIC_BROKER_CONFIG), name
        assert (e.synonyms[0].name, e.synonyms[0].value, e.synonyms[0].source) == (name, value, C.STATIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in entries["listeners"].synonyms][1:] == [
        ("listeners", "PLAINTEXT://:9092", C.DEFAULT_CONFIG)
    ]
    assert entries["num.partitions"].config_source == C.DEFAULT_CONFIG


def test_null_valued_broker_configs_have_no_synonyms(client, broker):
    entries = describe(client, BROKER, str(broker.config.node_id))
    for name in ("log.retention.ms", "log.retention.minutes", "log.roll.ms", "log.roll.jitter.ms"):
        assert (entries[name].value, entries[name].synonyms) == (None, []), name
    assert [(s.name, s.value) for s in entries["log.retention.hours"].synonyms] == [("log.retention.hours", "168")]


def test_broker_config_definitions_match_the_reference_kafka(client, broker, reference_kafka):
    ref = reference_client(reference_kafka)
    try:
        theirs = describe(ref, BROKER, str(reference_kafka.node_id))
    finally:
        ref.close()
    ours = describe(client, BROKER, str(broker.config.node_id))
    assert set(ours) - OWN <= set(theirs), "keys Kafka 4.4 does not have"
    for name in sorted(set(ours) - OWN - set(DEVIATIONS)):
        assert definition(ours[name]) == definition(theirs[name]), name


def test_topic_configs_match_the_reference_kafka(client, reference_kafka):
    ref = reference_client(reference_kafka)
    try:
        name = unique("dc")
        create_topic(ref, name)
        wait_for_topic(ref, name)
        theirs = describe(ref, TOPIC, name)
    finally:
        ref.close()
    create_topic(client, "dc")
    ours = describe(client, TOPIC, "dc")
    assert set(ours) == set(theirs)
    for key in sorted(ours):
        a, b = ours[key], theirs[key]
        assert (
            a.value,
            a.config_source,
            a.read_only,
            a.config_type,
            a.is_sensitive,
            [(s.name, s.value, s.source) for s in a.synonyms],
        ) == (
            b.value,
            b.config_source,
            b.read_only,
            b.config_type,
            b.is_sensitive,
            [(s.name, s.value, s.source) for s in b.synonyms],
        ), key
