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
from ..producer_state import BatchMeta
from ._common import find_topic, log, now_ms, partition_log, storage_error_code

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
    """A partition's batch refused. Kafka answers a message only where it says more than the error code
    (``message`` is then kafkawire's own text for the log, ``answer`` what the producer is told), and the
    partition's log start offset only for batches its log validated (``validated``)."""

    def __init__(self, code: int, message: str, *, answer: str | None = None, validated: bool = False,
                 record_errors: list | None = None):
        self.code, self.message, self.answer = code, message, answer
        self.validated, self.record_errors = validated, record_errors or []
        super().__init__(message)


LOG_OVERHEAD = 12  # base offset + length
MIN_RECORD_OVERHEAD = 14  # the smallest legacy message after its length
UP_TO_MAGIC = 17
TRANSACTIONAL = 0x10


def _frames(records) -> tuple[list[tuple[int, int, int]], str | None]:
    """The whole batches (position, size, magic) at the front of ``records``, walked as Kafka's broker walks
    a produce request: a partial batch at the end (or fewer bytes than a batch header) ends the walk and is
    ignored; a length below the smallest entry or an unknown magic is a framing error, returned as text."""
    out = []
    view = memoryview(records)
    pos, end = 0, len(view)
    while end - pos >= LOG_OVERHEAD:
        size = _I32.unpack_from(view, pos + 8)[0]
        if size < MIN_RECORD_OVERHEAD:
            return out, f"a record batch declares {size} bytes, fewer than any entry needs ({MIN_RECORD_OVERHEAD})"
        if end - pos < UP_TO_MAGIC:
            break
        magic = view[pos + 16]
        if magic > 2:  # a byte read as signed: 128-255 are negative magics
            return out, f"a record batch has magic {magic if magic < 128 else magic - 256}, which no format uses"
        if end - pos < size + LOG_OVERHEAD:
            break
        out.append((pos, size + LOG_OVERHEAD, magic))
        pos += size + LOG_OVERHEAD
    return out, None


def _request_check(body) -> tuple[int, str | None] | None:
    """(error, message) that every partition of the request is answered with, or None.

    Before looking at any one partition Kafka walks every batch of the request to learn whether it holds
    transactional records: a framing error there fails the whole request (with its message), and
    transactional records without a transactional id fail it with TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    transactional = False
    for t in body.topic_data:
        for p in t.partition_data:
            if not p.records:
                continue
            frames, problem = _frames(p.records)
            if problem is not None:
                return errors.CORRUPT_MESSAGE, problem
            for pos, size, magic in frames:
                if magic == 2 and size >= HEADER_SIZE and HEADER.unpack_from(p.records, pos)[5] & TRANSACTIONAL:
                    transactional = True
    if transactional and body.transactional_id is None:
        return errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    return None


def _is_transactional(records) -> bool:
    """Whether a batch has a producer id and the transactional flag (what Kafka verifies with its
    transaction coordinator; without a producer id the flag alone is appended as any batch)."""
    frames, _ = _frames(records)
    for pos, size, magic in frames:
        if magic == 2 and size >= HEADER_SIZE:
            h = HEADER.unpack_from(records, pos)
            if h[5] & TRANSACTIONAL and h[9] >= 0:
                return True
    return False


def _prepare(broker, version: int, meta, partition: int, records):
    """(buffer of v2 batches to append, header of the batch for idempotence or None). Raises Rejected."""
    tp = f"{meta.name}-{partition}"
    if records is None or len(records) == 0:
        if version >= 3:
            raise Rejected(errors.INVALID_RECORD, f"{tp}: a produce request v{version} needs a record batch")
        return None, None
    frames, problem = _frames(records)  # framing errors failed the whole request already
    if not frames:
        if version >= 3:
            raise Rejected(errors.INVALID_RECORD, f"{tp}: no whole record batch in {len(records)} bytes")
        return None, None
    if version >= 3:
        if frames[0][2] != 2:
            raise Rejected(errors.INVALID_RECORD, f"{tp}: a produce request v{version} may only carry record "
                                                  "batches of magic 2")
        if version < 7 and frames[0][1] >= HEADER_SIZE and (HEADER.unpack_from(records, 0)[5] & 0x07) == ZSTD:
            raise Rejected(errors.UNSUPPORTED_COMPRESSION_TYPE,
                           f"{tp}: a produce request v{version} may not use zstd compression")
        if len(frames) > 1:
            raise Rejected(errors.INVALID_RECORD, f"{tp}: a produce request v{version} may only carry one "
                                                  "record batch per partition")
    if broker.txn_coordinator is None and _is_transactional(records):
        # Kafka asks the transaction coordinator whether the partition is in the producer's transaction
        # before appending; kafkawire has none (InitProducerId with a transactional id answers
        # COORDINATOR_NOT_AVAILABLE), so the batch is refused as Kafka refuses it while its coordinator is
        # unavailable: retriable, nothing appended.
        raise Rejected(errors.NOT_ENOUGH_REPLICAS, f"{tp}: transactional batch with no transaction coordinator "
                                                   "to verify it against",
                       answer="cannot verify that the partition is part of the transaction: no transaction "
                              "coordinator is available")
    if meta.name in INTERNAL_TOPICS:
        raise Rejected(errors.INVALID_TOPIC_EXCEPTION, f"cannot append to internal topic {meta.name}")
    whole = frames[-1][0] + frames[-1][1]
    if whole < len(records):  # bytes after the last whole batch are dropped, as Kafka drops them
        records = memoryview(records)[:whole]
    try:
        entries = list(iter_batches(records, allow_partial=False))
    except CorruptRecordError as exc:
        raise Rejected(errors.CORRUPT_MESSAGE, f"{tp}: {exc}") from None
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
    check_ts = ts_type == "CreateTime" and (before_max < LONG_MAX or after_max < LONG_MAX)
    header = None
    for e in entries:
        pos = e.position
        h = HEADER.unpack_from(view, pos)
        (base_offset, length, _ple, _magic, crc, attrs, last_delta, base_ts, max_ts, pid, epoch, base_seq,
         count) = h
        size = length + 12
        # The order and the answers are Kafka's: checks of the batch as a whole answer no log start offset,
        # checks of its contents answer the partition's (``validated``), and none of them a message.
        if version >= 3 and base_offset != 0:
            raise Rejected(errors.INVALID_RECORD, f"{tp}: a producer's batch must start at offset 0, not "
                                                  f"{base_offset}", validated=True)
        if size > max_bytes:
            raise Rejected(errors.MESSAGE_TOO_LARGE, f"{tp}: record batch of {size} bytes is larger than "
                                                     f"max.message.bytes {max_bytes}")
        if crc32c(view[pos + 21:pos + size]) != crc:
            raise Rejected(errors.CORRUPT_MESSAGE, f"{tp}: record batch at byte {pos} fails its CRC check")
        if (attrs & 0x07) > 4:
            raise Rejected(errors.UNKNOWN_SERVER_ERROR, f"{tp}: unknown compression codec {attrs & 0x07}",
                           validated=True)
        if count <= 0 or last_delta < 0:
            raise Rejected(errors.INVALID_RECORD, f"{tp}: record batch has an invalid record count {count}",
                           validated=True)
        if last_delta + 1 != count:
            raise Rejected(errors.INVALID_RECORD, f"{tp}: record batch spans offsets 0..{last_delta} but holds "
                                                  f"{count} records", validated=True)
        if attrs & CONTROL:
            raise Rejected(errors.INVALID_RECORD, f"{tp}: clients are not allowed to write control records",
                           validated=True)
        if pid >= 0 and base_seq < 0:
            raise Rejected(errors.INVALID_RECORD, f"{tp}: invalid sequence number {base_seq} for producer {pid}",
                           validated=True)
        if check_ts and (before_max < LONG_MAX or max_ts > now + after_max):
            _check_timestamps(view[pos:pos + size], now, before_max, after_max, tp)
        header = h
        _I32.pack_into(view, pos + 12, broker.leader_epoch)  # the partition leader epoch (not covered by the CRC)
    target = _TARGET_CODECS.get(broker.config.topic_value(meta.configs, "compression.type"))
    if target is not None and any((HEADER.unpack_from(view, e.position)[5] & 0x07) != target for e in entries):
        buf = _recompress(view, entries, target, tp)
        header = HEADER.unpack_from(buf, 0) if len(entries) == 1 else header
    if len(entries) > 1 or header[9] < 0:
        header = None  # only v3+ single-batch requests are idempotent
    return buf, header


def _check_timestamps(batch, now: int, before_max: int, after_max: int, tp: str) -> None:
    """Every record's CreateTime within [now - before_max, now + after_max]; Rejected naming each one outside
    (Kafka's record errors: the record's index in the batch and why)."""
    from kafkawire.protocol.records import RecordBatch

    lo = now - before_max if before_max < LONG_MAX else -LONG_MAX - 1
    hi = now + after_max if after_max < LONG_MAX else LONG_MAX
    try:
        records = list(RecordBatch(batch).records())
    except CorruptRecordError as exc:
        raise Rejected(errors.CORRUPT_MESSAGE, f"{tp}: {exc}") from None
    bad = []
    for index, r in enumerate(records):
        if r.timestamp >= 0 and not lo <= r.timestamp <= hi:
            bad.append(ProduceResponse.BatchIndexAndErrorMessage(
                batch_index=index, batch_index_error_message=f"record {index} has timestamp {r.timestamp}, outside "
                                                             f"the accepted range [{lo}, {hi}]"))
    if bad:
        raise Rejected(errors.INVALID_TIMESTAMP, f"{tp}: {len(bad)} record(s) with a timestamp outside [{lo}, {hi}]",
                       answer="records refused: their timestamps are outside the range the topic accepts",
                       validated=True, record_errors=bad)


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
            # Kafka answers these with the partition's log start offset and no message
            log.info("produce to %s-%d refused: %s (%s)", meta.name, partition, message, errors.error_for(code).name)
            return (code, None, -1, -1, plog.log_start_offset), False
        if dup is not None:
            # a retried batch: its offsets as first appended and, as Kafka answers, its max timestamp (the
            # append time under LogAppendTime) in log_append_time_ms whatever the topic's timestamp type
            return (0, None, dup.base_offset, dup.timestamp, plog.log_start_offset), False
    result = plog.append(buf, log_append_time=lat, durable=durable)
    if header is not None:
        producers.record(meta.name, partition, pid, epoch,
                         BatchMeta(first_seq, last_seq, result.base_offset, result.last_offset,
                                   lat if lat is not None else header[8], result.log_append_time))
    return (0, None, result.base_offset, result.log_append_time, result.log_start_offset), durable


def _fill(pr, outcome) -> None:
    code, message, base, lat, start = outcome[:5]
    pr.record_errors = outcome[5] if len(outcome) > 5 else []
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
    whole = _request_check(body)
    for t in body.topic_data:
        meta = find_topic(broker, None if by_id else t.name, t.topic_id if by_id else None)
        tr = TopicResponse(name=t.name, topic_id=t.topic_id, partition_responses=[])
        responses.append(tr)
        for p in t.partition_data:
            pr = PartitionResponse(index=p.index, error_code=0, base_offset=-1, log_append_time_ms=-1,
                                   log_start_offset=-1, record_errors=[], error_message=None)
            tr.partition_responses.append(pr)
            if whole is not None:
                pr.error_code, pr.error_message = whole
                continue
            if acks not in (0, 1, -1):
                pr.error_code = errors.INVALID_REQUIRED_ACKS
                continue
            if meta is None:
                pr.error_code = errors.UNKNOWN_TOPIC_ID if by_id else errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            plog = partition_log(broker, meta, p.index)
            if plog is None:
                pr.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                buf, header = _prepare(broker, version, meta, p.index, p.records)
            except Rejected as exc:
                pr.error_code, pr.error_message = exc.code, exc.answer
                pr.record_errors = exc.record_errors
                if exc.validated:
                    pr.log_start_offset = plog.log_start_offset
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
