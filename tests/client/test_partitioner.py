"""The keyed partitioner is the Java client's: murmur2 checked against kafka-clients' own Utils.murmur2."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kafkawire.client.partitioner import DefaultPartitioner, RoundRobinPartitioner, murmur2, partition_for_key

JAVA_SOURCE = Path(__file__).parent / "java" / "Murmur2Tool.java"


def _keys(n: int = 400, seed: int = 7) -> list[bytes]:
    rnd = random.Random(seed)
    keys = [b"", b"a", b"ab", b"abc", b"abcd", b"abcde", b"key-1", b"\xff\xfe\x80\x00", "üñí".encode()]
    keys += [rnd.randbytes(rnd.randrange(0, 40)) for _ in range(n)]
    keys += [b"user-%d" % i for i in range(100)]
    return keys


def test_murmur2_matches_java():
    from support.java import JavaProgram

    tool = JavaProgram.require(str(JAVA_SOURCE))
    keys = _keys()
    for n in (1, 3, 7, 64):
        out = tool.run("Murmur2Tool", str(n), input="".join(k.hex() + "\n" for k in keys))
        rows = [line.split() for line in out.splitlines()]
        assert len(rows) == len(keys)
        for key, (h, p) in zip(keys, rows):
            assert murmur2(key) == int(h), key
            assert partition_for_key(key, n) == int(p), (key, n)


# Utils.murmur2 of kafka-clients 3.9.1 (as test_murmur2_matches_java computes at run time), so that these
# fixed points are checked where no JDK is installed.
JAVA_MURMUR2 = {
    b"": 275646681,
    b"a": -1563381124,
    b"abc": 479470107,
    b"abcd": -1323649548,
    b"key-1": 193331640,
    b"user-1": 1404122828,
    b"\xff\xfe\x80\x00": -2030859805,
}


def test_known_values():
    for key, value in JAVA_MURMUR2.items():
        assert murmur2(key) == value, key
    for key in _keys(50):
        h = murmur2(key)
        assert -(1 << 31) <= h < (1 << 31)
    assert partition_for_key("user-1", 12) == partition_for_key(b"user-1", 12)


def test_null_keys_are_sticky_until_the_batch_closes():
    p = DefaultPartitioner()
    first = p.partition("t", None, 6)
    assert all(p.partition("t", None, 6) == first for _ in range(20))
    p.on_batch_closed("t", first)
    second = p.partition("t", None, 6)
    assert second != first
    assert p.partition("t", b"k", 6) == partition_for_key(b"k", 6)


def test_null_keys_only_use_available_partitions():
    p = DefaultPartitioner()
    seen = set()
    for _ in range(20):
        part = p.partition("t", None, 6, available=[1, 4])
        seen.add(part)
        p.on_batch_closed("t", part)
    assert seen == {1, 4}


def test_round_robin():
    p = RoundRobinPartitioner()
    got = [p.partition("t", None, 3) for _ in range(6)]
    assert sorted(got) == [0, 0, 1, 1, 2, 2]


def test_bad_partition_count():
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)
