"""ListOffsets answers that the conformance suite found different from Kafka 4.4's (fixed here)."""

from __future__ import annotations

import pytest

from kafkawire.protocol import errors, message_class
from kafkawire.protocol.records import build_batch

from .helpers import create_topic, produce_request


def _ask(client, topic, parts, version):
    R = message_class("ListOffsetsRequest")
    body = R(
        replica_id=-1,
        isolation_level=0,
        topics=[
            R.ListOffsetsTopic(
                name=topic,
                partitions=[
                    R.ListOffsetsPartition(partition_index=p, timestamp=ts, current_leader_epoch=-1, max_num_offsets=1)
                    for p, ts in parts
                ],
            )
        ],
    )
    return client.call(body, version).topics[0].partitions


def test_a_partition_asked_twice_gets_one_invalid_request_answer(client):
    create_topic(client, "lo-dup", partitions=2)
    client.call(produce_request("lo-dup", 0, build_batch([(None, b"a", [], 1_700_000_000_000)])), 9)
    answers = _ask(client, "lo-dup", [(0, -1), (1, -1), (0, -2)], 9)
    by_partition = {a.partition_index: a for a in answers}
    assert len(answers) == 2
    dup = by_partition[0]
    assert (dup.error_code, dup.offset, dup.timestamp, dup.leader_epoch) == (errors.INVALID_REQUEST, -1, -1, -1)
    assert (by_partition[1].error_code, by_partition[1].offset) == (0, 0)


@pytest.mark.parametrize("timestamp, first_version", [(-3, 7), (-4, 8), (-5, 9), (-6, 11), (-9, None)])
def test_special_timestamps_need_their_version(client, timestamp, first_version):
    create_topic(client, f"lo-special{-timestamp}")
    for version in range(1, 12):
        [answer] = _ask(client, f"lo-special{-timestamp}", [(0, timestamp)], version)
        supported = first_version is not None and version >= first_version
        assert answer.error_code == (0 if supported else errors.UNSUPPORTED_VERSION), (timestamp, version)


def test_records_of_the_offsets_topic_cannot_be_deleted(tmp_path):
    from kafkawire.broker.config import BrokerConfig
    from kafkawire.broker.server import start_in_thread

    from .conftest import RawClient

    # the segments engine keeps committed offsets in a real __consumer_offsets topic
    broker = start_in_thread(BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data")))
    client = RawClient(broker.address)
    try:
        _delete_offsets_topic_records(client)
    finally:
        client.close()
        broker.stop()


def _delete_offsets_topic_records(client):
    from kafkawire.protocol import message_class

    client.call(message_class("FindCoordinatorRequest")(key="g", key_type=0), 3)
    R = message_class("DeleteRecordsRequest")
    body = R(
        topics=[
            R.DeleteRecordsTopic(
                name="__consumer_offsets", partitions=[R.DeleteRecordsPartition(partition_index=0, offset=0)]
            )
        ],
        timeout_ms=1000,
    )
    [answer] = client.call(body, 2).topics[0].partitions
    assert (answer.error_code, answer.low_watermark) == (errors.INVALID_TOPIC_EXCEPTION, -1)
