"""Large Produce requests on the segments engine: their appends run in the storage threads (the event loop keeps
serving while the records are written), and answers stay in request order and come after the append."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.handlers.produce import OFFLOAD_APPEND_BYTES
from kafkawire.broker.server import Broker, start_in_thread
from kafkawire.broker.storage import segment
from kafkawire.protocol.records import iter_batches

from .conftest import RawClient, msg
from .helpers import batch, create_topic, fetch_request, produce_request, produce_request_of
from .test_admin import list_offsets

RECORD = b"v" * 100
LARGE = 2000  # records of 100 B: a batch of ~230 KB, above OFFLOAD_APPEND_BYTES
SMALL = 10


def _large_batch() -> bytes:
    records = batch([RECORD] * LARGE)
    assert len(records) >= OFFLOAD_APPEND_BYTES
    return records


@pytest.fixture
def segments_broker(tmp_path):
    # acks.all.fsync off: no append needs an fsync, so only the size of a request sends it to a storage thread
    b = start_in_thread(BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data"), acks_all_fsync=False))
    try:
        yield b
    finally:
        b.stop()


def held(original, when):
    """``original`` wrapped so that a call for which ``when(*args)`` holds waits (up to 30 s) for the test:
    (the wrapper, the event set when such a call is reached, the event that lets it go on)."""
    reached, release = threading.Event(), threading.Event()

    def wrapper(*args, **kwargs):
        if when(*args):
            reached.set()
            release.wait(30)
        return original(*args, **kwargs)

    return wrapper, reached, release


def serves_while_held(broker, topic: str, records: bytes, reached, release, what: str) -> None:
    """``records`` produced (acks=1) to a new ``topic``: once its append has reached the held call, another
    connection is answered meanwhile (an append on the event loop would hold the loop until released, and that
    call would time out); let go, the produce is answered at offset 0."""
    admin = RawClient(broker.address)
    producer = RawClient(broker.address, timeout=30)
    other = RawClient(broker.address, timeout=10)
    try:
        create_topic(admin, topic)
        cid = producer.send(produce_request(topic, 0, records, acks=1), 9)
        assert reached.wait(10), what
        versions = other.call(msg("ApiVersionsRequest", client_software_name="t", client_software_version="1"), 3)
        assert versions.error_code == 0
        release.set()
        answer = producer.recv(0, 9, cid).responses[0].partition_responses[0]
        assert (answer.error_code, answer.base_offset) == (0, 0)
    finally:
        release.set()
        for c in (admin, producer, other):
            c.close()


def test_event_loop_answers_while_a_large_append_is_written(segments_broker, monkeypatch):
    # the large batch's write waits until the test lets it finish
    write, reached, release = held(
        segment.LogSegment.write, lambda _self, _buffers, total: total >= OFFLOAD_APPEND_BYTES
    )
    monkeypatch.setattr(segment.LogSegment, "write", write)
    serves_while_held(
        segments_broker, "big", _large_batch(), reached, release, "the large batch never reached the segment"
    )


def test_pipelined_large_and_small_produces_answer_in_order_after_their_appends(segments_broker):
    c = RawClient(segments_broker.address, timeout=30)
    try:
        create_topic(c, "mixed")
        sizes = [LARGE, SMALL, LARGE, SMALL, SMALL]
        cids = [
            c.send(produce_request("mixed", 0, _large_batch() if n == LARGE else batch([RECORD] * n), acks=1), 9)
            for n in sizes
        ]
        offsets = []
        for cid in cids:  # RawClient.recv checks each answer's correlation id: the order requests were sent in
            pr = c.recv(0, 9, cid).responses[0].partition_responses[0]
            assert pr.error_code == 0
            offsets.append(pr.base_offset)
        assert offsets == [sum(sizes[:i]) for i in range(len(sizes))]
        end = list_offsets(c, "mixed", -1)
        assert end.offset == sum(sizes)  # every acknowledged batch is in the log
    finally:
        c.close()


def test_pipelined_requests_of_many_large_partitions_answer_in_order(segments_broker):
    """A request's large partitions go to the storage threads together (one hand-over), a partition still busy
    with an earlier request's append waits its turn: pipelined requests over four partitions, large and small
    batches mixed, are answered in order with each partition's offsets consecutive, and everything is in the log."""
    c = RawClient(segments_broker.address, timeout=30)
    try:
        create_topic(c, "many", partitions=4)
        plans = [[LARGE, LARGE, SMALL, LARGE], [LARGE, SMALL, LARGE, LARGE], [SMALL, LARGE, LARGE, SMALL]] * 2
        cids = [
            c.send(
                produce_request_of({"many": [_large_batch() if n == LARGE else batch([RECORD] * n) for n in plan]}, 1),
                9,
            )
            for plan in plans
        ]
        written = [0, 0, 0, 0]
        for plan, cid in zip(plans, cids):
            answer = c.recv(0, 9, cid).responses[0].partition_responses
            assert [(pr.index, pr.error_code, pr.base_offset) for pr in answer] == [
                (i, 0, written[i]) for i in range(4)
            ]
            written = [w + n for w, n in zip(written, plan)]
        for i in range(4):
            assert list_offsets(c, "many", -1, partition=i).offset == written[i]
    finally:
        c.close()


def test_a_small_first_append_of_an_epoch_writes_its_checkpoint_off_the_event_loop(segments_broker, monkeypatch):
    """A partition's first batch in an epoch writes the leader-epoch checkpoint (fsynced, with its directory):
    even a small append with no fsync due goes to the storage threads for it, and the event loop keeps serving."""
    from kafkawire.broker.storage.kraft import leader_epochs

    write, reached, release = held(leader_epochs.files.write_atomically, lambda path, *_: "first-0" in str(path))
    monkeypatch.setattr(leader_epochs.files, "write_atomically", write)
    serves_while_held(
        segments_broker, "first", batch([RECORD] * SMALL), reached, release, "the first append wrote no checkpoint"
    )
    # the next small append has nothing to write: inline again, answered after it
    c = RawClient(segments_broker.address, timeout=30)
    try:
        assert produce_small(c, "first") == SMALL
    finally:
        c.close()


def produce_small(client, topic: str) -> int:
    pr = client.call(produce_request(topic, 0, batch([RECORD] * SMALL), acks=1), 9).responses[0].partition_responses[0]
    assert pr.error_code == 0
    return pr.base_offset


@pytest.mark.parametrize("acks", [1, -1])
def test_an_idempotent_producers_epoch_is_not_taken_for_the_leader_epoch(tmp_path, acks):
    """A batch of an idempotent producer whose producer epoch (7) is above the partition's leader epoch (0),
    appended inline (acks=1, no fsync due) and through the storage threads (acks=-1, fsynced): the partition's
    leader epoch history keeps its one entry, epoch 0 from offset 0, as Kafka's does, and the batch is
    stamped with leader epoch 0. (A producer epoch taken for the leader epoch gave the history a future epoch,
    and Kafka Streams' read_committed consumers, answered with diverging epochs, read records twice.)"""
    b = start_in_thread(BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data")))
    c = RawClient(b.address, timeout=30)
    try:
        create_topic(c, "idem")
        records = batch([RECORD] * SMALL, producer_id=4321, producer_epoch=7, base_sequence=0)
        pr = c.call(produce_request("idem", 0, records, acks=acks), 9).responses[0].partition_responses[0]
        assert (pr.error_code, pr.base_offset) == (0, 0)
        end = list_offsets(c, "idem", -1)
        assert (end.offset, end.leader_epoch) == (SMALL, 0)
        checkpoint = tmp_path / "data" / "idem-0" / "leader-epoch-checkpoint"
        assert checkpoint.read_text().split() == ["0", "1", "0", "0"]
        fetched = c.call(fetch_request([("idem", 0, 0)]), 12).responses[0].partitions[0]
        assert [e.partition_leader_epoch for e in iter_batches(bytes(fetched.records))] == [0]
    finally:
        c.close()
        b.stop()


def test_a_stopping_broker_fails_the_joint_jobs_appends_and_what_queued_behind_them(tmp_path):
    """The loop ends (the broker stopping) while one request's partitions are appended as one job in a storage
    thread, with another append queued behind one of them, and another partition's append runs on its own:
    every waiting produce gets an error (none waits for ever), the queued append never runs, and no partition is
    left marked busy."""
    broker = Broker(BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data"), acks_all_fsync=False))
    reached, release = threading.Semaphore(0), threading.Event()
    ran = []

    def held(name):
        def job(_durable):
            reached.release()
            release.wait(30)
            ran.append(name)
            return name, False

        return job

    futures = {}

    async def scenario():
        items = [("t", p, None, held(f"joint-{p}"), False) for p in (0, 1)]
        futures["joint"] = broker.submit_appends(items)
        futures["alone"] = broker.submit_append("t", 2, None, held("alone"), False)
        for _ in range(2):  # both jobs in their threads
            assert await asyncio.get_running_loop().run_in_executor(None, reached.acquire, True, 10)
        futures["queued"] = broker.submit_append("t", 1, None, held("queued"), False)
        assert not any(broker.partition_idle("t", p) for p in (0, 1, 2))
        # returning ends asyncio.run, which cancels the tasks left: the joint job's among them

    try:
        asyncio.run(scenario())
    finally:
        release.set()
        broker._executor.shutdown(wait=True)
        broker._controller.shutdown(wait=True)
        broker.storage.close()
    for fut in [*futures["joint"], futures["alone"], futures["queued"]]:
        assert fut.done() and isinstance(fut.exception(), RuntimeError), fut
        assert "shutting down" in str(fut.exception())
    assert sorted(ran) == ["alone", "joint-0", "joint-1"]  # the threads finished their jobs; the queued one never ran
    assert all(broker.partition_idle("t", p) for p in (0, 1, 2))


def test_the_fsyncs_of_one_requests_partitions_overlap(tmp_path, monkeypatch):
    """acks=all with fsync on: one request's large partitions are fsynced at the same time in the storage
    threads, not one after the other (each fsync here waits until the other partition's has started too)."""
    started, overlapped, both = [], [], threading.Event()
    lock = threading.Lock()
    original = segment.LogSegment.fsync_log

    def fsync_log(self):
        if "dur-" in self.log_path:
            with lock:
                started.append(self.log_path)
                if len(started) >= 2:
                    both.set()
            overlapped.append(both.wait(5))  # False: no other fsync started within 5 s of this one
        return original(self)

    monkeypatch.setattr(segment.LogSegment, "fsync_log", fsync_log)
    broker = start_in_thread(BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data")))
    client = RawClient(broker.address, timeout=30)
    try:
        create_topic(client, "dur", partitions=2)
        answer = client.call(produce_request_of({"dur": [_large_batch(), _large_batch()]}, -1), 9)
        partitions = answer.responses[0].partition_responses
        assert [(p.error_code, p.base_offset) for p in partitions] == [(0, 0), (0, 0)]
        assert len(started) == 2 and all(overlapped), (started, overlapped)  # each under way while the other began
    finally:
        both.set()
        client.close()
        broker.stop()


def test_a_stopping_broker_lets_an_append_under_way_finish_before_it_closes_storage(tmp_path, monkeypatch):
    """The broker is told to stop while an append runs in a storage thread: the append finishes and its produce
    gets its answer before storage is flushed and closed (an append racing storage.close() in another thread
    could lose acknowledged records; a task left pending when the loop closes is torn down half-way)."""
    from kafkawire.broker import server

    monkeypatch.setattr(server, "STOP_STORAGE_WAIT_S", 30.0)  # the wait, not its bound, is what is tested here
    b = start_in_thread(BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data"), acks_all_fsync=False))
    reached, release = threading.Event(), threading.Event()
    events = []
    close = b.broker.storage.close

    def closing():
        events.append("storage closed")
        close()

    b.broker.storage.close = closing

    def job(_durable):
        reached.set()
        release.wait(30)
        events.append("append done")
        return "appended", False

    futures = []
    b.call(lambda: futures.append(b.broker.submit_append("t", 0, None, job, False)))
    assert reached.wait(10)
    stopper = threading.Thread(target=b.stop)
    stopper.start()
    try:
        stopper.join(0.5)
        assert stopper.is_alive()  # waiting for the append, not past it
        assert events == []
    finally:
        release.set()
        stopper.join(30)
    assert not stopper.is_alive()
    assert events == ["append done", "storage closed"]
    (fut,) = futures
    assert fut.done() and fut.result() == "appended"


def test_a_stopping_broker_waits_for_a_hung_append_only_so_long(tmp_path, monkeypatch, caplog):
    """A storage thread that never comes back (a disk that stopped answering) does not keep the broker from
    stopping: it waits STOP_STORAGE_WAIT_S, says what it left, fails the produce waiting on it, and stops."""
    from kafkawire.broker import server

    monkeypatch.setattr(server, "STOP_STORAGE_WAIT_S", 0.5)
    b = start_in_thread(BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data"), acks_all_fsync=False))
    reached, release = threading.Event(), threading.Event()

    def job(_durable):
        reached.set()
        release.wait(30)
        return "appended", False

    futures = []
    b.call(lambda: futures.append(b.broker.submit_append("t", 0, None, job, False)))
    assert reached.wait(10)
    stopper = threading.Thread(target=b.stop)
    try:
        with caplog.at_level("WARNING", logger="kafkawire.broker.server"):
            stopper.start()
            stopper.join(20)
            assert not stopper.is_alive()
            assert b._stopped.is_set()
        assert "still under way" in caplog.text
        (fut,) = futures  # its produce was answered with an error, not left waiting
        assert fut.done() and "shutting down" in str(fut.exception())
    finally:
        release.set()
        stopper.join(30)


def test_a_stop_with_a_budget_still_flushes_and_closes_storage_when_its_waits_use_it_up(tmp_path, caplog):
    """``kafkawire serve`` gives the stop 1.5 s. Listeners slow to close use most of it and an append is hung in
    its storage thread: the storage wait gets what is left, the produce is failed, and storage is still flushed
    and closed, within the budget (cutting the stop off from outside, as serve did, skipped the flush and close
    and left the logs to the next start's recovery)."""
    events: list[str] = []
    release = threading.Event()

    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        broker = Broker(BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data"), acks_all_fsync=False))
        await broker.start()
        storage = broker.storage
        flush, close = storage.flush, storage.close
        storage.flush = lambda: (events.append("storage flushed"), flush())[1]
        storage.close = lambda: (events.append("storage closed"), close())[1]
        listener = broker.servers[0]
        close_listener = listener.close

        async def slow_close(wait: float = 1.0) -> None:
            await asyncio.sleep(min(wait, 1.2))  # connections that take long to go
            events.append(f"listener closed within {wait:.1f} s")
            await close_listener(wait)

        listener.close = slow_close
        reached = threading.Event()

        def job(_durable):
            reached.set()
            release.wait(30)
            return "appended", False

        fut = broker.submit_append("t", 0, None, job, False)
        assert await loop.run_in_executor(None, reached.wait, 10)
        started = time.monotonic()
        await broker.stop(1.5)
        elapsed = time.monotonic() - started
        assert fut.done() and "shutting down" in str(fut.exception())
        return elapsed

    try:
        with caplog.at_level("WARNING", logger="kafkawire.broker.server"):
            elapsed = asyncio.run(scenario())
    finally:
        release.set()
    assert events == ["listener closed within 1.0 s", "storage flushed", "storage closed"], events
    assert "still under way" in caplog.text
    assert elapsed < 2.5, elapsed  # the budget, and the flush and close after it
