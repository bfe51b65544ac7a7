"""What a KRaft metadata log says, replayed: topics, their partitions and configs, dynamic broker configs,
feature levels and SCRAM credentials. Records kafkawire has no use for (broker registrations, producer id
blocks, NoOps, ...) are read and passed over; they stay in the log for Kafka."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ..base import TopicMeta

# ConfigRecord.ResourceType: Kafka's ConfigResource.Type ids
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@dataclass
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: set[int] = field(default_factory=set)


class MetadataImage:
    def __init__(self) -> None:
        self.topics: dict[uuid.UUID, TopicImage] = {}
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.features: dict[str, int] = {}
        self.scram: dict[tuple[str, int], object] = {}
        self.acls: dict[uuid.UUID, object] = {}
        self._pending: list | None = None  # records of an open metadata transaction

    def apply(self, name: str, message) -> None:
        if name == "BeginTransactionRecord":
            self._pending = []
        elif name == "EndTransactionRecord":
            pending, self._pending = self._pending or [], None
            for n, m in pending:
                self._apply(n, m)
        elif name == "AbortTransactionRecord":
            self._pending = None
        elif self._pending is not None:
            self._pending.append((name, message))
        else:
            self._apply(name, message)

    def _apply(self, name: str, m) -> None:
        if name == "TopicRecord":
            self.topics[m.topic_id] = TopicImage(m.name, m.topic_id)
        elif name == "PartitionRecord":
            topic = self.topics.get(m.topic_id)
            if topic is not None:
                topic.partitions.add(m.partition_id)
        elif name == "RemoveTopicRecord":
            topic = self.topics.pop(m.topic_id, None)
            if topic is not None:
                self.configs.pop((TOPIC_RESOURCE, topic.name), None)
        elif name == "ConfigRecord":
            configs = self.configs.setdefault((m.resource_type, m.resource_name), {})
            if m.value is None:
                configs.pop(m.name, None)
            else:
                configs[m.name] = m.value
        elif name == "FeatureLevelRecord":
            if m.feature_level == 0:
                self.features.pop(m.name, None)
            else:
                self.features[m.name] = m.feature_level
        elif name == "UserScramCredentialRecord":
            self.scram[(m.name, m.mechanism)] = m
        elif name == "RemoveUserScramCredentialRecord":
            self.scram.pop((m.name, m.mechanism), None)
        elif name == "AccessControlEntryRecord":
            self.acls[m.id] = m
        elif name == "RemoveAccessControlEntryRecord":
            self.acls.pop(m.id, None)

    def topic_metas(self) -> dict[str, TopicMeta]:
        """Every topic with partitions 0..n-1 (a topic whose partitions have a gap counts up to the gap)."""
        out = {}
        for t in self.topics.values():
            count = 0
            while count in t.partitions:
                count += 1
            if count:
                out[t.name] = TopicMeta(
                    name=t.name,
                    topic_id=t.topic_id,
                    partitions=count,
                    configs=dict(self.configs.get((TOPIC_RESOURCE, t.name), {})),
                )
        return out
