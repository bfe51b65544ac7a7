"""The metadata hash of a consumer group's subscribed topics (KIP-1101), as Kafka 4.4's group coordinator
computes it for ``ConsumerGroupMetadataValue.metadataHash``.

A topic's hash is XXH3-64 (seed 0) over: a magic byte 0, the topic id (most then least significant 64 bits),
the name, the partition count, then per partition its index and the racks of its replicas' brokers, sorted,
each preceded by its length. Integers go in little-endian and a string as its UTF-16 code units
(little-endian) followed by its length in code units: the byte stream of hash4j's ``HashStream64``, which
Kafka feeds. The group's hash is XXH3-64 over its topics' hashes in the order of the topic names, 0 for no
topic; a subscribed topic that does not exist is not part of it. Hashes are Java longs (signed).

Kafka keeps the hash so that a coordinator loading a group can tell whether the topics changed while it was
not watching (and bump the group's epoch then).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Mapping

import xxhash

TOPIC_HASH_MAGIC = 0
_LONG = struct.Struct("<q")
_INT = struct.Struct("<i")
_UUID = struct.Struct("<QQ")


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _string(text: str) -> bytes:
    units = text.encode("utf-16-le", "surrogatepass")
    return units + _INT.pack(len(units) // 2)


def topic_hash(
    topic_id: uuid.UUID, name: str, partitions: int, racks: Callable[[int], Iterable[str]] | None = None
) -> int:
    """The hash of one topic; ``racks(p)``: the racks of partition p's replicas' brokers (those with one)."""
    msb, lsb = divmod(topic_id.int, 1 << 64)
    parts = [bytes([TOPIC_HASH_MAGIC]), _UUID.pack(msb, lsb), _string(name), _INT.pack(partitions)]
    for p in range(partitions):
        parts.append(_INT.pack(p))
        if racks is not None:
            # Java sorts strings by UTF-16 code unit, which big-endian UTF-16 bytes order the same way
            for rack in sorted(racks(p), key=lambda r: r.encode("utf-16-be", "surrogatepass")):
                parts.append(_INT.pack(len(rack.encode("utf-16-le", "surrogatepass")) // 2))
                parts.append(_string(rack))
    return _signed(xxhash.xxh3_64_intdigest(b"".join(parts)))


def group_hash(topic_hashes: Mapping[str, int]) -> int:
    """The hash of a group's topics from each topic's hash (by name); 0 when there are none."""
    if not topic_hashes:
        return 0
    # topic names are ASCII (legal characters: letters, digits, '.', '_', '-'), so Python's order is Java's
    data = b"".join(_LONG.pack(topic_hashes[name]) for name in sorted(topic_hashes))
    return _signed(xxhash.xxh3_64_intdigest(data))


def subscription_hash(
    subscription_metadata: Mapping[str, tuple[object, int]], racks: Callable[[str, int], Iterable[str]] | None = None
) -> int:
    """The group hash of ``{topic name: (topic id, partition count)}`` of the subscribed topics that exist."""
    return group_hash(
        {
            name: topic_hash(
                uuid.UUID(str(topic_id)),
                name,
                int(count),
                None if racks is None else (lambda p, name=name: racks(name, p)),
            )
            for name, (topic_id, count) in subscription_metadata.items()
        }
    )
