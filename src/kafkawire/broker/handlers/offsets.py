"""ListOffsets, OffsetForLeaderEpoch, DeleteRecords."""

from __future__ import annotations

import struct

from kafkawire.protocol import errors
from kafkawire.protocol.messages import DeleteRecordsResponse, ListOffsetsResponse, OffsetForLeaderEpochResponse
from kafkawire.protocol.records.batch import PARTITION_LEADER_EPOCH_OFFSET

from ..dispatch import handles
from ..storage import base as sb
from ._common import find_topic, partition_log

_EPOCH = struct.Struct(">i")
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
# The first ListOffsets version that may ask for each special timestamp; Kafka answers UNSUPPORTED_VERSION
# for a special timestamp below its version, and for a negative timestamp it does not know at all.
SPECIAL_SINCE = {
    LATEST: 0,
    EARLIEST: 0,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9,
    EARLIEST_PENDING_UPLOAD: 11,
}


def _lookup(broker, topic, partition, plog, ts: int, committed: bool = False) -> tuple[int, int, int]:
    """(offset, timestamp, leader epoch) for a ListOffsets timestamp. As Kafka, the last fetchable offset is
    the last stable offset for read_committed, else the high watermark: LATEST answers it with the current
    leader epoch, EARLIEST the log start with the epoch of the history's first entry (when it starts there),
    and a record found by timestamp (MAX_TIMESTAMP included) counts only below it, with the epoch it was
    written in."""
    fetchable = plog.last_stable_offset if committed else plog.high_watermark
    if ts == LATEST:
        return fetchable, -1, broker.leader_epochs.current(topic, partition)
    cache = broker.leader_epochs.cache(topic, partition, plog)
    if ts in (EARLIEST, EARLIEST_LOCAL):
        return plog.log_start_offset, -1, cache.earliest_epoch(plog.log_start_offset)
    if ts == MAX_TIMESTAMP:
        found = plog.max_timestamp()
    elif ts < 0:  # tiered storage lookups: kafkawire keeps everything local
        return -1, -1, -1
    else:
        found = plog.offset_for_timestamp(ts)
    if not found or found[0] >= fetchable:
        return -1, -1, -1
    return found[0], found[1], _batch_epoch(plog, found[0])


def _batch_epoch(plog, offset: int) -> int:
    """The partitionLeaderEpoch of the batch holding ``offset`` (-1 when it has none): Kafka answers a timestamp
    lookup with the epoch of the batch it found."""
    result = plog.read(offset, 1, min_one=True)
    head = bytes(result.chunks[0][:16]) if result.chunks else b""
    if len(head) < 16:
        return -1
    epoch = _EPOCH.unpack_from(head, PARTITION_LEADER_EPOCH_OFFSET)[0]
    return epoch if epoch >= 0 else -1


@handles("ListOffsets", 0, 11)
def list_offsets(broker, ctx, body):
    version = ctx.api_version
    R = ListOffsetsResponse
    topics = []
    for t in body.topics:
        meta = find_topic(broker, t.name)
        parts = []
        counts: dict[int, int] = {}
        for p in t.partitions:
            counts[p.partition_index] = counts.get(p.partition_index, 0) + 1
        answered = set()
        for p in t.partitions:
            if p.partition_index in answered:
                continue
            pr = R.ListOffsetsPartitionResponse(
                partition_index=p.partition_index,
                error_code=0,
                old_style_offsets=[],
                timestamp=-1,
                offset=-1,
                leader_epoch=-1,
            )
            parts.append(pr)
            if counts[p.partition_index] > 1:  # Kafka: one INVALID_REQUEST answer for a partition asked twice
                answered.add(p.partition_index)
                pr.error_code = errors.INVALID_REQUEST
                continue
            plog = partition_log(broker, meta, p.partition_index) if meta is not None else None
            if plog is None:
                pr.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if version >= 4:
                pr.error_code = broker.leader_epochs.error(meta.name, p.partition_index, p.current_leader_epoch)
                if pr.error_code:
                    continue
            if version == 0:
                ts = p.timestamp
                if ts == LATEST:
                    offsets = [plog.high_watermark]
                elif ts == EARLIEST:
                    offsets = [plog.log_start_offset]
                else:
                    found = plog.offset_for_timestamp(ts) if ts >= 0 else None
                    offsets = [found[0] if found else plog.high_watermark]
                pr.old_style_offsets = offsets[: max(p.max_num_offsets, 0)]
                continue
            if p.timestamp < 0 and version < SPECIAL_SINCE.get(p.timestamp, 1 << 15):
                pr.error_code = errors.UNSUPPORTED_VERSION
                continue
            pr.offset, pr.timestamp, epoch = _lookup(
                broker, meta.name, p.partition_index, plog, p.timestamp, version >= 2 and body.isolation_level == 1
            )
            if version >= 4:
                pr.leader_epoch = epoch
        topics.append(R.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)


@handles("OffsetForLeaderEpoch", 0, 4)
def offset_for_leader_epoch(broker, ctx, body):
    R = OffsetForLeaderEpochResponse
    topics = []
    for t in body.topics:
        meta = find_topic(broker, t.topic)
        parts = []
        for p in t.partitions:
            pr = R.EpochEndOffset(error_code=0, partition=p.partition, leader_epoch=-1, end_offset=-1)
            parts.append(pr)
            plog = partition_log(broker, meta, p.partition) if meta is not None else None
            if plog is None:
                pr.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if ctx.api_version >= 2:
                pr.error_code = broker.leader_epochs.error(t.topic, p.partition, p.current_leader_epoch)
                if pr.error_code:
                    continue
            # the end of the requested epoch from the partition's epoch history, as Kafka's endOffsetFor
            cache = broker.leader_epochs.cache(t.topic, p.partition, plog)
            pr.leader_epoch, pr.end_offset = cache.end_offset_for(
                p.leader_epoch, plog.log_end_offset, plog.log_start_offset
            )
        topics.append(R.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)


def _offsets_partition(broker, name: str, partition: int) -> bool:
    """A partition of the offsets topic (which the group coordinator may not have written yet)."""
    if name != "__consumer_offsets":
        return False
    value, _source = broker.config.broker_value("offsets.topic.num.partitions")
    return 0 <= partition < int(value or 1)


@handles("DeleteRecords", 0, 2)
def delete_records(broker, ctx, body):
    R = DeleteRecordsResponse
    topics = []
    for t in body.topics:
        meta = find_topic(broker, t.name)
        parts = []
        for p in t.partitions:
            pr = R.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=0)
            parts.append(pr)
            plog = partition_log(broker, meta, p.partition_index) if meta is not None else None
            if plog is not None and t.name in INTERNAL_TOPICS or _offsets_partition(broker, t.name, p.partition_index):
                pr.error_code = errors.INVALID_TOPIC_EXCEPTION  # Kafka keeps its internal topics' records
                continue
            if plog is None:
                pr.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offset = plog.high_watermark if p.offset == -1 else p.offset
            if offset < 0 or offset > plog.high_watermark:
                pr.error_code = errors.OFFSET_OUT_OF_RANGE
                continue
            try:
                pr.low_watermark = (
                    plog.delete_records_before(offset) if offset > plog.log_start_offset else plog.log_start_offset
                )
            except sb.OffsetOutOfRangeError:
                pr.error_code = errors.OFFSET_OUT_OF_RANGE
        topics.append(R.DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)
