"""Transactional offset commits cross over between kafkawire and Kafka 4.4 on one data directory
(``tests/storage/kafka_dir.py``'s brokers): offsets a transaction committed are there on the other broker, those of
an aborted one are not, whichever broker wrote them (kafkawire first: its ``__consumer_offsets`` has one partition,
which Kafka then uses as its own)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "storage"))  # kafka_dir, beside its own tests

from kafka_dir import commit, committed, create_topics, kafka_on, kafkawire_on  # noqa: E402

confluent_kafka = pytest.importorskip("confluent_kafka")


def _transactional_commits(bootstrap: str, group: str, committed_offsets: dict, aborted_offsets: dict, tid: str):
    """One transaction that commits ``committed_offsets`` for ``group``, then one that aborts ``aborted_offsets``."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        producer.init_transactions(60)
        for offsets, commit_it in ((committed_offsets, True), (aborted_offsets, False)):
            producer.begin_transaction()
            producer.send_offsets_to_transaction(
                [confluent_kafka.TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                consumer.consumer_group_metadata(),
                60,
            )
            (producer.commit_transaction if commit_it else producer.abort_transaction)(60)
    finally:
        consumer.close()


def test_transactional_offsets_cross_over_both_ways(tmp_path):
    tps = [("t", 0), ("t", 1)]
    wire = kafkawire_on(tmp_path)
    try:
        create_topics(wire.bootstrap, {"t": (2, {})})
        commit(wire.bootstrap, "g-plain", {("t", 0): 3})
        _transactional_commits(wire.bootstrap, "g-txn", {("t", 0): 10, ("t", 1): 20}, {("t", 0): 99}, "tx-wire")
        assert committed(wire.bootstrap, "g-txn", tps) == {("t", 0): 10, ("t", 1): 20}
    finally:
        wire.stop()

    kafka = kafka_on(tmp_path)
    try:
        assert committed(kafka.bootstrap, "g-txn", tps) == {("t", 0): 10, ("t", 1): 20}
        assert committed(kafka.bootstrap, "g-plain", tps) == {("t", 0): 3, ("t", 1): -1001}
        _transactional_commits(kafka.bootstrap, "g-txn", {("t", 1): 21}, {("t", 0): 98}, "tx-kafka")
        assert committed(kafka.bootstrap, "g-txn", tps) == {("t", 0): 10, ("t", 1): 21}
    finally:
        kafka.stop()

    wire = kafkawire_on(tmp_path)
    try:
        assert committed(wire.bootstrap, "g-txn", tps) == {("t", 0): 10, ("t", 1): 21}
        assert committed(wire.bootstrap, "g-plain", tps) == {("t", 0): 3, ("t", 1): -1001}
    finally:
        wire.stop()
