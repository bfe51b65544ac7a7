"""The read-back check itself must fail on every kind of damage a broker could do (no broker needed)."""

from __future__ import annotations

import dataclasses

import pytest

from .peer_harness import Rec, assert_readback, make_records


def perfect(records):
    offsets = {}
    got, delivered = [], []
    for r in records:
        o = offsets.get(r.partition, 0)
        offsets[r.partition] = o + 1
        got.append((o, r))
        delivered.append((r.partition, o))
    return got, delivered


RECORDS = make_records(60, 3, seed=11)


def test_the_record_set_is_varied():
    assert any(r.key is None for r in RECORDS)
    assert any(r.value is None for r in RECORDS)
    assert any(r.value == b"" for r in RECORDS)
    assert any(any(v is None for _, v in r.headers) for r in RECORDS)
    assert any(len({k for k, _ in r.headers}) < len(r.headers) for r in RECORDS)  # duplicate header keys
    assert len({r.partition for r in RECORDS}) == 3
    assert len({r.timestamp for r in RECORDS}) == len(RECORDS)


def test_accepts_an_exact_read_back_in_any_interleaving_of_partitions():
    got, delivered = perfect(RECORDS)
    assert_readback(RECORDS, got, delivered=delivered)
    assert_readback(RECORDS, sorted(got, key=lambda g: (g[1].partition, g[0])), delivered=delivered)


def _damaged(kind):
    got, delivered = perfect(RECORDS)
    first_p0 = next(i for i, (_, r) in enumerate(got) if r.partition == 0)
    second_p0 = next(i for i, (_, r) in enumerate(got) if r.partition == 0 and i > first_p0)
    o, r = got[first_p0]
    if kind == "missing":
        del got[first_p0]
    elif kind == "duplicated":
        got.append((max(off for off, rec in got if rec.partition == 0) + 1, r))
    elif kind == "reordered":
        (o1, r1), (o2, r2) = got[first_p0], got[second_p0]
        got[first_p0], got[second_p0] = (o1, r2), (o2, r1)
    elif kind == "offset-gap":
        got = [(off + 1 if rec.partition == 0 and off >= 3 else off, rec) for off, rec in got]
    elif kind == "wrong-delivery-offset":
        delivered[first_p0] = (0, 5)
    else:
        field, value = {
            "key": ("key", b"other"),
            "value": ("value", b"other"),
            "null-value": ("value", None),
            "headers": ("headers", ()),
            "header-order": ("headers", tuple(reversed(r.headers)) or (("x", b""),)),
            "timestamp": ("timestamp", r.timestamp + 1),
            "partition": ("partition", 1),
        }[kind]
        if getattr(r, field) == value:
            value = {"timestamp": r.timestamp + 7, "headers": (("x", b""),), "partition": 2}.get(field, b"changed")
        got[first_p0] = (o, dataclasses.replace(r, **{field: value}))
    return got, delivered


@pytest.mark.parametrize(
    "kind",
    [
        "missing",
        "duplicated",
        "reordered",
        "offset-gap",
        "wrong-delivery-offset",
        "key",
        "value",
        "null-value",
        "headers",
        "header-order",
        "timestamp",
        "partition",
    ],
)
def test_rejects_damage(kind):
    got, delivered = _damaged(kind)
    with pytest.raises(AssertionError, match="read-back does not match"):
        assert_readback(RECORDS, got, delivered=delivered)


def test_rejects_a_surplus_record_from_an_unknown_partition():
    got, delivered = perfect(RECORDS)
    got.append((0, Rec(7, b"k", b"v", (), 1)))
    with pytest.raises(AssertionError, match="nobody produced"):
        assert_readback(RECORDS, got, delivered=delivered)
