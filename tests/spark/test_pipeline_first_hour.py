"""examples/pipeline.py for a newcomer: Java checked first, output kept (and replaced only when its own), broker
data removed. No Spark session here: these run the script's pieces and the script up to its Java check."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pipeline.py"


@pytest.fixture(scope="module")
def pipeline():
    spec = importlib.util.spec_from_file_location("kafkawire_example_pipeline_first_hour", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fake_java(tmp_path: Path, version_line: str) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(0o755)
    return home


def test_no_java_at_all_says_how_to_get_one(pipeline, monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on it
    problem = pipeline.java_problem()
    assert "JAVA_HOME is not set" in problem and "no java on PATH" in problem
    assert "apt-get install openjdk-17" in problem and "brew install openjdk@17" in problem


def test_java_home_pointing_nowhere(pipeline, monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "missing"))
    assert f"JAVA_HOME is {tmp_path / 'missing'}" in pipeline.java_problem()


def test_old_java_is_refused_and_new_java_accepted(pipeline, monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path / "8", 'openjdk version "1.8.0_392"')))
    assert "is Java 8; this Spark needs 17 or later" in pipeline.java_problem()
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path / "11", 'openjdk version "11.0.2" 2019-01-15')))
    assert "is Java 11" in pipeline.java_problem()
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path / "21", 'openjdk version "21.0.1" 2023-10-17')))
    assert pipeline.java_problem() is None


def test_script_stops_before_anything_when_java_is_missing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--events", "10", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "Spark needs a Java runtime" in proc.stderr
    assert not (tmp_path / "out").exists()  # nothing started, nothing made


def test_output_dir_is_replaced_only_when_the_script_made_it(pipeline, tmp_path):
    out = pipeline.prepare_out_dir(str(tmp_path / "o"))
    (out / "parquet").mkdir()
    (out / "parquet" / "old.parquet").write_bytes(b"x")
    again = pipeline.prepare_out_dir(str(out))  # the next run: its own directory, emptied
    assert again == out and sorted(p.name for p in out.iterdir()) == [pipeline.OUT_MARK]
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep")
    with pytest.raises(SystemExit, match="not made by this script"):
        pipeline.prepare_out_dir(str(foreign))
    assert (foreign / "precious.txt").read_text() == "keep"


def test_started_broker_removes_its_data_when_stopped(pipeline):
    b = pipeline.start_broker()
    try:
        assert b.storage == "segments" and b.data_dir.is_dir()
        data = b.data_dir
    finally:
        b.stop()
    assert not data.exists()
