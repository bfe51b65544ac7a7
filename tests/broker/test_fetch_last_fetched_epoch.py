"""Fetch v12+ with LastFetchedEpoch, as Kafka 4.4 answers it.

A kafkawire partition has one leader epoch (0) from offset 0. A fetcher naming a later epoch gets
OFFSET_OUT_OF_RANGE with no offsets (the log has no end offset for that epoch); one naming epoch 0 with a
fetch offset past the log end gets DivergingEpoch (0, log end offset), the partition's offsets and no
records, at once (no long poll); otherwise the fetch reads as usual.
"""

from __future__ import annotations

import time

import pytest

from kafkawire.protocol import errors

from .helpers import batch, create_topic, fetch_request, produce_request, values_of
from .reference import normalized, produce_when_led, reference_client, unique, wait_for_topic
from .test_metadata_topic_ids import topic_id


def ask(client, key, offset, last_fetched_epoch, version, max_wait_ms=0, session=None):
    kw = {} if session is None else {"session_id": session[0], "session_epoch": session[1]}
    req = fetch_request([(key, 0, offset)], max_wait_ms=max_wait_ms, **kw)
    req.topics[0].partitions[0].last_fetched_epoch = last_fetched_epoch
    return client.call(req, version)


def fields(p):
    return (
        p.error_code,
        p.high_watermark,
        p.last_stable_offset,
        p.log_start_offset,
        (p.diverging_epoch.epoch, p.diverging_epoch.end_offset),
        values_of(p.records),
    )


def setup(client, name):
    create_topic(client, name)
    for values in ([b"a", b"b", b"c"], [b"d", b"e"]):
        client.call(produce_request(name, 0, batch(values)), 9)


@pytest.mark.parametrize("version", [12, 13, 18])
def test_last_fetched_epoch_checks(client, version):
    setup(client, "lfe")
    key = topic_id(client, "lfe") if version >= 13 else "lfe"
    p = lambda offset, epoch, **kw: ask(client, key, offset, epoch, version, **kw).responses[0].partitions[0]  # noqa: E731
    assert fields(p(2, 3)) == (errors.OFFSET_OUT_OF_RANGE, -1, -1, -1, (-1, -1), [])
    assert fields(p(-1, 0)) == (errors.OFFSET_OUT_OF_RANGE, -1, -1, -1, (-1, -1), [])
    assert fields(p(2, 0)) == (0, 5, 5, 0, (-1, -1), [b"a", b"b", b"c", b"d", b"e"])  # whole batches
    assert fields(p(5, 0)) == (0, 5, 5, 0, (-1, -1), [])
    started = time.monotonic()
    assert fields(p(7, 0, max_wait_ms=2000)) == (0, 5, 5, 0, (0, 5), [])
    assert time.monotonic() - started < 1.5  # a diverging partition is answered without waiting
    # without a last fetched epoch, an offset past the end is out of range
    assert fields(p(7, -1)) == (errors.OFFSET_OUT_OF_RANGE, -1, -1, -1, (-1, -1), [])


def test_before_v12_the_field_does_not_exist(client):
    setup(client, "lfe-old")
    p = ask(client, "lfe-old", 2, -1, 11).responses[0].partitions[0]
    assert (p.error_code, values_of(p.records)) == (0, [b"a", b"b", b"c", b"d", b"e"])


def test_a_session_keeps_the_last_fetched_epoch(client):
    setup(client, "lfe-session")
    key = topic_id(client, "lfe-session")
    first = ask(client, key, 7, 0, 13, session=(0, 0))
    assert first.error_code == 0 and first.session_id != 0
    assert fields(first.responses[0].partitions[0])[4] == (0, 5)
    # an incremental request naming the partition again, still diverging: it is in the answer
    again = ask(client, key, 7, 0, 13, session=(first.session_id, 1))
    assert [fields(p)[4] for t in again.responses for p in t.partitions] == [(0, 5)]


def test_same_answers_as_the_reference_kafka(client, reference_kafka):
    ref = reference_client(reference_kafka)
    try:
        ours, theirs = "lfe-ref", unique("lfe-ref")
        setup(client, ours)
        create_topic(ref, theirs)
        ref_id = wait_for_topic(ref, theirs)
        produce_when_led(ref, produce_request(theirs, 0, batch([b"a", b"b", b"c"])), 9)
        ref.call(produce_request(theirs, 0, batch([b"d", b"e"])), 9)
        ours_id = topic_id(client, ours)
        for version in (12, 13, 18):
            for offset, epoch in ((2, 3), (2, 0), (5, 0), (7, 0), (7, 1), (-1, 0), (0, 0)):
                a = ask(client, ours_id if version >= 13 else ours, offset, epoch, version)
                b = ask(ref, ref_id if version >= 13 else theirs, offset, epoch, version)
                a, b = a.responses[0].partitions[0], b.responses[0].partitions[0]
                where = (version, offset, epoch)
                assert normalized(a, drop=("records",)) == normalized(b, drop=("records",)), where
                assert values_of(a.records) == values_of(b.records), where
    finally:
        ref.close()
