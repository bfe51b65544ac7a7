"""A bare ``FramedServer`` in a thread, for tests of the net layer under a handler of their own (no broker), and
reading its answers off a socket."""

from __future__ import annotations

import asyncio
import ssl
import struct
import threading

from kafkawire.net.server import FramedServer


class ThreadedServer:
    """``FramedServer(handler)`` on 127.0.0.1 in a thread of its own, on asyncio's loop or uvloop's (the one
    ``kafkawire serve`` runs; the in-process test broker runs asyncio's); a context manager."""

    def __init__(self, handler, ssl_context=None, loop="asyncio", max_frame=1 << 20):
        self.handler, self.ssl_context, self.max_frame = handler, ssl_context, max_frame
        self.loop = __import__("uvloop").new_event_loop() if loop == "uvloop" else asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.server = FramedServer(self.handler, "127.0.0.1", 0, max_frame=self.max_frame, ssl_context=self.ssl_context)
        self.loop.run_until_complete(self.server.start())
        self.ready.set()
        self.loop.run_forever()

    @property
    def port(self) -> int:
        return self.server.port

    def __enter__(self):
        self.thread.start()
        assert self.ready.wait(10)
        return self

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def tls_contexts(certs_dir) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server, client) TLS contexts over the certificates ``kafkawire.security.certs.create`` made."""
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(str(certs_dir / "broker-cert.pem"), str(certs_dir / "broker-key.pem"))
    client = ssl.create_default_context(cafile=str(certs_dir / "ca.pem"))
    client.check_hostname = False
    return server, client


def read_frames(sock, count: int) -> list[bytes]:
    """``count`` size-prefixed frames off ``sock``, without their prefixes."""
    out, buf = [], b""
    for _ in range(count):
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = sock.recv(1 << 20)
            assert chunk, "connection closed"
            buf += chunk
        size = struct.unpack(">i", buf[:4])[0]
        out.append(buf[4 : 4 + size])
        buf = buf[4 + size :]
    return out
