"""What a partition leader checks of a producer's records before appending them, and the rewrite to the
topic's ``compression.type``: Kafka's order and answers (its ReplicaManager walking the whole request, then
LogValidator batch by batch), sans-IO.

The records, the Produce version and the topic's rules go in; out comes either an ``Accepted`` (the buffer
to append, its partition leader epoch set, and the header an idempotent producer's sequence check needs) or
a ``Refusal`` with Kafka's error code. Header fields are read through the layout ``batch`` owns
(``read_header``); every batch's records are walked as Kafka reads them (``walk.unreadable``: in bulk,
decompressed when compressed, as Kafka decompresses each one) and decoded only to check timestamps or keys,
up-convert an old message set or recompress.

The order matters to the answer, not only to the code: checks of the batch as a whole answer without the
partition's log start offset, checks of its contents with it (``Refusal.validated``), and Kafka sends a
message only where it says more than the code (``Refusal.answer``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

from .. import errors
from .batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LENGTH_OFFSET,
    MAGIC_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORDS_OFFSET,
    TRANSACTIONAL_MASK,
    BatchHeader,
    RecordBatch,
    read_header,
)
from .builder import build_batch
from .codecs import decompress
from .convert import message_set_to_batches
from .crc import crc32c
from .errors import CorruptRecordError
from .legacy import RECORD_OVERHEAD_V0
from .model import Compression
from .reader import iter_batches
from .walk import BUFFER, SKIP, WHOLE, unreadable

LOG_OVERHEAD = LENGTH_OFFSET + 4  # base offset + length: what every entry of any magic starts with
_UP_TO_MAGIC = MAGIC_OFFSET + 1
_LONG_MAX = (1 << 63) - 1
_LONG_MIN = -(1 << 63)
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ZSTD = int(Compression.ZSTD)  # the highest codec id; a plain int, as it is compared per batch

# a topic's compression.type -> the codec every batch is rewritten with ("producer": kept as sent)
TARGET_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class Frame(NamedTuple):
    """A whole entry at the front of a Produce request's records."""

    position: int
    size: int  # with the 12-byte log overhead
    magic: int


class Refusal(NamedTuple):
    """Why a partition's records are not appended. ``message`` is for the broker's log; ``answer`` what the
    producer is told (None: the code alone); ``validated``: the log validated the batch, so Kafka answers the
    partition's log start offset; ``record_errors``: (index of the record in its batch, why)."""

    code: int
    message: str
    answer: str | None = None
    validated: bool = False
    record_errors: tuple[tuple[int, str], ...] = ()


class Accepted(NamedTuple):
    """v2 batches ready to append (base offsets still 0: storage assigns them) and, for the single batch of a
    request with a producer id, its header (the idempotent producer's sequence check)."""

    buffer: bytes | bytearray | memoryview
    idempotent: BatchHeader | None


class TopicRules(NamedTuple):
    """The topic configs a leader validates against (their Kafka names in the comments); a tuple, as one is
    made per partition of every Produce request."""

    max_message_bytes: int  # max.message.bytes
    timestamp_type: str = "CreateTime"  # message.timestamp.type
    timestamp_before_max_ms: int = _LONG_MAX  # message.timestamp.before.max.ms
    timestamp_after_max_ms: int = _LONG_MAX  # message.timestamp.after.max.ms
    compression_type: str = "producer"  # compression.type
    compacted: bool = False  # cleanup.policy holds compact: every record needs a key
    segment_bytes: int = 2**31 - 1  # segment.bytes, or internal.segment.bytes when set (any int, even negative)


def frames(records) -> tuple[list[Frame], str | None]:
    """The whole entries at the front of ``records``, walked as Kafka's broker walks a Produce request: a
    partial entry at the end (or fewer bytes than a header) ends the walk and is ignored; a length below the
    smallest entry or an unknown magic is a framing error, returned as text."""
    out: list[Frame] = []
    view = memoryview(records)
    pos, end = 0, len(view)
    while end - pos >= LOG_OVERHEAD:
        size = _I32.unpack_from(view, pos + LENGTH_OFFSET)[0]
        if size < RECORD_OVERHEAD_V0:
            return out, f"a record batch declares {size} bytes, fewer than any entry needs ({RECORD_OVERHEAD_V0})"
        if end - pos < _UP_TO_MAGIC:
            break
        magic = view[pos + MAGIC_OFFSET]
        if magic > 2:  # a byte read as signed: 128-255 are negative magics
            return out, f"a record batch has magic {magic if magic < 128 else magic - 256}, which no format uses"
        if end - pos < size + LOG_OVERHEAD:
            break
        out.append(tuple.__new__(Frame, (pos, size + LOG_OVERHEAD, magic)))  # (Frame() is slower, per batch)
        pos += size + LOG_OVERHEAD
    return out, None


def _transactional(records, frame: Frame) -> bool:
    """Whether the entry is a v2 batch with the transactional flag."""
    return (
        frame.magic == 2
        and frame.size >= HEADER_SIZE
        and bool(records[frame.position + ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK)
    )


def request_refusal(record_sets: Iterable, transactional_id: str | None) -> Refusal | None:
    """What every partition of a Produce request is answered with, or None. Before any one partition Kafka
    walks every batch of the request to learn whether it holds transactional records: a framing error there
    fails the whole request (with its message), and transactional records without a transactional id fail
    it with TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    return request_frames(record_sets, transactional_id)[1]


def request_frames(record_sets: Iterable, transactional_id: str | None) -> tuple[list, Refusal | None]:
    """``request_refusal``, with the frames walked in each record set (None for an empty one) so that
    ``check_format`` need not walk them again; the list stops at a framing error."""
    transactional = False
    walked: list[list[Frame] | None] = []
    for records in record_sets:
        if not records:
            walked.append(None)
            continue
        found, problem = frames(records)
        if problem is not None:
            return walked, Refusal(errors.CORRUPT_MESSAGE, problem, answer=problem)
        walked.append(found)
        if not transactional:
            for f in found:
                if _transactional(records, f):
                    transactional = True
                    break
    if transactional and transactional_id is None:
        return walked, Refusal(
            errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactional records without a transactional id"
        )
    return walked, None


def has_transactional_batch(records, found: list[Frame]) -> bool:
    """Whether one of the entries ``check_format`` found is a batch with a producer id and the transactional
    flag (what Kafka verifies with its transaction coordinator; without a producer id the flag alone is
    appended as any batch)."""
    for frame in found:
        if _transactional(records, frame) and _I64.unpack_from(records, frame.position + PRODUCER_ID_OFFSET)[0] >= 0:
            return True
    return False


def check_format(records, version: int, found: list[Frame] | None = None) -> list[Frame] | Refusal | None:
    """The request-level checks of one partition's records for a Produce ``version``: its whole entries, a
    Refusal, or None when there is nothing to append (no records before v3). Framing errors have already
    failed the whole request (``request_refusal``); ``found``: the frames ``request_frames`` walked there."""
    if records is None or len(records) == 0:
        if version >= 3:
            return Refusal(errors.INVALID_RECORD, f"a produce request v{version} needs a record batch")
        return None
    if found is None:
        found, _ = frames(records)
    if not found:
        if version >= 3:
            return Refusal(errors.INVALID_RECORD, f"no whole record batch in {len(records)} bytes")
        return None
    if version >= 3:
        first = found[0]
        if first.magic != 2:
            return Refusal(
                errors.INVALID_RECORD, f"a produce request v{version} may only carry record batches of magic 2"
            )
        if (
            version < 7
            and first.size >= HEADER_SIZE
            and records[first.position + ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK == _ZSTD
        ):
            return Refusal(
                errors.UNSUPPORTED_COMPRESSION_TYPE, f"a produce request v{version} may not use zstd compression"
            )
        if len(found) > 1:
            return Refusal(
                errors.INVALID_RECORD, f"a produce request v{version} may only carry one record batch per partition"
            )
    return found


def validate(
    records, found: list[Frame], version: int, rules: TopicRules, now: int, leader_epoch: int
) -> Accepted | Refusal:
    """Check the entries ``check_format`` found as Kafka's LogValidator does, up-convert an old message set,
    set each batch's partition leader epoch and rewrite it to the topic's compression."""
    last = found[-1]
    whole = last.position + last.size
    if whole < len(records):  # bytes after the last whole entry are dropped, as Kafka drops them
        records = memoryview(records)[:whole]
    # The frames already are the walk when every entry is a v2 batch at least a header long (whole entries, by
    # check_format): all the reader would add. A message set or a short v2 entry takes the reader's checks.
    entries: list = found  # Frames, or the reader's batches below (both have magic, size, ...)
    for f in found:
        if f.magic != 2 or f.size < HEADER_SIZE:
            try:
                entries = list(iter_batches(records, allow_partial=False))
            except CorruptRecordError as exc:
                return Refusal(errors.CORRUPT_MESSAGE, str(exc))
            break
    max_bytes = rules.max_message_bytes
    buf = records
    if entries is not found and any(e.magic != 2 for e in entries):
        # An old producer's message set: check it, then up-convert to v2 batches.
        for e in entries:
            if e.magic != 2 and e.size > max_bytes:
                return Refusal(
                    errors.MESSAGE_TOO_LARGE, f"message of {e.size} bytes is larger than max.message.bytes {max_bytes}"
                )
        try:
            buf = message_set_to_batches(records, check_crc=True)
            entries = list(iter_batches(buf, allow_partial=False))
        except CorruptRecordError as exc:
            return Refusal(errors.CORRUPT_MESSAGE, str(exc))
        except Exception as exc:
            return Refusal(errors.CORRUPT_MESSAGE, f"cannot up-convert message set: {exc}")
    view = memoryview(buf)
    if view.readonly:
        buf = bytearray(buf)
        view = memoryview(buf)
    before_max, after_max = rules.timestamp_before_max_ms, rules.timestamp_after_max_ms
    check_ts = rules.timestamp_type == "CreateTime" and (before_max < _LONG_MAX or after_max < _LONG_MAX)
    target = TARGET_CODECS.get(rules.compression_type)
    header = None
    for e in entries:
        pos = e.position
        h = read_header(view, pos)
        size = h.batch_length + LOG_OVERHEAD
        count, last_delta = h.record_count, h.last_offset_delta
        # checks of the batch as a whole first (no log start offset), then of its contents (validated)
        if version >= 3 and h.base_offset != 0:
            return Refusal(
                errors.INVALID_RECORD, f"a producer's batch must start at offset 0, not {h.base_offset}", validated=True
            )
        if size > max_bytes:
            return Refusal(
                errors.MESSAGE_TOO_LARGE, f"record batch of {size} bytes is larger than max.message.bytes {max_bytes}"
            )
        if crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]) != h.crc:
            return Refusal(errors.CORRUPT_MESSAGE, f"record batch at byte {pos} fails its CRC check")
        attributes = h.attributes
        if (attributes & COMPRESSION_MASK) > _ZSTD:
            return Refusal(
                errors.UNKNOWN_SERVER_ERROR,
                f"unknown compression codec {attributes & COMPRESSION_MASK}",
                validated=True,
            )
        if count <= 0 or last_delta < 0:
            return Refusal(errors.INVALID_RECORD, f"record batch has an invalid record count {count}", validated=True)
        if last_delta + 1 != count:
            return Refusal(
                errors.INVALID_RECORD,
                f"record batch spans offsets 0..{last_delta} but holds {count} records",
                validated=True,
            )
        if attributes & CONTROL_MASK:
            return Refusal(errors.INVALID_RECORD, "clients are not allowed to write control records", validated=True)
        if h.producer_id >= 0 and h.base_sequence < 0:
            return Refusal(
                errors.INVALID_RECORD,
                f"invalid sequence number {h.base_sequence} for producer {h.producer_id}",
                validated=True,
            )
        refusal = _check_records(view, pos, size, attributes & COMPRESSION_MASK, count, target)
        if refusal is not None:
            return refusal
        if rules.compacted:
            refusal = _check_keys(view[pos : pos + size])
            if refusal is not None:
                return refusal
        if check_ts and (before_max < _LONG_MAX or h.max_timestamp > now + after_max):
            refusal = _check_timestamps(view[pos : pos + size], now, before_max, after_max)
            if refusal is not None:
                return refusal
        header = h
        # not covered by the CRC; every entry here is a whole v2 batch (the frames' or the reader's checks, or
        # up-converted), so set_partition_leader_epoch's checks are not repeated per partition
        _I32.pack_into(view, pos + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
    if target is not None and any(
        view[e.position + ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK != target for e in entries
    ):
        recompressed = _recompress(view, entries, target)
        if isinstance(recompressed, Refusal):
            return recompressed
        buf = recompressed
        if len(entries) == 1:
            header = read_header(buf, 0)
    if len(buf) > rules.segment_bytes:
        # Kafka's log refuses records that would not fit in one segment, after validating them, whatever their
        # producer state; with no custom message, and the log start offset unknown (-1)
        return Refusal(
            errors.RECORD_LIST_TOO_LARGE,
            f"{len(buf)} bytes of records are larger than the topic's segment size {rules.segment_bytes}",
        )
    if len(entries) > 1 or header is None or header.producer_id < 0:
        header = None  # only v3+ single-batch requests are idempotent
    return tuple.__new__(Accepted, (buf, header))  # (Accepted() is slower, per partition of every request)


def _check_records(view, pos: int, size: int, codec: int, count: int, target: int | None) -> Refusal | None:
    """Every record of the batch readable, as Kafka's LogValidator reads each batch's records on produce
    (decompressing a compressed one): Kafka's code for what it cannot read (``walk.unreadable``), no message,
    as Kafka sends none for these."""
    section = view[pos + RECORDS_OFFSET : pos + size]
    if codec == 0:
        problem = unreadable(section.tobytes(), count, BUFFER)
    else:
        try:
            # Kafka streams the decompression without a cap; the cap here keeps one batch's memory bounded
            data = decompress(codec, section)
        except CorruptRecordError as exc:
            # Kafka: an IOException of the decompressing stream, which it answers as UNKNOWN_SERVER_ERROR
            return Refusal(
                errors.UNKNOWN_SERVER_ERROR, f"cannot decompress record batch at byte {pos}: {exc}", validated=True
            )
        problem = unreadable(data, count, SKIP if target is None or target == codec else WHOLE)
    if problem is None:
        return None
    return Refusal(problem[0], f"record batch at byte {pos}: {problem[1]}", validated=True)


def _check_keys(batch) -> Refusal | None:
    """Kafka's LogValidator for a compacted topic: a record without a key is refused (INVALID_RECORD, a record
    error per such record); the log cleaner could not keep it."""
    try:
        records = RecordBatch(batch).records()
        bad = tuple(
            (index, "Compacted topic cannot accept message without key.")
            for index, r in enumerate(records)
            if r.key is None
        )
    except CorruptRecordError as exc:
        return Refusal(errors.CORRUPT_MESSAGE, str(exc))
    if bad:
        return Refusal(
            errors.INVALID_RECORD,
            f"{len(bad)} record(s) without a key for a compacted topic",
            validated=True,
            record_errors=bad,
        )
    return None


def _check_timestamps(batch, now: int, before_max: int, after_max: int) -> Refusal | None:
    """Every record's CreateTime within [now - before_max, now + after_max]; else a Refusal naming each
    record outside (Kafka's record errors: the record's index in the batch and why)."""
    lo = now - before_max if before_max < _LONG_MAX else _LONG_MIN
    hi = now + after_max if after_max < _LONG_MAX else _LONG_MAX
    try:
        records = list(RecordBatch(batch).records())
    except CorruptRecordError as exc:
        return Refusal(errors.CORRUPT_MESSAGE, str(exc))
    bad = tuple(
        (index, f"record {index} has timestamp {r.timestamp}, outside the accepted range [{lo}, {hi}]")
        for index, r in enumerate(records)
        if r.timestamp >= 0 and not lo <= r.timestamp <= hi
    )
    if bad:
        return Refusal(
            errors.INVALID_TIMESTAMP,
            f"{len(bad)} record(s) with a timestamp outside [{lo}, {hi}]",
            answer="records refused: their timestamps are outside the range the topic accepts",
            validated=True,
            record_errors=bad,
        )
    return None


def _recompress(view, entries, target: int) -> bytearray | Refusal:
    """The batches rewritten with the topic's codec, as Kafka rewrites them (producer id, epoch, sequence and
    timestamps kept)."""
    out = bytearray()
    for e in entries:
        b = RecordBatch(view[e.position : e.position + e.size])
        if b.compression_id == target:
            out += b.buffer
            continue
        try:
            records = b.decode_records()
        except CorruptRecordError as exc:
            return Refusal(errors.CORRUPT_MESSAGE, str(exc))
        out += build_batch(
            records,
            compression=target,
            base_offset=0,
            producer_id=b.producer_id,
            producer_epoch=b.producer_epoch,
            base_sequence=b.base_sequence,
            transactional=b.is_transactional,
            timestamp_type=b.timestamp_type,
            partition_leader_epoch=b.partition_leader_epoch,
            base_timestamp=b.base_timestamp,
        )
    return out
