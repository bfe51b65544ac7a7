"""ApiVersions v5 (KIP-1242): a client names the cluster and node it means to reach.

Kafka 4.4 answers, as probed on the reference: neither named (null, -1) -> the usual answer; exactly
one of them named -> INVALID_REQUEST; both named and either differs from this broker (an empty cluster
id included) -> REBOOTSTRAP_REQUIRED; an invalid client software name is INVALID_REQUEST first. Error
answers list no API keys, and the connection stays open. Each case is checked on kafkawire and on the
reference Kafka, whose answers must be the same.
"""

from __future__ import annotations

import pytest

from kafkawire.protocol import errors

from .conftest import msg
from .reference import reference_client

OTHER_CLUSTER = "AAAAAAAAAAAAAAAAAAAAAA"


def _identity(client):
    res = client.call(msg("MetadataRequest", topics=[], allow_auto_topic_creation=False), 12)
    return res.cluster_id, res.brokers[0].node_id


# (case, fields of the request given this broker's (cluster id, node id), expected error code)
CASES = [
    ("neither", lambda c, n: {}, 0),
    ("both, this broker", lambda c, n: dict(cluster_id=c, node_id=n), 0),
    ("both, another cluster", lambda c, n: dict(cluster_id=OTHER_CLUSTER, node_id=n), errors.REBOOTSTRAP_REQUIRED),
    ("both, another node", lambda c, n: dict(cluster_id=c, node_id=n + 5), errors.REBOOTSTRAP_REQUIRED),
    ("both, empty cluster id", lambda c, n: dict(cluster_id="", node_id=n), errors.REBOOTSTRAP_REQUIRED),
    ("both other", lambda c, n: dict(cluster_id=OTHER_CLUSTER, node_id=77), errors.REBOOTSTRAP_REQUIRED),
    ("cluster only", lambda c, n: dict(cluster_id=c), errors.INVALID_REQUEST),
    ("node only", lambda c, n: dict(node_id=n), errors.INVALID_REQUEST),
    ("node -2 only", lambda c, n: dict(node_id=-2), errors.INVALID_REQUEST),
    (
        "bad software name, another cluster",
        lambda c, n: dict(cluster_id=OTHER_CLUSTER, node_id=n, client_software_name="-bad-"),
        errors.INVALID_REQUEST,
    ),
]


def _ask(client, fields: dict):
    fields = {"client_software_name": "kafkawire-tests", "client_software_version": "1.0", **fields}
    return client.call(msg("ApiVersionsRequest", **fields), 5)


def _answer(client, make):
    cluster, node = _identity(client)
    res = _ask(client, make(cluster, node))
    # the connection stays open: the next request (neither named) is answered in full
    again = _ask(client, {})
    assert again.error_code == 0 and again.api_keys
    return res


@pytest.mark.parametrize("case,make,expected", CASES, ids=[c[0] for c in CASES])
def test_v5_target_check(client, case, make, expected):
    res = _answer(client, make)
    assert res.error_code == expected
    if expected:
        assert res.api_keys == [] and res.throttle_time_ms == 0
    else:
        assert any(k.api_key == 18 and k.max_version == 5 for k in res.api_keys)


@pytest.mark.parametrize("case,make,expected", CASES, ids=[c[0] for c in CASES])
def test_v5_target_check_as_kafka(client, reference_kafka, case, make, expected):
    ref = reference_client(reference_kafka)
    try:
        theirs = _answer(ref, make)
    finally:
        ref.close()
    ours = _answer(client, make)
    assert theirs.error_code == expected  # the reference agrees with the facts above
    assert ours.error_code == theirs.error_code
    if expected:
        assert ours.to_dict() == theirs.to_dict()  # the whole error answer, byte for byte in content
