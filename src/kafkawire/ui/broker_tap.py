"""The broker's side of the tap: its request handler wrapped so that each answered request is published.

Installed by ``kafkawire serve --ui`` only (the broker's handler is untouched otherwise: no cost without
the console). A request's payload is copied before the handler runs (handlers may patch record batches in
place) and only up to the tap's frame limit; the response buffers are joined up to that limit.
"""

from __future__ import annotations

import asyncio
import inspect
import time

from kafkawire.tools.pcap import Connection

from .tap import Tap


def _address(text: str) -> tuple[str, int]:
    host, _, port = str(text).rpartition(":")
    return (host or str(text), int(port) if port.isdigit() else 0)


def _payload(buffers, limit: int) -> bytes:
    """The response payload (size prefix dropped) of the buffers the handler returned, cut after ``limit``
    bytes (one byte more is kept, so that the tap sees it was cut)."""
    out = bytearray()
    for buf in buffers or ():
        if not isinstance(buf, (bytes, bytearray, memoryview)) and hasattr(buf, "tobytes"):
            buf = buf.tobytes()  # a file range of a segment (Fetch on a plaintext connection sends it with sendfile)
        out += memoryview(buf)[: limit + 5 - len(out)]
        if len(out) >= limit + 5:
            break
    return bytes(out[4:])


def install(broker, tap: Tap) -> None:
    """Wrap ``broker.handle`` (before ``broker.start()``, which hands it to the listeners)."""
    handle = broker.handle
    server = _address("%s:%d" % tuple(broker.advertised))
    limit = tap.frame_bytes

    def tapped(payload, conn):
        started = time.time_ns()
        request = bytes(payload[: limit + 1])
        result = handle(payload, conn)
        connection = Connection(getattr(conn, "id", 0), _address(getattr(conn, "peer", "?")), server)

        def publish(buffers) -> None:
            tap.publish(
                connection, request, _payload(buffers, limit), time_ns=started, latency_ns=time.time_ns() - started
            )

        if result is None or type(result) is list:
            publish(result)
            return result
        if inspect.isawaitable(result):
            future = asyncio.ensure_future(result)
            future.add_done_callback(lambda f: None if f.cancelled() or f.exception() else publish(f.result()))
            return future
        return result

    broker.handle = tapped


__all__ = ["install"]
