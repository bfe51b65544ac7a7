#!/usr/bin/env python3
"""Apache Kafka itself, as the reference broker: resolve its jars, run one node.

kafkawire promises a broker that clients cannot tell from Kafka, so the tests,
the conformance suite (``tools/conformance.py``) and the benchmarks run the
pinned Kafka release (``tools/kafka_pins.py``) beside kafkawire.

- :func:`resolve` fetches a pinned artifact set with its runtime dependencies
  from Maven Central (``mvn dependency:copy-dependencies``) into a cache
  directory (``$KAFKAWIRE_CACHE`` or ``~/.cache/kafkawire``) and returns its
  jars. A second call is a directory listing.
- :class:`ReferenceKafka` formats a fresh KRaft log directory and starts one
  combined broker+controller node on 127.0.0.1 (free ports), waits until the
  broker answers Metadata with itself in it, and stops it.

Command line::

    python tools/kafka_reference.py resolve            # all pinned sets; prints their directories
    python tools/kafka_reference.py serve [--port N]   # a reference broker until Ctrl-C or SIGTERM

Failing to resolve raises :class:`KafkaUnavailable` with Maven's reason; the
test fixtures turn that into a failure in CI (``CI`` set) and a skip with the
reason elsewhere.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kafkawire.testing._process import stop_signals, terminate  # noqa: E402  (the one stop for every broker process)

import kafka_pins  # noqa: E402  (tools/ is not a package)

ROOT = Path(__file__).resolve().parent.parent


class KafkaUnavailable(RuntimeError):
    """The reference Kafka cannot run here (no JDK, no Maven, or Maven Central refused); says which."""


def cache_root() -> Path:
    return Path(os.environ.get("KAFKAWIRE_CACHE") or Path.home() / ".cache" / "kafkawire")


_resolve_lock = threading.Lock()


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None and os.environ.get("JAVA_HOME") and name in ("java", "javac"):
        candidate = Path(os.environ["JAVA_HOME"]) / "bin" / name
        if candidate.is_file():
            found = str(candidate)
    if found is None:
        hint = "a JDK 17+ (Debian: openjdk-17-jdk-headless)" if name.startswith("java") else "Maven (Debian: maven)"
        raise KafkaUnavailable(f"'{name}' not found on PATH: install {hint}")
    return found


def resolve(name: str = kafka_pins.BROKER) -> list[Path]:
    """The jars of pinned artifact set ``name`` (see ``kafka_pins.ARTIFACTS``), fetched once into the cache."""
    coordinates = kafka_pins.ARTIFACTS[name]
    target = cache_root() / "maven" / name
    done = target / ".complete"
    with _resolve_lock:
        if not done.is_file():
            mvn = _tool("mvn")
            work = Path(tempfile.mkdtemp(prefix="kafkawire-mvn-"))
            try:
                # group:artifact:version, or group:artifact:version:classifier (e.g. a "test" jar)
                deps = "\n".join(
                    f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>"
                    + "".join(f"<classifier>{c}</classifier>" for c in classifier)
                    + "</dependency>"
                    for g, a, v, *classifier in (c.split(":") for c in coordinates)
                )
                (work / "pom.xml").write_text(
                    textwrap.dedent(f"""\
                    <project xmlns="http://maven.apache.org/POM/4.0.0">
                      <modelVersion>4.0.0</modelVersion>
                      <groupId>dev.kafkawire</groupId><artifactId>reference</artifactId><version>1</version>
                      <dependencies>{deps}</dependencies>
                    </project>
                    """)
                )
                staging = target.with_name(target.name + ".partial")
                shutil.rmtree(staging, ignore_errors=True)
                proc = subprocess.run(
                    [
                        mvn,
                        "-B",
                        "-q",
                        "dependency:copy-dependencies",
                        f"-DoutputDirectory={staging}",
                        "-DincludeScope=runtime",
                    ],
                    cwd=work,
                    capture_output=True,
                    text=True,
                    timeout=900,
                )
                if proc.returncode != 0:
                    raise KafkaUnavailable(
                        f"mvn could not resolve {', '.join(coordinates)}:\n{(proc.stdout + proc.stderr)[-3000:]}"
                    )
                shutil.rmtree(target, ignore_errors=True)
                staging.rename(target)
                (target / ".complete").write_text("\n".join(coordinates) + "\n")
            finally:
                shutil.rmtree(work, ignore_errors=True)
    return sorted(target.glob("*.jar"))


def jar(name: str, prefix: str) -> Path:
    """The one jar of set ``name`` whose file name starts with ``prefix-<digit>`` (e.g. ``kafka-clients``)."""
    for path in resolve(name):
        rest = path.name[len(prefix) :]
        if path.name.startswith(prefix) and rest[:1] == "-" and rest[1:2].isdigit():
            return path
    raise KafkaUnavailable(f"no {prefix} jar in {name}")


def classpath(name: str = kafka_pins.BROKER) -> str:
    return os.pathsep.join(str(p) for p in resolve(name))


# --------------------------------------------------------------------------- the broker


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


def metadata_broker_ids(host: str, port: int, timeout: float) -> set[int]:
    """The node ids a Metadata v12 answer lists (none while the broker is still registering)."""
    from kafkawire.protocol import decode_response, encode_request, message_class, request_header

    request = message_class("MetadataRequest")(topics=[], allow_auto_topic_creation=False)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(encode_request(request_header(3, 12, 1, "kafkawire-reference-probe"), request))
        size = int.from_bytes(_recv_exact(sock, 4), "big")
        payload = _recv_exact(sock, size)
    return {b.node_id for b in decode_response(size.to_bytes(4, "big") + payload, 3, 12).body.brokers}


LOG4J2_CONFIG = """\
Configuration:
  status: warn
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.request.logger
        level: WARN
      - name: org.apache.kafka.controller
        level: INFO
"""


class ReferenceKafka:
    """One Apache Kafka node (KRaft, broker and controller combined) on 127.0.0.1.

    ``config`` adds or overrides ``server.properties`` keys. The defaults are
    those of a single-node development broker (replication factor 1 for the
    internal topics, no initial rebalance delay), stated here so that tests
    and benchmarks compare like with like.
    """

    def __init__(
        self,
        data_dir: Path | str | None = None,
        *,
        port: int | None = None,
        config: dict[str, object] | None = None,
        heap: str = "768m",
        host: str = "127.0.0.1",
        jvm_args: tuple[str, ...] = (),
    ):
        self._owned = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="kafka-reference-"))
        self.host = host
        self.port = port
        self.controller_port: int | None = None
        self.extra_config = dict(config or {})
        self.heap = heap
        self.jvm_args = tuple(jvm_args)
        self.cluster_id = uuid.UUID(int=uuid.uuid4().int).bytes.hex()[:22]
        self.node_id = 1
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir / "kafka.log"
        self._atexit = False

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "logs"

    def properties(self) -> dict[str, object]:
        props: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": self.node_id,
            "controller.quorum.voters": f"{self.node_id}@{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "num.partitions": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 50,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
        }
        props.update(self.extra_config)
        return props

    def _java(self) -> str:
        return _tool("java")

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.data_dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        (self.data_dir / "log4j2.yaml").write_text(LOG4J2_CONFIG)
        return path

    def _format(self, config: Path) -> None:
        proc = subprocess.run(
            [
                self._java(),
                "-Xmx256m",
                "-cp",
                classpath(),
                "kafka.tools.StorageTool",
                "format",
                "-t",
                self.cluster_id,
                "-c",
                str(config),
                "--ignore-formatted",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode != 0:
            raise KafkaUnavailable(f"kafka-storage format failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")

    def command(self, config: Path) -> list[str]:
        return [
            self._java(),
            f"-Xmx{self.heap}",
            "-Xms128m",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.yaml'}",
            *self.jvm_args,
            "-cp",
            classpath(),
            "kafka.Kafka",
            str(config),
        ]

    def start(self, timeout: float = 120.0) -> ReferenceKafka:
        """Format (first start only) and start; returns once Metadata lists this broker."""
        attempts = 3 if self.port is None else 1
        last: Exception | None = None
        for _ in range(attempts):
            if self.port is None or last is not None:
                self.port = free_port(self.host)
            if self.controller_port is None or last is not None:
                self.controller_port = free_port(self.host)
            config = self._write_config()
            if not (self.log_dir / "meta.properties").is_file():
                self._format(config)
            try:
                self._spawn(config)
                self._wait_ready(timeout)
                return self
            except KafkaUnavailable as exc:
                last = exc
                self._terminate(signal.SIGKILL)
                if "Address already in use" not in self.log_tail():
                    raise
            except BaseException:  # interrupted while waiting (serve's SIGINT/SIGTERM): no JVM left behind
                self._terminate(signal.SIGKILL)
                raise
        raise last  # type: ignore[misc]

    def _spawn(self, config: Path) -> None:
        log = open(self.log_path, "ab")
        log.write(f"\n===== {' '.join(self.command(config)[:3])} ... kafka.Kafka {config}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(
            self.command(config),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.data_dir,
            start_new_session=True,
        )
        log.close()
        if not self._atexit:
            atexit.register(self._terminate, signal.SIGKILL, 5.0)
            self._atexit = True

    @property
    def name(self) -> str:
        return "Kafka"

    def _ready(self) -> bool:
        """Whether the broker serves: its Metadata lists a broker (raises while the JVM starts)."""
        return bool(metadata_broker_ids(self.host, self.port, 2.0))

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise KafkaUnavailable(f"{self.name} exited with code {code} before serving:\n{self.log_tail()}")
            try:
                if self._ready():
                    return
            except Exception as exc:  # refused while the JVM starts, or no broker registered yet
                last = exc
            time.sleep(0.2)
        raise KafkaUnavailable(
            f"{self.name} on {self.bootstrap} not ready after {timeout:.0f}s (last probe: {last!r}):\n{self.log_tail()}"
        )

    def _terminate(self, sig: int, grace: float = 30.0) -> int | None:
        proc, self.proc = self.proc, None
        return terminate(proc, sig, grace)

    def stop(self) -> int | None:
        """SIGTERM: Kafka's controlled shutdown (SIGKILL after 30 s)."""
        return self._terminate(signal.SIGTERM)

    def kill(self) -> int | None:
        return self._terminate(signal.SIGKILL)

    def restart(self, timeout: float = 120.0) -> ReferenceKafka:
        self.stop()
        config = self._write_config()
        self._spawn(config)
        self._wait_ready(timeout)
        return self

    def close(self) -> None:
        self.stop()
        if self._owned:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no Kafka log)"

    def __enter__(self) -> ReferenceKafka:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("resolve", help="fetch every pinned artifact set into the cache")
    serve = sub.add_parser("serve", help="run a reference Kafka broker until SIGINT (Ctrl-C) or SIGTERM")
    serve.add_argument("--port", type=int)
    serve.add_argument("--data-dir")
    args = parser.parse_args(argv)
    if args.command == "resolve":
        for name in kafka_pins.ARTIFACTS:
            jars = resolve(name)
            print(f"{name}: {len(jars)} jars in {jars[0].parent}")
        return 0
    # SIGINT or SIGTERM (also when started in the background, where SIGINT comes in ignored) stops the JVM: it
    # runs in a session of its own, so neither signal reaches it from the tool's terminal or process group
    with contextlib.suppress(KeyboardInterrupt), stop_signals(), ReferenceKafka(args.data_dir, port=args.port) as kafka:
        print(
            f"Apache Kafka {kafka_pins.KAFKA} on {kafka.bootstrap} (log: {kafka.log_path}); Ctrl-C or SIGTERM stops it",
            flush=True,
        )
        code = kafka.proc.wait()  # returns only if the JVM ends on its own; a signal raises KeyboardInterrupt
        print(f"Kafka exited with code {code}:\n{kafka.log_tail()}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
