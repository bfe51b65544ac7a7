"""Partition leader epochs as Kafka 4.4 keeps them in KRaft, on a data directory kafkawire and Kafka share.

Measured on Kafka 4.4 (one combined node): a partition is created at leader epoch 0; a clean stop writes a
PartitionChangeRecord leaving it leaderless (epoch + 1) and the next start one electing the node again
(epoch + 1), so every restart adds 2. Each partition directory's ``leader-epoch-checkpoint`` gets
``epoch log-end-offset`` each time the node becomes leader; batches appended carry the current epoch; and
OffsetForLeaderEpoch, ListOffsets and Fetch answer from that history and check the client's current epoch.
kafkawire does the same, so the answers of either broker on the same directory agree.
"""

from __future__ import annotations

import shutil
import socket
import struct
import time
from pathlib import Path

import pytest
from kafka_dir import create_topics, kafka_on, kafkawire_on, produce, read_all

from kafkawire.protocol import decode_response, encode_request, errors, message_class, request_header
from kafkawire.protocol.records import iter_batches

pytest.importorskip("confluent_kafka")


def _recv(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(out)} of {n} bytes")
        out += chunk
    return out


def call(bootstrap: str, body, version: int):
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(encode_request(request_header(body.api_key, version, 7, "leader-epochs"), body))
        size = struct.unpack(">i", _recv(s, 4))[0]
        data = _recv(s, size)
    return decode_response(data, body.api_key, version, framed=False).body


def metadata_epochs(bootstrap: str, topic: str) -> dict[int, int]:
    R = message_class("MetadataRequest")
    res = call(bootstrap, R(topics=[R.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False), 12)
    return {p.partition_index: p.leader_epoch for t in res.topics for p in t.partitions}


def describe_epochs(bootstrap: str, topic: str) -> dict[int, tuple]:
    R = message_class("DescribeTopicPartitionsRequest")
    res = call(bootstrap, R(topics=[R.TopicRequest(name=topic)], response_partition_limit=100), 0)
    return {
        p.partition_index: (p.leader_epoch, list(p.isr_nodes), list(p.eligible_leader_replicas))
        for t in res.topics
        for p in t.partitions
    }


def end_offsets(bootstrap: str, topic: str, partition: int, pairs) -> list[tuple[int, int, int]]:
    """OffsetForLeaderEpoch v4 for each (current leader epoch, leader epoch): (error, epoch, end offset)."""
    R = message_class("OffsetForLeaderEpochRequest")
    out = []
    for current, epoch in pairs:
        body = R(
            replica_id=-1,
            topics=[
                R.OffsetForLeaderTopic(
                    topic=topic,
                    partitions=[
                        R.OffsetForLeaderPartition(
                            partition=partition, current_leader_epoch=current, leader_epoch=epoch
                        )
                    ],
                )
            ],
        )
        (p,) = call(bootstrap, body, 4).topics[0].partitions
        out.append((p.error_code, p.leader_epoch, p.end_offset))
    return out


def list_offsets(bootstrap: str, topic: str, partition: int, asks) -> list[tuple[int, int, int]]:
    """ListOffsets v9 for each (current leader epoch, timestamp): (error, offset, leader epoch)."""
    R = message_class("ListOffsetsRequest")
    out = []
    for current, ts in asks:
        body = R(
            replica_id=-1,
            isolation_level=0,
            topics=[
                R.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        R.ListOffsetsPartition(partition_index=partition, current_leader_epoch=current, timestamp=ts)
                    ],
                )
            ],
        )
        (p,) = call(bootstrap, body, 9).topics[0].partitions
        out.append((p.error_code, p.offset, p.leader_epoch))
    return out


def fetch(bootstrap: str, topic: str, partition: int, offset: int, current: int, last_fetched: int):
    """Fetch v12 of one partition: (error, diverging (epoch, end offset), [partitionLeaderEpoch of each batch])."""
    R = message_class("FetchRequest")
    body = R(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            R.FetchTopic(
                topic=topic,
                partitions=[
                    R.FetchPartition(
                        partition=partition,
                        current_leader_epoch=current,
                        fetch_offset=offset,
                        last_fetched_epoch=last_fetched,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    (p,) = call(bootstrap, body, 12).responses[0].partitions
    batches = [b.partition_leader_epoch for b in iter_batches(bytes(p.records or b""))]
    return p.error_code, (p.diverging_epoch.epoch, p.diverging_epoch.end_offset), batches


def checkpoint(root: Path, topic: str, partition: int) -> list[str]:
    return (root / "logs" / f"{topic}-{partition}" / "leader-epoch-checkpoint").read_text().split()


def checkpoint_soon(root: Path, topic: str, partition: int, expected: list[str], timeout: float = 30.0) -> None:
    """kafkawire writes the checkpoints of a start in the background after it serves: wait for ``expected``."""
    deadline = time.monotonic() + timeout
    while checkpoint(root, topic, partition) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert checkpoint(root, topic, partition) == expected


def answers(bootstrap: str, topic: str, partitions: int) -> dict:
    """Everything a client learns about the partitions' leader epochs, from either broker."""
    out: dict = {"metadata": metadata_epochs(bootstrap, topic), "describe": describe_epochs(bootstrap, topic)}
    for p in range(partitions):
        current = out["metadata"][p]
        asks = [(-1, e) for e in range(-1, current + 3)] + [(current - 1, 0), (current + 1, 0), (current, current)]
        out[("end", p)] = end_offsets(bootstrap, topic, p, asks)
        out[("list", p)] = list_offsets(bootstrap, topic, p, [(-1, -2), (-1, -1), (-1, 0), (current - 1, -1)])
        out[("fetch", p)] = [
            fetch(bootstrap, topic, p, 0, current, -1),
            fetch(bootstrap, topic, p, 0, current - 1, -1),
            fetch(bootstrap, topic, p, 0, current + 1, -1),
            fetch(bootstrap, topic, p, 10_000, current, 0),
            fetch(bootstrap, topic, p, 10_000, current, 1),
            fetch(bootstrap, topic, p, 1, current, current + 5),
        ]
    return out


def test_kafkawire_restarts_bump_epochs_as_kafka(tmp_path):
    """kafkawire alone: created at 0, two more on each restart, the history and the answers follow."""
    wire = kafkawire_on(tmp_path)
    try:
        create_topics(wire.bootstrap, {"e": (1, {})})
        assert metadata_epochs(wire.bootstrap, "e") == {0: 0}
        first = produce(wire.bootstrap, "e", 2, tag="one")
    finally:
        wire.stop()
    ends = {0: len(first)}
    assert checkpoint(tmp_path, "e", 0) == ["0", "1", "0", "0"]

    wire = kafkawire_on(tmp_path)
    try:
        assert metadata_epochs(wire.bootstrap, "e") == {0: 2}
        assert describe_epochs(wire.bootstrap, "e") == {0: (2, [1], [])}
        checkpoint_soon(tmp_path, "e", 0, ["0", "2", "0", "0", "2", str(ends[0])])
        second = produce(wire.bootstrap, "e", 2, tag="two")
        end0 = len(first) + len(second)
        assert end_offsets(wire.bootstrap, "e", 0, [(-1, 0), (-1, 1), (-1, 2), (-1, 3), (1, 2), (3, 2), (2, 0)]) == [
            (0, 0, ends[0]),
            (0, 0, ends[0]),
            (0, 2, end0),
            (0, -1, -1),
            (errors.FENCED_LEADER_EPOCH, -1, -1),
            (errors.UNKNOWN_LEADER_EPOCH, -1, -1),
            (0, 0, ends[0]),
        ]
        err, diverging, batches = fetch(wire.bootstrap, "e", 0, 0, 2, -1)
        assert (err, diverging) == (0, (-1, -1))
        assert batches == sorted(batches) and set(batches) == {0, 2}  # produced in epoch 0, then in 2
        assert fetch(wire.bootstrap, "e", 0, end0, 2, 0) == (0, (0, ends[0]), [])
        assert fetch(wire.bootstrap, "e", 0, 0, 0, -1)[0] == errors.FENCED_LEADER_EPOCH
        assert list_offsets(wire.bootstrap, "e", 0, [(-1, -2), (-1, -1), (0, -1)]) == [
            (0, 0, 0),
            (0, end0, 2),
            (errors.FENCED_LEADER_EPOCH, -1, -1),
        ]
        assert read_all(wire.bootstrap, "e", 1, end0) == {**first, **second}
        # measured on Kafka 4.4: a reassignment to the replicas it has and a preferred election change nothing
        R = message_class("AlterPartitionReassignmentsRequest")
        body = R(
            timeout_ms=30000,
            topics=[
                R.ReassignableTopic(name="e", partitions=[R.ReassignablePartition(partition_index=0, replicas=[1])])
            ],
        )
        assert call(wire.bootstrap, body, 0).responses[0].partitions[0].error_code == 0
        E = message_class("ElectLeadersRequest")
        body = E(election_type=0, topic_partitions=[E.TopicPartitions(topic="e", partitions=[0])], timeout_ms=30000)
        result = call(wire.bootstrap, body, 1).replica_election_results[0].partition_result[0]
        assert result.error_code == errors.ELECTION_NOT_NEEDED
        assert metadata_epochs(wire.bootstrap, "e") == {0: 2}
    finally:
        wire.stop()


def test_epochs_lost_with_a_crash_come_back_from_the_batches(tmp_path):
    """A start writes its checkpoints after it serves, so a kill can leave a checkpoint without the epoch of
    batches already on disk; the next start takes that epoch from the batches' partitionLeaderEpoch (as Kafka's
    recovery does), and the epoch history answers as if the checkpoint had been written."""
    wire = kafkawire_on(tmp_path)
    try:
        create_topics(wire.bootstrap, {"k": (1, {})})
        first = len(produce(wire.bootstrap, "k", 2, tag="one"))
    finally:
        wire.stop()
    before = (tmp_path / "logs" / "k-0" / "leader-epoch-checkpoint").read_bytes()
    assert before.split() == [b"0", b"1", b"0", b"0"]

    wire = kafkawire_on(tmp_path)
    try:
        assert metadata_epochs(wire.bootstrap, "k") == {0: 2}
        second = len(produce(wire.bootstrap, "k", 2, tag="two"))
        checkpoint_soon(tmp_path, "k", 0, ["0", "2", "0", "0", "2", str(first)])
    finally:
        wire.kill()
    # the write of epoch 2's entry lost with the crash, its batches kept
    (tmp_path / "logs" / "k-0" / "leader-epoch-checkpoint").write_bytes(before)

    wire = kafkawire_on(tmp_path)
    try:
        now = metadata_epochs(wire.bootstrap, "k")[0]
        assert now > 2
        end = first + second
        assert end_offsets(wire.bootstrap, "k", 0, [(-1, 0), (-1, 1), (-1, 2), (-1, now - 1), (-1, now)]) == [
            (0, 0, first),
            (0, 0, first),
            (0, 2, end),
            (0, 2, end),
            (0, now, end),
        ]
        checkpoint_soon(tmp_path, "k", 0, ["0", "3", "0", "0", "2", str(first), str(now), str(end)])
        assert read_all(wire.bootstrap, "k", 1, end)
    finally:
        wire.stop()


def test_kafka_dir_epochs_round_trip(tmp_path):
    """Kafka leaves the partitions leaderless at its stop; kafkawire starting on that directory answers exactly
    what Kafka 4.4 answers starting on a copy of it (leader epochs, epoch end offsets, the epochs of ListOffsets,
    fencing, diverging epochs), writes the same epoch history, and Kafka opens the directory afterwards two
    epochs further on, with every record."""
    kafka = kafka_on(tmp_path)
    try:
        create_topics(kafka.bootstrap, {"r": (2, {})})
        landed = produce(kafka.bootstrap, "r", 3, tag="first")
    finally:
        kafka.stop()
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "logs", copy / "logs")

    kafka = kafka_on(copy)
    try:
        expected = answers(kafka.bootstrap, "r", 2)
    finally:
        kafka.stop()
    assert expected["metadata"] == {0: 2, 1: 2}  # created at 0, leaderless (1) at the stop, elected (2)
    assert expected[("end", 0)][1] == (0, 0, len([q for q, _o in landed if q == 0]))  # epoch 0 ends where 2 began

    wire = kafkawire_on(tmp_path)
    try:
        assert answers(wire.bootstrap, "r", 2) == expected
        landed.update(produce(wire.bootstrap, "r", 2, tag="wire"))
    finally:
        wire.stop()
    for p in (0, 1):
        assert checkpoint(tmp_path, "r", p)[:2] == ["0", "2"]
        assert checkpoint(tmp_path, "r", p)[2:] == checkpoint(copy, "r", p)[2:]

    kafka = kafka_on(tmp_path)
    try:
        assert metadata_epochs(kafka.bootstrap, "r") == {0: 4, 1: 4}
        assert read_all(kafka.bootstrap, "r", 2, len(landed)) == landed
        # kafkawire's batches carry epoch 2: Kafka's history says epoch 2 ended where epoch 4 began
        end = {p: 1 + max(o for q, o in landed if q == p) for p in (0, 1)}
        assert end_offsets(kafka.bootstrap, "r", 0, [(-1, 2), (-1, 3), (-1, 4)]) == [
            (0, 2, end[0]),
            (0, 2, end[0]),
            (0, 4, end[0]),
        ]
        assert set(fetch(kafka.bootstrap, "r", 0, 0, 4, -1)[2]) == {0, 2}
    finally:
        kafka.stop()


def test_the_partition_change_records_are_kafkas(tmp_path):
    """What Kafka 4.4's controller wrote for a single node (read from its metadata log): at a clean stop, no
    leader, the replica moved from the ISR to the eligible leader replicas; at the start, the node leader again
    with ISR [node]. A start after a kill (the log still names the node leader) fences first: two epochs too."""
    import uuid

    from kafkawire.broker.storage.base import TopicMeta
    from kafkawire.broker.storage.kraft import MetadataLog
    from kafkawire.broker.storage.kraft.log import decode_batch_records

    log = MetadataLog(str(tmp_path), 1, uuid.UUID(int=5)).load()
    log.save_topics({"t": TopicMeta("t", uuid.UUID(int=9), 1, {})})
    start = log.end_offset
    log.resign_leaders()
    assert log.elect_leaders() == 1
    assert log.image.partition("t", 0).leader_epoch == 2
    assert log.elect_leaders() == 1  # as after a kill: fenced, then elected
    assert log.image.partition("t", 0).leader_epoch == 4
    changes = []
    for segment in sorted((tmp_path / "__cluster_metadata-0").glob("*.log")):
        for batch in iter_batches(segment.read_bytes()):
            changes += [
                (m.leader, m.isr, m.eligible_leader_replicas, m.last_known_elr, m.replicas, m.leader_recovery_state)
                for o, name, m in decode_batch_records(batch)
                if o >= start and name == "PartitionChangeRecord"
            ]
    leaderless, elected = (-1, [], [1], [1], None, -1), (1, [1], [], [], None, -1)
    assert changes == [leaderless, elected, leaderless, elected]


def test_an_acknowledged_append_has_its_epoch_checkpointed_before_the_answer(tmp_path):
    """The first batch of an epoch is answered only once the epoch's entry is in the checkpoint file: read
    while the broker runs, and again after a SIGKILL (no clean stop rewrites it)."""
    wire = kafkawire_on(tmp_path)
    try:
        create_topics(wire.bootstrap, {"s": (1, {})})
        path = tmp_path / "logs" / "s-0" / "leader-epoch-checkpoint"
        assert not path.exists() or path.read_text().split() in (["0", "0"], []), path.read_text()
        assert produce(wire.bootstrap, "s", 1, tag="one")
        assert checkpoint(tmp_path, "s", 0) == ["0", "1", "0", "0"]
    finally:
        wire.kill()
    assert checkpoint(tmp_path, "s", 0) == ["0", "1", "0", "0"]
