"""A request whose handler fails, or whose response does not encode, gets Kafka's error answer for its API
(UNKNOWN_SERVER_ERROR where Kafka puts it) and the connection stays open."""
from __future__ import annotations

import dataclasses
import logging

import pytest

from kafkawire.broker import dispatch
from kafkawire.protocol import api, encode_response_parts, errors, message_class

from .helpers import batch, create_topic


def _swap(broker, api_key, fn):
    def swap():
        spec = broker.broker.handlers[api_key]
        broker.broker.handlers[api_key] = dataclasses.replace(spec, fn=fn)
    broker.call(swap)


def _api_versions_ok(client):
    AV = message_class("ApiVersionsRequest")
    return client.call(AV(client_software_name="t", client_software_version="1"), 3).error_code == 0


def test_a_failing_handler_answers_each_partition_with_unknown_server_error(broker, client, caplog):
    create_topic(client, "t", partitions=2)

    def boom(_broker, _ctx, _body):
        raise RuntimeError("injected")
    _swap(broker, 0, boom)
    R = message_class("ProduceRequest")
    body = R(acks=-1, timeout_ms=1000, topic_data=[R.TopicProduceData(name="t", partition_data=[
        R.PartitionProduceData(index=0, records=batch([b"a"])), R.PartitionProduceData(index=1, records=batch([b"b"]))])])
    with caplog.at_level(logging.ERROR, logger="kafkawire.broker"):
        res = client.call(body, 9)
    assert [(t.name, [(p.index, p.error_code) for p in t.partition_responses]) for t in res.responses] == \
        [("t", [(0, errors.UNKNOWN_SERVER_ERROR), (1, errors.UNKNOWN_SERVER_ERROR)])]
    line = next(r.getMessage() for r in caplog.records if "injected" in r.getMessage())
    assert "Produce v9" in line and "correlation id" in line and "kafkawire-tests" in line
    assert _api_versions_ok(client)


def test_a_response_that_does_not_encode_gets_an_error_answer_not_a_dropped_connection(broker, client, caplog):
    M = message_class("MetadataResponse")
    original = broker.broker.handlers[3].fn

    def unencodable(b, ctx, body):
        res = original(b, ctx, body)
        res.throttle_time_ms = "not a number"  # the encoder refuses it
        return res
    _swap(broker, 3, unencodable)
    MD = message_class("MetadataRequest")
    with caplog.at_level(logging.ERROR, logger="kafkawire.broker"):
        res = client.call(MD(topics=[MD.MetadataRequestTopic(name="x")], allow_auto_topic_creation=False), 12)
    assert isinstance(res, M)
    assert [(t.name, t.error_code) for t in res.topics] == [("x", errors.UNKNOWN_SERVER_ERROR)]
    assert any("does not encode" in r.getMessage() and "Metadata v12" in r.getMessage() for r in caplog.records)
    assert _api_versions_ok(client)


def test_async_handler_failures_are_answered_too(broker, client):
    async def boom(_broker, _ctx, _body):
        raise RuntimeError("injected")
    _swap(broker, 19, boom)
    CT = message_class("CreateTopicsRequest")
    res = client.call(CT(topics=[CT.CreatableTopic(name="a", num_partitions=1, replication_factor=1)],
                         timeout_ms=1000), 7)
    assert [(t.name, t.error_code) for t in res.topics] == [("a", errors.UNKNOWN_SERVER_ERROR)]
    assert _api_versions_ok(client)


def _handled():
    table = dispatch.load_handlers()
    return [(key, v) for key, spec in sorted(table.items()) for v in range(spec.min_version, spec.max_version + 1)]


@pytest.mark.parametrize("key,version", _handled(), ids=lambda x: str(x))
def test_every_api_has_an_encodable_error_answer(key, version):
    request = message_class(api(key).request)()
    body = dispatch.error_response(key, version, request, errors.UNKNOWN_SERVER_ERROR)
    assert encode_response_parts(1, body, version)
    if "error_code" in {f.attr for f in body._fields if f.present(version)}:
        assert body.error_code == errors.UNKNOWN_SERVER_ERROR
