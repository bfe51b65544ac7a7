"""The net layer reads a large request straight into the buffer its handler gets (``Connection.get_buffer`` /
``ProtocolConnection.direct_buffer``): over plaintext and TLS, on asyncio's loop and uvloop's (the one
``kafkawire serve`` runs), requests arrive whole and in order whatever the pieces the peer sends them in, the
handler may do anything with its payload (resizing included: it is called once the loop's read no longer
holds the buffer), and the answers come back in order."""

from __future__ import annotations

import hashlib
import random
import socket
import struct
import time

import pytest

from kafkawire.protocol.connection import DIRECT_MIN, ProtocolConnection

from .net_server import ThreadedServer, read_frames, tls_contexts


class _Digests:
    """A handler answering each request with its correlation id and the SHA-256 of its payload, after growing
    and cutting that payload (what a handler may do with the buffer it is given)."""

    def __init__(self):
        self.failures: list[str] = []

    def __call__(self, payload, conn):
        digest = hashlib.sha256(payload).digest()
        corr = payload[4:8]
        try:
            payload.extend(b"grown")  # a BufferError here: the payload was handed out while a read held it
            del payload[-5:]
        except BufferError as exc:
            self.failures.append(str(exc))
        return [struct.pack(">i", 4 + len(digest)), corr, digest]


@pytest.fixture
def whole_direct_reads(monkeypatch):
    """Requests completed by a direct read (the server runs in this process)."""
    done = []
    real = ProtocolConnection.direct_received

    def counting(self, nbytes):
        whole = real(self, nbytes)
        if whole:
            done.append(nbytes)
        return whole

    monkeypatch.setattr(ProtocolConnection, "direct_received", counting)
    return done


def _request(corr: int, size: int, rnd: random.Random) -> bytes:
    payload = struct.pack(">hhi", 0, 9, corr) + rnd.randbytes(size - 8)
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "tls"])
def test_large_requests_arrive_whole_and_in_order_in_any_pieces(certs_dir, whole_direct_reads, tls, loop):
    rnd = random.Random(11)
    sizes = [3 << 20, 20, DIRECT_MIN, DIRECT_MIN - 1, 700_000, 9, 200_000, 200_000, 64]
    frames = [_request(corr, size, rnd) for corr, size in enumerate(sizes)]
    context, client_context = tls_contexts(certs_dir) if tls else (None, None)
    handler = _Digests()
    with ThreadedServer(handler, context, loop, max_frame=8 << 20) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        if client_context is not None:
            sock = client_context.wrap_socket(sock)
        with sock:
            stream = b"".join(frames)
            # pieces cut anywhere (inside size prefixes too), some with a pause so the server reads them apart
            at = 0
            while at < len(stream):
                n = rnd.choice((3, 1000, 70_000, 300_000))
                sock.sendall(stream[at : at + n])
                at += n
                if rnd.random() < 0.1:
                    time.sleep(0.002)
            answers = read_frames(sock, len(frames))
    assert [a[:4] for a in answers] == [struct.pack(">i", corr) for corr in range(len(frames))]
    assert [a[4:] for a in answers] == [hashlib.sha256(f[4:]).digest() for f in frames]
    assert handler.failures == []
    # the requests of DIRECT_MIN bytes and more that did not arrive in one read went straight into their buffers
    assert 1 <= len(whole_direct_reads) <= 5
