"""One direction of a TCP connection put back in order, sans-IO.

:class:`HalfStream` takes segments as captured (out of order, retransmitted,
overlapping) and hands back the byte stream in order as :class:`Data` and
:class:`Gap` pieces. Offsets are relative to the first byte after the SYN (or
to the first segment seen when the capture started mid-connection) and keep
counting past 4 GiB. Bytes never captured become a ``Gap`` once they cannot
arrive any more: the peer acknowledged past them, the stream ended, or more
than ``max_buffered`` bytes wait behind them.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

_MASK = 0xFFFFFFFF
DEFAULT_MAX_BUFFERED = 64 * 1024 * 1024


@dataclass
class Data:
    offset: int
    data: bytes
    packet: int  # number of the packet that completed this piece
    time_ns: int


@dataclass
class Gap:
    offset: int
    size: int
    packet: int
    time_ns: int
    reason: str


class HalfStream:
    def __init__(self, max_buffered: int = DEFAULT_MAX_BUFFERED):
        self.max_buffered = max_buffered
        self.base: int | None = None  # raw sequence number of relative offset 0
        self.saw_syn = False
        self.next = 0  # relative offset of the next byte expected
        self.fin_at: int | None = None
        self._heap: list[int] = []
        self._pending: dict[int, bytes] = {}  # relative offset -> bytes waiting for the hole before them
        self.buffered = 0
        self.retransmitted = 0  # segments that brought nothing new
        self.gap_bytes = 0

    # -- sequence numbers --------------------------------------------------------
    def _relative(self, seq: int) -> int:
        diff = (seq - self.base - self.next) & _MASK
        if diff >= 1 << 31:
            diff -= 1 << 32
        return self.next + diff

    def syn(self, seq: int) -> None:
        if self.base is None or (not self.saw_syn and self.next == 0 and not self._pending):
            self.base = (seq + 1) & _MASK
            self.saw_syn = True

    # -- input -------------------------------------------------------------------
    def segment(self, seq: int, payload: bytes, packet: int, time_ns: int, fin: bool = False) -> list:
        """Add one segment's payload; returns the pieces now in order."""
        if self.base is None:
            if not payload:
                return []
            self.base = seq
        rel = self._relative(seq)
        if fin:
            self.fin_at = rel + len(payload)
        if not payload:
            return []
        end = rel + len(payload)
        if end <= self.next:
            self.retransmitted += 1
            return []
        out: list = []
        if rel <= self.next:
            out.append(Data(self.next, payload[self.next - rel :], packet, time_ns))
            self.next = end
            self._drain(out, packet, time_ns)
        else:
            known = self._pending.get(rel)
            if known is None:
                heapq.heappush(self._heap, rel)
                self._pending[rel] = payload
                self.buffered += len(payload)
            elif len(payload) > len(known):
                self._pending[rel] = payload
                self.buffered += len(payload) - len(known)
            else:
                self.retransmitted += 1
            while self.buffered > self.max_buffered and self._heap:
                self._skip_to(self._heap[0], out, packet, time_ns, "too much data waiting behind a hole")
        return out

    def acked(self, ack: int, packet: int, time_ns: int) -> list:
        """The peer acknowledged up to ``ack``: bytes before it that the capture lacks are lost to it."""
        if self.base is None:
            return []
        rel = self._relative(ack)
        if self.fin_at is not None:
            rel = min(rel, self.fin_at)
        out: list = []
        if rel > self.next:
            while self._heap and self.next < rel:
                self._skip_to(min(self._heap[0], rel), out, packet, time_ns, "acknowledged but not captured")
            if self.next < rel:
                self._skip_to(rel, out, packet, time_ns, "acknowledged but not captured")
        return out

    def finish(self, packet: int, time_ns: int) -> list:
        """The stream ended (or the capture did): whatever is still waiting is delivered after its holes."""
        out: list = []
        while self._heap:
            self._skip_to(self._heap[0], out, packet, time_ns, "not captured")
        return out

    # -- internals ---------------------------------------------------------------
    def _skip_to(self, offset: int, out: list, packet: int, time_ns: int, reason: str) -> None:
        if offset > self.next:
            out.append(Gap(self.next, offset - self.next, packet, time_ns, reason))
            self.gap_bytes += offset - self.next
            self.next = offset
        self._drain(out, packet, time_ns)

    def _drain(self, out: list, packet: int, time_ns: int) -> None:
        heap, pending = self._heap, self._pending
        while heap and heap[0] <= self.next:
            rel = heapq.heappop(heap)
            payload = pending.pop(rel)
            self.buffered -= len(payload)
            end = rel + len(payload)
            if end > self.next:
                out.append(Data(self.next, payload[self.next - rel :], packet, time_ns))
                self.next = end
            else:
                self.retransmitted += 1
