"""Kafka record batches and message sets, sans-IO: bytes in, bytes out.

Reading::

    reader = iter_batches(fetch_payload)          # zero-copy views
    for batch in reader:                          # RecordBatch (v2) or LegacyBatch (v0/v1)
        batch.validate_crc()                      # header + CRC only, no decoding
        for record in batch.records():            # decoded (and decompressed) on demand
            ...
    reader.partial_tail_bytes                     # a cut-off batch at the end is not an error

Writing::

    build_batch([(b"key", b"value", [("h", b"v")], 1700000000000)], compression="lz4")
    build_control_batch(ControlRecordType.COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=3)
    build_message_set(records, magic=1, compression="gzip")

Every problem with the bytes raises :class:`CorruptRecordError` (a
``ValueError``) naming the batch's base offset and byte position.
"""

from .batch import (
    HEADER_SIZE,
    RecordBatch,
    header_summary,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from .builder import BatchBuilder, build_batch, estimate_record_size
from .codecs import DEFAULT_MAX_DECOMPRESSED_SIZE, codec_available, compress, decompress
from .control import build_control_batch, build_end_txn_marker, decode_control_record
from .convert import batches_to_message_set, message_set_to_batches
from .errors import (
    CodecUnavailableError,
    CorruptRecordError,
    CrcMismatchError,
    DecompressionLimitError,
    UnsupportedCodecError,
)
from .legacy import LegacyBatch, build_message_set, iter_message_set
from .model import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    Compression,
    ControlRecord,
    ControlRecordType,
    Record,
    TimestampType,
)
from .reader import BatchReader, assign_offsets, iter_batches, iter_records

__all__ = [
    "BatchBuilder",
    "BatchReader",
    "CREATE_TIME",
    "CodecUnavailableError",
    "Compression",
    "ControlRecord",
    "ControlRecordType",
    "CorruptRecordError",
    "CrcMismatchError",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "DecompressionLimitError",
    "HEADER_SIZE",
    "LOG_APPEND_TIME",
    "LegacyBatch",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "Record",
    "RecordBatch",
    "TimestampType",
    "UnsupportedCodecError",
    "assign_offsets",
    "batches_to_message_set",
    "build_batch",
    "build_control_batch",
    "build_end_txn_marker",
    "build_message_set",
    "codec_available",
    "compress",
    "decode_control_record",
    "decompress",
    "estimate_record_size",
    "header_summary",
    "iter_batches",
    "iter_message_set",
    "iter_records",
    "message_set_to_batches",
    "set_base_offset",
    "set_max_timestamp",
    "set_partition_leader_epoch",
]
