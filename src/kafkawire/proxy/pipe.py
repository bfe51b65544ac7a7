"""One socket of the relay as an asyncio protocol that is its own reader and writer.

asyncio's streams copy every byte twice more than a relay needs: ``StreamReader`` appends what the
transport read to its buffer, and ``read()`` copies it out again (and moves what is left to the front).
A :class:`Pipe` keeps the ``bytes`` objects the transport hands it and gives them back as they came
(``read_chunks``: a list of them, never joined; ``read``: joined when several wait), with the same flow
control: reading pauses above ``limit`` bytes
buffered and resumes once they are taken; ``drain()`` waits while the transport's write buffer is above
its high-water mark. The methods the relay calls have ``StreamReader``/``StreamWriter``'s names.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Pipe(asyncio.Protocol):
    def __init__(self, limit: int, on_connect=None):
        self.limit = limit
        self.on_connect = on_connect  # called with the pipe once connected (a server's accepted socket)
        self.transport: asyncio.Transport | None = None
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._eof = False
        self._lost: asyncio.Future | None = None
        self._error: BaseException | None = None
        self._read_waiter: asyncio.Future | None = None
        self._drain_waiter: asyncio.Future | None = None
        self._reading_paused = False
        self._writing_paused = False

    # -- protocol callbacks
    def connection_made(self, transport) -> None:
        self.transport = transport
        self._lost = asyncio.get_running_loop().create_future()
        if self.on_connect is not None:
            self.on_connect(self)

    def data_received(self, data: bytes) -> None:
        self._chunks.append(data)
        self._buffered += len(data)
        if self._buffered > self.limit and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]
        self._wake_reader()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake_reader()
        # half-close: the relay may still write the last answers (not possible over TLS, which closes)
        return self.transport is not None and self.transport.get_extra_info("sslcontext") is None

    def connection_lost(self, exc) -> None:
        self._eof = True
        self._error = exc
        self._wake_reader()
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            if exc is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(ConnectionResetError(str(exc)))
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_reader(self) -> None:
        waiter, self._read_waiter = self._read_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- reading
    async def read(self, _n: int = -1) -> bytes:
        """What has arrived (b"" at the end of the stream); waits for something."""
        chunks = await self.read_chunks()
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def read_chunks(self) -> list[bytes]:
        """What has arrived, as the transport handed it (an empty list at the end of the stream): a relay
        forwards and observes each chunk without the copy that joining them would make."""
        while not self._chunks:
            if self._eof:
                if self._error is not None:
                    raise ConnectionResetError(str(self._error))
                return []
            self._read_waiter = asyncio.get_running_loop().create_future()
            await self._read_waiter
        data = list(self._chunks)
        self._chunks.clear()
        self._buffered = 0
        if self._reading_paused and self.transport is not None and not self.transport.is_closing():
            self._reading_paused = False
            self.transport.resume_reading()
        return data

    # -- writing
    def write(self, data) -> None:
        self.transport.write(data)  # type: ignore[union-attr]

    def writelines(self, data) -> None:
        self.transport.writelines(data)  # type: ignore[union-attr]

    async def drain(self) -> None:
        """Waits while the write buffer is full; raises once the connection is closing (as
        ``StreamWriter.drain`` does), so that a pump whose peer has gone stops instead of writing on."""
        if self.transport is None or self.transport.is_closing():
            await asyncio.sleep(0)  # let connection_lost run, as asyncio's streams do
            raise ConnectionResetError(str(self._error) if self._error is not None else "Connection lost")
        if self._writing_paused:
            self._drain_waiter = asyncio.get_running_loop().create_future()
            await self._drain_waiter

    def can_write_eof(self) -> bool:
        return self.transport is not None and self.transport.can_write_eof()

    def write_eof(self) -> None:
        self.transport.write_eof()  # type: ignore[union-attr]

    def get_extra_info(self, name: str, default=None):
        return self.transport.get_extra_info(name, default) if self.transport is not None else default

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def wait_closed(self) -> None:
        if self._lost is not None:
            await self._lost


__all__ = ["Pipe"]
