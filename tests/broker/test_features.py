"""Feature levels in ApiVersions (v3+), which the Admin's describeFeatures reads (broker/features.py).

kafkawire finalizes only the levels whose protocol paths it serves; where that differs from Kafka
4.4 the difference is listed in DEVIATIONS, and the comparison with the reference checks everything
else.
"""

from __future__ import annotations

import pytest

from kafkawire.broker import features

from .conftest import msg
from .reference import reference_client

# feature -> (kafkawire's supported max, kafkawire's finalized level), where kafkawire differs from Kafka 4.4
DEVIATIONS = {
    "kraft.version": (0, 0),  # one static voter; no KIP-853 voter changes
    "share.version": (0, 0),  # no share groups
    "streams.version": (0, 0),  # no streams groups
}


def api_versions(client, version):
    return client.call(
        msg("ApiVersionsRequest", client_software_name="kafkawire-tests", client_software_version="1.0"), version
    )


def test_v4_lists_every_supported_feature_and_the_finalized_levels(client):
    res = api_versions(client, 4)
    supported = {f.name: (f.min_version, f.max_version) for f in res.supported_features}
    assert supported == {
        "group.version": (0, 1),
        "kraft.version": (0, 0),
        "metadata.version": (7, 33),
        "share.version": (0, 0),
        "streams.version": (0, 0),
        "transaction.version": (0, 2),
        "eligible.leader.replicas.version": (0, 1),
    }
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in res.finalized_features}
    assert finalized == {
        "group.version": (1, 1),
        "metadata.version": (33, 33),
        "eligible.leader.replicas.version": (1, 1),
        "transaction.version": (2, 2),
    }
    assert res.finalized_features_epoch == features.FINALIZED_EPOCH >= 0


def test_transaction_version_2_goes_with_the_transaction_apis(client):
    """transaction.version 2 sends a Kafka 4.x producer down the KIP-890 path (Produce v12, EndTxn v5); older
    clients use AddPartitionsToTxn and EndTxn below v5: every one is served."""
    res = api_versions(client, 4)
    assert {f.name: f.max_version_level for f in res.finalized_features}["transaction.version"] == 2
    ranges = {k.api_key: (k.min_version, k.max_version) for k in res.api_keys}
    assert ranges[24] == (0, 5) and ranges[26] == (0, 5)  # AddPartitionsToTxn, EndTxn
    assert {25, 28, 65, 66} <= set(ranges)  # AddOffsetsToTxn, TxnOffsetCommit, Describe/ListTransactions


def test_group_version_1_goes_with_the_consumer_group_apis(client):
    keys = {k.api_key for k in api_versions(client, 4).api_keys}
    assert features.level("group.version") == 1 and {68, 69} <= keys  # ConsumerGroupHeartbeat, Describe


def test_v3_leaves_out_ranges_starting_at_0(client):
    res = api_versions(client, 3)
    assert [(f.name, f.min_version, f.max_version) for f in res.supported_features] == [("metadata.version", 7, 33)]
    assert {f.name for f in res.finalized_features} == {
        "group.version",
        "metadata.version",
        "eligible.leader.replicas.version",
        "transaction.version",
    }


@pytest.mark.parametrize("version", [0, 1, 2])
def test_no_features_before_v3(client, version):
    res = api_versions(client, version)
    assert (res.supported_features, res.finalized_features, res.finalized_features_epoch) == ([], [], -1)


@pytest.mark.parametrize("version", [3, 4])
def test_same_features_as_the_reference_kafka_but_the_listed_deviations(client, reference_kafka, version):
    ref = reference_client(reference_kafka)
    try:
        ours, theirs = api_versions(client, version), api_versions(ref, version)
    finally:
        ref.close()
    ours_supported = {f.name: (f.min_version, f.max_version) for f in ours.supported_features}
    ref_supported = {f.name: (f.min_version, f.max_version) for f in theirs.supported_features}
    ours_final = {f.name: f.max_version_level for f in ours.finalized_features}
    ref_final = {f.name: f.max_version_level for f in theirs.finalized_features}
    if version >= 4:
        assert set(ours_supported) == set(ref_supported)
    for name, (lo, hi) in ref_supported.items():
        if name in DEVIATIONS:
            assert ours_supported[name] == (lo, DEVIATIONS[name][0]), name
        else:
            assert ours_supported[name] == (lo, hi), name
    for name in set(ref_final) | set(ours_final) | set(DEVIATIONS):
        expected = DEVIATIONS[name][1] if name in DEVIATIONS else ref_final.get(name, 0)
        assert ours_final.get(name, 0) == expected, name
    assert [f.name for f in ours.supported_features] == [f.name for f in theirs.supported_features]
