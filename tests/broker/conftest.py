"""Broker tests: a broker started in-process on a free 127.0.0.1 port, raw protocol over real sockets."""

from __future__ import annotations

import socket
import struct

import pytest

from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.server import start_in_thread
from kafkawire.protocol import decode_response, encode_request, message_class, request_header


class RawClient:
    """Blocking raw-protocol client: encode a request with kafkawire.protocol, read the framed response."""

    def __init__(self, address, timeout: float = 10.0):
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0

    def close(self):
        self.sock.close()

    def send(self, body, version: int, client_id: str | None = "kafkawire-tests") -> int:
        self.correlation_id += 1
        header = request_header(body.api_key, version, self.correlation_id, client_id)
        self.sock.sendall(encode_request(header, body))
        return self.correlation_id

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read(4))[0]
        return self._read(size)

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv(self, api_key: int, version: int, correlation_id: int | None = None):
        payload = self.read_frame()
        response = decode_response(payload, api_key, version, framed=False)
        if correlation_id is not None:
            assert response.header.correlation_id == correlation_id
        return response.body

    def call(self, body, version: int):
        cid = self.send(body, version)
        return self.recv(body.api_key, version, cid)

    def is_closed(self, timeout: float = 2.0) -> bool:
        """True when the broker closed the connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return data == b""


def msg(name: str, **fields):
    return message_class(name)(**fields)


@pytest.fixture
def broker_config():
    return BrokerConfig(port=0, storage="memory")


@pytest.fixture
def broker(broker_config):
    b = start_in_thread(broker_config)
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def client(broker):
    c = RawClient(broker.address)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def connect(broker):
    opened = []

    def make():
        c = RawClient(broker.address)
        opened.append(c)
        return c

    yield make
    for c in opened:
        c.close()


@pytest.fixture(scope="module")
def certs_dir(tmp_path_factory):
    """A CA and a broker certificate (``kafkawire.security.certs``), for TLS listeners of the net layer."""
    from kafkawire.security.certs import create

    directory = tmp_path_factory.mktemp("certs")
    create(str(directory), password="kafkawire")
    return directory
