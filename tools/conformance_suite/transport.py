"""One connection to a broker: raw socket, kafkawire's codec, every outcome a value.

A request either gets a decoded response, or the broker closes the connection
(Kafka does so for a request it cannot parse or a version it does not serve),
or nothing arrives within the timeout. The last two are outcomes to compare,
not exceptions: :class:`Closed` and :class:`NoAnswer`.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from kafkawire.protocol import decode_response, encode_request, request_header

_SIZE = struct.Struct(">i")


@dataclass(frozen=True)
class Closed:
    """The broker closed the connection instead of answering."""

    def to_dict(self):
        return "<connection closed>"


@dataclass(frozen=True)
class NoAnswer:
    """Nothing arrived within the timeout (expected for Produce acks=0)."""

    def to_dict(self):
        return "<no answer>"


@dataclass(frozen=True)
class Undecodable:
    """A response kafkawire's codec cannot decode at the version asked for."""

    error: str

    def to_dict(self):
        return f"<undecodable: {self.error}>"


class Connection:
    def __init__(self, host: str, port: int, *, timeout: float = 15.0, client_id: str | None = "conformance"):
        self.address = (host, port)
        self.timeout = timeout
        self.client_id = client_id
        self.sock: socket.socket | None = None
        self.correlation_id = 0

    def _connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=self.timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_frame(
        self, frame: bytes, api_key: int, api_version: int, *, expect_answer: bool = True, timeout: float | None = None
    ):
        """Send an encoded frame; the decoded response body or an outcome value."""
        sock = self._connect()
        try:
            sock.sendall(frame)
        except OSError:
            self.close()
            return Closed()
        if not expect_answer:
            # acks=0: nothing comes back; a short wait proves that no answer (or a close) arrives.
            sock.settimeout(0.2)
            try:
                data = sock.recv(1)
            except TimeoutError:
                return NoAnswer()
            except OSError:
                data = b""
            finally:
                sock.settimeout(self.timeout)
            if not data:
                self.close()
                return Closed()
            return Undecodable("an answer to a request that expects none")
        sock.settimeout(timeout or self.timeout)
        try:
            head = _recv_exact(sock, 4)
            if head is None:
                self.close()
                return Closed()
            (size,) = _SIZE.unpack(head)
            payload = _recv_exact(sock, size)
            if payload is None:
                self.close()
                return Closed()
        except TimeoutError:
            self.close()
            return NoAnswer()
        except OSError:
            self.close()
            return Closed()
        finally:
            if self.sock is not None:
                self.sock.settimeout(self.timeout)
        try:
            return decode_response(head + payload, api_key, api_version).body
        except Exception as exc:  # noqa: BLE001 - a codec failure is an outcome to report
            return Undecodable(f"{type(exc).__name__}: {exc}")

    def request(self, body, api_version: int, *, expect_answer: bool = True, timeout: float | None = None):
        self.correlation_id += 1
        header = request_header(body.spec.api_key, api_version, self.correlation_id, self.client_id)
        frame = encode_request(header, body)
        return self.send_frame(frame, body.spec.api_key, api_version, expect_answer=expect_answer, timeout=timeout)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
