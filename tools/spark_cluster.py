#!/usr/bin/env python3
"""A Spark standalone cluster on loopback, started from the pip-installed pyspark as a user would.

``pip install pyspark`` ships ``bin/spark-class`` and ``bin/spark-submit``: a master is
``spark-class org.apache.spark.deploy.master.Master``, a worker
``spark-class org.apache.spark.deploy.worker.Worker spark://HOST:PORT`` (what ``sbin/start-master.sh``
and ``start-worker.sh`` of a Spark download run; the pip package has no ``sbin`` scripts for them).
:class:`SparkStandalone` starts one master and ``workers`` workers on 127.0.0.1 with free ports,
waits until the master lists every worker ALIVE (its web UI's ``/json``), and stops them.

:func:`executor_python` makes the Python the executors run: a virtual environment that sees the
driver environment's installed packages (pyarrow, numpy, zstandard, ...) but not kafkawire, so a
job only works if kafkawire reaches the executors the way the README says (``--py-files``).

Command line::

    python tools/spark_cluster.py serve [--workers 2]   # prints the master URL; Ctrl-C or SIGTERM stops it
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import site
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from kafkawire.testing._process import free_port, serve_until_signalled, terminate_all


class SparkUnavailable(RuntimeError):
    """The standalone cluster did not come up; says why (with the log's tail)."""


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_submit() -> str:
    return str(spark_home() / "bin" / "spark-submit")


def executor_python(directory: Path) -> str:
    """A venv in ``directory`` whose site-packages points at this environment's, without kafkawire.

    A ``.pth`` line adds the driver environment's site-packages to ``sys.path``; the ``.pth`` files
    inside it (among them kafkawire's editable install) are not processed, as Python only reads those
    of its own site directories. So the executors import pyspark and the binary dependencies from
    here, and kafkawire only from what ``spark-submit`` ships.
    """
    python = directory / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True, timeout=120)
        out = subprocess.run(
            [str(python), "-c", "import site; print(site.getsitepackages()[0])"],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        Path(out.stdout.strip(), "driver-site-packages.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return str(python)


class SparkStandalone:
    """A master and ``workers`` workers (``cores`` and ``memory`` each) on 127.0.0.1."""

    def __init__(
        self,
        work_dir: Path | str | None = None,
        *,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        host: str = "127.0.0.1",
        env: dict[str, str] | None = None,
    ):
        self.work_dir = Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix="spark-standalone-"))
        self.host = host
        self.port = free_port(host)
        self.webui_port = free_port(host)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.env = dict(env or {})
        self.procs: list[subprocess.Popen] = []

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": self.host,
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_WORKER_DIR": str(self.work_dir / "work"),
            **self.env,
        }

    def _spawn(self, name: str, *args: str) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with open(self.work_dir / f"{name}.log", "ab") as log:
            self.procs.append(
                subprocess.Popen(
                    [str(spark_home() / "bin" / "spark-class"), *args],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=self._env(),
                    cwd=self.work_dir,
                    start_new_session=True,
                )
            )

    def state(self) -> dict:
        with urllib.request.urlopen(f"http://{self.host}:{self.webui_port}/json/", timeout=2) as answer:
            return json.load(answer)

    def start(self, timeout: float = 120.0) -> SparkStandalone:
        try:
            self._spawn(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host",
                self.host,
                "--port",
                str(self.port),
                "--webui-port",
                str(self.webui_port),
            )
            for i in range(self.workers):
                self._spawn(
                    f"worker-{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    self.host,
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--webui-port",
                    str(free_port(self.host)),
                    self.master_url,
                )
            deadline = time.monotonic() + timeout
            while True:
                dead = [p for p in self.procs if p.poll() is not None]
                if dead:
                    raise SparkUnavailable(f"a Spark daemon exited with {dead[0].returncode}:\n{self.log_tail()}")
                try:
                    alive = [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]
                    if len(alive) >= self.workers:
                        return self
                except (OSError, ValueError):
                    # the master's web UI is not up yet: its port accepts before each page's handler is started,
                    # so /json/ answers 404, or the root page's HTML when the "/" handler starts first
                    pass
                if time.monotonic() > deadline:
                    raise SparkUnavailable(f"{self.workers} workers not ALIVE after {timeout:.0f}s:\n{self.log_tail()}")
                time.sleep(0.5)
        except BaseException:
            self.stop()
            raise

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for path in sorted(self.work_dir.glob("*.log")):
            out.append(f"--- {path.name}")
            out += path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(out)

    def stop(self) -> None:
        procs, self.procs = self.procs, []
        terminate_all(reversed(procs), signal.SIGTERM, 15.0)  # workers signalled first, then the master

    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a master and workers until SIGINT (Ctrl-C) or SIGTERM")
    serve.add_argument("--workers", type=int, default=2)
    serve.add_argument("--cores", type=int, default=1)
    serve.add_argument("--memory", default="1g")
    args = parser.parse_args(argv)
    cluster = SparkStandalone(workers=args.workers, cores=args.cores, memory=args.memory)
    return serve_until_signalled(cluster, lambda c: c.master_url)


if __name__ == "__main__":
    sys.exit(main())
