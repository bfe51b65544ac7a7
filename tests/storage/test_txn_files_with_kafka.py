"""Kafka's own classes (kafka-storage 4.4: TransactionIndex, ProducerStateManager.readSnapshot) read the .txnindex
and producer snapshot files the segments engine writes, and find in them what kafkawire put there."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from storage_batches import build_batch

from kafkawire.broker.storage import snapshot, txn
from kafkawire.broker.storage.segments import SegmentStorage

from support.java import JavaProgram  # tests/ is on sys.path (tests/conftest.py)

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def kafka_txn_files():
    return JavaProgram.against_broker(HERE / "KafkaTxnFiles.java")


def test_kafka_reads_our_txnindex_and_snapshots(kafka_txn_files, tmp_path):
    now = int(time.time() * 1000)

    def data(pid, epoch=0):
        return build_batch(
            [b"v"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True, base_timestamp=now
        )

    storage = SegmentStorage(tmp_path / "data")
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    log.append(data(11))  # 0
    log.append(data(12, 3))  # 1
    storage.append_txn_marker("t", 0, 11, 0, False, 1)  # 2: aborted while 12 is open (LSO 1)
    log.roll()  # snapshot at 3: producer 12 open since 1
    storage.append_txn_marker("t", 0, 12, 3, False, 1)  # 3
    log.append(data(13, 1))  # 4: open at the close
    storage.close()
    directory = tmp_path / "data" / "t-0"
    expected = {0: [(11, 0, 2, 1)], 3: [(12, 1, 3, 4)]}
    for base, entries in expected.items():
        path = directory / f"{base:020d}.txnindex"
        assert [tuple(a) for a in txn.read_index(str(path))] == entries
        out = kafka_txn_files.run("KafkaTxnFiles", "txnindex", base, path)
        assert [tuple(map(int, line.split()[1:])) for line in out.splitlines()] == entries
    assert snapshot.offsets(str(directory)) == [3, 5]
    for offset, producers in {3: [(12, 3, 1)], 5: [(13, 1, 4)]}.items():
        out = kafka_txn_files.run("KafkaTxnFiles", "snapshot", directory / f"{offset:020d}.snapshot")
        assert [tuple(map(int, line.split()[1:])) for line in out.splitlines()] == producers
