"""``kafkawire check DATA_DIR``: finds an injected flip (and a broken index) offline, exits non-zero on damage."""

from __future__ import annotations

import json
import subprocess
import sys

from storage_batches import build_batch

from kafkawire.broker.storage.segments import SegmentStorage
from kafkawire.cli.main import main

PROPS = {"log.segment.bytes": "1000", "log.index.interval.bytes": "100"}


def _data(tmp_path):
    data_dir = tmp_path / "data"
    storage = SegmentStorage(data_dir, PROPS)
    storage.create_topic("t", 2)
    for p in range(2):
        for i in range(12):
            storage.partition("t", p).append(build_batch([b"p%d-%03d-" % (p, i) + b"v" * 100]))
    storage.close()
    return data_dir


def _run(capsys, *argv):
    code = main(["check", *argv])
    return code, capsys.readouterr().out


def test_a_clean_data_dir_passes(tmp_path, capsys):
    data_dir = _data(tmp_path)
    code, out = _run(capsys, str(data_dir))
    assert code == 0, out
    assert "2 partitions checked, 0 damaged" in out


def test_an_injected_flip_is_found_and_reported(tmp_path, capsys):
    data_dir = _data(tmp_path)
    seg = sorted((data_dir / "t-1").glob("*.log"))[1]
    where = 150
    data = seg.read_bytes()
    with open(seg, "r+b") as f:
        f.seek(where)
        f.write(bytes([data[where] ^ 0x01]))
    code, out = _run(capsys, str(data_dir), "--json")
    assert code == 1
    report = json.loads(out)
    assert report["damaged"] is True
    by_name = {r["partition"]: r for r in report["partitions"]}
    assert by_name["t-0"]["problems"] == []
    [problem] = by_name["t-1"]["problems"]
    assert problem["kind"] == "corrupt-batch" and problem["file"] == str(seg)
    assert problem["position"] <= where < problem["position"] + problem["length"]
    assert "CRC" in problem["detail"]
    assert seg.read_bytes()[where] != data[where]  # nothing repaired: check only reads
    code, out = _run(capsys, str(data_dir))
    assert code == 1 and "t-1: DAMAGED" in out and "t-0: ok" in out


def test_an_index_pointing_nowhere_is_damage(tmp_path, capsys):
    data_dir = _data(tmp_path)
    index = sorted((data_dir / "t-0").glob("*.index"))[0]
    entries = bytearray(index.read_bytes())
    assert len(entries) >= 8
    entries[7] ^= 0x04  # the first entry's position moves off its batch
    index.write_bytes(bytes(entries))
    code, out = _run(capsys, str(data_dir))
    assert code == 1
    assert "index" in out and str(index) in out


def test_not_a_data_dir_is_a_usage_error(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "kafkawire.cli.main", "check", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "not a kafkawire data directory" in r.stderr
