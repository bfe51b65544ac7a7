"""A pcapng file of what the clients exchanged with the proxy, for Wireshark and ``kafkawire pcap``.

The proxy sees byte streams, not packets, so it makes the packets up: each client connection becomes one
TCP conversation between the client's address and the proxy's local address (a handshake, one segment
per chunk read or written, a FIN at the end), in raw IPv4 or IPv6 packets (link type 101) with nanosecond
timestamps. The bytes are those the client sent and received, rewritten addresses included.

:class:`PcapngWriter` only produces bytes (``write`` is given a callable that stores them); nothing here
opens a file.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable

LINKTYPE_RAW = 101
_MAX_SEGMENT = 65_000  # payload per made-up segment: an IPv4 packet's total length is 16 bits
_SYN, _FIN, _PSH, _ACK = 0x02, 0x01, 0x08, 0x10


def _block(block_type: int, body: bytes) -> bytes:
    pad = -len(body) % 4
    length = 12 + len(body) + pad
    return struct.pack("<II", block_type, length) + body + b"\0" * pad + struct.pack("<I", length)


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


class Flow:
    """One TCP conversation's sequence numbers."""

    def __init__(self, writer: PcapngWriter, client: tuple[str, int], server: tuple[str, int]):
        self.writer = writer
        self.client = (ipaddress.ip_address(client[0]), client[1])
        self.server = (ipaddress.ip_address(server[0]), server[1])
        if self.client[0].version != self.server[0].version:  # a v4-mapped peer: show both as IPv6
            self.client = (
                ipaddress.IPv6Address(f"::ffff:{self.client[0]}") if self.client[0].version == 4 else self.client[0],
                client[1],
            )
            self.server = (
                ipaddress.IPv6Address(f"::ffff:{self.server[0]}") if self.server[0].version == 4 else self.server[0],
                server[1],
            )
        self.seq = {True: 1000, False: 5000}  # next sequence number sent by the client (True) / server
        self.closed = False

    def open(self, time_ns: int) -> None:
        self._segment(True, _SYN, b"", time_ns, ack=False)
        self.seq[True] += 1
        self._segment(False, _SYN | _ACK, b"", time_ns)
        self.seq[False] += 1
        self._segment(True, _ACK, b"", time_ns)

    def data(self, from_client: bool, data, time_ns: int) -> None:
        view = memoryview(data)
        for start in range(0, len(view), _MAX_SEGMENT):
            piece = bytes(view[start : start + _MAX_SEGMENT])
            self._segment(from_client, _PSH | _ACK, piece, time_ns)
            self.seq[from_client] = (self.seq[from_client] + len(piece)) & 0xFFFFFFFF

    def close(self, time_ns: int) -> None:
        if self.closed:
            return
        self.closed = True
        for side in (True, False):
            self._segment(side, _FIN | _ACK, b"", time_ns)
            self.seq[side] = (self.seq[side] + 1) & 0xFFFFFFFF

    def _segment(self, from_client: bool, flags: int, payload: bytes, time_ns: int, ack: bool = True) -> None:
        (src, sport), (dst, dport) = (self.client, self.server) if from_client else (self.server, self.client)
        tcp = (
            struct.pack(
                ">HHIIBBHHH",
                sport,
                dport,
                self.seq[from_client],
                self.seq[not from_client] if ack else 0,
                5 << 4,
                flags,
                65535,
                0,
                0,
            )
            + payload
        )
        if src.version == 4:
            header = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, src.packed, dst.packed)
            header = header[:10] + struct.pack(">H", _checksum(header)) + header[12:]
        else:
            header = struct.pack(">IHBB16s16s", 6 << 28, len(tcp), 6, 64, src.packed, dst.packed)
        self.writer.packet(header + tcp, time_ns)


class PcapngWriter:
    """Section header and one raw-IP interface first, then one Enhanced Packet Block per packet."""

    def __init__(self, write: Callable[[bytes], object]):
        self._write = write
        shb = struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1) + _option(4, b"kafkawire proxy") + _option(0, b"")
        idb = struct.pack("<HHI", LINKTYPE_RAW, 0, 0) + _option(9, b"\x09") + _option(0, b"")  # if_tsresol: ns
        write(_block(0x0A0D0D0A, shb) + _block(1, idb))

    def flow(self, client: tuple[str, int], server: tuple[str, int], time_ns: int) -> Flow:
        flow = Flow(self, client, server)
        flow.open(time_ns)
        return flow

    def packet(self, data: bytes, time_ns: int) -> None:
        body = struct.pack("<IIIII", 0, time_ns >> 32, time_ns & 0xFFFFFFFF, len(data), len(data)) + data
        self._write(_block(6, body))
