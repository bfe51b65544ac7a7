"""Skimming on real brokers' traffic: through a proxy that streams (and so skims) every response it may, a
Fetch with OFFSET_OUT_OF_RANGE for one partition among many and a Produce with an error for one partition
are reported with the error codes the full decoder finds in the very bytes the client received. Against
kafkawire and the reference Apache Kafka 4.4 (which fails under CI when it cannot run, as every proxy test's
peer does)."""

from __future__ import annotations

import socket
import uuid

import pytest

from kafkawire.protocol.api_keys import ApiKey
from kafkawire.protocol.messages import FetchRequest, ProduceRequest
from kafkawire.protocol.records.builder import build_batch
from kafkawire.protocol.rpc import decode_response, encode_request, request_header
from kafkawire.tools.pcap import Connection, Event, error_names

from .harness import ProxyThread

PARTITIONS = 12


@pytest.fixture(params=["kafkawire", "kafka"])
def peer(request) -> str:
    if request.param == "kafkawire":
        return request.getfixturevalue("kafkawire_upstream")
    return request.getfixturevalue("reference_kafka").bootstrap


def _topic(bootstrap: str) -> tuple[str, uuid.UUID]:
    from kafkawire.client import Admin, NewTopic, Producer

    name = f"skim-{uuid.uuid4().hex[:10]}"
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, num_partitions=PARTITIONS)])
        topic_id = admin.describe_topics([name])[name].topic_id
    with Producer(bootstrap) as producer:
        for p in range(PARTITIONS):
            for i in range(5):
                producer.send(name, b"v" * 300 + bytes([i]), partition=p)
    return name, topic_id


def _call(address: str, api_key: int, version: int, body, corr: int) -> bytes:
    """One request on a fresh connection; the response payload exactly as received."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(encode_request(request_header(api_key, version, corr, "skim-test"), body))
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = sock.recv(1 << 20)
            assert chunk, "the proxy closed the connection"
            data += chunk
        return data[4:]


def _full_errors(api_key: int, version: int, payload) -> list[str]:
    event = Event("response", Connection(0, ("c", 0), ("s", 0)), False, 0, 0, api_key, version, 1, topic_names={})
    event.message = decode_response(payload, api_key, version, framed=False)
    return sorted(error_names(event))


def _reported(proxy: ProxyThread, api: str, corr: int):
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = [e for e in proxy.reporter.named(api) if e.correlation_id == corr]
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError(f"{api} corr={corr} not reported")


@pytest.mark.parametrize("version", [12, 16])
def test_a_skimmed_fetch_reports_the_out_of_range_partition_among_many(peer, version):
    name, topic_id = _topic(peer)
    far = 7  # this partition is asked for an offset far beyond its end
    cls = FetchRequest
    topic = cls.FetchTopic(topic=name, topic_id=topic_id)
    topic.partitions = [
        cls.FetchPartition(partition=p, fetch_offset=10**9 if p == far else 0, partition_max_bytes=1 << 20)
        for p in range(PARTITIONS)
    ]
    request = cls(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, isolation_level=0, topics=[topic])
    with ProxyThread(peer, stream_min=0) as proxy:
        payload = _call(proxy.bootstrap, ApiKey.FETCH, version, request, 41)
        ex = _reported(proxy, "Fetch", 41)
    expected = _full_errors(ApiKey.FETCH, version, payload)
    assert expected == [f"responses[0].partitions[{far}].error_code=OFFSET_OUT_OF_RANGE"]
    assert ex.skim is not None and ex.skim.problem is None  # skimmed, not decoded
    assert ex.skim.size == len(payload)
    assert sorted(ex.errors) == expected
    assert "OFFSET_OUT_OF_RANGE" in proxy.reporter.text.getvalue()  # and the line says so


@pytest.mark.parametrize("version", [9, 11])
def test_a_skimmed_produce_reports_the_partition_that_failed(peer, version):
    name, topic_id = _topic(peer)
    batch = build_batch([(None, b"skimmed")])
    cls = ProduceRequest
    data = cls.TopicProduceData(
        name=name,
        topic_id=topic_id,
        partition_data=[
            cls.PartitionProduceData(index=0, records=batch),
            cls.PartitionProduceData(index=PARTITIONS + 5, records=batch),  # no such partition
        ],
    )
    request = cls(acks=-1, timeout_ms=10_000, topic_data=[data])
    with ProxyThread(peer, stream_min=0) as proxy:
        payload = _call(proxy.bootstrap, ApiKey.PRODUCE, version, request, 42)
        ex = _reported(proxy, "Produce", 42)
    expected = _full_errors(ApiKey.PRODUCE, version, payload)
    assert len(expected) == 1 and expected[0].startswith("responses[0].partition_responses[")
    assert expected[0].endswith("error_code=UNKNOWN_TOPIC_OR_PARTITION")
    assert ex.skim is not None and ex.skim.problem is None
    assert sorted(ex.errors) == expected


@pytest.mark.parametrize("why", ["annotate", "decode-all", "console watched"])
def test_when_whole_frames_are_needed_the_same_fetch_is_decoded_whole(kafkawire_upstream, why):
    """--annotate, --decode-all and a browser on the console's live view need every field: nothing is skimmed
    then (and the errors are the decoder's)."""
    from kafkawire.ui.tap import Tap

    name, topic_id = _topic(kafkawire_upstream)
    cls = FetchRequest
    topic = cls.FetchTopic(topic=name, topic_id=topic_id)
    topic.partitions = [cls.FetchPartition(partition=0, fetch_offset=10**9, partition_max_bytes=1 << 20)]
    request = cls(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, topics=[topic])
    with ProxyThread(kafkawire_upstream, stream_min=0, skim=why != "decode-all") as proxy:
        proxy.reporter.annotate = why == "annotate"
        if why == "console watched":
            proxy.proxy.tap = Tap()
            proxy.proxy.tap.subscribe()
        payload = _call(proxy.bootstrap, ApiKey.FETCH, 12, request, 43)
        ex = _reported(proxy, "Fetch", 43)
    assert ex.skim is None and bytes(ex.response_payload) == payload
    assert ex.errors == ["responses[0].partitions[0].error_code=OFFSET_OUT_OF_RANGE"]
