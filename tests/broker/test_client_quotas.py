"""DescribeClientQuotas: no quotas are configured in kafkawire; filters are checked as Kafka 4.4 checks them."""

from __future__ import annotations

import pytest

from kafkawire.protocol import errors

from .conftest import msg
from .reference import reference_client

FILTERS = {
    "all": ([], 0),
    "users": ([("user", 2, None)], 0),
    "ip-default": ([("ip", 1, None)], 0),
    "exact-without-name": ([("user", 0, None)], errors.INVALID_REQUEST),
    "unknown-entity-type": ([("planet", 2, None)], errors.UNSUPPORTED_VERSION),
    "unknown-match-type": ([("user", 9, None)], errors.INVALID_REQUEST),
    "empty-entity-type": ([("", 2, None)], errors.INVALID_REQUEST),
    "entity-type-twice": ([("user", 2, None), ("user", 0, "a")], errors.INVALID_REQUEST),
    "default-with-name": ([("user", 1, "x")], errors.INVALID_REQUEST),
    "specified-with-name": ([("user", 2, "x")], errors.INVALID_REQUEST),
    "ip-with-client-id": ([("client-id", 0, "c"), ("ip", 0, "10.0.0.1")], errors.INVALID_REQUEST),
    "twice-then-unknown": ([("user", 2, None), ("planet", 2, None)], errors.UNSUPPORTED_VERSION),
    "bad-match-then-unknown": ([("user", 9, None), ("planet", 2, None)], errors.INVALID_REQUEST),
}


def _describe(client, components, version):
    R = msg("DescribeClientQuotasRequest").__class__
    res = client.call(
        R(components=[R.ComponentData(entity_type=e, match_type=m, match=x) for e, m, x in components], strict=False),
        version,
    )
    return res.error_code, res.error_message is None, res.entries


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("name", FILTERS)
def test_describe_client_quotas_filters(client, name, version):
    components, code = FILTERS[name]
    error_code, message_null, entries = _describe(client, components, version)
    assert error_code == code
    assert not message_null  # "" on success, a reason otherwise
    assert entries == ([] if code == 0 else None)


def test_describe_client_quotas_as_the_reference_kafka(client, reference_kafka):
    theirs = reference_client(reference_kafka)
    try:
        for components, _ in FILTERS.values():
            ours, ref = _describe(client, components, 1), _describe(theirs, components, 1)
            assert ours == ref, components
    finally:
        theirs.close()
    R = msg("DescribeClientQuotasRequest").__class__
    assert client.call(R(components=[], strict=False), 1).error_message == ""
