"""The example pipeline (examples/pipeline.py) end to end on a small input, its outputs checked."""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pipeline.py"


@pytest.fixture(scope="module")
def pipeline():
    spec = importlib.util.spec_from_file_location("kafkawire_example_pipeline", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _ms(ts) -> int:
    return int(ts.replace(tzinfo=dt.UTC).timestamp() * 1000)


def test_pipeline_outputs(spark, broker, pipeline, tmp_path):
    if broker.kind == "tansu":
        pytest.skip("Tansu (memory storage) counts batches, not records, in ListOffsets; the example batches")
    n = 2000
    suffix = uuid.uuid4().hex[:6]
    in_topic, out_topic = f"pv-{suffix}", f"pv-min-{suffix}"
    stats = pipeline.run(
        spark, broker.bootstrap, n, str(tmp_path / "out"), in_topic=in_topic, out_topic=out_topic, max_per_trigger=1000
    )
    want = pipeline.expected_windows(pipeline.generate_events(n))
    assert stats["records_in"] == n + 1  # and the watermark marker
    assert stats["micro_batches"] >= 3  # 2001 records, at most 1000 per trigger
    assert stats["late_dropped"] == 0

    rows = spark.read.parquet(str(tmp_path / "out" / "parquet")).collect()
    got = {(_ms(r.window_start), r.page): r for r in rows}
    assert len(rows) == len(got) == len(want) == stats["windows_out"]
    assert set(got) == set(want)
    for k, (views, users, total) in want.items():
        r = got[k]
        assert (r.views, r.total_duration_ms) == (views, total), k
        assert _ms(r.window_end) - _ms(r.window_start) == 60_000
        assert r.users == users, k

    topic_rows = pipeline.read_output_topic(broker.bootstrap, out_topic)
    assert len(topic_rows) == len(want) == stats["topic_windows"]
    from_topic = {
        (_ms(dt.datetime.fromisoformat(t["window_start"].replace("Z", "+00:00")).replace(tzinfo=None)), t["page"]): t[
            "views"
        ]
        for t in topic_rows
    }
    assert from_topic == {k: v[0] for k, v in want.items()}


def test_pipeline_command(tmp_path):
    """``python examples/pipeline.py --bootstrap ... --events N`` runs by itself and prints its summary."""
    out = tmp_path / "cli-out"
    env = dict(
        os.environ,
        PYSPARK_PYTHON=sys.executable,
        # the example's own JVM lives half a minute on two busy cores: C2's compile work does not pay back
        PYSPARK_SUBMIT_ARGS="--conf spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 pyspark-shell",
    )
    # a broker of its own: the example names its topics pageviews / pageviews-per-minute
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--events", "500", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "records in:      500 page views" in proc.stdout
    windows = int(proc.stdout.split("windows out:")[1].split()[0])
    assert windows > 0
    assert f"and {windows} to topic 'pageviews-per-minute'" in proc.stdout
    assert any(p.suffix == ".parquet" for p in (out / "parquet").iterdir())
