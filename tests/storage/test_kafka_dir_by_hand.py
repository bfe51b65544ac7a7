"""A data directory laid out by hand, as a tool that writes a KRaft metadata log and partition logs directly
would lay it out (no kafkawire and no Kafka involved): ``server.properties`` naming it in ``log.dirs``,
``__cluster_metadata-0`` with a few topics, partition directories with batches. ``kafkawire serve`` serves
those topics (DescribeTopicPartitions, Fetch by topic id, Produce), and the partition files it appends to stay
valid for Kafka's own reader."""

from __future__ import annotations

import base64
import socket
import struct
import sys
import uuid
from pathlib import Path

from storage_batches import build_batch

from kafkawire.broker.storage.kraft import records
from kafkawire.protocol import decode_response, encode_request, message_class, request_header
from kafkawire.protocol.records import build_batch as build_records, iter_batches
from kafkawire.testing._process import BrokerProcess

from support.java import JavaProgram

HERE = Path(__file__).parent
TOPICS = {"clicks": (uuid.UUID("11111111-2222-3333-4444-555555555555"), 2), "views": (uuid.uuid4(), 1)}
DIRECTORY_ID = uuid.UUID("99999999-8888-7777-6666-555555555555")


def b64(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def lay_out(log_dir: Path) -> dict[tuple[str, int], list[bytes]]:
    log_dir.mkdir(parents=True)
    (log_dir / "meta.properties").write_text(
        f"node.id=1\ndirectory.id={b64(DIRECTORY_ID)}\nversion=1\ncluster.id=aGFuZC1tYWRlLWNsdXN0\n"
    )
    body = []
    for name, (topic_id, partitions) in TOPICS.items():
        body.append(records.new("TopicRecord", name=name, topic_id=topic_id))
        body.append(records.new("ConfigRecord", resource_type=2, resource_name=name, name="retention.ms", value="-1"))
        body += [
            records.new(
                "PartitionRecord",
                partition_id=p,
                topic_id=topic_id,
                replicas=[1],
                isr=[1],
                leader=1,
                directories=[DIRECTORY_ID],
            )
            for p in range(partitions)
        ]
    meta = log_dir / "__cluster_metadata-0"
    meta.mkdir()
    encoded = [(None, records.encode(m)) for m in body]
    (meta / "00000000000000000000.log").write_bytes(build_records(encoded, base_offset=0, partition_leader_epoch=1))
    written = {}
    for name, (topic_id, partitions) in TOPICS.items():
        for p in range(partitions):
            d = log_dir / f"{name}-{p}"
            d.mkdir()
            (d / "partition.metadata").write_text(f"version: 0\ntopic_id: {b64(topic_id)}\n")
            values = [f"{name}-{p}-{i}".encode() for i in range(5)]
            (d / "00000000000000000000.log").write_bytes(
                build_batch(values[:3], base_offset=0) + build_batch(values[3:], base_offset=3)
            )
            written[(name, p)] = values
    return written


def call(address, body, version):
    with socket.create_connection(address, timeout=10) as s:
        s.sendall(encode_request(request_header(body.api_key, version, 7, "by-hand"), body))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
    return decode_response(data, body.api_key, version, framed=False).body


def values_of(record_set) -> list[bytes]:
    return [r.value for b in iter_batches(bytes(record_set or b"")) for r in b.decode_records()]


def test_kafkawire_serves_a_directory_laid_out_by_hand(tmp_path):
    written = lay_out(tmp_path / "logs")
    props = tmp_path / "server.properties"
    props.write_text(f"node.id=1\nprocess.roles=broker,controller\nlog.dirs={tmp_path / 'logs'}\n")
    broker = BrokerProcess(
        lambda bootstrap: [sys.executable, "-m", "kafkawire", "serve", str(props), "--listen", bootstrap],
        tmp_path / "broker.log",
    )
    broker.start()
    try:
        address = (broker.host, broker.port)
        D = message_class("DescribeTopicPartitionsRequest")
        answer = call(address, D(topics=[D.TopicRequest(name=n) for n in TOPICS], response_partition_limit=100), 0)
        described = {t.name: (t.error_code, t.topic_id, len(t.partitions)) for t in answer.topics}
        assert described == {name: (0, tid, parts) for name, (tid, parts) in TOPICS.items()}

        F = message_class("FetchRequest")
        fetch = F(
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            topics=[
                F.FetchTopic(
                    topic_id=tid,
                    partitions=[
                        F.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20) for p in range(n)
                    ],
                )
                for tid, n in TOPICS.values()
            ],
        )
        answer = call(address, fetch, 16)
        got = {}
        ids = {tid: name for name, (tid, _) in TOPICS.items()}
        for t in answer.responses:
            for p in t.partitions:
                assert p.error_code == 0 and p.high_watermark == 5
                got[(ids[t.topic_id], p.partition_index)] = values_of(p.records)
        assert got == written

        P = message_class("ProduceRequest")
        produce = P(
            acks=-1,
            timeout_ms=10000,
            topic_data=[
                P.TopicProduceData(
                    name="clicks",
                    partition_data=[P.PartitionProduceData(index=1, records=build_batch([b"more", b"again"]))],
                )
            ],
        )
        (topic,) = call(address, produce, 12).responses
        (part,) = topic.partition_responses
        assert (part.error_code, part.base_offset) == (0, 5)
    finally:
        broker.stop()

    segment = tmp_path / "logs" / "clicks-1" / "00000000000000000000.log"
    reader = JavaProgram.require(HERE / "KafkaSegmentReader.java")
    out = reader.run("KafkaSegmentReader", str(segment), 3, "0", "3", "5")
    batches = [line.split() for line in out.splitlines() if line.startswith("batch ")]
    assert [(b[3], b[4]) for b in batches] == [("0", "2"), ("3", "4"), ("5", "6")]  # every batch ensureValid()
    assert values_of(segment.read_bytes()) == written[("clicks", 1)] + [b"more", b"again"]
