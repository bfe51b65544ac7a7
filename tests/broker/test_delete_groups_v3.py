"""DeleteGroups v3 (a per-group ErrorMessage), as Kafka 4.4 answers it."""

from __future__ import annotations

import time

import pytest

from kafkawire.protocol import errors

from .conftest import msg
from .reference import reference_client, unique


def _delete_groups_answers(client, prefix: str) -> list[dict]:
    """Deletes an unknown group, the empty id, a group with a member and an emptied one (v3)."""
    busy, left = f"{prefix}-busy", f"{prefix}-left"
    J = msg("JoinGroupRequest").__class__
    protocols = [J.JoinGroupRequestProtocol(name="range", metadata=b"")]
    for group in (busy, left):
        deadline = time.monotonic() + 30
        while True:  # Kafka loads the group's offsets partition after its first FindCoordinator
            joined = client.call(
                J(
                    group_id=group,
                    session_timeout_ms=30000,
                    rebalance_timeout_ms=30000,
                    member_id="",
                    protocol_type="consumer",
                    protocols=protocols,
                ),
                3,
            )  # no member id round trip
            if (
                joined.error_code
                not in (errors.COORDINATOR_LOAD_IN_PROGRESS, errors.COORDINATOR_NOT_AVAILABLE, errors.NOT_COORDINATOR)
                or time.monotonic() > deadline
            ):
                break
            client.call(msg("FindCoordinatorRequest", key=group, key_type=0), 3)
            time.sleep(0.2)
        assert joined.error_code == 0
    member = joined.member_id
    L = msg("LeaveGroupRequest").__class__
    assert client.call(L(group_id=left, member_id=member), 0).error_code == 0
    res = client.call(msg("DeleteGroupsRequest", groups_names=[f"{prefix}-unknown", "", busy, left]), 3)
    return sorted(
        (
            {"group": r.group_id.replace(prefix, "<p>"), "error_code": r.error_code, "error_message": r.error_message}
            for r in res.results
        ),
        key=lambda d: d["group"],
    )


def test_delete_groups_v3_error_messages_are_null(client):
    answers = _delete_groups_answers(client, "dg3")
    assert answers == [
        {"group": "", "error_code": errors.GROUP_ID_NOT_FOUND, "error_message": None},  # as Kafka 4.4
        {"group": "<p>-busy", "error_code": errors.NON_EMPTY_GROUP, "error_message": None},
        {"group": "<p>-left", "error_code": 0, "error_message": None},
        {"group": "<p>-unknown", "error_code": errors.GROUP_ID_NOT_FOUND, "error_message": None},
    ]


def test_delete_groups_v3_as_the_reference_kafka(client, reference_kafka):
    theirs = reference_client(reference_kafka)
    try:
        assert _delete_groups_answers(client, "dg3") == _delete_groups_answers(theirs, unique("dg3"))
    finally:
        theirs.close()


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_delete_groups_advertised_to_v3(client, version):
    res = client.call(msg("ApiVersionsRequest", client_software_name="t", client_software_version="1"), 3)
    assert {k.api_key: (k.min_version, k.max_version) for k in res.api_keys}[42] == (0, 3)
    assert (
        client.call(msg("DeleteGroupsRequest", groups_names=["none"]), version).results[0].error_code
        == errors.GROUP_ID_NOT_FOUND
    )
