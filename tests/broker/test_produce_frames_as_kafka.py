"""One Produce request, many partitions, each with its own problem, answered partition by partition as Kafka 4.4
answers it.

The produce path walks every partition's frames once (the request-level walk before any partition, which
each partition's format check then reuses) and takes the frames as the batch walk when every entry is a whole
v2 batch at least a header long. These cases check that each partition's answer still comes from its own
records, in request order, with empty record sets and two topics in between, and that a whole v2 entry
shorter than a batch header is refused without the rest of the request failing with it.
"""

from __future__ import annotations

import pytest

from kafkawire.protocol import errors, message_class

from .helpers import create_topic, produce_request, produce_request_of
from .reference import produce_when_led, reference_client, unique, wait_for_topic
from .test_produce_as_kafka import patched, records


def short_entry() -> bytes:
    """A whole magic-2 entry that declares 30 bytes after its length (42 in all): enough for any entry's
    framing (Kafka's minimum is 14), not for a v2 batch header (49)."""
    return patched(records(1), 8, ">i", 30)[:42]


def partitions() -> list[list[bytes]]:
    good = records(2)
    bad_crc = good[:-1] + bytes([good[-1] ^ 0xFF])
    return [
        [good, b"", records(3)],
        [records(1) + records(1), records(1), bad_crc, b"", patched(good, 57, ">i", 3, fix_crc=True)],
    ]


def ask(client, names, version):
    body = produce_request_of(dict(zip(names, partitions())))
    res = client.call(body, version)
    # Kafka does not keep the request's order of topics and partitions: each topic's partitions by index, the
    # topics in the order asked
    by_name = {
        t.name: sorted(
            (p.index, p.error_code, p.base_offset, p.log_start_offset, p.error_message is None)
            for p in t.partition_responses
        )
        for t in res.responses
    }
    return [by_name.get(name) for name in names]


@pytest.mark.parametrize("version", [3, 9, 11])
def test_each_partition_answered_from_its_own_records_as_kafka(client, reference_kafka, version):
    ref = reference_client(reference_kafka)
    try:
        ours = [f"pf{version}-a", f"pf{version}-b"]
        theirs = [unique(f"pf{version}-a"), unique(f"pf{version}-b")]
        # every partition led and holding one record on both brokers, so that their offsets compare
        for client_, names in ((client, ours), (ref, theirs)):
            for name, sets in zip(names, partitions()):
                create_topic(client_, name, partitions=len(sets))
                if client_ is ref:
                    wait_for_topic(ref, name)
                for i in range(len(sets)):
                    produce_when_led(client_, produce_request(name, i, records(1)), version)
        mine, kafka = ask(client, ours, version), ask(ref, theirs, version)
        assert mine == kafka
        # and the appended partitions took the records they were sent: asked again, offsets follow on
        assert ask(client, ours, version) == ask(ref, theirs, version)
    finally:
        ref.close()


def test_a_v2_entry_shorter_than_a_header_is_corrupt(client):
    """A whole magic-2 entry too short for a batch header is CORRUPT_MESSAGE for its partition (the reader's
    check, which the frames alone do not make), and the other partition of the request is appended.
    Kafka 4.4 answers such a request with UNKNOWN_SERVER_ERROR on every partition (its request-wide walk reads
    the header past the entry's end and fails the request); kafkawire keeps the answer it gave before and
    names the corruption."""
    create_topic(client, "pf-short", partitions=2)
    R = message_class("ProduceRequest")
    body = R(
        transactional_id=None,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            R.TopicProduceData(
                name="pf-short",
                partition_data=[
                    R.PartitionProduceData(index=0, records=short_entry()),
                    R.PartitionProduceData(index=1, records=records(2)),
                ],
            )
        ],
    )
    parts = client.call(body, 11).responses[0].partition_responses
    assert [(p.index, p.error_code, p.base_offset) for p in parts] == [
        (0, errors.CORRUPT_MESSAGE, -1),
        (1, errors.NONE, 0),
    ]
