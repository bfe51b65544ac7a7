"""The Apache Kafka Java client against the broker: idempotent producer, assigned consumer, Admin
(create, describe cluster/topics/configs, delete, list offsets).

Two client releases: 3.9.1 (the last 3.x) and the reference release's own
kafka-clients (4.x takes newer protocol paths). ``tests/peers/java/KafkawirePeer.java``
is compiled once per session and client (see ``tests/support/java.py``);
everything it produced and read back is checked here, and read back once more
with librdkafka.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kafka_pins
from .peer_harness import Rec, assert_readback, by_partition, confluent_consume, end_offsets, make_records
from support.java import JavaProgram

pytestmark = pytest.mark.timeout(180)

SOURCE = Path(__file__).resolve().parent / "java" / "KafkawirePeer.java"


def _hex(data: bytes | None) -> str:
    return "-" if data is None else data.hex()


def _unhex(text: str) -> bytes | None:
    return None if text == "-" else bytes.fromhex(text)


def encode_input(records: list[Rec]) -> str:
    lines = []
    for r in records:
        headers = ",".join(f"{k.encode().hex()}={_hex(v)}" for k, v in r.headers)
        lines.append(f"{r.partition}\t{_hex(r.key)}\t{_hex(r.value)}\t{r.timestamp}\t{headers}")
    return "\n".join(lines) + "\n"


def parse_records(lines) -> list[tuple[int, Rec]]:
    got = []
    for p, offset, ts, ts_type, key, value, headers in lines:
        assert ts_type == "CreateTime", (p, offset, ts_type)
        hs = tuple(
            (bytes.fromhex(k).decode(), _unhex(v))
            for k, v in (pair.split("=", 1) for pair in headers.split(",") if pair)
        )
        got.append((int(offset), Rec(int(p), _unhex(key), _unhex(value), hs, int(ts))))
    return got


@pytest.fixture(scope="module", params=[None, kafka_pins.BROKER], ids=["clients-3.9.1", f"clients-{kafka_pins.KAFKA}"])
def java_peer(request):
    return JavaProgram.require(SOURCE, clients=request.param)


@pytest.mark.tansu_gap("ListOffsets latest is the last batch's base offset + 1")
@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_idempotent_producer_assign_consumer_and_admin(broker, topic, java_peer, compression):
    partitions = 3
    records = make_records(300, partitions, seed=400 + len(compression))
    middle = by_partition(records)[2][30]
    out = java_peer.run(
        "KafkawirePeer",
        broker.bootstrap,
        topic,
        partitions,
        compression,
        middle.timestamp,
        input=encode_input(records),
        timeout=150,
    )
    lines = [line.split("\t") for line in out.splitlines() if line]
    kinds = {}
    for fields in lines:
        kinds.setdefault(fields[0], []).append(fields[1:])

    assert kinds["created"] == [[]]
    assert kinds["exists"] == [["TopicExistsException"]]
    ((cluster_id, node, host, port, controller),) = kinds["cluster"]
    assert cluster_id and (host, int(port)) == (broker.host, broker.port)
    assert int(node) >= 0 and controller == node
    assert kinds["partition"] == [[str(p), node, node, node] for p in range(partitions)]
    configs = {name: (value, source) for name, value, source in kinds["config"]}
    assert configs["retention.ms"] == ("5400000", "DYNAMIC_TOPIC_CONFIG")
    assert configs["cleanup.policy"][0] == "delete" and configs["cleanup.policy"][1] != "DYNAMIC_TOPIC_CONFIG"
    assert kinds["scratch-listed-after-delete"] == [["false"]]

    delivered = [(int(p), int(o)) for i, p, o, ts in kinds["delivered"]]
    assert [int(i) for i, *_ in kinds["delivered"]] == list(range(len(records)))
    assert [int(ts) for *_, ts in kinds["delivered"]] == [r.timestamp for r in records]

    got = parse_records(kinds["record"])
    assert_readback(records, got, delivered=delivered)

    ends = end_offsets(records, partitions)
    index = records.index(middle)
    for p, earliest, latest, found, found_ts in kinds["offsets"]:
        p = int(p)
        assert (int(earliest), int(latest)) == (0, ends[p])
        if p == 2:
            assert (int(found), int(found_ts)) == (delivered[index][1], middle.timestamp) == (30, middle.timestamp)

    # librdkafka reads the Java client's batches back identically.
    assert_readback(records, confluent_consume(broker.bootstrap, topic, partitions, len(records)), delivered=delivered)


@pytest.mark.parametrize("codec", ["gzip", "snappy"])
def test_consumer_reads_what_librdkafka_produced(broker, topic, java_peer, codec):
    from .peer_harness import confluent_create_topic, confluent_produce

    partitions = 3
    confluent_create_topic(broker.bootstrap, topic, partitions)
    records = make_records(250, partitions, seed=420 + len(codec))
    delivered = confluent_produce(broker.bootstrap, topic, records, {"compression.type": codec})
    out = java_peer.run("KafkawirePeer", "consume", broker.bootstrap, topic, partitions, len(records), timeout=120)
    lines = [line.split("\t")[1:] for line in out.splitlines() if line.startswith("record\t")]
    assert_readback(records, parse_records(lines), delivered=delivered)
