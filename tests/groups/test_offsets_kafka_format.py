"""``__consumer_offsets`` in Kafka's record format, proven both ways with Kafka 4.4 itself:

- Kafka's own classes (``FileRecords``, ``GroupCoordinatorRecordSerde``) read the segments kafkawire's
  coordinator writes (plain and transactional offset commits, a classic group, deletions), find every group
  in the partition Kafka would look in (50 partitions), and resolve them to kafkawire's state;
- a Kafka 4.4 node's own ``__consumer_offsets`` segments, replayed by kafkawire's coordinator, give the
  offsets and the group Kafka answers for;
- kafkawire's earlier JSON layout is read once and rewritten.
"""

from __future__ import annotations

import json
import struct
import time
import uuid
from pathlib import Path

import pytest

from kafkawire.broker.groups import CommitPartition, FakeScheduler, GroupConfig, GroupCoordinator
from kafkawire.broker.groups.persistence import TOPIC, partition_for
from kafkawire.broker.storage.memory import MemoryStorage
from kafkawire.broker.storage.segments import SegmentStorage
from kafkawire.protocol import errors
from kafkawire.protocol.messages import CreateTopicsRequest, OffsetCommitRequest, OffsetFetchRequest
from kafkawire.protocol.records import build_batch, iter_batches

from .test_coordinator_unit import hb, join_new, sync
from .test_offsets_topic import _find
from .wire import WireClient
from support.java import JavaProgram  # tests/ is on sys.path (tests/conftest.py)

HERE = Path(__file__).resolve().parent
PARTITIONS = 50


@pytest.fixture(scope="module")
def kafka_offsets_reader():
    return JavaProgram.against_broker(HERE / "KafkaOffsetsRecords.java")


def _segments(data_dir: Path) -> list[str]:
    """(partition, .log file) argument pairs for every partition of the offsets topic, in offset order."""
    args = []
    for p in range(PARTITIONS):
        for log in sorted((data_dir / f"{TOPIC}-{p}").glob("*.log")):
            args += [str(p), str(log)]
    return args


def _kafka_view(lines: list[list[str]]):
    """The committed offsets and groups Kafka's loader makes of the records: last value per key, a transaction's
    offsets applied by its COMMIT marker in the same partition, dropped by ABORT."""
    offsets, groups, pending, consumer = {}, {}, {}, {}
    for line in lines:
        kind, partition = line[0], int(line[1])
        if kind == "marker":
            staged = pending.pop((partition, int(line[2])), [])
            if line[3] == "COMMIT":
                for key, value in staged:
                    offsets[key] = value
        elif kind == "offset":
            txn, pid, group, topic, tp, hashed = line[2], int(line[3]), line[4], line[5], int(line[6]), int(line[7])
            assert hashed == partition, f"{group} written to {partition}, Kafka looks in {hashed}"
            value = None if line[8] == "-" else (int(line[8]), int(line[9]), line[10])
            if line[8] != "-":
                assert line[12] == "3", line  # OffsetCommitValue v3, as Kafka writes it
            if txn == "txn":
                pending.setdefault((partition, pid), []).append(((group, topic, tp), value))
            elif value is None:
                offsets.pop((group, topic, tp), None)
            else:
                offsets[(group, topic, tp)] = value
        elif kind == "group":
            assert int(line[3]) == partition, line
            groups[line[2]] = None if line[4] == "-" else line[4:]
        elif kind == "consumer":
            assert int(line[3]) == partition, line
            consumer[line[4]] = None if line[5] == "-" else line[5]
        else:
            raise AssertionError(f"a record Kafka's group coordinator would not load: {line}")
    live_consumer = {k: v for k, v in consumer.items() if v is not None}
    return offsets, {g: v for g, v in groups.items() if v is not None}, live_consumer


def test_kafka_reads_the_offsets_kafkawire_writes(kafka_offsets_reader, tmp_path):
    storage = SegmentStorage(tmp_path / "data")
    clock = FakeScheduler()
    cfg = GroupConfig(offsets_topic_partitions=PARTITIONS, initial_rebalance_delay_ms=100, min_session_timeout_ms=1000)
    try:
        storage.create_topic("t", 6)
        coord = GroupCoordinator(storage, cfg, clock)
        coord.load()
        coord.ensure_offsets_topic()
        # "polygenelubricants".hashCode() is Integer.MIN_VALUE: Kafka's Utils.abs makes it partition 0
        names = ["my-group", "polygenelubricants", "g-ü-群", "a" * 200, ""]
        for i, group in enumerate(names):
            parts = [CommitPartition("t", p, 100 * i + p, p - 1, f"meta-{i}-{p}") for p in range(3)]
            assert coord.offset_commit(group, -1, "", None, 8, parts) == [0, 0, 0]
        assert coord.offset_commit("my-group", -1, "", None, 8, [CommitPartition("t", 0, 7, 5, "again")]) == [0]
        assert coord.offset_delete("my-group", [("t", [2])])[1] == [("t", [(2, 0)])]
        a, b = _classic_pair(coord, clock)
        # a consumer-protocol group: two members, one of them gone again (its records deleted)
        first = hb(coord, "m1", 0)
        hb(coord, "m2", 0)
        assert hb(coord, "m2", -1).error == 0  # leaves
        cg = coord.groups["cg"]
        # a committed transaction and an aborted one, each with its marker in the group's partition
        txn_partition = partition_for("txn-group", PARTITIONS)
        assert coord.stage_txn_offsets(5000, "txn-group", [CommitPartition("t", 4, 40, 1, "tx")], 3) == 0
        storage.append_txn_marker(TOPIC, txn_partition, 5000, 3, True, 0)
        coord.complete_transaction(5000, True)
        assert coord.stage_txn_offsets(5001, "txn-group", [CommitPartition("t", 5, 999, 1, "no")], 0) == 0
        storage.append_txn_marker(TOPIC, txn_partition, 5001, 0, False, 0)
        coord.complete_transaction(5001, False)
        expected = {
            (g, t, p): (e.offset, e.leader_epoch, e.metadata) for g, t, p, e in coord.offsets.items() if g != "g"
        }
    finally:
        storage.close()

    out = kafka_offsets_reader.run("KafkaOffsetsRecords", str(PARTITIONS), *_segments(tmp_path / "data"))
    offsets, groups, consumer = _kafka_view([line.split("\t") for line in out.splitlines() if line])
    assert offsets == expected
    assert offsets[("my-group", "t", 0)] == (7, 5, "again") and ("my-group", "t", 2) not in offsets
    assert offsets[("txn-group", "t", 4)] == (40, 1, "tx") and ("txn-group", "t", 5) not in offsets
    protocol_type, generation, protocol, leader, version, *members = groups["g"]
    assert (protocol_type, generation, protocol, leader, version) == ("consumer", "1", "range", a, "3")
    assert sorted(m.split(",")[0] for m in members) == sorted([a, b])
    for m in members:
        member_id, instance, client, session, rebalance, subscription, assignment = m.split(",")
        assert (instance, client, session, rebalance) == ("null", "c", "6000", "10000")
        assert subscription == "bWV0YS1y"  # the member's metadata for the chosen protocol: b"meta-r"
        assert assignment == ("QQ==" if member_id == a else "Qg==")  # b"A", b"B"

    # the consumer group's live records as Kafka's serde reads them: m1's three, the group's three; m2's are gone
    assert sorted(k.split("(")[0] for k in consumer) == sorted(
        ["ConsumerGroupMemberMetadataKey", "ConsumerGroupTargetAssignmentMemberKey"]
        + ["ConsumerGroupCurrentMemberAssignmentKey", "ConsumerGroupPartitionMetadataKey"]
        + ["ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupMetadataKey"]
    )
    assert all("memberId='m1'" in k for k in consumer if "Member" in k)
    assert consumer["ConsumerGroupMetadataKey(groupId='cg')"].startswith(
        f"ConsumerGroupMetadataValue(epoch={cg.group_epoch}"
    )
    current = consumer["ConsumerGroupCurrentMemberAssignmentKey(groupId='cg', memberId='m1')"]
    assert f"memberEpoch={cg.members['m1'].member_epoch}," in current and first.error == 0

    # and kafkawire replays the same files to the same state
    storage = SegmentStorage(tmp_path / "data")
    try:
        again = GroupCoordinator(storage, cfg, FakeScheduler())
        again.load()
        got = {(g, t, p): (e.offset, e.leader_epoch, e.metadata) for g, t, p, e in again.offsets.items() if g != "g"}
        assert got == expected
        assert again.groups["g"].generation_id == 1 and sorted(again.groups["g"].members) == sorted([a, b])
        cg2 = again.groups["cg"]
        assert cg2.to_json() | {"assignor": None} == cg.to_json() | {"assignor": None}
    finally:
        storage.close()


def _classic_pair(coord, clock):
    first, second = join_new(coord, clock), join_new(coord, clock)
    clock.advance(200)
    a, b = first.result.member_id, second.result.member_id
    sync(coord, b, 1)
    assert sync(coord, a, 1, [(a, b"A"), (b, b"B")]).result.error == 0
    return a, b


# -- Kafka 4.4 writes, kafkawire replays ----------------------------------------------------------------------
@pytest.fixture
def kafka_node():
    from .harness import GROUP_OVERRIDES
    from peers.peer_harness import start_kafka

    return start_kafka(config=GROUP_OVERRIDES)


def _commit(c, group, topic, offsets: dict[int, int], metadata: str):
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestPartition
    deadline = time.monotonic() + 60
    while True:
        r = c.call(
            "OffsetCommit",
            8,
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[
                T(
                    name=topic,
                    partitions=[
                        P(partition_index=p, committed_offset=o, committed_leader_epoch=p, committed_metadata=metadata)
                        for p, o in offsets.items()
                    ],
                )
            ],
        )
        codes = {p.error_code for p in r.topics[0].partitions}
        if codes == {0}:
            return
        assert codes <= {errors.COORDINATOR_LOAD_IN_PROGRESS, errors.NOT_COORDINATOR} and time.monotonic() < deadline
        time.sleep(0.2)


def _fetch(c, group, topic, partitions):
    """The group's committed offsets, once stable: Kafka writes a transaction's markers after answering EndTxn,
    and until its offsets are settled answers require_stable with UNSTABLE_OFFSET_COMMIT, which a client
    retries (as here, for up to 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        r = c.call(
            "OffsetFetch",
            7,
            group_id=group,
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=partitions)],
            require_stable=True,
        )
        assert r.error_code == 0
        codes = {p.error_code for p in r.topics[0].partitions}
        if errors.UNSTABLE_OFFSET_COMMIT not in codes or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert codes == {0}, codes
    return {
        p.partition_index: (p.committed_offset, p.committed_leader_epoch, p.metadata) for p in r.topics[0].partitions
    }


def _read_partition_bytes(log_dir: Path, partition: int) -> bytes:
    """Kafka's segments of one partition, whole batches only (the node is running: a batch being written is
    left out)."""
    out = bytearray()
    for segment in sorted((log_dir / f"{TOPIC}-{partition}").glob("*.log")):
        data, pos = segment.read_bytes(), 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            if length <= 0 or pos + 12 + length > len(data):
                break
            out += data[pos : pos + 12 + length]
            pos += 12 + length
    return bytes(out)


def test_kafkawire_replays_the_offsets_kafka_writes(kafka_node):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    c = WireClient("127.0.0.1", kafka_node.port)
    run = uuid.uuid4().hex[:8]
    topic, plain, txn_group = f"kfmt-{run}", f"kfmt-plain-{run}", f"kfmt-txn-{run}"
    try:
        c.call(
            "CreateTopics",
            7,
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name=topic, num_partitions=3, replication_factor=1, assignments=[], configs=[]
                )
            ],
            timeout_ms=30000,
        )
        _find(c, plain)
        _commit(c, plain, topic, {0: 11, 1: 12, 2: 13}, "first")
        _commit(c, plain, topic, {1: 21}, "second")
        # offsets committed by a transaction, then offsets of an aborted one
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": kafka_node.bootstrap, "transactional.id": f"kfmt-tx-{run}"}
        )
        consumer = confluent_kafka.Consumer({"bootstrap.servers": kafka_node.bootstrap, "group.id": txn_group})
        try:
            producer.init_transactions(30)
            for offset, commit in ((500, True), (900, False)):
                producer.begin_transaction()
                producer.send_offsets_to_transaction(
                    [confluent_kafka.TopicPartition(topic, 2, offset)], consumer.consumer_group_metadata(), 30
                )
                (producer.commit_transaction if commit else producer.abort_transaction)(30)
        finally:
            consumer.close()
        kafka_says = {plain: _fetch(c, plain, topic, [0, 1, 2]), txn_group: _fetch(c, txn_group, topic, [2])}
        assert kafka_says[plain] == {0: (11, 0, "first"), 1: (21, 1, "second"), 2: (13, 2, "first")}
        assert kafka_says[txn_group][2][0] == 500
    finally:
        c.close()

    log_dir = kafka_node.kafka.log_dir
    count = len(list(log_dir.glob(f"{TOPIC}-*")))
    assert count == PARTITIONS  # offsets.topic.num.partitions as the node has it
    storage = MemoryStorage({})
    storage.create_topic(TOPIC, count, {})
    for p in range(count):
        data = _read_partition_bytes(log_dir, p)
        if data:
            storage.partition(TOPIC, p).append(data)
    coord = GroupCoordinator(storage, GroupConfig(offsets_topic_partitions=count), FakeScheduler())
    coord.load()
    for group, expected in kafka_says.items():
        _, answer = coord.offset_fetch(group, [(topic, sorted(expected))], require_stable=True)
        assert {p: (o, e, m) for p, o, e, m, _err in answer[0][1]} == expected, group
    assert coord.store.log.partition_for(plain) == partition_for(plain, PARTITIONS)


# -- the JSON layout of earlier kafkawire -------------------------------------------------------------------
def _json(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def test_kafkawire_json_layout_is_read_once_and_rewritten(caplog):
    storage = MemoryStorage({})
    storage.create_topic("t", 2, {})
    storage.create_topic(TOPIC, 1, {})
    old = [
        (
            _json(["offset", "old-g", "t", 0]),
            _json({"offset": 5, "leader_epoch": 2, "metadata": "m", "commit_timestamp": 1}),
        ),
        (
            _json(["offset", "old-g", "t", 1]),
            _json({"offset": 6, "leader_epoch": -1, "metadata": "", "commit_timestamp": 1}),
        ),
        (_json(["offset", "old-g", "t", 1]), None),
        (
            _json(["offset", "other", "t", 1]),
            _json({"offset": 9, "leader_epoch": -1, "metadata": None, "commit_timestamp": 1}),
        ),
        (_json(["group", "gone"]), _json({"type": "classic", "protocol_type": "consumer", "generation": 3})),
        (_json(["group", "gone"]), None),
    ]
    storage.partition(TOPIC, 0).append(build_batch(old))
    with caplog.at_level("INFO", logger="kafkawire.groups"):
        coord = GroupCoordinator(storage, GroupConfig(), FakeScheduler())
        coord.load()
    assert any("kafkawire JSON records" in r.getMessage() for r in caplog.records)
    state = {(g, t, p): (e.offset, e.leader_epoch, e.metadata) for g, t, p, e in coord.offsets.items()}
    assert state == {("old-g", "t", 0): (5, 2, "m"), ("other", "t", 1): (9, -1, "")}
    plog = storage.partition(TOPIC, 0)
    keys = []
    for batch in iter_batches(b"".join(bytes(x) for x in plog.read(plog.log_start_offset, 1 << 20).chunks)):
        keys += [bytes(r.key) for r in batch.records()]
    assert keys and not any(k.startswith(b"[") for k in keys)  # no JSON left below the log start
    again = GroupCoordinator(storage, GroupConfig(), FakeScheduler())
    again.load()
    assert {(g, t, p): (e.offset, e.leader_epoch, e.metadata) for g, t, p, e in again.offsets.items()} == state
    assert again.store.log.legacy_records == 0
