"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and CreateTopics' config checks answer as Kafka 4.4
does: the same error codes (and null versus present messages) for the same requests, asked of kafkawire and of
the reference Kafka; sources and synonyms of the cluster-wide min.insync.replicas; group and logger resources."""

from __future__ import annotations

import logging
import uuid

import pytest

from kafkawire.broker import config as C
from kafkawire.protocol import errors, message_class

from .helpers import create_topic
from .reference import reference_client, unique, wait_for_topic

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DC = message_class("DescribeConfigsRequest")
AC = message_class("AlterConfigsRequest")
IAC = message_class("IncrementalAlterConfigsRequest")
CT = message_class("CreateTopicsRequest")


def describe(client, rtype, name, keys=None, synonyms=True):
    body = DC(
        resources=[DC.DescribeConfigsResource(resource_type=rtype, resource_name=name, configuration_keys=keys)],
        include_synonyms=synonyms,
        include_documentation=False,
    )
    return client.call(body, 4).results[0]


def alter(client, rtype, name, configs: dict, validate=True):
    body = AC(
        resources=[
            AC.AlterConfigsResource(
                resource_type=rtype,
                resource_name=name,
                configs=[AC.AlterableConfig(name=k, value=v) for k, v in configs.items()],
            )
        ],
        validate_only=validate,
    )
    r = client.call(body, 2).responses[0]
    return r.error_code, r.error_message is None


def inc(client, rtype, name, ops, validate=True):
    body = IAC(
        resources=[
            IAC.AlterConfigsResource(
                resource_type=rtype,
                resource_name=name,
                configs=[IAC.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops],
            )
        ],
        validate_only=validate,
    )
    r = client.call(body, 1).responses[0]
    return r.error_code, r.error_message is None


def create(client, name, configs, validate=True, version=7):
    body = CT(
        topics=[
            CT.CreatableTopic(
                name=name,
                num_partitions=1,
                replication_factor=1,
                assignments=[],
                configs=[CT.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
            )
        ],
        timeout_ms=5000,
        validate_only=validate,
    )
    return client.call(body, version).topics[0]


def requests(topic, node):
    """(label, call) pairs whose answers (error code, message null?) must be Kafka's."""
    return [
        ("alter null value", lambda c: alter(c, TOPIC, topic, {"retention.ms": None})),
        ("alter invalid value", lambda c: alter(c, TOPIC, topic, {"retention.ms": "soon"})),
        ("alter unknown key", lambda c: alter(c, TOPIC, topic, {"no.such.config": "1"})),
        ("alter below minimum", lambda c: alter(c, TOPIC, topic, {"segment.ms": "0"})),
        ("alter bad boolean", lambda c: alter(c, TOPIC, topic, {"unclean.leader.election.enable": "yes"})),
        ("alter unknown topic", lambda c: alter(c, TOPIC, topic + "-missing", {"retention.ms": "1"})),
        ("alter broker", lambda c: alter(c, BROKER, node, {"log.cleaner.threads": "2"})),
        ("alter broker unknown key", lambda c: alter(c, BROKER, node, {"no.such.config": "2"})),
        ("alter broker bad value", lambda c: alter(c, BROKER, node, {"log.cleaner.threads": "x"})),
        ("alter broker read-only", lambda c: alter(c, BROKER, node, {"num.partitions": "2"})),
        ("alter broker other id", lambda c: alter(c, BROKER, "2", {"log.cleaner.threads": "2"})),
        ("alter cluster default drops min isr", lambda c: alter(c, BROKER, "", {"log.cleaner.threads": "2"})),
        ("alter logger", lambda c: alter(c, BROKER_LOGGER, node, {"root": "DEBUG"})),
        ("alter group", lambda c: alter(c, GROUP, "g", {"consumer.session.timeout.ms": "50000"})),
        ("alter unknown type", lambda c: alter(c, 99, "x", {"a": "b"})),
        ("inc invalid op", lambda c: inc(c, TOPIC, topic, [("retention.ms", 9, "5")])),
        ("inc append scalar", lambda c: inc(c, TOPIC, topic, [("retention.ms", APPEND, "5")])),
        ("inc subtract scalar", lambda c: inc(c, TOPIC, topic, [("retention.ms", SUBTRACT, "5")])),
        ("inc subtract to empty", lambda c: inc(c, TOPIC, topic, [("cleanup.policy", SUBTRACT, "compact")])),
        ("inc append bad item", lambda c: inc(c, TOPIC, topic, [("cleanup.policy", APPEND, "bogus")])),
        ("inc set null", lambda c: inc(c, TOPIC, topic, [("retention.ms", SET, None)])),
        ("inc delete unknown key", lambda c: inc(c, TOPIC, topic, [("no.such", DELETE, None)])),
        ("inc set unknown key", lambda c: inc(c, TOPIC, topic, [("no.such", SET, "1")])),
        ("inc duplicate", lambda c: inc(c, TOPIC, topic, [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)])),
        ("inc op before unknown key", lambda c: inc(c, TOPIC, topic, [("retention.ms", SET, "2"), ("bad", 9, "x")])),
        ("inc broker", lambda c: inc(c, BROKER, node, [("log.cleaner.threads", SET, "2")])),
        ("inc broker bad value", lambda c: inc(c, BROKER, node, [("log.cleaner.threads", SET, "x")])),
        ("inc broker append scalar", lambda c: inc(c, BROKER, node, [("log.retention.ms", APPEND, "5")])),
        ("inc broker append list", lambda c: inc(c, BROKER, node, [("log.cleanup.policy", APPEND, "compact")])),
        ("inc cluster min isr delete", lambda c: inc(c, BROKER, "", [("min.insync.replicas", DELETE, None)])),
        ("inc cluster default", lambda c: inc(c, BROKER, "", [("log.cleaner.threads", SET, "2")])),
        ("inc logger bad level", lambda c: inc(c, BROKER_LOGGER, node, [("root", SET, "BOGUS")])),
        ("inc logger unknown", lambda c: inc(c, BROKER_LOGGER, node, [("no.such.logger", SET, "DEBUG")])),
        ("inc logger delete root", lambda c: inc(c, BROKER_LOGGER, node, [("root", DELETE, None)])),
        ("inc logger append", lambda c: inc(c, BROKER_LOGGER, node, [("root", APPEND, "DEBUG")])),
        ("inc logger other node", lambda c: inc(c, BROKER_LOGGER, "2", [("root", SET, "DEBUG")])),
        ("inc logger empty node", lambda c: inc(c, BROKER_LOGGER, "", [("root", SET, "DEBUG")])),
        ("inc group", lambda c: inc(c, GROUP, "g", [("consumer.session.timeout.ms", SET, "50000")])),
        ("inc group out of range", lambda c: inc(c, GROUP, "g", [("consumer.session.timeout.ms", SET, "5")])),
        ("inc group unknown key", lambda c: inc(c, GROUP, "g", [("no.such", SET, "5")])),
        ("create null value", lambda c: (create(c, topic + "-n", {"retention.ms": None}).error_code,)),
        ("create invalid value", lambda c: (create(c, topic + "-n", {"retention.ms": "soon"}).error_code,)),
        ("create empty cleanup", lambda c: (create(c, topic + "-n", {"cleanup.policy": ""}).error_code,)),
    ]


def test_config_answers_match_the_reference_kafka(client, broker, reference_kafka):
    ref = reference_client(reference_kafka)
    try:
        name = unique("cfg")
        create_topic(ref, name, configs={"cleanup.policy": "compact"})
        wait_for_topic(ref, name)
        theirs = {label: call(ref) for label, call in requests(name, str(reference_kafka.node_id))}
    finally:
        ref.close()
    create_topic(client, name, configs={"cleanup.policy": "compact"})
    ours = {label: call(client) for label, call in requests(name, str(broker.config.node_id))}
    assert ours == theirs


def test_cluster_min_insync_replicas_is_a_dynamic_default(client, broker, reference_kafka):
    def answers(c, node, topic):
        t = describe(c, TOPIC, topic, ["min.insync.replicas", "retention.ms", "retention.ms"])
        b = describe(c, BROKER, node, ["min.insync.replicas"])
        d = describe(c, BROKER, "", None)
        return [
            (
                r.error_code,
                r.error_message,
                [
                    (e.name, e.value, e.config_source, e.read_only, [(s.name, s.value, s.source) for s in e.synonyms])
                    for e in sorted(r.configs, key=lambda e: e.name)
                ],
            )
            for r in (t, b, d)
        ]

    ref = reference_client(reference_kafka)
    try:
        name = unique("mir")
        create_topic(ref, name)
        wait_for_topic(ref, name)
        theirs = answers(ref, str(reference_kafka.node_id), name)
    finally:
        ref.close()
    create_topic(client, name)
    ours = answers(client, str(broker.config.node_id), name)
    assert ours == theirs
    # ... as kafkawire answers it, whatever the reference
    assert ours[0][0:2] == (0, "")
    assert ours[2][2] == [
        (
            "min.insync.replicas",
            "1",
            C.DYNAMIC_DEFAULT_BROKER_CONFIG,
            False,
            [("min.insync.replicas", "1", C.DYNAMIC_DEFAULT_BROKER_CONFIG)],
        )
    ]
    created = create(client, unique("mir"), {}, validate=True)
    assert {c.name: c.config_source for c in created.configs}["min.insync.replicas"] == C.DYNAMIC_DEFAULT_BROKER_CONFIG


def test_group_configs_match_the_reference_kafka(client, reference_kafka):
    def answers(c):
        r = describe(c, GROUP, "some-group")
        return r.error_code, sorted(
            (e.name, e.value, e.config_source, e.config_type, [(s.name, s.value, s.source) for s in e.synonyms])
            for e in r.configs
        )

    ref = reference_client(reference_kafka)
    try:
        theirs = answers(ref)
    finally:
        ref.close()
    assert answers(client) == theirs


def test_group_configs_are_kept_per_group(client):
    assert inc(client, GROUP, "g1", [("consumer.session.timeout.ms", SET, "50000")], validate=False) == (0, True)
    entries = {e.name: e for e in describe(client, GROUP, "g1").configs}
    e = entries["consumer.session.timeout.ms"]
    assert (e.value, e.config_source) == ("50000", 8)
    assert [(s.name, s.source) for s in e.synonyms] == [
        ("consumer.session.timeout.ms", 8),
        ("group.consumer.session.timeout.ms", C.DEFAULT_CONFIG),
    ]
    assert {e.name: e.value for e in describe(client, GROUP, "g2").configs}["consumer.session.timeout.ms"] == "45000"
    assert inc(client, GROUP, "g1", [("consumer.session.timeout.ms", DELETE, None)], validate=False) == (0, True)
    assert describe(client, GROUP, "g1", ["consumer.session.timeout.ms"]).configs[0].value == "45000"


def test_validate_only_changes_nothing(client, broker):
    create_topic(client, "vo", configs={"cleanup.policy": "compact"})
    node = str(broker.config.node_id)
    assert alter(client, TOPIC, "vo", {"retention.ms": "1000"}) == (0, True)
    assert inc(client, TOPIC, "vo", [("cleanup.policy", SUBTRACT, "compact")]) == (0, True)
    assert inc(client, BROKER_LOGGER, node, [("kafka.server.KafkaApis", SET, "DEBUG")]) == (0, True)
    entries = {e.name: e.value for e in describe(client, TOPIC, "vo").configs}
    assert (entries["retention.ms"], entries["cleanup.policy"]) == ("604800000", "compact")
    assert logging.getLogger("kafkawire.broker").level != logging.DEBUG


def test_cleanup_policy_may_become_empty(client):
    create_topic(client, "cp", configs={"cleanup.policy": "compact"})
    assert inc(client, TOPIC, "cp", [("cleanup.policy", SUBTRACT, "compact")], validate=False) == (0, True)
    e = {e.name: e for e in describe(client, TOPIC, "cp").configs}["cleanup.policy"]
    assert (e.value, e.config_source) == ("", C.TOPIC_CONFIG)


def test_broker_loggers_in_log4j_terms(client, broker):
    node = str(broker.config.node_id)
    r = describe(client, BROKER_LOGGER, node, ["kafka.server.KafkaApis", "no.such.logger"], synonyms=True)
    assert [(e.name, e.config_source, e.config_type, e.synonyms, e.documentation) for e in r.configs] == [
        ("kafka.server.KafkaApis", 6, 0, [], "")
    ]
    try:
        assert inc(client, BROKER_LOGGER, node, [("kafka.server.KafkaApis", SET, "TRACE")], validate=False) == (0, True)
        assert describe(client, BROKER_LOGGER, node, ["kafka.server.KafkaApis"]).configs[0].value == "TRACE"
        assert logging.getLogger("kafkawire.broker").getEffectiveLevel() < logging.DEBUG
        assert inc(client, BROKER_LOGGER, node, [("kafka.server.KafkaApis", DELETE, None)], validate=False) == (0, True)
        assert logging.getLogger("kafkawire.broker").level == logging.NOTSET
    finally:
        logging.getLogger("kafkawire.broker").setLevel(logging.NOTSET)


def test_create_topics_config_checks(client):
    bad = create(client, "ct-null", {"retention.ms": None}, validate=False, version=7)
    assert (bad.error_code, bad.topic_id, bad.num_partitions, bad.configs) == (
        errors.INVALID_CONFIG,
        uuid.UUID(int=0),
        -1,
        [],
    )
    assert create(client, "__consumer_offsets", {}, validate=False, version=2).error_code == errors.TOPIC_ALREADY_EXISTS
    ok = create(client, "ct-validate", {}, validate=True)
    assert ok.error_code == 0 and ok.topic_id != uuid.UUID(int=0)


@pytest.mark.parametrize("value", ["", "delete", "compact,delete"])
def test_cleanup_policy_values(value):
    C.validate_topic_config("cleanup.policy", value)


def test_value_problems_say_why():
    with pytest.raises(C.ConfigError, match="Not a number of type LONG"):
        C.validate_topic_config("retention.ms", "soon")
    with pytest.raises(C.ConfigError, match="Value must be at least 1"):
        C.validate_topic_config("segment.ms", "0")
    with pytest.raises(C.ConfigError, match="String must be one of: compact, delete"):
        C.validate_topic_config("cleanup.policy", "delete,bogus")
