"""Produce: validate batch headers and CRCs (records are not decoded), check idempotent sequences, append.

v3+ requests carry exactly one v2 batch per partition (as Kafka requires);
v0-2 requests may carry magic 0/1 message sets, which are up-converted to v2
batches first. Base offsets are assigned by the storage engine rewriting the
batch header in place. acks=0 requests get no response; if one of them fails
the connection is closed, which is how Kafka tells such a producer.
"""
from __future__ import annotations

import functools
import struct

from crc32c import crc32c

from kafkawire.net.server import CloseConnection
from kafkawire.protocol import errors
from kafkawire.protocol.messages import ProduceResponse
from kafkawire.protocol.records import CorruptRecordError, iter_batches, message_set_to_batches

from ..dispatch import handles
from ._common import find_topic, log, now_ms, partition_log, storage_error_code
from .producers import BatchMeta

HEADER = struct.Struct(">qiibIhiqqqhii")  # v2 batch header, 61 bytes
HEADER_SIZE = HEADER.size
_I32 = struct.Struct(">i")
ZSTD = 4
CONTROL = 0x20
LONG_MAX = 9223372036854775807

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse


class Rejected(Exception):
    def __init__(self, code: int, message: str):
        self.code, self.message = code, message
        super().__init__(message)


def _prepare(broker, version: int, meta, partition: int, records):
    """(buffer of v2 batches to append, header of the batch for idempotence or None). Raises Rejected."""
    tp = f"{meta.name}-{partition}"
    if records is None or len(records) == 0:
        if version >= 3:
            raise Rejected(errors.INVALID_RECORD,
                           f"Produce requests with version {version} must have at least one record batch per "
                           "partition")
        return None, None
    try:
        entries = list(iter_batches(records, allow_partial=False))
    except CorruptRecordError as exc:
        raise Rejected(errors.CORRUPT_MESSAGE, f"{tp}: {exc}") from None
    if not entries:
        raise Rejected(errors.CORRUPT_MESSAGE, f"{tp}: no complete record batch")
    if version >= 3:
        if entries[0].magic != 2:
            raise Rejected(errors.INVALID_RECORD, f"Produce requests with version {version} are only allowed to "
                                                  "contain record batches with magic version 2")
        if len(entries) > 1:
            raise Rejected(errors.INVALID_RECORD, f"Produce requests with version {version} are only allowed to "
                                                  "contain exactly one record batch per partition")
    max_bytes = int(broker.config.topic_value(meta.configs, "max.message.bytes"))
    buf = records
    if any(e.magic != 2 for e in entries):
        # An old producer's message set: check it, then up-convert to v2 batches.
        for e in entries:
            if e.magic != 2 and e.size > max_bytes:
                raise Rejected(errors.MESSAGE_TOO_LARGE, f"{tp}: message of {e.size} bytes is larger than "
                                                         f"max.message.bytes {max_bytes}")
        try:
            buf = message_set_to_batches(records, check_crc=True)
            entries = list(iter_batches(buf, allow_partial=False))
        except CorruptRecordError as exc:
            raise Rejected(errors.CORRUPT_MESSAGE, f"{tp}: {exc}") from None
        except Exception as exc:
            raise Rejected(errors.CORRUPT_MESSAGE, f"{tp}: cannot up-convert message set: {exc}") from None
    view = memoryview(buf)
    if view.readonly:
        buf = bytearray(buf)
        view = memoryview(buf)
    ts_type = broker.config.topic_value(meta.configs, "message.timestamp.type")
    now = now_ms()
    before_max = int(broker.config.topic_value(meta.configs, "message.timestamp.before.max.ms"))
    after_max = int(broker.config.topic_value(meta.configs, "message.timestamp.after.max.ms"))
    header = None
    for e in entries:
        pos = e.position
        h = HEADER.unpack_from(view, pos)
        (base_offset, length, _ple, _magic, crc, attrs, last_delta, base_ts, max_ts, pid, epoch, base_seq,
         count) = h
        size = length + 12
        if crc32c(view[pos + 21:pos + size]) != crc:
            raise Rejected(errors.CORRUPT_MESSAGE, f"{tp}: record batch at byte {pos} fails its CRC check")
        if size > max_bytes:
            raise Rejected(errors.MESSAGE_TOO_LARGE, f"{tp}: record batch of {size} bytes is larger than "
                                                     f"max.message.bytes {max_bytes}")
        if (attrs & 0x07) == ZSTD and version < 7:
            raise Rejected(errors.UNSUPPORTED_COMPRESSION_TYPE,
                           f"Produce requests with version {version} are not allowed to use ZStandard compression")
        if (attrs & 0x07) > 4:
            raise Rejected(errors.CORRUPT_MESSAGE, f"{tp}: unknown compression codec {attrs & 0x07}")
        if count <= 0 or last_delta < 0:
            raise Rejected(errors.INVALID_RECORD, f"{tp}: record batch has an invalid record count {count}")
        if last_delta + 1 != count:
            raise Rejected(errors.INVALID_RECORD,
                           f"Inconsistent batch offset range [0, {last_delta}] and count of records {count} in "
                           f"{tp}")
        if attrs & CONTROL:
            raise Rejected(errors.INVALID_RECORD, f"{tp}: clients are not allowed to write control records")
        if pid >= 0 and base_seq < 0:
            raise Rejected(errors.INVALID_RECORD, f"{tp}: invalid sequence number {base_seq} for producer {pid}")
        if ts_type == "CreateTime":
            if base_ts >= 0 and before_max < LONG_MAX and base_ts < now - before_max:
                raise Rejected(errors.INVALID_TIMESTAMP, f"{tp}: timestamp {base_ts} is before the allowed "
                                                         f"range (message.timestamp.before.max.ms={before_max})")
            if max_ts >= 0 and after_max < LONG_MAX and max_ts > now + after_max:
                raise Rejected(errors.INVALID_TIMESTAMP, f"{tp}: timestamp {max_ts} is after the allowed "
                                                         f"range (message.timestamp.after.max.ms={after_max})")
        header = h
        _I32.pack_into(view, pos + 12, broker.leader_epoch)  # the partition leader epoch (not covered by the CRC)
    target = _TARGET_CODECS.get(broker.config.topic_value(meta.configs, "compression.type"))
    if target is not None and any((HEADER.unpack_from(view, e.position)[5] & 0x07) != target for e in entries):
        buf = _recompress(view, entries, target, tp)
        header = HEADER.unpack_from(buf, 0) if len(entries) == 1 else header
    if len(entries) > 1 or header[9] < 0:
        header = None  # only v3+ single-batch requests are idempotent
    return buf, header


# topic compression.type -> codec id every batch is rewritten with ("producer": kept as sent)
_TARGET_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _recompress(view, entries, target: int, tp: str) -> bytearray:
    """Rewrite batches with the topic's compression.type, as Kafka does (producer id, epoch, sequence and
    timestamps kept)."""
    from kafkawire.protocol.records import RecordBatch, build_batch

    out = bytearray()
    for e in entries:
        b = RecordBatch(view[e.position:e.position + e.size])
        if (b.attributes & 0x07) == target:
            out += b.buffer
            continue
        try:
            records = b.decode_records()
        except CorruptRecordError as exc:
            raise Rejected(errors.CORRUPT_MESSAGE, f"{tp}: {exc}") from None
        out += build_batch(records, compression=target, base_offset=0, producer_id=b.producer_id,
                           producer_epoch=b.producer_epoch, base_sequence=b.base_sequence,
                           transactional=b.is_transactional, timestamp_type=b.timestamp_type,
                           partition_leader_epoch=b.partition_leader_epoch,
                           base_timestamp=b.base_timestamp)
    return out


def _append(broker, meta, partition: int, plog, buf, header, durable: bool, lat: int | None):
    """Idempotence check + append; runs in order per partition (in a storage thread for file engines).
    Returns ((error, message, base_offset, log_append_time, log_start_offset), whether it fsynced)."""
    producers = broker.producers
    if header is not None:
        pid, epoch, first_seq, count = header[9], header[10], header[11], header[12]
        producers.ensure_loaded(meta.name, partition, plog)
        last_seq = first_seq + count - 1
        if last_seq > 2147483647:  # sequences wrap around to 0 (DefaultRecordBatch.incrementSequence)
            last_seq -= 2147483648
        code, message, dup = producers.check(meta.name, partition, pid, epoch, first_seq, last_seq)
        if code:
            return (code, message, -1, -1, -1), False
        if dup is not None:
            return (0, None, dup.base_offset, dup.log_append_time, plog.log_start_offset), False
    result = plog.append(buf, log_append_time=lat, durable=durable)
    if header is not None:
        producers.record(meta.name, partition, pid, epoch,
                         BatchMeta(first_seq, last_seq, result.base_offset, result.last_offset,
                                   lat if lat is not None else header[8], result.log_append_time))
    return (0, None, result.base_offset, result.log_append_time, result.log_start_offset), durable


def _fill(pr, outcome) -> None:
    code, message, base, lat, start = outcome
    pr.error_code = code
    pr.error_message = message
    pr.base_offset = base
    pr.log_append_time_ms = lat
    pr.log_start_offset = start


@handles("Produce", 0, 13)
def produce(broker, ctx, body):
    version = ctx.api_version
    acks = body.acks
    durable = acks == -1 and broker.config.acks_all_fsync
    by_id = version >= 13
    responses = []
    work = []  # (partition response, meta, partition, log, buf, header, lat)
    for t in body.topic_data:
        meta = find_topic(broker, None if by_id else t.name, t.topic_id if by_id else None)
        tr = TopicResponse(name=t.name, topic_id=t.topic_id, partition_responses=[])
        responses.append(tr)
        for p in t.partition_data:
            pr = PartitionResponse(index=p.index, error_code=0, base_offset=-1, log_append_time_ms=-1,
                                   log_start_offset=-1, record_errors=[], error_message=None)
            tr.partition_responses.append(pr)
            if acks not in (0, 1, -1):
                pr.error_code = errors.INVALID_REQUIRED_ACKS
                continue
            if body.transactional_id is not None and broker.txn_coordinator is None:
                pr.error_code = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                continue
            if meta is None:
                pr.error_code = errors.UNKNOWN_TOPIC_ID if by_id else errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            plog = partition_log(broker, meta, p.index)
            if plog is None:
                pr.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if meta.name in INTERNAL_TOPICS:
                pr.error_code = errors.INVALID_TOPIC_EXCEPTION
                pr.error_message = f"Cannot append to internal topic {meta.name}"
                continue
            try:
                buf, header = _prepare(broker, version, meta, p.index, p.records)
            except Rejected as exc:
                pr.error_code, pr.error_message = exc.code, exc.message
                log.warning("produce to %s-%d from %r rejected: %s (%s)", meta.name, p.index, ctx.client_id,
                            exc.message, errors.error_for(exc.code).name)
                continue
            if buf is None:
                continue
            lat = now_ms() if broker.config.topic_value(meta.configs, "message.timestamp.type") == "LogAppendTime" \
                else None
            work.append((pr, meta, p.index, plog, buf, header, lat))
    if not work:
        return _respond(ctx, acks, responses)
    pending = []
    for item in work:
        pr, meta, partition, plog, buf, header, lat = item
        if not broker.storage_in_thread or (not durable and broker.partition_idle(meta.name, partition)):
            # in-memory engine, or nothing queued for the partition and no fsync to wait for: append now
            try:
                outcome, _ = _append(broker, meta, partition, plog, buf, header, durable, lat)
            except Exception as exc:
                outcome = _append_failed(meta, partition, exc)
            _fill(pr, outcome)
            if not outcome[0]:
                broker.waiters.notify(meta.name, partition)
            continue
        job = functools.partial(_queued_append, broker, meta, partition, plog, buf, header, lat)
        fut = broker.submit_append(meta.name, partition, plog, job, durable)
        pending.append((item, fut))
    if not pending:
        return _respond(ctx, acks, responses)
    return _produce_async(broker, ctx, acks, responses, pending)


def _queued_append(broker, meta, partition, plog, buf, header, lat, sync: bool):
    return _append(broker, meta, partition, plog, buf, header, sync, lat)


async def _produce_async(broker, ctx, acks, responses, pending):
    for (pr, meta, partition, *_), fut in pending:
        try:
            outcome = await fut
        except Exception as exc:
            outcome = _append_failed(meta, partition, exc)
        _fill(pr, outcome)
        if not outcome[0]:
            broker.waiters.notify(meta.name, partition)
    return _respond(ctx, acks, responses)


def _append_failed(meta, partition, exc):
    code = storage_error_code(exc)
    if code == errors.KAFKA_STORAGE_ERROR:  # the storage engine logs the disk failure itself, loudly, once
        log.warning("append to %s-%d failed: %s", meta.name, partition, exc)
    else:
        log.error("append to %s-%d failed: %s", meta.name, partition, exc,
                  exc_info=code == errors.UNKNOWN_SERVER_ERROR)
    return code, str(exc), -1, -1, -1


def _respond(ctx, acks, responses):
    if acks == 0:
        failed = [(tr.name, pr.index, pr.error_code) for tr in responses for pr in tr.partition_responses
                  if pr.error_code]
        if failed:
            raise CloseConnection(f"acks=0 produce failed for {failed}; closing the connection to tell the producer")
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)
