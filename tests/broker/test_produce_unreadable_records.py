"""A v2 batch whose CRC is right but whose records cannot be read is refused as Kafka 4.4 refuses it, and
nothing of it is kept.

Kafka reads every record of every batch a producer sends (decompressing a compressed one) before it appends.
What it answers depends on where its reading fails: reading an uncompressed section, a record's length
varint longer than 5 bytes escapes as an exception it does not map (UNKNOWN_SERVER_ERROR), any other flaw
(the section ending early included) is INVALID_RECORD; a compressed section that does not decompress is
UNKNOWN_SERVER_ERROR (an IOException), a decompressed one that does not read is INVALID_RECORD. Each case
goes to partition 0 of a request whose partition 1 holds a good batch, on kafkawire and on the reference
Kafka, and both answers must be the same; afterwards partition 0 holds only the good batches.
"""

from __future__ import annotations

import struct

from kafkawire.protocol import errors
from kafkawire.protocol.records import Compression
from kafkawire.protocol.records.codecs import compress

from .helpers import create_topic, fetch_request, produce_request, produce_request_of, values_of
from .reference import produce_when_led, reference_client, unique, wait_for_topic
from .test_produce_as_kafka import records, recrc

TS = 1_700_000_000_000
HEADER = struct.Struct(">qiibIhiqqqhii")
LZ4, GZIP = int(Compression.LZ4), int(Compression.GZIP)


def zz(n: int) -> bytes:
    """A zigzag varint."""
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while u >= 0x80:
        out.append(u & 0x7F | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def record(i: int, headers=((b"h", b"x"),), header_count: int | None = None) -> bytes:
    value = b"v%d" % i
    body = (
        b"\0"
        + zz(i)  # timestamp delta
        + zz(i)  # offset delta
        + zz(1)
        + b"k"
        + zz(len(value))
        + value
        + zz(len(headers) if header_count is None else header_count)
        + b"".join(zz(len(k)) + k + zz(len(v)) + v for k, v in headers)
    )
    return zz(len(body)) + body


def batch(section: bytes, count: int, codec: int = 0) -> bytes:
    """A v2 batch around a records section as given (compressed with ``codec`` unless already), CRC right."""
    data = compress(codec, section) if codec else section
    return batch_raw(data, count, codec)


def batch_raw(data: bytes, count: int, codec: int) -> bytes:
    head = HEADER.pack(0, 49 + len(data), 0, 2, 0, codec, count - 1, TS, TS + count - 1, -1, -1, -1, count)
    return recrc(head + data)


TWO = record(0) + record(1)


def cases() -> list[tuple[str, bytes]]:
    return [
        ("good, uncompressed (the builder is right)", batch(TWO, 2)),
        ("good, lz4", batch(TWO, 2, LZ4)),
        ("garbage, uncompressed", batch(b"\xff" * 24, 1)),
        ("garbage, lz4", batch_raw(b"\xff" * 24, 1, LZ4)),
        ("garbage, gzip", batch_raw(b"\xff" * 24, 1, GZIP)),
        ("truncated records, uncompressed", batch(TWO[:-3], 2)),
        ("truncated records, lz4", batch_raw(compress(LZ4, TWO)[:-6], 2, LZ4)),
        ("header count says 2 of 1, uncompressed", batch(record(0, header_count=2) + record(1), 2)),
        ("header count says 2 of 1, lz4", batch(record(0, header_count=2) + record(1), 2, LZ4)),
        ("record count says 3 of 2, uncompressed", batch(TWO, 3)),
        ("record count says 1 of 2, uncompressed", batch(TWO, 1)),
        ("record count says 3 of 2, lz4", batch(TWO, 3, LZ4)),
        ("record count says 1 of 2, lz4", batch(TWO, 1, LZ4)),
        ("a record's length varint of 6 bytes, uncompressed", batch(b"\x80" * 5 + b"\x00" + TWO, 1)),
    ]


def ask(client, topic: str, data: bytes):
    body = produce_request_of({topic: [data, records(1)]})
    res = client.call(body, 11)
    return sorted(
        (p.index, p.error_code, p.base_offset, p.log_start_offset, p.error_message is None, len(p.record_errors))
        for p in res.responses[0].partition_responses
    )


def kept(client, topic: str) -> list:
    res = client.call(fetch_request([(topic, 0, 0)]), 12)
    return values_of(res.responses[0].partitions[0].records)


def answered_as_kafka(client, ref, name: str, labelled) -> tuple[str, str, list[tuple[str, int]]]:
    """Two-partition topics on kafkawire and on the reference, one record in each partition, then every
    (label, batch) of ``labelled`` produced to both: the answers must be equal. Returns the two topic names and
    (label, Kafka's error code) in order."""
    ours, theirs = name, unique(name)
    create_topic(client, ours, partitions=2)
    create_topic(ref, theirs, partitions=2)
    wait_for_topic(ref, theirs)
    for p in (0, 1):
        produce_when_led(ref, produce_request(theirs, p, records(1)), 11)
        client.call(produce_request(ours, p, records(1)), 11)
    answers = []
    for label, data in labelled:
        mine, kafka = ask(client, ours, data), ask(ref, theirs, data)
        assert mine == kafka, label
        answers.append((label, kafka[0][1]))
    return ours, theirs, answers


def test_unreadable_records_refused_as_kafka(client, reference_kafka):
    ref = reference_client(reference_kafka)
    try:
        ours, theirs, answers = answered_as_kafka(client, ref, "unreadable", cases())
        codes = dict(answers)
        # what the reference answered, for the reader (the comparison above is the test)
        assert codes["garbage, uncompressed"] == errors.UNKNOWN_SERVER_ERROR
        assert codes["truncated records, uncompressed"] == errors.INVALID_RECORD
        assert sum(code == 0 for code in codes.values()) == 2, answers
        # partition 0 holds the first record and the two good batches, nothing of the refused ones
        want = [b"v0", b"v0", b"v1", b"v0", b"v1"]
        assert kept(client, ours) == want
        assert kept(ref, theirs) == want
    finally:
        ref.close()


def test_the_bulk_check_accepts_nothing_kafkas_reading_refuses():
    """The bulk check lets a section through without the record-by-record walk, so it must never pass one
    that the walk (Kafka's reading rules) refuses: every byte of a section of records with and without
    headers and of varied sizes set to each of a few values, and every truncation, in every mode."""
    from kafkawire.protocol.records.walk import BUFFER, SKIP, WHOLE, _as_kafka_reads, _well_formed

    section = b"".join(record(i, headers=() if i % 3 else ((b"h", b"x" * i),)) for i in range(40))
    section += b"".join(record(i) for i in range(40, 48))  # a run of one size
    count = 48
    assert _well_formed(section, count)
    variants = [section[:cut] for cut in range(len(section))]
    for pos in range(len(section)):
        for value in (0x00, 0x01, 0x7F, 0x80, 0xFF):
            if section[pos] != value:
                variants.append(section[:pos] + bytes((value,)) + section[pos + 1 :])
    passed = 0
    for data in variants:
        for n in (count - 1, count, count + 1):
            if _well_formed(data, n):
                passed += 1
                for mode in (BUFFER, SKIP, WHOLE):
                    assert _as_kafka_reads(data, n, mode) is None, (data.hex(), n, mode)
    assert passed  # some changes (a value byte) leave the layout intact
