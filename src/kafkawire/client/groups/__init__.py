"""Consumer groups for kafkawire's client: ``Consumer(group_id=...)`` and ``subscribe()``.

``membership`` runs the group protocol for a consumer (classic JoinGroup/SyncGroup
with client-side assignors, or KIP-848 ConsumerGroupHeartbeat), ``assignors``
holds range, roundrobin and cooperative-sticky, ``protocol`` the consumer
protocol's subscription and assignment encoding.
"""

from __future__ import annotations

from .assignors import (
    ASSIGNORS,
    Assignor,
    CooperativeStickyAssignor,
    MemberSubscription,
    RangeAssignor,
    RoundRobinAssignor,
)
from .membership import ClassicMembership, CommitFailedError, ConsumerMembership, GroupError, Listener

__all__ = [
    "ASSIGNORS",
    "Assignor",
    "ClassicMembership",
    "CommitFailedError",
    "ConsumerMembership",
    "CooperativeStickyAssignor",
    "GroupError",
    "Listener",
    "MemberSubscription",
    "RangeAssignor",
    "RoundRobinAssignor",
]
