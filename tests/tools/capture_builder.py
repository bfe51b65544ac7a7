"""Hand-built captures for the pcap tests: TCP segments wrapped in IP, a link layer and a pcap/pcapng file.

Written from the file format descriptions (pcap: 24-byte file header, 16-byte
record headers; pcapng: section header, interface description and enhanced
packet blocks), independently of ``kafkawire.tools.capture``.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


@dataclass
class Seg:
    src: tuple[str, int]
    dst: tuple[str, int]
    seq: int
    ack: int
    flags: int
    payload: bytes = b""
    time_ns: int = 0


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def tcp_bytes(seg: Seg) -> bytes:
    header = struct.pack(
        ">HHIIBBHHH", seg.src[1], seg.dst[1], seg.seq & 0xFFFFFFFF, seg.ack & 0xFFFFFFFF, 5 << 4, seg.flags, 65535, 0, 0
    )
    return header + seg.payload


def ip_packet(seg: Seg) -> tuple[int, bytes]:
    """(IP version, packet)."""
    tcp = tcp_bytes(seg)
    src, dst = ipaddress.ip_address(seg.src[0]), ipaddress.ip_address(seg.dst[0])
    if src.version == 4:
        header = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0x4000, 64, 6, 0, src.packed, dst.packed)
        header = header[:10] + struct.pack(">H", _checksum(header)) + header[12:]
        return 4, header + tcp
    # IPv6 with one hop-by-hop extension header before TCP, to exercise the header chain
    hop = bytes([6, 0]) + bytes(6)
    header = struct.pack(">IHBB16s16s", 6 << 28, len(hop) + len(tcp), 0, 64, src.packed, dst.packed)
    return 6, header + hop + tcp


def link_frame(linktype: int, version: int, packet: bytes) -> bytes:
    ethertype = 0x0800 if version == 4 else 0x86DD
    if linktype == 1:  # Ethernet, with a VLAN tag on IPv6 frames
        if version == 6:
            return bytes(6) + bytes(5) + b"\x01" + struct.pack(">HHH", 0x8100, 7, ethertype) + packet
        return bytes(6) + bytes(5) + b"\x01" + struct.pack(">H", ethertype) + packet
    if linktype == 113:  # Linux cooked
        return struct.pack(">HHH8sH", 0, 772, 6, bytes(8), ethertype) + packet
    if linktype == 276:  # Linux cooked v2
        return struct.pack(">HHIHBB8s", ethertype, 0, 1, 772, 0, 6, bytes(8)) + packet
    if linktype == 0:  # BSD loopback, host byte order (little-endian here)
        return struct.pack("<I", 2 if version == 4 else 30) + packet
    if linktype == 101:  # raw IP
        return packet
    raise ValueError(linktype)


@dataclass
class Capture:
    linktype: int = 1
    packets: list[tuple[int, bytes, int]] = field(default_factory=list)  # (time_ns, frame, orig_len)

    def add(self, seg: Seg, snaplen: int | None = None) -> None:
        version, packet = ip_packet(seg)
        frame = link_frame(self.linktype, version, packet)
        orig = len(frame)
        if snaplen is not None:
            frame = frame[:snaplen]
        self.packets.append((seg.time_ns, frame, orig))

    def extend(self, segs) -> None:
        for s in segs:
            self.add(s)

    def pcap(self, *, nanos: bool = False, big_endian: bool = False) -> bytes:
        order = ">" if big_endian else "<"
        magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
        out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 262144, self.linktype)]
        for t, frame, orig in self.packets:
            sec, frac = divmod(t, 1_000_000_000)
            out.append(struct.pack(order + "IIII", sec, frac if nanos else frac // 1000, len(frame), orig) + frame)
        return b"".join(out)

    def pcapng(self, *, big_endian: bool = False, tsresol: int | None = 9) -> bytes:
        order = ">" if big_endian else "<"

        def block(kind: int, body: bytes) -> bytes:
            body += bytes(-len(body) % 4)
            size = len(body) + 12
            return struct.pack(order + "II", kind, size) + body + struct.pack(order + "I", size)

        def option(code: int, value: bytes) -> bytes:
            return struct.pack(order + "HH", code, len(value)) + value + bytes(-len(value) % 4)

        shb = block(
            0x0A0D0D0A,
            struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1) + option(4, b"capture_builder") + option(0, b""),
        )
        options = (option(9, bytes([tsresol])) if tsresol is not None else b"") + option(0, b"")
        idb = block(1, struct.pack(order + "HHI", self.linktype, 0, 0) + options)
        # a second interface nobody uses, to check that interface ids are honoured
        idb2 = block(1, struct.pack(order + "HHI", 147, 0, 0))
        unit = 10 ** (9 - tsresol) if tsresol is not None else 1000
        out = [shb, idb, idb2]
        for t, frame, orig in self.packets:
            ts = t // unit
            out.append(block(6, struct.pack(order + "IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(frame), orig) + frame))
        return b"".join(out)


class Conn:
    """Both directions of one TCP connection; hands out segments with the right sequence numbers."""

    def __init__(
        self, client=("10.0.0.1", 40000), server=("10.0.0.2", 9092), client_isn=1000, server_isn=50000, clock=None
    ):
        self.client, self.server = client, server
        self.seq = {True: client_isn, False: server_isn}
        self.clock = clock if clock is not None else Clock()

    def _seg(self, from_client: bool, flags: int, payload: bytes = b"", seq: int | None = None) -> Seg:
        src, dst = (self.client, self.server) if from_client else (self.server, self.client)
        return Seg(
            src,
            dst,
            self.seq[from_client] if seq is None else seq,
            self.seq[not from_client],
            flags,
            payload,
            self.clock.tick(),
        )

    def handshake(self) -> list[Seg]:
        out = [self._seg(True, SYN)]
        out[0].ack = 0
        self.seq[True] += 1
        out.append(self._seg(False, SYN | ACK))
        self.seq[False] += 1
        out.append(self._seg(True, ACK))
        return out

    def send(self, from_client: bool, data: bytes, sizes: list[int] | None = None) -> list[Seg]:
        """``data`` cut into segments of ``sizes`` (the rest in one more), in order."""
        out = []
        pos = 0
        for n in list(sizes or []) + [len(data)]:
            chunk = data[pos : pos + n]
            if not chunk:
                continue
            out.append(self._seg(from_client, PSH | ACK, chunk))
            self.seq[from_client] += len(chunk)
            pos += len(chunk)
            if pos >= len(data):
                break
        return out

    def close(self) -> list[Seg]:
        out = [self._seg(True, FIN | ACK)]
        self.seq[True] += 1
        out.append(self._seg(False, FIN | ACK))
        self.seq[False] += 1
        out.append(self._seg(True, ACK))
        return out


class Clock:
    def __init__(self, start_ns: int = 1_700_000_000_000_000_000, step_ns: int = 1000):
        self.now = start_ns
        self.step = step_ns

    def tick(self) -> int:
        self.now += self.step
        return self.now
