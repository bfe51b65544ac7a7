"""What a start writes to the KRaft metadata log, kafkawire's against Kafka 4.4's, on copies of one directory.

Measured on Kafka 4.4 (one combined node), after a clean stop and after a SIGKILL alike: each start bumps the quorum
epoch (quorum-state's leaderEpoch, a ``<epoch> <log end>`` line in ``__cluster_metadata-0/leader-epoch-checkpoint``),
opens it with a LeaderChange control batch, and every batch after carries that epoch; its partitions are elected
again (PartitionChangeRecords; after a kill, once the old incarnation's session expired, first fenced). Kafka also
registers its controller and broker and writes NoOps, which kafkawire does not (the reason is written at
``MetadataLog.become_leader``): those are the only record types told apart below.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from kafka_dir import create_topics, kafka_on, kafkawire_on

from kafkawire.broker.storage.kraft.log import METADATA_DIR, decode_batch_records
from kafkawire.protocol.records import iter_batches

pytest.importorskip("confluent_kafka")

# what Kafka's start writes and kafkawire's does not, by design (see the module's docstring)
KAFKA_ONLY = {"NoOpRecord", "RegisterControllerRecord", "RegisterBrokerRecord", "BrokerRegistrationChangeRecord"}


def _metadata(root: Path) -> Path:
    return root / "logs" / METADATA_DIR


def _batches(root: Path) -> list[tuple[int, int, bool, list]]:
    """(base offset, partitionLeaderEpoch, is control, [(record name, message)]) of the metadata log's batches."""
    out = []
    directory = _metadata(root)
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
        for batch in iter_batches((directory / name).read_bytes()):
            decoded = [(n, m) for _o, n, m in decode_batch_records(batch)]
            out.append((batch.base_offset, batch.partition_leader_epoch, batch.is_control, decoded))
    return out


def _end(root: Path) -> tuple[int, int]:
    """(log end offset, epoch of the last batch)."""
    last = _batches(root)[-1]
    return last[0] + len(last[3]), last[1]


def _written(root: Path, start: int) -> list[tuple[int, int, bool, list]]:
    return [b for b in _batches(root) if b[0] >= start]


def _elected(root: Path, start: int) -> bool:
    return any(
        n == "PartitionChangeRecord" and m.leader == 1 for _o, _e, _c, recs in _written(root, start) for n, m in recs
    )


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src / "logs", dst / "logs")
    return dst


def _run_kafka(root: Path, start: int) -> None:
    """A Kafka start on ``root`` that lasts until it elected its partitions again (after a kill, once the old
    incarnation's session expired: about 9 s), then a clean stop."""
    kafka = kafka_on(root)
    try:
        deadline = time.monotonic() + 90
        while not _elected(root, start):
            assert time.monotonic() < deadline, f"Kafka did not elect its partitions:\n{kafka.log_tail()}"
            time.sleep(0.5)
    finally:
        kafka.stop()


def _run_kafkawire(root: Path) -> None:
    kafkawire_on(root).stop()


def _what_a_start_wrote(root: Path, start: int, epoch: int) -> set[str]:
    written = _written(root, start)
    assert written, "nothing written"
    first = written[0]
    assert first[2] and [n for n, _m in first[3]] == ["LeaderChangeMessage"], first
    leader_change = first[3][0][1]
    assert leader_change.leader_id == 1 and [v.voter_id for v in leader_change.voters] == [1]
    assert {e for _o, e, _c, _r in written} == {epoch + 1}, [(o, e) for o, e, _c, _r in written]
    quorum = json.loads((_metadata(root) / "quorum-state").read_text())
    assert (quorum["leaderId"], quorum["leaderEpoch"], quorum["votedId"]) == (1, epoch + 1, -1), quorum
    checkpoint = (_metadata(root) / "leader-epoch-checkpoint").read_text().split("\n")
    assert checkpoint[2 + int(checkpoint[1]) - 1] == f"{epoch + 1} {start}", checkpoint
    return {n for _o, _e, _c, recs in written for n, _m in recs}


@pytest.mark.parametrize("previous_stop", ["clean", "SIGKILL"])
def test_a_start_opens_a_new_quorum_epoch_as_kafka(tmp_path, previous_stop):
    base = tmp_path / "base"
    kafka = kafka_on(base)
    try:
        create_topics(kafka.bootstrap, {"t": (2, {})})
        if previous_stop == "SIGKILL":
            time.sleep(1)  # the partitions' registrations are in the log
    finally:
        if previous_stop == "SIGKILL":
            kafka.kill()
        else:
            kafka.stop()
    start, epoch = _end(base)
    ours, theirs = _copy(base, tmp_path / "kafkawire"), _copy(base, tmp_path / "kafka")

    _run_kafkawire(ours)
    _run_kafka(theirs, start)

    kafkawire_types = _what_a_start_wrote(ours, start, epoch)
    kafka_types = _what_a_start_wrote(theirs, start, epoch)
    assert {"LeaderChangeMessage", "PartitionChangeRecord"} <= kafka_types, kafka_types
    assert kafkawire_types == kafka_types - KAFKA_ONLY
    # the leader-epoch history of the metadata partition is the same file on both
    assert (_metadata(ours) / "leader-epoch-checkpoint").read_text() == (
        _metadata(theirs) / "leader-epoch-checkpoint"
    ).read_text()

    # and each broker starts on what the other wrote, in the epoch after it
    _run_kafka(ours, _end(ours)[0])
    _run_kafkawire(theirs)
    for root in (ours, theirs):
        assert _batches(root)[-1][1] == epoch + 2
