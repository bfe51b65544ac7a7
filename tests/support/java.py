"""Run small Java programs against the real Apache Kafka client jar.

The jar (kafka-clients 3.9.1, with its lz4/snappy/zstd/slf4j dependencies
beside it) ships inside the ``shigawire-apache-flink-libraries`` wheel under
``pyflink/lib``.  Tests compile their Java sources from ``tests/java`` once per
test session and run a main class; anything missing (no JDK, a jar that cannot
be resolved) fails the test in CI and skips it elsewhere, with the reason: never
a silent pass.

``clients=`` picks another kafka-clients release: the name of a pinned Maven
artifact set of ``tools/kafka_pins.py`` (e.g. ``"kafka-4.4.0"``, the reference
Kafka's own client), resolved by ``tools/kafka_reference.py``. When that set
cannot be resolved, :meth:`JavaProgram.require` fails in CI and skips elsewhere
too, as every test needing the reference does.

Typical use::

    from support.java import JavaProgram

    tool = JavaProgram.require("KafkaRecordsTool.java")   # no Java: fails in CI, skips elsewhere
    out = tool.run("KafkaRecordsTool", "read", path)      # stdout as str
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

JAVA_SOURCES_DIR = Path(__file__).resolve().parent.parent / "java"

# The jars the record codecs and logging need; kafka-clients alone cannot load
# a compressed batch.
_CLASSPATH_JARS = ("kafka-clients.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar", "slf4j-api.jar")


class JavaUnavailable(RuntimeError):
    """Java or the Kafka jar is missing; the message says which."""


def kafka_lib_dir() -> Path:
    """Directory holding ``kafka-clients.jar``, located via the pyflink package."""
    spec = importlib.util.find_spec("pyflink")
    if spec is None or not spec.submodule_search_locations:
        raise JavaUnavailable(
            "package 'pyflink' not importable: install shigawire-apache-flink-libraries "
            "(it ships the kafka-clients jar)"
        )
    for location in spec.submodule_search_locations:
        lib = Path(location) / "lib"
        if (lib / "kafka-clients.jar").is_file():
            return lib
    raise JavaUnavailable(f"kafka-clients.jar not found under {list(spec.submodule_search_locations)}/lib")


def kafka_classpath(clients: str | None = None) -> list[Path]:
    """kafka-clients and its codec/logging jars: pyflink's 3.9.1, or pinned set ``clients``."""
    if clients is None:
        lib = kafka_lib_dir()
        return [lib / name for name in _CLASSPATH_JARS if (lib / name).is_file()]
    from kafka_reference import jar  # tools/, on sys.path through tests/conftest.py

    return [jar(clients, name[: -len(".jar")]) for name in _CLASSPATH_JARS]


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        java_home = os.environ.get("JAVA_HOME")
        if java_home and (Path(java_home) / "bin" / name).is_file():
            return str(Path(java_home) / "bin" / name)
        raise JavaUnavailable(f"'{name}' not found on PATH (install a JDK 17, e.g. openjdk-17-jdk-headless)")
    return found


_lock = threading.Lock()
_compiled: dict[tuple, Path] = {}
_session_dir: Path | None = None


def _workdir() -> Path:
    global _session_dir
    if _session_dir is None:
        _session_dir = Path(tempfile.mkdtemp(prefix="kafkawire-java-"))
        atexit.register(shutil.rmtree, _session_dir, True)
    return _session_dir


def _compile_once(key: tuple, javac: str, classpath, paths: tuple[str, ...]) -> Path:
    """The classes directory of ``paths`` compiled against ``classpath``, compiled once per process and ``key``;
    ``RuntimeError`` with javac's output when compilation fails."""
    with _lock:
        classes = _compiled.get(key)
        if classes is None:
            classes = Path(tempfile.mkdtemp(prefix="classes-", dir=_workdir()))
            cp = os.pathsep.join(map(str, classpath))
            command = [javac, "-nowarn", "-encoding", "UTF-8", "-d", str(classes), "-cp", cp, *paths]
            proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                raise RuntimeError(f"javac failed for {paths}:\n{proc.stdout}{proc.stderr}")
            _compiled[key] = classes
    return classes


class JavaProgram:
    """Java sources compiled against the kafka-clients classpath."""

    def __init__(self, classes_dir: Path, classpath: list[Path], java: str):
        self.classes_dir = classes_dir
        self.classpath = classpath
        self.java = java

    @classmethod
    def compile(cls, *sources: str | os.PathLike, clients: str | None = None) -> JavaProgram:
        """Compile ``sources`` (names relative to ``tests/java`` or paths), once per process and client.

        Raises :class:`JavaUnavailable` when the JDK or the jar is missing
        (``kafka_reference.KafkaUnavailable`` when pinned set ``clients`` cannot
        be resolved) and ``RuntimeError`` with javac's output when compilation fails.
        """
        paths = tuple(str(p if Path(p).is_absolute() else JAVA_SOURCES_DIR / p) for p in sources)
        javac = _tool("javac")
        java = _tool("java")
        classpath = kafka_classpath(clients)
        return cls(_compile_once((clients, *paths), javac, classpath, paths), classpath, java)

    @classmethod
    def require(cls, *sources: str | os.PathLike, clients: str | None = None) -> JavaProgram:
        """Like :meth:`compile`, for a test: no JDK, or a pinned client set that cannot be resolved, fails the
        calling test in CI (``CI`` set) and skips it elsewhere (``conftest.reference_unavailable``)."""
        from conftest import reference_unavailable  # tests/conftest.py

        try:
            return cls.compile(*sources, clients=clients)
        except JavaUnavailable as exc:
            reference_unavailable(f"Java peer unavailable: {exc}")
        except Exception as exc:
            if type(exc).__name__ != "KafkaUnavailable":
                raise
            reference_unavailable(f"kafka-clients set {clients}: {exc}")

    @classmethod
    def against_broker(cls, source: str | os.PathLike) -> JavaProgram:
        """``source`` compiled against the reference Kafka broker's whole classpath (its storage, coordinator
        and metadata classes, not only kafka-clients), once per process: for tests that let Kafka's own code
        read what kafkawire wrote. No JDK or no broker jars fails in CI and skips elsewhere
        (``conftest.reference_unavailable``)."""
        from conftest import reference_unavailable  # tests/conftest.py
        from kafka_reference import KafkaUnavailable, classpath  # tools/

        try:
            javac, java = _tool("javac"), _tool("java")
            cp = classpath()
        except (JavaUnavailable, KafkaUnavailable) as exc:
            reference_unavailable(str(exc))
        path = str(source)
        classpath = [Path(p) for p in cp.split(os.pathsep)]
        return cls(_compile_once(("broker", path), javac, classpath, (path,)), classpath, java)

    def command(self, main_class: str, *args: str | os.PathLike) -> list[str]:
        cp = os.pathsep.join([str(self.classes_dir), *map(str, self.classpath)])
        # Quiet, quick-starting JVM: these are short one-shot runs.
        return [
            self.java,
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Xshare:auto",
            "-cp",
            cp,
            main_class,
            *map(str, args),
        ]

    def run(
        self,
        main_class: str,
        *args: str | os.PathLike,
        input: str | bytes | None = None,
        timeout: float = 120,
        check: bool = True,
    ) -> str:
        """Run ``main_class`` with ``args``; return its stdout (text).

        A non-zero exit raises ``RuntimeError`` carrying stderr when ``check``.
        """
        if isinstance(input, str):
            input = input.encode()
        proc = subprocess.run(self.command(main_class, *args), input=input, capture_output=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise RuntimeError(f"java {main_class} exited {proc.returncode}:\n{proc.stderr.decode(errors='replace')}")
        return proc.stdout.decode()

    @staticmethod
    def tempdir(prefix: str = "run-") -> Path:
        """A fresh directory under this session's temporary tree (removed at exit)."""
        return Path(tempfile.mkdtemp(prefix=prefix, dir=_workdir()))
