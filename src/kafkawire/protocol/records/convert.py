"""Conversion between legacy message sets (magic 0/1) and v2 batches.

Down-conversion follows Kafka's ``RecordsUtil.downConvert`` so an old
consumer gets what a Java broker would send it: control batches are dropped,
headers are dropped, a compressed batch becomes one compressed wrapper with
the same codec, an uncompressed batch becomes one message per record, and
entries already at or below the target magic are copied as they are.

Up-conversion keeps offsets (v2 offset deltas may have gaps): each
compressed wrapper becomes one batch with its codec, and runs of uncompressed
messages become one uncompressed batch.
"""

from __future__ import annotations

from .batch import RecordBatch
from .builder import BatchBuilder, _append_all
from .codecs import DEFAULT_MAX_DECOMPRESSED_SIZE
from .errors import UnsupportedCodecError
from .legacy import LegacyBatch, build_message_set
from .model import CREATE_TIME, LOG_APPEND_TIME, Compression, TimestampType
from .reader import BatchReader


def batches_to_message_set(
    buf,
    magic: int,
    *,
    first_offset: int = 0,
    compression: Compression | int | str | None = None,
    check_crc: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Down-convert the complete entries of ``buf`` to ``magic`` 0 or 1.

    ``first_offset``: records of uncompressed batches below it are left out
    (a fetch that starts inside a batch).  ``compression=None`` keeps each
    batch's codec; zstd cannot be kept (magic < 2 has no zstd), so it raises
    :class:`UnsupportedCodecError` unless another codec is given.
    """
    if magic not in (0, 1):
        raise ValueError(f"target magic must be 0 or 1, not {magic}")
    override = None if compression is None else Compression.parse(compression)
    out = []
    for entry in BatchReader(buf, check_crc=check_crc):
        if entry.is_control:
            continue
        codec = entry.compression
        if entry.magic <= magic:
            out.append(entry.buffer)
            continue
        target_codec = codec if override is None else override
        if target_codec == Compression.ZSTD:
            raise UnsupportedCodecError(
                4,
                base_offset=entry.base_offset if entry.magic == 2 else entry.offset,
                position=entry.position,
                problem=f"zstd-compressed batches cannot be down-converted to magic {magic}",
            )
        records = entry.decode_records(max_decompressed_size=max_decompressed_size)
        if codec == Compression.NONE:
            records = [r for r in records if r.offset >= first_offset]
        if not records:
            continue
        ts_type = entry.timestamp_type
        out.append(
            build_message_set(
                [r._replace(headers=[]) if r.headers else r for r in records],
                magic,
                target_codec,
                timestamp_type=ts_type if ts_type != TimestampType.NO_TIMESTAMP_TYPE else CREATE_TIME,
                log_append_time=entry.max_timestamp if ts_type == LOG_APPEND_TIME else None,
            )
        )
    return b"".join(out)


def message_set_to_batches(
    buf,
    *,
    compression: Compression | int | str | None = None,
    check_crc: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Up-convert the complete entries of ``buf`` to v2 batches (v2 entries are copied as they are).

    Offsets, keys, values and timestamps are kept (magic 0 messages have no
    timestamp: -1).  A LOG_APPEND_TIME wrapper becomes a LOG_APPEND_TIME batch.
    ``compression=None`` keeps each wrapper's codec (and leaves uncompressed
    messages uncompressed); otherwise every new batch uses ``compression``.
    """
    override = None if compression is None else Compression.parse(compression)
    out: list = []
    run: list = []  # pending uncompressed legacy records
    run_key = None  # (timestamp type, log-append timestamp) shared by the run

    def flush_run():
        nonlocal run, run_key
        if run:
            ts_type, lat = run_key
            out.append(_batch(run, override or Compression.NONE, ts_type, lat, partition_leader_epoch))
        run = []
        run_key = None

    for entry in BatchReader(buf, check_crc=check_crc):
        if isinstance(entry, RecordBatch):
            flush_run()
            out.append(entry.buffer)
            continue
        assert isinstance(entry, LegacyBatch)
        ts_type = LOG_APPEND_TIME if entry.timestamp_type == LOG_APPEND_TIME else CREATE_TIME
        lat = entry.timestamp if ts_type == LOG_APPEND_TIME else None
        records = entry.decode_records(max_decompressed_size=max_decompressed_size)
        if entry.is_compressed:
            flush_run()
            codec = entry.compression if override is None else override
            out.append(_batch(records, codec, ts_type, lat, partition_leader_epoch))
            continue
        key = (ts_type, lat)
        if run and (key != run_key or records[0].offset <= run[-1].offset):
            flush_run()
        run_key = key
        run.extend(records)
    flush_run()
    return b"".join(out)


def _batch(records, codec, ts_type, log_append_time, partition_leader_epoch) -> bytes:
    builder = BatchBuilder(
        compression=codec,
        base_offset=records[0].offset,
        timestamp_type=ts_type,
        log_append_time=log_append_time,
        partition_leader_epoch=partition_leader_epoch,
    )
    _append_all(builder, records)
    return builder.build()
