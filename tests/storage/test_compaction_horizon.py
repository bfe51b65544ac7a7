"""KIP-534's delete horizon: kafkawire's cleaner and Kafka 4.4's, fed the same batches, stamp the same batches
(attribute bit 6, the horizon in the base timestamp, every record's timestamp delta taken from it) on the pass
that first keeps a tombstone, keep the tombstones until the horizon and drop them on a pass after it, ending with
the same records as the model. kafkawire's cleaner honours the horizons Kafka's cleaner stamped."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from kafka_dir import create_topics, kafka_on, kafkawire_on

from kafkawire.broker.storage import cleaner
from kafkawire.broker.storage.segments import SegmentStorage
from kafkawire.protocol import decode_response, encode_request, message_class, request_header
from kafkawire.protocol.records import build_batch, iter_batches

confluent_kafka = pytest.importorskip("confluent_kafka")

RETENTION_MS = 4000
CONFIGS = {
    "cleanup.policy": "compact",
    "segment.ms": "100",  # each batch below starts a segment (Kafka 4.4 refuses a segment.bytes below 1 MiB)
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": str(RETENTION_MS),
}
KEYS = 20
# offsets: rounds 0-4 at 0-99, round 5 (tombstones of k0-k4 among values) at 100-119, k5 and k6 tombstones at
# 120-121, fillers from 122 on
MIXED, TOMBSTONES_ONLY = 100, 120


class Sender:
    """Raw Produce v9 of prepared batches, so that both brokers store the very same batches; timestamps a second
    apart (Kafka rolls a segment by segment.ms on the records' timestamps)."""

    def __init__(self, bootstraps: list[str]):
        self.bootstraps = bootstraps
        self.ts = int(time.time() * 1000) - 600_000
        self.fillers = 0

    def _ts(self) -> int:
        self.ts += 1000
        return self.ts

    def rounds(self) -> list[bytes]:
        out = [
            build_batch([(f"k{k}".encode(), f"v{r}-{k}".encode(), [], self._ts()) for k in range(KEYS)])
            for r in range(5)
        ]
        ts = self._ts()
        out.append(
            build_batch([(f"k{k}".encode(), None if k < 5 else f"v5-{k}".encode(), [], ts) for k in range(KEYS)])
        )
        ts = self._ts()
        out.append(build_batch([(b"k5", None, [], ts), (b"k6", None, [], ts)]))
        return out

    def filler(self) -> bytes:
        self.fillers += 1
        return build_batch([(b"filler", str(self.fillers).encode(), [], self._ts())])

    def send(self, batch: bytes) -> None:
        import socket
        import struct

        R = message_class("ProduceRequest")
        body = R(
            acks=-1,
            timeout_ms=30000,
            topic_data=[R.TopicProduceData(name="h", partition_data=[R.PartitionProduceData(index=0, records=batch)])],
        )
        for bootstrap in self.bootstraps:
            host, port = bootstrap.rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=30) as s:
                s.sendall(encode_request(request_header(body.api_key, 9, 1, "horizon"), body))
                size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
                answer = decode_response(s.recv(size, socket.MSG_WAITALL), body.api_key, 9, framed=False).body
            (partition,) = answer.responses[0].partition_responses
            assert partition.error_code == 0, (bootstrap, partition)
        time.sleep(0.15)  # past segment.ms: the next batch rolls a segment on either broker


def _batches(directory: Path) -> list:
    """The partition's batches from its segment files (read while the broker runs: a swap may rename a file away
    mid-read, then read again)."""
    for _ in range(50):
        try:
            out = []
            for f in sorted(directory.glob("*.log")):
                out += list(iter_batches(f.read_bytes(), allow_partial=True))
            return out
        except FileNotFoundError:
            time.sleep(0.1)
    raise AssertionError(f"cannot read {directory}")


def _records(batches) -> list[tuple[int, int, bytes, bytes | None]]:
    out = []
    for b in batches:
        b.validate_crc()
        if not b.is_control:
            out += [(r.offset, r.timestamp, r.key, r.value) for r in b.records()]
    return out


def _at(batches, base: int):
    return next((b for b in batches if b.base_offset == base), None)


def _header(b) -> tuple:
    return (b.base_offset, b.last_offset_delta, b.attributes, b.record_count, b.max_timestamp, b.producer_id,
            b.producer_epoch, b.base_sequence)  # fmt: skip


def _as_if_stamped_at(batch, horizon: int) -> bytes:
    """``batch`` written again by kafkawire's cleaner with delete horizon ``horizon`` (all its records)."""
    data = bytes(batch)
    h = cleaner.HEADER.unpack_from(data, 0)
    payload, codec = cleaner._payload(data, 0, len(data), h[5])
    kept = [(h[7] + ts, tail, end) for _s, end, _o, ts, _k, _t, tail in cleaner._walk(payload, h[12])]
    return cleaner._rebuild(h, kept, payload, codec, horizon)


def _wait(condition, what: str, sender: Sender, seconds: float = 90):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        sender.send(sender.filler())  # a new segment: the previous one is sealed, dirty, and a pass is due
        time.sleep(0.3)


def test_delete_horizon_as_kafka_stamps_and_honours_it(tmp_path):
    wire = kafkawire_on(tmp_path / "wire", **{"log.cleaner.backoff.ms": "200"})
    try:
        kafka = kafka_on(
            tmp_path / "kafka", **{"log.cleaner.backoff.ms": "200", "log.cleaner.dedupe.buffer.size": "16777216"}
        )
    except BaseException:
        wire.stop()
        raise
    dirs = {"kafkawire": tmp_path / "wire" / "logs" / "h-0", "kafka": tmp_path / "kafka" / "logs" / "h-0"}
    try:
        for broker in (wire, kafka):
            create_topics(broker.bootstrap, {"h": (1, CONFIGS)})
        sender = Sender([wire.bootstrap, kafka.bootstrap])
        started = int(time.time() * 1000)
        for batch in sender.rounds():
            sender.send(batch)

        # the first pass that keeps a batch's tombstones stamps it, on both; the two batches may be stamped by
        # different passes (one may still be in the active segment, which no cleaner touches, when the first runs)
        def stamped():
            return all(
                (b := _at(_batches(d), base)) is not None and b.has_delete_horizon
                for d in dirs.values()
                for base in (MIXED, TOMBSTONES_ONLY)
            )

        _wait(stamped, "no delete horizon stamped", sender)
        seen = int(time.time() * 1000)
        first = {name: _batches(d) for name, d in dirs.items()}
        horizons = {}
        for name, batches in first.items():
            for base in (MIXED, TOMBSTONES_ONLY):
                b = _at(batches, base)
                assert b is not None and b.has_delete_horizon, (name, base)
                assert started + RETENTION_MS <= b.delete_horizon_ms <= seen + RETENTION_MS, (name, base)
                horizons[name, base] = b.delete_horizon_ms
            # before the horizon the tombstones are all there: k0-k4 in the mixed batch, k5 and k6 after it
            tombstones = sorted(k for _, _, k, v in _records(batches) if v is None)
            if seen < min(horizons[name, MIXED], horizons[name, TOMBSTONES_ONLY]):
                assert tombstones == [b"k0", b"k1", b"k2", b"k3", b"k4", b"k5", b"k6"], name
        for base in (MIXED, TOMBSTONES_ONLY):
            ours, theirs = _at(first["kafkawire"], base), _at(first["kafka"], base)
            assert _header(ours) == _header(theirs)
            assert _records([ours]) == _records([theirs])  # timestamps kept through the new deltas
            # the very bytes Kafka wrote, but for the horizon (each cleaner's own clock) and the partition leader
            # epoch (each broker's own; the CRC does not cover it)
            rebuilt = bytearray(_as_if_stamped_at(ours, theirs.delete_horizon_ms))
            rebuilt[12:16] = bytes(theirs)[12:16]
            assert bytes(rebuilt) == bytes(theirs)
        kafka_copy = tmp_path / "kafka-stamped"  # for kafkawire's cleaner below
        kafka_copy.mkdir()
        (kafka_copy / "00000000000000000000.log").write_bytes(b"".join(bytes(b) for b in first["kafka"]))

        # past the horizons, a pass drops the tombstones: the whole k5/k6 batch, k0-k4 out of the mixed batch,
        # which keeps its values and its horizon
        time.sleep(max(0, max(horizons.values()) - int(time.time() * 1000)) / 1000)

        def tombstones_gone():
            return all(not [k for _, _, k, v in _records(_batches(d)) if v is None] for d in dirs.values())

        _wait(tombstones_gone, "tombstones kept past their delete horizon", sender)
        model = [(MIXED + k, f"k{k}".encode(), f"v5-{k}".encode()) for k in range(7, KEYS)]
        for name, d in dirs.items():
            batches = _batches(d)
            assert [(o, k, v) for o, _, k, v in _records(batches) if k != b"filler"] == model, name
            assert _at(batches, TOMBSTONES_ONLY) is None, name
            assert _at(batches, MIXED).delete_horizon_ms == horizons[name, MIXED], name
        assert _header(_at(_batches(dirs["kafkawire"]), MIXED)) == _header(_at(_batches(dirs["kafka"]), MIXED))
    finally:
        kafka.stop()
        wire.stop()

    # kafkawire's cleaner on the batches Kafka's cleaner stamped: their horizons stand (no new stamp), the
    # tombstones stay until then and go after
    storage = SegmentStorage(tmp_path / "replay", {})
    storage.create_topic("h", 1, CONFIGS)
    directory = Path(storage.partition("h", 0).directory)
    storage.close()
    for f in directory.glob("0*"):
        f.unlink()
    shutil.copy(kafka_copy / "00000000000000000000.log", directory)
    # an empty active segment after Kafka's batches, which stay a sealed segment (a cleaned one, offsets with gaps)
    end = max(b.last_offset for b in first["kafka"]) + 1
    (directory / f"{end:020d}.log").touch()
    storage = SegmentStorage(tmp_path / "replay", {})
    try:
        plog = storage.partition("h", 0)
        work = cleaner.Cleaner(str(tmp_path / "replay"))

        def clean_at(now_ms):
            plog.append(build_batch([(b"filler", b"x", [], now_ms)]))
            plog.roll()
            assert work.clean_partition(plog, plog._settings(), now_ms=now_ms, force=True) is not None
            return list(iter_batches(b"".join(bytes(c) for c in plog.read(0, 1 << 24).chunks)))

        horizon = horizons["kafka", MIXED]
        before = clean_at(horizon - 1)
        assert _at(before, MIXED).delete_horizon_ms == horizon
        assert _at(before, TOMBSTONES_ONLY).delete_horizon_ms == horizons["kafka", TOMBSTONES_ONLY]
        assert sorted(k for _, _, k, v in _records(before) if v is None) == [f"k{k}".encode() for k in range(7)]
        after = clean_at(max(horizon, horizons["kafka", TOMBSTONES_ONLY]))
        assert [(o, k, v) for o, _, k, v in _records(after) if k != b"filler"] == model
        assert _at(after, MIXED).delete_horizon_ms == horizon and _at(after, TOMBSTONES_ONLY) is None
    finally:
        storage.close()
