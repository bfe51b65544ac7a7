"""The consumer protocol embedded in the classic group protocol (JoinGroup metadata, SyncGroup assignment).

Both are an int16 version followed by the ``ConsumerProtocolSubscription`` /
``ConsumerProtocolAssignment`` schema of that version. We write version 3 (the
Java client's current one: topics, owned partitions, generation, rack) and read
any version, a newer one by its known prefix (newer versions only add fields).
"""

from __future__ import annotations

from ...protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from .assignors import TP, MemberSubscription

SUBSCRIPTION_VERSION = 3
MAX_KNOWN_VERSION = 3


def _group(tps) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        by_topic.setdefault(t, []).append(p)
    return by_topic


def encode_subscription(
    topics, owned=(), generation: int = -1, user_data: bytes | None = None, version: int = SUBSCRIPTION_VERSION
) -> bytes:
    S = ConsumerProtocolSubscription
    body = S(
        topics=sorted(topics),
        user_data=user_data,
        owned_partitions=[S.TopicPartition(topic=t, partitions=ps) for t, ps in _group(owned).items()],
        generation_id=generation,
        rack_id=None,
    )
    return version.to_bytes(2, "big") + body.encode(version)


def decode_subscription(member_id: str, instance_id: str | None, data: bytes) -> MemberSubscription:
    if len(data) < 2:
        raise ValueError(f"member {member_id}: subscription metadata too short")
    version = int.from_bytes(data[:2], "big", signed=True)
    if version < 0:
        raise ValueError(f"member {member_id}: subscription version {version}")
    sub = ConsumerProtocolSubscription.decode(memoryview(data)[2:], min(version, MAX_KNOWN_VERSION), strict=False)
    owned: list[TP] = (
        [(tp.topic, p) for tp in (sub.owned_partitions or []) for p in tp.partitions] if version >= 1 else []
    )
    generation = sub.generation_id if version >= 2 else -1
    user_data = bytes(sub.user_data) if sub.user_data is not None else None
    return MemberSubscription(member_id, list(sub.topics), owned, generation, instance_id, user_data)


def subscription_version(data: bytes) -> int:
    return max(0, int.from_bytes(data[:2], "big", signed=True)) if len(data) >= 2 else 0


def encode_assignment(tps, version: int = SUBSCRIPTION_VERSION) -> bytes:
    version = min(max(version, 0), MAX_KNOWN_VERSION)
    A = ConsumerProtocolAssignment
    body = A(
        assigned_partitions=[A.TopicPartition(topic=t, partitions=ps) for t, ps in _group(tps).items()], user_data=None
    )
    return version.to_bytes(2, "big") + body.encode(version)


def decode_assignment(data: bytes) -> list[TP]:
    """An empty assignment (zero bytes) is what a coordinator sends a member that got nothing."""
    if not data:
        return []
    if len(data) < 2:
        raise ValueError("assignment too short")
    version = int.from_bytes(data[:2], "big", signed=True)
    a = ConsumerProtocolAssignment.decode(memoryview(data)[2:], min(max(version, 0), MAX_KNOWN_VERSION), strict=False)
    return sorted((t.topic, p) for t in a.assigned_partitions for p in t.partitions)
