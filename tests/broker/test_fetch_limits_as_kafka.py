"""Fetch's size limits (PartitionMaxBytes, MaxBytes, the first batch even when it is larger) answered as Kafka 4.4
answers them: the same batches, from the same offsets, on both engines.

One written difference, asserted here so that it stays deliberate: Kafka slices the segment by bytes and so ends
a partition's records with the part of the next batch that fits (every client drops that part and fetches the
batch again); kafkawire ends at the last whole batch. The complete batches are the same.
"""

from __future__ import annotations

import struct

import pytest

from kafkawire.broker.config import BrokerConfig

from .helpers import batch, create_topic, fetch_request, produce_request, records_with_offsets
from .reference import produce_when_led, reference_client, unique, wait_for_topic

BATCHES = 6
PER_BATCH = 8


@pytest.fixture(params=["memory", "segments"])
def broker_config(request, tmp_path):
    if request.param == "memory":
        return BrokerConfig(port=0, storage="memory")
    return BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data"))


def batches() -> list[bytes]:
    return [
        batch([b"%d-%d-" % (n, i) + b"v" * 100 for i in range(PER_BATCH)], base_timestamp=1_700_000_000_000 + n)
        for n in range(BATCHES)
    ]


def complete(records) -> tuple[list, int]:
    """(offset, value) of every whole batch of ``records``, and how many bytes those batches take."""
    data = bytes(records or b"")
    pos = 0
    while len(data) - pos >= 12:
        end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
        if end > len(data):
            break
        pos = end
    return records_with_offsets(data[:pos]), pos


def answer(client, topic: str, parts, **limits) -> dict:
    res = client.call(fetch_request([(topic, p, offset) for p, offset in parts], **limits), 12)
    assert res.error_code == 0, res
    out = {}
    for t in res.responses:
        for p in t.partitions:
            records, whole = complete(p.records)
            out[p.partition_index] = {
                "error": p.error_code,
                "high_watermark": p.high_watermark,
                "records": records,
                "whole_bytes": whole,
                "bytes": len(p.records or b""),
            }
    return out


def test_fetch_size_limits_as_kafka(client, reference_kafka):
    ref = reference_client(reference_kafka)
    try:
        ours, theirs = unique("fetch-limits"), unique("fetch-limits")
        create_topic(client, ours, partitions=2)
        create_topic(ref, theirs, partitions=2)
        wait_for_topic(ref, theirs)
        sent = batches()
        size = len(sent[0])
        assert all(len(b) == size for b in sent)
        for p in (0, 1):
            for data in sent:
                produce_when_led(ref, produce_request(theirs, p, data), 11)
                client.call(produce_request(ours, p, data), 11)

        cases = {
            # two and a half batches' worth: two whole batches (Kafka adds half of the third)
            "partition limit inside a batch": ([(0, 0)], {"partition_max_bytes": size * 5 // 2}),
            # a limit below the first batch still returns that batch, whole, and nothing after it
            "first batch larger than the partition limit": ([(0, 0)], {"partition_max_bytes": 10}),
            "first batch larger than the response limit": ([(0, 0), (1, 0)], {"max_bytes": 10}),
            # an offset inside a batch: from the start of that batch
            "offset inside the third batch": ([(0, 2 * PER_BATCH + 3)], {}),
            # the response limit is shared: what the first partition takes, the second cannot
            "response limit across partitions": ([(0, 0), (1, 0)], {"max_bytes": size * 3 // 2}),
            "response limit reached in the second partition": (
                [(0, 4 * PER_BATCH), (1, 0)],
                {"max_bytes": size * 7 // 2},
            ),
            "everything": ([(0, 0), (1, 0)], {}),
        }
        kafka_bytes = {}
        for label, (parts, limits) in cases.items():
            mine, kafka = answer(client, ours, parts, **limits), answer(ref, theirs, parts, **limits)
            kafka_bytes[label] = {p: a["bytes"] for p, a in kafka.items()}
            drop = ("bytes",)  # the partial tail only Kafka sends (see the module docstring)
            assert {p: {k: v for k, v in a.items() if k not in drop} for p, a in mine.items()} == {
                p: {k: v for k, v in a.items() if k not in drop} for p, a in kafka.items()
            }, label
            assert all(a["bytes"] == a["whole_bytes"] for a in mine.values()), label  # whole batches only

        # what the reference answered, for the reader (the comparison above is the test)
        assert kafka_bytes["partition limit inside a batch"] == {0: size * 5 // 2}
        assert kafka_bytes["first batch larger than the partition limit"] == {0: size}
        assert kafka_bytes["first batch larger than the response limit"] == {0: size, 1: 0}
        assert kafka_bytes["response limit across partitions"] == {0: size * 3 // 2, 1: 0}
        assert kafka_bytes["response limit reached in the second partition"] == {0: 2 * size, 1: size * 3 // 2}
        assert kafka_bytes["everything"] == {0: BATCHES * size, 1: BATCHES * size}
    finally:
        ref.close()
