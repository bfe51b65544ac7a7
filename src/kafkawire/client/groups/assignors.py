"""Client-side partition assignors of the classic group protocol: range, roundrobin, cooperative-sticky.

The group leader runs the assignor named by the protocol the coordinator chose
(the one every member supports) over every member's subscription. Members are
ordered as Kafka's Java client orders them (``group.instance.id`` when both
members have one, else member id), so a kafkawire leader hands out the same
partitions a Java or librdkafka leader would for range and roundrobin.

* ``range`` (Kafka's RangeAssignor): topic by topic, the topic's partitions
  split into contiguous ranges over the members subscribed to it; the first
  ``partitions % members`` members get one more.
* ``roundrobin`` (RoundRobinAssignor): every subscribed partition of every
  topic, sorted by topic and partition, dealt out in turn to the members
  subscribed to its topic.
* ``cooperative-sticky`` (CooperativeStickyAssignor): a balanced assignment
  that keeps as many owned partitions where they are as balance allows; a
  partition that changes owner is left out of this generation's assignment,
  so its old owner revokes it first and a follow-up rebalance hands it on
  (incremental cooperative rebalancing, KIP-429). When two members claim one
  partition the claim of the higher generation wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TP = tuple[str, int]
EAGER = "eager"
COOPERATIVE = "cooperative"


@dataclass
class MemberSubscription:
    """What one member sent in its JoinGroup metadata (``ConsumerProtocolSubscription``)."""

    member_id: str
    topics: list[str]
    owned: list[TP] = field(default_factory=list)
    generation: int = -1
    instance_id: str | None = None
    user_data: bytes | None = None


def member_order(members: dict[str, MemberSubscription]) -> list[str]:
    """Member ids in the Java client's order: static members by instance id first, then by member id."""

    def key(mid: str):
        inst = members[mid].instance_id
        return (0, inst, mid) if inst is not None else (1, mid, mid)

    return sorted(members, key=key)


class Assignor:
    name = ""
    protocols: tuple[str, ...] = (EAGER,)

    def assign(self, members: dict[str, MemberSubscription], partitions: dict[str, int]) -> dict[str, list[TP]]:
        raise NotImplementedError


class RangeAssignor(Assignor):
    name = "range"

    def assign(self, members: dict[str, MemberSubscription], partitions: dict[str, int]) -> dict[str, list[TP]]:
        out: dict[str, list[TP]] = {m: [] for m in members}
        order = member_order(members)
        for topic in sorted({t for m in members.values() for t in m.topics}):
            n = partitions.get(topic, 0)
            subs = [m for m in order if topic in members[m].topics]
            if not n or not subs:
                continue
            per, extra = divmod(n, len(subs))
            for i, m in enumerate(subs):
                start = i * per + min(i, extra)
                out[m].extend((topic, p) for p in range(start, start + per + (1 if i < extra else 0)))
        return out


class RoundRobinAssignor(Assignor):
    name = "roundrobin"

    def assign(self, members: dict[str, MemberSubscription], partitions: dict[str, int]) -> dict[str, list[TP]]:
        out: dict[str, list[TP]] = {m: [] for m in members}
        order = member_order(members)
        if not order:
            return out
        i = 0
        for topic in sorted({t for m in members.values() for t in m.topics}):
            for p in range(partitions.get(topic, 0)):
                for _ in range(len(order)):  # the next member (in turn) that subscribes to the topic
                    m = order[i % len(order)]
                    i += 1
                    if topic in members[m].topics:
                        out[m].append((topic, p))
                        break
        return out


class CooperativeStickyAssignor(Assignor):
    name = "cooperative-sticky"
    protocols = (COOPERATIVE, EAGER)

    def __init__(self, cooperative: bool = True):
        self.cooperative = cooperative

    def assign(self, members: dict[str, MemberSubscription], partitions: dict[str, int]) -> dict[str, list[TP]]:
        order = member_order(members)
        rank = {m: i for i, m in enumerate(order)}
        exists = {(t, p) for t, n in partitions.items() for p in range(n)}
        # the previous owner of each partition: the claim of the highest generation wins
        owner: dict[TP, str] = {}
        owner_gen: dict[TP, int] = {}
        for m in order:
            sub = members[m]
            for tp in sub.owned:
                if tp not in exists or tp[0] not in sub.topics:
                    continue
                if tp not in owner or sub.generation > owner_gen[tp]:
                    owner[tp], owner_gen[tp] = m, sub.generation
        current: dict[str, list[TP]] = {m: [] for m in order}
        for tp, m in owner.items():
            current[m].append(tp)
        for m in order:
            current[m].sort()
        eligible = {tp: [m for m in order if tp[0] in members[m].topics] for tp in exists}
        # members keep at most their fair share of what they can consume; the rest is unassigned
        total = sum(1 for tp in exists if eligible[tp])
        subscribed = sum(1 for m in order if members[m].topics)
        if subscribed:
            cap = -(-total // subscribed)
            for m in order:
                if len(current[m]) > cap:
                    current[m] = current[m][:cap]
        assigned = {tp for ps in current.values() for tp in ps}
        for tp in sorted(exists - assigned):
            cands = eligible[tp]
            if cands:
                best = min(cands, key=lambda m: (len(current[m]), rank[m]))
                current[best].append(tp)
        # balance: move a partition from a member with two or more than another that could take it;
        # newly placed partitions move before owned ones (stickiness); bounded by the partition count
        for _ in range(len(exists) + 1):
            moved = False
            for a in sorted(order, key=lambda m: (-len(current[m]), rank[m])):
                for b in sorted(order, key=lambda m: (len(current[m]), rank[m])):
                    if len(current[b]) + 1 >= len(current[a]):
                        break
                    movable = [tp for tp in current[a] if tp[0] in members[b].topics]
                    if not movable:
                        continue
                    movable.sort(key=lambda tp: (owner.get(tp) == a, tp), reverse=True)
                    tp = movable[-1]
                    current[a].remove(tp)
                    current[b].append(tp)
                    moved = True
                    break
                if moved:
                    break
            if not moved:
                break
        if self.cooperative:
            # a partition moving to a new owner is held back until its old owner has revoked it
            for m in order:
                current[m] = [tp for tp in current[m] if owner.get(tp, m) == m]
        return {m: sorted(ps) for m, ps in current.items()}


ASSIGNORS: dict[str, type[Assignor]] = {
    a.name: a for a in (RangeAssignor, RoundRobinAssignor, CooperativeStickyAssignor)
}


def assignor(name: str) -> Assignor:
    try:
        return ASSIGNORS[name]()
    except KeyError:
        raise ValueError(f"unknown assignor {name!r} (known: {', '.join(ASSIGNORS)})") from None


__all__ = [
    "ASSIGNORS",
    "Assignor",
    "CooperativeStickyAssignor",
    "MemberSubscription",
    "RangeAssignor",
    "RoundRobinAssignor",
    "assignor",
    "member_order",
]
