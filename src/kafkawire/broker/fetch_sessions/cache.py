"""Fetch sessions (KIP-227): the broker remembers what a consumer fetches so that later requests only name
what changed, and responses only carry partitions with something new.

Request (session_id, epoch):
- (0, -1): a full fetch without a session.
- (any, 0): a full fetch that creates a session (an old session with that id is dropped).
- (id, -1): drops the session, then a full fetch without a session.
- (id, n > 0): an incremental fetch; the session must exist (else FETCH_SESSION_ID_NOT_FOUND) and expect
  epoch n (else INVALID_FETCH_SESSION_EPOCH). Partitions named in the request are added or updated,
  forgotten topics removed; the response carries only partitions with records, a changed high watermark,
  log start offset or last stable offset, or an error.
"""

from __future__ import annotations

import time
from collections import OrderedDict

import msgspec

from kafkawire.protocol import errors

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_SESSIONS = 1000  # max.incremental.fetch.session.cache.slots


class CachedPartition(msgspec.Struct):
    topic_key: object  # name (v<13) or topic id (v13+)
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1  # v12+: the epoch of the last batch the fetcher has (-1: not given)
    # what the last response said (to decide whether an incremental response must include the partition)
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1


class FetchSession:
    def __init__(self, session_id: int, by_id: bool):
        self.id = session_id
        self.epoch = 1  # the epoch the next incremental request must carry
        self.by_id = by_id
        self.partitions: OrderedDict[tuple, CachedPartition] = OrderedDict()
        self.last_used = time.monotonic()


class FetchContext(msgspec.Struct):
    error: int = 0
    session: FetchSession | None = None
    incremental: bool = False
    partitions: list | None = None  # [CachedPartition] to read, in response order
    response_session_id: int = 0


class FetchSessionCache:
    def __init__(self, max_sessions: int = MAX_SESSIONS):
        self.max_sessions = max_sessions
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self.sessions)

    def _new_id(self) -> int:
        import random  # here, at the first session: not among the modules every broker start imports (~1 ms)

        while True:
            sid = random.randint(1, 2**31 - 1)
            if sid not in self.sessions:
                return sid

    def new_context(
        self,
        session_id: int,
        epoch: int,
        requested: list[CachedPartition],
        forgotten: list[tuple],
        by_id: bool,
        use_sessions: bool,
    ) -> FetchContext:
        """``requested``: the request's partitions; ``forgotten``: (topic_key, partition) pairs."""
        if not use_sessions:  # Fetch v0-6
            return FetchContext(partitions=requested)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id:
                self.sessions.pop(session_id, None)
            if epoch == FINAL_EPOCH:
                return FetchContext(partitions=requested)
            session = FetchSession(self._new_id(), by_id)
            for p in requested:
                session.partitions[(p.topic_key, p.partition)] = p
            self._insert(session)
            return FetchContext(
                session=session, partitions=list(session.partitions.values()), response_session_id=session.id
            )
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext(error=errors.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(error=errors.INVALID_FETCH_SESSION_EPOCH)
        if session.by_id != by_id:
            return FetchContext(error=errors.FETCH_SESSION_TOPIC_ID_ERROR)
        for key in forgotten:
            session.partitions.pop(key, None)
        for p in requested:
            key = (p.topic_key, p.partition)
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = p
            else:
                cached.fetch_offset = p.fetch_offset
                cached.max_bytes = p.max_bytes
                cached.current_leader_epoch = p.current_leader_epoch
                cached.last_fetched_epoch = p.last_fetched_epoch
        session.epoch = 1 if session.epoch >= 2**31 - 1 else session.epoch + 1
        session.last_used = time.monotonic()
        self.sessions.move_to_end(session.id)
        return FetchContext(
            session=session,
            incremental=True,
            partitions=list(session.partitions.values()),
            response_session_id=session.id,
        )

    def _insert(self, session: FetchSession) -> None:
        while len(self.sessions) >= self.max_sessions:
            self.sessions.popitem(last=False)  # evict the least recently used
        self.sessions[session.id] = session

    def forget_topic(self, name: str, topic_id) -> None:
        for session in self.sessions.values():
            for key in [k for k in session.partitions if k[0] in (name, topic_id)]:
                del session.partitions[key]
