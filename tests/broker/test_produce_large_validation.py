"""Large lz4 Produce records on the segments engine (>= OFFLOAD_APPEND_BYTES: appended in the storage threads)
answer as the event loop's own path does: the same refusals (code, message, record errors, log start offset,
log line) as the in-memory engine's, answers in request order after the append, idempotent sequences checked
in order, and a request-level refusal before anything is appended."""

from __future__ import annotations

import logging
import random
import re
import struct

import pytest

from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.handlers.produce import OFFLOAD_APPEND_BYTES
from kafkawire.broker.server import start_in_thread
from kafkawire.protocol import errors
from kafkawire.protocol.records.batch import RECORDS_OFFSET
from kafkawire.protocol.records.builder import build_batch
from kafkawire.protocol.records.crc import crc32c

from .conftest import RawClient, msg
from .helpers import batch, create_topic, produce_request, produce_request_of
from .test_admin import list_offsets

COUNT = 2000  # records of 100 random bytes: an lz4 batch of ~220 KB, above OFFLOAD_APPEND_BYTES
CRC_AT, ATTRIBUTES_AT = 17, 21


def _values(seed: int = 7, count: int = COUNT) -> list[bytes]:
    rnd = random.Random(seed)
    return [rnd.randbytes(100) for _ in range(count)]


def _large(**kw) -> bytes:
    records = batch(_values(), compression="lz4", **kw)
    assert len(records) >= OFFLOAD_APPEND_BYTES
    return records


def _recrc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, CRC_AT, crc32c(bytes(buf[ATTRIBUTES_AT:])))
    return bytes(buf)


def _bad_crc() -> bytes:
    buf = bytearray(_large())
    buf[len(buf) // 2] ^= 0xFF
    return bytes(buf)


def _bad_lz4() -> bytes:
    # not an lz4 frame (its magic number zeroed), the CRC made right: only decompressing finds it
    buf = bytearray(_large())
    buf[RECORDS_OFFSET : RECORDS_OFFSET + 4] = bytes(4)
    return _recrc(buf)


def _no_keys() -> bytes:
    return _large()  # batch() writes null keys: refused by a compacted topic, one record error per record


def _timestamped() -> bytes:
    # CreateTime timestamps of 1970: before what message.timestamp.before.max.ms accepts, a record error each
    records = build_batch([(None, v, [], 1_000 + i) for i, v in enumerate(_values())], compression="lz4")
    assert len(records) >= OFFLOAD_APPEND_BYTES
    return records


# (name, topic configs, records, expected code)
REFUSALS = [
    ("crc", {}, _bad_crc, errors.CORRUPT_MESSAGE),
    ("lz4", {}, _bad_lz4, errors.UNKNOWN_SERVER_ERROR),
    ("keys", {"cleanup.policy": "compact"}, _no_keys, errors.INVALID_RECORD),
    ("timestamps", {"message.timestamp.before.max.ms": "60000"}, _timestamped, errors.INVALID_TIMESTAMP),
    ("size", {"max.message.bytes": str(OFFLOAD_APPEND_BYTES)}, _large, errors.MESSAGE_TOO_LARGE),
]


def _start(tmp_path, storage: str):
    if storage == "memory":
        return start_in_thread(BrokerConfig(port=0, storage="memory"))
    # acks.all.fsync off: only the size of the records sends them to the storage threads
    return start_in_thread(
        BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data"), acks_all_fsync=False)
    )


@pytest.fixture
def segments_broker(tmp_path):
    b = _start(tmp_path, "segments")
    try:
        yield b
    finally:
        b.stop()


def _answer(pr) -> tuple:
    return (
        pr.error_code,
        pr.error_message,
        pr.base_offset,
        pr.log_append_time_ms,
        pr.log_start_offset,
        [(e.batch_index, e.batch_index_error_message) for e in pr.record_errors],
    )


def _now_masked(value):
    # the accepted timestamp range is computed from the broker's clock: the same text but for those numbers
    return re.sub(r"\d{12,}", "<ms>", repr(value))


@pytest.mark.parametrize("name,configs,make,code", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_large_refusals_answer_and_log_as_checks_on_the_event_loop_do(tmp_path, caplog, name, configs, make, code):
    """The memory engine appends every batch on the event loop; the segments engine appends these large ones in
    a storage thread: the producer's answer and the broker's log line are the same."""
    records = make()
    seen = {}
    for storage in ("memory", "segments"):
        b = _start(tmp_path, storage)
        c = RawClient(b.address, timeout=30)
        try:
            create_topic(c, "refused", configs=configs)
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                pr = c.call(produce_request("refused", 0, records, acks=1), 9).responses[0].partition_responses[0]
                lines = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
            assert list_offsets(c, "refused", -1).offset == 0  # nothing appended
            # a good batch after the refused one is appended at offset 0
            good = build_batch([(b"key", b"v")] * 3)
            after = c.call(produce_request("refused", 0, good, acks=1), 9).responses[0].partition_responses[0]
            assert (after.error_code, after.base_offset) == (0, 0)
        finally:
            c.close()
            b.stop()
        seen[storage] = (_answer(pr), lines)
    answer, lines = seen["segments"]
    assert answer[0] == code
    assert len(lines) == 1 and "refused-0" in lines[0]
    assert _now_masked(seen["segments"]) == _now_masked(seen["memory"])


def test_pipelined_large_refused_and_small_batches_answer_in_order(segments_broker):
    c = RawClient(segments_broker.address, timeout=30)
    try:
        create_topic(c, "mixed")
        sent = [("large", _large()), ("refused", _bad_crc()), ("small", batch([b"s"] * 5)), ("large", _large())]
        cids = [c.send(produce_request("mixed", 0, records, acks=1), 9) for _, records in sent]
        answers = [c.recv(0, 9, cid).responses[0].partition_responses[0] for cid in cids]  # checks the order
        assert [(a.error_code, a.base_offset) for a in answers] == [
            (0, 0),
            (errors.CORRUPT_MESSAGE, -1),
            (0, COUNT),
            (0, COUNT + 5),
        ]
        assert list_offsets(c, "mixed", -1).offset == 2 * COUNT + 5
    finally:
        c.close()


def test_pipelined_large_idempotent_batches_are_checked_in_order(segments_broker):
    c = RawClient(segments_broker.address, timeout=30)
    try:
        create_topic(c, "idem")
        init = c.call(msg("InitProducerIdRequest", transactional_id=None, transaction_timeout_ms=60000), 4)
        pid, epoch = init.producer_id, init.producer_epoch
        seqs = [0, COUNT, COUNT, 3 * COUNT, 2 * COUNT]  # next, duplicate of the last, a gap, next
        cids = [
            c.send(
                produce_request("idem", 0, _large(producer_id=pid, producer_epoch=epoch, base_sequence=s), acks=1), 9
            )
            for s in seqs
        ]
        answers = [c.recv(0, 9, cid).responses[0].partition_responses[0] for cid in cids]
        assert [(a.error_code, a.base_offset) for a in answers] == [
            (0, 0),
            (0, COUNT),
            (0, COUNT),  # the retried batch: its first offsets, nothing appended
            (errors.OUT_OF_ORDER_SEQUENCE_NUMBER, -1),
            (0, 2 * COUNT),
        ]
        assert list_offsets(c, "idem", -1).offset == 3 * COUNT
    finally:
        c.close()


def test_a_request_level_refusal_appends_no_large_partition(segments_broker):
    c = RawClient(segments_broker.address, timeout=30)
    try:
        create_topic(c, "whole", partitions=2)
        framing_error = struct.pack(">qi", 0, 3) + b"\x00" * 20  # an entry shorter than any batch
        res = c.call(produce_request_of({"whole": [_large(), framing_error]}, acks=1), 9)
        answers = res.responses[0].partition_responses
        assert [a.error_code for a in answers] == [errors.CORRUPT_MESSAGE] * 2
        assert list_offsets(c, "whole", -1).offset == 0
    finally:
        c.close()
