"""Connection behaviour against a scripted broker: negotiation, pipelining, timeouts, retries."""

from __future__ import annotations

import asyncio

import pytest

from kafkawire.client import AsyncProducer, Connection, ConnectionClosed, RequestTimeout
from kafkawire.client.cluster import Cluster
from kafkawire.client.retry import Backoff
from kafkawire.protocol import KafkaError, errors as kerrors, message_class
from kafkawire.protocol.negotiation import supported_ranges
from kafkawire.protocol.records import iter_batches

from .fakebroker import FakeBroker

OURS = supported_ranges()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_negotiates_highest_common_version_per_api():
    async def main():
        ranges = {18: (0, 3), 3: (0, 9), 0: (3, 7), 1: (4, 99), 9999 % 1000: (0, 0)}
        ranges = {k: v for k, v in ranges.items() if k in OURS}
        broker = await FakeBroker(ranges=ranges).start()
        conn = await Connection.open("127.0.0.1", broker.port)
        try:
            assert conn.versions[3] == 9
            assert conn.versions[0] == 7
            assert conn.versions[1] == OURS[1][1]  # the broker's max is above ours
            assert 2 not in conn.versions  # not advertised by the broker
            assert conn.broker_versions == ranges
            with pytest.raises(KafkaError) as info:
                conn.version_for(2)
            assert info.value.name == "UNSUPPORTED_VERSION"
            # the ApiVersions request went out at our highest version
            assert broker.requests[0][:2] == (18, OURS[18][1])
        finally:
            await conn.close()
            await broker.close()

    run(main())


def test_apiversions_falls_back_to_the_brokers_version():
    async def main():
        ranges = dict(OURS)
        ranges[18] = (0, 2)  # an older broker: answers our v3+/v4 with UNSUPPORTED_VERSION in a v0 body
        broker = await FakeBroker(ranges=ranges).start()
        conn = await Connection.open("127.0.0.1", broker.port)
        try:
            versions = [v for k, v, _ in broker.requests if k == 18]
            assert versions == [OURS[18][1], 2]
            assert conn.versions[18] == 2
            assert conn.versions[3] == OURS[3][1]
        finally:
            await conn.close()
            await broker.close()

    run(main())


def test_pipelined_requests_match_their_responses():
    async def main():
        broker = await FakeBroker(topics={f"t{i}": i + 1 for i in range(40)}).start()
        orig = broker._default_3

        async def slow_metadata(header, body, version):
            await asyncio.sleep(0.05)
            return orig(header, body, version)

        broker.handlers[3] = slow_metadata
        conn = await Connection.open("127.0.0.1", broker.port)
        try:
            req = message_class("MetadataRequest")
            answers = await asyncio.gather(
                *(conn.request(req(topics=[req.MetadataRequestTopic(name=f"t{i}")])) for i in range(40))
            )
            for i, resp in enumerate(answers):
                assert resp.topics[0].name == f"t{i}"
                assert len(resp.topics[0].partitions) == i + 1
            assert broker.max_in_flight > 10  # they really were in flight together
        finally:
            await conn.close()
            await broker.close()

    run(main())


def test_request_timeout_closes_the_connection():
    async def main():
        broker = await FakeBroker().start()

        async def never(header, body, version):
            await asyncio.sleep(3600)

        broker.handlers[3] = never
        conn = await Connection.open("127.0.0.1", broker.port, request_timeout=0.3)
        try:
            with pytest.raises(RequestTimeout) as info:
                await conn.request(message_class("MetadataRequest")(topics=[]))
            # a Kafka error (name, code, retriable) and a TimeoutError
            assert isinstance(info.value, KafkaError) and isinstance(info.value, TimeoutError)
            assert (info.value.name, info.value.code, info.value.retriable) == ("REQUEST_TIMED_OUT", 7, True)
            assert conn.closed
            with pytest.raises(ConnectionClosed):
                await conn.request(message_class("MetadataRequest")(topics=[]))
        finally:
            await conn.close()
            await broker.close()

    run(main())


def test_connection_refused_is_a_connection_error():
    async def main():
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with pytest.raises(ConnectionClosed) as info:
            await Connection.open("127.0.0.1", port, connect_timeout=2)
        assert isinstance(info.value, KafkaError) and isinstance(info.value, OSError)
        assert (info.value.name, info.value.code, info.value.retriable) == ("NETWORK_EXCEPTION", 13, True)

    run(main())


def _produce_response(body, version, code_for):
    cls = message_class("ProduceResponse")
    topics = []
    for t in body.topic_data:
        parts = []
        for p in t.partition_data:
            code = code_for(t.name, p.index)
            parts.append(
                cls.PartitionProduceResponse(
                    index=p.index,
                    error_code=code,
                    base_offset=-1 if code else 0,
                    log_append_time_ms=-1,
                    log_start_offset=0,
                )
            )
        topics.append(cls.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=parts))
    return cls(responses=topics)


def test_producer_retries_retriable_errors_and_refreshes_metadata():
    async def main():
        broker = await FakeBroker(topics={"t": 1}).start()
        answers = [kerrors.NOT_LEADER_OR_FOLLOWER, kerrors.REQUEST_TIMED_OUT, 0]
        seen_batches = []

        def produce(header, body, version):
            for t in body.topic_data:
                for p in t.partition_data:
                    seen_batches.extend(iter_batches(bytes(p.records)))
            code = answers.pop(0)
            return _produce_response(body, version, lambda t, p: code)

        broker.handlers[0] = produce
        p = AsyncProducer(broker.bootstrap, backoff=Backoff(0.01, 0.05), linger_ms=0)
        try:
            meta = await p.send_and_wait("t", b"v", b"k")
            assert (meta.topic, meta.partition, meta.offset) == ("t", 0, 0)
            assert broker.count(0) == 3
            assert broker.count(3) >= 2  # NOT_LEADER_OR_FOLLOWER refreshed the metadata
            # the retried batch is the same batch: same producer id, epoch and sequence
            assert {(b.producer_id, b.producer_epoch, b.base_sequence) for b in seen_batches} == {(1000, 0, 0)}
        finally:
            await p.close()
            await broker.close()

    run(main())


def test_producer_does_not_retry_fatal_errors():
    async def main():
        broker = await FakeBroker(topics={"t": 1}).start()
        broker.handlers[0] = lambda h, body, v: _produce_response(body, v, lambda t, p: kerrors.MESSAGE_TOO_LARGE)
        p = AsyncProducer(broker.bootstrap, backoff=Backoff(0.01, 0.05), linger_ms=0)
        try:
            with pytest.raises(KafkaError) as info:
                await p.send_and_wait("t", b"v")
            assert info.value.name == "MESSAGE_TOO_LARGE" and info.value.code == 10
            assert broker.count(0) == 1
        finally:
            await p.close()
            await broker.close()

    run(main())


def test_producer_waits_for_a_topic_being_created():
    async def main():
        broker = await FakeBroker(topics={}).start()
        broker.handlers[0] = lambda h, body, v: _produce_response(body, v, lambda t, p: 0)
        orig = broker._default_3
        calls = []

        def metadata(header, body, version):
            calls.append(body.allow_auto_topic_creation)
            if len(calls) == 3:  # auto-created on the third look
                broker.topics["new"] = 2
                broker.topic_ids["new"] = __import__("uuid").uuid4()
            return orig(header, body, version)

        broker.handlers[3] = metadata
        p = AsyncProducer(broker.bootstrap, backoff=Backoff(0.01, 0.05), linger_ms=0)
        try:
            meta = await p.send_and_wait("new", b"v", b"k")
            assert meta.topic == "new" and meta.partition in (0, 1)
            assert len(calls) >= 3 and all(calls)  # the producer asks for auto-creation
        finally:
            await p.close()
            await broker.close()

    run(main())


def test_cluster_metadata_refresh_on_unknown_topic_gives_up_with_kafka_error():
    async def main():
        broker = await FakeBroker(topics={}).start()
        cluster = Cluster(broker.bootstrap, backoff=Backoff(0.01, 0.02))
        try:
            with pytest.raises(KafkaError) as info:
                await cluster.topic("missing", timeout=0.3)
            assert info.value.name == "UNKNOWN_TOPIC_OR_PARTITION"
            assert broker.count(3) >= 2
        finally:
            await cluster.close()
            await broker.close()

    run(main())


def test_consumer_refreshes_metadata_on_not_leader_and_keeps_its_position():
    from kafkawire.client import AsyncConsumer
    from kafkawire.protocol.records import build_batch

    async def main():
        broker = await FakeBroker(topics={"t": 1}).start()
        log = build_batch([(b"k%d" % i, b"v%d" % i, None, 1000 + i) for i in range(10)], base_offset=0)
        errors = [kerrors.NOT_LEADER_OR_FOLLOWER, kerrors.UNKNOWN_TOPIC_OR_PARTITION]
        fetched_at = []

        def fetch(header, body, version):
            cls = message_class("FetchResponse")
            p = body.topics[0].partitions[0]
            fetched_at.append(p.fetch_offset)
            code = errors.pop(0) if errors else 0
            data = log if code == 0 and p.fetch_offset < 10 else b""
            return cls(
                responses=[
                    cls.FetchableTopicResponse(
                        topic=body.topics[0].topic,
                        topic_id=body.topics[0].topic_id,
                        partitions=[
                            cls.PartitionData(
                                partition_index=0,
                                error_code=code,
                                high_watermark=10,
                                last_stable_offset=10,
                                log_start_offset=0,
                                aborted_transactions=[],
                                preferred_read_replica=-1,
                                records=data,
                            )
                        ],
                    )
                ]
            )

        broker.handlers[1] = fetch
        c = AsyncConsumer(broker.bootstrap, backoff=Backoff(0.01, 0.05), fetch_max_wait_ms=10)
        try:
            c.assign({("t", 0): 3})
            got = []
            for _ in range(50):
                got += await c.records(0.2)
                if len(got) >= 7:
                    break
            assert [r.offset for r in got] == list(range(3, 10))  # from the position, no duplicates
            assert fetched_at[:3] == [3, 3, 3]  # errors did not move the position
            assert broker.count(3) >= 3  # each stale-metadata error refreshed
        finally:
            await c.close()
            await broker.close()

    run(main())


def test_producer_without_init_producer_id_falls_back_to_non_idempotent():
    async def main():
        ranges = {k: v for k, v in OURS.items() if k != 22}
        broker = await FakeBroker(ranges=ranges, topics={"t": 1}).start()
        batches = []

        def produce(header, body, version):
            batches.extend(iter_batches(bytes(body.topic_data[0].partition_data[0].records)))
            return _produce_response(body, version, lambda t, p: 0)

        broker.handlers[0] = produce
        p = AsyncProducer(broker.bootstrap, linger_ms=0)
        try:
            await p.send_and_wait("t", b"v")
            assert batches[0].producer_id == -1 and batches[0].base_sequence == -1
        finally:
            await p.close()
            await broker.close()

    run(main())


def test_producer_starts_over_when_the_broker_lost_its_producer_state():
    async def main():
        broker = await FakeBroker(topics={"t": 1}).start()
        pids = iter([1000, 2000])
        broker.handlers[22] = lambda h, b, v: message_class("InitProducerIdResponse")(
            error_code=0, producer_id=next(pids), producer_epoch=0
        )
        answers = [0, kerrors.UNKNOWN_PRODUCER_ID, 0]
        seen = []

        def produce(header, body, version):
            seen.extend(iter_batches(bytes(body.topic_data[0].partition_data[0].records)))
            code = answers.pop(0)
            return _produce_response(body, version, lambda t, p: code)

        broker.handlers[0] = produce
        p = AsyncProducer(broker.bootstrap, linger_ms=0, backoff=Backoff(0.01, 0.05))
        try:
            await p.send_and_wait("t", b"a")
            await p.send_and_wait("t", b"b")
            assert [(b.producer_id, b.base_sequence) for b in seen] == [(1000, 0), (1000, 1), (2000, 0)]
            assert broker.count(22) == 2
        finally:
            await p.close()
            await broker.close()

    run(main())
