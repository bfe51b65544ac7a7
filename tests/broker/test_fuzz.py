"""Garbage and mutated requests: every one is answered or closes its connection; the broker keeps serving."""

from __future__ import annotations

import random
import socket
import struct

import pytest

from kafkawire.broker import dispatch
from kafkawire.protocol import api, encode_request, message_class, request_header

from .conftest import RawClient, msg
from .helpers import batch, create_topic, fetch_request, produce_request


def _valid_requests():
    R = message_class("MetadataRequest")
    yield msg("ApiVersionsRequest", client_software_name="a", client_software_version="1"), 3
    yield R(topics=[R.MetadataRequestTopic(name="fz")]), 12
    yield produce_request("fz", 0, batch([b"abc", b"def"])), 9
    yield fetch_request([("fz", 0, 0)], max_wait_ms=10), 12
    yield fetch_request([("fz", 0, 0)], max_wait_ms=10, session_epoch=0), 16
    L = message_class("ListOffsetsRequest")
    yield (
        L(
            replica_id=-1,
            topics=[
                L.ListOffsetsTopic(name="fz", partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-1)])
            ],
        ),
        7,
    )
    D = message_class("DescribeConfigsRequest")
    yield D(resources=[D.DescribeConfigsResource(resource_type=2, resource_name="fz", configuration_keys=None)]), 4
    C = message_class("CreateTopicsRequest")
    yield C(topics=[C.CreatableTopic(name="fz2", num_partitions=1, replication_factor=1)]), 7
    T = message_class("DescribeTopicPartitionsRequest")
    yield T(topics=[], response_partition_limit=10), 0


def _exchange(address, frame: bytes) -> str:
    with socket.create_connection(address, timeout=5) as s:
        s.sendall(frame)
        try:
            head = s.recv(4)
        except (TimeoutError, ConnectionResetError) as exc:
            return "closed" if isinstance(exc, ConnectionResetError) else "timeout"
        if not head:
            return "closed"
        return "answered"


@pytest.mark.parametrize("seed", range(3))
def test_mutated_requests(broker, seed):
    rnd = random.Random(seed)
    setup = RawClient(broker.address)
    create_topic(setup, "fz")
    setup.call(produce_request("fz", 0, batch([b"x"])), 9)
    outcomes = {}
    for body, version in _valid_requests():
        frame = bytearray(encode_request(request_header(body.api_key, version, 1, "fuzz"), body))
        for _ in range(40):
            mutated = bytearray(frame)
            for _ in range(rnd.randint(1, 4)):
                pos = rnd.randrange(8, len(mutated))  # keep the size and the API key intact
                mutated[pos] = rnd.randrange(256)
            result = _exchange(broker.address, bytes(mutated))
            assert result != "timeout", (body.name, version, bytes(mutated).hex())
            outcomes[result] = outcomes.get(result, 0) + 1
    assert setup.call(msg("ApiVersionsRequest"), 0).error_code == 0
    setup.close()
    assert outcomes.get("answered", 0) > 0


def test_random_bodies_for_every_advertised_api(broker):
    rnd = random.Random(7)
    for key, spec in sorted(dispatch.load_handlers().items()):
        for version in (spec.min_version, spec.max_version):
            from kafkawire.protocol import apis

            hdr = message_class("RequestHeader")
            head = hdr(request_api_key=key, request_api_version=version, correlation_id=5, client_id="fuzz").encode(
                apis.request_header_version(key, version)
            )
            body = bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 64)))
            payload = head + body
            result = _exchange(broker.address, struct.pack(">i", len(payload)) + payload)
            assert result in ("answered", "closed"), (api(key).name, version)
    c = RawClient(broker.address)
    assert c.call(msg("ApiVersionsRequest"), 0).error_code == 0
    c.close()
