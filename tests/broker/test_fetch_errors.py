"""Fetch per-partition fields on error paths, as Kafka 4.4 sends them.

A partition in error carries high watermark, last stable offset and log start offset -1 and
preferred read replica -1. AbortedTransactions is an empty list (not null, whatever the isolation
level) where the topic or partition was not found, and null where the read failed (offset out of
range, leader epoch ahead of the broker's).
"""

from __future__ import annotations

import uuid

import pytest

from kafkawire.protocol import errors

from .helpers import batch, create_topic, fetch_request, produce_request, values_of
from .reference import normalized, produce_when_led, reference_client, unique, wait_for_topic
from .test_metadata_topic_ids import topic_id

UNKNOWN_ID = uuid.UUID(int=99)
VERSIONS = [4, 7, 11, 12, 13, 15, 17, 18]


def fields(p):
    return (
        p.error_code,
        p.high_watermark,
        p.last_stable_offset,
        p.log_start_offset,
        p.aborted_transactions,
        p.preferred_read_replica,
        bytes(p.records or b""),
    )


def setup_topic(client, name):
    create_topic(client, name, partitions=2)
    res = client.call(produce_request(name, 0, batch([b"a", b"b", b"c"])), 9)
    assert res.responses[0].partition_responses[0].error_code == 0


def one(client, parts, version, isolation=0, epoch=None):
    req = fetch_request(parts, isolation_level=isolation)
    if epoch is not None:
        for t in req.topics:
            for p in t.partitions:
                p.current_leader_epoch = epoch
    return client.call(req, version).responses[0].partitions[0]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("isolation", [0, 1])
def test_not_found_partitions_carry_an_empty_aborted_list(client, version, isolation):
    setup_topic(client, "f")
    unknown = UNKNOWN_ID if version >= 13 else "nosuch"
    code = errors.UNKNOWN_TOPIC_ID if version >= 13 else errors.UNKNOWN_TOPIC_OR_PARTITION
    assert fields(one(client, [(unknown, 0, 0)], version, isolation)) == (code, -1, -1, -1, [], -1, b"")
    key = topic_id(client, "f") if version >= 13 else "f"
    assert fields(one(client, [(key, 7, 0)], version, isolation)) == (
        errors.UNKNOWN_TOPIC_OR_PARTITION,
        -1,
        -1,
        -1,
        [],
        -1,
        b"",
    )


@pytest.mark.parametrize("isolation", [0, 1])
@pytest.mark.parametrize(
    "version,case",
    [
        (v, c)
        for v in VERSIONS
        for c in ("offset past the end", "negative offset", "leader epoch ahead")
        if c != "leader epoch ahead" or v >= 9
    ],
)  # CurrentLeaderEpoch: v9+
def test_failed_reads_carry_no_offsets_and_a_null_aborted_list(client, version, isolation, case):
    setup_topic(client, "g")
    key = topic_id(client, "g") if version >= 13 else "g"
    offset, epoch, code = {
        "offset past the end": (100, None, errors.OFFSET_OUT_OF_RANGE),
        "negative offset": (-5, None, errors.OFFSET_OUT_OF_RANGE),
        "leader epoch ahead": (0, 5, errors.UNKNOWN_LEADER_EPOCH),
    }[case]
    assert fields(one(client, [(key, 0, offset)], version, isolation, epoch)) == (code, -1, -1, -1, None, -1, b"")


@pytest.mark.parametrize("version", [4, 12, 18])
def test_successful_reads_aborted_list_follows_the_isolation_level(client, version):
    setup_topic(client, "h")
    key = topic_id(client, "h") if version >= 13 else "h"
    uncommitted, committed = one(client, [(key, 1, 0)], version, 0), one(client, [(key, 1, 0)], version, 1)
    assert (uncommitted.aborted_transactions, committed.aborted_transactions) == (None, [])
    assert (committed.high_watermark, committed.last_stable_offset) == (0, 0)


def test_same_answers_as_the_reference_kafka(client, reference_kafka):
    ref = reference_client(reference_kafka)
    try:
        ours, theirs = "fe", unique("fe")
        setup_topic(client, ours)
        create_topic(ref, theirs, partitions=2)
        ref_id = wait_for_topic(ref, theirs)
        produce_when_led(ref, produce_request(theirs, 0, batch([b"a", b"b", b"c"])), 9)
        ours_id = topic_id(client, ours)
        cases = [
            ("known", 0, 0, None),
            ("known", 1, 0, None),
            ("unknown", 0, 0, None),
            ("known", 7, 0, None),
            ("known", 0, 100, None),
            ("known", 0, -5, None),
            ("known", 0, 0, 5),
        ]
        for version in VERSIONS:
            for isolation in (0, 1):
                for which, partition, offset, epoch in cases:
                    if epoch is not None and version < 9:
                        continue

                    def key(name, tid):
                        if which == "unknown":
                            return UNKNOWN_ID if version >= 13 else "nosuch"
                        return tid if version >= 13 else name

                    a = one(client, [(key(ours, ours_id), partition, offset)], version, isolation, epoch)
                    b = one(ref, [(key(theirs, ref_id), partition, offset)], version, isolation, epoch)
                    where = (version, isolation, which, partition, offset, epoch)
                    assert normalized(a, drop=("records",)) == normalized(b, drop=("records",)), where
                    assert values_of(a.records) == values_of(b.records), where  # batches differ in timestamps
    finally:
        ref.close()
