"""Fetch sessions (KIP-227) and idempotent producer sequence rules."""

from __future__ import annotations

from kafkawire.protocol import errors

from .conftest import msg
from .helpers import batch, create_topic, fetch_request, produce_request, values_of


def parts_of(res):
    return {(t.topic, p.partition_index): p for t in res.responses for p in t.partitions}


def test_fetch_session_incremental_and_forgotten(client, connect):
    create_topic(client, "s", partitions=3)
    producer = connect()
    producer.call(produce_request("s", 0, batch([b"a"])), 9)
    full = client.call(fetch_request([("s", 0, 0), ("s", 1, 0)], session_id=0, session_epoch=0), 12)
    assert full.error_code == 0 and full.session_id != 0
    sid = full.session_id
    assert set(parts_of(full)) == {("s", 0), ("s", 1)}
    assert values_of(parts_of(full)[("s", 0)].records) == [b"a"]
    # incremental: the client moved p0 to offset 1; nothing changed, so nothing comes back
    inc = client.call(fetch_request([("s", 0, 1)], session_id=sid, session_epoch=1), 12)
    assert inc.error_code == 0 and inc.session_id == sid and parts_of(inc) == {}
    # new data in p1 only: only p1 comes back, from the cached offset
    producer.call(produce_request("s", 1, batch([b"b"])), 9)
    inc = client.call(fetch_request([], session_id=sid, session_epoch=2), 12)
    assert set(parts_of(inc)) == {("s", 1)}
    assert values_of(parts_of(inc)[("s", 1)].records) == [b"b"]
    # add p2, forget p1
    inc = client.call(fetch_request([("s", 2, 0)], session_id=sid, session_epoch=3, forgotten=[("s", [1])]), 12)
    assert set(parts_of(inc)) == {("s", 2)}  # new partition: reported once (high watermark is new)
    producer.call(produce_request("s", 1, batch([b"c"])), 9)
    inc = client.call(fetch_request([], session_id=sid, session_epoch=4), 12)
    assert parts_of(inc) == {}  # p1 was forgotten
    producer.call(produce_request("s", 2, batch([b"d"])), 9)
    inc = client.call(fetch_request([], session_id=sid, session_epoch=5), 12)
    assert values_of(parts_of(inc)[("s", 2)].records) == [b"d"]
    # wrong epoch, unknown session
    bad = client.call(fetch_request([], session_id=sid, session_epoch=9), 12)
    assert bad.error_code == errors.INVALID_FETCH_SESSION_EPOCH
    gone = client.call(fetch_request([], session_id=sid + 1, session_epoch=1), 12)
    assert gone.error_code == errors.FETCH_SESSION_ID_NOT_FOUND
    # closing the session (epoch -1): a sessionless full fetch
    closed = client.call(fetch_request([("s", 0, 0)], session_id=sid, session_epoch=-1), 12)
    assert closed.session_id == 0 and set(parts_of(closed)) == {("s", 0)}
    after = client.call(fetch_request([], session_id=sid, session_epoch=6), 12)
    assert after.error_code == errors.FETCH_SESSION_ID_NOT_FOUND


def test_sessionless_fetch(client):
    create_topic(client, "nosession")
    res = client.call(fetch_request([("nosession", 0, 0)], session_id=0, session_epoch=-1), 12)
    assert res.session_id == 0 and res.error_code == 0


def init_producer(client, version=4):
    res = client.call(msg("InitProducerIdRequest", transactional_id=None, transaction_timeout_ms=60000), version)
    assert res.error_code == 0 and res.producer_id >= 0 and res.producer_epoch == 0
    return res.producer_id, res.producer_epoch


def produce_idem(client, topic, pid, epoch, seq, values):
    res = client.call(
        produce_request(topic, 0, batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)), 9
    )
    return res.responses[0].partition_responses[0]


def test_idempotent_sequences(client):
    create_topic(client, "idem")
    pid, epoch = init_producer(client)
    r = produce_idem(client, "idem", pid, epoch, 0, [b"a", b"b"])
    assert (r.error_code, r.base_offset) == (0, 0)
    r = produce_idem(client, "idem", pid, epoch, 2, [b"c"])
    assert (r.error_code, r.base_offset) == (0, 2)
    # a retried batch is a duplicate: same offsets, nothing appended
    r = produce_idem(client, "idem", pid, epoch, 0, [b"a", b"b"])
    assert (r.error_code, r.base_offset) == (0, 0)
    r = produce_idem(client, "idem", pid, epoch, 2, [b"c"])
    assert (r.error_code, r.base_offset) == (0, 2)
    # a gap
    r = produce_idem(client, "idem", pid, epoch, 5, [b"x"])
    assert r.error_code == errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    # a new epoch must start at 0
    r = produce_idem(client, "idem", pid, epoch + 1, 3, [b"x"])
    assert r.error_code == errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    r = produce_idem(client, "idem", pid, epoch + 1, 0, [b"d"])
    assert (r.error_code, r.base_offset) == (0, 3)
    # the old epoch is fenced
    r = produce_idem(client, "idem", pid, epoch, 3, [b"y"])
    assert r.error_code == errors.INVALID_PRODUCER_EPOCH
    f = client.call(fetch_request([("idem", 0, 0)]), 12)
    assert values_of(f.responses[0].partitions[0].records) == [b"a", b"b", b"c", b"d"]
    # DescribeProducers shows the state
    R = msg("DescribeProducersRequest").__class__
    d = client.call(R(topics=[R.TopicRequest(name="idem", partition_indexes=[0])]), 0)
    (state,) = d.topics[0].partitions[0].active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (pid, epoch + 1, 0)


def test_duplicate_window_is_five_batches(client):
    create_topic(client, "win")
    pid, epoch = init_producer(client)
    for seq in range(7):
        assert produce_idem(client, "win", pid, epoch, seq, [b"%d" % seq]).base_offset == seq
    assert produce_idem(client, "win", pid, epoch, 2, [b"2"]).base_offset == 2  # in the window
    r = produce_idem(client, "win", pid, epoch, 1, [b"1"])  # fell out of the window
    assert r.error_code == errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_unknown_producer_id_may_start_at_any_sequence(client):
    # Kafka 4.4 keeps no list of the ids it issued: a producer the partition has no state for starts anywhere
    create_topic(client, "unknown-pid")
    r = produce_idem(client, "unknown-pid", 123456, 0, 7, [b"x"])
    assert (r.error_code, r.base_offset) == (0, 0)
    r = produce_idem(client, "unknown-pid", 123456, 0, 9, [b"y"])
    assert r.error_code == errors.OUT_OF_ORDER_SEQUENCE_NUMBER  # and then continues from there


def test_init_producer_id_every_version_gives_new_ids(client):
    seen = set()
    for v in range(0, 6):
        pid, _ = init_producer(client, v)
        seen.add(pid)
    assert len(seen) == 6


def test_incremental_fetch_rotates_answered_partitions(client, connect):
    create_topic(client, "rot", partitions=2)
    producer = connect()
    for p in (0, 1):
        for _ in range(3):
            producer.call(produce_request("rot", p, batch([b"x" * 1000])), 9)
    full = client.call(fetch_request([("rot", 0, 0), ("rot", 1, 0)], session_id=0, session_epoch=0, max_bytes=1), 12)
    sid = full.session_id
    assert [p.partition_index for t in full.responses for p in t.partitions if len(p.records or b"")] == [0]
    answered = []
    for epoch in range(1, 4):
        inc = client.call(fetch_request([], session_id=sid, session_epoch=epoch, max_bytes=1), 12)
        answered.append([p.partition_index for t in inc.responses for p in t.partitions if len(p.records or b"")])
    assert [1] in answered  # partition 1 gets its turn although partition 0 always has data at its offset
