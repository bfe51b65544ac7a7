"""The producer's columnar path (``send_many`` with Arrow arrays) makes the batches the per-record path makes.

Both paths get the same records (keys, null keys, null values, headers, timestamps, explicit partitions)
through the same producer settings; the sender is replaced by a recorder, so every batch the producer
would put in a ProduceRequest is compared byte for byte, for every codec. The vectorised murmur2 is checked
against the per-key one here and against Java's Utils.murmur2 and librdkafka's murmur2_random in
test_partitioner.py.
"""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

pa = pytest.importorskip("pyarrow")
np = pytest.importorskip("numpy")

from kafkawire.client.cluster import PartitionInfo, TopicInfo  # noqa: E402
from kafkawire.client.partitioner import DefaultPartitioner, murmur2, murmur2_column, partitions_for_keys  # noqa: E402
from kafkawire.client.producer import AsyncProducer  # noqa: E402
from kafkawire.protocol.records import iter_batches  # noqa: E402

TOPIC = "columns"


class _Cluster:
    """Metadata of one topic whose partitions all have a leader; no connection is ever made."""

    metadata_age = 0.0
    metadata_max_age = 300.0

    def __init__(self, partitions: int):
        info = TopicInfo(TOPIC, uuid.uuid4())
        info.partitions = {p: PartitionInfo(p, 0, 0, [0], [0]) for p in range(partitions)}
        info.available_partitions = list(range(partitions))
        self.topics = {TOPIC: info}

    async def close(self):
        pass


class _Recording(AsyncProducer):
    """Records every batch the sender would send, and acknowledges it."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.sent: list[tuple[tuple[str, int], bytes]] = []

    async def _send_batches(self, node, batches):
        for b in batches:
            self.sent.append((b.tp, bytes(self._payload(b))))
            self._succeed(b, 0, -1)
        self._wakeup.set()


def _records(n: int, seed: int, *, keys: str, headers: bool):
    rnd = random.Random(seed)
    values = [None if rnd.random() < 0.05 else rnd.randbytes(rnd.choice((0, 3, 100, 100, 200, 3000))) for _ in range(n)]
    if keys == "none":
        ks = [None] * n
    elif keys == "all":
        ks = [b"k%d" % rnd.randrange(500) + rnd.randbytes(rnd.randrange(4)) for _ in range(n)]
    else:
        ks = [None if rnd.random() < 0.3 else b"user-%d" % rnd.randrange(50) for _ in range(n)]
    base = 1_700_000_000_000
    ts = [base + rnd.randrange(-5, 300) * n + i for i in range(n)]  # unique: a record is found by it
    hs = None
    if headers:
        hs = [[("h", b"1"), ("trace", None)] if rnd.random() < 0.1 else None for _ in range(n)]
    return values, ks, ts, hs


async def _run(columnar: bool, records, *, partitions, codec, batch_size, explicit=None, seed=3):
    values, keys, ts, hs = records
    partitioner = DefaultPartitioner()
    partitioner._counter = _Counter(seed)
    p = _Recording(
        cluster=_Cluster(partitions),
        compression=codec,
        batch_size=batch_size,
        linger_ms=10_000,
        acks=1,
        partitioner=partitioner,
    )
    await p.start()
    # in two calls, so that the second one joins the batches the first one left open
    half = len(values) // 2
    groups = []
    for lo, hi in ((0, half), (half, len(values))):
        part = None if explicit is None else explicit[lo:hi]
        if columnar:
            groups.append(
                p.send_many(
                    TOPIC,
                    pa.array(values[lo:hi], pa.binary()),
                    pa.array(keys[lo:hi], pa.binary()),
                    partitions=None if part is None else pa.array(part, pa.int32()),
                    headers=None if hs is None else hs[lo:hi],
                    timestamps=pa.array(ts[lo:hi], pa.int64()),
                )
            )
        else:
            groups.append(
                p.send_many(
                    TOPIC,
                    values[lo:hi],
                    keys[lo:hi],
                    partitions=part,
                    headers=None if hs is None else hs[lo:hi],
                    timestamps=ts[lo:hi],
                )
            )
    await p.flush(30)
    await p.close()
    for g in groups:
        assert g.done() and g.failed == 0 and g.delivered == g.count, g
    return p.sent


def _by_partition(sent) -> dict:
    """Each partition's batches in the order sent (the order between partitions is the sender's)."""
    out: dict = {}
    for tp, payload in sent:
        out.setdefault(tp, []).append(payload)
    return out


class _Counter:
    def __init__(self, start):
        self.n = start

    def __next__(self):
        self.n += 1
        return self.n


CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]  # all dependencies of kafkawire


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("keys", ["all", "none"])
def test_columnar_batches_equal_per_record_batches(codec, keys):
    records = _records(3000, seed=len(keys), keys=keys, headers=keys != "all")
    kw = dict(partitions=3, codec=codec, batch_size=64 * 1024)
    per_record = asyncio.run(_run(False, records, **kw))
    columnar = asyncio.run(_run(True, records, **kw))
    assert len(per_record) > 6  # several batches per partition: the size rule is exercised
    assert _by_partition(columnar) == _by_partition(per_record)
    # every record is there once
    decoded = [r for _, payload in columnar for batch in iter_batches(payload) for r in batch]
    assert len(decoded) == 3000


def test_columnar_call_too_large_for_one_buffer_is_encoded_batch_by_batch(monkeypatch):
    """A call whose records would not fit one binary column (int32 offsets) is encoded batch by batch; the
    limit is lowered here so that 3000 records pass it: batches byte for byte as the per-record path's."""
    from kafkawire.protocol.records import columnar

    monkeypatch.setattr(columnar, "MAX_POOL", 10_000)
    records = _records(3000, seed=4, keys="all", headers=True)
    kw = dict(partitions=3, codec="none", batch_size=16 * 1024)
    per_record = asyncio.run(_run(False, records, **kw))
    columnar_sent = asyncio.run(_run(True, records, **kw))
    assert _by_partition(columnar_sent) == _by_partition(per_record)


@pytest.mark.parametrize("layout", ["one length", "blocks of lengths"])
def test_columnar_batches_equal_per_record_batches_in_runs_of_equal_widths(layout):
    """Rows whose varints have the same widths are laid out as a fixed-width block (the common case: one
    key length, one value length): keys and values of one length, or blocks of lengths on both sides of
    the varints' 1/2-byte borders, with offset deltas past 64 and 8192 (1, 2 and 3 bytes), null values
    in a block of their own, null keys and keyed rows in one call; batches byte for byte as the
    per-record path's."""
    n = 20_000
    if layout == "one length":
        values = [bytes([i % 251]) * 100 for i in range(n)]
        keys = [b"k%07d" % i for i in range(n)]
    else:
        lengths = [10, 63, 64, 200, 9000]  # varint widths of the lengths: 1, 2, 2, 2, 3 bytes (zigzag)
        values = [None if i // 4000 == 2 else bytes([i % 251]) * lengths[i * 5 // n] for i in range(n)]
        keys = [None if i // 5000 == 1 else b"key-%d" % (100 + i // 2000) * (1 + i // 7000) for i in range(n)]
    base = 1_700_000_000_000
    ts = [base + i // 3000 for i in range(n)]  # timestamp deltas of one width, then of two
    records = (values, keys, ts, None)
    kw = dict(partitions=2 if layout == "one length" else 1, codec="none", batch_size=4 << 20)
    per_record = asyncio.run(_run(False, records, **kw))
    columnar = asyncio.run(_run(True, records, **kw))
    assert _by_partition(columnar) == _by_partition(per_record)
    batches = [batch for _, payload in columnar for batch in iter_batches(payload)]
    assert sum(len(list(b)) for b in batches) == n
    assert max(b.last_offset_delta for b in batches) >= 8192  # offset deltas of 3 bytes were encoded


def test_keyed_and_null_keys_in_one_call():
    """Keys land where Java's partitioner puts them; null keys stick to a partition until its batch closes
    (counting the null-key rows of the call only, so the batches can differ from the per-record path's);
    each partition keeps the records in the order given."""
    records = _records(3000, seed=8, keys="mixed", headers=True)
    kw = dict(partitions=3, codec="lz4", batch_size=32 * 1024)
    per_record = asyncio.run(_run(False, records, **kw))
    columnar = asyncio.run(_run(True, records, **kw))
    index = {t: i for i, t in enumerate(records[2])}
    seen = {}
    for sent, name in ((per_record, "per record"), (columnar, "columnar")):
        where = {}
        for tp, payload in sent:
            rows = [index[r.timestamp] for batch in iter_batches(payload) for r in batch]
            assert rows == sorted(rows), name
            where.update((i, tp[1]) for i in rows)
        assert len(where) == 3000, name
        seen[name] = where
    keyed = [i for i, k in enumerate(records[1]) if k is not None]
    assert [seen["columnar"][i] for i in keyed] == [seen["per record"][i] for i in keyed]
    assert len({seen["columnar"][i] for i, k in enumerate(records[1]) if k is None}) == 3  # it moved on


def test_explicit_partitions_and_tiny_batches():
    records = _records(500, seed=9, keys="all", headers=True)
    explicit = [None if i % 3 else i % 4 for i in range(500)]
    kw = dict(partitions=4, codec="none", batch_size=1000, explicit=explicit)
    per_record = asyncio.run(_run(False, records, **kw))
    columnar = asyncio.run(_run(True, records, **kw))
    assert len(per_record) > 50
    assert _by_partition(columnar) == _by_partition(per_record)


def test_unknown_partition_fails_those_rows_only():
    async def run():
        p = _Recording(cluster=_Cluster(2), linger_ms=1, acks=1)
        await p.start()
        g = p.send_many(TOPIC, pa.array([b"a", b"b", b"c"]), partitions=pa.array([0, 7, 1], pa.int32()))
        await g.wait()
        await p.close()
        return g

    g = asyncio.run(run())
    assert (g.delivered, g.failed) == (2, 1)
    assert "has no partition 7" in str(g.errors[0][1])


def test_murmur2_column_equals_per_key_murmur2():
    rnd = random.Random(5)
    keys = [rnd.randbytes(rnd.randrange(0, 70)) for _ in range(3000)] + [None, b"", "üñí".encode()]
    col = pa.array(keys, pa.binary())
    got = murmur2_column(col)
    want = np.array([0 if k is None else murmur2(k) & 0xFFFFFFFF for k in keys], np.uint32)
    assert (got == want).all()
    assert (murmur2_column(col.slice(11, 500)) == want[11:511]).all()  # an Arrow slice (non-zero offset)


def test_murmur2_column_of_keys_of_one_length_equals_per_key_murmur2():
    """Keys all of one length and none null are hashed as one block of the data buffer: every length
    from 0 to 13 (whole words and 1-3 tail bytes), on a slice whose data does not start the buffer."""
    rnd = random.Random(6)
    for length in range(14):
        keys = [rnd.randbytes(length) for _ in range(700)]
        col = pa.array([b"x" * 5] * 3 + keys, pa.binary()).slice(3)
        want = np.array([murmur2(k) & 0xFFFFFFFF for k in keys], np.uint32)
        assert (murmur2_column(col) == want).all(), length
        assert (murmur2_column(col.slice(100, 37)) == want[100:137]).all(), length


def _peer_keys() -> list[bytes]:
    rnd = random.Random(21)
    keys = [b"user-%d" % i for i in range(80)] + [bytes([i]) * i for i in range(1, 20)] + [b"\xff\x00\x80", b""]
    return keys + [rnd.randbytes(rnd.randrange(1, 50)) for _ in range(150)]


def test_murmur2_column_matches_java():
    from .test_partitioner import JAVA_SOURCE
    from support.java import JavaProgram

    tool = JavaProgram.require(str(JAVA_SOURCE))
    keys = _peer_keys()
    col = pa.array(keys, pa.binary())
    for n in (1, 7, 64):
        out = tool.run("Murmur2Tool", str(n), input="".join(k.hex() + "\n" for k in keys))
        rows = [line.split() for line in out.splitlines()]
        assert len(rows) == len(keys)
        hashes = murmur2_column(col).astype(np.int64)
        hashes[hashes >= 1 << 31] -= 1 << 32
        assert hashes.tolist() == [int(h) for h, _ in rows]
        assert partitions_for_keys(col, n).tolist() == [int(p) for _, p in rows]


def test_columnar_keys_land_where_librdkafka_murmur2_random_puts_them(bootstrap, make_topic, topic):
    from kafkawire.client import Producer

    from .helpers import confluent_consume_all, confluent_produce

    partitions = 7
    make_topic(topic, partitions)
    keys = _peer_keys()
    theirs = confluent_produce(
        bootstrap, topic, [{"key": k, "value": b"rd"} for k in keys], {"partitioner": "murmur2_random"}
    )
    with Producer(bootstrap) as p:
        group = p.produce_many(topic, pa.array([b"kw"] * len(keys)), pa.array(keys, pa.binary()))
        p.flush(60)
        group.result(60).raise_first()
    by_part = confluent_consume_all(bootstrap, topic, list(range(partitions)), 2 * len(keys))
    where = {(r["key"] or b"", r["value"]): part for part, rs in by_part.items() for r in rs}
    assert len(where) == len(set(keys)) * 2
    for key, (their_partition, _) in zip(keys, theirs):
        assert where[(key, b"rd")] == their_partition
        assert where[(key, b"kw")] == their_partition, key
