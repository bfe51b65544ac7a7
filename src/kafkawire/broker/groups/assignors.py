"""Server-side assignors of the consumer group protocol (KIP-848): ``uniform`` and ``range``.

An assignor maps members to partitions given each member's subscribed topics,
the partition counts of those topics and the current target assignment (for
stickiness). Partitions are ``(topic_id, partition)``; topic ids are
``uuid.UUID``. Both are deterministic (members are taken in member id order).
"""

from __future__ import annotations

import uuid

TP = tuple  # (uuid.UUID, int)


def uniform(members: dict[str, set], topics: dict[uuid.UUID, int], current: dict[str, set]) -> dict[str, set]:
    """Balanced and sticky: every member keeps what it can of its current partitions, the counts of members
    that could take a partition differ by at most one (exactly balanced when subscriptions are the same)."""
    ids = sorted(members)
    result: dict[str, set] = {m: set() for m in ids}
    if not ids:
        return result
    eligible: dict[TP, list[str]] = {}
    for tid, count in sorted(topics.items(), key=lambda kv: str(kv[0])):
        subs = [m for m in ids if tid in members[m]]
        if not subs:
            continue
        for p in range(count):
            eligible[(tid, p)] = subs
    owner: dict[TP, str] = {}
    # 1. keep current partitions that are still valid
    for m in ids:
        for tp in sorted(current.get(m, ()), key=lambda x: (str(x[0]), x[1])):
            if tp in eligible and m in eligible[tp] and tp not in owner:
                owner[tp] = m
                result[m].add(tp)
    # 2. trim members above their fair share (homogeneous quota), so that newcomers get partitions
    total = len(eligible)
    if total:
        by_count = sorted(ids, key=lambda m: (-len(result[m]), m))
        quota, extra = divmod(total, len(ids))
        for i, m in enumerate(by_count):
            limit = quota + (1 if i < extra else 0)
            if len(result[m]) > limit:
                for tp in sorted(result[m], key=lambda x: (str(x[0]), x[1]), reverse=True)[: len(result[m]) - limit]:
                    result[m].discard(tp)
                    del owner[tp]
    # 3. place unassigned partitions on the least loaded eligible member
    for tp in sorted(eligible, key=lambda x: (str(x[0]), x[1])):
        if tp in owner:
            continue
        m = min(eligible[tp], key=lambda x: (len(result[x]), x))
        owner[tp] = m
        result[m].add(tp)
    # 4. balance: move partitions from a member to an eligible one with at least two fewer
    for _ in range(total * len(ids) + 1):
        moved = False
        for tp in sorted(owner, key=lambda x: (str(x[0]), x[1])):
            src = owner[tp]
            dst = min(eligible[tp], key=lambda x: (len(result[x]), x))
            if len(result[dst]) + 1 < len(result[src]):
                result[src].discard(tp)
                result[dst].add(tp)
                owner[tp] = dst
                moved = True
        if not moved:
            break
    return result


def range_(members: dict[str, set], topics: dict[uuid.UUID, int], current: dict[str, set]) -> dict[str, set]:
    """Per topic, the subscribed members in member id order get consecutive ranges; the first
    ``partitions % members`` get one more (co-partitioned topics line up)."""
    ids = sorted(members)
    result: dict[str, set] = {m: set() for m in ids}
    for tid, count in topics.items():
        subs = [m for m in ids if tid in members[m]]
        if not subs:
            continue
        quota, extra = divmod(count, len(subs))
        start = 0
        for i, m in enumerate(subs):
            n = quota + (1 if i < extra else 0)
            result[m].update((tid, p) for p in range(start, start + n))
            start += n
    return result


ASSIGNORS = {"uniform": uniform, "range": range_}
