"""Offsets staged by a transaction still open when kafkawire's older JSON layout of ``__consumer_offsets`` is
migrated stay pending, as Kafka holds pending transactional offsets: the migration writes them as the producer's
transactional batch in the group's partition, and the transaction's marker commits or drops them there, also
after a restart."""

from __future__ import annotations

import json

import pytest

from kafkawire.broker.groups import FakeScheduler, GroupConfig, GroupCoordinator
from kafkawire.broker.groups.persistence import TOPIC
from kafkawire.broker.storage.memory import MemoryStorage
from kafkawire.broker.storage.segments import SegmentStorage
from kafkawire.protocol.records import build_batch, iter_batches
from kafkawire.protocol.records.control import build_control_batch
from kafkawire.protocol.records.model import ControlRecordType


def _json(value) -> bytes:
    return json.dumps(value).encode()


def _storage_with_an_open_legacy_transaction(engine: str, tmp_path):
    """The JSON layout: group g's committed offset of t-0, and producer 77's offset of t-1 staged, never ended."""
    storage = MemoryStorage({}) if engine == "memory" else SegmentStorage(tmp_path / "data")
    storage.create_topic("t", 2, {})
    storage.create_topic(TOPIC, 1, {})
    entry = {"offset": 40, "leader_epoch": 3, "metadata": "txn", "commit_timestamp": 1}
    storage.partition(TOPIC, 0).append(
        build_batch(
            [
                (
                    _json(["offset", "g", "t", 0]),
                    _json({"offset": 5, "leader_epoch": -1, "metadata": "", "commit_timestamp": 1}),
                ),
                (_json(["txn-offset", 77, "g", "t", 1]), _json(entry)),
            ]
        )
    )
    return storage


def _load(storage) -> GroupCoordinator:
    coord = GroupCoordinator(storage, GroupConfig(), FakeScheduler())
    coord.load()
    return coord


def _committed(coord) -> dict:
    return {(g, t, p): (e.offset, e.leader_epoch, e.metadata) for g, t, p, e in coord.offsets.items()}


@pytest.mark.parametrize(
    "engine,outcome",
    [("memory", ControlRecordType.COMMIT), ("memory", ControlRecordType.ABORT), ("segments", ControlRecordType.COMMIT)],
)
def test_offsets_of_an_open_transaction_survive_the_migration_until_its_marker(engine, outcome, tmp_path):
    storage = _storage_with_an_open_legacy_transaction(engine, tmp_path)
    coord = _load(storage)
    assert _committed(coord) == {("g", "t", 0): (5, -1, "")}
    assert coord.pending_txn_offsets("g", "t", 1)
    plog = storage.partition(TOPIC, 0)
    assert 77 in plog.open_transactions()  # the producer's transactional batch, in Kafka's records
    keys = []
    for batch in iter_batches(b"".join(bytes(x) for x in plog.read(plog.log_start_offset, 1 << 20).chunks)):
        keys += [bytes(r.key) for r in batch.records()]
    assert keys and not any(k.startswith(b"[") for k in keys)  # the JSON is gone below the log start

    again = _load(storage)  # a restart before the transaction ends: still pending, nothing committed
    assert again.store.log.legacy_records == 0
    assert again.pending_txn_offsets("g", "t", 1) and ("g", "t", 1) not in _committed(again)

    # the transaction coordinator ends the transaction: its marker in the group's partition
    plog.append(build_control_batch(outcome, producer_id=77, producer_epoch=0, coordinator_epoch=1))
    after = _load(storage)
    expected = {("g", "t", 0): (5, -1, "")}
    if outcome == ControlRecordType.COMMIT:
        expected[("g", "t", 1)] = (40, 3, "txn")
    assert _committed(after) == expected
    assert not after.pending_txn_offsets("g", "t", 1)
    if engine == "segments":
        storage.close()
