"""The coordinators' batches carry their partition's leader epoch, as Kafka 4.4's leader stamps every batch it
appends: ``__consumer_offsets`` (OffsetCommit, TxnOffsetCommit), ``__transaction_state`` and the markers a
transaction's end writes.

Kafka 4.4 then kafkawire take turns on one data directory; each commits offsets and runs a transaction that
produces and commits offsets. Every batch each broker wrote to the internal topics and the data topic carries the
leader epoch Metadata gave for that partition while it served (kafkawire wrote -1 in the coordinators' batches).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka_dir import commit, create_topics, kafka_on, kafkawire_on
from test_leader_epochs import metadata_epochs

from kafkawire.protocol.records import iter_batches

pytest.importorskip("confluent_kafka")

GROUP = "epochs-group"
TOPIC = "epochs-data"


def _batches(root: Path, topic: str, partition: int) -> list[tuple[int, int, bool]]:
    """(base offset, partitionLeaderEpoch, is control) of every stored batch of the partition."""
    directory = root / "logs" / f"{topic}-{partition}"
    if not directory.is_dir():
        return []
    out = []
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
        data = (directory / name).read_bytes()
        out += [(b.base_offset, b.partition_leader_epoch, b.is_control) for b in iter_batches(data)]
    return out


def _partitions_written(root: Path, after: dict) -> dict[tuple[str, int], list[tuple[int, int, bool]]]:
    """The batches of every internal or data partition that lie past ``after`` (partition -> batch count)."""
    out = {}
    for name in os.listdir(root / "logs"):
        topic, _, p = name.rpartition("-")
        if topic not in ("__consumer_offsets", "__transaction_state", TOPIC):
            continue
        batches = _batches(root, topic, int(p))
        new = batches[after.get((topic, int(p)), 0) :]
        if new:
            out[(topic, int(p))] = new
    return out


def _turn(bootstrap: str) -> dict[tuple[str, int], int]:
    """Offsets committed by a plain commit and by a transaction that produces; the internal and data partitions'
    leader epochs (Metadata) while the broker serves."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    commit(bootstrap, GROUP, {(TOPIC, 0): 1})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "epochs-txn", "linger.ms": 0})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(TOPIC, b"in a transaction", partition=0)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        producer.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 2)], consumer.consumer_group_metadata(), 60)
    finally:
        consumer.close()
    producer.commit_transaction(60)
    epochs = {}
    for topic in ("__consumer_offsets", "__transaction_state", TOPIC):
        epochs.update({(topic, p): e for p, e in metadata_epochs(bootstrap, topic).items()})
    return epochs


def test_coordinator_batches_carry_the_partition_leader_epoch_as_kafka_writes_them(tmp_path):
    kafka = kafka_on(tmp_path)
    try:
        create_topics(kafka.bootstrap, {TOPIC: (1, {})})
        kafka_epochs = _turn(kafka.bootstrap)
    finally:
        kafka.stop()
    by_kafka = _partitions_written(tmp_path, {})
    counts = {tp: len(_batches(tmp_path, *tp)) for tp in by_kafka}

    broker = kafkawire_on(tmp_path)
    try:
        ours_epochs = _turn(broker.bootstrap)
    finally:
        broker.stop()
    by_kafkawire = _partitions_written(tmp_path, counts)

    for who, written, epochs in (("Kafka", by_kafka, kafka_epochs), ("kafkawire", by_kafkawire, ours_epochs)):
        kinds = {(tp[0], control) for tp, batches in written.items() for _o, _e, control in batches}
        # each broker wrote commits and the transaction's state, its data, and a marker in the group's partition
        assert {("__consumer_offsets", False), ("__consumer_offsets", True)} <= kinds, (who, kinds)
        assert {("__transaction_state", False), (TOPIC, False), (TOPIC, True)} <= kinds, (who, kinds)
        wrong = {tp: [(o, e) for o, e, _c in batches if e != epochs[tp]] for tp, batches in written.items()}
        assert not any(wrong.values()), f"{who}: batches not in the partition's epoch {epochs}: {wrong}"
    # kafkawire's start bumped the epochs (so the check above tells the two brokers' stamps apart)
    shared = set(by_kafka) & set(by_kafkawire)
    assert shared and all(ours_epochs[tp] > kafka_epochs[tp] for tp in shared), (kafka_epochs, ours_epochs)
