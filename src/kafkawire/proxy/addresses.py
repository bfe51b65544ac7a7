"""Broker addresses: which upstream broker each local port stands for, and the rewriting of the responses
that tell a client where brokers are.

A client that bootstraps against the proxy learns the cluster's brokers from Metadata (and the coordinator
from FindCoordinator, the brokers from DescribeCluster, a new leader from KIP-951's ``NodeEndpoints`` in
Produce v10+, Fetch v16+, ShareFetch and ShareAcknowledge) and then connects to those addresses directly.
To keep every connection going through the proxy, each of those responses is decoded, every (node id,
host, port) in it is replaced by a local address that the proxy serves for that node id, and the body is
re-encoded; its response header bytes are kept as they came. Every other response is forwarded as the
same bytes, and so is one of these that does not decode.

ConsumerGroupHeartbeat and ShareGroupHeartbeat carry no broker address (a member finds its coordinator with
FindCoordinator). The KRaft APIs that carry endpoints (Vote, BeginQuorumEpoch, EndQuorumEpoch,
FetchSnapshot, UpdateRaftVoter) travel between controllers, and DescribeQuorum's listeners are the
controllers' own: clients do not bootstrap through them, so they are left alone.

Sans-IO: :class:`AddressMap` is told how to obtain a local port (a callback that binds one) and
:func:`rewrite_response` works on payload bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafkawire.protocol.api_keys import ApiKey
from kafkawire.protocol.apis import api, response_header_version
from kafkawire.protocol.messages import message_class
from kafkawire.protocol.primitives import ProtocolError

# API key -> first version whose response carries broker addresses
REWRITTEN: dict[int, int] = {
    int(ApiKey.METADATA): 0,
    int(ApiKey.FIND_COORDINATOR): 0,
    int(ApiKey.DESCRIBE_CLUSTER): 0,
    int(ApiKey.PRODUCE): 10,
    int(ApiKey.FETCH): 16,
    int(ApiKey.SHARE_FETCH): 0,
    int(ApiKey.SHARE_ACKNOWLEDGE): 0,
}

MAX_BROKERS = 1024  # local ports one proxy opens at most: an upstream naming more is refused, not obeyed


def rewrites(api_key: int, api_version: int) -> bool:
    """Whether a response to this request is decoded to rewrite addresses."""
    first = REWRITTEN.get(api_key)
    return first is not None and api_version >= first


@dataclass(frozen=True)
class Upstream:
    node_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


class TooManyBrokers(Exception):
    pass


class AddressMap:
    """Node id -> the upstream broker's address and the local port that leads to it.

    ``bind(node_id)`` is called the first time a node id is seen and returns the local port serving it
    (the proxy binds a socket there and then). A node whose upstream address changes keeps its local
    port; new connections to that port go to the new address.
    """

    def __init__(self, advertised_host: str, bind: Callable[[int], int], *, max_brokers: int = MAX_BROKERS):
        self.advertised_host = advertised_host
        self._bind = bind
        self._max = max_brokers
        self.upstream: dict[int, Upstream] = {}
        self.local_port: dict[int, int] = {}

    def learn(self, node_id: int, host: str, port: int) -> tuple[str, int]:
        """Record where ``node_id`` is upstream; the (host, port) to tell the client instead."""
        self.upstream[node_id] = Upstream(node_id, host, port)
        local = self.local_port.get(node_id)
        if local is None:
            if len(self.local_port) >= self._max:
                raise TooManyBrokers(f"more than {self._max} broker ids upstream; node {node_id} not mapped")
            local = self._bind(node_id)
            self.local_port[node_id] = local
        return self.advertised_host, local

    def target(self, node_id: int) -> Upstream | None:
        return self.upstream.get(node_id)


@dataclass(frozen=True)
class Rewrite:
    payload: bytes  # the whole new payload (header bytes as received, then the re-encoded body)
    changed: list[tuple[int, str, str]]  # (node id, upstream address, local address)


def _addresses(api_key: int, api_version: int, body) -> list:
    """The structs of ``body`` that carry node_id, host and port."""
    if api_key == ApiKey.METADATA or api_key == ApiKey.DESCRIBE_CLUSTER:
        return list(body.brokers)
    if api_key == ApiKey.FIND_COORDINATOR:
        if api_version < 4:
            return [body] if body.error_code == 0 and body.node_id >= 0 else []
        return [c for c in body.coordinators if c.error_code == 0 and c.node_id >= 0]
    return list(body.node_endpoints)  # Produce, Fetch, ShareFetch, ShareAcknowledge


def rewrite_response(api_key: int, api_version: int, payload, addresses: AddressMap) -> Rewrite | None:
    """The payload with every broker address replaced, or None when it names none (the bytes then go
    unchanged). Raises ProtocolError when the body does not decode, TooManyBrokers when the upstream names
    more brokers than allowed."""
    if not rewrites(api_key, api_version):
        return None
    view = memoryview(payload)
    header_version = response_header_version(api_key, api_version)
    _header, pos = message_class("ResponseHeader").decode_from(view, 0, header_version)
    body_cls = message_class(api(api_key).response)
    body, end = body_cls.decode_from(view, pos, api_version)
    found = _addresses(api_key, api_version, body)
    if not found:
        return None
    changed = []
    for item in found:
        node_id = item.broker_id if api_key == ApiKey.DESCRIBE_CLUSTER else item.node_id
        before = Upstream(node_id, item.host, item.port).address
        host, port = addresses.learn(node_id, item.host, item.port)
        item.host, item.port = host, port
        changed.append((node_id, before, Upstream(node_id, host, port).address))
    new = bytes(view[:pos]) + body.encode(api_version) + bytes(view[end:])
    return Rewrite(new, changed)


# Responses whose broker addresses are KIP-951's NodeEndpoints, a top-level tagged field (tag 0): the last
# bytes of the body, so that a large response can go on while it arrives with only its tail held back
# (see withdraw_node_endpoints). ShareFetch and ShareAcknowledge carry them as a plain field: not streamed.
TAIL_ENDPOINTS: dict[int, int] = {int(ApiKey.PRODUCE): 10, int(ApiKey.FETCH): 16}
WITHDRAWN_TAG = 0x7F  # a tag number no schema uses, one byte as a uvarint like tag 0: same frame length


def endpoints_in_tail(api_key: int, api_version: int) -> bool:
    first = TAIL_ENDPOINTS.get(api_key)
    return first is not None and api_version >= first


def withdraw_node_endpoints(api_key: int, api_version: int, payload) -> int:
    """For a response already partly forwarded, whose NodeEndpoints (tag 0 of the top-level tagged fields)
    would need rewriting: the payload offset of the byte that holds that tag number. Renaming it to
    ``WITHDRAWN_TAG`` keeps the frame's length (already sent) and leaves the client without KIP-951's leader
    hint, so it refreshes its metadata (which the proxy rewrites) as it would without the hint. Raises
    ProtocolError when the tagged fields are not exactly that one tag."""
    view = memoryview(payload)
    header_version = response_header_version(api_key, api_version)
    _header, pos = message_class("ResponseHeader").decode_from(view, 0, header_version)
    body, end = message_class(api(api_key).response).decode_from(view, pos, api_version)
    if getattr(body, "_unknown_tags", None):
        raise ProtocolError("the response has tagged fields the proxy does not know")
    body.node_endpoints = []
    without = body.encode(api_version)  # the same body with no tagged field: its last byte is the count 0
    tags_at = pos + len(without) - 1
    if without[-1] != 0 or bytes(view[pos:tags_at]) != without[:-1] or view[tags_at : tags_at + 2] != b"\x01\x00":
        raise ProtocolError("the response's tagged fields are not its NodeEndpoints alone")
    return tags_at + 1


def tail_endpoints(api_key: int, api_version: int, tagged) -> list:
    """The NodeEndpoints of a response known only by its top-level tagged fields (``tagged``: the payload's
    bytes from their count to its end), as a skimmed response is: read as the tail of an empty body of the
    same version. Raises ProtocolError when they do not decode."""
    cls = message_class(api(api_key).response)
    empty = cls().encode(api_version)  # its last byte is the tagged field count, 0
    body, _end = cls.decode_from(memoryview(empty[:-1] + bytes(tagged)), 0, api_version)
    return list(body.node_endpoints)


__all__ = [
    "tail_endpoints",
    "REWRITTEN",
    "TAIL_ENDPOINTS",
    "WITHDRAWN_TAG",
    "endpoints_in_tail",
    "withdraw_node_endpoints",
    "AddressMap",
    "Rewrite",
    "TooManyBrokers",
    "Upstream",
    "rewrite_response",
    "rewrites",
    "ProtocolError",
]
