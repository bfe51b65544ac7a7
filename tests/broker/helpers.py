"""Request builders shared by the broker tests."""

from __future__ import annotations

from kafkawire.protocol import message_class
from kafkawire.protocol.records import build_batch, iter_batches


def produce_request(topic, partition, records: bytes, acks=-1, topic_id=None, transactional_id=None):
    R = message_class("ProduceRequest")
    td = R.TopicProduceData(name=topic, partition_data=[R.PartitionProduceData(index=partition, records=records)])
    if topic_id is not None:
        td.topic_id = topic_id
    return R(transactional_id=transactional_id, acks=acks, timeout_ms=5000, topic_data=[td])


def produce_request_of(topics: dict[str, list[bytes]], acks=-1):
    """One Produce request over several topics and partitions: ``{topic: [records of partition 0, of 1, ...]}``."""
    R = message_class("ProduceRequest")
    topic_data = [
        R.TopicProduceData(
            name=name,
            partition_data=[R.PartitionProduceData(index=i, records=data) for i, data in enumerate(sets)],
        )
        for name, sets in topics.items()
    ]
    return R(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=topic_data)


def fetch_request(
    parts,
    max_wait_ms=0,
    min_bytes=1,
    max_bytes=50 * 1024 * 1024,
    session_id=0,
    session_epoch=-1,
    forgotten=(),
    partition_max_bytes=1024 * 1024,
    isolation_level=0,
):
    """``parts``: [(topic or topic id, partition, offset)]"""
    R = message_class("FetchRequest")
    topics = []
    for key, partition, offset in parts:
        fp = R.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes)
        if topics and topics[-1][0] == key:
            topics[-1][1].partitions.append(fp)
            continue
        ft = (
            R.FetchTopic(topic=key, partitions=[fp])
            if isinstance(key, str)
            else R.FetchTopic(topic_id=key, partitions=[fp])
        )
        topics.append((key, ft))
    fgt = []
    for key, partitions in forgotten:
        fgt.append(
            R.ForgottenTopic(topic=key, partitions=list(partitions))
            if isinstance(key, str)
            else R.ForgottenTopic(topic_id=key, partitions=list(partitions))
        )
    return R(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=[t for _, t in topics],
        forgotten_topics_data=fgt,
    )


def batch(values, **kw) -> bytes:
    return build_batch([(None, v) for v in values], **kw)


def values_of(records) -> list:
    out = []
    for entry in iter_batches(bytes(records) if records is not None else b""):
        out.extend(r.value for r in entry.records())
    return out


def records_with_offsets(records) -> list:
    out = []
    for entry in iter_batches(bytes(records) if records is not None else b""):
        out.extend((r.offset, r.value) for r in entry.records())
    return out


def create_topic(client, name, partitions=1, configs=None, version=7):
    R = message_class("CreateTopicsRequest")
    body = R(
        topics=[
            R.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                assignments=[],
                configs=[R.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
            )
        ],
        timeout_ms=5000,
        validate_only=False,
    )
    res = client.call(body, version)
    assert res.topics[0].error_code == 0, res
    return res.topics[0]
