"""What a KRaft metadata log says, replayed: topics, their partitions (leader, leader epoch, ISR, as
PartitionRecord and PartitionChangeRecord leave them) and configs, dynamic broker configs, feature levels,
SCRAM credentials and ACLs. Records kafkawire has no use for (broker registrations, producer id
blocks, NoOps, ...) are read and passed over; they stay in the log for Kafka."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ..base import TopicMeta

# ConfigRecord.ResourceType: Kafka's ConfigResource.Type ids
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


NO_LEADER = -1
NO_LEADER_CHANGE = -2  # PartitionChangeRecord.Leader: the leader (and so the leader epoch) stays


@dataclass
class PartitionImage:
    """One partition's registration, as Kafka's PartitionRegistration keeps it."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: list[int]
    elr: list[int]
    last_known_elr: list[int]

    def merge(self, m) -> None:
        """Apply a PartitionChangeRecord: a named leader (even the same one) bumps the leader epoch, every
        change bumps the partition epoch; null fields keep their value (PartitionRegistration.merge)."""
        if m.leader != NO_LEADER_CHANGE:
            self.leader = m.leader
            self.leader_epoch += 1
        self.partition_epoch += 1
        if m.isr is not None:
            self.isr = list(m.isr)
        if m.eligible_leader_replicas is not None:
            self.elr = list(m.eligible_leader_replicas)
        if m.last_known_elr is not None:
            self.last_known_elr = list(m.last_known_elr)


@dataclass
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionImage] = field(default_factory=dict)


class MetadataImage:
    def __init__(self) -> None:
        self.topics: dict[uuid.UUID, TopicImage] = {}
        self.ids: dict[str, uuid.UUID] = {}  # topic name -> id
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
            self.ids[m.name] = m.topic_id
        elif name == "PartitionRecord":
            topic = self.topics.get(m.topic_id)
            if topic is not None:
                topic.partitions[m.partition_id] = PartitionImage(
                    m.leader,
                    m.leader_epoch,
                    m.partition_epoch,
                    list(m.isr),
                    list(m.eligible_leader_replicas or ()),
                    list(m.last_known_elr or ()),
                )
        elif name == "PartitionChangeRecord":
            topic = self.topics.get(m.topic_id)
            partition = topic.partitions.get(m.partition_id) if topic is not None else None
            if partition is not None:
                partition.merge(m)
        elif name == "RemoveTopicRecord":
            topic = self.topics.pop(m.topic_id, None)
            if topic is not None:
                if self.ids.get(topic.name) == m.topic_id:
                    del self.ids[topic.name]
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

    def partition(self, topic: str, partition: int) -> PartitionImage | None:
        t = self.topics.get(self.ids.get(topic))  # type: ignore[arg-type]
        return t.partitions.get(partition) if t is not None else None

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
