"""The broker's feature levels (KIP-584), as ApiVersions reports them (v3+) and the Admin's
describeFeatures reads them.

A client uses the finalized level of a feature to pick a protocol path, so kafkawire finalizes a
feature only at a level whose path it serves. Kafka 4.4 (the reference, a freshly formatted node)
reports, for comparison: supported group.version 0-1, kraft.version 0-1, metadata.version 7-33,
share.version 0-2, streams.version 0-1, transaction.version 0-2, eligible.leader.replicas.version
0-1; finalized group.version 1, streams.version 1, transaction.version 2,
eligible.leader.replicas.version 1, share.version 2, metadata.version 33 (kraft.version 0, which
like every level 0 is not listed).

kafkawire:

- ``metadata.version`` 7-33, finalized 33 (4.4-IV2): the metadata level of the Kafka release whose
  protocol kafkawire speaks. kafkawire keeps no KRaft metadata log; nothing at this level asks a
  client for more than the single node already answers.
- ``group.version`` 0-1, finalized 1: the KIP-848 consumer protocol (ConsumerGroupHeartbeat and
  ConsumerGroupDescribe) is served, and so is the classic protocol.
- ``eligible.leader.replicas.version`` 0-1, finalized 1: with one replica per partition the ISR is
  always the leader and the ELR lists are always empty, which is what level 1 reports.
- ``kraft.version`` 0 only: the quorum is one static voter (DescribeQuorum), as with
  ``controller.quorum.voters``; KIP-853's voter changes are not served.
- ``transaction.version`` 0-2, finalized 2, as Kafka 4.4: Kafka 4.x clients take the Transactions V2
  path (KIP-890: Produce v12 adds partitions to the transaction implicitly, EndTxn v5 bumps the epoch),
  older clients, which do not read the feature, keep AddPartitionsToTxn and EndTxn below v5 (TV1); the
  transaction coordinator (``broker/transactions/``) serves both.
- ``share.version`` and ``streams.version`` 0 only: share groups (KIP-932) and streams groups
  (KIP-1071) are not served.

Features are fixed for the life of the process (UpdateFeatures is not served), so the finalized
epoch is a constant.
"""

from __future__ import annotations

from typing import NamedTuple


class Feature(NamedTuple):
    name: str
    min_version: int  # lowest supported level
    max_version: int  # highest supported level
    finalized: int  # the level in effect; 0 is not listed among the finalized features


# in the order Kafka 4.4 lists its supported features
FEATURES: tuple[Feature, ...] = (
    Feature("group.version", 0, 1, 1),
    Feature("kraft.version", 0, 0, 0),
    Feature("metadata.version", 7, 33, 33),
    Feature("share.version", 0, 0, 0),
    Feature("streams.version", 0, 0, 0),
    Feature("transaction.version", 0, 2, 2),
    Feature("eligible.leader.replicas.version", 0, 1, 1),
)

# Kafka reports the metadata log offset of the last feature change; kafkawire's never change.
FINALIZED_EPOCH = 1


def supported(api_version: int) -> list[Feature]:
    """The supported features an ApiVersions response at ``api_version`` lists. Before v4 a range
    starting at 0 could not be read by clients (KAFKA-17011), so, as Kafka does, those are left out."""
    if api_version < 3:
        return []
    return [f for f in FEATURES if api_version >= 4 or f.min_version > 0]


# the order of Kafka 4.4's finalized list
_FINALIZED_ORDER = (
    "group.version",
    "streams.version",
    "transaction.version",
    "eligible.leader.replicas.version",
    "share.version",
    "metadata.version",
    "kraft.version",
)


def finalized() -> dict[str, int]:
    """Finalized feature levels above 0, by name."""
    levels = {f.name: f.finalized for f in FEATURES if f.finalized > 0}
    return {name: levels[name] for name in sorted(levels, key=_FINALIZED_ORDER.index)}


def level(name: str) -> int:
    """The finalized level of feature ``name`` (0 when unknown)."""
    for f in FEATURES:
        if f.name == name:
            return f.finalized
    return 0


def api_versions_fields(api_version: int, response_class) -> dict:
    """The feature fields of an ApiVersionsResponse (tagged, v3+) as keyword arguments; empty before v3."""
    if api_version < 3:
        return {}
    return {
        "supported_features": [
            response_class.SupportedFeatureKey(name=f.name, min_version=f.min_version, max_version=f.max_version)
            for f in supported(api_version)
        ],
        "finalized_features_epoch": FINALIZED_EPOCH,
        "finalized_features": [
            response_class.FinalizedFeatureKey(name=name, max_version_level=lv, min_version_level=lv)
            for name, lv in finalized().items()
        ],
    }
