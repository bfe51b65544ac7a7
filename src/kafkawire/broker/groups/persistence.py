"""Durable group state: the internal topic ``__consumer_offsets``.

Every change the coordinator makes (an offset commit or deletion, a classic
group's new generation and assignments, a consumer group's epochs and
assignments, a group deletion) is appended to partition 0 of
``__consumer_offsets`` as one record of a v2 record batch, through the
ordinary ``Storage`` interface; on start the coordinator replays the
partition from its log start to rebuild its state (last record per key wins).

Record layout (kafkawire's own, not Kafka's binary OffsetCommitKey/Value):

- key:   UTF-8 JSON array
    ``["offset", group, topic, partition]``  committed offset
    ``["group", group]``                     group metadata
    ``["txn-offset", producer id, group, topic, partition]``  an offset staged by an ongoing transaction
                                             (TxnOffsetCommit), deleted when the transaction ends
- value: UTF-8 JSON object, or a null value (tombstone: the key was deleted)
    offset: ``{"offset": int, "leader_epoch": int, "metadata": str|null, "commit_timestamp": int}``
    group:  ``{"type": "classic"|"consumer", ...}`` the state ``ClassicGroup.to_json`` /
            ``ConsumerGroup.to_json`` return (bytes fields base64).

The log is compacted by rewriting: when it holds ``compact_after_records``
records more than the live state, the coordinator appends a snapshot of every
live key and then moves the log start offset past everything before the
snapshot (``delete_records_before``). A crash in between leaves a log that
still replays to the same state (the snapshot records only repeat values).
"""

from __future__ import annotations

import functools
import json
import logging

from kafkawire.protocol.records import build_batch, iter_batches

from ..storage import base as sb

log = logging.getLogger("kafkawire.groups")

TOPIC = "__consumer_offsets"
# The topic's own configs, as Kafka creates it (DescribeConfigs shows them as topic overrides). Compacted, so
# retention.ms does not apply: nothing is deleted by age.
TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"}


class GroupLogError(sb.StorageError):
    """Group state could not be written (the disk failed: KAFKA_STORAGE_ERROR, which the coordinator
    answers as Kafka does, NOT_COORDINATOR); nothing of the change was acknowledged."""

    log_dir_failure = True


READ_CHUNK = 4 * 1024 * 1024


@functools.lru_cache(maxsize=4096)
def _js(text: str | None) -> str:
    return json.dumps(text)


def txn_offset_key(producer_id: int, group: str, topic: str, partition: int) -> bytes:
    return json.dumps(["txn-offset", int(producer_id), group, topic, int(partition)], separators=(",", ":")).encode()


def offset_key(group: str, topic: str, partition: int) -> bytes:
    # the same bytes json.dumps(["offset", group, topic, partition]) gives, built faster (the hot path of commits)
    return f'["offset",{_js(group)},{_js(topic)},{int(partition)}]'.encode()


def offset_value(offset: int, leader_epoch: int, metadata: str | None, commit_timestamp: int) -> bytes:
    meta = _js(metadata) if metadata is None or len(metadata) <= 64 else json.dumps(metadata)
    return (
        f'{{"offset":{int(offset)},"leader_epoch":{int(leader_epoch)},"metadata":{meta},'
        f'"commit_timestamp":{int(commit_timestamp)}}}'
    ).encode()


def group_key(group: str) -> bytes:
    return json.dumps(["group", group], separators=(",", ":")).encode()


def encode_value(value: dict | None) -> bytes | None:
    return None if value is None else json.dumps(value, separators=(",", ":")).encode()


class GroupLog:
    """Appends and replays coordinator records in ``__consumer_offsets``."""

    def __init__(self, storage: sb.Storage, *, partitions: int = 1, fsync: bool = False):
        self.storage = storage
        self.fsync = fsync
        self.partitions = max(1, partitions)
        self.records_written = 0  # since the last load or compaction
        self._log = None

    def _partition(self):
        try:
            return self._open_partition()
        except OSError as exc:
            raise GroupLogError(f"cannot open {TOPIC}: {exc}") from exc

    def _open_partition(self):
        if self._log is None:
            if TOPIC not in self.storage.topics():
                try:
                    self.storage.create_topic(TOPIC, self.partitions, dict(TOPIC_CONFIGS))
                except sb.TopicExistsError:
                    pass
                except sb.InvalidConfigError:  # an engine without compaction settings
                    self.storage.create_topic(TOPIC, self.partitions, {})
                except sb.StorageError as exc:
                    raise GroupLogError(f"cannot create {TOPIC}: {exc}") from exc
            self._log = self.storage.partition(TOPIC, 0)
        return self._log

    def ensure_topic(self) -> None:
        """Create the topic now if it is missing (Kafka does on the first FindCoordinator for a group)."""
        self._partition()

    def replay(self):
        """Yield (key: list, value: dict | None) for every record from the log start, in order.

        The topic is not created here: a broker nobody asked about groups has none."""
        self.records_written = 0
        if TOPIC not in self.storage.topics():
            return
        plog = self._partition()
        offset = plog.log_start_offset
        end = plog.log_end_offset
        self.records_written = 0
        while offset < end:
            result = plog.read(offset, READ_CHUNK, min_one=True)
            data = b"".join(bytes(c) if not isinstance(c, bytes) else c for c in result.chunks)
            if not data:
                break
            progressed = False
            for batch in iter_batches(data):
                for rec in batch.records():
                    if rec.offset < offset:
                        continue
                    offset = rec.offset + 1
                    progressed = True
                    self.records_written += 1
                    try:
                        key = json.loads(bytes(rec.key))
                        value = None if rec.value is None else json.loads(bytes(rec.value))
                    except (ValueError, TypeError):
                        log.warning("skipping unreadable %s record at offset %d", TOPIC, rec.offset)
                        continue
                    yield key, value
            if not progressed:
                break

    def append(self, records: list[tuple[bytes, bytes | None]]) -> None:
        if not records:
            return
        batch = build_batch([(k, v) for k, v in records])
        plog = self._partition()
        try:
            plog.append(batch, durable=self.fsync)
        except OSError as exc:
            raise GroupLogError(f"appending to {TOPIC} failed: {exc}") from exc
        except sb.StorageError as exc:
            if getattr(exc, "log_dir_failure", False) or isinstance(exc.__cause__, OSError):
                raise GroupLogError(f"appending to {TOPIC} failed: {exc}") from exc
            raise
        self.records_written += len(records)

    def compact(self, live: list[tuple[bytes, bytes | None]]) -> None:
        """Append a snapshot of the live records and drop everything before it."""
        plog = self._partition()
        start = plog.log_end_offset
        for i in range(0, len(live), 1000):
            self.append(live[i : i + 1000])
        plog.delete_records_before(start)
        self.records_written = len(live)
        log.info("compacted %s: %d live records from offset %d", TOPIC, len(live), start)

    def flush(self) -> None:
        if self._log is not None:
            self._log.flush()
