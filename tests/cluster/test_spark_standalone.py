"""The example pipeline submitted to a Spark standalone cluster (a master, two workers) over the Kafka cluster.

As the README tells users: kafkawire (pure Python) goes to the executors as a zip in ``--py-files``;
the executors' Python has the binary dependencies (pyarrow, numpy, ...) but not kafkawire
(``spark_cluster.executor_python``), so the job only runs if the shipped copy is used. The executors
read and write the three brokers themselves.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import reference_unavailable

pytest.importorskip("pyspark")

pytestmark = pytest.mark.kafka_cluster

ROOT = Path(__file__).resolve().parents[2]


def kafkawire_zip(path: Path) -> Path:
    """src/kafkawire as a zip importable by zipimport, as ``--py-files`` takes it."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in sorted((ROOT / "src" / "kafkawire").rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                zf.write(file, file.relative_to(ROOT / "src"))
    return path


@pytest.fixture(scope="module")
def spark_standalone(tmp_path_factory):
    from spark_cluster import SparkStandalone, SparkUnavailable

    cluster = SparkStandalone(tmp_path_factory.mktemp("spark-standalone"), workers=2, cores=1, memory="1g")
    try:
        cluster.start()
    except SparkUnavailable as exc:
        reference_unavailable(str(exc))
    yield cluster
    cluster.stop()


def test_pipeline_on_a_standalone_cluster(kafka_cluster, spark_standalone, topic_name, tmp_path):
    from spark_cluster import executor_python, spark_submit

    python = executor_python(tmp_path / "executor-venv")
    probe = subprocess.run([python, "-c", "import kafkawire"], capture_output=True, text=True, timeout=60)
    assert probe.returncode != 0, "the executors' Python must not have kafkawire of its own"
    shipped = kafkawire_zip(tmp_path / "kafkawire.zip")
    env = {
        **os.environ,
        # the driver JVM plans a Python data source in Python workers of its own, which run PYSPARK_PYTHON
        # with the JVM's PYTHONPATH and not --py-files: the zip goes there too (README)
        "PYTHONPATH": str(shipped),
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    command = [
        spark_submit(),
        "--master",
        spark_standalone.master_url,
        "--py-files",
        str(shipped),
        "--conf",
        "spark.executor.memory=512m",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.ui.enabled=false",
        str(ROOT / "examples" / "pipeline.py"),
        "--bootstrap",
        kafka_cluster.bootstrap,
        "--master",
        spark_standalone.master_url,
        "--events",
        "3000",
        "--partitions",
        "6",
        "--topics",
        f"{topic_name}-views,{topic_name}-counts",
        "--out",
        str(tmp_path / "out"),
    ]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=420, cwd=tmp_path)
    print(run.stdout)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    assert "records in:      3000 page views" in run.stdout, run.stdout
    # the work ran in the workers' executors (their stderr logs), not in the driver
    app_dirs = list((spark_standalone.work_dir / "work").glob("app-*/*"))
    assert len(app_dirs) >= 2, app_dirs
