"""``kafkawire proxy`` as a command: JSON lines, filters, the summary on SIGTERM, and a pcapng file that
``kafkawire pcap`` reads back with the same exchanges. Also the filters and the pcapng writer alone."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys

import pytest

from kafkawire.protocol.api_keys import ApiKey
from kafkawire.protocol.messages import MetadataRequest
from kafkawire.protocol.rpc import encode_request, request_header
from kafkawire.proxy.pcapng import PcapngWriter
from kafkawire.proxy.report import Exchange, Filters
from kafkawire.tools.capture import read_packets, tcp_segment
from kafkawire.tools.pcap import Connection


def _start(upstream: str, *extra: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkawire", "proxy", "--listen", "127.0.0.1:0", "--upstream", upstream, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stderr.readline()
    found = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
    if not found:
        proc.kill()
        raise AssertionError(f"no listening line: {line!r} {proc.communicate(timeout=10)}")
    return proc, f"127.0.0.1:{found.group(1)}"


def _stop(proc: subprocess.Popen) -> tuple[str, str]:
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return out, err


def _missing_topic_metadata(bootstrap: str) -> None:
    """A Metadata request for a topic that does not exist, auto-creation off: UNKNOWN_TOPIC_OR_PARTITION."""
    host, port = bootstrap.rsplit(":", 1)
    body = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="no-such-topic")], allow_auto_topic_creation=False
    )
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(encode_request(request_header(ApiKey.METADATA, 9, 77, "debug-me"), body))
        size = int.from_bytes(s.recv(4, socket.MSG_WAITALL), "big")
        assert len(s.recv(size, socket.MSG_WAITALL)) == size


def _produce(bootstrap: str, topic: str) -> None:
    from kafkawire.client import Producer

    with Producer(bootstrap, client_id="cli-test") as producer:
        for i in range(3):
            producer.produce(topic, f"v{i}".encode())
        producer.flush()


def test_json_lines_summary_and_a_pcap_that_kafkawire_pcap_reads(kafkawire_upstream, tmp_path):
    capture = tmp_path / "proxy.pcapng"
    proc, bootstrap = _start(kafkawire_upstream, "--json", "--pcap", str(capture))
    try:
        _produce(bootstrap, "proxy-cli")
        _missing_topic_metadata(bootstrap)
    finally:
        out, err = _stop(proc)
    lines = [json.loads(line) for line in out.splitlines()]
    assert all(line["latency_ms"] is not None for line in lines if line["api_name"] == "Produce")
    assert [line["api_name"] for line in lines].count("Produce") >= 1
    assert {line["client_id"] for line in lines} == {"cli-test", "debug-me"}
    missing = [line for line in lines if line["client_id"] == "debug-me"]
    assert len(missing) == 1 and missing[0]["errors"] == ["topics[0].error_code=UNKNOWN_TOPIC_OR_PARTITION"]
    assert missing[0]["correlation_id"] == 77 and missing[0]["api_version"] == 9
    # the summary, on SIGTERM
    assert re.search(r"^\s+Produce\s+\d+\s+0\s", err, re.M), err
    assert "Metadata UNKNOWN_TOPIC_OR_PARTITION x1" in err
    # the capture reads back with kafkawire pcap: the same exchanges, all decoded
    result = subprocess.run(
        [sys.executable, "-m", "kafkawire", "pcap", "--json", str(capture)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    responses = [(e["api_name"], e["correlation_id"], e["errors"]) for e in events if e["kind"] == "response"]
    assert sorted(responses, key=str) == sorted(
        ((line["api_name"], line["correlation_id"], line["errors"]) for line in lines), key=str
    )
    assert not [e for e in events if e["kind"] not in ("request", "response")]
    # and Wireshark opens it: its Kafka dissector finds the same requests
    tshark = shutil.which("tshark")
    if tshark is None:
        if os.environ.get("CI"):
            pytest.fail("tshark is required in CI (tools/run-tests installs it)")
        pytest.skip("tshark not installed")
    ports = {bootstrap.rsplit(":", 1)[1]} | {r["local"].rsplit(":", 1)[1] for line in lines for r in line["rewritten"]}
    decode_as = [arg for port in sorted(ports) for arg in ("-d", f"tcp.port=={port},kafka")]
    seen = subprocess.run(
        [
            tshark,
            "-r",
            str(capture),
            *decode_as,
            "-Y",
            "kafka.request_key",
            "-T",
            "fields",
            "-e",
            "kafka.correlation_id",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert seen.returncode == 0, seen.stderr
    ids = sorted(int(c) for row in seen.stdout.split() for c in row.split(","))
    assert ids == sorted(line["correlation_id"] for line in lines)


def test_filters_choose_the_lines_and_the_summary_counts_everything(kafkawire_upstream):
    proc, bootstrap = _start(kafkawire_upstream, "--errors-only", "--api", "metadata,produce")
    try:
        _produce(bootstrap, "proxy-cli")
        _missing_topic_metadata(bootstrap)
    finally:
        out, err = _stop(proc)
    lines = out.splitlines()
    assert len(lines) == 1, out
    assert "client=debug-me Metadata v9 corr=77" in lines[0]
    assert "topics[0].error_code=UNKNOWN_TOPIC_OR_PARTITION" in lines[0]
    assert re.search(r"^\s+Produce\s+\d+\s+0\s", err, re.M), err  # not printed, still counted


def _exchange(api_key, client_id, topics, errors, problem=None) -> Exchange:
    ex = Exchange(
        0, Connection(1, ("127.0.0.1", 1), ("127.0.0.1", 2)), api_key, 1, 1, client_id=client_id, problem=problem
    )
    ex.topics, ex.errors = topics, errors
    return ex


def test_filters():
    produce = _exchange(0, "rdkafka", {"orders": [0]}, [])
    failed = _exchange(3, "app-7", {"orders-typo": []}, ["topics[0].error_code=UNKNOWN_TOPIC_OR_PARTITION"])
    unreadable = _exchange(999, "x", {}, [], problem="request does not decode")
    assert Filters({"produce"}).accepts(produce) and not Filters({"produce"}).accepts(failed)
    assert Filters({"3"}).accepts(failed)
    assert Filters(client_ids=["app-*"]).accepts(failed) and not Filters(client_ids=["app-*"]).accepts(produce)
    assert Filters(topics=["orders"]).accepts(produce) and not Filters(topics=["orders"]).accepts(failed)
    assert Filters(topics=["orders*"]).accepts(failed)
    errors_only = Filters(errors_only=True)
    assert [errors_only.accepts(e) for e in (produce, failed, unreadable)] == [False, True, True]


def test_pcapng_writer_makes_packets_the_capture_reader_reads_back():
    out = bytearray()
    writer = PcapngWriter(out.extend)
    flow = writer.flow(("127.0.0.1", 50000), ("127.0.0.1", 19092), 1_000_000_000)
    flow.data(True, b"a" * 70_000, 1_000_000_500)  # more than one made-up segment
    flow.data(False, b"bc", 1_000_001_000)
    flow.close(1_000_002_000)
    v6 = writer.flow(("::1", 50001), ("::1", 19093), 1_000_003_000)
    v6.data(True, b"six", 1_000_003_001)
    packets = list(read_packets(bytes(out)))
    segments = [tcp_segment(p) for p in packets]
    assert packets[0].time_ns == 1_000_000_000 and packets[3].time_ns == 1_000_000_500
    client_bytes = b"".join(s.payload for s in segments[:8] if (s.sport, s.dport) == (50000, 19092))
    server_bytes = b"".join(s.payload for s in segments[:8] if (s.sport, s.dport) == (19092, 50000))
    assert (client_bytes, server_bytes) == (b"a" * 70_000, b"bc")
    assert [s.syn for s in segments[:3]] == [True, True, False]
    assert segments[3].seq == segments[0].seq + 1 and segments[4].seq == segments[3].seq + 65_000
    assert segments[-1].src == "::1" and segments[-1].payload == b"six"


def test_annotate_prints_both_frames_field_by_field():
    from kafkawire.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
    from kafkawire.protocol.rpc import encode_response
    from kafkawire.proxy.report import Reporter, to_json

    request = encode_request(
        request_header(ApiKey.API_VERSIONS, 3, 5, "annotated"),
        ApiVersionsRequest(client_software_name="sw", client_software_version="1"),
    )
    AV = ApiVersionsResponse.ApiVersion
    response = encode_response(5, ApiVersionsResponse(api_keys=[AV(api_key=0, min_version=0, max_version=11)]), 3)
    ex = Exchange(
        0,
        Connection(1, ("127.0.0.1", 1), ("127.0.0.1", 2)),
        ApiKey.API_VERSIONS,
        3,
        5,
        request_payload=request[4:],
        response_payload=response[4:],
        latency_ns=1000,
    )
    out = io.StringIO()
    Reporter(out, annotate=True).exchange(ex)
    text = out.getvalue()
    assert "client=annotated ApiVersions v3 corr=5" in text.splitlines()[0]
    request_part, response_part = text.split("  response:")
    assert "ClientSoftwareName" in request_part and '"sw"' in request_part
    assert "MaxVersion" in response_part and "11" in response_part
    as_json = json.loads(to_json(ex, annotate=True))
    assert [a["path"] for a in as_json["request_annotations"]][:1] and as_json["response_annotations"]
