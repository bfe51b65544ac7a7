"""kafkawire's ``__transaction_state`` is Kafka's format: Kafka 4.4's own DumpLogSegments, with its
transaction log decoder, reads the log a kafkawire broker wrote (commits, aborts, a TV2 epoch bump, a fenced
incarnation) and finds, record by record, the metadata the coordinator holds."""

from __future__ import annotations

import json

from broker.conftest import RawClient
from broker.helpers import create_topic
from tools.test_logs_kafka import _dump_log_segments

from kafkawire.broker.transactions.log import TOPIC, decode_key, decode_value
from kafkawire.protocol import errors, message_class
from kafkawire.protocol.records import iter_batches

from .test_broker import end, find, init, produce, start
from conftest import reference_unavailable


def test_dump_log_segments_reads_kafkawires_transaction_log(tmp_path):
    from kafka_reference import KafkaUnavailable

    data_dir = str(tmp_path / "data")
    with start(data_dir) as b:
        c = RawClient(b.address)
        create_topic(c, "t", partitions=2)
        find(c, "a")
        pid, epoch = init(c, "a")
        assert produce(c, "a", "t", 0, pid, epoch, 0, 12) == 0
        assert produce(c, "a", "t", 1, pid, epoch, 0, 12) == 0
        assert end(c, "a", pid, epoch, True, version=5).error_code == 0  # TV2: epoch + 1
        assert produce(c, "a", "t", 0, pid, epoch + 1, 0, 12) == 0
        assert end(c, "a", pid, epoch + 1, False, version=5).error_code == 0
        pid_b, epoch_b = init(c, "b")
        assert produce(c, "b", "t", 1, pid_b, epoch_b, 0, 12) == 0
        fenced = c.call(
            message_class("InitProducerIdRequest")(
                transactional_id="b", transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
            ),
            5,
        )
        assert fenced.error_code == errors.CONCURRENT_TRANSACTIONS  # fences and aborts "b"
        c.close()
    log_file = next((tmp_path / "data" / f"{TOPIC}-0").glob("*.log"))
    ours = []
    for batch in iter_batches(log_file.read_bytes()):
        for rec in batch.records():
            tid = decode_key(bytes(rec.key))
            ours.append((rec.offset, tid, decode_value(tid, bytes(rec.value))))
    try:
        theirs = _dump_log_segments([log_file], "--transaction-log-decoder")
    except KafkaUnavailable as exc:
        reference_unavailable(str(exc))
    records = [r for batches in theirs.values() for batch in batches for r in batch["records"]]
    assert len(records) == len(ours) >= 8
    states = []
    for rec, (offset, tid, txn) in zip(records, ours):
        assert rec["offset"] == offset
        assert json.loads(rec["key"])["data"] == {"transactionalId": tid}
        data = json.loads(rec["payload"])["data"]
        partitions = {(p["topic"], i) for p in data["transactionPartitions"] or [] for i in p["partitionIds"]}
        assert (
            data["producerId"],
            data["producerEpoch"],
            data["transactionTimeoutMs"],
            data["transactionStatus"],
            partitions,
            data["transactionStartTimestampMs"],
            data["transactionLastUpdateTimestampMs"],
        ) == (
            txn.producer_id,
            txn.producer_epoch,
            txn.timeout_ms,
            str(txn.state),  # by name since Kafka 4.4 (CompleteCommit, ...), not the status byte
            txn.partitions,
            txn.start_ms,
            txn.last_update_ms,
        ), offset
        # the tagged fields of v1, absent at their defaults
        assert (
            data.get("clientTransactionVersion", 0),
            data.get("previousProducerId", -1),
            data.get("nextProducerId", -1),
        ) == (txn.client_tv, txn.last_producer_id, txn.next_producer_id), offset
        states.append((tid, data["transactionStatus"]))
    assert ("a", "CompleteCommit") in states and ("a", "CompleteAbort") in states
    assert ("b", "PrepareAbort") in states  # the fenced incarnation's transaction
    assert any(txn.client_tv == 2 for _, _, txn in ours)  # TV2 records carry their version
