"""What a leader checks of a producer's records (records.validation), without a broker: each refusal with
Kafka's code and whether it is a check of the batch's contents (``validated``), and what an accepted buffer
looks like (leader epoch set, the topic's codec, the idempotent producer's header)."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from kafkawire.protocol import errors
from kafkawire.protocol.records import RecordBatch, build_batch, build_message_set, iter_batches
from kafkawire.protocol.records.validation import (
    Accepted,
    Refusal,
    TopicRules,
    check_format,
    has_transactional_batch,
    request_refusal,
    validate,
)

TS = 1_700_000_000_000
RULES = TopicRules(max_message_bytes=1_048_588)


def batch(n=3, ts=TS, **kw):
    return build_batch([(b"k", b"v%d" % i, [], ts + i) for i in range(n)], **kw)


def patched(data, offset, fmt, value, fix_crc=True):
    data = bytearray(data)
    struct.pack_into(fmt, data, offset, value)
    if fix_crc:
        struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def run(records, version=11, rules=RULES, now=TS, epoch=0):
    found = check_format(records, version)
    if found is None or isinstance(found, Refusal):
        return found
    return validate(records, found, version, rules, now, epoch)


def test_a_good_batch_is_accepted_with_the_leader_epoch_set_and_its_crc_intact():
    result = run(batch(), epoch=7)
    assert isinstance(result, Accepted)
    (only,) = iter_batches(result.buffer)
    assert only.partition_leader_epoch == 7
    assert only.crc_ok
    assert [r.value for r in only.records()] == [b"v0", b"v1", b"v2"]
    assert result.idempotent is None  # no producer id


def test_an_idempotent_batch_hands_back_its_header_by_name():
    result = run(batch(producer_id=42, producer_epoch=3, base_sequence=10))
    assert isinstance(result, Accepted)
    h = result.idempotent
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.record_count, h.max_timestamp) == (42, 3, 10, 3, TS + 2)


@pytest.mark.parametrize(
    "records, version, code, validated",
    [
        (b"", 11, errors.INVALID_RECORD, False),
        (batch()[:-5], 11, errors.INVALID_RECORD, False),  # no whole batch
        (build_message_set([(b"k", b"v", [], TS)], magic=1), 3, errors.INVALID_RECORD, False),
        (batch(compression="zstd"), 6, errors.UNSUPPORTED_COMPRESSION_TYPE, False),
        (batch(1) + batch(1), 11, errors.INVALID_RECORD, False),
        (patched(batch(), 0, ">q", 5, fix_crc=False), 11, errors.INVALID_RECORD, True),  # base offset not 0
        (batch()[:-1] + bytes([batch()[-1] ^ 0xFF]), 11, errors.CORRUPT_MESSAGE, False),  # CRC
        (patched(batch(), 22, ">B", 0x05), 11, errors.UNKNOWN_SERVER_ERROR, True),  # codec 5
        (patched(batch(), 57, ">i", 0), 11, errors.INVALID_RECORD, True),  # record count
        (patched(batch(), 57, ">i", 4), 11, errors.INVALID_RECORD, True),  # count and last offset delta disagree
        (patched(batch(), 22, ">B", 0x20), 11, errors.INVALID_RECORD, True),  # a control batch from a client
        (batch(producer_id=5, producer_epoch=0), 11, errors.INVALID_RECORD, True),  # producer id, no sequence
    ],
    ids=[
        "empty",
        "partial",
        "magic 1 at v3",
        "zstd before v7",
        "two batches",
        "base offset",
        "crc",
        "unknown codec",
        "no records",
        "count mismatch",
        "control",
        "no sequence",
    ],
)
def test_refusals_carry_kafkas_code_and_where_it_was_found(records, version, code, validated):
    result = run(records, version)
    assert isinstance(result, Refusal)
    assert (result.code, result.validated) == (code, validated), result.message


def test_nothing_to_append_before_v3_is_not_an_error():
    assert check_format(b"", 2) is None
    assert check_format(batch()[:-5], 2) is None


def test_a_batch_larger_than_the_topic_allows_is_refused():
    data = batch()
    result = run(data, rules=TopicRules(max_message_bytes=len(data) - 1))
    assert isinstance(result, Refusal) and result.code == errors.MESSAGE_TOO_LARGE


def test_trailing_bytes_after_the_last_whole_batch_are_dropped():
    data = batch()
    result = run(data + b"\x00\x01\x02")
    assert isinstance(result, Accepted) and len(result.buffer) == len(data)


def test_an_old_message_set_is_up_converted():
    result = run(build_message_set([(b"k", b"old", [], TS)], magic=1), version=2)
    assert isinstance(result, Accepted)
    (only,) = iter_batches(result.buffer)
    assert only.magic == 2 and [r.value for r in only.records()] == [b"old"]


def test_timestamps_outside_the_topics_range_are_refused_one_record_error_each():
    rules = TopicRules(
        max_message_bytes=RULES.max_message_bytes, timestamp_before_max_ms=1000, timestamp_after_max_ms=1000
    )
    data = build_batch([(b"k", b"a", [], TS - 5000), (b"k", b"b", [], TS), (b"k", b"c", [], TS + 5000)])
    result = run(data, rules=rules)
    assert isinstance(result, Refusal)
    assert (result.code, result.validated) == (errors.INVALID_TIMESTAMP, True)
    assert [index for index, _ in result.record_errors] == [0, 2]
    assert result.answer is not None
    assert isinstance(
        run(
            data,
            rules=TopicRules(
                max_message_bytes=RULES.max_message_bytes,
                timestamp_type="LogAppendTime",
                timestamp_before_max_ms=1000,
                timestamp_after_max_ms=1000,
            ),
        ),
        Accepted,
    )


def test_the_topics_codec_replaces_the_producers_keeping_producer_fields():
    rules = TopicRules(max_message_bytes=RULES.max_message_bytes, compression_type="gzip")
    result = run(batch(producer_id=9, producer_epoch=1, base_sequence=4), rules=rules, epoch=2)
    assert isinstance(result, Accepted)
    only = RecordBatch.from_bytes(result.buffer)
    assert only.compression_id == 1 and only.crc_ok
    assert (only.producer_id, only.producer_epoch, only.base_sequence, only.partition_leader_epoch) == (9, 1, 4, 2)
    assert [r.value for r in only.records()] == [b"v0", b"v1", b"v2"]
    assert result.idempotent.producer_id == 9 and result.idempotent.crc == only.crc


def test_a_framing_error_anywhere_fails_the_request_with_its_message():
    bad = patched(batch(), 16, ">b", 3, fix_crc=False)
    refusal = request_refusal([batch(), bad], transactional_id=None)
    assert refusal.code == errors.CORRUPT_MESSAGE and "magic 3" in refusal.answer
    assert request_refusal([batch(), None, b""], transactional_id=None) is None


def test_transactional_records_need_a_transactional_id():
    txn = batch(producer_id=3, producer_epoch=0, base_sequence=0, transactional=True)
    refusal = request_refusal([txn], transactional_id=None)
    assert refusal.code == errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED and refusal.answer is None
    assert request_refusal([txn], transactional_id="t") is None
    assert has_transactional_batch(txn, check_format(txn, 11))
    assert not has_transactional_batch(batch(), check_format(batch(), 11))
    flag_only = batch(transactional=True)  # the flag without a producer id is appended as any batch
    assert not has_transactional_batch(flag_only, check_format(flag_only, 11))
