"""Record sets and confluent-kafka (librdkafka) helpers for the cross-checks."""

from __future__ import annotations

import random
import time

T0 = 1_700_000_000_000


def make_records(n: int, *, seed: int = 1, keyed: bool = True) -> list[dict]:
    """Varied records: null/empty/large keys and values, headers (null values, repeated keys), timestamps."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        r = rnd.random()
        key = None if (not keyed or r < 0.15) else (b"" if r < 0.2 else b"key-%d" % rnd.randrange(50))
        r = rnd.random()
        if r < 0.05:
            value = None
        elif r < 0.1:
            value = b""
        elif r < 0.15:
            value = rnd.randbytes(rnd.randrange(10_000, 100_000))
        else:
            value = rnd.randbytes(rnd.randrange(1, 300))
        headers = []
        if rnd.random() < 0.4:
            headers = [("h%d" % (j % 2), None if j == 2 else rnd.randbytes(j * 5)) for j in range(rnd.randrange(1, 4))]
        out.append({"key": key, "value": value, "headers": headers, "timestamp": T0 + i * 7 + rnd.randrange(5)})
    return out


def confluent_consume_all(
    bootstrap: str, topic: str, partitions: list[int], expected: int, timeout: float = 60.0
) -> dict[int, list]:
    """Every record of the partitions from offset 0, by partition, as dicts (offset, key, value, headers, ts)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: dict[int, list] = {p: [] for p in partitions}
        got = 0
        deadline = time.monotonic() + timeout
        while got < expected and time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.5):
                if m.error():
                    raise RuntimeError(str(m.error()))
                out[m.partition()].append(
                    {
                        "offset": m.offset(),
                        "key": m.key(),
                        "value": m.value(),
                        "headers": [(k, v) for k, v in (m.headers() or [])],
                        "timestamp": m.timestamp()[1],
                    }
                )
                got += 1
        return out
    finally:
        c.close()


def confluent_produce(
    bootstrap: str, topic: str, records: list[dict], config: dict | None = None, partition: int | None = None
) -> list[tuple[int, int]]:
    """Produce with librdkafka; returns (partition, offset) per record, in order."""
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    conf.update(config or {})
    p = Producer(conf)
    results: list = [None] * len(records)
    errors = []

    def cb(i):
        def report(err, msg):
            if err is not None:
                errors.append(err)
            else:
                results[i] = (msg.partition(), msg.offset())

        return report

    for i, r in enumerate(records):
        kw = {}
        if partition is not None:
            kw["partition"] = partition
        if r.get("headers"):
            kw["headers"] = r["headers"]
        while True:
            try:
                p.produce(
                    topic, value=r["value"], key=r["key"], timestamp=r.get("timestamp", 0), on_delivery=cb(i), **kw
                )
                break
            except BufferError:
                p.poll(0.1)
    left = p.flush(60)
    assert left == 0 and not errors, errors
    return results
