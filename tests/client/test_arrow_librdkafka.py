"""The vectorised Arrow decoder against the per-record decoder, on record batches librdkafka wrote.

Every codec; varied records (null and empty keys and values, large values, headers with null values)
and runs of fixed-size records (the walk's strided jumps); transactions committed and aborted, so the
fetched log holds control batches. The same fetched bytes go through both decoders: the consumer's
``decode_chunks_arrow`` (what ``poll_arrow`` returns) and its per-record path (``poll``), batch by batch
and chunk by chunk, in read_uncommitted and read_committed.
"""

from __future__ import annotations

import time

import pytest

from kafkawire.client import Consumer
from kafkawire.client.arrow import ArrowColumns
from kafkawire.client.consumer import decode_chunks_arrow
from kafkawire.protocol.records import iter_batches

from .helpers import T0, make_records

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _produce(bootstrap: str, topic: str, codec: str) -> dict:
    """Varied records, fixed-size runs and two transactions (one aborted) into partition 0."""
    from confluent_kafka import KafkaException, Producer

    varied = make_records(400, seed=len(codec))
    fixed = [
        {"key": b"k%07d" % i, "value": bytes([i % 251]) * 100, "headers": [], "timestamp": T0 + i // 3}
        for i in range(3000)
    ]
    keyless = [{"key": None, "value": b"v%05d" % i, "headers": [], "timestamp": T0 + 5 * i} for i in range(500)]
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"tx-{topic}",
            "compression.type": codec,
            "linger.ms": 20,
            "batch.size": 64 << 10,
        }
    )

    def send(records):
        for r in records:
            p.produce(topic, r["value"], r["key"], partition=0, timestamp=r.get("timestamp", 0), headers=r["headers"])

    try:
        p.init_transactions(15)
    except KafkaException as exc:
        pytest.fail(f"the broker refused transactions: {exc}")
    p.begin_transaction()
    send(varied)
    p.commit_transaction(30)
    p.begin_transaction()
    send(fixed[:1000])
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    send(fixed)
    send(keyless)
    p.commit_transaction(30)
    return {"varied": varied, "aborted": 1000, "committed": len(varied) + len(fixed) + len(keyless)}


def _chunks(bootstrap: str, topic: str, isolation: str, end: int) -> list:
    """The raw fetched chunks of partition 0 up to offset ``end``, in small fetches (many chunks)."""
    tp = (topic, 0)
    chunks = []
    with Consumer(bootstrap, isolation_level=isolation, max_partition_fetch_bytes=32 << 10) as c:
        c.assign([tp], offset="earliest")
        c.stop_at(tp, end)
        deadline = time.monotonic() + 60
        while c.position(tp) < end and time.monotonic() < deadline:
            chunks.extend(c._run(c._core._take(0.5)))
        assert c.position(tp) >= end
        per_record = [r for ch in chunks for r in c._core._decode(ch)]
    return chunks, per_record


def _rows(record_batches) -> list[tuple]:
    out = []
    for rb in record_batches:
        ts = rb.column("timestamp").cast("int64").to_pylist()
        for row, t in zip(rb.to_pylist(), ts):
            headers = [(h["key"], h["value"]) for h in row["headers"]]
            out.append((row["offset"], t, row["timestamp_type"], row["key"], row["value"], headers))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_vectorised_decoder_equals_per_record_decoder_on_librdkafka_batches(bootstrap, make_topic, topic, codec):
    make_topic(topic, 1)
    made = _produce(bootstrap, topic, codec)
    with Consumer(bootstrap) as c:
        end = c.end_offsets([(topic, 0)])[(topic, 0)]
    for isolation in ("read_uncommitted", "read_committed"):
        chunks, per_record = _chunks(bootstrap, topic, isolation, end)
        batches = [b for ch in chunks for b in iter_batches(ch.data)]
        assert sum(b.is_control for b in batches) >= 3  # the transactions' markers are in what was fetched
        # librdkafka sends a batch uncompressed when the codec would not make it smaller
        assert CODECS.index(codec) in {b.compression_id for b in batches if not b.is_control}

        # chunk by chunk, as poll_arrow decodes
        arrow_rows = []
        for ch in chunks:
            arrow_rows += _rows(decode_chunks_arrow([ch], headers=True))
        expected = [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, list(r.headers)) for r in per_record]
        assert arrow_rows == expected
        want = made["committed"] + (made["aborted"] if isolation == "read_uncommitted" else 0)
        assert len(arrow_rows) == want

        # batch by batch, including those the consumer skips (the decoder is not asked for control batches)
        for b in batches:
            if b.is_control:
                continue
            cols = ArrowColumns(topic, 0, headers=True)
            cols.add_batch(b)
            got = _rows([cols.to_batch()])
            assert got == [(r.offset, r.timestamp, 0, r.key, r.value, list(r.headers)) for r in b.records()]

    # the varied records' shapes made it through: null/empty keys and values, headers with null values
    shapes = {(r["key"] is None, r["key"] == b"", r["value"] is None, r["value"] == b"") for r in made["varied"]}
    assert {(True, False, False, False), (False, True, False, False)} <= shapes
    assert any(v is None for r in made["varied"] for _, v in r["headers"])
