"""The skimmer (``kafkawire.protocol.skim``) finds the error codes the full decoder finds: on random messages of
every response schema at every version, fed in pieces of any cut, and on the observer's skimming of real
frames (see ``test_skim_real.py`` for brokers' traffic through the proxy)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from protocol.strategies import messages

from kafkawire.protocol import apis, message_class
from kafkawire.protocol.connection import ProtocolConnection, Role
from kafkawire.protocol.rpc import decode_response, encode_response_parts
from kafkawire.protocol.skim import Skimmer, error_codes
from kafkawire.proxy.report import skim_error_names
from kafkawire.tools.pcap import Connection, Event, error_names

RESPONSES = [
    (info.key, v)
    for info in sorted(apis.all_apis().values(), key=lambda i: i.key)
    for v in range(info.min_version, info.max_version + 1)
]
SETTINGS = settings(
    max_examples=2,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _full(api_key: int, version: int, payload) -> list[str]:
    event = Event("response", Connection(1, ("c", 1), ("s", 2)), False, 0, 0, api_key, version, 7, topic_names={})
    event.message = decode_response(payload, api_key, version, framed=False, strict=False)
    return error_names(event)


def _payload(api_key: int, version: int, body, corr: int = 7) -> bytes:
    return b"".join(bytes(p) for p in encode_response_parts(corr, body, version))[4:]


@pytest.mark.parametrize("api_key,version", RESPONSES, ids=[f"{apis.api(k).name}-v{v}" for k, v in RESPONSES])
def test_the_skimmer_finds_the_error_codes_the_decoder_finds(api_key, version):
    cls = message_class(apis.api(api_key).response)

    @SETTINGS
    @given(messages(cls, version, unknown_tags=cls.is_flexible(version)), st.integers(1, 64))
    def check(body, cut):
        payload = _payload(api_key, version, body)
        expected = sorted(_full(api_key, version, payload))
        whole = error_codes(api_key, version, payload)
        assert whole.problem is None and whole.size == len(payload)
        assert sorted(skim_error_names(whole)) == expected
        pieces = Skimmer(api_key, version, len(payload))
        for i in range(0, len(payload), cut):
            pieces.feed(memoryview(payload)[i : i + cut])
        assert pieces.result() == whole

    check()


def _fetch(version: int, errors: dict[int, int], records: bytes = b"r" * 5000):
    cls = message_class("FetchResponse")
    parts = [
        cls.PartitionData(partition_index=p, error_code=errors.get(p, 0), high_watermark=9, records=records)
        for p in range(40)
    ]
    return cls(responses=[cls.FetchableTopicResponse(topic="t", partitions=parts)])


def test_a_skimmed_response_that_ends_inside_its_body_says_so():
    payload = _payload(1, 12, _fetch(12, {17: 1}))
    skimmer = Skimmer(1, 12, len(payload))
    skimmer.feed(payload[: len(payload) // 2])
    result = skimmer.result()
    assert result.problem is not None and "ends inside" in result.problem


@pytest.mark.parametrize("cut", [1, 9, 4096, 1 << 20])
def test_the_observer_skims_what_it_is_told_to_and_pairs_it_with_its_request(cut):
    """A Fetch among small frames, both ways, in pieces of any size: the skimmed one comes back with its error
    codes and no payload; the frames around it as usual."""
    from kafkawire.protocol.messages import FetchRequest, MetadataRequest, MetadataResponse
    from kafkawire.protocol.rpc import encode_request, request_header

    asked = []

    def skim(api_key, api_version, corr, size):
        asked.append((api_key, corr))
        return api_key == 1

    observer = ProtocolConnection(Role.OBSERVER, skim=skim)
    requests = encode_request(request_header(1, 12, 5, "t"), FetchRequest()) + encode_request(
        request_header(3, 9, 6, "t"), MetadataRequest(topics=None)
    )
    fetch = _payload(1, 12, _fetch(12, {3: 1, 30: 6}), 5)
    metadata = _payload(3, 9, MetadataResponse(), 6)
    responses = len(fetch).to_bytes(4, "big") + fetch + len(metadata).to_bytes(4, "big") + metadata
    observer.receive_data(requests, from_client=True)
    for i in range(0, len(responses), cut):
        observer.receive_data(responses[i : i + cut], from_client=False)
    events = list(observer.events())
    got = [e for e in events if type(e).__name__ == "ResponseReceived"]
    assert [e.correlation_id for e in got] == [5, 6]
    skimmed, whole = got
    assert skimmed.payload == b"" and skimmed.skim.size == len(fetch)
    assert sorted(skim_error_names(skimmed.skim)) == sorted(_full(1, 12, fetch))
    assert skimmed.skim.errors == (
        ("responses[0].partitions[3].error_code", 1),
        ("responses[0].partitions[30].error_code", 6),
    )
    assert whole.skim is None and bytes(whole.payload) == metadata
    assert asked == [(1, 5), (3, 6)]
    assert observer.buffered == 0


def test_a_stream_that_ends_inside_a_skimmed_frame_is_a_truncation():
    from kafkawire.protocol.messages import FetchRequest
    from kafkawire.protocol.rpc import encode_request, request_header

    observer = ProtocolConnection(Role.OBSERVER, skim=lambda *_: True)
    observer.receive_data(encode_request(request_header(1, 12, 5, "t"), FetchRequest()), from_client=True)
    fetch = _payload(1, 12, _fetch(12, {}), 5)
    observer.receive_data(len(fetch).to_bytes(4, "big") + fetch[:1000], from_client=False)
    observer.receive_eof(from_client=False)
    events = list(observer.events())
    assert events[-1].kind == "truncated" and events[-1].fatal


def test_an_array_count_beyond_the_remaining_bytes_stops_the_walk_at_once():
    """A hostile count (2**31-1 partitions in a few bytes) is refused, as Kafka's decoders refuse it, instead of
    being walked element by element."""
    payload = bytearray(_payload(1, 4, _fetch(4, {})))
    # v4: correlation id, throttle_time_ms, responses count (1), topic name, then the partitions count
    at = 4 + 4 + 4 + 2 + 1
    assert payload[at : at + 4] == (40).to_bytes(4, "big")
    payload[at : at + 4] = (2**31 - 1).to_bytes(4, "big")
    result = error_codes(1, 4, bytes(payload))
    assert result.problem is not None and "2147483647 elements" in result.problem
