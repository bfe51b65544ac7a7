"""Choosing a partition for a record.

Keyed records: exactly the Java client's default partitioner,
``toPositive(murmur2(keyBytes)) % numPartitions`` (``Utils.murmur2`` with
seed 0x9747b28c), so that the same key lands in the same partition whether
kafkawire, the Java client or librdkafka with ``partitioner=murmur2_random``
produced it.

Records with a null key: sticky, like the Java client since 2.4: all go to
one partition until the producer closes a batch for it, then the next
partition (round robin over the available partitions) is picked.
"""

from __future__ import annotations

import itertools
import random
import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_SEED = 0x9747B28C


def murmur2(data: bytes) -> int:
    """Java's ``org.apache.kafka.common.utils.Utils.murmur2``: a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length & ~3
    if n4:
        for (k,) in struct.iter_unpack("<I", data[:n4]):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    return n & 0x7FFFFFFF


def key_bytes(key) -> bytes:
    if isinstance(key, str):
        return key.encode()
    return bytes(key)


def partition_for_key(key, num_partitions: int) -> int:
    """The Java default partitioner's choice for a non-null key."""
    if num_partitions <= 0:
        raise ValueError("a topic has at least one partition")
    return to_positive(murmur2(key_bytes(key))) % num_partitions


class DefaultPartitioner:
    """murmur2 for keys, sticky for null keys. ``partition(topic, key, n, available)``."""

    def __init__(self):
        self._sticky: dict[str, int] = {}
        self._counter = itertools.count(random.randrange(1 << 16))

    def partition(self, topic: str, key, num_partitions: int, available: list[int] | None = None) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        p = self._sticky.get(topic)
        if p is None or p >= num_partitions:
            p = self._next(topic, num_partitions, available)
        return p

    def on_batch_closed(self, topic: str, partition: int) -> None:
        """The producer closed a batch: the next null-key record starts a new sticky partition."""
        if self._sticky.get(topic) == partition:
            del self._sticky[topic]

    def _next(self, topic, num_partitions, available):
        choices = available if available else range(num_partitions)
        p = choices[next(self._counter) % len(choices)]
        self._sticky[topic] = p
        return p


class RoundRobinPartitioner(DefaultPartitioner):
    """murmur2 for keys, one partition after the other for null keys."""

    def partition(self, topic, key, num_partitions, available=None):
        if key is not None:
            return partition_for_key(key, num_partitions)
        return self._next(topic, num_partitions, available)


def murmur2_column(keys) -> np.ndarray:
    """``murmur2`` of every key of an Arrow binary column at once (numpy, uint32; nulls give 0).

    Keys are grouped by length; for each length the 4-byte words of all its keys are mixed column by
    column, so the Python work is per distinct key length and per word, not per key. numpy's uint32
    arithmetic wraps as Java's int arithmetic does.
    """
    import numpy as np

    n = len(keys)
    out = np.zeros(n, np.uint32)
    if n == 0 or keys.null_count == n:
        return out
    bufs = keys.buffers()
    offsets = np.frombuffer(bufs[1], np.int32, n + 1, keys.offset * 4).astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None and bufs[2].size else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    valid = np.ones(n, bool) if keys.null_count == 0 else np.asarray(keys.is_valid().to_numpy(zero_copy_only=False))
    m = np.uint32(_M)
    # keys of one length and no null (the common case: ids, fixed-width keys) sit back to back in the
    # data buffer: their words are a reshape of it, with no gather and no grouping by length
    uniform = keys.null_count == 0 and int(lengths.min()) == int(lengths.max())
    for length in (int(lengths[0]),) if uniform else np.unique(lengths[valid]).tolist():
        rows = slice(None) if uniform else np.nonzero((lengths == length) & valid)[0]
        starts = offsets[:-1] if uniform else offsets[rows]
        h = np.full(len(starts), (_SEED ^ length) & _MASK, np.uint32)
        n4 = length & ~3
        if n4:
            if uniform:
                first = int(offsets[0])
                block = data[first : first + n * length].reshape(n, length)[:, :n4]
                words = np.ascontiguousarray(block).view("<u4")
            else:
                words = np.ascontiguousarray(data[starts[:, None] + np.arange(n4)]).view("<u4")
            for c in range(n4 // 4):
                k = words[:, c] * m
                k ^= k >> np.uint32(24)
                k *= m
                h = (h * m) ^ k
        rest = length & 3
        if rest == 3:
            h ^= data[starts + n4 + 2].astype(np.uint32) << np.uint32(16)
        if rest >= 2:
            h ^= data[starts + n4 + 1].astype(np.uint32) << np.uint32(8)
        if rest >= 1:
            h ^= data[starts + n4].astype(np.uint32)
            h *= m
        h ^= h >> np.uint32(13)
        h *= m
        h ^= h >> np.uint32(15)
        out[rows] = h
    return out


def partitions_for_keys(keys, num_partitions: int) -> np.ndarray:
    """``partition_for_key`` of every key of an Arrow binary column (int64; meaningless where a key is null)."""
    import numpy as np

    if num_partitions <= 0:
        raise ValueError("a topic has at least one partition")
    return ((murmur2_column(keys) & np.uint32(0x7FFFFFFF)) % np.uint32(num_partitions)).astype(np.int64)
