"""The example pipeline submitted to a Spark standalone cluster (a master, two workers) over the Kafka cluster.

As the README tells users: kafkawire (pure Python) goes to the executors as a zip in ``--py-files``;
the executors' Python has the binary dependencies (pyarrow, numpy, ...) but not kafkawire
(``spark_cluster.executor_python``), so the job only runs if the shipped copy is used. The executors
read and write the three brokers themselves.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from conftest import reference_unavailable

pytest.importorskip("pyspark")

# a Spark application (a JVM, Python workers) beside three Kafka JVMs on two cores: minutes, not seconds
pytestmark = [pytest.mark.kafka_cluster, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
# every JVM here (master, workers, drivers, executors) lives a minute at most on two busy cores: C2's compile work
# does not pay back in that time
QUICK_JVM = "-XX:TieredStopAtLevel=1"


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

    cluster = SparkStandalone(
        tmp_path_factory.mktemp("spark-standalone"),
        workers=2,
        cores=1,
        memory="1g",
        env={"SPARK_DAEMON_JAVA_OPTS": QUICK_JVM},
    )
    try:
        cluster.start()
    except SparkUnavailable as exc:
        reference_unavailable(str(exc))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def executor_venv(tmp_path_factory) -> str:
    """The executors' Python (a venv without kafkawire), made once for the module's submits."""
    from spark_cluster import executor_python

    return executor_python(tmp_path_factory.mktemp("spark-executor") / "executor-venv")


def submit_env(tmp_path: Path, python: str) -> tuple[Path, dict]:
    """(the kafkawire zip, spark-submit's environment) with executors whose Python lacks kafkawire."""
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
    return shipped, env


def submit_command(spark_standalone, shipped: Path | None, *extra: str) -> list[str]:
    from spark_cluster import spark_submit

    return [
        spark_submit(),
        "--master",
        spark_standalone.master_url,
        *(["--py-files", str(shipped)] if shipped is not None else []),
        "--conf",
        "spark.executor.memory=512m",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        f"spark.driver.extraJavaOptions={QUICK_JVM}",
        "--conf",
        f"spark.executor.extraJavaOptions={QUICK_JVM}",
        # a Python worker's socket to the JVM times out after 15 s by default, too short on two busy cores
        "--conf",
        "spark.python.authenticate.socketTimeout=120s",
        *extra,
    ]


def test_pipeline_on_a_standalone_cluster(kafka_cluster, spark_standalone, executor_venv, topic_name, tmp_path):
    shipped, env = submit_env(tmp_path, executor_venv)
    command = [
        *submit_command(spark_standalone, shipped),
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


# ----------------------------------------------------------------------------------------------------------
# executors reach the brokers themselves: the kernel's byte counters of every TCP connection to a broker


def _writable_cgroup2() -> tuple[Path, Path] | None:
    """(the cgroup v2 mount, the cgroup this process is in) if new cgroups can be made there and ``ss``
    reports sockets' cgroups (iproute2 5.x and later)."""
    try:
        mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
        mine = next(
            line.split("::", 1)[1]
            for line in Path("/proc/self/cgroup").read_text().splitlines()
            if line.startswith("0::")
        )
    except (OSError, StopIteration):
        return None
    for fields in mounts:
        if len(fields) > 2 and fields[2] == "cgroup2":
            here = Path(fields[1]) / mine.lstrip("/")
            usage = subprocess.run(["ss", "--help"], capture_output=True, text=True)
            if os.access(here, os.W_OK) and "--cgroup" in usage.stdout + usage.stderr:
                return Path(fields[1]), here
    return None


class BrokerTraffic:
    """Bytes the processes under ``roots`` received from and sent to the brokers, from the kernel's TCP
    counters (``ss -i``).

    ``ss -tieHE`` reports every connection as it is destroyed (those to a broker port are kept), with its final
    ``bytes_received``/``bytes_sent``; a sampler lists the connections still open (``ss -tieH``: counters so
    far and socket inode) every 10 ms and, when a new inode appears, finds which process holds it among the
    descendants of ``roots`` (a role name to root pids; the caller may add roots while it runs). A connection
    no sample saw open counts as "unknown"; one held by no process under a root as "other".

    Where the cgroup v2 hierarchy is writable (root in this sandbox and CI), each root gets a cgroup of its own
    (``enclose``) that its later children inherit, and the kernel reports the cgroup that created each socket in
    the same listing (``ss --cgroup``): a connection is attributed the first time a sample sees it, with no scan
    of /proc racing its close. That scan (seconds under a load average of 20) missed every short-lived planning
    connection of the driver in one CI run; it remains the way for a machine without a writable cgroup2.
    """

    def __init__(self, ports: list[int], roots: dict[str, set[int]]):
        self.ports = ports
        self.roots = roots
        self.filter = "( " + " or ".join(f"dport = :{p}" for p in ports) + " )"
        self.conns: dict[tuple[str, str], dict] = {}
        self.parents: dict[int, int] = {}
        self.port_names = {str(p) for p in ports}
        self.owner_cache: dict[int, tuple[int, str, int]] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.events: subprocess.Popen | None = None
        self.threads: list[threading.Thread] = []
        self.cgroup_mount, self.cgroup_root = _writable_cgroup2() or (None, None)
        self.cgroups: dict[str, tuple[str, int]] = {}  # ss's cgroup path: (role, root pid)

    def enclose(self, role: str, pid: int) -> None:
        """Moves the running process ``pid`` into a cgroup of its own, as a root of ``role``; the children it
        starts from now on are in it too. Without a writable cgroup2 only the process scan attributes."""
        self.roots[role].add(pid)
        if self.cgroup_root is None:
            return
        group = self.cgroup_root / f"kafkawire-traffic-{os.getpid()}-{pid}"
        group.mkdir()
        self.cgroups["/" + group.relative_to(self.cgroup_mount).as_posix()] = (role, pid)
        (group / "cgroup.procs").write_text(str(pid))

    def enclosed(self, role: str, command: list[str]) -> list[str]:
        """``command`` started inside a new cgroup of ``role`` before it runs (so before any socket or child),
        through a shell that moves itself and execs it: the pid stays the command's."""
        if self.cgroup_root is None:
            return command
        group = self.cgroup_root / f"kafkawire-traffic-{os.getpid()}-{role}-{len(self.cgroups)}"
        group.mkdir()
        self.cgroups["/" + group.relative_to(self.cgroup_mount).as_posix()] = (role, 0)
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(group), *command]

    def started(self, role: str, pid: int) -> None:
        """The pid of a command from ``enclosed``: its root pid."""
        self.roots[role].add(pid)
        for path, (r, root) in list(self.cgroups.items()):
            if r == role and root == 0:
                self.cgroups[path] = (role, pid)

    def _release_cgroups(self) -> None:
        """Every process still in one of our cgroups goes back to the top one, and the cgroups are removed."""
        if self.cgroup_root is None:
            return
        for path in self.cgroups:
            group = self.cgroup_mount / path.lstrip("/")
            for _ in range(50):
                try:
                    for pid in (group / "cgroup.procs").read_text().split():
                        try:
                            (self.cgroup_root / "cgroup.procs").write_text(pid)
                        except OSError:
                            pass  # exited meanwhile
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)  # a process forked while the list was read: again

    @staticmethod
    def _parse(text: str):
        """(local, peer, inode, bytes_received, bytes_sent, cgroup) per connection of ``ss -tieH`` output."""
        main = None
        for line in text.splitlines():
            if not line.strip():
                continue
            if not line[0].isspace():
                main = line
                continue
            if main is None:
                continue
            fields = main.split()
            inode = re.search(r"\bino:(\d+)", main)
            received = re.search(r"bytes_received:(\d+)", line)
            sent = re.search(r"bytes_sent:(\d+)", line)
            cgroup = re.search(r"\bcgroup:(\S+)", main)
            if len(fields) >= 5:
                yield (
                    fields[3],
                    fields[4],
                    int(inode.group(1)) if inode else 0,
                    int(received.group(1)) if received else 0,
                    int(sent.group(1)) if sent else 0,
                    cgroup.group(1) if cgroup else None,
                )
            main = None

    def _owners(self) -> dict[int, tuple[int, str, int]]:
        """{socket inode: (pid, role, root pid)} of the processes descending from the roots."""
        parent: dict[int, int] = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                pid = int(name)
                if pid not in self.parents:  # a process keeps its parent (or init): read once, the scan stays fast
                    try:
                        stat = Path(f"/proc/{pid}/stat").read_text()
                    except OSError:
                        continue
                    self.parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
                parent[pid] = self.parents[pid]
        owners = {}
        for pid in parent:
            role, p, seen = None, pid, 0
            while p > 1 and role is None and seen < 64:
                role = next((r for r, pids in list(self.roots.items()) if p in pids), None)
                root, p, seen = p, parent.get(p, 0), seen + 1
            if role is None:
                continue
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    owners[int(target[8:-1])] = (pid, role, root)
        return owners

    def _record(self, text: str, owners: dict | None = None) -> None:
        with self.lock:
            for local, peer, inode, received, sent, cgroup in self._parse(text):
                if peer.rsplit(":", 1)[-1] not in self.port_names:  # the events list every socket (and "*:*")
                    continue
                c = self.conns.setdefault(
                    (local, peer),
                    {"pid": None, "role": "unknown", "root": None, "received": 0, "sent": 0, "unowned": 0},
                )
                if self.cgroups and cgroup is not None and c["role"] == "unknown":
                    # the kernel names the creator's cgroup; every process under a root is in one of ours
                    c["role"], c["root"] = self.cgroups.get(cgroup, ("other", None))
                elif owners is not None and c["pid"] is None and not self.cgroups:
                    if inode in owners:
                        c["pid"], c["role"], c["root"] = owners[inode]
                    else:
                        # no process under a root holds it: a broker's replica fetcher, the test's own client
                        # (seen twice: one that closed between the listing and the process scan is unknown)
                        c["unowned"] += 1
                        if c["unowned"] >= 2:
                            c["role"] = "other"
                c["received"] = max(c["received"], received)
                c["sent"] = max(c["sent"], sent)

    def _open(self) -> str:
        cgroup = ["--cgroup"] if self.cgroups else []
        return subprocess.run(["ss", "-tieH", *cgroup, self.filter], capture_output=True, text=True).stdout

    def _sample(self) -> None:
        while not self.stopping.is_set():
            listed = self._open()
            if self.cgroups:  # attributed from the listing itself
                self._record(listed)
                self.stopping.wait(0.01)
                continue
            inodes = {inode for _l, _p, inode, _r, _s, _c in self._parse(listed) if inode}
            if inodes - self.owner_cache.keys():
                # a new connection: find its process (a scan of /proc, so only then); one listed before the
                # scan and still open after it is held by a scanned fd
                self.owner_cache = self._owners()
            self._record(listed, self.owner_cache)
            self.stopping.wait(0.01)

    def _follow(self) -> None:
        buf = []
        for line in self.events.stdout:
            if line.strip() and not line[0].isspace() and buf:
                self._record("".join(buf))
                buf = []
            buf.append(line)
        if buf:
            self._record("".join(buf))

    def __enter__(self) -> BrokerTraffic:
        for role, pids in list(self.roots.items()):
            for pid in list(pids):
                self.enclose(role, pid)
        # no filter: ss reports no destroyed socket at all when given one (iproute2 6.x)
        self.events = subprocess.Popen(["ss", "-tieHE"], stdout=subprocess.PIPE, text=True)
        self.threads = [threading.Thread(target=self._sample, daemon=True), threading.Thread(target=self._follow)]
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        time.sleep(0.3)  # the last destroy events
        self.events.terminate()
        self.events.wait(10)
        for t in self.threads:
            t.join(10)
        self._record(self._open(), None if self.cgroups else self._owners())
        self._release_cgroups()

    def totals(self) -> dict[str, dict]:
        """{role: {"received", "sent", "pids", "roots", "peers"}}, with "other" (a process under no root: the
        brokers' replication, the test's producer) and "unknown" (a connection no sample saw open)."""
        out = {
            r: {"received": 0, "sent": 0, "pids": set(), "roots": set(), "peers": set()}
            for r in (*self.roots, "other", "unknown")
        }
        with self.lock:
            for (_local, peer), c in self.conns.items():
                row = out[c["role"]]
                row["received"] += c["received"]
                row["sent"] += c["sent"]
                if c["pid"]:
                    row["pids"].add(c["pid"])
                if c["root"]:
                    row["roots"].add(c["root"])
                row["peers"].add(int(peer.rsplit(":", 1)[1]))
        return out


# the job: a batch read aggregated on the executors, then a batch write of generated rows
TRAFFIC_JOB = """
import json, sys
from pyspark.sql import SparkSession, functions as F
from kafkawire.spark import register

bootstrap, source, target, n, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
spark = SparkSession.builder.appName("kafkawire-traffic").getOrCreate()
register(spark)
count, total = (
    spark.read.format("kafkawire").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source).load()
    .agg(F.count("*"), F.sum(F.length("value"))).first()
)
(
    spark.range(n, numPartitions=2)
    .selectExpr("CAST(id AS STRING) AS key", f"CAST(repeat('w', {size}) AS BINARY) AS value")
    .write.format("kafkawire").mode("append")
    .option("kafka.bootstrap.servers", bootstrap).option("topic", target).save()
)
print("TRAFFIC " + json.dumps({"count": count, "bytes": total}), flush=True)
spark.stop()
"""


def test_executors_exchange_the_records_with_the_brokers_not_the_driver(
    kafka_cluster, spark_standalone, executor_venv, topic_name, tmp_path
):
    """The record bytes of a batch read and a batch write flow between the executors' processes and the
    three brokers; the driver's connections carry only metadata and offset look-ups. Counted by the kernel
    per connection and attributed per process: descendants of spark-submit (the driver JVM, the driver's
    Python and its data source planners) or of the two Spark workers (executor JVMs, their Python workers)."""
    from confluent_kafka import Producer

    from .test_client import create

    n, size = 20_000, 1_000
    source, target = f"{topic_name}-src", f"{topic_name}-dst"
    create(kafka_cluster, source, 3)  # one partition per broker: long reads, each sampled while open
    create(kafka_cluster, target)
    p = Producer({"bootstrap.servers": kafka_cluster.bootstrap, "acks": "all", "linger.ms": 20})
    for i in range(n):
        p.produce(source, os.urandom(size), key=b"%d" % i)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    data = n * size

    shipped, env = submit_env(tmp_path, executor_venv)
    job = tmp_path / "traffic_job.py"
    job.write_text(TRAFFIC_JOB)
    command = [
        *submit_command(spark_standalone, shipped),
        str(job),
        kafka_cluster.bootstrap,
        source,
        target,
        str(n),
        str(size),
    ]
    ports = [node.port for node in kafka_cluster.nodes]
    workers = {proc.pid for proc in spark_standalone.procs[1:]}  # procs[0] is the master
    roles = {"executor": workers, "driver": set()}
    with BrokerTraffic(ports, roles) as traffic:
        driver = subprocess.Popen(
            traffic.enclosed("driver", command),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        traffic.started("driver", driver.pid)
        out, err = driver.communicate(timeout=420)
    assert driver.returncode == 0, out[-3000:] + err[-5000:]
    assert f'TRAFFIC {{"count": {n}, "bytes": {data}}}' in out, out
    t = traffic.totals()
    print({role: {k: (sorted(v) if isinstance(v, set) else v) for k, v in row.items()} for role, row in t.items()})
    # the records came to executor processes, from all three brokers, and went from executor processes to them.
    # A connection no sample saw open counts as "unknown": with load averages of 12-30 on the two cores, one
    # partition's read (a third of the data) was missed in some runs. So: the executors' attributed share is most
    # of the data, and with the unknown all of it (protocol bytes on top); through the driver it would be ~0.
    assert t["executor"]["received"] >= 0.5 * data and t["executor"]["sent"] >= 0.5 * data, t
    assert t["executor"]["received"] + t["unknown"]["received"] >= data, t
    assert t["executor"]["sent"] + t["unknown"]["sent"] >= data, t
    assert t["executor"]["peers"] == set(ports), t
    # ... in both workers' executors (the JVMs that are children of the workers, or their Python workers)
    assert t["executor"]["roots"] == workers, t
    # the driver side only planned: metadata and offsets, a few kilobytes beside the 20 MB each way
    assert t["driver"]["received"] < 0.02 * data and t["driver"]["sent"] < 0.02 * data, t
    assert t["driver"]["received"] > 0, "the driver plans with the brokers' metadata and offsets"


ARCHIVE_JOB = """
import json, sys
from pyspark.sql import SparkSession
from kafkawire.spark import register

spark = SparkSession.builder.appName("kafkawire-archive-route").getOrCreate()
register(spark)
df = spark.read.format("kafkawire").option("kafka.bootstrap.servers", sys.argv[1]).option("subscribe", sys.argv[2])
count = df.load().count()
where = spark.sparkContext.parallelize(range(2), 2).map(lambda _: __import__("kafkawire").__file__).collect()
print("ARCHIVE " + json.dumps({"count": count, "executors": sorted(set(where))}), flush=True)
spark.stop()
"""


def test_virtualenv_archive_route(kafka_cluster, spark_standalone, topic_name, tmp_path):
    """The README's other route to the executors: kafkawire inside a virtual environment shipped with
    ``--archives venv.tar.gz#environment`` and ``PYSPARK_PYTHON=./environment/bin/python``, no ``--py-files``
    and no ``PYTHONPATH``. In client mode the driver JVM plans a Python data source with ``PYSPARK_PYTHON``
    in its own working directory, so the archive is unpacked there too (README); without that copy the job
    fails with ``Cannot run program "./environment/bin/python"``.

    The environment holds kafkawire; its binary dependencies come from this environment's site-packages
    through a ``.pth`` line (what ``venv-pack`` would copy in, hundreds of megabytes, on a real cluster)."""
    import tarfile

    from kafkawire.client import Producer

    from .test_client import create

    create(kafka_cluster, topic_name)
    with Producer(kafka_cluster.bootstrap) as p:
        for i in range(100):
            p.produce(topic_name, b"v%d" % i)
        p.flush(60)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site_packages = next((venv / "lib").glob("python3*/site-packages"))
    (site_packages / "driver-site-packages.pth").write_text("\n".join(__import__("site").getsitepackages()) + "\n")
    with zipfile.ZipFile(kafkawire_zip(tmp_path / "kafkawire.zip")) as zf:
        zf.extractall(site_packages)
    archive = tmp_path / "venv.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(venv, arcname=".")
    submit_dir = tmp_path / "submit"
    (submit_dir / "environment").mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(submit_dir / "environment", filter="fully_trusted")  # keeps bin/python's symlink
    job = submit_dir / "archive_job.py"
    job.write_text(ARCHIVE_JOB)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(
        {
            "PYSPARK_PYTHON": "./environment/bin/python",
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
    )
    command = submit_command(spark_standalone, None, "--archives", f"{archive}#environment")
    command += [str(job), kafka_cluster.bootstrap, topic_name]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=420, cwd=submit_dir)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("ARCHIVE "))
    result = json.loads(line[len("ARCHIVE ") :])
    assert result["count"] == 100, result
    # the executors imported the kafkawire of the archive Spark unpacked in their working directories
    work = str(spark_standalone.work_dir / "work")
    assert result["executors"] and all(f.startswith(work) and "/environment/" in f for f in result["executors"]), result
