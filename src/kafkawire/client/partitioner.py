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
