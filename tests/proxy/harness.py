"""Helpers for the proxy tests: a reporter that keeps what it saw, a proxy on its own event loop thread
(for tests that drive real clients), and a scripted upstream that records every byte it receives."""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import Callable

from kafkawire.cli.proxy import _loop_factory
from kafkawire.proxy import PcapngWriter, Proxy, ProxyConfig, Reporter
from kafkawire.proxy.report import Exchange


class RecordingReporter(Reporter):
    def __init__(self, **kw):
        self.text = io.StringIO()
        super().__init__(self.text, **kw)
        self.exchanges: list[Exchange] = []
        self.lock = threading.Lock()

    def exchange(self, ex: Exchange) -> None:
        super().exchange(ex)
        with self.lock:
            self.exchanges.append(ex)

    def named(self, api: str) -> list[Exchange]:
        with self.lock:
            return [e for e in self.exchanges if e.api_key is not None and e.api_name == api]


class ProxyThread:
    """A Proxy serving on a loop in a daemon thread until ``close()``."""

    def __init__(self, upstream: str, *, pcap_path=None, upstream_ssl=None, **config):
        host, _, port = upstream.rpartition(":")
        self.reporter = RecordingReporter()
        self._pcap_file = open(pcap_path, "wb") if pcap_path else None
        pcap = PcapngWriter(self._pcap_file.write) if self._pcap_file else None
        self.config = ProxyConfig("127.0.0.1", 0, [(host, int(port))], upstream_ssl=upstream_ssl, **config)
        self.loop = (_loop_factory() or asyncio.new_event_loop)()  # the command's loop (uvloop when installed)
        self.proxy = Proxy(self.config, self.reporter, pcap)
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="proxy")
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self.loop).result(10)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.proxy.port}"

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()
        if self._pcap_file is not None:
            self._pcap_file.close()

    def __enter__(self) -> ProxyThread:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ScriptedUpstream:
    """An upstream that records the bytes of each connection and answers with ``respond(received_so_far)``:
    a callable given the connection's buffered bytes, returning (bytes consumed, bytes to send, close?)."""

    def __init__(self, respond: Callable[[bytes], tuple[int, bytes, bool]]):
        self.respond = respond
        self.received: list[bytearray] = []
        self.sent: list[bytearray] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _handle(self, reader, writer) -> None:
        got, sent = bytearray(), bytearray()
        self.received.append(got)
        self.sent.append(sent)
        pending = bytearray()
        try:
            for _ in range(10_000):
                data = await reader.read(65536)
                if not data:
                    break
                got += data
                pending += data
                while pending:
                    used, out, close = self.respond(bytes(pending))
                    if not used and not out and not close:
                        break
                    del pending[:used]
                    if out:
                        writer.write(out)
                        sent += out
                        await writer.drain()
                    if close:
                        return
        finally:
            writer.close()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


def frames(data: bytes) -> list[bytes]:
    """Whole frames (size prefix included) at the start of ``data``."""
    out, pos = [], 0
    while len(data) - pos >= 4:
        size = int.from_bytes(data[pos : pos + 4], "big", signed=True)
        if size < 0 or pos + 4 + size > len(data):
            break
        out.append(data[pos : pos + 4 + size])
        pos += 4 + size
    return out


class Tee:
    """A plain relay in front of ``target`` that records both directions of every connection (for comparing
    what the upstream got and sent with what the client got and sent). Runs on its own loop thread."""

    def __init__(self, port: int, target: tuple[str, int]):
        self.target = target
        self.streams: list[tuple[bytearray, bytearray]] = []  # (client -> upstream, upstream -> client)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="tee")
        self._thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", port), self.loop
        ).result(10)

    async def _handle(self, reader, writer):
        up, down = bytearray(), bytearray()
        self.streams.append((up, down))
        ureader, uwriter = await asyncio.open_connection(*self.target)

        async def pipe(r, w, record):
            try:
                while data := await r.read(65536):
                    record += data
                    w.write(data)
                    await w.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                w.close()

        await asyncio.gather(pipe(reader, uwriter, up), pipe(ureader, writer, down))

    def close(self) -> None:
        async def stop():
            self.server.close()
            await asyncio.wait_for(self.server.wait_closed(), 5)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
