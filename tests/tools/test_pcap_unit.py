"""kafkawire.tools on hand-built captures: file formats, link types, TCP reassembly, Kafka pairing."""

from __future__ import annotations

import json
import random

import pytest

from kafkawire.cli.main import main
from kafkawire.protocol import DecodeError
from kafkawire.tools.capture import CaptureError, CaptureReader, read_packets, tcp_segment
from kafkawire.tools.pcap import Dissector, dissect, error_names, record_offsets, summary, topic_partitions
from kafkawire.tools.reassembly import Data, Gap, HalfStream

from .capture_builder import ACK, PSH, Capture, Clock, Conn, Seg
from .kafka_frames import api_versions, metadata, produce


def kafka(events):
    """(kind, connection id, api name, version, correlation id) of request/response events."""
    return [
        (e.kind, e.connection.id, e.api_name, e.api_version, e.correlation_id)
        for e in events
        if e.kind in ("request", "response")
    ]


def exchange(conn: Conn, pairs, req_sizes=None, resp_sizes=None):
    segs = []
    for req, resp in pairs:
        segs += conn.send(True, req, req_sizes)
        segs += conn.send(False, resp, resp_sizes)
    return segs


def simple_capture(linktype=1, client=("10.0.0.1", 40000), server=("10.0.0.2", 9092)):
    cap = Capture(linktype)
    conn = Conn(client, server)
    cap.extend(conn.handshake())
    cap.extend(
        exchange(
            conn,
            [
                api_versions(1),
                metadata(2, ["orders", "events"]),
                produce(3, "orders", 1, [b"a", b"b", b"c"], error_code=3),
            ],
        )
    )
    cap.extend(conn.close())
    return cap


EXPECTED = [
    ("request", 1, "ApiVersions", 3, 1),
    ("response", 1, "ApiVersions", 3, 1),
    ("request", 1, "Metadata", 9, 2),
    ("response", 1, "Metadata", 9, 2),
    ("request", 1, "Produce", 8, 3),
    ("response", 1, "Produce", 8, 3),
]


# --------------------------------------------------------------------------- files and link layers


@pytest.mark.parametrize("linktype", [1, 113, 276, 0, 101])
@pytest.mark.parametrize("ipv6", [False, True], ids=["ipv4", "ipv6"])
def test_link_types_and_ip_versions(linktype, ipv6):
    client, server = (("fd00::1", 40000), ("fd00::2", 9092)) if ipv6 else (("10.0.0.1", 40000), ("10.0.0.2", 9092))
    cap = simple_capture(linktype, client, server)
    events = list(dissect(cap.pcapng()))
    assert kafka(events) == EXPECTED
    assert all(e.error is None for e in events)
    assert events[0].connection.client == client and events[0].connection.server == server


@pytest.mark.parametrize("variant", ["pcap-us-le", "pcap-ns-be", "pcapng-be", "pcapng-default-resolution"])
def test_file_variants_keep_numbers_and_times(variant):
    cap = simple_capture()
    data = {
        "pcap-us-le": lambda: cap.pcap(),
        "pcap-ns-be": lambda: cap.pcap(nanos=True, big_endian=True),
        "pcapng-be": lambda: cap.pcapng(big_endian=True),
        "pcapng-default-resolution": lambda: cap.pcapng(tsresol=None),
    }[variant]()
    packets = list(read_packets(data))
    assert [p.number for p in packets] == list(range(1, len(cap.packets) + 1))
    exact = variant in ("pcap-ns-be", "pcapng-be")
    for p, (t, frame, _orig) in zip(packets, cap.packets):
        assert p.data == frame
        assert p.time_ns == (t if exact else t // 1000 * 1000)
    assert kafka(dissect(data)) == EXPECTED


@pytest.mark.parametrize("kind", ["pcap", "pcapng"])
def test_reader_fed_in_pieces_gives_the_same_packets(kind):
    cap = simple_capture()
    data = cap.pcap() if kind == "pcap" else cap.pcapng(big_endian=True)
    whole = list(read_packets(data))
    rng = random.Random(5)
    reader = CaptureReader()
    pieces = []
    pos = 0
    while pos < len(data):
        n = rng.choice([1, 2, 3, 7, 50, 333])
        pieces += reader.feed(data[pos : pos + n])
        pos += n
    assert reader.pending == 0
    assert pieces == whole and len(whole) == len(cap.packets)


def test_not_a_capture_and_truncated_file():
    with pytest.raises(CaptureError, match="not a pcap"):
        list(read_packets(b"GET / HTTP/1.1\r\n"))
    data = simple_capture().pcapng()
    whole = len(list(read_packets(data)))
    assert len(list(read_packets(data[:-7]))) == whole - 1  # a file still being written: last packet cut off


def test_tcp_segment_fields():
    cap = Capture(1)
    cap.add(Seg(("10.0.0.1", 1234), ("10.0.0.2", 9092), 0xFFFFFFF0, 77, PSH | ACK, b"hello", 5))
    (packet,) = read_packets(cap.pcap())
    seg = tcp_segment(packet)
    assert (seg.src, seg.sport, seg.dst, seg.dport, seg.seq, seg.ack, seg.payload) == (
        "10.0.0.1",
        1234,
        "10.0.0.2",
        9092,
        0xFFFFFFF0,
        77,
        b"hello",
    )
    assert seg.has_ack and not seg.syn


# --------------------------------------------------------------------------- reassembly


def test_half_stream_out_of_order_retransmitted_and_overlapping():
    hs = HalfStream()
    hs.syn(99)  # first data byte is sequence number 100
    out = []
    out += hs.segment(110, b"KLMNO", 1, 1)  # ahead of a hole
    out += hs.segment(105, b"FGHIJ", 2, 2)  # still a hole before it
    assert out == []
    out += hs.segment(100, b"ABCDEFG", 3, 3)  # fills the hole, overlaps the next segment by 2 bytes
    out += hs.segment(100, b"ABCDE", 4, 4)  # pure retransmission
    out += hs.segment(113, b"NOPQ", 5, 5)  # overlaps the tail, brings 2 new bytes
    assert b"".join(p.data for p in out) == b"ABCDEFGHIJKLMNOPQ"
    assert all(isinstance(p, Data) for p in out)
    assert [p.offset for p in out] == [0, 7, 10, 15]
    assert hs.retransmitted == 1


def test_half_stream_sequence_wraparound_and_gap_on_ack():
    hs = HalfStream()
    hs.syn(0xFFFFFFFA)
    first = hs.segment(0xFFFFFFFB, b"0123456789", 1, 1)  # wraps past 2**32
    assert first[0].data == b"0123456789"
    assert hs.segment(5 + 4, b"XYZ", 2, 2) == []  # 4 bytes lost before it
    out = hs.acked(5 + 7, 3, 3)  # the peer has them: the capture lost them
    assert [type(p) for p in out] == [Gap, Data]
    assert (out[0].offset, out[0].size) == (10, 4)
    assert out[1].data == b"XYZ" and out[1].offset == 14


# --------------------------------------------------------------------------- Kafka over TCP


def test_out_of_order_segments():
    cap = Capture()
    conn = Conn()
    cap.extend(conn.handshake())
    req, resp = metadata(7, ["a", "b", "c"])
    segs = conn.send(True, req, [5, 3, 9, 4])
    random.Random(3).shuffle(segs)
    assert [s.seq for s in segs] != sorted(s.seq for s in segs)
    cap.extend(segs)
    cap.extend(conn.send(False, resp, [20, 20, 20])[::-1])  # response segments in reverse
    events = list(dissect(cap.pcapng()))
    assert kafka(events) == [("request", 1, "Metadata", 9, 7), ("response", 1, "Metadata", 9, 7)]
    assert topic_partitions(events[0]) == {"a": [], "b": [], "c": []}
    assert topic_partitions(events[1]) == {"a": [0, 1], "b": [0, 1], "c": [0, 1]}
    assert events[0].packet == 3 + 5  # completed by the last captured segment of the request


def test_frame_split_across_many_segments():
    cap = Capture()
    conn = Conn()
    cap.extend(conn.handshake())
    req, resp = produce(1, "orders", 0, [bytes([i]) * 40 for i in range(20)])
    segs = conn.send(True, req, [1] * (len(req) - 1))
    assert len(segs) == len(req)
    cap.extend(segs)
    cap.extend(conn.send(False, resp, [1, 2, 3]))
    events = list(dissect(cap.pcapng()))
    assert kafka(events) == [("request", 1, "Produce", 8, 1), ("response", 1, "Produce", 8, 1)]
    assert record_offsets(events[0]) == list(range(20))
    assert events[0].frame == req


def test_multiple_frames_per_segment_and_frames_across_segment_boundaries():
    cap = Capture()
    conn = Conn()
    cap.extend(conn.handshake())
    pairs = [api_versions(1), metadata(2, ["x"]), produce(3, "x", 0, [b"v"]), metadata(4, ["y"])]
    requests = b"".join(r for r, _ in pairs)
    responses = b"".join(r for _, r in pairs)
    cap.extend(conn.send(True, requests, [len(pairs[0][0]) + 10]))  # one frame and a bit, then the rest
    cap.extend(conn.send(False, responses))  # all four responses in one segment
    events = list(dissect(cap.pcapng()))
    assert [(k, a, c) for k, _, a, _, c in kafka(events)] == [
        ("request", "ApiVersions", 1),
        ("request", "Metadata", 2),
        ("request", "Produce", 3),
        ("request", "Metadata", 4),
        ("response", "ApiVersions", 1),
        ("response", "Metadata", 2),
        ("response", "Produce", 3),
        ("response", "Metadata", 4),
    ]
    assert len({e.packet for e in events[4:]}) == 1


def test_two_connections_interleaved_with_the_same_correlation_ids():
    clock = Clock()
    one = Conn(("10.0.0.1", 40001), clock=clock)
    two = Conn(("10.0.0.1", 40002), clock=clock)
    a = one.handshake() + exchange(one, [metadata(1, ["one"]), produce(2, "one", 0, [b"1"], version=7)], [7])
    b = two.handshake() + exchange(two, [produce(1, "two", 1, [b"2"], error_code=6), metadata(2, ["two"])], [7])
    segs = [s for pair in zip(a, b) for s in pair]
    segs.sort(key=lambda s: s.time_ns)
    cap = Capture()
    cap.extend(segs)
    events = list(dissect(cap.pcapng()))
    by_conn = {1: [], 2: []}
    for e in events:
        by_conn[e.connection.id].append((e.kind, e.api_name, e.api_version, e.correlation_id, tuple(error_names(e))))
    assert by_conn[1] == [
        ("request", "Metadata", 9, 1, ()),
        ("response", "Metadata", 9, 1, ()),
        ("request", "Produce", 7, 2, ()),
        ("response", "Produce", 7, 2, ()),
    ]
    assert by_conn[2] == [
        ("request", "Produce", 8, 1, ()),
        ("response", "Produce", 8, 1, ("responses[0].partition_responses[0].error_code=NOT_LEADER_OR_FOLLOWER",)),
        ("request", "Metadata", 9, 2, ()),
        ("response", "Metadata", 9, 2, ()),
    ]
    assert {e.connection.client[1] for e in events if e.connection.id == 2} == {40002}


def test_retransmissions_are_ignored():
    cap = Capture()
    conn = Conn()
    cap.extend(conn.handshake())
    req, resp = metadata(5, ["r"])
    segs = conn.send(True, req, [10])
    cap.extend([segs[0], segs[0], segs[1], segs[0], segs[1]])
    cap.extend(conn.send(False, resp) * 2)
    d = Dissector()
    events = list(dissect(cap.pcapng(), dissector=d))
    assert kafka(events) == [("request", 1, "Metadata", 9, 5), ("response", 1, "Metadata", 9, 5)]
    assert d.stats.retransmitted_segments == 4


def test_gap_is_reported_and_the_next_frames_decode():
    cap = Capture()
    conn = Conn()
    cap.extend(conn.handshake())
    req1, resp1 = produce(1, "g", 0, [b"x" * 200])
    segs = conn.send(True, req1, [30, 40])
    cap.extend([segs[0], segs[2]])  # the middle segment was not captured
    cap.extend(conn.send(False, resp1))  # its ACK covers the lost bytes: the gap is certain now
    cap.extend(exchange(conn, [metadata(2, ["g"]), api_versions(3)]))
    d = Dissector()
    events = list(dissect(cap.pcapng(), dissector=d))
    gaps = [e for e in events if e.kind == "gap"]
    assert len(gaps) == 1 and gaps[0].from_client
    assert "40 bytes acknowledged but not captured" in gaps[0].note
    assert (gaps[0].api_name, gaps[0].correlation_id) == ("Produce", 1)
    # the response to the cut request still pairs (its key and version were captured)
    assert kafka(events) == [
        ("response", 1, "Produce", 8, 1),
        ("request", 1, "Metadata", 9, 2),
        ("response", 1, "Metadata", 9, 2),
        ("request", 1, "ApiVersions", 3, 3),
        ("response", 1, "ApiVersions", 3, 3),
    ]
    assert all(e.error is None for e in events)
    assert d.stats.gaps == 1 and d.stats.gap_bytes == 40


def test_gap_at_the_end_of_the_capture_and_snap_length():
    cap = Capture()
    conn = Conn()
    cap.extend(conn.handshake())
    req, _ = metadata(1, ["end"])
    req2, _ = api_versions(2)
    segs = conn.send(True, req + req2, [len(req) - 6, 3])
    cap.extend([segs[0], segs[2]])  # lost: 3 bytes of the first request
    events = list(dissect(cap.pcapng()))
    assert [e.kind for e in events] == ["gap", "skip", "request"]
    assert "3 bytes not captured" in events[0].note
    assert events[1].note.startswith("3 bytes passed over")  # the cut request's tail
    assert events[2].api_name == "ApiVersions" and events[2].error is None

    cap = Capture()
    conn = Conn()
    cap.extend(conn.handshake())
    segs = conn.send(True, req + req2, [len(req)])
    cap.add(segs[0], snaplen=14 + 20 + 20 + 10)  # only 10 payload bytes kept
    cap.add(segs[1])
    events = list(dissect(cap.pcap()))
    assert [e.kind for e in events] == ["gap", "request"]
    assert f"{len(req) - 10} bytes not captured" in events[0].note


def test_capture_starting_mid_connection_resynchronises():
    conn = Conn()
    conn.handshake()  # not captured
    pairs = [produce(1, "m", 0, [b"z" * 50]), metadata(2, ["m"]), api_versions(3)]
    segs = exchange(conn, pairs, [17])
    cap = Capture()
    cap.extend(segs[1:])  # starts with the second piece of the first request
    events = list(dissect(cap.pcapng()))
    assert [e.kind for e in events][:1] == ["skip"]
    assert kafka(events) == [
        ("request", 1, "Metadata", 9, 2),
        ("response", 1, "Metadata", 9, 2),
        ("request", 1, "ApiVersions", 3, 3),
        ("response", 1, "ApiVersions", 3, 3),
    ]
    skipped = [e for e in events if e.kind == "skip"]
    # the client's cut-off request, and the server's response to a request never seen
    assert {e.from_client for e in skipped} == {True, False}


def test_decode_errors_carry_the_offset_and_the_tool_goes_on():
    cap = Capture()
    conn = Conn()
    cap.extend(conn.handshake())
    req, resp = metadata(1, ["bad"])
    broken = bytearray(req)
    broken[-8:-6] = b"\x7f\xff"  # inside the topic name (compact string, its length byte at 16 after the size)
    cap.extend(exchange(conn, [(bytes(broken), resp), api_versions(2)]))
    events = list(dissect(cap.pcapng()))
    assert kafka(events) == [
        ("request", 1, "Metadata", 9, 1),
        ("response", 1, "Metadata", 9, 1),
        ("request", 1, "ApiVersions", 3, 2),
        ("response", 1, "ApiVersions", 3, 2),
    ]
    assert isinstance(events[0].error, DecodeError)
    assert events[0].error.offset == 16 and events[0].error.path == "Topics[0].Name"
    assert "invalid UTF-8" in events[0].error.problem
    assert "DecodeError" in summary(events[0])
    assert all(e.error is None for e in events[1:])


def test_response_to_an_unknown_correlation_id():
    cap = Capture()
    conn = Conn()
    cap.extend(conn.handshake())
    req, _ = metadata(1, ["u"])
    _, resp = metadata(99, ["u"])
    cap.extend(exchange(conn, [(req, resp)]))
    events = list(dissect(cap.pcapng()))
    assert events[1].kind == "response" and events[1].correlation_id == 99
    assert "no request with correlation id 99" in str(events[1].error)


def test_a_response_that_overtakes_an_earlier_request_pairs_and_says_so():
    cap = Capture()
    conn = Conn()
    cap.extend(conn.handshake())
    first, second = metadata(1, ["early"]), api_versions(2)
    cap.extend(conn.send(True, first[0] + second[0]))
    cap.extend(conn.send(False, second[1] + first[1]))  # Kafka answers in order on a connection; this peer did not
    events = list(dissect(cap.pcapng()))
    assert kafka(events) == [
        ("request", 1, "Metadata", 9, 1),
        ("request", 1, "ApiVersions", 3, 2),
        ("response", 1, "ApiVersions", 3, 2),
        ("response", 1, "Metadata", 9, 1),
    ]
    assert all(e.error is None for e in events)
    assert events[2].note == "answered before the earlier request with correlation id 1"
    assert summary(events[2]).endswith("answered before the earlier request with correlation id 1")
    assert events[3].note == ""


def test_acks_zero_produce_expects_no_response():
    cap = Capture()
    conn = Conn()
    cap.extend(conn.handshake())
    for version in (3, 8, 9):
        req, _ = produce(version, "z", 0, [b"q"], acks=0, version=version)
        cap.extend(conn.send(True, req))
    req, resp = produce(10, "z", 0, [b"q"], acks=1)
    cap.extend(exchange(conn, [(req, resp)]))
    d = Dissector()
    events = list(dissect(cap.pcapng(), dissector=d))
    assert [e.kind for e in events] == ["request"] * 4 + ["response"]
    assert [e.api_version for e in events] == [3, 8, 9, 8, 8]
    assert d.stats.unanswered == 0


def test_port_autodetection():
    cap = Capture()
    kafka_conn = Conn(server=("10.0.0.2", 19092))
    http = Conn(("10.0.0.1", 40001), ("10.0.0.3", 8080), clock=kafka_conn.clock)
    cap.extend(kafka_conn.handshake() + http.handshake())
    cap.extend(http.send(True, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
    cap.extend(exchange(kafka_conn, [api_versions(1)]))
    cap.extend(http.send(False, b"HTTP/1.1 200 OK\r\n\r\n"))
    data = cap.pcapng()
    d = Dissector()
    assert kafka(dissect(data, dissector=d)) == [
        ("request", 1, "ApiVersions", 3, 1),
        ("response", 1, "ApiVersions", 3, 1),
    ]
    assert (d.stats.kafka_connections, d.stats.other_connections) == (1, 1)
    assert list(dissect(data, autodetect=False)) == []
    assert len(kafka(dissect(data, ports=[19092], autodetect=False))) == 2


def test_ports_reused_by_a_new_connection():
    cap = Capture()
    clock = Clock()
    first = Conn(clock=clock)
    second = Conn(client_isn=777777, server_isn=888888, clock=clock)
    cap.extend(first.handshake() + exchange(first, [api_versions(1)]))  # no FIN captured
    cap.extend(second.handshake() + exchange(second, [api_versions(1)]) + second.close())
    events = list(dissect(cap.pcapng()))
    assert kafka(events) == [
        ("request", 1, "ApiVersions", 3, 1),
        ("response", 1, "ApiVersions", 3, 1),
        ("request", 2, "ApiVersions", 3, 1),
        ("response", 2, "ApiVersions", 3, 1),
    ]


# --------------------------------------------------------------------------- the CLI


def test_cli_text_json_and_annotate(tmp_path, capsys):
    path = tmp_path / "c.pcapng"
    path.write_bytes(simple_capture().pcapng())
    assert main(["pcap", str(path)]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 6
    assert "-> Produce v8 corr=3 client=unit orders[1] 3 records" in lines[4]
    assert "<- Produce v8 corr=3" in lines[5] and "UNKNOWN_TOPIC_OR_PARTITION" in lines[5]
    assert "6 requests" not in err and "3 requests, 3 responses, 0 not decoded" in err

    assert main(["pcap", str(path), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr()[0].splitlines()]
    assert [(r["kind"], r["api_name"], r["correlation_id"]) for r in rows] == [(k, a, c) for k, _, a, _, c in EXPECTED]
    assert rows[5]["errors"] == ["responses[0].partition_responses[0].error_code=UNKNOWN_TOPIC_OR_PARTITION"]
    assert rows[3]["topics"] == {"orders": [0, 1], "events": [0, 1]}
    assert rows[0]["client_id"] == "unit" and rows[1]["request_packet"] == rows[0]["packet"]

    assert main(["pcap", str(path), "--annotate"]) == 0
    out = capsys.readouterr()[0]
    assert "client_id" in out.lower() or "ClientId" in out
    assert "UNKNOWN_TOPIC_OR_PARTITION" in out and "partition_responses" in out.lower().replace(
        "partitionresponses", "partition_responses"
    )

    assert main(["pcap", str(path), "--json", "--annotate"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr()[0].splitlines()]
    assert all(r["annotations"] for r in rows)
    assert rows[4]["value"]["topic_data"][0]["name"] == "orders"


def test_cli_exit_codes(tmp_path, capsys):
    bad = tmp_path / "bad.pcapng"
    cap = Capture()
    conn = Conn()
    req, resp = metadata(1, ["bad"])
    cap.extend(conn.handshake() + exchange(conn, [(req[:-3] + b"\xff\xff\xff", resp)]))
    bad.write_bytes(cap.pcapng())
    assert main(["pcap", str(bad)]) == 1
    out = capsys.readouterr()[0]
    assert "DecodeError" in out and "at byte" in out
    text = tmp_path / "text.pcap"
    text.write_bytes(b"hello, not a capture")
    assert main(["pcap", str(text)]) == 2
    assert "not a pcap or pcapng file" in capsys.readouterr()[1]
    assert main(["pcap", str(tmp_path / "missing.pcap")]) == 2
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    assert main(["pcap", str(empty)]) == 2
    assert "too short" in capsys.readouterr()[1]
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(simple_capture().pcapng()[:-9])  # still being written
    assert main(["pcap", str(cut)]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 6 and "the capture ends inside a packet" in err


def test_server_first_protocols_are_not_kafka_and_empty_connections_get_no_number():
    clock = Clock()
    idle = Conn(("10.0.0.1", 40001), clock=clock)  # to the Kafka port, but never sends a byte
    smtp = Conn(("10.0.0.1", 40002), ("10.0.0.3", 2525), clock=clock)
    busy = Conn(("10.0.0.1", 40003), clock=clock)
    cap = Capture()
    cap.extend(idle.handshake() + smtp.handshake())
    cap.extend(smtp.send(False, b"220 mail.example ESMTP ready\r\n" * 3))  # the server speaks first
    cap.extend(smtp.send(True, b"EHLO x\r\n"))
    cap.extend(busy.handshake() + exchange(busy, [api_versions(1)]) + idle.close())
    d = Dissector()
    events = list(dissect(cap.pcapng(), dissector=d))
    assert kafka(events) == [("request", 1, "ApiVersions", 3, 1), ("response", 1, "ApiVersions", 3, 1)]
    assert events[0].connection.client == ("10.0.0.1", 40003)
    assert (d.stats.kafka_connections, d.stats.other_connections) == (1, 1)


def _perturb(rng: random.Random, segs: list[Seg]) -> list[Seg]:
    """Segments as a capture might show them: neighbours swapped, some duplicated, some resent merged."""
    out = list(segs)
    for i in range(len(out) - 1):
        if rng.random() < 0.3:
            out[i], out[i + 1] = out[i + 1], out[i]
    extra = []
    for i, s in enumerate(segs):
        if rng.random() < 0.15:
            extra.append((i, Seg(s.src, s.dst, s.seq, s.ack, s.flags, s.payload, s.time_ns)))
        if i + 1 < len(segs) and rng.random() < 0.1:  # a retransmission covering two segments at once
            nxt = segs[i + 1]
            extra.append((i + 1, Seg(s.src, s.dst, s.seq, nxt.ack, s.flags, s.payload + nxt.payload, nxt.time_ns)))
    for i, s in sorted(extra, key=lambda x: -x[0]):
        out.insert(min(len(out), i + rng.randint(1, 3)), s)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_random_segmentation_reordering_and_retransmission(seed):
    rng = random.Random(seed)
    clock = Clock()
    conns = [
        Conn(("10.0.0.1", 41000 + i), client_isn=rng.randrange(1 << 32), server_isn=rng.randrange(1 << 32), clock=clock)
        for i in range(3)
    ]
    streams = []
    expected = {}
    for n, conn in enumerate(conns):
        blocks = [conn.handshake()]
        expected[conn.client] = []
        for corr in range(1, 9):
            kind = rng.choice(["versions", "metadata", "produce"])
            name = {"versions": "ApiVersions", "metadata": "Metadata", "produce": "Produce"}[kind]
            expected[conn.client] += [("request", name, corr), ("response", name, corr)]
            if kind == "versions":
                pair = api_versions(corr)
            elif kind == "metadata":
                pair = metadata(corr, [f"t{n}-{i}" for i in range(rng.randint(0, 30))])
            else:
                pair = produce(corr, f"t{n}", rng.randint(0, 5), [bytes([corr]) * rng.randint(0, 3000)] * 3)
            for from_client, frame in ((True, pair[0]), (False, pair[1])):
                sizes = [rng.randint(1, 300) for _ in range(len(frame) // 50 + 1)]
                blocks.append(_perturb(rng, conn.send(from_client, frame, sizes)))
        blocks.append(conn.close())
        streams.append([s for block in blocks for s in block])
    merged = []
    while any(streams):  # interleave the connections, each in its own order
        stream = rng.choice([s for s in streams if s])
        merged.append(stream.pop(0))
    cap = Capture(rng.choice([1, 113, 276, 0, 101]))
    cap.extend(merged)
    d = Dissector()
    events = list(dissect(cap.pcapng(), dissector=d))
    assert [e for e in events if e.kind not in ("request", "response") or e.error is not None] == []
    for conn in conns:
        mine = [(e.kind, e.api_name, e.correlation_id) for e in events if e.connection.client == conn.client]
        assert mine == expected[conn.client]
    assert d.stats.gaps == 0 and d.stats.retransmitted_segments > 0


def test_unknown_api_key_and_version_still_pair():
    cap = Capture()
    conn = Conn()
    cap.extend(conn.handshake())
    unknown_key = bytes.fromhex("0000000e03e70000000000050004756e6974")  # key 999, corr 5
    _, meta_resp = metadata(6, ["x"])
    too_new = bytearray(metadata(6, ["x"])[0])
    too_new[6:8] = (99).to_bytes(2, "big")  # Metadata v99
    cap.extend(
        exchange(
            conn, [(unknown_key, b"\x00\x00\x00\x05\x00\x00\x00\x05\x00"), (bytes(too_new), meta_resp), api_versions(7)]
        )
    )
    events = list(dissect(cap.pcapng()))
    assert [(e.kind, e.api_name, e.api_version, e.correlation_id) for e in events] == [
        ("request", "api999", 0, 5),
        ("response", "api999", 0, 5),
        ("request", "Metadata", 99, 6),
        ("response", "Metadata", 99, 6),
        ("request", "ApiVersions", 3, 7),
        ("response", "ApiVersions", 3, 7),
    ]
    assert "unknown API key 999" in str(events[0].error) and "unknown API key 999" in str(events[1].error)
    assert "99" in str(events[2].error) and events[3].error is not None
    assert events[4].error is None and events[5].error is None


def test_cli_reads_stdin_and_takes_several_ports(tmp_path, capsys, monkeypatch):
    import io
    import sys

    cap = Capture()
    one = Conn(server=("10.0.0.2", 19092))
    two = Conn(("10.0.0.1", 40001), ("10.0.0.2", 29092), clock=one.clock)
    cap.extend(one.handshake() + exchange(one, [api_versions(1)]))
    cap.extend(two.handshake() + exchange(two, [api_versions(1)]))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(cap.pcap())))
    assert main(["pcap", "-", "--no-autodetect", "--port", "19092", "-p", "29092", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr()[0].splitlines()]
    assert [(r["connection"], r["server"][1], r["kind"]) for r in rows] == [
        (1, 19092, "request"),
        (1, 19092, "response"),
        (2, 29092, "request"),
        (2, 29092, "response"),
    ]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(cap.pcap())))
    assert main(["pcap", "-", "--no-autodetect", "--port", "19092"]) == 0
    assert len(capsys.readouterr()[0].splitlines()) == 2
