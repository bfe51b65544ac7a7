"""A throwaway kafkawire broker for tests and scripts: on a free 127.0.0.1 port, in a thread or a subprocess."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

MODES = ("subprocess", "thread")
STORAGES = ("memory", "segments")
_STORAGE_ALIASES = {"disk": "segments", "segments": "segments", "memory": "memory"}


def normalise_storage(storage: str) -> str:
    """``memory``, ``segments`` or its alias ``disk`` -> the engine name ``kafkawire serve`` takes."""
    try:
        return _STORAGE_ALIASES[str(storage).strip().lower()]
    except KeyError:
        raise ValueError(f"storage must be memory, segments or disk, not {storage!r}") from None


def normalise_mode(mode: str) -> str:
    m = str(mode).strip().lower()
    if m not in MODES:
        raise ValueError(f"mode must be subprocess or thread, not {mode!r}")
    return m


def config_key(name: str) -> str:
    """A keyword argument as a server.properties key: ``num_partitions`` -> ``num.partitions``."""
    return name if "." in name else name.replace("_", ".")


def parse_config_lines(lines) -> dict[str, str]:
    """``key=value`` lines (the ini option ``kafka_broker_config``) as a dict; blank lines and ``#`` skipped."""
    out: dict[str, str] = {}
    for line in lines:
        line = str(line).strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"kafka_broker_config expects key=value lines, got {line!r}")
        out[key.strip()] = value.strip()
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_PROBE: bytes | None = None


def _probe_frame() -> bytes:
    """An ApiVersions v0 request frame (built once)."""
    global _PROBE
    if _PROBE is None:
        from kafkawire.protocol import encode_request, message_class, request_header

        body = message_class("ApiVersionsRequest")()
        _PROBE = encode_request(request_header(18, 0, 1, "kafkawire-testing"), body)
    return _PROBE


def answers(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when a broker at host:port answers an ApiVersions request (a usable bootstrap)."""
    frame = _probe_frame()
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(frame)
            head = b""
            while len(head) < 8:  # size, correlation id
                chunk = s.recv(8 - len(head))
                if not chunk:
                    return False
                head += chunk
            size, correlation_id = struct.unpack(">ii", head)
            return size >= 4 and correlation_id == 1
    except OSError:
        return False


class KafkaBroker:
    """One kafkawire broker: ``.bootstrap`` (host:port), ``.data_dir``, ``.storage``, ``.mode``, ``.config``.

    ``mode="subprocess"`` runs ``python -m kafkawire serve`` (its own interpreter and GIL, log in
    ``.log_path``); ``mode="thread"`` runs the broker on an event loop thread of this process.
    ``config`` holds server.properties keys (``{"num.partitions": "3"}``). ``data_dir=None`` makes a temporary
    directory, removed by :meth:`stop`; a directory given is kept.
    """

    def __init__(self, *, storage: str = "memory", mode: str = "subprocess", data_dir: str | os.PathLike | None = None,
                 config: Mapping[str, object] | None = None, start_timeout: float = 30.0):
        self.config: dict[str, str] = {str(k): str(v) for k, v in (config or {}).items()}
        storage = self.config.get("kafkawire.storage", storage)
        self.storage = normalise_storage(storage)
        self.mode = normalise_mode(mode)
        self.start_timeout = start_timeout
        # a private directory for the log, and for the data unless a data_dir is given
        self._root = Path(tempfile.mkdtemp(prefix="kafkawire-test-broker-"))
        self.data_dir = Path(data_dir) if data_dir is not None else self._root / "data"
        self.log_path = self._root / "broker.log"
        self.host = "127.0.0.1"
        self.port = 0
        self._proc: subprocess.Popen | None = None
        self._thread = None

    # -- addresses ---------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return self._thread is not None

    def __repr__(self) -> str:
        return f"KafkaBroker({self.bootstrap}, storage={self.storage}, mode={self.mode})"

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> KafkaBroker:
        if self.running:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            if self.mode == "thread":
                self._start_thread()
            else:
                self._start_subprocess()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_thread(self) -> None:
        from kafkawire.broker.config import BrokerConfig
        from kafkawire.broker.server import start_in_thread

        cfg = BrokerConfig.from_properties(dict(self.config))
        cfg.host, cfg.port, cfg.data_dir, cfg.storage = self.host, 0, str(self.data_dir), self.storage
        self._thread = start_in_thread(cfg)
        self.port = self._thread.port

    def _command(self) -> list[str]:
        cmd = [sys.executable, "-m", "kafkawire", "serve", "--listen", self.bootstrap,
               "--data-dir", str(self.data_dir), "--storage", self.storage]
        for key, value in self.config.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def _start_subprocess(self) -> None:
        last = "no attempt"
        for _ in range(3):  # a port taken between choosing and binding it: try another
            self.port = _free_port()
            with open(self.log_path, "ab") as log:
                self._proc = subprocess.Popen(self._command(), stdout=log, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, start_new_session=True,
                                              env=dict(os.environ, PYTHONUNBUFFERED="1"))
            deadline = time.monotonic() + self.start_timeout
            delay = 0.005
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    last = f"exited with code {self._proc.returncode}"
                    break
                if answers(self.host, self.port, timeout=1.0):
                    return
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
            else:
                last = f"did not answer within {self.start_timeout:.0f} s"
            self._stop_process()
        raise RuntimeError(f"kafkawire broker {last}; log {self.log_path}:\n{self.log_tail()}")

    def _stop_process(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def stop(self) -> None:
        """Stop the broker and remove the temporary directory it made (a ``data_dir`` given is kept)."""
        self._stop_process()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.stop()
            inner = getattr(thread, "_thread", None)
            if inner is not None:
                inner.join(10)  # its loop has closed; let the thread itself finish too
        shutil.rmtree(self._root, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        """The end of the subprocess broker's log (a thread broker logs through this process's logging)."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@contextmanager
def broker(*, storage: str = "memory", mode: str = "subprocess", data_dir: str | os.PathLike | None = None,
           config: Mapping[str, object] | None = None, **overrides) -> Iterator[KafkaBroker]:
    """``with kafkawire.testing.broker() as b: Producer(b.bootstrap)``: a broker for the ``with`` block.

    Keyword ``overrides`` are server.properties keys with ``_`` for ``.`` (``num_partitions=3``); ``config``
    takes keys as written. Stopped, and its temporary directory removed, when the block ends.
    """
    merged = {str(k): v for k, v in (config or {}).items()}
    merged.update({config_key(k): v for k, v in overrides.items()})
    b = KafkaBroker(storage=storage, mode=mode, data_dir=data_dir, config=merged)
    b.start()
    try:
        yield b
    finally:
        b.stop()
