"""``__cluster_metadata-0``: the KRaft metadata log of a data directory, read on start and appended to.

Layout, as Kafka 4.4's ``kafka-storage format`` and its controller leave it (kafkawire, a single node, is
the quorum's only voter and its leader):

- ``<offset>-<epoch>.checkpoint``: snapshots (a SnapshotHeader control batch, metadata records, a
  SnapshotFooter). Format writes ``00000000000000000000-0000000000.checkpoint`` with the feature levels.
- ``<base offset>.log``: record batches of metadata records; each carries the leader epoch it was written
  in. The log opens with a LeaderChange control batch, then the bootstrap records in a metadata
  transaction (BeginTransactionRecord ... EndTransactionRecord).
- ``quorum-state`` (JSON, QuorumStateData), ``leader-epoch-checkpoint``, ``partition.metadata`` (the
  metadata topic's fixed id).

On start the newest snapshot is read, then every batch at or after its offset. kafkawire appends its
changes in the epoch of the log's last batch, so that Kafka's leader-epoch cache and quorum state stay
true; a Kafka node that starts on the directory bumps the epoch itself when it is elected.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import threading
import time
import uuid

from kafkawire.protocol import message_class
from kafkawire.protocol.records import build_batch, iter_batches
from kafkawire.protocol.records.control import build_control_batch, decode_control_record
from kafkawire.protocol.records.model import ControlRecordType

from .. import metadata as files
from ..base import TopicMeta
from . import records
from .image import NO_LEADER, TOPIC_RESOURCE, MetadataImage

log = logging.getLogger(__name__)

METADATA_DIR = "__cluster_metadata-0"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID
QUORUM_STATE = "quorum-state"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
_CONTROL = 0x20
_SNAPSHOT = re.compile(r"(\d{20})-(\d{10})\.checkpoint")
_SEGMENT = re.compile(r"(\d{20})\.log")

# The feature levels Kafka 4.4's kafka-storage format bootstraps a new cluster with (its defaults), so
# that a directory kafkawire starts is one Kafka 4.4 starts on as if it had formatted it.
BOOTSTRAP_FEATURES = (
    ("metadata.version", 33),
    ("eligible.leader.replicas.version", 1),
    ("group.version", 1),
    ("share.version", 2),
    ("streams.version", 1),
    ("transaction.version", 2),
)


def uuid_text(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def parse_uuid(text: str) -> uuid.UUID:
    """A Uuid in Kafka's base64 form, or a dashed UUID (what older kafkawire wrote)."""
    text = text.strip()
    if len(text) == 22:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
    return uuid.UUID(text)


class MetadataLog:
    def __init__(self, data_dir: str, node_id: int, directory_id: uuid.UUID):
        self.data_dir = data_dir
        self.directory = os.path.join(data_dir, METADATA_DIR)
        self.node_id = node_id
        self.directory_id = directory_id
        self.image = MetadataImage()
        self.end_offset = 0
        self.epoch = 0
        self._active: str | None = None
        self._lock = threading.RLock()  # the topics' and the credentials' appends share the log
        self._repair = True

    # ---------------------------------------------------------------- reading

    def exists(self) -> bool:
        return self._active is not None

    def load(self, *, repair: bool = True) -> MetadataLog:
        """Replay the directory's log. With ``repair`` (a broker's start, holding the directory's lock) a torn
        last append is truncated; without (a reader such as ``kafkawire check``) it is only skipped."""
        self._repair = repair
        if not os.path.isdir(self.directory):
            return self
        names = os.listdir(self.directory)
        snapshots = sorted((int(m.group(1)), int(m.group(2)), n) for n in names if (m := _SNAPSHOT.fullmatch(n)))
        segments = sorted((int(m.group(1)), n) for n in names if (m := _SEGMENT.fullmatch(n)))
        start = 0
        if snapshots:
            start, epoch, name = snapshots[-1]
            self.epoch = max(self.epoch, epoch)
            self._replay(os.path.join(self.directory, name), 0, snapshot=True)
        self.end_offset = start
        for _base, name in segments:
            self._replay(os.path.join(self.directory, name), start, snapshot=False)
        if segments:
            self._active = os.path.join(self.directory, segments[-1][1])
        return self

    def _replay(self, path: str, min_offset: int, *, snapshot: bool) -> None:
        with open(path, "rb") as f:
            data = f.read()
        reader = iter_batches(data, check_crc=True)
        for batch in reader:
            last = batch.base_offset + batch.last_offset_delta
            if not snapshot:
                self.epoch = max(self.epoch, batch.partition_leader_epoch)
                self.end_offset = max(self.end_offset, last + 1)
            if last < min_offset or batch.attributes & _CONTROL:
                continue
            for record in batch.decode_records():
                if record.offset >= min_offset:
                    name, _version, message = records.decode(record.value)
                    self.image.apply(name, message)
        if reader.partial_tail_bytes and not snapshot and self._repair:
            # an append a crash cut short: never acknowledged, so dropped (Kafka's recovery does the same)
            log.warning("%s: %d bytes of a partial batch at the end, truncated", path, reader.partial_tail_bytes)
            with open(path, "r+b") as f:
                f.truncate(reader.consumed)

    # ---------------------------------------------------------------- writing

    def append(self, messages: list) -> None:
        """One batch of metadata records at the log end, fsynced before returning."""
        if not messages:
            return
        with self._lock:
            if self._active is None:
                self._create()
            batch = build_batch(
                [(None, records.encode(m)) for m in messages],
                base_offset=self.end_offset,
                partition_leader_epoch=self.epoch,
            )
            self._write(batch)
            for m in messages:
                self.image.apply(type(m).spec.name, m)
            self.end_offset += len(messages)

    def _write(self, batch: bytes) -> None:
        fd = os.open(self._active, os.O_WRONLY | os.O_APPEND)
        try:
            view = memoryview(batch)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)

    def _create(self) -> None:
        """A metadata log as a freshly formatted Kafka node writes it on its first election: the bootstrap
        snapshot, quorum state for epoch 1 with this node as leader, a LeaderChange, the bootstrap records."""
        os.makedirs(self.directory, exist_ok=True)
        self.epoch = 1
        now = int(time.time() * 1000)
        snapshot = b"".join(
            (
                build_control_batch(
                    ControlRecordType.SNAPSHOT_HEADER,
                    producer_id=-1,
                    producer_epoch=-1,
                    base_offset=0,
                    value=records.new("SnapshotHeaderRecord", version=0, last_contained_log_timestamp=now).encode(0),
                ),
                build_batch(
                    [
                        (None, records.encode(records.new("FeatureLevelRecord", name=n, feature_level=v)))
                        for n, v in BOOTSTRAP_FEATURES
                    ],
                    base_offset=1,
                ),
                build_control_batch(
                    ControlRecordType.SNAPSHOT_FOOTER,
                    producer_id=-1,
                    producer_epoch=-1,
                    base_offset=1 + len(BOOTSTRAP_FEATURES),
                    value=records.new("SnapshotFooterRecord", version=0).encode(0),
                ),
            )
        )
        files.write_atomically(os.path.join(self.directory, f"{0:020d}-{0:010d}.checkpoint"), snapshot)
        files.write_atomically(
            os.path.join(self.directory, files.PARTITION_METADATA),
            f"version: 0\ntopic_id: {uuid_text(METADATA_TOPIC_ID)}\n".encode(),
        )
        quorum = {
            "clusterId": "",
            "leaderId": self.node_id,
            "leaderEpoch": self.epoch,
            "votedId": -1,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": self.node_id}],
            "data_version": 0,
        }
        files.write_atomically(
            os.path.join(self.directory, QUORUM_STATE), json.dumps(quorum, separators=(",", ":")).encode()
        )
        files.write_atomically(
            os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT), f"0\n1\n{self.epoch} 0\n".encode()
        )
        self._active = os.path.join(self.directory, f"{0:020d}.log")
        voter = message_class("LeaderChangeMessage").Voter(voter_id=self.node_id)
        leader_change = records.new(
            "LeaderChangeMessage", version=0, leader_id=self.node_id, voters=[voter], granting_voters=[voter]
        )
        with open(self._active, "wb"):
            pass
        self._write(
            build_control_batch(
                ControlRecordType.LEADER_CHANGE,
                producer_id=-1,
                producer_epoch=-1,
                base_offset=0,
                partition_leader_epoch=self.epoch,
                value=leader_change.encode(0),
            )
        )
        self.end_offset = 1
        files.fsync_dir(self.data_dir)
        bootstrap = [records.new("BeginTransactionRecord", name="Bootstrap records")]
        bootstrap += [records.new("FeatureLevelRecord", name=n, feature_level=v) for n, v in BOOTSTRAP_FEATURES]
        bootstrap += [records.new("EndTransactionRecord")]
        self.append(bootstrap)

    # ---------------------------------------------------------------- topics

    def topics(self) -> dict[str, TopicMeta]:
        return self.image.topic_metas()

    def save_topics(self, wanted: dict[str, TopicMeta]) -> None:
        """Append the records that turn the log's topics into ``wanted``, in one batch."""
        with self._lock:
            self._save_topics(wanted)

    def _save_topics(self, wanted: dict[str, TopicMeta]) -> None:
        current = self.image.topic_metas()
        out: list = []
        for name, meta in current.items():
            if name not in wanted or wanted[name].topic_id != meta.topic_id:
                out.append(records.new("RemoveTopicRecord", topic_id=meta.topic_id))
        for name, meta in sorted(wanted.items()):
            before = current.get(name)
            if before is not None and before.topic_id != meta.topic_id:
                before = None
            if before is None:
                out.append(records.new("TopicRecord", name=name, topic_id=meta.topic_id))
            old_configs = before.configs if before is not None else {}
            for key in sorted(set(old_configs) | set(meta.configs)):
                if old_configs.get(key) != meta.configs.get(key):
                    out.append(
                        records.new(
                            "ConfigRecord",
                            resource_type=TOPIC_RESOURCE,
                            resource_name=name,
                            name=key,
                            value=meta.configs.get(key),
                        )
                    )
            for p in range(before.partitions if before is not None else 0, meta.partitions):
                out.append(self._partition_record(meta.topic_id, p))
        self.append(out)

    # ---------------------------------------------------------------- configs

    def configs(self, resource_type: int, name: str) -> dict[str, str]:
        """The ConfigRecords' values of one resource (a broker's dynamic configs: type 4, "" for the cluster
        default or the node id)."""
        with self._lock:
            return dict(self.image.configs.get((resource_type, name), {}))

    def save_configs(self, resource_type: int, name: str, wanted: dict[str, str]) -> None:
        """One batch of ConfigRecords turning the resource's configs into ``wanted`` (a removed one: null)."""
        with self._lock:
            current = self.image.configs.get((resource_type, name), {})
            self.append(
                [
                    records.new(
                        "ConfigRecord", resource_type=resource_type, resource_name=name, name=k, value=wanted.get(k)
                    )
                    for k in sorted(set(current) | set(wanted))
                    if current.get(k) != wanted.get(k)
                ]
            )

    # ---------------------------------------------------------------- SCRAM credentials

    def scram_credentials(self) -> dict[tuple[str, int], object]:
        """(user, Kafka's mechanism id) -> UserScramCredentialRecord."""
        with self._lock:
            return dict(self.image.scram)

    def save_scram(self, upserts: dict[tuple[str, int], tuple[bytes, int, bytes, bytes]], deletes) -> None:
        """One batch: UserScramCredentialRecord per (user, mechanism id) -> (salt, iterations, stored key,
        server key) of ``upserts``, RemoveUserScramCredentialRecord per existing one of ``deletes``."""
        out = [
            records.new("RemoveUserScramCredentialRecord", name=user, mechanism=mech)
            for user, mech in sorted(deletes)
            if (user, mech) in self.image.scram and (user, mech) not in upserts
        ]
        for (user, mech), (salt, iterations, stored_key, server_key) in sorted(upserts.items()):
            out.append(
                records.new(
                    "UserScramCredentialRecord",
                    name=user,
                    mechanism=mech,
                    salt=salt,
                    stored_key=stored_key,
                    server_key=server_key,
                    iterations=iterations,
                )
            )
        self.append(out)

    # ---------------------------------------------------------------- ACLs

    def acls(self) -> dict[uuid.UUID, object]:
        """ACL id -> AccessControlEntryRecord."""
        with self._lock:
            return dict(self.image.acls)

    def save_acls(self, add: dict[uuid.UUID, dict], remove) -> None:
        """One batch: RemoveAccessControlEntryRecord per existing id of ``remove``, AccessControlEntryRecord per
        id -> fields (``resource_type``, ``resource_name``, ``pattern_type``, ``principal``, ``host``,
        ``operation``, ``permission_type``) of ``add``; as Kafka's controller writes CreateAcls and DeleteAcls."""
        with self._lock:
            out = [
                records.new("RemoveAccessControlEntryRecord", id=acl_id)
                for acl_id in sorted(remove)
                if acl_id in self.image.acls
            ]
            out += [records.new("AccessControlEntryRecord", id=acl_id, **fields) for acl_id, fields in add.items()]
            self.append(out)

    # ---------------------------------------------------------------- leadership

    def _elr(self) -> bool:
        return self.image.features.get("eligible.leader.replicas.version", 0) >= 1

    def _change(self, topic_id: uuid.UUID, partition: int, leader: int, isr, elr, last_known_elr):
        return records.new(
            "PartitionChangeRecord",
            partition_id=partition,
            topic_id=topic_id,
            isr=isr,
            leader=leader,
            replicas=None,
            removing_replicas=None,
            adding_replicas=None,
            leader_recovery_state=-1,
            directories=None,
            eligible_leader_replicas=elr,
            last_known_elr=last_known_elr,
        )

    def _resign_records(self, topic_id: uuid.UUID, partition: int) -> list:
        """What Kafka 4.4's controller writes when the only replica shuts down: no leader (a leader epoch
        bump), and with eligible leader replicas (KIP-966) the replica leaves the ISR for the ELR; without
        them the ISR keeps its last member."""
        node = self.node_id
        if self._elr():
            return [self._change(topic_id, partition, NO_LEADER, [], [node], [node])]
        return [self._change(topic_id, partition, NO_LEADER, None, None, None)]

    def _elect_records(self, topic_id: uuid.UUID, partition: int) -> list:
        node = self.node_id
        if self._elr():
            return [self._change(topic_id, partition, node, [node], [], [])]
        return [self._change(topic_id, partition, node, [node], None, None)]

    def elect_leaders(self) -> int:
        """A start: this node becomes leader of every partition it holds, in one batch, as Kafka 4.4's
        controller elects a single node again once it registers (measured: each clean restart of a Kafka
        node takes its partitions from epoch N to N+2, N+1 leaderless at shutdown, N+2 on start). A partition
        still led by this node (the last run was killed) is first fenced, then elected: Kafka fences the old
        incarnation, so its epoch also rises by 2. Returns how many partitions changed."""
        with self._lock:
            out: list = []
            for topic in sorted(self.image.topics.values(), key=lambda t: t.name):
                for p, reg in sorted(topic.partitions.items()):
                    if reg.leader == self.node_id:
                        out += self._resign_records(topic.topic_id, p)
                    if self.node_id in reg.isr or self.node_id in reg.elr or reg.leader in (NO_LEADER, self.node_id):
                        out += self._elect_records(topic.topic_id, p)
            self.append(out)
            return sum(1 for m in out if m.leader == self.node_id)

    def resign_leaders(self) -> None:
        """A clean stop: every partition this node leads is left leaderless, in one batch, as Kafka's
        controlled shutdown leaves them (the next start elects it again, one epoch up)."""
        with self._lock:
            out: list = []
            for topic in sorted(self.image.topics.values(), key=lambda t: t.name):
                for p, reg in sorted(topic.partitions.items()):
                    if reg.leader == self.node_id:
                        out += self._resign_records(topic.topic_id, p)
            self.append(out)

    def _partition_record(self, topic_id: uuid.UUID, partition: int):
        return records.new(
            "PartitionRecord",
            partition_id=partition,
            topic_id=topic_id,
            replicas=[self.node_id],
            isr=[self.node_id],
            removing_replicas=[],
            adding_replicas=[],
            leader=self.node_id,
            leader_recovery_state=0,
            leader_epoch=0,
            partition_epoch=0,
            directories=[self.directory_id],
        )


def decode_batch_records(batch):
    """(offset, name, message) of every record of a metadata log batch, control records by their type."""
    for record in batch.decode_records():
        if batch.attributes & _CONTROL:
            control = decode_control_record(record)
            decoded = records.decode_control(control.type, record.value)
            if decoded is not None:
                yield record.offset, decoded[0], decoded[1]
        else:
            name, _version, message = records.decode(record.value)
            yield record.offset, name, message
