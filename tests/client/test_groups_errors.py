"""Group error handling of kafkawire's client against a scripted broker (tests/client/fakebroker.py).

The coordinator's answers are scripted so that each error Kafka's client must handle comes exactly
when the test wants it; what the client sends next (member id, epoch, owned partitions, which
callbacks ran, whether it looked for the coordinator again) is checked from the recorded requests.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kafkawire.client import AsyncConsumer, GroupError
from kafkawire.client.groups.membership import fit
from kafkawire.client.groups.protocol import decode_subscription, encode_assignment
from kafkawire.protocol import ApiKey, errors as kerrors, message_class
from kafkawire.protocol.negotiation import supported_ranges

from .fakebroker import FakeBroker

TOPIC = "t"


class GroupBroker(FakeBroker):
    """One node that is also the coordinator; joins, syncs and heartbeats answer from scripts."""

    def __init__(self, partitions: int = 2):
        ranges = supported_ranges()
        ranges[ApiKey.FETCH] = (4, 12)  # fetch by topic name: simpler scripted answers
        super().__init__(ranges=ranges, topics={TOPIC: partitions})
        self.join_script: list = []  # (error_code, member_id, generation)
        self.heartbeats: list[int] = []  # classic Heartbeat error codes, in order (then 0)
        self.cgh_script: list = []  # callables(request) -> ConsumerGroupHeartbeatResponse
        self.committed = {(TOPIC, p): 5 for p in range(partitions)}
        self.sync_assignment = [(TOPIC, 0)]
        for key, fn in {
            ApiKey.FIND_COORDINATOR: self.find,
            ApiKey.JOIN_GROUP: self.join,
            ApiKey.SYNC_GROUP: self.sync,
            ApiKey.HEARTBEAT: self.heartbeat,
            ApiKey.LEAVE_GROUP: self.leave,
            ApiKey.OFFSET_FETCH: self.offset_fetch,
            ApiKey.OFFSET_COMMIT: self.offset_commit,
            ApiKey.FETCH: self.fetch,
            ApiKey.CONSUMER_GROUP_HEARTBEAT: self.cgh,
        }.items():
            self.handlers[int(key)] = fn

    def sent(self, key) -> list:
        return [body for k, _, body in self.requests if k == int(key)]

    def find(self, header, body, version):
        cls = message_class("FindCoordinatorResponse")
        if version >= 4:
            return cls(
                coordinators=[
                    cls.Coordinator(
                        key=k, node_id=1, host="127.0.0.1", port=self.port, error_code=0, error_message=None
                    )
                    for k in body.coordinator_keys
                ]
            )
        return fit(cls, version, error_code=0, node_id=1, host="127.0.0.1", port=self.port)

    def join(self, header, body, version):
        cls = message_class("JoinGroupResponse")
        code, member, generation = self.join_script.pop(0) if self.join_script else (0, body.member_id, 99)
        members = []
        if not code:
            members = [
                cls.JoinGroupResponseMember(
                    member_id=member, group_instance_id=body.group_instance_id, metadata=body.protocols[0].metadata
                )
            ]
        return fit(
            cls,
            version,
            error_code=code,
            generation_id=generation,
            protocol_type="consumer",
            protocol_name=body.protocols[0].name if not code else None,
            leader=member if not code else "",
            skip_assignment=False,
            member_id=member,
            members=members,
        )

    def sync(self, header, body, version):
        cls = message_class("SyncGroupResponse")
        return fit(
            cls,
            version,
            error_code=0,
            protocol_type="consumer",
            protocol_name=body.protocol_name,
            assignment=encode_assignment(self.sync_assignment),
        )

    def heartbeat(self, header, body, version):
        code = self.heartbeats.pop(0) if self.heartbeats else 0
        return message_class("HeartbeatResponse")(error_code=code)

    def leave(self, header, body, version):
        cls = message_class("LeaveGroupResponse")
        return fit(cls, version, error_code=0, members=[])

    def offset_fetch(self, header, body, version):
        cls = message_class("OffsetFetchResponse")
        groups = []
        for g in body.groups:
            topics = [
                cls.OffsetFetchResponseTopics(
                    name=t.name,
                    partitions=[
                        cls.OffsetFetchResponsePartitions(
                            partition_index=p,
                            committed_offset=self.committed.get((t.name, p), -1),
                            committed_leader_epoch=-1,
                            metadata="",
                            error_code=0,
                        )
                        for p in t.partition_indexes
                    ],
                )
                for t in g.topics
            ]
            groups.append(cls.OffsetFetchResponseGroup(group_id=g.group_id, topics=topics, error_code=0))
        return cls(groups=groups)

    def offset_commit(self, header, body, version):
        cls = message_class("OffsetCommitResponse")
        for t in body.topics:
            for p in t.partitions:
                self.committed[(t.name, p.partition_index)] = p.committed_offset
        return cls(
            topics=[
                cls.OffsetCommitResponseTopic(
                    name=t.name,
                    partitions=[
                        cls.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=0)
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ]
        )

    async def fetch(self, header, body, version):
        await asyncio.sleep(0.05)
        cls = message_class("FetchResponse")
        return fit(
            cls,
            version,
            error_code=0,
            session_id=0,
            responses=[
                cls.FetchableTopicResponse(
                    topic=t.topic,
                    partitions=[
                        fit(
                            cls.PartitionData,
                            version,
                            partition_index=p.partition,
                            error_code=0,
                            high_watermark=5,
                            last_stable_offset=5,
                            log_start_offset=0,
                            aborted_transactions=None,
                            preferred_read_replica=-1,
                            records=b"",
                        )
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ],
        )

    def cgh(self, header, body, version):
        cls = message_class("ConsumerGroupHeartbeatResponse")
        if self.cgh_script:
            return self.cgh_script.pop(0)(body)
        return cls(
            error_code=0,
            member_id=body.member_id,
            member_epoch=max(body.member_epoch, 0),
            heartbeat_interval_ms=50,
            assignment=None,
        )


def cgh_answer(broker: GroupBroker, epoch: int, partitions=None, code: int = 0):
    cls = message_class("ConsumerGroupHeartbeatResponse")
    assignment = None
    if partitions is not None:
        assignment = cls.Assignment(
            topic_partitions=[cls.TopicPartitions(topic_id=broker.topic_ids[TOPIC], partitions=list(partitions))]
        )

    def answer(body):
        if code:
            return cls(
                error_code=code,
                error_message=None,
                member_id=None,
                member_epoch=0,
                heartbeat_interval_ms=0,
                assignment=None,
            )
        return cls(
            error_code=0, member_id=body.member_id, member_epoch=epoch, heartbeat_interval_ms=50, assignment=assignment
        )

    return answer


async def poll_until(consumer: AsyncConsumer, predicate, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await consumer.getmany(0.05)
        if predicate():
            return
    raise AssertionError("timed out")


def test_classic_errors_member_id_required_rebalance_not_coordinator_unknown_member_fenced():
    async def main():
        b = await GroupBroker().start()
        events: list = []
        b.join_script = [(kerrors.MEMBER_ID_REQUIRED, "m-1", -1), (0, "m-1", 1), (0, "m-1", 2), (0, "m-2", 3)]
        # heartbeats: fine, then a rebalance, then the coordinator moved, then our member id is gone, then
        # another process took our static instance id
        b.heartbeats = [
            0,
            kerrors.REBALANCE_IN_PROGRESS,
            0,
            kerrors.NOT_COORDINATOR,
            0,
            kerrors.UNKNOWN_MEMBER_ID,
            0,
            kerrors.FENCED_INSTANCE_ID,
        ]
        c = AsyncConsumer(
            b.bootstrap,
            group_id="g",
            partition_assignment_strategy="range",
            heartbeat_interval_ms=50,
            session_timeout_ms=6000,
            fetch_max_wait_ms=50,
        )
        c.subscribe(
            [TOPIC],
            on_partitions_assigned=lambda tps: events.append(("assigned", tps)),
            on_partitions_revoked=lambda tps: events.append(("revoked", tps)),
            on_partitions_lost=lambda tps: events.append(("lost", tps)),
        )
        with pytest.raises(GroupError) as err:
            await poll_until(c, lambda: False)
        assert err.value.code == kerrors.FENCED_INSTANCE_ID
        await c.close()
        await b.close()
        return b, events

    b, events = asyncio.run(main())
    tp0 = [(TOPIC, 0)]
    # eager rebalance: revoked before rejoining; UNKNOWN_MEMBER_ID and FENCED_INSTANCE_ID: lost (no commit)
    assert events == [
        ("assigned", tp0),
        ("revoked", tp0),
        ("assigned", tp0),
        ("lost", tp0),
        ("assigned", tp0),
        ("lost", tp0),
    ]
    joins = b.sent(ApiKey.JOIN_GROUP)
    # the member id the coordinator asked for; kept across a rebalance; dropped after UNKNOWN_MEMBER_ID
    assert [j.member_id for j in joins] == ["", "m-1", "m-1", ""]
    assert [decode_subscription("x", None, bytes(j.protocols[0].metadata)).topics for j in joins] == [[TOPIC]] * 4
    assert len(b.sent(ApiKey.FIND_COORDINATOR)) >= 2, "NOT_COORDINATOR did not send it looking again"
    fetched = {p.fetch_offset for f in b.sent(ApiKey.FETCH) for t in f.topics for p in t.partitions}
    assert fetched == {5}, "the fetch did not start at the committed offset"
    syncs = b.sent(ApiKey.SYNC_GROUP)
    assert [s.generation_id for s in syncs] == [1, 2, 3]


@pytest.mark.parametrize("code", [kerrors.FENCED_MEMBER_EPOCH, kerrors.UNKNOWN_MEMBER_ID])
def test_consumer_protocol_fenced_member_rejoins_at_epoch_zero(code):
    async def main():
        b = await GroupBroker().start()
        events: list = []
        b.cgh_script = [cgh_answer(b, 1, [0]), cgh_answer(b, 1), cgh_answer(b, 0, code=code), cgh_answer(b, 2, [0, 1])]
        c = AsyncConsumer(b.bootstrap, group_id="g", group_protocol="consumer", fetch_max_wait_ms=50)
        c.subscribe(
            [TOPIC],
            on_partitions_assigned=lambda tps: events.append(("assigned", tps)),
            on_partitions_lost=lambda tps: events.append(("lost", tps)),
        )
        await poll_until(c, lambda: len(events) >= 3 and len(b.sent(ApiKey.CONSUMER_GROUP_HEARTBEAT)) >= 6)
        assignment = c.assignment()
        await c.close()
        await b.close()
        return b, events, assignment

    b, events, assignment = asyncio.run(main())
    assert events == [("assigned", [(TOPIC, 0)]), ("lost", [(TOPIC, 0)]), ("assigned", [(TOPIC, 0), (TOPIC, 1)])]
    assert sorted(assignment) == [(TOPIC, 0), (TOPIC, 1)]
    hb = b.sent(ApiKey.CONSUMER_GROUP_HEARTBEAT)
    member = hb[0].member_id
    assert member and all(h.member_id == member for h in hb), "the member id changed"
    assert [h.member_epoch for h in hb[:5]] == [0, 1, 1, 0, 2]
    owned = [sorted(p for t in (h.topic_partitions or []) for p in t.partitions) for h in hb[:5]]
    # joins owning nothing, acknowledges [0], heartbeats [0], rejoins owning nothing after the fence, acks [0, 1]
    assert owned == [[], [0], [0], [], [0, 1]]
    assert hb[-1].member_epoch == -1, "close() did not leave the group"


def test_no_committed_offset_with_auto_offset_reset_none():
    """auto_offset_reset="none" and a partition the group never committed: the poll raises (Kafka's
    NoOffsetForPartitionException) and the partition is not fetched."""
    from kafkawire.client.groups.membership import NoOffsetForPartitionError

    async def main():
        b = await GroupBroker().start()
        b.committed = {}
        c = AsyncConsumer(
            b.bootstrap, group_id="g", auto_offset_reset="none", heartbeat_interval_ms=50, fetch_max_wait_ms=50
        )
        c.subscribe([TOPIC])
        with pytest.raises(NoOffsetForPartitionError):
            await poll_until(c, lambda: False)
        assignment = c.assignment()
        await c.close()
        await b.close()
        return b, assignment

    b, assignment = asyncio.run(main())
    assert assignment == []
    assert not b.sent(ApiKey.FETCH) and not b.sent(ApiKey.LIST_OFFSETS)


def test_callback_error_is_raised_by_poll_and_the_rebalance_completes():
    """on_partitions_revoked raises during an eager rebalance: the poll raises it, and the member still
    gives the partitions up and joins the next generation (a rebalance stuck on a callback would stall the
    whole group)."""

    async def main():
        b = await GroupBroker().start()
        b.join_script = [(0, "m-1", 1), (0, "m-1", 2)]
        b.heartbeats = [0, kerrors.REBALANCE_IN_PROGRESS]

        def boom(tps):
            raise RuntimeError(f"callback failed on {tps}")

        c = AsyncConsumer(
            b.bootstrap,
            group_id="g",
            partition_assignment_strategy="range",
            heartbeat_interval_ms=50,
            fetch_max_wait_ms=50,
        )
        c.subscribe([TOPIC], on_partitions_revoked=boom)
        with pytest.raises(RuntimeError, match="callback failed"):
            await poll_until(c, lambda: False)
        await poll_until(c, lambda: len(b.sent(ApiKey.SYNC_GROUP)) == 2 and len(b.sent(ApiKey.HEARTBEAT)) >= 4)
        assignment = c.assignment()
        c.group.listener.revoked = None  # close() revokes too
        await c.close()
        await b.close()
        return b, assignment

    b, assignment = asyncio.run(main())
    assert assignment == [(TOPIC, 0)]
    assert [s.generation_id for s in b.sent(ApiKey.SYNC_GROUP)] == [1, 2]


def test_fetch_answer_for_a_partition_assigned_again_is_dropped():
    """A rebalance unassigns a partition and assigns it again while a fetch of it is out: the answer belongs
    to the old assignment (its position) and must not be applied to the new one, which starts elsewhere."""
    from kafkawire.protocol.records import build_batch

    async def main():
        b = await GroupBroker().start()
        release = asyncio.Event()
        calls = []

        async def fetch(header, body, version):
            calls.append([p.fetch_offset for t in body.topics for p in t.partitions])
            base = 0 if len(calls) == 1 else 5
            if len(calls) == 1:
                await release.wait()
            cls = message_class("FetchResponse")
            batch = build_batch([(None, f"v{base + i}".encode()) for i in range(3)], base_offset=base)
            return fit(
                cls,
                version,
                error_code=0,
                session_id=0,
                responses=[
                    cls.FetchableTopicResponse(
                        topic=t.topic,
                        partitions=[
                            fit(
                                cls.PartitionData,
                                version,
                                partition_index=p.partition,
                                error_code=0,
                                high_watermark=base + 3,
                                last_stable_offset=base + 3,
                                log_start_offset=0,
                                aborted_transactions=None,
                                preferred_read_replica=-1,
                                records=batch,
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in body.topics
                ],
            )

        async def list_offsets(header, body, version):
            cls = message_class("ListOffsetsResponse")
            return fit(
                cls,
                version,
                topics=[
                    cls.ListOffsetsTopicResponse(
                        name=t.name,
                        partitions=[
                            fit(
                                cls.ListOffsetsPartitionResponse,
                                version,
                                partition_index=p.partition_index,
                                error_code=0,
                                timestamp=-1,
                                offset=5,
                                leader_epoch=-1,
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in body.topics
                ],
            )

        b.handlers[int(ApiKey.FETCH)] = fetch
        b.handlers[int(ApiKey.LIST_OFFSETS)] = list_offsets
        c = AsyncConsumer(b.bootstrap, fetch_max_wait_ms=50)
        c.assign({(TOPIC, 0): 0})
        first = asyncio.get_running_loop().create_task(c.getmany(10.0))
        deadline = time.monotonic() + 10
        while not calls and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        c.assign([])  # revoked ...
        c.assign({(TOPIC, 0): "earliest"})  # ... and assigned again: starts at the log start, 5
        release.set()
        got = await first
        await c.close()
        await b.close()
        return got, calls

    got, calls = asyncio.run(main())
    assert [r.offset for r in got[(TOPIC, 0)]] == [5, 6, 7]
    assert calls[:2] == [[0], [5]]
