"""A real capture: confluent-kafka and kafka-python against kafkawire's broker, read by kafkawire pcap and tshark.

One capture (dumpcap on the loopback interface, filtered to the broker's port)
holds: confluent-kafka creating a topic, producing lz4 batches to two
partitions and consuming them in a group; kafka-python doing the same with
its newest versions (gzip), pinned to 0.10.1 (magic 1 gzip message sets) and
to 1.0 (snappy batches) and to 2.0 (lz4 batches); and admin requests the broker refuses
(TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION).

Every frame must decode. Then Wireshark's Kafka dissector is the independent
reading: the two must find the same PDUs (frame, direction, correlation id),
the same API key, version and client id, and, wherever tshark decodes the
body, the same topic names, partitions, error codes, offsets (record offsets
included), record keys, values and header keys, and some thirty other fields
(group and member ids, generations, hosts and ports, timeouts, ...). tshark
says itself which versions it does not decode ("Unsupported Metadata version.
Supports v0-9."); those bodies are skipped, by its own flag, and nothing else
is.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest

from kafkawire.protocol.errors import error_for
from kafkawire.protocol.records import iter_batches
from kafkawire.testing import KafkaBroker
from kafkawire.testing._process import terminate
from kafkawire.tools.pcap import Dissector, dissect

from . import traffic
from .tshark import SCALAR_FIELDS, dissect as tshark_dissect, ours, tshark_binary, tshark_version

pytestmark = pytest.mark.timeout(240)

TOPICS = {"ck": "pcap-ck", "kp": "pcap-kp", "kp0101": "pcap-kp-old", "kp10": "pcap-kp-v1", "kp20": "pcap-kp-v2"}
MISSING_TOPIC = "pcap-no-such-topic"


def _start_capture(port: int, path, log) -> subprocess.Popen:
    """dumpcap on lo, returned once it has seen packets: empty connections to the port until it counts one
    (its "Capturing on" comes before the filter is live; the probes carry no Kafka bytes, so no events)."""
    proc = subprocess.Popen(
        ["dumpcap", "-i", "lo", "-B", "32", "-f", f"tcp port {port}", "-w", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=open(log, "w"),
        start_new_session=True,
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        text = log.read_text()
        if re.search(r"Packets(?: captured)?: [1-9]", text):
            time.sleep(0.2)
            return proc
        if proc.poll() is not None:
            pytest.skip(f"dumpcap cannot capture on lo here (exit {proc.returncode}): {text.strip()[-300:]}")
        if "Capturing on" in text:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                pass
        time.sleep(0.1)
    proc.kill()
    proc.wait(5)
    pytest.skip("dumpcap did not capture the probe connections on lo within 15 s")


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    """(path of the capture, broker port, what the clients read and reported)."""
    if shutil.which("dumpcap") is None or tshark_binary() is None:
        pytest.skip("tshark/dumpcap not installed (Debian package tshark; tools/run-tests installs it)")
    pytest.importorskip("confluent_kafka")
    pytest.importorskip("kafka")
    tmp = tmp_path_factory.mktemp("pcap-real")
    path = tmp / "clients.pcapng"
    with KafkaBroker(storage="memory", data_dir=tmp / "broker") as broker:
        dumpcap = _start_capture(broker.port, path, tmp / "dumpcap.log")
        try:
            results = {
                "ck": traffic.confluent(broker.bootstrap, TOPICS["ck"]),
                "kp": traffic.kafka_python(broker.bootstrap, TOPICS["kp"]),
                "kp0101": traffic.kafka_python(broker.bootstrap, TOPICS["kp0101"], api_version=(0, 10, 1)),
                "kp10": traffic.kafka_python(
                    broker.bootstrap, TOPICS["kp10"], api_version=(1, 0), compression="snappy"
                ),
                "kp20": traffic.kafka_python(broker.bootstrap, TOPICS["kp20"], api_version=(2, 0), compression="lz4"),
                "errors": traffic.error_round_trips(broker.bootstrap, TOPICS["ck"], MISSING_TOPIC),
            }
            time.sleep(0.3)  # the last segments reach the capture
        finally:
            terminate(dumpcap)  # SIGTERM: dumpcap writes out what it holds
        yield path, broker.port, results


@pytest.fixture(scope="module")
def events(capture):
    path, port, _ = capture
    d = Dissector([port])
    found = list(dissect(path.read_bytes(), dissector=d))
    return found, d.stats


def test_the_clients_did_their_work(capture):
    _, _, results = capture
    for client in TOPICS:
        assert len(results[client]) == traffic.N_RECORDS, client
    assert "TOPIC_ALREADY_EXISTS" in results["errors"]["ck create existing"]
    assert "UNKNOWN_TOPIC_OR_PART" in results["errors"]["ck delete missing"]
    assert results["errors"]["kp create existing"] == "TopicAlreadyExistsError"


def test_every_frame_decodes_and_pairs(events):
    found, stats = events
    assert stats.gaps == 0 and stats.decode_errors == 0
    assert [e for e in found if e.kind not in ("request", "response")] == []
    assert [str(e.error) for e in found if e.error is not None] == []
    requests = [e for e in found if e.kind == "request"]
    responses = [e for e in found if e.kind == "response"]
    assert len(requests) > 80
    # every response found its request; a request stays open only when its client closed the connection
    # without waiting: a broker answers in order, so no later request on that connection was answered
    assert all(r.request_packet is not None for r in responses)
    answered = {(r.connection, r.correlation_id) for r in responses}
    last_answered = collections.defaultdict(lambda: -1)
    for r in responses:
        last_answered[r.connection] = max(last_answered[r.connection], r.correlation_id)
    open_requests = [r for r in requests if (r.connection, r.correlation_id) not in answered]
    assert all(r.correlation_id > last_answered[r.connection] for r in open_requests)
    assert len(open_requests) <= len({r.connection for r in open_requests}) * 2
    assert stats.unanswered == len(open_requests) == len(requests) - len(responses)
    apis = {e.api_name for e in found}
    assert {
        "ApiVersions",
        "Metadata",
        "CreateTopics",
        "DeleteTopics",
        "Produce",
        "Fetch",
        "ListOffsets",
        "FindCoordinator",
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "OffsetCommit",
        "OffsetFetch",
        "LeaveGroup",
    } <= apis
    client_ids = {e.client_id for e in requests}
    assert {"ck-producer", "ck-consumer", "kp-producer", "kp0101-producer", "kp10-consumer"} <= client_ids
    # what the clients read is what the capture shows being fetched: every record of every topic
    fetched = collections.defaultdict(set)
    for e in responses:
        if e.api_name != "Fetch":
            continue
        for topic in e.body.responses:
            name = topic.topic if e.api_version < 13 else e.topic_names.get(str(topic.topic_id))
            for partition in topic.partitions:
                for batch in iter_batches(partition.records or b""):
                    fetched[name] |= {(partition.partition_index, r.offset) for r in batch.records()}
    for topic in TOPICS.values():
        assert len(fetched[topic]) == traffic.N_RECORDS, (topic, sorted(fetched[topic]))


def test_cli_reads_the_capture(capture, events):
    path, port, _ = capture
    found, _ = events
    proc = subprocess.run(
        [sys.executable, "-m", "kafkawire", "pcap", str(path), "--port", str(port), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["packet"], r["kind"], r["correlation_id"]) for r in rows] == [
        (e.packet, e.kind, e.correlation_id) for e in found
    ]
    assert "0 not decoded, 0 gaps" in proc.stderr
    # the same capture found without --port: every connection is recognised from its first request
    d = Dissector([], autodetect=True)
    auto = [(e.packet, e.kind, e.correlation_id) for e in dissect(path.read_bytes(), dissector=d)]
    assert auto == [(e.packet, e.kind, e.correlation_id) for e in found]


def test_agrees_with_tshark(capture, events):
    path, port, _ = capture
    found, _ = events
    pdus = tshark_dissect(path, port)
    mine = {(e.packet, e.from_client, e.correlation_id): e for e in found if e.kind in ("request", "response")}
    theirs = {(p.frame, p.is_request, p.correlation_id): p for p in pdus}
    assert len(theirs) == len(pdus), "two PDUs with the same frame, direction and correlation id"
    # the same frames, split the same way
    assert sorted(theirs) == sorted(mine)

    skipped = collections.Counter()
    compared = collections.Counter()
    nonzero_errors = set()
    topics_seen = set()
    offsets_compared = 0
    records_compared = 0
    scalars_compared = collections.Counter()
    unsupported_requests = set()
    for key in sorted(theirs):
        pdu, event = theirs[key], mine[key]
        where = f"frame {pdu.frame} {event.kind} {event.api_name} v{event.api_version} corr {event.correlation_id}"
        if pdu.is_request:
            assert int(pdu.first("kafka.request_key")) == event.api_key, where
            assert int(pdu.first("kafka.api_version")) == event.api_version, where
            tshark_client = pdu.first("kafka.client_id")
            assert (tshark_client if tshark_client != "[ Null ]" else "") == event.client_id, where
        elif "kafka.request_missing" in pdu.fields:
            # tshark lost the request: only acceptable when it could not decode that request itself
            assert (event.request_packet, event.correlation_id) in unsupported_requests, where
            skipped[f"{event.api_name} v{event.api_version} response: tshark lost its unsupported request"] += 1
            continue
        else:
            assert int(pdu.first("kafka.response_key")) == event.api_key, where
            assert int(pdu.first("kafka.response.version")) == event.api_version, where
        if pdu.unsupported:
            if pdu.is_request:
                unsupported_requests.add((pdu.frame, event.correlation_id))
            skipped[f"{event.api_name} v{event.api_version}: {pdu.unsupported}"] += 1
            continue
        assert not pdu.malformed, f"{where}: tshark finds the frame malformed"
        expected = ours(event)
        assert pdu.fields.get("kafka.topic_name", []) == expected["topic_name"], where
        assert pdu.ints("kafka.partition_id") == expected["partition_id"], where
        assert pdu.ints("kafka.error") == expected["error"], where
        assert pdu.ints("kafka.offset") == expected["offset"], where
        for name, values in expected["scalars"].items():
            assert pdu.fields.get(name, []) == values, f"{where}: {name}"
            scalars_compared[name] += len(values)
        if expected["legacy_messages"]:
            # Wireshark 4.0 reads magic 1 messages one byte off after the attributes (timestamp, key and
            # value come out wrong; the clients read back exactly what kafkawire decodes), so only their
            # offsets are compared
            skipped[f"{event.api_name} v{event.api_version}: keys/values of magic 1 messages"] += 1
        else:
            assert pdu.fields.get("kafka.message_key", []) == expected["message_key"], where
            assert pdu.fields.get("kafka.message_value", []) == expected["message_value"], where
            assert pdu.fields.get("kafka.header_key", []) == expected["header_key"], where
            records_compared += len(expected["message_key"])
        if event.api_name == "ApiVersions" and not pdu.is_request:
            assert [(pdu.ints(f"kafka.api_versions.{n}")) for n in ("api_key", "min_version", "max_version")] == [
                [getattr(k, n) for k in event.body.api_keys] for n in ("api_key", "min_version", "max_version")
            ], where
        compared[f"{event.api_name} v{event.api_version}"] += 1
        nonzero_errors |= {error_for(c).name for c in expected["error"] if c}
        topics_seen |= set(expected["topic_name"])
        offsets_compared += len(expected["offset"])

    print(f"{tshark_version()}\ncompared: {dict(compared)}\nskipped: {dict(skipped)}")  # shown with -rP
    # the comparison covered what matters, not just headers
    assert sum(compared.values()) > 60
    for api in (
        "Produce",
        "Fetch",
        "Metadata",
        "OffsetCommit",
        "OffsetFetch",
        "ListOffsets",
        "JoinGroup",
        "CreateTopics",
    ):
        assert any(k.startswith(api + " ") for k in compared), f"no {api} body compared: {compared}"
    assert {"MEMBER_ID_REQUIRED", "TOPIC_ALREADY_EXISTS"} <= nonzero_errors
    assert {TOPICS["kp0101"], TOPICS["kp10"], TOPICS["ck"]} <= topics_seen
    assert offsets_compared > 20
    assert records_compared >= 4 * traffic.N_RECORDS  # produced and fetched in snappy and lz4 batches
    assert [name for name in SCALAR_FIELDS if not scalars_compared[name]] == [], "fields never compared"


def test_a_packet_lost_from_the_real_capture(capture, events, tmp_path):
    """Drop the packet carrying one Produce request: a gap, an unpaired response, everything else intact."""
    from kafkawire.tools.capture import read_packets

    from .capture_builder import Capture

    path, port, _ = capture
    found, _ = events
    victim = next(
        e for e in found if e.kind == "request" and e.api_name == "Produce" and e.client_id == "kp10-producer"
    )
    packets = list(read_packets(path.read_bytes()))
    assert len({p.linktype for p in packets}) == 1
    lossy = Capture(packets[0].linktype)
    lossy.packets = [(p.time_ns, p.data, p.orig_len) for p in packets if p.number != victim.packet]
    lossy_path = tmp_path / "lossy.pcapng"
    lossy_path.write_bytes(lossy.pcapng())

    d = Dissector([port])
    after = list(dissect(lossy_path.read_bytes(), dissector=d))
    renumber = lambda n: n - (n > victim.packet)  # noqa: E731 - frame numbers after the dropped one shift by one
    gaps = [e for e in after if e.kind == "gap"]
    assert len(gaps) == 1 and gaps[0].from_client and gaps[0].connection.client == victim.connection.client
    assert f"{len(victim.frame)} bytes acknowledged but not captured" in gaps[0].note
    unpaired = [e for e in after if e.error is not None]
    assert [(e.kind, e.correlation_id) for e in unpaired] == [("response", victim.correlation_id)]
    assert "no request with correlation id" in str(unpaired[0].error)
    # everything else is found and decoded as before (in frames numbered one lower after the hole)
    expected = []
    for e in found:
        if e is victim:
            continue
        answer = (
            e.kind == "response" and e.connection == victim.connection and e.correlation_id == victim.correlation_id
        )
        expected.append(
            (renumber(e.packet), e.kind, e.connection.client, e.correlation_id, None if answer else e.api_name)
        )
    assert [
        (e.packet, e.kind, e.connection.client, e.correlation_id, e.api_name) for e in after if e.kind != "gap"
    ] == expected
    # tshark sees the same hole
    proc = subprocess.run(
        [
            tshark_binary(),
            "-r",
            str(lossy_path),
            "-Y",
            "tcp.analysis.lost_segment || tcp.analysis.ack_lost_segment",
            "-T",
            "fields",
            "-e",
            "tcp.srcport",
            "-e",
            "tcp.dstport",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    ports = {tuple(sorted(map(int, line.split()))) for line in proc.stdout.splitlines()}
    assert ports == {tuple(sorted((victim.connection.client[1], port)))}
