"""Kafka's own FileRecords (kafka-clients 3.9) reads kafkawire's segment files."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from storage_batches import build_batch

from kafkawire.broker.storage.segments import SegmentStorage

from support.java import JavaProgram  # tests/ is on sys.path (tests/conftest.py)

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def kafka_reader():
    return JavaProgram.require(HERE / "KafkaSegmentReader.java")


def test_kafka_reads_our_segment_and_finds_what_we_find(kafka_reader, tmp_path):
    storage = SegmentStorage(tmp_path, {"log.index.interval.bytes": "300"})
    try:
        storage.create_topic("t", 1)
        log = storage.partition("t", 0)
        ts = 1_700_000_000_000
        for i in range(30):
            n = 1 + i % 4
            stamps = [ts + 10 * i + (7 * j) % 5 for j in range(n)]
            lat = ts + 10 * i + 9 if i % 5 == 4 else None
            log.append(
                build_batch([b"v" * (i * 17 % 200)] * n, timestamps=stamps, gzip_records=i % 3 == 0),
                log_append_time=lat,
            )
        end = log.log_end_offset
        segment = tmp_path / "t-0" / "00000000000000000000.log"

        offsets = list(range(end))
        targets = [ts - 1, ts, ts + 3, ts + 95, ts + 149, ts + 200, ts + 299, ts + 400]
        out = [
            line.split()
            for line in kafka_reader.run("KafkaSegmentReader", segment, len(offsets), *offsets, *targets).splitlines()
            if line
        ]
        kafka_batches = [line[1:] for line in out if line[0] == "batch"]
        kafka_positions = {int(line[1]): int(line[2]) for line in out if line[0] == "offset"}
        kafka_times = {
            int(line[1]): None if line[2] == "none" else (int(line[2]), int(line[3]))
            for line in out
            if line[0] == "time"
        }

        ours, pos, data = [], 0, segment.read_bytes()
        while pos < len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            last = base + struct.unpack_from(">i", data, pos + 23)[0]
            max_ts = struct.unpack_from(">q", data, pos + 35)[0]
            ours.append([str(pos), str(length + 12), str(base), str(last), str(max_ts)])
            pos += length + 12
        assert [b[:5] for b in kafka_batches] == ours  # Kafka validated each (CRC, magic, size)
        assert [b[5] for b in kafka_batches][4::5] == ["LogAppendTime"] * 6
        assert int(kafka_batches[-1][3]) == end - 1

        assert len(kafka_positions) == end
        for offset in offsets:
            assert log.read_regions(offset, 1).chunks[0].position == kafka_positions[offset], offset
        # our .index entries (written when the segment is sealed) are positions Kafka's own search lands on
        log.roll()
        index = list(struct.iter_unpack(">ii", (tmp_path / "t-0" / "00000000000000000000.index").read_bytes()))
        assert index and all(kafka_positions[rel] == position for rel, position in index)

        assert sorted(kafka_times) == sorted(targets)
        assert kafka_times[ts + 400] is None and kafka_times[ts + 95] is not None
        for target, expected in kafka_times.items():
            assert log.offset_for_timestamp(target) == expected, target
    finally:
        storage.close()
