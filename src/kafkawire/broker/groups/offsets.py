"""Committed offsets: group -> (topic, partition) -> offset, leader epoch, metadata, commit time."""

from __future__ import annotations

import msgspec


class OffsetEntry(msgspec.Struct, frozen=True):
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp: int = -1

    def to_json(self) -> dict:
        return {
            "offset": self.offset,
            "leader_epoch": self.leader_epoch,
            "metadata": self.metadata,
            "commit_timestamp": self.commit_timestamp,
        }

    @classmethod
    def from_json(cls, d: dict) -> OffsetEntry:
        return cls(
            int(d["offset"]), int(d.get("leader_epoch", -1)), d.get("metadata", ""), int(d.get("commit_timestamp", -1))
        )


class OffsetStore:
    def __init__(self):
        self._groups: dict[str, dict[tuple[str, int], OffsetEntry]] = {}

    def get(self, group: str, topic: str, partition: int) -> OffsetEntry | None:
        g = self._groups.get(group)
        return None if g is None else g.get((topic, partition))

    def put(self, group: str, topic: str, partition: int, entry: OffsetEntry) -> None:
        self._groups.setdefault(group, {})[(topic, partition)] = entry

    def delete(self, group: str, topic: str, partition: int) -> bool:
        g = self._groups.get(group)
        if g is None or (topic, partition) not in g:
            return False
        del g[(topic, partition)]
        if not g:
            del self._groups[group]
        return True

    def group(self, group: str) -> dict[tuple[str, int], OffsetEntry]:
        """The group's offsets (a copy), sorted by topic and partition."""
        return dict(sorted(self._groups.get(group, {}).items()))

    def has_group(self, group: str) -> bool:
        return bool(self._groups.get(group))

    def delete_group(self, group: str) -> list[tuple[str, int]]:
        return list(self._groups.pop(group, {}).keys())

    def groups(self) -> list[str]:
        return list(self._groups)

    def count(self) -> int:
        return sum(len(g) for g in self._groups.values())

    def items(self):
        for group, offsets in self._groups.items():
            for (topic, partition), entry in offsets.items():
                yield group, topic, partition, entry
