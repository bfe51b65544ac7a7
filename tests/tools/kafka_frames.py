"""Kafka frames for the hand-built captures, encoded with kafkawire.protocol."""

from __future__ import annotations

from kafkawire.protocol import encode_request, encode_response, message_class, request_header
from kafkawire.protocol.records import build_batch


def api_versions(corr: int, client_id: str = "unit") -> tuple[bytes, bytes]:
    req = encode_request(
        request_header(18, 3, corr, client_id),
        message_class("ApiVersionsRequest")(client_software_name="t", client_software_version="1"),
    )
    resp_cls = message_class("ApiVersionsResponse")
    body = resp_cls(
        error_code=0,
        api_keys=[
            resp_cls.ApiVersion(api_key=k, min_version=0, max_version=v) for k, v in ((0, 9), (1, 13), (3, 12), (18, 3))
        ],
    )
    return req, encode_response(corr, body, 3)


def metadata(corr: int, topics: list[str], client_id: str = "unit", error_code: int = 0) -> tuple[bytes, bytes]:
    req_cls = message_class("MetadataRequest")
    req = encode_request(
        request_header(3, 9, corr, client_id), req_cls(topics=[req_cls.MetadataRequestTopic(name=t) for t in topics])
    )
    resp_cls = message_class("MetadataResponse")
    body = resp_cls(
        brokers=[resp_cls.MetadataResponseBroker(node_id=1, host="10.0.0.2", port=9092)],
        cluster_id="c",
        controller_id=1,
        topics=[
            resp_cls.MetadataResponseTopic(
                error_code=error_code,
                name=t,
                partitions=[
                    resp_cls.MetadataResponsePartition(partition_index=p, leader_id=1, replica_nodes=[1], isr_nodes=[1])
                    for p in range(2)
                ],
            )
            for t in topics
        ],
    )
    return req, encode_response(corr, body, 9)


def produce(
    corr: int,
    topic: str,
    partition: int,
    values: list[bytes],
    *,
    acks: int = -1,
    version: int = 8,
    client_id: str = "unit",
    error_code: int = 0,
    base_offset: int = 0,
) -> tuple[bytes, bytes]:
    req_cls = message_class("ProduceRequest")
    batch = build_batch([(None, v, [], 1_700_000_000_000 + i) for i, v in enumerate(values)])
    body = req_cls(
        acks=acks,
        timeout_ms=1000,
        topic_data=[
            req_cls.TopicProduceData(
                name=topic, partition_data=[req_cls.PartitionProduceData(index=partition, records=batch)]
            )
        ],
    )
    req = encode_request(request_header(0, version, corr, client_id), body)
    resp_cls = message_class("ProduceResponse")
    rbody = resp_cls(
        responses=[
            resp_cls.TopicProduceResponse(
                name=topic,
                partition_responses=[
                    resp_cls.PartitionProduceResponse(index=partition, error_code=error_code, base_offset=base_offset)
                ],
            )
        ]
    )
    return req, encode_response(corr, rbody, version)
