"""Option parsing and planning helpers, and bad options through Spark failing with a clear message."""

from __future__ import annotations

import json

import pytest

from kafkawire.spark.options import KafkaWireOptionError, parse_sink, parse_source
from kafkawire.spark.source import KafkaRange, rate_limit, split_ranges

BS = {"kafka.bootstrap.servers": "127.0.0.1:1"}


def test_parse_defaults_and_kafka_options():
    o = parse_source(
        {
            **BS,
            "subscribe": "a, b",
            "kafka.fetch.max.bytes": "1000",
            "INCLUDEHEADERS": "TRUE",
            "kafka.group.id": "ignored",
        },
        streaming=False,
    )
    assert o.selection.topics == ("a", "b")
    assert o.starting == "earliest" and o.ending == "latest"
    assert o.client_conf == {"bootstrap.servers": "127.0.0.1:1", "fetch.max.bytes": "1000"}
    assert o.include_headers and o.fail_on_data_loss
    s = parse_source({**BS, "subscribePattern": "t.*", "maxOffsetsPerTrigger": "10"}, streaming=True)
    assert s.starting == "latest" and s.ending is None and s.max_offsets_per_trigger == 10
    a = parse_source({**BS, "assign": '{"t": [1, 0]}', "startingOffsets": '{"t": {"0": 5, "1": -2}}'}, streaming=True)
    assert a.selection.assignment == (("t", 0), ("t", 1))
    assert a.starting == {"t": {0: 5, 1: -2}}


@pytest.mark.parametrize(
    "opts, message",
    [
        ({"subscribe": "t"}, "kafka.bootstrap.servers' is required"),
        ({**BS}, "exactly one of the options 'subscribe', 'subscribePattern' or 'assign'"),
        ({**BS, "subscribe": "t", "assign": '{"t":[0]}'}, "exactly one of"),
        ({**BS, "subscribe": "t", "startingOffsets": '{"t": {"0": 1'}, "startingOffsets' is not valid JSON"),
        ({**BS, "subscribe": "t", "startingOffsets": "first"}, "must be 'earliest', 'latest' or a JSON object"),
        ({**BS, "subscribe": "t", "startingOffsets": '{"t": {"x": 1}}'}, "is not a partition number"),
        ({**BS, "subscribe": "t", "startingOffsets": '{"t": {"0": -3}}'}, "invalid value -3"),
        ({**BS, "subscribe": "t", "startingOffsets": "latest"}, "can't be 'latest' for batch"),
        ({**BS, "subscribe": "t", "endingOffsets": '{"t": {"0": -2}}'}, "-2 (earliest) is not allowed"),
        ({**BS, "assign": "[0]"}, "option 'assign' must be a JSON object"),
        ({**BS, "subscribePattern": "("}, "not a valid regular expression"),
        ({**BS, "subscribe": "t", "minPartitions": "0"}, "'minPartitions' must be a positive integer"),
        ({**BS, "subscribe": "t", "failOnDataLoss": "maybe"}, "'failOnDataLoss' must be true or false"),
        ({**BS, "subscribe": "t", "endingTimestamp": "soon"}, "'endingTimestamp' must be a timestamp in milliseconds"),
        ({**BS, "subscribe": "t", "endingOffsetsByTimestamp": '{"t": {"0": -1}}'}, "invalid value -1"),
        ({**BS, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "'kafka.auto.offset.reset' is not supported"),
        ({**BS, "subscribe": "t", "kafka.value.deserializer": "x"}, "'kafka.value.deserializer' is not supported"),
    ],
)
def test_bad_source_options(opts, message):
    with pytest.raises(KafkaWireOptionError) as info:
        parse_source(opts, streaming=False)
    assert message in str(info.value)


def test_ending_timestamps_are_batch_only():
    with pytest.raises(KafkaWireOptionError, match="for batch queries only"):
        parse_source({**BS, "subscribe": "t", "endingTimestamp": "5"}, streaming=True)
    assert parse_source({**BS, "subscribe": "t", "endingTimestamp": "5"}, streaming=False).ending_timestamp == 5


def test_bad_sink_options():
    with pytest.raises(KafkaWireOptionError, match="kafka.bootstrap.servers"):
        parse_sink({"topic": "t"})
    assert parse_sink({**BS, "topic": "t"}).topic == "t"


def test_split_ranges():
    ranges = [KafkaRange("t", 0, 0, 100), KafkaRange("t", 1, 10, 20), KafkaRange("t", 2, 5, 5)]
    out = split_ranges(ranges, 8, None)
    assert len(out) >= 8
    # pieces cover every offset once, the big range got most of them
    for p, lo, hi in ((0, 0, 100), (1, 10, 20)):
        pieces = sorted((r.start, r.end) for r in out if r.partition == p)
        assert pieces[0][0] == lo and pieces[-1][1] == hi
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
    assert sum(1 for r in out if r.partition == 0) > sum(1 for r in out if r.partition == 1)
    assert not any(r.partition == 2 for r in out)
    capped = split_ranges([KafkaRange("t", 0, 0, 100)], None, 30)
    assert [(r.start, r.end) for r in capped] == [(0, 25), (25, 50), (50, 75), (75, 100)]


def test_split_ranges_reaches_min_partitions_when_shares_round_down():
    # shares 3.27, 3.27, 1.47 of 8 each round down: pieces must still add up to 8
    ranges = [KafkaRange("t", 0, 0, 49), KafkaRange("t", 1, 0, 49), KafkaRange("t", 2, 0, 22)]
    out = split_ranges(ranges, 8, None)
    assert len(out) == 8
    assert sum(r.size for r in out) == 120
    # never more pieces than records
    assert len(split_ranges([KafkaRange("t", 0, 0, 3)], 8, None)) == 3


def test_rate_limit_is_exact_and_proportional():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 7}
    latest = {("t", 0): 90, ("t", 1): 130, ("t", 2): 7, ("t", 3): 10}
    end = rate_limit({**start, ("t", 3): 0}, latest, 13)
    taken = {tp: end[tp] - {**start, ("t", 3): 0}[tp] for tp in end}
    assert sum(taken.values()) == 13
    assert taken[("t", 2)] == 0 and taken[("t", 0)] > taken[("t", 1)] > 0
    assert rate_limit(start, {k: v for k, v in latest.items() if k in start}, 1000) == {
        k: v for k, v in latest.items() if k in start
    }


def _read(spark, **options):
    r = spark.read.format("kafkawire")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_errors_through_spark(spark, broker):
    topic = broker.new_topic("opts", partitions=2)
    with pytest.raises(Exception, match="kafka.bootstrap.servers' is required"):
        _read(spark, subscribe=topic).collect()
    with pytest.raises(Exception, match="do not exist on the broker"):
        _read(spark, **{"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "no-such-topic-x"}).collect()
    with pytest.raises(Exception, match="startingOffsets' is not valid JSON"):
        _read(
            spark, **{"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, "startingOffsets": "{" + topic}
        ).collect()
    with pytest.raises(Exception, match="must give an offset for every partition"):
        _read(
            spark,
            **{
                "kafka.bootstrap.servers": broker.bootstrap,
                "subscribe": topic,
                "startingOffsets": json.dumps({topic: {"0": 0}}),
            },
        ).collect()
    with pytest.raises(Exception, match="partition 7 of topic"):
        _read(spark, **{"kafka.bootstrap.servers": broker.bootstrap, "assign": json.dumps({topic: [7]})}).collect()
    with pytest.raises(Exception, match="kafka.bootstrap.servers' is required"):
        spark.readStream.format("kafkawire").option("subscribe", topic).load().writeStream.format(
            "console"
        ).start().awaitTermination(60)


def test_kafka_options_map_to_client_settings():
    from kafkawire.spark.kafka_access import KafkaAccessError, client_kwargs

    conf = {
        "bootstrap.servers": "h:1",
        "linger.ms": "20",
        "compression.type": "zstd",
        "acks": "1",
        "fetch.max.wait.ms": "100",
        "request.timeout.ms": "5000",
        "client.id": "me",
    }
    bs, kw = client_kwargs(conf, "producer")
    assert bs == "h:1"
    assert kw == {
        "linger_ms": 20.0,
        "compression": "zstd",
        "acks": "1",
        "request_timeout": 5.0,
        "client_id": "me",
        "enable_idempotence": False,
    }  # idempotence needs acks=all
    _, kw = client_kwargs(conf, "consumer")
    assert kw == {"fetch_max_wait_ms": 100, "request_timeout": 5.0, "client_id": "me"}
    _, kw = client_kwargs(conf, "admin")
    assert kw == {"request_timeout": 5.0, "client_id": "me"}
    sasl = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p"}
    _, kw = client_kwargs({"bootstrap.servers": "h:1", **sasl}, "admin")  # security options go to the client
    assert kw == {"security": sasl}
    with pytest.raises(KafkaAccessError, match="sasl.username"):
        client_kwargs(
            {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "consumer"
        )
    with pytest.raises(KafkaAccessError, match="'kafka.batch.size' has an invalid value"):
        client_kwargs({"bootstrap.servers": "h:1", "batch.size": "big"}, "producer")
