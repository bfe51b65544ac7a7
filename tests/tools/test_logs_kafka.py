"""``kafkawire logs --dump`` against Kafka's own DumpLogSegments, on a data directory Kafka 4.4 wrote.

A Kafka node of its own (the pinned release, ``tools/kafka_reference.py``) gets topics produced to by
librdkafka with every codec, keyed and unkeyed records, an idempotent and a transactional producer
(commit and abort markers), offsets committed by a consumer group that assigns and one that subscribes
(the classic protocol's group metadata records); then it is stopped and both tools read the same files:
every non-empty ``.log`` of every partition, ``__consumer_offsets`` with Kafka's offsets decoder, and the
metadata log and its KRaft snapshot with the cluster metadata decoder, ``__transaction_state`` with the
transaction log decoder. They must agree on every field of every batch line (base offset, count, CRC and
validity among them) and of every record line (offset, timestamp, sizes, sequence, header keys, key, value);
for the metadata log, ``__consumer_offsets``, ``__transaction_state`` and control records also on each
record's type, version and every field Kafka prints of its key and value (a classic group's subscriptions
and assignments decoded, as Kafka shows them).

DumpLogSegments is ``org.apache.kafka.tools.DumpLogSegments`` from the kafka-tools set pinned in
``tools/kafka_pins.py`` (kafka_2.13 4.x no longer has ``kafka.tools.DumpLogSegments``).
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkawire.cli.main import main as kafkawire_main
from kafkawire.protocol.schema import snake_case
from kafkawire.tools import logdump

from conftest import reference_unavailable

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
ROUNDS = 4  # flushes per codec: one batch each
PER_ROUND = 7


def _camel_to_upper_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


@pytest.fixture(scope="module")
def kafka_dir(tmp_path_factory):
    """A stopped Kafka 4.4 node's log directory, written as the module docstring says."""
    from kafka_reference import KafkaUnavailable, ReferenceKafka

    kafka = ReferenceKafka(tmp_path_factory.mktemp("kafka-logs"))
    try:
        kafka.start()
    except KafkaUnavailable as exc:
        kafka.close()
        reference_unavailable(str(exc))
    try:
        _write(kafka.bootstrap)
    finally:
        kafka.stop()
    yield kafka.log_dir
    kafka.close()


def _write(boot: str) -> None:
    """What the module docstring says, on the Kafka node at ``boot``; the clients are gone when it returns
    (none is left to complain once the node stops)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": boot})
    names = [f"logs-{c}" for c in CODECS] + ["logs-txn"]
    # a small index interval, so that the offset and time indexes have entries to compare
    for f in admin.create_topics([NewTopic(n, 1, 1, config={"index.interval.bytes": "200"}) for n in names]).values():
        f.result(60)
    for codec in CODECS:
        p = Producer(
            {
                "bootstrap.servers": boot,
                "compression.type": codec,
                "linger.ms": 0,
                "enable.idempotence": codec == "zstd",
            }
        )
        for r in range(ROUNDS):
            for i in range(PER_ROUND):
                n = r * PER_ROUND + i
                p.produce(
                    f"logs-{codec}",
                    value=f"{codec} value {n} ".encode() * 3,
                    key=None if n % 4 == 3 else f"key-{codec}-{n}".encode(),
                    headers=[("h", b"\x00\x01")] if n % 5 == 0 else None,
                )
            assert p.flush(60) == 0
    tp = Producer({"bootstrap.servers": boot, "transactional.id": "logs-tx", "linger.ms": 0})
    tp.init_transactions(60)
    for commit in (True, False, True):
        tp.begin_transaction()
        for i in range(3):
            tp.produce("logs-txn", key=f"tx-{commit}-{i}".encode(), value=b"v")
        assert tp.flush(60) == 0  # records written, so an abort has something to mark
        (tp.commit_transaction if commit else tp.abort_transaction)(60)
    # a group that assigns and commits, and one that subscribes (classic protocol: group metadata records)
    c = Consumer({"bootstrap.servers": boot, "group.id": "logs-assign", "enable.auto.commit": False})
    _retry(
        lambda: c.commit(
            offsets=[TopicPartition("logs-none", 0, 5), TopicPartition("logs-gzip", 0, 9)], asynchronous=False
        )
    )
    c.close()
    s = Consumer(
        {
            "bootstrap.servers": boot,
            "group.id": "logs-subscribe",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    s.subscribe(["logs-lz4"])
    got, deadline = 0, time.monotonic() + 60
    while got < ROUNDS * PER_ROUND and time.monotonic() < deadline:
        m = s.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    assert got == ROUNDS * PER_ROUND
    _retry(lambda: s.commit(asynchronous=False))
    s.close()


def _retry(call, attempts: int = 60):
    """A group's coordinator is still loading right after the topics appear (NOT_COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS): try again, a bounded number of times."""
    from confluent_kafka import KafkaException

    for attempt in range(attempts):
        try:
            return call()
        except KafkaException as exc:
            if attempt == attempts - 1 or not exc.args[0].retriable() and exc.args[0].code() not in (14, 15, 16):
                raise
            time.sleep(0.5)


def _dump_log_segments(files: list[Path], decoder_flag: str | None) -> dict[str, list[dict]]:
    """Run Kafka's DumpLogSegments on ``files``; per file its batches, each with its records' lines parsed."""
    import kafka_pins
    import kafka_reference

    cmd = [
        kafka_reference._tool("java"),
        "-Xmx256m",
        "-cp",
        kafka_reference.classpath(kafka_pins.TOOLS),
        "org.apache.kafka.tools.DumpLogSegments",
        "--deep-iteration",
        "--print-data-log",
        "--files",
        ",".join(str(f) for f in files),
    ]
    if decoder_flag:
        cmd.append(decoder_flag)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, list[dict]] = {}
    current: list[dict] | None = None
    for line in proc.stdout.splitlines():
        if line.startswith("Dumping "):
            current = out.setdefault(os.path.realpath(line[len("Dumping ") :].strip()), [])
        elif line.startswith("baseOffset:"):
            f = dict(re.findall(r"(\w+): (\S+)", line))
            assert current is not None
            horizon = f["deleteHorizonMs"]
            current.append(
                {
                    "header": (
                        int(f["baseOffset"]),
                        int(f["lastOffset"]),
                        int(f["count"]),
                        int(f["baseSequence"]),
                        int(f["lastSequence"]),
                        int(f["producerId"]),
                        int(f["producerEpoch"]),
                        int(f["partitionLeaderEpoch"]),
                        f["isTransactional"] == "true",
                        f["isControl"] == "true",
                        None if horizon == "OptionalLong.empty" else int(horizon.split("[")[1].rstrip("]")),
                        int(f["position"]),
                        int(f.get("CreateTime", f.get("LogAppendTime"))),
                        int(f["size"]),
                        int(f["magic"]),
                        f["compresscodec"],
                        int(f["crc"]),
                        f["isvalid"] == "true",
                    ),
                    "records": [],
                }
            )
        elif line.startswith("| offset:"):
            assert current
            current[-1]["records"].append(_kafka_record(line))
    return out


def _kafka_record(line: str) -> dict:
    """One ``| offset: ...`` line of DumpLogSegments: offset, key size, and what follows the header keys."""
    m = re.match(
        r"\| offset: (\d+) \w+: (-?\d+) keySize: (-?\d+) valueSize: (-?\d+) sequence: (-?\d+) "
        r"headerKeys: \[([^\]]*)\](.*)$",
        line,
    )
    assert m, line
    rest = m.group(7).lstrip(" ")  # a value may end in spaces
    rec = {
        "offset": int(m.group(1)),
        "timestamp": int(m.group(2)),
        "key_size": int(m.group(3)),
        "value_size": int(m.group(4)),
        "sequence": int(m.group(5)),
        "header_keys": m.group(6).split(", ") if m.group(6) else [],
        "key": None,
        "payload": None,
        "control": None,
    }
    if rest.startswith("endTxnMarker: "):
        rec["control"] = rest.split()[1]  # COMMIT / ABORT
        return rec
    cm = re.match(r"(LeaderChange|SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters):? (.*)$", rest)
    if cm:
        rec["control"] = _camel_to_upper_snake(cm.group(1).replace("KRaft", "Kraft"))
        rec["control_data"] = json.loads(cm.group(2))
        return rec
    if rest.startswith("key: "):
        key, sep, payload = rest[len("key: ") :].partition(" payload: ")
        rec["key"] = key
        rec["payload"] = payload if sep else None
    elif rest.startswith("payload: "):
        rec["payload"] = rest[len("payload: ") :]
    return rec


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _differences(theirs, ours, path: str = "") -> list[tuple]:
    """Where a record's data as DumpLogSegments prints it (Kafka's JSON: camelCase names, UUIDs and bytes in
    base64) differs from kafkawire's decoding of it (snake_case names, UUIDs in hex form, bytes in hex).
    Every field Kafka prints must be there and equal; kafkawire may show more (tagged fields at their default)."""
    if isinstance(theirs, dict):
        if not isinstance(ours, dict):
            return [(path, theirs, ours)]
        out = []
        for name, value in theirs.items():
            key = snake_case(name)
            if key not in ours:
                out.append((f"{path}.{key}", value, "<missing>"))
            else:
                out += _differences(value, ours[key], f"{path}.{key}")
        return out
    if isinstance(theirs, list):
        if not isinstance(ours, list) or len(theirs) != len(ours):
            return [(path, theirs, ours)]
        return [d for i, (a, b) in enumerate(zip(theirs, ours)) for d in _differences(a, b, f"{path}[{i}]")]
    if theirs == ours:
        return []
    if isinstance(theirs, str) and isinstance(ours, str):
        if _UUID.fullmatch(ours) and logdump.kafka_uuid(ours) == theirs:
            return []
        try:
            if base64.b64decode(theirs, validate=True) == bytes.fromhex(ours):
                return []
        except ValueError:
            pass
    return [(path, theirs, ours)]


def _kafkawire_dump(path: Path, capsys) -> list[dict]:
    code = kafkawire_main(["logs", "--dump", "--json", "--max-bytes", "0", str(path)])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    errors = [i for i in lines if i["kind"] == "error"]
    assert code == 0 and not errors, errors
    return [i for i in lines if i["kind"] == "batch"]


def _compare(ours: list[dict], theirs: list[dict], path: Path, decoder: str) -> int:
    """Assert agreement; returns the number of records compared."""
    # every field of DumpLogSegments' batch line
    assert [
        (
            b["base_offset"],
            b["last_offset"],
            b["count"],
            b["base_sequence"],
            b["last_sequence"],
            b["producer_id"],
            b["producer_epoch"],
            b["partition_leader_epoch"],
            b["transactional"],
            b["control"],
            b["delete_horizon_ms"],
            b["position"],
            b["max_timestamp"],
            b["size"],
            b["magic"],
            b["codec"],
            b["crc"],
            b["crc_valid"],
        )
        for b in ours
    ] == [b["header"] for b in theirs], path
    compared = 0
    for ob, tb in zip(ours, theirs):
        assert len(ob["records"]) == len(tb["records"]), (path, ob["base_offset"])
        for orec, trec in zip(ob["records"], tb["records"]):
            where = (str(path), orec["offset"])
            sequence = -1 if ob["base_sequence"] < 0 else ob["base_sequence"] + orec["offset"] - ob["base_offset"]
            assert (
                orec["offset"],
                orec["timestamp"],
                orec["key_size"],
                orec["value_size"],
                sequence,
                [h for h, _ in orec["headers"]],
            ) == (
                trec["offset"],
                trec["timestamp"],
                trec["key_size"],
                trec["value_size"],
                trec["sequence"],
                trec["header_keys"],
            ), where
            dec = orec.get("decoded")
            assert "decode_error" not in orec, (where, orec["decode_error"])
            if trec["control"] is not None:
                assert ob["control"] and dec is not None and dec["control"] == trec["control"], where
                if "control_data" in trec:
                    assert not _differences(trec["control_data"], dec["data"]), (where, trec["control_data"], dec)
            elif decoder == "metadata":
                payload = json.loads(trec["payload"])
                assert _camel_to_upper_snake(dec["type"]) == payload["type"], where
                assert dec["version"] == payload["version"], where
                assert not _differences(payload["data"], dec["data"]), (
                    where,
                    _differences(payload["data"], dec["data"]),
                )
            elif decoder == "transactions":
                key = json.loads(trec["key"])
                assert (int(key["type"]), dec["type"]) == (0, "TransactionLog"), where
                assert key["data"] == {"transactionalId": dec["key"]["transactional_id"]}, where
                assert not _differences(json.loads(trec["payload"])["data"], dec["value"]), where
            elif decoder == "offsets":
                key = json.loads(trec["key"])
                assert int(key["type"]) == logdump._I16.unpack(bytes.fromhex(orec["key"]["hex"][:4]))[0], where
                assert dec["type"] in ("OffsetCommit", "GroupMetadata", "ConsumerGroupMetadata") or dec[
                    "type"
                ].startswith("ConsumerGroup"), (where, dec["type"])
                assert not _differences(key["data"], dec["key"]), where
                if trec["payload"] not in (None, "<DELETE>"):
                    value = json.loads(trec["payload"])
                    assert int(value["version"]) == dec["value_version"], where
                    assert not _differences(value["data"], dec["value"]), (
                        where,
                        _differences(value["data"], dec["value"]),
                    )
                else:
                    assert dec["value"] is None, where
                if dec["type"] == "OffsetCommit":
                    assert key["data"] == {
                        "group": dec["key"]["group"],
                        "topic": dec["key"]["topic"],
                        "partition": dec["key"]["partition"],
                    }, where
                    if trec["payload"] not in (None, "<DELETE>"):
                        assert json.loads(trec["payload"])["data"]["offset"] == dec["value"]["offset"], where
                elif dec["type"] == "GroupMetadata":
                    assert key["data"] == {"group": dec["key"]["group"]}, where
            else:
                if trec["key_size"] < 0:
                    assert orec["key"] is None, where
                else:
                    assert orec["key"] == {"text": trec["key"]}, where
                if trec["value_size"] < 0:  # a tombstone: DumpLogSegments prints no payload
                    assert orec["value"] is None and trec["payload"] is None, where
                else:
                    assert orec["value"] == {"text": trec["payload"]}, where
            compared += 1
    return compared


def test_kafkawire_logs_agrees_with_dump_log_segments(kafka_dir, capsys):
    logs = sorted(p for p in kafka_dir.glob("*/*.log") if p.stat().st_size)
    meta_dir = kafka_dir / "__cluster_metadata-0"
    snapshots = sorted(meta_dir.glob("*.checkpoint"))
    groups = {
        "metadata": [p for p in logs if p.parent == meta_dir] + snapshots,
        "offsets": [p for p in logs if p.parent.name.startswith("__consumer_offsets-")],
        "transactions": [p for p in logs if p.parent.name.startswith("__transaction_state-")],
    }
    groups["raw"] = [p for p in logs if not any(p in g for g in groups.values())]
    assert len(groups["raw"]) == len(CODECS) + 1 and groups["offsets"] and groups["transactions"]
    assert len(groups["metadata"]) >= 2
    flags = {
        "raw": None,
        "metadata": "--cluster-metadata-decoder",
        "offsets": "--offsets-decoder",
        "transactions": "--transaction-log-decoder",
    }
    totals = {"files": 0, "batches": 0, "records": 0}
    seen_types: set[str] = set()
    for decoder, files in groups.items():
        theirs = _dump_log_segments(files, flags[decoder])
        for path in files:
            assert logdump.decoder_for(str(path)) == decoder
            ours = _kafkawire_dump(path, capsys)
            kafka_batches = theirs[os.path.realpath(path)]
            assert kafka_batches, path
            totals["records"] += _compare(ours, kafka_batches, path, decoder)
            totals["files"] += 1
            totals["batches"] += len(ours)
            seen_types |= {
                r["decoded"].get("type") or r["decoded"].get("control")
                for b in ours
                for r in b["records"]
                if r.get("decoded")
            }
    # what the data directory was made to hold is really there, so the comparison covered it
    assert {
        "TopicRecord",
        "PartitionRecord",
        "FeatureLevelRecord",
        "OffsetCommit",
        "GroupMetadata",
        "TransactionLog",
        "COMMIT",
        "ABORT",
        "LEADER_CHANGE",
        "SNAPSHOT_HEADER",
    } <= seen_types, seen_types
    codecs = set()
    for path in groups["raw"]:
        codecs |= {b["codec"] for b in _kafkawire_dump(path, capsys)}
    assert codecs == set(CODECS)
    print(f"compared with DumpLogSegments: {totals}", file=sys.stderr)
    assert totals["batches"] >= len(CODECS) * ROUNDS


def test_kafkawire_logs_summarises_the_kafka_directory(kafka_dir, capsys):
    assert kafkawire_main(["logs", "--json", str(kafka_dir)]) == 0
    items = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert items[0]["kind"] == "data_dir" and items[0]["layout"] == "kafka"
    topics = {i["name"]: i for i in items if i["kind"] == "topic"}
    assert {f"logs-{c}" for c in CODECS} | {"logs-txn", "__consumer_offsets"} <= set(topics)
    assert topics["__consumer_offsets"]["partitions"] == 50
    for codec in CODECS:
        ident = (kafka_dir / f"logs-{codec}-0" / "partition.metadata").read_text().split("topic_id:")[1].strip()
        assert topics[f"logs-{codec}"]["topic_id"] == ident
    parts = {i["name"]: i for i in items if i["kind"] == "partition"}
    assert parts["logs-gzip-0"]["records"] == ROUNDS * PER_ROUND
    assert parts["logs-gzip-0"]["last_offset"] == ROUNDS * PER_ROUND - 1
    (offsets,) = [i for i in items if i["kind"] == "consumer_offsets"]
    assert offsets["groups"]["logs-assign"] == {"logs-gzip-0": 9, "logs-none-0": 5}
    assert offsets["groups"]["logs-subscribe"] == {"logs-lz4-0": ROUNDS * PER_ROUND}
    assert not [i for i in items if i["kind"] == "unknown_entries"]


def _kafka_index_lines(files: list[Path]) -> dict[str, list[dict]]:
    """DumpLogSegments on index, time index, transaction index and producer snapshot files: per file the
    ``name: value`` fields of each entry line."""
    import kafka_pins
    import kafka_reference

    cmd = [
        kafka_reference._tool("java"),
        "-Xmx256m",
        "-cp",
        kafka_reference.classpath(kafka_pins.TOOLS),
        "org.apache.kafka.tools.DumpLogSegments",
        "--files",
        ",".join(str(f) for f in files),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, list[dict]] = {}
    current: list[dict] | None = None
    for line in proc.stdout.splitlines():
        if line.startswith("Dumping "):
            current = out.setdefault(os.path.realpath(line[len("Dumping ") :].strip()), [])
        elif current is not None and re.match(r"(offset|timestamp|version|producerId): ", line):
            current.append(dict(re.findall(r"(\w+): (\S+)", line)))
    return out


def test_indexes_and_producer_snapshots_agree_with_dump_log_segments(kafka_dir, capsys):
    files = sorted(p for p in kafka_dir.glob("*/*") if p.suffix in (".index", ".timeindex", ".txnindex", ".snapshot"))
    theirs = _kafka_index_lines(files)
    entries = 0
    kinds = set()
    for path in files:
        assert kafkawire_main(["logs", "--dump", "--json", str(path)]) == 0, path
        items = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        kafka = theirs.get(os.path.realpath(path), [])
        if path.suffix == ".index":
            ours = [(i["offset"], i["position"]) for i in items if i["kind"] == "index_entry"]
            assert ours == [(int(k["offset"]), int(k["position"])) for k in kafka], path
        elif path.suffix == ".timeindex":
            ours = [(i["timestamp"], i["offset"]) for i in items if i["kind"] == "index_entry"]
            assert ours == [(int(k["timestamp"]), int(k["offset"])) for k in kafka], path
        elif path.suffix == ".txnindex":
            ours = [
                (i["producer_id"], i["first_offset"], i["last_offset"], i["last_stable_offset"])
                for i in items
                if i["kind"] == "aborted_txn"
            ]
            assert ours == [
                (int(k["producerId"]), int(k["firstOffset"]), int(k["lastOffset"]), int(k["lastStableOffset"]))
                for k in kafka
            ], path
        else:
            (snap,) = [i for i in items if i["kind"] == "producer_snapshot"]
            assert snap["crc_valid"], path
            ours = [
                (
                    p["producer_id"],
                    p["epoch"],
                    p["coordinator_epoch"],
                    p["last_sequence"] - p["offset_delta"],
                    p["last_sequence"],
                    p["last_offset"],
                    p["offset_delta"],
                    p["timestamp"],
                    None if p["current_txn_first_offset"] < 0 else p["current_txn_first_offset"],
                )
                for p in snap["producers"]
            ]
            assert ours == [
                (
                    int(k["producerId"]),
                    int(k["producerEpoch"]),
                    int(k["coordinatorEpoch"]),
                    int(k["firstSequence"]),
                    int(k["lastSequence"]),
                    int(k["lastOffset"]),
                    int(k["offsetDelta"]),
                    int(k["timestamp"]),
                    None
                    if k["currentTxnFirstOffset"] == "OptionalLong.empty"
                    else int(k["currentTxnFirstOffset"].split("[")[1].rstrip("]")),
                )
                for k in kafka
            ], path
        entries += len(ours)
        if ours:
            kinds.add(path.suffix)
    # the directory holds entries of every kind, so each comparison above compared something
    assert kinds == {".index", ".timeindex", ".txnindex", ".snapshot"}, kinds
    print(f"index and snapshot entries compared with DumpLogSegments: {entries} in {len(files)} files", file=sys.stderr)


# -- a compacted partition: Kafka's cleaner ran (offset gaps, rewritten batches, stamped delete horizons) ----------
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.ms": "100",  # each round starts a segment, so the cleaner has sealed ones to clean
    "min.cleanable.dirty.ratio": "0.01",
}


def _stamped_and_gapped(directory: Path) -> bool:
    from kafkawire.protocol.records import iter_batches

    batches = []
    for f in sorted(directory.glob("*.log")):
        try:
            batches += list(iter_batches(f.read_bytes(), allow_partial=True))
        except FileNotFoundError:  # a swap renamed it away: look again later
            return False
    horizons = {b.is_control for b in batches if b.has_delete_horizon}
    gaps = any(b.base_offset > a.last_offset + 1 for a, b in zip(batches, batches[1:]))
    return horizons == {False, True} and gaps


def _summary(directory: Path) -> list:
    from kafkawire.protocol.records import iter_batches

    return [
        (f.name, b.base_offset, b.last_offset, b.record_count, b.is_control, b.producer_id, b.delete_horizon_ms)
        for f in sorted(directory.glob("*.log"))
        for b in iter_batches(f.read_bytes(), allow_partial=True)
    ]


@pytest.fixture(scope="module")
def compacted_dir(tmp_path_factory):
    """A stopped Kafka 4.4 node's directory whose compacted partition its cleaner rewrote: tombstones and an aborted
    transaction's marker stamped with delete horizons, superseded records gone (offset gaps), gzip and plain
    batches, a committed transaction."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from kafka_reference import KafkaUnavailable, ReferenceKafka

    kafka = ReferenceKafka(
        tmp_path_factory.mktemp("kafka-compacted"),
        heap="384m",
        config={"log.cleaner.backoff.ms": "200", "log.cleaner.dedupe.buffer.size": "16777216"},
    )
    try:
        kafka.start()
    except KafkaUnavailable as exc:
        kafka.close()
        reference_unavailable(str(exc))
    try:
        boot = kafka.bootstrap
        admin = AdminClient({"bootstrap.servers": boot})  # kept alive until the topic is there
        admin.create_topics([NewTopic("compacted", 1, 1, config=COMPACTED)])["compacted"].result(60)
        for r in range(6):
            p = Producer({"bootstrap.servers": boot, "linger.ms": 0, "compression.type": "gzip" if r % 2 else "none"})
            for k in range(8):
                tombstone = r == 5 and k < 3  # in the last round: nothing supersedes them
                p.produce("compacted", key=f"k{k}".encode(), value=None if tombstone else f"v{r}-{k}".encode())
            assert p.flush(60) == 0
            time.sleep(0.15)
        tp = Producer({"bootstrap.servers": boot, "transactional.id": "compacted-tx", "linger.ms": 0})
        tp.init_transactions(60)
        # the aborted transaction is not the producer's last batch (that one Kafka keeps while the producer is
        # active, and with it the marker): a committed one follows
        for i, commit in enumerate((True, False, True)):
            tp.begin_transaction()
            tp.produce("compacted", key=f"tx-{i}".encode(), value=b"v")
            assert tp.flush(60) == 0
            (tp.commit_transaction if commit else tp.abort_transaction)(60)
            time.sleep(0.15)
        # fillers roll segments until the cleaner has stamped a tombstone's batch and, a pass later, the aborted
        # transaction's marker
        filler = Producer({"bootstrap.servers": boot, "linger.ms": 0})
        deadline = time.monotonic() + 90
        n = 0
        while not _stamped_and_gapped(kafka.log_dir / "compacted-0"):
            assert time.monotonic() < deadline, (
                "Kafka's cleaner did not stamp delete horizons",
                _summary(kafka.log_dir / "compacted-0"),
            )
            filler.produce("compacted", key=b"filler", value=str(n).encode())
            n += 1
            assert filler.flush(60) == 0
            time.sleep(0.3)
    finally:
        kafka.stop()
    yield kafka.log_dir / "compacted-0"
    kafka.close()


def test_kafkawire_logs_agrees_with_dump_log_segments_on_a_compacted_partition(compacted_dir, capsys):
    files = sorted(p for p in compacted_dir.glob("*.log") if p.stat().st_size)
    theirs = _dump_log_segments(files, None)
    batches = []
    records = 0
    for path in files:
        ours = _kafkawire_dump(path, capsys)
        records += _compare(ours, theirs[os.path.realpath(path)], path, "raw")
        batches += ours
    # what the cleaner left is there, so the comparison covered it: horizons on data and control batches,
    # offset gaps, batches of both codecs
    assert {b["control"] for b in batches if b["delete_horizon_ms"] is not None} == {False, True}
    assert any(b["base_offset"] > a["last_offset"] + 1 for a, b in zip(batches, batches[1:]))
    assert {b["codec"] for b in batches} >= {"none", "gzip"}
    assert records
