"""A throwaway kafkawire broker for tests and scripts: on a free 127.0.0.1 port, in a thread or a subprocess."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from ._process import BrokerProcess, BrokerStartError, answers

__all__ = ["BrokerStartError", "KafkaBroker", "answers", "broker"]

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


class KafkaBroker:
    """One kafkawire broker: ``.bootstrap`` (host:port), ``.data_dir``, ``.storage``, ``.mode``, ``.config``.

    ``mode="subprocess"`` runs ``python -m kafkawire serve`` (its own interpreter and GIL, log in
    ``.log_path``); ``mode="thread"`` runs the broker on an event loop thread of this process.
    ``config`` holds server.properties keys (``{"num.partitions": "3"}``). ``data_dir=None`` makes a temporary
    directory, removed by :meth:`stop`; a directory given is kept.

    :meth:`restart` (stop, start again) and :meth:`kill` (SIGKILL, subprocess mode, as a crash would; then
    :meth:`start`) keep the port and the data, for tests of what survives. :meth:`stop` is final: it also
    removes the temporary directory.
    """

    def __init__(
        self,
        *,
        storage: str = "memory",
        mode: str = "subprocess",
        data_dir: str | os.PathLike | None = None,
        config: Mapping[str, object] | None = None,
        start_timeout: float = 30.0,
    ):
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
        self._process: BrokerProcess | None = None
        self._thread = None

    # -- addresses ---------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def process(self):
        """The broker's ``subprocess.Popen`` while one runs (subprocess mode), else None."""
        return self._process.proc if self._process is not None else None

    @property
    def running(self) -> bool:
        if self._process is not None:
            return self._process.running
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
        cfg.host, cfg.port, cfg.data_dir, cfg.storage = self.host, self.port, str(self.data_dir), self.storage
        self._thread = start_in_thread(cfg)
        self.port = self._thread.port

    def _command(self, bootstrap: str) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "kafkawire",
            "serve",
            "--listen",
            bootstrap,
            "--data-dir",
            str(self.data_dir),
            "--storage",
            self.storage,
        ]
        for key, value in self.config.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def _start_subprocess(self) -> None:
        if self._process is None:
            self._process = BrokerProcess(self._command, self.log_path, host=self.host)
        self._process.start(self.start_timeout)  # BrokerStartError (a RuntimeError) with the log's tail
        self.port = self._process.port

    def _stop_running(self) -> None:
        if self._process is not None:
            self._process.stop()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.stop()
            inner = getattr(thread, "_thread", None)
            if inner is not None:
                inner.join(10)  # its loop has closed; let the thread itself finish too

    def restart(self) -> KafkaBroker:
        """Stop and start again on the same port with the same data (a memory broker starts empty)."""
        self._stop_running()
        return self.start()

    def kill(self) -> None:
        """SIGKILL the broker process, as a crash would (subprocess mode); :meth:`start` brings it back on the
        same port and data."""
        if self.mode != "subprocess":
            raise ValueError("only a subprocess broker can be killed; a thread broker shares this process")
        if self._process is not None:
            self._process.kill()

    def stop(self) -> None:
        """Stop the broker and remove the temporary directory it made (a ``data_dir`` given is kept)."""
        self._stop_running()
        shutil.rmtree(self._root, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        """The end of the subprocess broker's log (a thread broker logs through this process's logging)."""
        return self._process.log_tail(lines) if self._process is not None else "(no log)"

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@contextmanager
def broker(
    *,
    storage: str = "memory",
    mode: str = "subprocess",
    data_dir: str | os.PathLike | None = None,
    config: Mapping[str, object] | None = None,
    **overrides,
) -> Iterator[KafkaBroker]:
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
