"""Produce checks each batch against the topic's configs as they are now: the rules a topic's produce requests
are checked against are resolved once and kept, so a change of the topic's configs, or of the broker default
a topic without an override inherits, must reach the very next produce request."""

from __future__ import annotations

from kafkawire.protocol import errors, message_class
from kafkawire.protocol.records import build_batch

from .helpers import create_topic, produce_request

I = message_class("IncrementalAlterConfigsRequest")
SET, DELETE = 0, 1
TOPIC, BROKER = 2, 4


def alter(client, rtype, name, config, op, value=None):
    body = I(
        resources=[
            I.AlterConfigsResource(
                resource_type=rtype,
                resource_name=name,
                configs=[I.AlterableConfig(name=config, config_operation=op, value=value)],
            )
        ],
        validate_only=False,
    )
    assert client.call(body, 1).responses[0].error_code == 0


def produce(client, topic):
    """The error code of a batch of 2,000 bytes of values (about 2,100 bytes in all)."""
    batch = build_batch([(b"k", b"v" * 1000), (b"k", b"w" * 1000)])
    return client.call(produce_request(topic, 0, batch), 9).responses[0].partition_responses[0].error_code


def test_a_topic_config_change_reaches_the_next_produce(client):
    create_topic(client, "rules-topic")
    assert produce(client, "rules-topic") == errors.NONE
    alter(client, TOPIC, "rules-topic", "max.message.bytes", SET, "1000")
    assert produce(client, "rules-topic") == errors.MESSAGE_TOO_LARGE
    alter(client, TOPIC, "rules-topic", "max.message.bytes", DELETE)
    assert produce(client, "rules-topic") == errors.NONE


def test_a_broker_default_change_reaches_the_next_produce(client, broker):
    node = str(broker.config.node_id)
    create_topic(client, "rules-default")
    assert produce(client, "rules-default") == errors.NONE
    alter(client, BROKER, node, "message.max.bytes", SET, "1000")
    try:
        assert produce(client, "rules-default") == errors.MESSAGE_TOO_LARGE
    finally:
        alter(client, BROKER, node, "message.max.bytes", DELETE)
    assert produce(client, "rules-default") == errors.NONE
