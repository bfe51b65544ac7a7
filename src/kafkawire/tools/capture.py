"""Capture files, sans-IO: pcap and pcapng bytes in, TCP segments out.

:class:`CaptureReader` parses a pcap or pcapng file fed to it in pieces
(either byte order, micro- or nanosecond pcap, any pcapng timestamp
resolution, several sections and interfaces) and returns :class:`Packet` s
numbered from 1 in file order, the numbering Wireshark uses;
:func:`read_packets` does it for a whole file in memory. :func:`tcp_segment` peels the link layer (Ethernet
with VLAN tags, Linux cooked SLL and SLL2, BSD loopback/null, raw IP),
IPv4 or IPv6 (extension headers skipped) and TCP off one packet.

Nothing here opens a file or a socket.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterator
from dataclasses import dataclass

# link types (https://www.tcpdump.org/linktypes.html numbering)
LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
_RAW_ALIASES = (LINKTYPE_RAW, 12, 14)  # DLT_RAW's numbers on some BSDs

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
_VLAN_TYPES = (0x8100, 0x88A8, 0x9100)
_BSD_AF_INET6 = (10, 24, 28, 30)  # AF_INET6 on Linux, NetBSD/OpenBSD, FreeBSD, macOS

TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK = 0x01, 0x02, 0x04, 0x08, 0x10

PCAP_MAGICS = {0xA1B2C3D4: 1000, 0xA1B23C4D: 1}  # magic -> nanoseconds per fraction unit
PCAPNG_SHB = 0x0A0D0D0A
_BYTE_ORDER_MAGIC = 0x1A2B3C4D


class CaptureError(ValueError):
    """The bytes are not a capture file this module reads, or the file is damaged at ``offset``."""

    def __init__(self, problem: str, offset: int | None = None):
        self.problem = problem
        self.offset = offset
        super().__init__(problem if offset is None else f"{problem} (at byte {offset})")


@dataclass
class Packet:
    number: int  # 1-based, in file order
    time_ns: int  # since the epoch
    linktype: int
    data: bytes
    orig_len: int  # length on the wire; more than len(data) when the capture cut the packet


@dataclass
class Segment:
    """One TCP segment: addresses as text, sequence numbers raw (32-bit)."""

    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    ack: int
    flags: int
    payload: bytes
    missing: int = 0  # payload bytes the capture did not keep (snap length)

    @property
    def syn(self) -> bool:
        return bool(self.flags & TCP_SYN)

    @property
    def fin(self) -> bool:
        return bool(self.flags & TCP_FIN)

    @property
    def rst(self) -> bool:
        return bool(self.flags & TCP_RST)

    @property
    def has_ack(self) -> bool:
        return bool(self.flags & TCP_ACK)


# --------------------------------------------------------------------------- files


def capture_format(data: bytes) -> str:
    """'pcap', 'pcapng' or raise CaptureError."""
    if len(data) < 4:
        raise CaptureError(f"{len(data)} bytes is too short for a capture file", 0)
    be, le = struct.unpack_from(">I", data)[0], struct.unpack_from("<I", data)[0]
    if be == PCAPNG_SHB:
        return "pcapng"
    if be in PCAP_MAGICS or le in PCAP_MAGICS:
        return "pcap"
    raise CaptureError(f"not a pcap or pcapng file (magic {bytes(data[:4]).hex()})", 0)


def read_packets(data: bytes) -> Iterator[Packet]:
    """Every packet of a whole pcap or pcapng file, in file order.

    A file cut short (a capture still being written) ends after the last
    whole packet; damage elsewhere raises CaptureError.
    """
    reader = CaptureReader()
    capture_format(data)
    return iter(reader.feed(data))


@dataclass
class _Interface:
    linktype: int
    snaplen: int
    ts_num: int = 1000  # time_ns = ts * ts_num // ts_den
    ts_den: int = 1


def _tsresol(value: int) -> tuple[int, int]:
    exponent = value & 0x7F
    if value & 0x80:  # a power of two
        return 1_000_000_000, 1 << exponent
    if exponent <= 9:
        return 10 ** (9 - exponent), 1
    return 1, 10 ** (exponent - 9)


def _options(data, pos: int, end: int, order: str) -> Iterator[tuple[int, bytes]]:
    while pos + 4 <= end:
        code, length = struct.unpack_from(order + "HH", data, pos)
        if code == 0:
            return
        yield code, bytes(data[pos + 4 : pos + 4 + length])
        pos += 4 + ((length + 3) & ~3)


class CaptureReader:
    """Incremental pcap/pcapng parser: ``feed`` bytes as they come, get the packets now complete.

    ``pending`` is the number of bytes held for an incomplete record; at the
    end of a file it is the size of a last packet the capture did not finish.
    """

    def __init__(self):
        self._buf = bytearray()
        self._base = 0  # file offset of _buf[0], for error messages
        self.format: str | None = None
        self._order = "<"
        self._number = 0
        # pcap
        self._linktype = 0
        self._unit_ns = 1000
        # pcapng
        self._interfaces: list[_Interface] = []

    @property
    def pending(self) -> int:
        return len(self._buf)

    def feed(self, data) -> list[Packet]:
        self._buf += data
        if self.format is None:
            if len(self._buf) < 4:
                return []
            self.format = capture_format(self._buf)
            if self.format == "pcap":
                if len(self._buf) < 24:
                    self.format = None
                    return []
                self._pcap_header()
        out: list[Packet] = []
        pos = self._pcap(out) if self.format == "pcap" else self._pcapng(out)
        if pos:
            del self._buf[:pos]
            self._base += pos
        return out

    def _pcap_header(self) -> None:
        buf = self._buf
        self._order = "<" if struct.unpack_from("<I", buf)[0] in PCAP_MAGICS else ">"
        self._unit_ns = PCAP_MAGICS[struct.unpack_from(self._order + "I", buf)[0]]
        self._linktype = struct.unpack_from(self._order + "I", buf, 20)[0] & 0x0FFFFFFF  # upper bits: FCS
        del buf[:24]
        self._base = 24

    def _pcap(self, out: list) -> int:
        buf, record = self._buf, struct.Struct(self._order + "IIII")
        pos = 0
        while pos + 16 <= len(buf):
            sec, frac, incl, orig = record.unpack_from(buf, pos)
            if pos + 16 + incl > len(buf):
                break
            self._number += 1
            out.append(
                Packet(
                    self._number,
                    sec * 1_000_000_000 + frac * self._unit_ns,
                    self._linktype,
                    bytes(buf[pos + 16 : pos + 16 + incl]),
                    orig,
                )
            )
            pos += 16 + incl
        return pos

    def _pcapng(self, out: list) -> int:
        buf = self._buf
        pos = 0
        while pos + 12 <= len(buf):
            (block_type,) = struct.unpack_from(self._order + "I", buf, pos)
            if block_type == PCAPNG_SHB:  # the same bytes in either order
                raw_bom = bytes(buf[pos + 8 : pos + 12])
                if struct.unpack(">I", raw_bom)[0] == _BYTE_ORDER_MAGIC:
                    self._order = ">"
                elif struct.unpack("<I", raw_bom)[0] == _BYTE_ORDER_MAGIC:
                    self._order = "<"
                else:
                    raise CaptureError("pcapng section header with a bad byte-order magic", self._base + pos + 8)
            order = self._order
            (length,) = struct.unpack_from(order + "I", buf, pos + 4)
            if length < 12 or length % 4:
                raise CaptureError(f"pcapng block of impossible length {length}", self._base + pos + 4)
            if pos + length > len(buf):
                break
            if block_type == PCAPNG_SHB:
                self._interfaces = []
            self._block(block_type, pos + 8, pos + length - 4, out)
            pos += length
        return pos

    def _block(self, block_type: int, body: int, end: int, out: list) -> None:
        buf, order, interfaces = self._buf, self._order, self._interfaces
        if block_type == 1:  # interface description
            linktype, _, snaplen = struct.unpack_from(order + "HHI", buf, body)
            iface = _Interface(linktype, snaplen)
            for code, value in _options(buf, body + 8, end, order):
                if code == 9 and value:  # if_tsresol
                    iface.ts_num, iface.ts_den = _tsresol(value[0])
            interfaces.append(iface)
        elif block_type in (6, 2):  # enhanced packet, obsolete packet
            if block_type == 6:
                iface_id, ts_hi, ts_lo, cap_len, orig_len = struct.unpack_from(order + "IIIII", buf, body)
            else:
                iface_id, _drops, ts_hi, ts_lo, cap_len, orig_len = struct.unpack_from(order + "HHIIII", buf, body)
            if iface_id >= len(interfaces):
                raise CaptureError(f"packet on undeclared interface {iface_id}", self._base + body)
            if body + 20 + cap_len > end:
                raise CaptureError(f"packet of {cap_len} bytes overruns its block", self._base + body + 12)
            iface = interfaces[iface_id]
            self._number += 1
            ts = (ts_hi << 32) | ts_lo
            out.append(
                Packet(
                    self._number,
                    ts * iface.ts_num // iface.ts_den,
                    iface.linktype,
                    bytes(buf[body + 20 : body + 20 + cap_len]),
                    orig_len,
                )
            )
        elif block_type == 3:  # simple packet: no timestamp, interface 0
            if not interfaces:
                raise CaptureError("simple packet block before any interface", self._base + body - 8)
            (orig_len,) = struct.unpack_from(order + "I", buf, body)
            iface = interfaces[0]
            cap_len = min(orig_len, iface.snaplen or orig_len, end - body - 4)
            self._number += 1
            out.append(Packet(self._number, 0, iface.linktype, bytes(buf[body + 4 : body + 4 + cap_len]), orig_len))


# --------------------------------------------------------------------------- layers


def _network(linktype: int, frame: bytes) -> tuple[int, bytes] | None:
    """(IP version, IP packet) of a link-layer frame, or None when it carries no IP."""
    if linktype == LINKTYPE_ETHERNET:
        if len(frame) < 14:
            return None
        pos = 12
        (ethertype,) = struct.unpack_from(">H", frame, pos)
        while ethertype in _VLAN_TYPES and len(frame) >= pos + 6:
            pos += 4
            (ethertype,) = struct.unpack_from(">H", frame, pos)
        payload = frame[pos + 2 :]
    elif linktype == LINKTYPE_LINUX_SLL:
        if len(frame) < 16:
            return None
        (ethertype,) = struct.unpack_from(">H", frame, 14)
        payload = frame[16:]
    elif linktype == LINKTYPE_LINUX_SLL2:
        if len(frame) < 20:
            return None
        (ethertype,) = struct.unpack_from(">H", frame, 0)
        payload = frame[20:]
    elif linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
        if len(frame) < 4:
            return None
        if linktype == LINKTYPE_LOOP:
            family = struct.unpack_from(">I", frame)[0]
        else:  # host byte order of the capturing machine: whichever reading is small
            family = min(struct.unpack_from("<I", frame)[0], struct.unpack_from(">I", frame)[0])
        ethertype = ETHERTYPE_IPV4 if family == 2 else ETHERTYPE_IPV6 if family in _BSD_AF_INET6 else 0
        payload = frame[4:]
    elif linktype in _RAW_ALIASES or linktype in (LINKTYPE_IPV4, LINKTYPE_IPV6):
        if not frame:
            return None
        version = frame[0] >> 4
        ethertype = ETHERTYPE_IPV4 if version == 4 else ETHERTYPE_IPV6 if version == 6 else 0
        payload = frame
    else:
        return None
    if ethertype == ETHERTYPE_IPV4:
        return 4, payload
    if ethertype == ETHERTYPE_IPV6:
        return 6, payload
    return None


class NotTcp(Exception):
    """Why a packet yields no TCP segment (not IP, not TCP, a fragment, damaged headers)."""


_V6_EXTENSIONS = (0, 43, 60, 135, 139, 140)  # hop-by-hop, routing, destination options, mobility, HIP, shim6


def tcp_segment(packet: Packet) -> Segment:
    """The TCP segment in a packet; raises NotTcp with the reason otherwise."""
    network = _network(packet.linktype, packet.data)
    if network is None:
        raise NotTcp(f"link type {packet.linktype}: not an IP packet")
    version, ip = network
    # bytes the capture cut off the end of the packet (snap length)
    cut = max(0, packet.orig_len - len(packet.data))
    if version == 4:
        if len(ip) < 20 or ip[0] >> 4 != 4:
            raise NotTcp("IPv4 header cut short")
        ihl = (ip[0] & 0x0F) * 4
        total, frag, proto = struct.unpack_from(">H", ip, 2)[0], struct.unpack_from(">H", ip, 6)[0], ip[9]
        if frag & 0x3FFF:
            raise NotTcp("IPv4 fragment (not reassembled)")
        src, dst = str(ipaddress.IPv4Address(ip[12:16])), str(ipaddress.IPv4Address(ip[16:20]))
        if total == 0:  # TCP segmentation offload: the length is left to the capture
            total = len(ip) + cut
        end = min(total, len(ip))
        cut = max(0, total - len(ip))
        transport = ip[ihl:end]
    else:
        if len(ip) < 40:
            raise NotTcp("IPv6 header cut short")
        (plen,) = struct.unpack_from(">H", ip, 4)
        proto = ip[6]
        src, dst = str(ipaddress.IPv6Address(ip[8:24])), str(ipaddress.IPv6Address(ip[24:40]))
        pos = 40
        total = 40 + plen if plen else len(ip) + cut  # 0: jumbogram or offload
        while proto in _V6_EXTENSIONS:
            if len(ip) < pos + 8:
                raise NotTcp("IPv6 extension header cut short")
            proto, pos = ip[pos], pos + (ip[pos + 1] + 1) * 8
        if proto == 44:
            raise NotTcp("IPv6 fragment (not reassembled)")
        end = min(total, len(ip))
        cut = max(0, total - len(ip))
        transport = ip[pos:end]
    if proto != 6:
        raise NotTcp(f"IP protocol {proto}, not TCP")
    if len(transport) < 20:
        raise NotTcp("TCP header cut short")
    sport, dport, seq, ack, offset_flags = struct.unpack_from(">HHIIH", transport)
    header_len = (offset_flags >> 12) * 4
    if header_len < 20 or header_len > len(transport):
        raise NotTcp(f"TCP header length {header_len} does not fit the segment")
    return Segment(src, sport, dst, dport, seq, ack, offset_flags & 0x1FF, bytes(transport[header_len:]), cut)
