"""Kafka's clean-shutdown marker, ``.kafka_cleanshutdown``, written and honoured as Kafka 4.4's LogManager does.

A clean stop writes it last (``{"version":0,"brokerEpoch":N}``, after every log, index, producer snapshot and
checkpoint is on disk); a start deletes it before loading anything and, when it was there, skips recovering the
active segments: their indexes are taken as written. Kafka 4.4 starting after kafkawire's clean stop so
recovers nothing ("Skipping recovery of ... since clean shutdown file was found", no "Recovering unflushed
segment") and answers a producer's retry from kafkawire's snapshot; after a SIGKILL there is no marker and Kafka
recovers the active segment.
"""

from __future__ import annotations

import json
import os

from broker.conftest import RawClient
from idempotent_producer import TOPIC, check_continues, host_port, partition_dir, segments_broker, write_two_batches
from kafka_dir import kafka_on, kafkawire_on

from kafkawire.broker.storage import recovery

MARKER = ".kafka_cleanshutdown"


def _scans(monkeypatch) -> list[str]:
    """The segment files the full check (recovery) reads from now on."""
    scanned: list[str] = []
    real = recovery.scan_segment

    def scan(segment, *args, **kwargs):
        scanned.append(os.path.basename(segment.log_path))
        return real(segment, *args, **kwargs)

    monkeypatch.setattr(recovery, "scan_segment", scan)
    return scanned


def _fill(data_dir) -> tuple[int, int]:
    """An idempotent producer's batches at offsets 0..2 and 3..4, all in the active segment."""
    with segments_broker(data_dir) as b:
        c = RawClient(b.address)
        pid, epoch = write_two_batches(c)
        c.close()
    return pid, epoch


def test_a_clean_stop_writes_the_marker_and_the_next_start_trusts_the_active_segment(tmp_path, monkeypatch):
    pid, epoch = _fill(tmp_path)
    # Kafka's CleanShutdownFileHandler content; -1: no broker registration of node 1 in the metadata log
    assert json.loads((tmp_path / MARKER).read_text()) == {"version": 0, "brokerEpoch": -1}
    scanned = _scans(monkeypatch)
    with segments_broker(tmp_path) as b:
        assert not (tmp_path / MARKER).exists()  # deleted at start: a crash from here on is not clean
        assert scanned == []  # nothing was recovered
        c = RawClient(b.address)
        check_continues(c, pid, epoch, dup_seq=3, dup_count=2, dup_offset=3, next_seq=5, next_offset=5)
        c.close()
    assert (tmp_path / MARKER).exists()
    with segments_broker(tmp_path) as b:  # the indexes appended to after a trusted load are right for the next one too
        assert scanned == []
        c = RawClient(b.address)
        check_continues(c, pid, epoch, dup_seq=5, dup_count=1, dup_offset=5, next_seq=6, next_offset=6)
        c.close()


def test_without_the_marker_the_active_segment_is_recovered(tmp_path, monkeypatch):
    _fill(tmp_path)
    os.unlink(tmp_path / MARKER)  # what a crash leaves: the marker of the previous start was deleted then
    scanned = _scans(monkeypatch)
    with segments_broker(tmp_path):
        assert scanned == ["00000000000000000000.log"]


def test_the_marker_does_not_hide_a_torn_tail(tmp_path, monkeypatch):
    """Damage after a clean stop (the marker says the logs are whole; they are not) is still found: the batch
    headers after the last index entry must end exactly at the end of the file."""
    pid, epoch = _fill(tmp_path)
    segment = os.path.join(partition_dir(tmp_path), "00000000000000000000.log")
    size = os.path.getsize(segment)
    with open(segment, "ab") as f:
        f.write(b"\x00" * 7 + b"\x7f")
    scanned = _scans(monkeypatch)
    with segments_broker(tmp_path) as b:
        assert scanned == ["00000000000000000000.log"]
        assert os.path.getsize(segment) == size
        c = RawClient(b.address)
        check_continues(c, pid, epoch, dup_seq=3, dup_count=2, dup_offset=3, next_seq=5, next_offset=5)
        c.close()


def _kafka_log_after(tmp_path, stop) -> tuple[str, object]:
    """kafkawire serves ``tmp_path/logs`` (a process), an idempotent producer writes offsets 0..4 in the active
    segment, ``stop(broker)`` ends it; then Kafka 4.4 starts there. Kafka's log, the producer, Kafka."""
    broker = kafkawire_on(tmp_path)
    try:
        c = RawClient(host_port(broker.bootstrap), timeout=30)
        pid, epoch = write_two_batches(c)
        c.close()
    finally:
        stop(broker)
    marker = tmp_path / "logs" / MARKER
    clean = marker.exists()
    if clean:
        assert json.loads(marker.read_text()) == {"version": 0, "brokerEpoch": -1}
    kafka = kafka_on(tmp_path)
    return kafka.log_path.read_text(errors="replace"), (pid, epoch, clean), kafka


def test_kafka_starting_after_a_clean_stop_recovers_nothing(tmp_path):
    text, (pid, epoch, clean), kafka = _kafka_log_after(tmp_path, lambda b: b.stop())
    try:
        assert clean
        assert "since clean shutdown file was found" in text, text[-3000:]
        assert f"for {TOPIC}-0" not in _recovering(text), text[-3000:]
        c = RawClient(host_port(kafka.bootstrap), timeout=30)
        # the producer's state comes from kafkawire's snapshot at the log end: its retry is a duplicate
        check_continues(c, pid, epoch, dup_seq=3, dup_count=2, dup_offset=3, next_seq=5, next_offset=5)
        c.close()
    finally:
        kafka.stop()
    assert json.loads((tmp_path / "logs" / MARKER).read_text())["version"] == 0  # Kafka's own, on its stop


def test_kafka_starting_after_a_kill_recovers_the_active_segment(tmp_path):
    text, (pid, epoch, clean), kafka = _kafka_log_after(tmp_path, lambda b: b.kill())
    try:
        assert not clean
        assert "since no clean shutdown file was found" in text, text[-3000:]
        assert f"for {TOPIC}-0" in _recovering(text), text[-3000:]
        c = RawClient(host_port(kafka.bootstrap), timeout=30)
        check_continues(c, pid, epoch, dup_seq=3, dup_count=2, dup_offset=3, next_seq=5, next_offset=5)
        c.close()
    finally:
        kafka.stop()


def _recovering(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if "Recovering unflushed segment" in line)
