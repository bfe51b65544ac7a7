"""A tiny blocking Kafka client for wire-level group tests: one request, one response, kafkawire.protocol codecs."""

from __future__ import annotations

import itertools
import socket

from kafkawire.protocol import api_by_name, decode_response, encode_request, message_class, request_header


class WireClient:
    def __init__(self, host: str, port: int, client_id: str = "wire-test"):
        self.sock = socket.create_connection((host, port), timeout=30)
        self.client_id = client_id
        self._ids = itertools.count(1)

    def send(self, api: str, version: int, **fields):
        """Send without waiting; returns a token for ``receive``."""
        info = api_by_name(api)
        body = message_class(info.request)(**fields)
        cid = next(self._ids)
        self.sock.sendall(encode_request(request_header(info.key, version, cid, self.client_id), body))
        return info.key, version, cid

    def receive(self, token):
        key, version, cid = token
        size = int.from_bytes(self._exact(4), "big")
        payload = self._exact(size)
        resp = decode_response(size.to_bytes(4, "big") + payload, key, version)
        assert resp.header.correlation_id == cid
        return resp.body

    def call(self, api: str, version: int, **fields):
        return self.receive(self.send(api, version, **fields))

    def _exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)

    def close(self):
        self.sock.close()
