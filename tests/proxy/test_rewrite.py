"""Address rewriting, without sockets: every response that carries broker addresses, at flexible and
non-flexible versions, gets the proxy's addresses and keeps everything else; every other response is left
alone."""

from __future__ import annotations

import pytest

from kafkawire.protocol.api_keys import ApiKey
from kafkawire.protocol.messages import (
    DescribeClusterResponse,
    FetchResponse,
    FindCoordinatorResponse,
    MetadataResponse,
    ProduceResponse,
    ShareAcknowledgeResponse,
    ShareFetchResponse,
)
from kafkawire.protocol.primitives import ProtocolError
from kafkawire.protocol.rpc import decode_response, encode_response
from kafkawire.proxy.addresses import AddressMap, TooManyBrokers, rewrite_response, rewrites

UPSTREAM = [(1, "kafka-1.internal", 9092), (2, "kafka-2.internal", 9093), (7, "10.0.0.7", 19092)]


def _map(max_brokers: int = 100) -> tuple[AddressMap, list[int]]:
    bound: list[int] = []

    def bind(node_id: int) -> int:
        bound.append(node_id)
        return 40000 + node_id

    return AddressMap("127.0.0.1", bind, max_brokers=max_brokers), bound


def _payload(api_key: int, version: int, body) -> bytes:
    return encode_response(123, body, version)[4:]  # header and body, no size prefix


def _rewritten(api_key: int, version: int, body):
    addresses, bound = _map()
    payload = _payload(api_key, version, body)
    result = rewrite_response(api_key, version, payload, addresses)
    assert result is not None
    after = decode_response(result.payload, api_key, version, framed=False)
    assert after.header.correlation_id == 123
    return result, after.body, addresses, bound


def _metadata(version):
    B = MetadataResponse.MetadataResponseBroker
    return MetadataResponse(
        brokers=[B(node_id=n, host=h, port=p, rack="r1" if version >= 1 else None) for n, h, p in UPSTREAM],
        cluster_id="c" if version >= 2 else None,
        controller_id=1 if version >= 1 else -1,
        topics=[MetadataResponse.MetadataResponseTopic(error_code=0, name="t", partitions=[])],
    )


@pytest.mark.parametrize("version", [0, 1, 5, 8, 9, 12, 13])
def test_metadata_brokers_point_at_the_proxy(version):
    result, body, addresses, bound = _rewritten(ApiKey.METADATA, version, _metadata(version))
    assert [(b.node_id, b.host, b.port) for b in body.brokers] == [(n, "127.0.0.1", 40000 + n) for n, _, _ in UPSTREAM]
    assert bound == [1, 2, 7]
    assert {n: (u.host, u.port) for n, u in addresses.upstream.items()} == {n: (h, p) for n, h, p in UPSTREAM}
    expected = _metadata(version)
    for b in expected.brokers:
        b.host, b.port = "127.0.0.1", 40000 + b.node_id
    assert body == expected  # nothing else changed
    assert result.changed[0] == (1, "kafka-1.internal:9092", "127.0.0.1:40001")


def test_a_node_keeps_its_local_port_when_named_again():
    addresses, bound = _map()
    for _ in range(3):
        rewrite_response(ApiKey.METADATA, 12, _payload(ApiKey.METADATA, 12, _metadata(12)), addresses)
    assert bound == [1, 2, 7]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_find_coordinator_single(version):
    body = FindCoordinatorResponse(error_code=0, node_id=2, host="kafka-2.internal", port=9093, error_message=None)
    _, after, _, _ = _rewritten(ApiKey.FIND_COORDINATOR, version, body)
    assert (after.node_id, after.host, after.port) == (2, "127.0.0.1", 40002)


@pytest.mark.parametrize("version", [4, 5, 6])
def test_find_coordinator_batched(version):
    C = FindCoordinatorResponse.Coordinator
    body = FindCoordinatorResponse(
        coordinators=[
            C(key="g1", node_id=1, host="kafka-1.internal", port=9092, error_code=0),
            C(key="g2", node_id=-1, host="", port=-1, error_code=15),  # COORDINATOR_NOT_AVAILABLE: left as is
        ]
    )
    _, after, _, bound = _rewritten(ApiKey.FIND_COORDINATOR, version, body)
    assert [(c.key, c.node_id, c.host, c.port) for c in after.coordinators] == [
        ("g1", 1, "127.0.0.1", 40001),
        ("g2", -1, "", -1),
    ]
    assert bound == [1]


def test_find_coordinator_error_is_not_rewritten():
    body = FindCoordinatorResponse(error_code=15, node_id=-1, host="", port=-1)
    addresses, bound = _map()
    assert rewrite_response(ApiKey.FIND_COORDINATOR, 3, _payload(ApiKey.FIND_COORDINATOR, 3, body), addresses) is None
    assert bound == []


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster(version):
    B = DescribeClusterResponse.DescribeClusterBroker
    body = DescribeClusterResponse(
        cluster_id="c", controller_id=1, brokers=[B(broker_id=n, host=h, port=p) for n, h, p in UPSTREAM]
    )
    _, after, _, _ = _rewritten(ApiKey.DESCRIBE_CLUSTER, version, body)
    assert [(b.broker_id, b.host, b.port) for b in after.brokers] == [
        (n, "127.0.0.1", 40000 + n) for n, _, _ in UPSTREAM
    ]


def _endpoints(cls):
    return [cls.NodeEndpoint(node_id=n, host=h, port=p, rack=None) for n, h, p in UPSTREAM[:2]]


@pytest.mark.parametrize("version", [10, 11, 12, 13])
def test_produce_node_endpoints(version):
    body = ProduceResponse(responses=[], node_endpoints=_endpoints(ProduceResponse))
    _, after, _, _ = _rewritten(ApiKey.PRODUCE, version, body)
    assert [(e.node_id, e.host, e.port) for e in after.node_endpoints] == [
        (1, "127.0.0.1", 40001),
        (2, "127.0.0.1", 40002),
    ]


@pytest.mark.parametrize("version", [16, 17, 18])
def test_fetch_node_endpoints(version):
    body = FetchResponse(responses=[], node_endpoints=_endpoints(FetchResponse))
    _, after, _, _ = _rewritten(ApiKey.FETCH, version, body)
    assert [(e.node_id, e.host, e.port) for e in after.node_endpoints] == [
        (1, "127.0.0.1", 40001),
        (2, "127.0.0.1", 40002),
    ]


@pytest.mark.parametrize(
    "cls,key", [(ShareFetchResponse, ApiKey.SHARE_FETCH), (ShareAcknowledgeResponse, ApiKey.SHARE_ACKNOWLEDGE)]
)
@pytest.mark.parametrize("version", [1, 2])
def test_share_node_endpoints(cls, key, version):
    body = cls(responses=[], node_endpoints=_endpoints(cls))
    _, after, _, _ = _rewritten(key, version, body)
    assert [(e.node_id, e.host, e.port) for e in after.node_endpoints] == [
        (1, "127.0.0.1", 40001),
        (2, "127.0.0.1", 40002),
    ]


def test_responses_without_endpoints_are_not_touched():
    addresses, bound = _map()
    # Produce and Fetch before KIP-951 cannot carry endpoints; with none present nothing is re-encoded
    assert not rewrites(ApiKey.PRODUCE, 9)
    assert not rewrites(ApiKey.FETCH, 15)
    assert (
        rewrite_response(ApiKey.PRODUCE, 9, _payload(ApiKey.PRODUCE, 9, ProduceResponse(responses=[])), addresses)
        is None
    )
    assert (
        rewrite_response(ApiKey.FETCH, 17, _payload(ApiKey.FETCH, 17, FetchResponse(responses=[])), addresses) is None
    )
    # the group heartbeats carry no address
    assert not rewrites(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1)
    assert not rewrites(ApiKey.SHARE_GROUP_HEARTBEAT, 1)
    assert bound == []


def test_header_bytes_are_kept_as_received():
    # a flexible response header with a tagged field kafkawire does not know: kept byte for byte
    body = _payload(ApiKey.METADATA, 12, _metadata(12))[5:]  # correlation id and the empty tag section off
    payload = (123).to_bytes(4, "big") + bytes([1, 9, 2]) + b"hi" + body  # one tag: 9, two bytes
    addresses, _ = _map()
    result = rewrite_response(ApiKey.METADATA, 12, payload, addresses)
    assert result is not None
    assert result.payload[:9] == payload[:9]
    assert decode_response(result.payload, ApiKey.METADATA, 12, framed=False).body.brokers[0].port == 40001


def test_a_body_that_does_not_decode_raises_protocol_error():
    payload = _payload(ApiKey.METADATA, 12, _metadata(12))
    addresses, bound = _map()
    with pytest.raises(ProtocolError):
        rewrite_response(ApiKey.METADATA, 12, payload[:20], addresses)
    assert bound == []


def test_too_many_brokers_is_refused():
    addresses, bound = _map(max_brokers=2)
    with pytest.raises(TooManyBrokers):
        rewrite_response(ApiKey.METADATA, 12, _payload(ApiKey.METADATA, 12, _metadata(12)), addresses)
    assert bound == [1, 2]
