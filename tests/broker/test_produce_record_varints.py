"""Varints inside a record's headers are read as Kafka 4.4 reads them on produce: an int varint (the header
count, a header key or value length) of more than 5 bytes makes the batch INVALID_RECORD, a longer but
legal form (padded to 5 bytes) is accepted. Both through the broker's quick checks (a few records: the
per-record walk; many: the bulk tables) and compressed, each compared with the reference Kafka.
"""

from __future__ import annotations

from .reference import reference_client
from .test_produce_unreadable_records import LZ4, answered_as_kafka, batch, zz


def padded(n: int, width: int) -> bytes:
    """``n`` as a zigzag varint of exactly ``width`` bytes (continuation bytes of zeros)."""
    plain = zz(n)
    return plain[:-1] + bytes((plain[-1] | 0x80,)) + b"\x80" * (width - len(plain) - 1) + b"\x00"


def record(i: int, header_count: bytes = b"\x00", header: bytes = b"") -> bytes:
    value = b"v%d" % i
    body = b"\0" + zz(0) + zz(i) + zz(1) + b"k" + zz(len(value)) + value + header_count + header
    return zz(len(body)) + body


def section(count: int, flawed: int, header_count: bytes, header: bytes = b"") -> bytes:
    return b"".join(record(i, header_count, header) if i == flawed else record(i) for i in range(count))


HEADER = zz(1) + b"h" + zz(1) + b"x"


def cases() -> list[tuple[str, bytes]]:
    out = []
    for count in (2, 40):  # the per-record walk, and the bulk tables
        for codec, name in ((0, "uncompressed"), (LZ4, "lz4")):
            tail = f"{count} records, {name}"
            out += [
                (f"header count 0 in 5 bytes, {tail}", batch(section(count, 1, padded(0, 5)), count, codec)),
                (f"header count 0 in 6 bytes, {tail}", batch(section(count, 1, padded(0, 6)), count, codec)),
                (f"header count 1 in 6 bytes, {tail}", batch(section(count, 1, padded(1, 6), HEADER), count, codec)),
                (
                    f"header key length in 6 bytes, {tail}",
                    batch(section(count, 1, zz(1), padded(1, 6) + b"h" + zz(1) + b"x"), count, codec),
                ),
                (
                    f"header value length in 6 bytes, {tail}",
                    batch(section(count, 1, zz(1), zz(1) + b"h" + padded(1, 6) + b"x"), count, codec),
                ),
                (
                    f"header value length in 5 bytes, {tail}",
                    batch(section(count, 1, zz(1), zz(1) + b"h" + padded(1, 5) + b"x"), count, codec),
                ),
            ]
    return out


def test_header_varints_read_as_kafka(client, reference_kafka):
    ref = reference_client(reference_kafka)
    try:
        codes = dict(answered_as_kafka(client, ref, "header-varints", cases())[2])
        # what the reference answered, for the reader (the comparison above is the test)
        assert sorted(set(codes.values())) == [0, 87], codes
        assert sum(code == 0 for code in codes.values()) == 8, codes  # the 5-byte forms
    finally:
        ref.close()
