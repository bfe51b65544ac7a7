"""Client benchmarks: the consumer's Arrow decode path (records/s), offline and end to end.

    python benchmarks/bench_client.py                       # decode only, no broker
    python benchmarks/bench_client.py --bootstrap HOST:PORT # also produce + consume through a broker

The decode benchmark builds v2 batches of 100-byte values (as the Spark
target: >= 1M records/s) with the records module and times
``ArrowColumns.add_batch`` + ``to_batch``, per codec.

The append benchmark times the producer's side of the Spark sink without a broker: ``send_many`` of
10,000-record calls, per-record lists against Arrow columns (the columnar path), until every batch is
built (the payloads the sender would put in ProduceRequests), CPU seconds of this process, ratio printed.
"""

from __future__ import annotations

import argparse
import os
import time

from kafkawire.client.arrow import ArrowColumns
from kafkawire.protocol.records import build_batch, iter_batches


def make_batches(
    n_records: int, per_batch: int, value_size: int, codec: str, keyed: bool, varied: bool = False
) -> bytes:
    value = os.urandom(value_size)
    sizes = [value_size + (i * 7919) % value_size for i in range(per_batch)]  # 100%..200% of value_size
    out = []
    ts = 1_700_000_000_000
    offset = 0
    while offset < n_records:
        k = min(per_batch, n_records - offset)
        recs = [
            ((b"key-%d" % (offset + i)) if keyed else None, (value * 3)[: sizes[i]] if varied else value, None, ts + i)
            for i in range(k)
        ]
        out.append(build_batch(recs, compression=codec, base_offset=offset))
        offset += k
    return b"".join(out)


def bench_decode(n: int, value_size: int, codec: str, keyed: bool, varied: bool = False) -> float:
    buf = make_batches(n, 2000, value_size, codec, keyed, varied)
    best = 0.0
    for _ in range(3):
        t0 = time.process_time()  # CPU time: the machine may be shared
        cols = ArrowColumns("bench", 0)
        for batch in iter_batches(buf):
            cols.add_batch(batch)
        rb = cols.to_batch()
        dt = time.process_time() - t0
        assert rb.num_rows == n
        best = max(best, n / dt)
    return best


def bench_append(n: int, value_size: int, keyed: bool, codec: str = "none") -> tuple[float, float]:
    """(per-record send_many, columnar send_many) records/s of CPU time, up to built batches, no broker."""
    import asyncio
    import uuid

    import pyarrow as pa

    from kafkawire.client.cluster import PartitionInfo, TopicInfo
    from kafkawire.client.producer import AsyncProducer

    class Cluster:
        metadata_age, metadata_max_age = 0.0, 1e9

        def __init__(self):
            info = TopicInfo("bench", uuid.uuid4())
            info.partitions = {p: PartitionInfo(p, 0, 0, [0], [0]) for p in range(4)}
            info.available_partitions = [0, 1, 2, 3]
            self.topics = {"bench": info}

        async def close(self):
            pass

    class Built(AsyncProducer):  # the sender builds each batch's payload and acknowledges it
        async def _send_batches(self, node, batches):
            for b in batches:
                self._payload(b)
                self._succeed(b, 0, -1)
            self._wakeup.set()

    value = os.urandom(value_size)
    chunk = 10_000
    keys = [b"k%07d" % (i % 100_000) for i in range(chunk)] if keyed else None
    values = [value] * chunk

    async def run(columnar: bool) -> float:
        p = Built(cluster=Cluster(), acks=1, compression=codec, linger_ms=5)
        await p.start()
        vcol = pa.array(values, pa.binary())
        kcol = pa.array(keys, pa.binary()) if keyed else None
        t0 = time.process_time()
        groups = []
        for _ in range(0, n, chunk):
            if columnar:
                groups.append(p.send_many("bench", vcol, kcol))
            else:
                groups.append(p.send_many("bench", values, keys))
            await asyncio.sleep(0)  # the sender runs between calls, as with a broker
        await p.flush()
        dt = time.process_time() - t0
        await p.close()
        assert all(g.delivered == g.count for g in groups)
        return len(groups) * chunk / dt

    best = [0.0, 0.0]
    for _ in range(2):
        for i, columnar in enumerate((False, True)):
            best[i] = max(best[i], asyncio.run(run(columnar)))
    return best[0], best[1]


def bench_records(n: int, value_size: int) -> float:
    buf = make_batches(n, 2000, value_size, "none", False)
    t0 = time.process_time()
    count = 0
    for batch in iter_batches(buf):
        for _ in batch.records():
            count += 1
    return count / (time.process_time() - t0)


def bench_broker(bootstrap: str, n: int, value_size: int) -> None:
    from kafkawire.client import Admin, Consumer, NewTopic, Producer

    topic = f"bench-{os.getpid()}-{int(time.time())}"
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    value = os.urandom(value_size)
    with Producer(bootstrap, linger_ms=20) as producer:
        t0 = time.perf_counter()
        for _ in range(n):
            producer.produce(topic, value)
        producer.flush()
        print(f"produce:               {n / (time.perf_counter() - t0):>12,.0f} records/s wall")
        t0 = time.perf_counter()
        for i in range(0, n, 10_000):
            producer.produce_many(topic, [value] * min(10_000, n - i))
        producer.flush()
        print(f"produce_many:          {n / (time.perf_counter() - t0):>12,.0f} records/s wall")
        import pyarrow as pa

        column = pa.array([value] * 10_000, pa.binary())
        t0 = time.perf_counter()
        for i in range(0, n, 10_000):
            producer.produce_many(topic, column if n - i >= 10_000 else column.slice(0, n - i))
        producer.flush()
        print(f"produce_many (Arrow):  {n / (time.perf_counter() - t0):>12,.0f} records/s wall")
    for path in ("arrow", "records"):
        with Consumer(bootstrap) as consumer:
            consumer.assign([(topic, 0)], offset="earliest")
            t0, c0 = time.perf_counter(), time.process_time()
            got = 0
            deadline = time.monotonic() + 120
            while got < 2 * n and time.monotonic() < deadline:
                if path == "arrow":
                    for rb in consumer.poll_arrow(timeout=1.0):
                        got += rb.num_rows
                else:
                    got += len(consumer.poll(timeout=1.0))
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            print(
                f"consume ({path}):{' ' * (8 - len(path))}{got / wall:>12,.0f} records/s wall, "
                f"{got / cpu:,.0f} per CPU second of this process (both threads)"
            )
    with Admin(bootstrap) as admin:
        admin.delete_topics([topic])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--bootstrap")
    args = ap.parse_args()
    for codec in ("none", "lz4", "zstd", "snappy", "gzip"):
        rate = bench_decode(args.records, args.value_size, codec, keyed=False)
        print(f"arrow decode {codec:<7}  {rate:>12,.0f} records/s  ({args.value_size}-byte values, null keys)")
    rate = bench_decode(args.records, args.value_size, "none", keyed=True)
    print(f"arrow decode keyed    {rate:>12,.0f} records/s")
    rate = bench_decode(args.records, args.value_size, "none", keyed=False, varied=True)
    print(
        f"arrow decode varied   {rate:>12,.0f} records/s  (values of {args.value_size}..{2 * args.value_size - 1} bytes)"
    )
    rate = bench_decode(args.records, args.value_size, "none", keyed=True, varied=True)
    print(f"arrow decode var+key  {rate:>12,.0f} records/s")
    print(f"records path (none)   {bench_records(args.records, args.value_size):>12,.0f} records/s")
    for keyed in (False, True):
        for codec in ("none", "lz4"):
            per_record, columnar = bench_append(args.records, args.value_size, keyed, codec)
            print(
                f"producer append {'keyed' if keyed else 'null '} {codec:<4}  per record {per_record:>10,.0f}/s, "
                f"Arrow columns {columnar:>10,.0f}/s, ratio {columnar / per_record:.1f}  (CPU time, batches built)"
            )
    if args.bootstrap:
        bench_broker(args.bootstrap, args.records, args.value_size)


if __name__ == "__main__":
    main()
