"""A request whose handler fails, or whose response does not encode, gets Kafka's error answer for its API
(UNKNOWN_SERVER_ERROR where Kafka puts it) and the connection stays open."""

from __future__ import annotations

import dataclasses
import logging

import msgspec
import pytest

from kafkawire.broker import dispatch, error_answers
from kafkawire.protocol import ApiKey, api, api_by_name, encode_response_parts, errors, message_class

from .helpers import batch, create_topic


def _swap(broker, api_key, fn):
    def swap():
        spec = broker.broker.handlers[api_key]
        broker.broker.handlers[api_key] = msgspec.structs.replace(spec, fn=fn)

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
    body = R(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            R.TopicProduceData(
                name="t",
                partition_data=[
                    R.PartitionProduceData(index=0, records=batch([b"a"])),
                    R.PartitionProduceData(index=1, records=batch([b"b"])),
                ],
            )
        ],
    )
    with caplog.at_level(logging.ERROR, logger="kafkawire.broker"):
        res = client.call(body, 9)
    assert [(t.name, [(p.index, p.error_code) for p in t.partition_responses]) for t in res.responses] == [
        ("t", [(0, errors.UNKNOWN_SERVER_ERROR), (1, errors.UNKNOWN_SERVER_ERROR)])
    ]
    line = next(r.getMessage() for r in caplog.records if "injected" in r.getMessage())
    assert "Produce v9" in line and "correlation id" in line and "kafkawire-tests" in line
    assert _api_versions_ok(client)


def test_a_failing_produce_without_acks_closes_the_connection(broker, client, caplog):
    # acks=0: the client reads no answer, so there is no error answer to send; Kafka closes the connection
    create_topic(client, "t0", partitions=1)

    def boom(_broker, _ctx, _body):
        raise RuntimeError("injected")

    _swap(broker, 0, boom)
    R = message_class("ProduceRequest")
    body = R(
        acks=0,
        timeout_ms=1000,
        topic_data=[
            R.TopicProduceData(name="t0", partition_data=[R.PartitionProduceData(index=0, records=batch([b"a"]))])
        ],
    )
    with caplog.at_level(logging.ERROR, logger="kafkawire.broker"):
        client.send(body, 9)
        assert client.is_closed()
    assert any("acks=0, no error answer" in r.getMessage() and "Produce v9" in r.getMessage() for r in caplog.records)


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
    res = client.call(
        CT(topics=[CT.CreatableTopic(name="a", num_partitions=1, replication_factor=1)], timeout_ms=1000), 7
    )
    assert [(t.name, t.error_code) for t in res.topics] == [("a", errors.UNKNOWN_SERVER_ERROR)]
    assert _api_versions_ok(client)


def _handled():
    table = dispatch.load_handlers()
    return [(key, v) for key, spec in sorted(table.items()) for v in range(spec.min_version, spec.max_version + 1)]


def _structs(obj, version):
    """Every struct of a decoded answer, the answer first."""
    yield obj
    for f in obj._fields:
        if f.is_struct and f.present(version):
            value = getattr(obj, f.attr)
            for item in (value or []) if f.is_array else [value] if value is not None else []:
                yield from _structs(item, version)


@pytest.mark.parametrize("key,version", _handled(), ids=lambda x: str(x))
def test_every_api_answers_a_failure_with_the_error_in_each_entry(key, version):
    """For every handled API and version, a request naming two of everything (topics, partitions, groups,
    resources) fails into an answer that encodes and decodes at that version, with UNKNOWN_SERVER_ERROR in
    every struct that has an error code, and at least once; each entry echoes the request's keys (checked
    against Kafka's own answers by test_error_answers_are_kafkas)."""
    from error_answers import populated_request

    request = populated_request(key, version)
    body = dispatch.error_response(key, version, request, errors.UNKNOWN_SERVER_ERROR)
    assert encode_response_parts(1, body, version)
    back = message_class(api(key).response).decode(body.encode(version), version)
    # AddPartitionsToTxn v0-3 names its per-partition code partition_error_code
    codes = [
        getattr(s, f.attr)
        for s in _structs(back, version)
        for f in s._fields
        if f.attr in ("error_code", "partition_error_code") and f.present(version)
    ]
    if key == ApiKey.DESCRIBE_LOG_DIRS and version < 3:
        # no top-level error code before v3, and Kafka names no log dir in its error answer: an empty answer
        assert codes == [] and back.results == []
    else:
        assert codes and set(codes) == {errors.UNKNOWN_SERVER_ERROR}, codes
    rule = error_answers.SHAPES.get(key)
    for path, entries in rule.entries.items() if rule is not None else ():
        if (
            "." not in path
            and entries.since <= version <= entries.until
            and any(f.attr == path and f.present(version) for f in back._fields)
        ):
            assert len(getattr(back, path)) >= 2, (path, getattr(back, path))


def test_a_produce_without_acks_gets_no_error_answer():
    # acks=0: the client reads no answer, so Kafka closes the connection instead of answering
    R = message_class("ProduceRequest")
    assert dispatch.error_response(0, 9, R(acks=0, topic_data=[R.TopicProduceData(name="t")]), -1) is None
    assert dispatch.error_response(0, 9, R(acks=1, topic_data=[R.TopicProduceData(name="t")]), -1) is not None


def test_error_answers_are_kafkas():
    """kafkawire's error answers against Kafka's AbstractRequest.getErrorResponse (tools/java/ErrorResponses.java
    on the pinned kafka-clients jars), for every handled API at every handled version, for a request naming two of
    everything, an empty one, and every request of the conformance corpus: identical bytes, or a difference
    tools/error_answers.py explains."""
    import error_answers as tool

    from conftest import reference_unavailable
    from kafka_reference import KafkaUnavailable

    try:
        pairs = tool.compare()
    except KafkaUnavailable as exc:
        reference_unavailable(str(exc))
    assert {(api_by_name(p.api).key, p.version) for p in pairs} == set(_handled())
    assert sum(p.request not in ("populated", "empty") for p in pairs) >= 2000  # the conformance corpus's requests
    different = [f"{p.api} v{p.version} ({p.request}): {line}" for p in pairs for line in p.different]
    assert different == []
    assert sum(p.identical for p in pairs) >= 0.9 * len(pairs)


def test_the_comparison_reports_a_wrong_error_answer(monkeypatch):
    """The comparison above can fail: a Produce answer with base offsets of 0 (Kafka's are -1) is a difference."""
    import error_answers as tool

    from conftest import reference_unavailable
    from kafka_reference import KafkaUnavailable

    shape = error_answers.SHAPES[0]
    monkeypatch.setitem(error_answers.SHAPES, 0, dataclasses.replace(shape, sentinels={}))
    try:
        pairs = tool.compare({"Produce"}, corpus=False)
    except KafkaUnavailable as exc:
        reference_unavailable(str(exc))
    wrong = [p for p in pairs if p.request == "populated" and p.different]
    produce = dispatch.load_handlers()[ApiKey.PRODUCE]
    assert sorted(p.version for p in wrong) == list(range(produce.min_version, produce.max_version + 1))
    assert all(any("base_offset" in line for line in p.different) for p in wrong)


def test_api_key_names_are_kafkas():
    import error_answers as tool

    from conftest import reference_unavailable
    from kafka_reference import KafkaUnavailable

    try:
        kafka = tool.kafka_api_key_names()
    except KafkaUnavailable as exc:
        reference_unavailable(str(exc))
    assert {int(k): k.name for k in ApiKey} == kafka
