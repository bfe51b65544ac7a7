"""A broker as a child process on one 127.0.0.1 port, ready once it answers ApiVersions.

The one launcher behind ``KafkaBroker(mode="subprocess")`` and the project's own test harnesses, which run
``kafkawire serve`` and Tansu through it: crash tests need the same port and data after a SIGKILL, and a
restart must find the broker where its clients left it. ``terminate_all`` and ``serve_until_signalled`` also
stop the JVMs of ``tools/kafka_cluster.py`` and ``tools/spark_cluster.py``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

READY_TIMEOUT = 30.0
STOP_GRACE = 10.0


class BrokerStartError(RuntimeError):
    """The broker exited or did not answer in time; the message ends with its log's tail."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
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


def terminate(proc: subprocess.Popen | None, sig: int = signal.SIGTERM, grace: float = STOP_GRACE) -> int | None:
    """Send ``sig`` to a process, SIGKILL it after ``grace`` seconds; its exit code (None: no process)."""
    return terminate_all([proc], sig, grace)[0]


def terminate_all(
    procs: Iterable[subprocess.Popen | None], sig: int = signal.SIGTERM, grace: float = STOP_GRACE
) -> list[int | None]:
    """Send ``sig`` to every process (in the order given), SIGKILL those still running ``grace`` seconds after;
    their exit codes (None for a None). One deadline for all: a cluster stops in one grace period, not one
    per node."""
    procs = list(procs)
    for proc in procs:
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
    deadline = time.monotonic() + grace
    for proc in procs:
        if proc is None:
            continue
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(10)
    return [None if proc is None else proc.returncode for proc in procs]


@contextlib.contextmanager
def stop_signals(*signums: int) -> Iterator[None]:
    """Inside the block, the first SIGINT or SIGTERM (or ``signums``) raises KeyboardInterrupt in the main thread;
    later ones are ignored, so the cleanup it unwinds into (stopping child processes) runs to its end.

    Whatever the parent set: a background job of a non-interactive shell starts with SIGINT ignored (so Python
    never raises KeyboardInterrupt), and SIGTERM's default ends the interpreter without unwinding, leaving every
    child started in its own session running.
    """
    signums = signums or (signal.SIGINT, signal.SIGTERM)

    def interrupt(signum: int, frame: object) -> None:
        for s in signums:
            signal.signal(s, signal.SIG_IGN)
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {s: signal.signal(s, interrupt) for s in signums}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def serve_until_signalled(service: contextlib.AbstractContextManager[T], address: Callable[[T], str]) -> int:
    """Start ``service`` (its ``__enter__``), print ``address(service)``, run until SIGINT or SIGTERM, stop it
    (its ``__exit__``); 0. A signal during the start stops what was started as well."""
    with contextlib.suppress(KeyboardInterrupt), stop_signals(), service as running:
        print(address(running), flush=True)
        while True:
            signal.pause()
    return 0


class BrokerProcess:
    """One broker process: ``command(bootstrap)`` is its argv (a function given, or a subclass's method), its
    output goes to ``log_path``, it runs in ``cwd`` (made when missing).

    The first ``start`` takes a free port (another, up to three times, when one is lost between choosing and
    binding it); every later ``start`` (after ``stop`` or ``kill``) and ``restart`` use that port again.
    ``stop`` is SIGTERM (SIGKILL after ``grace``), ``kill`` SIGKILL at once, as a crash. A process still
    running when the interpreter exits is killed.
    """

    def __init__(
        self,
        command: Callable[[str], Sequence[str]] | None,
        log_path: str | os.PathLike,
        *,
        cwd: str | os.PathLike | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        name: str = "kafkawire",
    ):
        self._command = command
        self.log_path = Path(log_path)
        self.cwd = cwd
        self.host = host
        self.port = port or 0
        self.name = name
        self.proc: subprocess.Popen | None = None
        self._starts = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self, bootstrap: str) -> Sequence[str]:
        """The broker's argv, listening on ``bootstrap``."""
        if self._command is None:
            raise NotImplementedError("give a command or override BrokerProcess.command")
        return self._command(bootstrap)

    def start(self, timeout: float = READY_TIMEOUT) -> BrokerProcess:
        if self.running:
            return self
        fixed = bool(self.port)
        last: BrokerStartError | None = None
        for _ in range(1 if fixed else 3):
            if not fixed:
                self.port = free_port(self.host)
            self._spawn()
            try:
                self._wait_ready(timeout)
                return self
            except BrokerStartError as exc:
                last = exc
                self.kill()
        assert last is not None
        raise last

    def _spawn(self) -> None:
        self._starts += 1
        argv = [str(a) for a in self.command(self.bootstrap)]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.cwd is not None:
            Path(self.cwd).mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self._starts}: {' '.join(argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.cwd,
                start_new_session=True,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
            )
        if self._starts == 1:  # a broker must not outlive an interpreter that dies before its teardown
            atexit.register(self.kill)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        delay = 0.005
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise BrokerStartError(
                    f"{self.name} broker exited with code {code} before serving; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            if answers(self.host, self.port, timeout=1.0):
                return
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        raise BrokerStartError(
            f"{self.name} broker on {self.bootstrap} did not answer within {timeout:.0f} s; "
            f"log {self.log_path}:\n{self.log_tail()}"
        )

    def stop(self, grace: float = STOP_GRACE) -> int | None:
        """SIGTERM, SIGKILL after ``grace`` seconds; the exit code (None when nothing ran)."""
        proc, self.proc = self.proc, None
        return terminate(proc, signal.SIGTERM, grace)

    def kill(self) -> int | None:
        """SIGKILL at once, as a crash would; ``start`` brings it back on the same port and data."""
        proc, self.proc = self.proc, None
        return terminate(proc, signal.SIGKILL, 5.0)

    def restart(self, timeout: float = READY_TIMEOUT) -> BrokerProcess:
        """Stop, then start again on the same port."""
        self.stop()
        return self.start(timeout)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"
