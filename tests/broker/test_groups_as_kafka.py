"""Group API answers that the conformance suite found different from Kafka 4.4's (fixed here)."""

from __future__ import annotations

from kafkawire.protocol import errors

from .conftest import msg

INT32_MIN = -(1 << 31)


def test_find_coordinator_success_carries_kafkas_message(client):
    for v in (1, 2, 3):
        r = client.call(msg("FindCoordinatorRequest", key="g", key_type=0), v)
        assert (r.error_code, r.error_message) == (0, "NONE")
    for v in (4, 5, 6):
        r = client.call(msg("FindCoordinatorRequest", key_type=0, coordinator_keys=["g", ""]), v)
        assert [(c.error_code, c.error_message) for c in r.coordinators] == [(0, ""), (0, "")]


def test_described_group_operations_include_the_config_operations(client):
    r = client.call(msg("DescribeGroupsRequest", groups=["nobody"], include_authorized_operations=True), 5)
    # READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
    assert r.groups[0].authorized_operations == 3400


def test_consumer_group_describe_error_entries_have_no_state_or_operations(client):
    r = client.call(
        msg("ConsumerGroupDescribeRequest", group_ids=["missing", ""], include_authorized_operations=True), 1
    )
    missing, empty = r.groups
    assert (missing.error_code, missing.group_state, missing.authorized_operations) == (
        errors.GROUP_ID_NOT_FOUND,
        "",
        INT32_MIN,
    )
    assert (empty.error_code, empty.error_message, empty.group_state, empty.authorized_operations) == (
        errors.INVALID_GROUP_ID,
        None,
        "",
        INT32_MIN,
    )
