"""ApiVersions and Metadata over a real socket."""

from __future__ import annotations

import struct
import uuid

import pytest

from kafkawire.protocol import api, decode_response, errors
from kafkawire.protocol.messages import ApiVersionsResponse

from .conftest import msg
from .helpers import create_topic

CORE = {0, 1, 2, 3, 18, 19, 20, 21, 22, 23, 32, 33, 35, 37, 44, 60, 61, 75}


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_api_versions_every_version(client, version):
    body = msg("ApiVersionsRequest", client_software_name="kafkawire-tests", client_software_version="1.0")
    res = client.call(body, version)
    assert res.error_code == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in res.api_keys}
    assert CORE <= set(keys)
    assert keys[18] == (0, 5)
    for key, (lo, hi) in keys.items():
        info = api(key)
        assert info.min_version <= lo <= hi <= info.max_version
    # every version the spec has, old ones included
    assert keys[0][0] == 0 and keys[1] == (0, api(1).max_stable_version)
    assert keys[3] == (0, api(3).max_stable_version)


def test_api_versions_v3_writes_no_default_tagged_fields(client):
    """Only the feature fields (tags 0-2), which differ from their defaults, are written; ZkMigrationReady
    (tag 3, false) is not: librdkafka 2.0.x (Debian's kcat) breaks on default-valued tagged fields."""
    cid = client.send(msg("ApiVersionsRequest", client_software_name="x", client_software_version="1"), 3)
    payload = client.read_frame()
    assert struct.unpack_from(">i", payload)[0] == cid  # header v0: correlation id only, no tag buffer
    body = ApiVersionsResponse.decode(payload[4:], 3)
    assert body.supported_features and body.finalized_features and body.finalized_features_epoch >= 0
    assert body.zk_migration_ready is False
    # the body's tagged-field section: 3 fields, tags 0, 1, 2 (each tag and size fits one varint byte)
    tail = body.encode(3)
    assert payload[4:] == tail
    without_tags = ApiVersionsResponse(error_code=0, api_keys=body.api_keys, throttle_time_ms=0).encode(3)
    assert without_tags[-1] == 0 and tail[len(without_tags) - 1] == 3 and tail[len(without_tags)] == 0


def _raw_api_versions(version: int, correlation_id: int) -> bytes:
    client_id = b"raw"
    header = struct.pack(">hhih", 18, version, correlation_id, len(client_id)) + client_id + b"\x00"  # header v2
    body = b"\x05hello\x04123\x00"  # compact strings and an empty tag section
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def test_unsupported_api_versions_version_gets_35_in_a_v0_body_and_connection_stays_open(client):
    client.send_raw(_raw_api_versions(99, 7))
    payload = client.read_frame()
    res = decode_response(payload, 18, 0, framed=False)
    assert res.header.correlation_id == 7
    assert res.body.error_code == errors.UNSUPPORTED_VERSION == 35
    ranges = {k.api_key: (k.min_version, k.max_version) for k in res.body.api_keys}
    assert ranges == {18: (0, 5)}  # ApiVersions' own range only, as Kafka 4.4 answers
    # the client retries at a supported version on the same connection
    again = client.call(msg("ApiVersionsRequest", client_software_name="a", client_software_version="1"), 3)
    assert again.error_code == 0


def test_unsupported_api_versions_version_answer_is_the_reference_kafkas(client, reference_kafka):
    from .reference import reference_client

    theirs_client = reference_client(reference_kafka)
    try:
        answers = []
        for c in (client, theirs_client):
            c.send_raw(_raw_api_versions(127, 9))
            answers.append(decode_response(c.read_frame(), 18, 0, framed=False).body.to_dict())
    finally:
        theirs_client.close()
    ours, theirs = answers
    assert ours == theirs
    assert ours["error_code"] == 35 and [k["api_key"] for k in ours["api_keys"]] == [18]


def test_api_versions_invalid_software_name(client):
    res = client.call(msg("ApiVersionsRequest", client_software_name="-bad-", client_software_version="1"), 3)
    assert res.error_code == errors.INVALID_REQUEST


def test_metadata_auto_creates_with_num_partitions(broker, client):
    broker.config.num_partitions = 3
    R = msg("MetadataRequest").__class__
    res = client.call(R(topics=[R.MetadataRequestTopic(name="auto1")], allow_auto_topic_creation=True), 12)
    (t,) = res.topics
    assert t.error_code == 0 and t.name == "auto1" and len(t.partitions) == 3
    assert t.topic_id != uuid.UUID(int=0)
    for p in t.partitions:
        assert p.leader_id == broker.config.node_id and p.leader_epoch == 0
        assert p.replica_nodes == [broker.config.node_id] == p.isr_nodes
    assert res.controller_id == broker.config.node_id
    assert res.cluster_id == broker.broker.cluster_id
    (b,) = res.brokers
    assert (b.host, b.port) == broker.address
    # v0: an empty list means every topic
    res0 = client.call(R(topics=[]), 0)
    assert [t.name for t in res0.topics] == ["auto1"]
    # by topic id (v12+)
    res12 = client.call(R(topics=[R.MetadataRequestTopic(name=None, topic_id=t.topic_id)]), 12)
    assert res12.topics[0].name == "auto1"
    missing = client.call(R(topics=[R.MetadataRequestTopic(name=None, topic_id=uuid.uuid4())]), 12)
    assert missing.topics[0].error_code == errors.UNKNOWN_TOPIC_ID


def test_metadata_no_auto_create_when_not_allowed(client):
    R = msg("MetadataRequest").__class__
    res = client.call(R(topics=[R.MetadataRequestTopic(name="nope")], allow_auto_topic_creation=False), 9)
    assert res.topics[0].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    res = client.call(R(topics=None), 9)
    assert res.topics == []
    bad = client.call(R(topics=[R.MetadataRequestTopic(name="bad name!")]), 9)
    assert bad.topics[0].error_code == errors.INVALID_TOPIC_EXCEPTION


def test_metadata_auto_create_disabled_by_config(broker, client):
    broker.config.auto_create_topics = False
    R = msg("MetadataRequest").__class__
    res = client.call(R(topics=[R.MetadataRequestTopic(name="x1")], allow_auto_topic_creation=True), 12)
    assert res.topics[0].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("version", range(0, 14))
def test_metadata_every_version(client, version):
    create_topic(client, f"mv{version}", partitions=2)
    R = msg("MetadataRequest").__class__
    res = client.call(R(topics=[R.MetadataRequestTopic(name=f"mv{version}")]), version)
    assert res.topics[0].error_code == 0 and len(res.topics[0].partitions) == 2


def test_null_client_id_reads_as_empty(client):
    from kafkawire.protocol import encode_request, request_header

    for version in (0, 3):  # header v1 and the flexible header v2 both keep a 2-byte-length client id
        frame = encode_request(
            request_header(18, version, 99, None),
            msg("ApiVersionsRequest", client_software_name="a", client_software_version="1"),
        )
        assert frame[12:14] == b"\xff\xff"
        client.send_raw(frame)
        payload = client.read_frame()
        assert decode_response(payload, 18, version, framed=False).body.error_code == 0


def test_produce_is_advertised_from_version_0(client):
    res = client.call(msg("ApiVersionsRequest"), 0)
    assert {k.api_key: k.min_version for k in res.api_keys}[0] == 0
