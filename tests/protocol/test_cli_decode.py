"""``kafkawire decode`` run as a real subprocess on the exact frames."""

from __future__ import annotations

import json
import subprocess
import sys

from .frames import (
    API_VERSIONS_REQUEST_V3,
    DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0,
    DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0,
    DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0_AS_GIVEN,
)


def kafkawire(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafkawire", "decode", *args], input=stdin, capture_output=True, text=True, timeout=60
    )


def test_request_frame_is_annotated():
    run = kafkawire(API_VERSIONS_REQUEST_V3.hex())
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].split() == ["offset", "bytes", "field", "type", "value"]
    assert any(line.split()[:6] == ["0", "00", "00", "00", "26", "size"] for line in lines)
    api_key = next(line for line in lines if "RequestApiKey" in line)
    assert api_key.split()[:4] == ["4", "00", "12", "RequestApiKey"] and "18  (ApiVersions)" in api_key
    client = next(line for line in lines if "ClientId" in line)
    assert client.split()[:6] == ["12", "00", "02", "63", "31", "ClientId"] and '"c1"' in client
    assert any(
        "ClientSoftwareName" in line and '"apache-kafka-java"' in line and line.split()[0] == "17" for line in lines
    )
    assert any("ClientSoftwareVersion" in line and '"3.9.1"' in line for line in lines)
    # the tree: body fields are indented under "body"
    body = next(line for line in lines if line.split()[1:2] == ["body"])
    name = next(line for line in lines if "ClientSoftwareName" in line)
    assert name.index("ClientSoftwareName") > body.index("body")


def test_describe_topic_partitions_request():
    run = kafkawire(DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0.hex())
    assert run.returncode == 0, run.stderr
    assert '"kafka-tester"' in run.stdout and '"unknown-topic-saz"' in run.stdout
    limit = next(line for line in run.stdout.splitlines() if "ResponsePartitionLimit" in line)
    assert limit.split()[-2:] == ["int32", "1"] and limit.split()[0] == "47"
    cursor = next(line for line in run.stdout.splitlines() if "Cursor" in line)
    assert "ff" in cursor.split() and "null" in cursor


def test_response_needs_key_and_version():
    run = kafkawire("--response", DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0.hex())
    assert run.returncode == 2 and "--api-key" in run.stderr


def test_corrected_response():
    run = kafkawire("--response", "--api-key", "75", "--api-version", "0", DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0.hex())
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "1486810363" in out and "UNKNOWN_TOPIC_OR_PARTITION" in out and "3576" in out
    assert "DescribeTopicPartitionsResponse v0" in out and "ResponseHeader v1" in out


def test_response_as_given_fails_with_the_size_mismatch():
    run = kafkawire(
        "--response", "--api-key", "75", "--api-version", "0", DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0_AS_GIVEN.hex()
    )
    assert run.returncode == 1
    assert "frame size 55 does not match the 56 bytes that follow it" in run.stderr
    assert "at byte 0" in run.stderr


def test_json_output():
    run = kafkawire("--json", API_VERSIONS_REQUEST_V3.hex())
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["framed"] is True and doc["error"] is None and doc["length"] == len(API_VERSIONS_REQUEST_V3)
    by_path = {a["path"]: a for a in doc["annotations"]}
    assert by_path["body.ClientSoftwareName"] == {
        "offset": 17,
        "width": 18,
        "path": "body.ClientSoftwareName",
        "type": "compact_string",
        "value": "apache-kafka-java",
        "depth": 1,
    }
    assert doc["value"]["header"]["correlation_id"] == 7
    assert doc["value"]["body"]["client_software_version"] == "3.9.1"


def test_json_error():
    run = kafkawire(
        "--json",
        "--response",
        "--api-key",
        "75",
        "--api-version",
        "0",
        DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0_AS_GIVEN.hex(),
    )
    assert run.returncode == 1
    doc = json.loads(run.stdout)
    assert doc["error"]["offset"] == 0 and "frame size 55" in doc["error"]["problem"]


def test_hex_from_stdin_with_spaces_newlines_and_0x():
    text = API_VERSIONS_REQUEST_V3.hex()
    messy = "0x" + text[:10] + "\n  " + " ".join(text[i : i + 2] for i in range(10, 40, 2)) + "\n0x" + text[40:] + "\n"
    run = kafkawire(stdin=messy)
    assert run.returncode == 0, run.stderr
    assert '"apache-kafka-java"' in run.stdout


def test_hex_from_file(tmp_path):
    path = tmp_path / "frame.hex"
    path.write_text(DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0.hex(" "))
    run = kafkawire("--file", str(path))
    assert run.returncode == 0, run.stderr
    assert '"unknown-topic-saz"' in run.stdout


def test_unframed_request_is_detected():
    run = kafkawire(API_VERSIONS_REQUEST_V3[4:].hex())
    assert run.returncode == 0, run.stderr
    assert "size" not in [line.split()[1] for line in run.stdout.splitlines()[1:]]
    first = run.stdout.splitlines()[1].split()
    assert first[0] == "0"


def test_malformed_request_names_field_and_offset():
    truncated = DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0[4:-6]  # cut inside the body
    run = kafkawire("--unframed", truncated.hex())
    assert run.returncode == 1
    assert "DescribeTopicPartitionsRequest v0" in run.stderr and "at byte" in run.stderr
    assert "ResponsePartitionLimit" in run.stderr
    assert '"unknown-topic-saz"' in run.stdout  # what was read before the error is still shown


def test_bad_hex():
    run = kafkawire("00zz")
    assert run.returncode == 2 and "not hex" in run.stderr
    run = kafkawire("001")
    assert run.returncode == 2 and "odd number" in run.stderr
