"""The varint lookup tables built at import equal encoding each value one by one."""

from kafkawire.protocol.primitives import UVARINT_TABLE, uvarint_bytes
from kafkawire.protocol.records.varint import VARINT_TABLE, VARINT_TABLE_SIZE, encode_varint


def test_signed_varint_table_is_encode_varint_of_each_value():
    assert len(VARINT_TABLE) == VARINT_TABLE_SIZE
    assert VARINT_TABLE == [encode_varint(i) for i in range(VARINT_TABLE_SIZE)]


def test_unsigned_varint_table_is_uvarint_bytes_of_each_value():
    assert UVARINT_TABLE == tuple(uvarint_bytes(i) for i in range(1 << 14))
