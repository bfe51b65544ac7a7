"""A data directory that Kafka 4.4 and kafkawire take turns on, each serving what the other wrote.

Kafka keeps topics, partitions, ids and configs in its KRaft metadata log (``__cluster_metadata-0``);
kafkawire reads that log on start and appends its own changes to it in Kafka's format, so either broker
finds every topic, config and record at its offset.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_dir import (
    broker_config,
    commit,
    committed,
    create_topics,
    kafka_on,
    kafkawire_on,
    produce,
    read_all,
    set_broker_default,
    topic_configs,
)

import kafka_pins  # tools/
from support.java import JavaProgram

pytest.importorskip("confluent_kafka")

ALPHA_CONFIGS = {"retention.ms": "86400000", "max.message.bytes": "500000"}


def _count(records, partition):
    return sum(1 for p, _ in records if p == partition)


def _check(bootstrap, topic, partitions, expected):
    got = read_all(bootstrap, topic, partitions, len(expected))
    assert got == expected


def test_kafka_then_kafkawire_then_kafka(tmp_path):
    kafka = kafka_on(tmp_path)
    try:
        create_topics(kafka.bootstrap, {"alpha": (3, ALPHA_CONFIGS), "beta": (1, {})})
        alpha = produce(kafka.bootstrap, "alpha", 40, tag="kafka")
        beta = produce(kafka.bootstrap, "beta", 10, tag="kafka")
        commit(kafka.bootstrap, "g-kafka", {("alpha", 0): 7, ("alpha", 2): 11, ("beta", 0): 3})
        set_broker_default(kafka.bootstrap, "log.retention.ms", "7200000")
    finally:
        kafka.stop()
    alpha_beta = [("alpha", 0), ("alpha", 1), ("alpha", 2), ("beta", 0)]

    wire = kafkawire_on(tmp_path)
    try:
        _check(wire.bootstrap, "alpha", 3, alpha)
        _check(wire.bootstrap, "beta", 1, beta)
        assert topic_configs(wire.bootstrap, "alpha") == ALPHA_CONFIGS
        assert committed(wire.bootstrap, "g-kafka", alpha_beta) == {
            ("alpha", 0): 7,
            ("alpha", 1): -1001,
            ("alpha", 2): 11,
            ("beta", 0): 3,
        }
        # dynamic broker configs are ConfigRecords in the metadata log, both ways
        assert broker_config(wire.bootstrap, "log.retention.ms") == ("7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        set_broker_default(wire.bootstrap, "log.retention.ms", "3600000")
        commit(wire.bootstrap, "g-kafka", {("alpha", 1): 5})
        commit(wire.bootstrap, "g-wire", {("beta", 0): 9})
        alpha.update(produce(wire.bootstrap, "alpha", 20, tag="kafkawire"))
        create_topics(wire.bootstrap, {"gamma": (2, {"cleanup.policy": "compact"})})
        gamma = produce(wire.bootstrap, "gamma", 10, tag="kafkawire")
    finally:
        wire.stop()

    kafka = kafka_on(tmp_path)
    try:
        _check(kafka.bootstrap, "alpha", 3, alpha)
        _check(kafka.bootstrap, "beta", 1, beta)
        _check(kafka.bootstrap, "gamma", 2, gamma)
        assert topic_configs(kafka.bootstrap, "alpha") == ALPHA_CONFIGS
        assert topic_configs(kafka.bootstrap, "gamma") == {"cleanup.policy": "compact"}
        assert committed(kafka.bootstrap, "g-kafka", alpha_beta) == {
            ("alpha", 0): 7,
            ("alpha", 1): 5,
            ("alpha", 2): 11,
            ("beta", 0): 3,
        }
        assert committed(kafka.bootstrap, "g-wire", [("beta", 0)]) == {("beta", 0): 9}
        assert broker_config(kafka.bootstrap, "log.retention.ms") == ("3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    finally:
        kafka.stop()


def test_kafkawire_then_kafka_then_kafkawire(tmp_path):
    wire = kafkawire_on(tmp_path)
    try:
        create_topics(wire.bootstrap, {"alpha": (2, ALPHA_CONFIGS)})
        alpha = produce(wire.bootstrap, "alpha", 30, tag="kafkawire")
        commit(wire.bootstrap, "g-wire", {("alpha", 0): 4, ("alpha", 1): 6})
    finally:
        wire.stop()

    kafka = kafka_on(tmp_path)
    try:
        _check(kafka.bootstrap, "alpha", 2, alpha)
        assert topic_configs(kafka.bootstrap, "alpha") == ALPHA_CONFIGS
        assert committed(kafka.bootstrap, "g-wire", [("alpha", 0), ("alpha", 1)]) == {("alpha", 0): 4, ("alpha", 1): 6}
        commit(kafka.bootstrap, "g-wire", {("alpha", 0): 8})
        alpha.update(produce(kafka.bootstrap, "alpha", 20, tag="kafka"))
        create_topics(kafka.bootstrap, {"beta": (1, {"retention.ms": "3600000"})})
        beta = produce(kafka.bootstrap, "beta", 10, tag="kafka")
    finally:
        kafka.stop()

    wire = kafkawire_on(tmp_path)
    try:
        _check(wire.bootstrap, "alpha", 2, alpha)
        _check(wire.bootstrap, "beta", 1, beta)
        assert topic_configs(wire.bootstrap, "beta") == {"retention.ms": "3600000"}
        assert committed(wire.bootstrap, "g-wire", [("alpha", 0), ("alpha", 1)]) == {("alpha", 0): 8, ("alpha", 1): 6}
        # Kafka's Java consumer too (it checks leader epochs: Kafka's batches carry the epochs of its starts)
        java = JavaProgram.require(Path(__file__).parent / "KafkaCompactedReader.java", clients=kafka_pins.BROKER)
        out = java.run("KafkaCompactedReader", "consume", wire.bootstrap, "alpha", str(_count(alpha, 0)))
        got = {int(line.split()[1]): line.split()[3].encode() for line in out.splitlines() if line.startswith("rec ")}
        assert got == {o: v for (p, o), (_k, v) in alpha.items() if p == 0}
    finally:
        wire.stop()


def test_kafka_starts_after_kafkawire_was_killed(tmp_path):
    """No clean stop of kafkawire, so no recovery points: Kafka 4.4 recovers every log it finds (indexes,
    producer state) and serves the topics and records kafkawire acknowledged."""
    wire = kafkawire_on(tmp_path)
    try:
        create_topics(wire.bootstrap, {"alpha": (2, ALPHA_CONFIGS)})
        alpha = produce(wire.bootstrap, "alpha", 20, tag="kafkawire")
    finally:
        wire.kill()
        wire.stop()
    assert not (tmp_path / "logs" / "recovery-point-offset-checkpoint").exists()

    kafka = kafka_on(tmp_path)
    try:
        _check(kafka.bootstrap, "alpha", 2, alpha)
        assert topic_configs(kafka.bootstrap, "alpha") == ALPHA_CONFIGS
    finally:
        kafka.stop()


def test_an_older_kafkawire_directory_is_migrated_and_kafka_serves_it(tmp_path):
    """A data directory as an older kafkawire left it (``__kafkawire_meta/topics.json``, dashed UUIDs in
    partition.metadata, no directory.id): kafkawire moves it into the metadata log on start, and Kafka 4.4
    then starts on it and serves every record."""
    import json
    import uuid

    from storage_batches import build_batch

    logs = tmp_path / "logs"
    (logs / "__kafkawire_meta").mkdir(parents=True)
    topic_id = uuid.uuid4()
    doc = {"version": 1, "topics": [{"name": "old", "topic_id": str(topic_id), "partitions": 1, "configs": {}}]}
    (logs / "__kafkawire_meta" / "topics.json").write_text(json.dumps(doc))
    (logs / "meta.properties").write_text("#\ncluster.id=b2xkZXIta2Fma2F3aXJlMQ\nnode.id=1\nversion=1\n")
    (logs / "old-0").mkdir()
    (logs / "old-0" / "partition.metadata").write_text(f"version: 0\ntopic_id: {topic_id}\n")
    values = [f"old-{i}".encode() for i in range(6)]
    (logs / "old-0" / "00000000000000000000.log").write_bytes(
        build_batch(values[:4], base_offset=0) + build_batch(values[4:], base_offset=4)
    )
    wire = kafkawire_on(tmp_path)
    try:
        _check(wire.bootstrap, "old", 1, {(0, i): (None, v) for i, v in enumerate(values)})
    finally:
        wire.stop()
    assert not (logs / "__kafkawire_meta").exists()

    kafka = kafka_on(tmp_path)
    try:
        _check(kafka.bootstrap, "old", 1, {(0, i): (None, v) for i, v in enumerate(values)})
    finally:
        kafka.stop()
