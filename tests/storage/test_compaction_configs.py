"""Topic configs of segments and compaction are refused as Kafka 4.4 refuses them: the same error code and the same
message from CreateTopics and from IncrementalAlterConfigs, value by value, asked of kafkawire and of Kafka."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from kafkawire.protocol import decode_response, encode_request, message_class, request_header

confluent_kafka = pytest.importorskip("confluent_kafka")

# (config, value): below, at and above each bound, and values Kafka's validators refuse
CASES = [
    ("segment.bytes", "1000"),
    ("segment.bytes", "1048575"),
    ("segment.bytes", "1048576"),
    ("segment.bytes", "abc"),
    ("segment.ms", "0"),
    ("segment.ms", "1"),
    ("segment.index.bytes", "3"),
    ("segment.jitter.ms", "-1"),
    ("min.cleanable.dirty.ratio", "1.5"),
    ("min.cleanable.dirty.ratio", "-0.1"),
    ("min.cleanable.dirty.ratio", "1"),
    ("cleanup.policy", "bogus"),
    ("cleanup.policy", "compact,bogus"),
    ("cleanup.policy", "compact,delete"),
    ("cleanup.policy", ""),
    ("cleanup.policy", "compact,compact"),
    ("max.compaction.lag.ms", "0"),
    ("max.compaction.lag.ms", "1"),
    ("min.compaction.lag.ms", "-1"),
    ("delete.retention.ms", "-1"),
    ("message.timestamp.type", "bogus"),
    ("internal.segment.bytes", "1000"),  # Kafka's config for small segments in tests: no floor
    ("internal.segment.bytes", "x"),
    ("internal.segment.bytes", "-1"),  # Kafka 4.4 puts no bound on it: taken, and produce is refused (below)
    ("internal.segment.bytes", "0"),
    ("internal.segment.bytes", "-2147483648"),
    ("internal.segment.bytes", "2147483648"),
]


def _call(bootstrap: str, body, version: int):
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(encode_request(request_header(body.api_key, version, 1, "configs"), body))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        return decode_response(s.recv(size, socket.MSG_WAITALL), body.api_key, version, framed=False).body


def _create(bootstrap: str, topic: str, configs: dict[str, str], validate_only: bool) -> tuple[int, str | None]:
    R = message_class("CreateTopicsRequest")
    body = R(
        topics=[
            R.CreatableTopic(
                name=topic,
                num_partitions=1,
                replication_factor=1,
                assignments=[],
                configs=[R.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
            )
        ],
        timeout_ms=30000,
        validate_only=validate_only,
    )
    (result,) = _call(bootstrap, body, 7).topics
    return result.error_code, result.error_message


def _alter(bootstrap: str, topic: str, name: str, value: str) -> tuple[int, str | None]:
    R = message_class("IncrementalAlterConfigsRequest")
    body = R(
        resources=[
            R.AlterConfigsResource(
                resource_type=2,
                resource_name=topic,
                configs=[R.AlterableConfig(name=name, config_operation=0, value=value)],
            )
        ],
        validate_only=False,
    )
    (result,) = _call(bootstrap, body, 1).responses
    return result.error_code, result.error_message


def _answers(bootstrap: str) -> dict:
    topic = f"configs-{time.monotonic_ns()}"
    assert _create(bootstrap, topic, {}, False)[0] == 0
    out = {}
    for name, value in CASES:
        out[name, value, "CreateTopics"] = _create(bootstrap, f"{topic}-new", {name: value}, True)
        out[name, value, "IncrementalAlterConfigs"] = _alter(bootstrap, topic, name, value)
    return out


@pytest.fixture(scope="module")
def kafka_answers(request):
    return _answers(request.getfixturevalue("reference_kafka").bootstrap)


@pytest.mark.parametrize("storage", ["memory", "segments"])
def test_topic_config_bounds_answer_as_kafka(kafka_answers, storage, tmp_path):
    from kafkawire.testing import KafkaBroker

    broker = KafkaBroker(storage=storage, data_dir=tmp_path / "data" if storage == "segments" else None)
    broker.start()
    try:
        ours = _answers(broker.bootstrap)
    finally:
        broker.stop()
    differ = {case: (ours[case], kafka_answers[case]) for case in kafka_answers if ours[case] != kafka_answers[case]}
    assert not differ, "\n".join(f"{c}: kafkawire {o} / kafka {k}" for c, (o, k) in differ.items())
    # the cases reach both sides of the bounds: some are refused, some taken
    assert {code for code, _ in kafka_answers.values()} == {0, 40}


def test_internal_segment_bytes_rolls_small_segments_and_is_described_only_when_set(tmp_path):
    """internal.segment.bytes, as Kafka 4.4 takes it: the segment size whatever segment.bytes says; DescribeConfigs
    lists it for a topic that sets it (a topic config), for no other."""
    from kafkawire.testing import KafkaBroker

    broker = KafkaBroker(storage="segments", data_dir=tmp_path / "data")
    broker.start()
    try:
        assert _create(broker.bootstrap, "small", {"internal.segment.bytes": "2000"}, False) == (0, None)
        assert _create(broker.bootstrap, "plain", {}, False) == (0, None)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for i in range(40):
            producer.produce("small", b"v" * 100, f"k{i}".encode())
            assert producer.flush(30) == 0
        R = message_class("DescribeConfigsRequest")

        def described(topic):
            body = R(
                resources=[R.DescribeConfigsResource(resource_type=2, resource_name=topic, configuration_keys=None)],
                include_synonyms=False,
                include_documentation=False,
            )
            return {c.name: (c.value, c.config_source) for c in _call(broker.bootstrap, body, 4).results[0].configs}

        assert described("small")["internal.segment.bytes"] == ("2000", 1)
        assert described("small")["segment.bytes"] == ("1073741824", 5)
        assert "internal.segment.bytes" not in described("plain")
    finally:
        broker.stop()
    assert len(list((tmp_path / "data" / "small-0").glob("*.log"))) > 2  # 40 batches of ~170 bytes: rolled


# internal.segment.bytes -> what a Produce of one ~120-byte batch gets: Kafka's log refuses records larger than a
# segment (RECORD_LIST_TOO_LARGE), so with a size of 0 or below every produce is refused
SEGMENT_SIZES = ("-1", "0", "100", "1000")


def _produce_answers(bootstrap: str) -> dict[str, int]:
    out = {}
    prefix = f"segment-{time.monotonic_ns()}"
    for size in SEGMENT_SIZES:
        topic = f"{prefix}{size}"
        assert _create(bootstrap, topic, {"internal.segment.bytes": size}, False) == (0, None)
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False, "retries": 0}
        )
        results = []
        producer.produce(topic, b"v" * 50, b"key", on_delivery=lambda err, msg: results.append(err))
        assert producer.flush(30) == 0
        (err,) = results
        out[size] = 0 if err is None else err.code()
    return out


@pytest.mark.parametrize("storage", ["memory", "segments"])
def test_a_segment_size_below_a_batch_refuses_produce_as_kafka(reference_kafka, storage, tmp_path):
    from kafkawire.testing import KafkaBroker

    kafka = _produce_answers(reference_kafka.bootstrap)
    assert kafka == {"-1": 18, "0": 18, "100": 18, "1000": 0}  # RECORD_LIST_TOO_LARGE: as measured on Kafka 4.4
    broker = KafkaBroker(storage=storage, data_dir=tmp_path / "data" if storage == "segments" else None)
    broker.start()
    try:
        assert _produce_answers(broker.bootstrap) == kafka
    finally:
        broker.stop()
