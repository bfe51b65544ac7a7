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

On start the newest snapshot is read, then every batch at or after its offset. Then, as a Kafka 4.4 node at
each start, kafkawire is elected again in a new quorum epoch (``become_leader``: quorum-state, the
leader-epoch-checkpoint entry, a LeaderChange control batch) and appends its changes in that epoch; a Kafka node
that starts on the directory next bumps the epoch once more.

Snapshots, as Kafka's metadata loader writes them: once ``metadata.log.max.record.bytes.between.snapshots`` bytes
of batches were appended since the last snapshot, or ``metadata.log.max.snapshot.interval.ms`` passed with records
appended, the image is written as ``<end offset>-<epoch>.checkpoint`` (a SnapshotHeader, every record that
rebuilds the image, including those kafkawire only carries, a SnapshotFooter), in a thread of its own. The active
segment rolls at ``metadata.log.segment.bytes``. Retention is Kafka's (``metadata.max.retention.bytes`` over the
segments and snapshots together, ``metadata.max.retention.ms`` by a snapshot's last record time): while more than
one snapshot is left and the oldest breaks a limit, the log starts at the next snapshot instead, and the segments
wholly before it and the older snapshots are deleted.
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
from concurrent.futures import Future, ThreadPoolExecutor

from kafkawire.protocol import message_class
from kafkawire.protocol.records import build_batch, iter_batches
from kafkawire.protocol.records.control import build_control_batch, decode_control_record
from kafkawire.protocol.records.model import ControlRecordType

from .. import metadata as files
from ..base import TopicMeta
from . import records
from .image import NO_LEADER, TOPIC_RESOURCE, MetadataImage
from .leader_epochs import checkpoint_bytes, read_checkpoint

log = logging.getLogger(__name__)

METADATA_DIR = "__cluster_metadata-0"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID
QUORUM_STATE = "quorum-state"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
_CONTROL = 0x20
_SNAPSHOT = re.compile(r"(\d{20})-(\d{10})\.checkpoint")
_PARTIAL_SNAPSHOT = re.compile(r"\d{20}-\d{10}\.checkpoint\.part")
_SNAPSHOT_BATCH_RECORDS = 1000

# Kafka 4.4's defaults of the settings above
SNAPSHOT_DEFAULTS = {
    "metadata.log.max.record.bytes.between.snapshots": 20 * 1024 * 1024,
    "metadata.log.max.snapshot.interval.ms": 3600 * 1000,
    "metadata.log.segment.bytes": 1024 * 1024 * 1024,
    "metadata.max.retention.bytes": 100 * 1024 * 1024,
    "metadata.max.retention.ms": 7 * 24 * 3600 * 1000,
}
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
        self.settings = dict(SNAPSHOT_DEFAULTS)
        self.snapshot_offset = 0  # end offset of the newest snapshot
        self._since_snapshot = 0  # bytes of batches appended after it
        self._last_snapshot_ms = int(time.time() * 1000)
        self._last_timestamp = -1  # of the log's last record
        self._active_size = 0
        self._snapshotter: ThreadPoolExecutor | None = None
        self._snapshotting: Future | None = None
        self._timestamps: dict[str, int] = {}  # snapshot file -> its header's last contained log timestamp

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
        if repair:
            for name in names:
                if _PARTIAL_SNAPSHOT.fullmatch(name):  # a snapshot a crash cut short (Kafka deletes them too)
                    os.unlink(os.path.join(self.directory, name))
        start = 0
        if snapshots:
            start, epoch, name = snapshots[-1]
            self.epoch = max(self.epoch, epoch)
            self._replay(os.path.join(self.directory, name), 0, snapshot=True)
        self.end_offset = self.snapshot_offset = start
        for i, (_base, name) in enumerate(segments):
            if i + 1 < len(segments) and segments[i + 1][0] <= start:
                continue  # wholly before the snapshot: nothing in it is needed
            self._replay(os.path.join(self.directory, name), start, snapshot=False)
        if segments:
            self._active = os.path.join(self.directory, segments[-1][1])
            self._active_size = os.path.getsize(self._active)
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
                if last >= min_offset:
                    self._since_snapshot += batch.size
                    self._last_timestamp = batch.max_timestamp
            if last < min_offset or batch.attributes & _CONTROL:
                continue
            for record in batch.decode_records():
                if record.offset >= min_offset:
                    self.image.apply_value(record.value)
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
            values = [records.encode(m) for m in messages]
            batch = build_batch(
                [(None, v) for v in values], base_offset=self.end_offset, partition_leader_epoch=self.epoch
            )
            if self._active_size and self._active_size + len(batch) > self.settings["metadata.log.segment.bytes"]:
                self._roll()
            self._write(batch)
            for m, v in zip(messages, values):
                self.image.apply(type(m).spec.name, m, v)
            self.end_offset += len(messages)
            self._since_snapshot += len(batch)
            self._last_timestamp = int(time.time() * 1000)
            self.maybe_snapshot()

    def _write(self, batch: bytes) -> None:
        fd = os.open(self._active, os.O_WRONLY | os.O_APPEND)
        try:
            view = memoryview(batch)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        self._active_size += len(batch)

    def _roll(self) -> None:
        """A new active segment at the log end, as Kafka rolls one at metadata.log.segment.bytes."""
        self._active = os.path.join(self.directory, f"{self.end_offset:020d}.log")
        with open(self._active, "wb"):
            pass
        self._active_size = 0
        files.fsync_dir(self.directory)

    # ---------------------------------------------------------------- snapshots

    def configure(self, settings: dict[str, str]) -> None:
        """The snapshot, segment and retention settings (``SNAPSHOT_DEFAULTS``' keys) given to the broker."""
        for key in SNAPSHOT_DEFAULTS:
            if settings.get(key) not in (None, ""):
                self.settings[key] = int(settings[key])

    def maybe_snapshot(self, now_ms: int | None = None) -> bool:
        """Start writing a snapshot when Kafka's triggers say so (bytes appended since the last one, or time
        with records appended); it is written in the snapshot thread. True when one was started."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        # never waits: the broker's timer asks from the event loop, and an append or a snapshot being taken may
        # hold the lock (then the next tick asks again; an append asks holding it already)
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._active is None or self.end_offset <= self.snapshot_offset:
                return False
            if self._snapshotting is not None and not self._snapshotting.done():
                return False
            interval = self.settings["metadata.log.max.snapshot.interval.ms"]
            due = self._since_snapshot >= self.settings["metadata.log.max.record.bytes.between.snapshots"] or (
                interval > 0 and now_ms - self._last_snapshot_ms >= interval
            )
            if not due:
                return False
            if self._snapshotter is None:
                self._snapshotter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafkawire-metadata-snapshot")
            self._last_snapshot_ms = now_ms
            self._snapshotting = self._snapshotter.submit(self._snapshot_now)
            return True
        finally:
            self._lock.release()

    def snapshot(self) -> str | None:
        """Write a snapshot of the log as it is now, in the calling thread; its path (None: nothing new)."""
        return self._snapshot_now()

    def _snapshot_now(self) -> str | None:
        try:
            with self._lock:
                # only a copy of the image is taken under the lock; it is encoded and written outside, so that an
                # append (a request changing metadata) waits for the copy, not for the snapshot
                if self.image.in_transaction or self.end_offset <= self.snapshot_offset:
                    return None
                offset, epoch, stamp = self.end_offset, self.epoch, self._last_timestamp
                image = self.image.copy()
                self._since_snapshot = 0
            path = self._write_snapshot(image.snapshot_records(), offset, epoch, stamp)
            with self._lock:
                self.snapshot_offset = max(self.snapshot_offset, offset)
            self.clean()
            return path
        except Exception:
            log.exception("writing a snapshot of the metadata log failed")
            raise

    def _write_snapshot(self, values: list[bytes], offset: int, epoch: int, stamp: int) -> str:
        stamp = stamp if stamp >= 0 else int(time.time() * 1000)
        parts = [
            build_control_batch(
                ControlRecordType.SNAPSHOT_HEADER,
                producer_id=-1,
                producer_epoch=-1,
                base_offset=0,
                partition_leader_epoch=epoch,
                value=records.new("SnapshotHeaderRecord", version=0, last_contained_log_timestamp=stamp).encode(0),
            )
        ]
        at = 1
        for i in range(0, len(values), _SNAPSHOT_BATCH_RECORDS):
            chunk = values[i : i + _SNAPSHOT_BATCH_RECORDS]
            parts.append(build_batch([(None, v) for v in chunk], base_offset=at, partition_leader_epoch=epoch))
            at += len(chunk)
        parts.append(
            build_control_batch(
                ControlRecordType.SNAPSHOT_FOOTER,
                producer_id=-1,
                producer_epoch=-1,
                base_offset=at,
                partition_leader_epoch=epoch,
                value=records.new("SnapshotFooterRecord", version=0).encode(0),
            )
        )
        name = f"{offset:020d}-{epoch:010d}.checkpoint"
        path = os.path.join(self.directory, name)
        partial = f"{path}.part"  # Kafka's name for a snapshot being written: deleted on start if left
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(b"".join(parts))
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(partial, path)
        files.fsync_dir(self.directory)
        self._timestamps[name] = stamp
        log.info("metadata log snapshot %s: %d records", name, len(values))
        return path

    def _snapshot_timestamp(self, name: str) -> int:
        found = self._timestamps.get(name)
        if found is None:
            found = -1
            with open(os.path.join(self.directory, name), "rb") as f:
                for batch in iter_batches(f.read(4096)):
                    for record in batch.decode_records():
                        decoded = records.decode_control(decode_control_record(record).type, record.value)
                        if decoded is not None and decoded[0] == "SnapshotHeaderRecord":
                            found = decoded[1].last_contained_log_timestamp
                    break
            self._timestamps[name] = found
        return found

    def clean(self, now_ms: int | None = None) -> int:
        """Kafka's metadata log retention (KafkaMetadataLog.maybeClean): by size, then by time, the oldest
        snapshot goes while another is left and it breaks the limit; the log then starts at the next snapshot,
        and the segments wholly before that and the older snapshots are deleted. Returns the files deleted."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            deleted = 0
            max_bytes = self.settings["metadata.max.retention.bytes"]
            if max_bytes >= 1:
                deleted += self._clean_while(lambda name, total: total > max_bytes)
            max_ms = self.settings["metadata.max.retention.ms"]
            if max_ms >= 0:
                deleted += self._clean_while(lambda name, total: now_ms - self._snapshot_timestamp(name) > max_ms)
            return deleted

    def _listing(self):
        names = os.listdir(self.directory)
        snapshots = sorted((int(m.group(1)), n) for n in names if (m := _SNAPSHOT.fullmatch(n)))
        segments = sorted((int(m.group(1)), n) for n in names if (m := _SEGMENT.fullmatch(n)))
        return snapshots, segments

    def _size(self, names) -> int:
        return sum(os.path.getsize(os.path.join(self.directory, n)) for n in names)

    def _clean_while(self, breaks) -> int:
        deleted = 0
        while True:
            snapshots, segments = self._listing()
            if len(snapshots) < 2:
                return deleted
            total = self._size(n for _o, n in snapshots) + self._size(n for _o, n in segments)
            oldest, following = snapshots[0], snapshots[1]
            if not breaks(oldest[1], total):
                return deleted
            start = following[0]
            gone = [n for _o, n in snapshots if _o < start]
            gone += [n for i, (_b, n) in enumerate(segments) if i + 1 < len(segments) and segments[i + 1][0] <= start]
            for name in gone:
                os.unlink(os.path.join(self.directory, name))
                self._timestamps.pop(name, None)
                for extra in (".index", ".timeindex"):  # Kafka's indexes of a deleted segment
                    if name.endswith(".log") and os.path.exists(os.path.join(self.directory, name[:-4] + extra)):
                        os.unlink(os.path.join(self.directory, name[:-4] + extra))
            files.fsync_dir(self.directory)
            log.info("metadata log retention: the log starts at snapshot %d; deleted %s", start, ", ".join(gone))
            deleted += len(gone)

    def close(self) -> None:
        """Wait for a snapshot being written (a stop)."""
        with self._lock:
            snapshotter, self._snapshotter = self._snapshotter, None
        if snapshotter is not None:
            snapshotter.shutdown(wait=True)

    def become_leader(self) -> None:
        """A start: this node is elected leader of the quorum again, as a Kafka 4.4 node is at each start (killed
        before or not): the quorum epoch goes one up (above the log's and quorum-state's), quorum-state and the
        metadata partition's leader-epoch-checkpoint say so, and a LeaderChange control batch opens the epoch;
        every batch after it carries the new epoch. A directory without a metadata log gets one, as a
        formatted Kafka node writes it on its first election (epoch 1).

        Kafka's controller also writes, at each start, registrations of its controller and broker
        (RegisterControllerRecord, RegisterBrokerRecord, BrokerRegistrationChangeRecord unfencing it, fencing it at a
        controlled shutdown) and a NoOpRecord every metadata.max.idle.interval.ms (500 ms). kafkawire writes none of
        them: it is one process with no broker heartbeats or session, so a registration would name an incarnation
        that never heartbeats (after a kill of kafkawire, Kafka would wait out its session before registering) and
        set the broker epoch Kafka's clean-shutdown marker is checked against; the NoOps advance the high watermark
        for a quorum's listeners and followers, of which a single kafkawire has none, and would grow the log by
        two records a second."""
        with self._lock:
            if self._active is None:
                self._create()
                return
            self.epoch = max(self.epoch, self._quorum_state().get("leaderEpoch", 0)) + 1
            self._lead()

    def _quorum_state(self) -> dict:
        try:
            with open(os.path.join(self.directory, QUORUM_STATE), "rb") as f:
                found = json.loads(f.read())
            return found if isinstance(found, dict) else {}
        except (OSError, ValueError) as exc:
            log.warning("%s is unreadable (%s): written afresh", os.path.join(self.directory, QUORUM_STATE), exc)
            return {}

    def _lead(self) -> None:
        """Open epoch ``self.epoch`` at the log end with this node as leader: quorum-state (Kafka's QuorumStateData,
        version 0, as its KRaft client writes it for an elected single voter), the epoch's entry in
        leader-epoch-checkpoint, then the LeaderChange control batch (both durable before any record of the
        epoch)."""
        quorum = {
            "clusterId": "",
            "leaderId": self.node_id,
            "leaderEpoch": self.epoch,
            "votedId": -1,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": self.node_id}],
            "data_version": 0,
        }
        # the two renames made durable by one fsync of the directory: either may be found without the other
        # after a crash before it (a newer epoch in the checkpoint alone is dropped by the next start's _lead,
        # which keeps only epochs below its own), never without both before the LeaderChange below
        files.write_atomically(
            os.path.join(self.directory, QUORUM_STATE),
            json.dumps(quorum, separators=(",", ":")).encode(),
            sync_dir=False,
        )
        checkpoint = os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT)
        entries = [(e, o) for e, o in read_checkpoint(checkpoint) if e < self.epoch and o < self.end_offset]
        files.write_atomically(checkpoint, checkpoint_bytes(entries + [(self.epoch, self.end_offset)]), sync_dir=False)
        files.fsync_dir(self.directory)
        voter = message_class("LeaderChangeMessage").Voter(voter_id=self.node_id)
        leader_change = records.new(
            "LeaderChangeMessage", version=0, leader_id=self.node_id, voters=[voter], granting_voters=[voter]
        )
        batch = build_control_batch(
            ControlRecordType.LEADER_CHANGE,
            producer_id=-1,
            producer_epoch=-1,
            base_offset=self.end_offset,
            partition_leader_epoch=self.epoch,
            value=leader_change.encode(0),
        )
        if self._active_size and self._active_size + len(batch) > self.settings["metadata.log.segment.bytes"]:
            self._roll()
        self._write(batch)
        self.end_offset += 1
        self._since_snapshot += len(batch)
        self._last_timestamp = int(time.time() * 1000)

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
        # both renames durable (one fsync of the directory) before the log file exists: a directory with a log
        # is loaded as a metadata log, so it must never be found without its bootstrap snapshot
        files.write_atomically(os.path.join(self.directory, f"{0:020d}-{0:010d}.checkpoint"), snapshot, sync_dir=False)
        files.write_atomically(
            os.path.join(self.directory, files.PARTITION_METADATA),
            f"version: 0\ntopic_id: {uuid_text(METADATA_TOPIC_ID)}\n".encode(),
            sync_dir=False,
        )
        files.fsync_dir(self.directory)
        self._active = os.path.join(self.directory, f"{0:020d}.log")
        with open(self._active, "wb"):
            pass
        self._lead()
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
    """(offset, name, message) of every record of a metadata log batch, control records by their type; a record
    of a type kafkawire has no schema for is (offset, None, its value)."""
    for record in batch.decode_records():
        if batch.attributes & _CONTROL:
            control = decode_control_record(record)
            decoded = records.decode_control(control.type, record.value)
            if decoded is not None:
                yield record.offset, decoded[0], decoded[1]
        else:
            try:
                name, _version, message = records.decode(record.value)
            except records.UnknownRecordTypeError:  # a newer Kafka's record: no name, its bytes
                yield record.offset, None, bytes(record.value)
                continue
            yield record.offset, name, message
