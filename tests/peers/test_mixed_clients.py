"""Several real producers at once into the same partitions, then every record read back.

librdkafka producers (idempotent and not, different codecs) and a kafka-python
producer write concurrently; each one's records must be in the log complete,
in its own order per partition, at the offsets it was told, and the log itself
must be gap-free.
"""

from __future__ import annotations

import threading
from collections import defaultdict

import pytest

from .peer_harness import (
    Rec,
    assert_readback,
    confluent_consume,
    confluent_create_topic,
    confluent_produce,
    make_records,
)

pytestmark = pytest.mark.timeout(180)


def test_concurrent_producers_interleave_without_loss(broker, topic):
    from kafka import KafkaProducer

    partitions = 2
    confluent_create_topic(broker.bootstrap, topic, partitions)
    producers = {
        "rd-idem-lz4": {"enable.idempotence": True, "compression.type": "lz4", "acks": "all"},
        "rd-plain-zstd": {"compression.type": "zstd", "acks": "1"},
        "rd-idem-none": {"enable.idempotence": True, "acks": "all", "linger.ms": 0},
        "kafka-python-gzip": None,
    }
    datasets = {}
    for n, name in enumerate(producers):
        recs = make_records(600, partitions, seed=900 + n, null_header_values=name.startswith("rd"))
        # Tag each record with its producer so the interleaved log can be taken apart again.
        datasets[name] = [
            Rec(r.partition, f"{name}|{i}".encode(), r.value, r.headers, r.timestamp) for i, r in enumerate(recs)
        ]
    delivered: dict[str, list] = {}
    errors = []

    def run(name, config):
        try:
            if config is not None:
                delivered[name] = confluent_produce(broker.bootstrap, topic, datasets[name], config)
            else:
                producer = KafkaProducer(
                    bootstrap_servers=broker.bootstrap, compression_type="gzip", linger_ms=5, acks="all"
                )
                try:
                    futures = [
                        producer.send(
                            topic,
                            value=r.value,
                            key=r.key,
                            headers=list(r.headers),
                            partition=r.partition,
                            timestamp_ms=r.timestamp,
                        )
                        for r in datasets[name]
                    ]
                    producer.flush(60)
                    delivered[name] = [(m.partition, m.offset) for m in (f.get(timeout=30) for f in futures)]
                finally:
                    producer.close(timeout=10)
        except Exception as exc:  # reported below, with the producer's name
            errors.append((name, exc))

    threads = [threading.Thread(target=run, args=(name, config)) for name, config in producers.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not [t for t in threads if t.is_alive()], "a producer did not finish in time"
    assert not errors, errors

    total = sum(len(d) for d in datasets.values())
    got = confluent_consume(broker.bootstrap, topic, partitions, total)

    # The log as a whole: consecutive offsets per partition, exactly `total` records.
    per_partition = defaultdict(list)
    for offset, rec in got:
        per_partition[rec.partition].append(offset)
    for p, offsets in per_partition.items():
        assert offsets == list(range(len(offsets))), f"partition {p}: offsets are not 0..{len(offsets) - 1}"
    assert len(got) == total

    # Each producer's own records: complete, in its order, at the offsets it was told.
    for name, records in datasets.items():
        mine = [(o, r) for o, r in got if r.key.startswith(f"{name}|".encode())]
        by_offset = {(r.partition, o): r for o, r in mine}
        assert_readback(records, _renumber(mine), delivered=None)
        for i, (p, o) in enumerate(delivered[name]):
            assert by_offset.get((p, o)) == records[i], f"{name} record #{i} is not at its reported offset {p}/{o}"


def _renumber(got):
    """One producer's records out of an interleaved log, renumbered 0.. per partition for assert_readback."""
    counters = defaultdict(int)
    out = []
    for _, rec in sorted(got, key=lambda g: (g[1].partition, g[0])):
        out.append((counters[rec.partition], rec))
        counters[rec.partition] += 1
    return out
