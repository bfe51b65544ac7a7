"""What a KRaft metadata log says, replayed: topics, their partitions (leader, leader epoch, ISR, as
PartitionRecord and PartitionChangeRecord leave them) and configs, dynamic broker configs, feature levels,
SCRAM credentials and ACLs.

Records kafkawire has no use for are carried as they were read, so that a snapshot of the image holds them:
broker and controller registrations (the last registration of each node with the changes since), the last
producer id block, client quotas, delegation tokens, the ZooKeeper migration state, and, in log order, any record
of a type kafkawire cannot decode. NoOps and the markers of metadata transactions are not state."""

from __future__ import annotations

import copy
import uuid

import msgspec

from ..base import TopicMeta
from . import records

# ConfigRecord.ResourceType: Kafka's ConfigResource.Type ids
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

NO_LEADER = -1
NO_LEADER_CHANGE = -2  # PartitionChangeRecord.Leader: the leader (and so the leader epoch) stays


class PartitionImage(msgspec.Struct):
    """One partition's registration, as Kafka's PartitionRegistration keeps it."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: list[int]
    elr: list[int]
    last_known_elr: list[int]
    replicas: list[int] = msgspec.field(default_factory=list)
    directories: list[uuid.UUID] = msgspec.field(default_factory=list)
    removing: list[int] = msgspec.field(default_factory=list)
    adding: list[int] = msgspec.field(default_factory=list)
    recovery_state: int = 0

    @classmethod
    def of(cls, m) -> PartitionImage:
        return cls(
            m.leader,
            m.leader_epoch,
            m.partition_epoch,
            list(m.isr),
            list(m.eligible_leader_replicas or ()),
            list(m.last_known_elr or ()),
            list(m.replicas),
            list(m.directories or ()),
            list(m.removing_replicas or ()),
            list(m.adding_replicas or ()),
            m.leader_recovery_state,
        )

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
        if m.replicas is not None:
            self.replicas = list(m.replicas)
        if m.directories is not None:
            self.directories = list(m.directories)
        if m.removing_replicas is not None:
            self.removing = list(m.removing_replicas)
        if m.adding_replicas is not None:
            self.adding = list(m.adding_replicas)
        if m.leader_recovery_state != -1:  # -1: unchanged
            self.recovery_state = m.leader_recovery_state

    def record(self, topic_id: uuid.UUID, partition: int):
        """The PartitionRecord a snapshot holds for the partition as it is now."""
        return records.new(
            "PartitionRecord",
            partition_id=partition,
            topic_id=topic_id,
            replicas=list(self.replicas),
            isr=list(self.isr),
            removing_replicas=list(self.removing),
            adding_replicas=list(self.adding),
            leader=self.leader,
            leader_recovery_state=self.recovery_state,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            directories=list(self.directories),
            eligible_leader_replicas=list(self.elr) if self.elr else None,
            last_known_elr=list(self.last_known_elr) if self.last_known_elr else None,
        )


class TopicImage(msgspec.Struct):
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionImage] = msgspec.field(default_factory=dict)


class MetadataImage:
    def __init__(self) -> None:
        self.topics: dict[uuid.UUID, TopicImage] = {}
        self.ids: dict[str, uuid.UUID] = {}  # topic name -> id
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.features: dict[str, int] = {}
        self.scram: dict[tuple[str, int], object] = {}
        self.acls: dict[uuid.UUID, object] = {}
        # records carried for Kafka, as read (key -> frame values): see the module's docstring
        self.carried: dict[tuple, list[bytes]] = {}
        self._unknown = 0
        self._pending: list | None = None  # records of an open metadata transaction

    @property
    def in_transaction(self) -> bool:
        return self._pending is not None

    def apply_value(self, value) -> None:
        """Apply one record as framed in the log; a type kafkawire cannot decode is carried as it is."""
        try:
            name, _version, message = records.decode(value)
        except records.UnknownRecordTypeError:
            name, message = None, None
        self.apply(name, message, bytes(value))

    def apply(self, name: str | None, message, value: bytes | None = None) -> None:
        if name == "BeginTransactionRecord":
            self._pending = []
        elif name == "EndTransactionRecord":
            pending, self._pending = self._pending or [], None
            for n, m, v in pending:
                self._apply(n, m, v)
        elif name == "AbortTransactionRecord":
            self._pending = None
        elif self._pending is not None:
            self._pending.append((name, message, value))
        else:
            self._apply(name, message, value)

    def _carry(self, key: tuple, message, value: bytes | None, *, replace: bool = True) -> None:
        value = value if value is not None else records.encode(message)
        if replace:
            self.carried.pop(key, None)  # re-inserted last: the snapshot keeps the log's order
            self.carried[key] = [value]
        else:
            self.carried.setdefault(key, []).append(value)

    def _apply(self, name: str | None, m, value: bytes | None = None) -> None:
        if name is None:
            self._unknown += 1
            self.carried[("unknown", self._unknown)] = [value]
        elif name in ("RegisterBrokerRecord",):
            self._carry(("broker", m.broker_id), m, value)
        elif name in ("BrokerRegistrationChangeRecord", "FenceBrokerRecord", "UnfenceBrokerRecord"):
            broker = m.broker_id if name == "BrokerRegistrationChangeRecord" else m.id
            if ("broker", broker) in self.carried:
                self._carry(("broker", broker), m, value, replace=False)
        elif name == "UnregisterBrokerRecord":
            self.carried.pop(("broker", m.broker_id), None)
        elif name == "RegisterControllerRecord":
            self._carry(("controller", m.controller_id), m, value)
        elif name == "UnregisterControllerRecord":
            self.carried.pop(("controller", m.controller_id), None)
        elif name == "ClearElrRecord":  # one topic's partitions, or every topic's ("")
            for topic in self.topics.values():
                if m.topic_name in ("", topic.name):
                    for i, p in list(topic.partitions.items()):
                        if p.elr or p.last_known_elr:
                            p = topic.partitions[i] = copy.copy(p)  # replaced, as a PartitionChangeRecord's
                            p.elr, p.last_known_elr = [], []
                            p.partition_epoch += 1
        elif name in ("ProducerIdsRecord", "ZkMigrationStateRecord"):
            self._carry((name,), m, value)
        elif name == "ClientQuotaRecord":
            key = ("quota", tuple((e.entity_type, e.entity_name) for e in m.entity), m.key)
            if m.remove:
                self.carried.pop(key, None)
            else:
                self._carry(key, m, value)
        elif name == "DelegationTokenRecord":
            self._carry(("token", m.token_id), m, value)
        elif name == "RemoveDelegationTokenRecord":
            self.carried.pop(("token", m.token_id), None)
        elif name == "TopicRecord":
            self.topics[m.topic_id] = TopicImage(m.name, m.topic_id)
            self.ids[m.name] = m.topic_id
        elif name == "PartitionRecord":
            topic = self.topics.get(m.topic_id)
            if topic is not None:
                topic.partitions[m.partition_id] = PartitionImage.of(m)
        elif name == "PartitionChangeRecord":
            topic = self.topics.get(m.topic_id)
            partition = topic.partitions.get(m.partition_id) if topic is not None else None
            if partition is not None:  # replaced, never changed in place: a snapshot's copy may hold the old one
                changed = copy.copy(partition)
                changed.merge(m)
                topic.partitions[m.partition_id] = changed
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
        elif name != "NoOpRecord":  # a type kafkawire decodes but keeps no state of: carried in log order
            self._unknown += 1
            self.carried[("unknown", self._unknown)] = [value if value is not None else records.encode(m)]

    def copy(self) -> MetadataImage:
        """The image as it is now, for a snapshot encoded while the log goes on: its containers are new, and what
        they share with this image is never changed in place by ``apply`` (a changed partition is a new
        PartitionImage, records are immutable once applied). Taken under the log's lock: a fraction of the
        encoding's cost."""
        out = MetadataImage()
        out.topics = {tid: TopicImage(t.name, t.topic_id, dict(t.partitions)) for tid, t in self.topics.items()}
        out.ids = dict(self.ids)
        out.configs = {k: dict(v) for k, v in self.configs.items()}
        out.features = dict(self.features)
        out.scram = dict(self.scram)
        out.acls = dict(self.acls)
        out.carried = {k: list(v) for k, v in self.carried.items()}
        out._unknown = self._unknown
        return out

    def snapshot_records(self) -> list[bytes]:
        """The image as the records of a snapshot (framed values), in the order Kafka's image writes them:
        feature levels (metadata.version first), the cluster's registrations, topics and their partitions,
        configs, then client quotas, producer ids, ACLs, SCRAM credentials, delegation tokens, and the records
        kafkawire carries without knowing them."""
        out: list[bytes] = []
        features = sorted(self.features.items(), key=lambda kv: (kv[0] != "metadata.version", kv[0]))
        out += [records.encode(records.new("FeatureLevelRecord", name=n, feature_level=v)) for n, v in features]
        for kind in ("broker", "controller"):
            out += [v for key, values in self.carried.items() if key[0] == kind for v in values]
        for topic in sorted(self.topics.values(), key=lambda t: t.name):
            out.append(records.encode(records.new("TopicRecord", name=topic.name, topic_id=topic.topic_id)))
            out += [records.encode(p.record(topic.topic_id, i)) for i, p in sorted(topic.partitions.items())]
        for (rtype, rname), configs in sorted(self.configs.items()):
            out += [
                records.encode(
                    records.new("ConfigRecord", resource_type=rtype, resource_name=rname, name=k, value=configs[k])
                )
                for k in sorted(configs)
            ]
        for kind in ("quota", "ProducerIdsRecord"):
            out += [v for key, values in self.carried.items() if key[0] == kind for v in values]
        out += [records.encode(m) for m in self.acls.values()]
        out += [records.encode(m) for m in self.scram.values()]
        for kind in ("token", "ZkMigrationStateRecord", "unknown"):
            out += [v for key, values in self.carried.items() if key[0] == kind for v in values]
        return out

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
