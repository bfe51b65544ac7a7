"""The default engine: Kafka-style log segments on local disk.

Layout of ``data_dir``::

    meta.properties                    cluster.id, node.id, version
    __kafkawire_meta/topics.json       topics: name, id, partition count, explicit configs
    log-start-offset-checkpoint        log start offsets moved by DeleteRecords
    <topic>-<partition>/
        partition.metadata             the topic id owning this directory
        00000000000000000000.log       v2 batches exactly as Kafka stores them
        00000000000000000000.index     sparse offset -> position index
        00000000000000000000.timeindex sparse timestamp -> offset index
        00000000000000000000.txnindex  aborted transactions whose marker is in this segment (Kafka's AbortedTxn)
        00000000000000001234.snapshot  every producer's state as of that offset (Kafka's producer snapshot), written
                                       at each roll and clean close (``txn``, ``snapshot``)

Durability, kafkawire's default: an append with ``durable=True`` returns only
after the segment is fsynced, and the broker passes ``durable=True`` for
acks=all produce requests (``StorageConfig.fsync_acks_all``, on unless the
operator sets ``kafkawire.log.fsync.acks.all=false``). That is stronger than
Kafka, which acknowledges from the page cache and relies on replicas: a single
node has no replicas, so its disk is the only copy of an acknowledged record.
Concurrent durable appends share one fsync (whoever fsyncs covers everything
written before it). Independently, ``flush.messages`` /
``log.flush.interval.messages`` and ``flush.ms`` / ``log.flush.interval.ms``
force periodic fsyncs (Kafka's defaults: never); the broker calls
``flush_due(now_ms)`` on a timer for the latter. Segments are fsynced (log and
indexes) when they roll, so after a crash only the active segment can have a
torn tail; ``recovery`` checks it on every start.

Reads return ``memoryview``s of read-only mmaps of the segment files (zero
copies; one chunk per segment touched). ``read_regions`` returns
``FileRegion``s instead, for ``os.sendfile`` (copies, as ``read`` gives then, when
open files are scarce: a range holds its file's descriptor until it is sent).

Disk failures: an OSError while writing (no space, I/O error...) fails the
append with ``LogDirError`` (Kafka's KAFKA_STORAGE_ERROR) and marks the log
directory offline for writes (``log_dir_failure``); reads go on. Kafka would
stop a broker whose every log dir failed and let another replica lead; a single
node has no other replica, so kafkawire keeps serving reads and, when the
failure was a full disk, lets writes through again once ``statvfs`` shows room
for them (an I/O error keeps the directory offline until a restart). Too many
open files (EMFILE) fails the one operation without marking anything offline.
A start on a disk with less than ``MIN_FREE_BYTES`` free begins offline for
writes and says so.

Damage: recovery (``recovery``) quarantines damaged batches on start; the
optional scrubber (``start_scrubber``) re-reads sealed segments at a bounded
rate in a background thread and repairs a damaged one in place, so a batch
whose CRC is known bad is never served.

Threads: the broker may run appends (and their fsyncs) in an executor while
the event loop reads. Per partition, one lock serialises writers (append,
roll, retention, DeleteRecords) and another guards what readers look at; a
writer holds the latter only to publish a write, never during file I/O or an
fsync, so readers never wait for the disk.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
import weakref
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping

from . import _batch, cleaner, metadata, recovery, snapshot, topics, txn
from .base import (
    AppendResult,
    InvalidPartitionsError,
    NewTopic,
    OffsetOutOfRangeError,
    PartitionLog,
    ReadResult,
    Storage,
    StorageError,
    TopicExistsError,
    TopicMeta,
    UnknownTopicError,
)
from .config import StorageConfig, TopicSettings
from .recovery import load_segments
from .segment import LogDirError, LogSegment, set_open_limit

log = logging.getLogger("kafkawire.storage")

_MAX_RELATIVE_OFFSET = 2**31 - 1  # index entries store offsets relative to the segment's base as i32


MIN_FREE_BYTES = 1 << 20  # below this a start begins offline for writes; writes resume with this much to spare


def _wall_ms() -> int:
    return int(time.time() * 1000)


class LogDirState:
    """Whether the log directory takes writes (see the module docstring); one per directory."""

    _all: weakref.WeakValueDictionary[str, LogDirState] = weakref.WeakValueDictionary()
    _all_lock = threading.Lock()

    @classmethod
    def of(cls, path: str) -> LogDirState:
        key = os.path.realpath(path)
        with cls._all_lock:
            state = cls._all.get(key)
            if state is None:
                state = cls._all[key] = cls(key)
            return state

    def __init__(self, path: str):
        self.path = path
        self.failure: LogDirError | None = None
        self._lock = threading.Lock()
        self.fsync_observer: Callable[[float], None] | None = None  # gets each fsync's duration in seconds

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def failed(self, exc: LogDirError) -> None:
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            return  # the process's limit, not the disk
        with self._lock:
            first = self.failure is None
            if first or (self.failure.out_of_space and not exc.out_of_space):
                self.failure = exc
        if first:
            log.error(
                "log dir %s is offline for writes (reads continue): %s; %s",
                self.path,
                exc,
                "writes resume when space is freed" if exc.out_of_space else "writes resume after a restart",
            )

    def check(self, need: int = 0) -> None:
        """Raise LogDirError while the directory is offline; a full disk that has room again comes back."""
        failure = self.failure
        if failure is None:
            return
        if failure.out_of_space:
            try:
                free = self.free_bytes()
            except OSError:
                free = 0
            if free >= need + MIN_FREE_BYTES:
                with self._lock:
                    if self.failure is failure:
                        self.failure = None
                log.warning("log dir %s has %d bytes free again: writes resume", self.path, free)
                return
        raise LogDirError(f"log dir {self.path} is offline: {failure}", failure.errno)


def _disk_error(state: LogDirState, what: str, exc: BaseException) -> LogDirError:
    err = exc if isinstance(exc, LogDirError) else LogDirError.wrap(what, exc)
    state.failed(err)
    return err


class SegmentPartitionLog(topics.LogOffsets, PartitionLog):
    def __init__(
        self,
        topic: str,
        partition: int,
        directory: str,
        segments: list[LogSegment],
        log_start: int,
        settings: Callable[[], TopicSettings],
        checkpoint: Callable[[], None],
        clock: Callable[[], int],
        producers: Callable[[], object] | None = None,
    ):
        self.topic, self.partition, self.directory = topic, partition, directory
        self._producers = producers or (lambda: None)  # the storage's ``producer_state`` (see snapshot.py)
        self._dir = LogDirState.of(os.path.dirname(directory))
        self._settings, self._checkpoint, self._clock = settings, checkpoint, clock
        self._write_lock = threading.Lock()  # one writer at a time
        self._state_lock = threading.Lock()  # what readers see
        self._flush_lock = threading.Lock()  # one fsync at a time; late comers find their data already covered
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._end = segments[-1].next_offset
        self._start = min(max(log_start, segments[0].base_offset), self._end)
        self._size = sum(s.size for s in segments)
        # Sealed segments were fsynced when they rolled; the active one's pages may still be only in
        # the page cache (the previous process was killed), so its first flush really fsyncs.
        self._flushed_offset = segments[-1].base_offset
        self._unflushed_messages = 0
        self._last_flush_ms = clock()
        self._closed = False
        self._txn = txn.TxnState()  # open and aborted transactions (``recover_transactions`` on a start)

    # ------------------------------------------------------------ offsets

    @property
    def segments(self) -> list[LogSegment]:
        """A snapshot of the segments, oldest first (for tools and tests)."""
        with self._state_lock:
            return list(self._segments)

    @property
    def flushed_offset(self) -> int:
        """Every record below this offset is on stable storage."""
        return self._flushed_offset

    # ------------------------------------------------------------- append

    def append(self, batches, *, log_append_time: int | None = None, durable: bool = False) -> AppendResult:
        view = memoryview(batches).cast("B")
        infos = _batch.split(view)
        settings = self._settings()
        only = None
        if len(infos) == 1:  # a Produce request's one batch (v3+ allows no more): no walks over a list
            only = infos[0]
            total, records, messages = only.size, only.last_offset - only.base_offset + 1, only.record_count
            incoming_max_ts = log_append_time if log_append_time is not None else only.max_timestamp
        else:
            total = sum(i.size for i in infos)
            records = sum(i.last_offset - i.base_offset + 1 for i in infos)
            messages = sum(i.record_count for i in infos)
            incoming_max_ts = log_append_time if log_append_time is not None else max(i.max_timestamp for i in infos)
        with self._write_lock:
            if self._closed:
                raise StorageError(f"{self.topic}-{self.partition} is closed")
            if self._dir.failure is not None:  # (check() returns at once while the directory is online)
                self._dir.check(total)
            first = self._end
            try:
                if self._should_roll(settings, total, incoming_max_ts, first + records - 1):
                    self._roll()
                segment = self._segments[-1]
                if only is not None and log_append_time is None:
                    buffers, info = _batch.stored_one(view, only, first, segment.size)
                    written = (info,)
                else:
                    buffers, written = [], []
                    for chunks, info in _batch.stored(view, infos, first, log_append_time, segment.size):
                        buffers += chunks
                        written.append(info)
                next_offset = info.last_offset + 1
                segment.write(buffers, total)
            except (OSError, LogDirError) as exc:
                raise _disk_error(self._dir, f"append to {self.topic}-{self.partition} failed", exc) from exc
            events = None
            if txn.any_transactional(view, infos):
                events = list(txn.events(view, [(i.position, i.size, w.base_offset) for i, w in zip(infos, written)]))
            aborted = None
            with self._state_lock:
                segment.commit(written, settings.index_interval_bytes)
                self._size += total
                self._end = next_offset
                if events:
                    aborted = []
                    for event in events:
                        done = self._txn.apply(event)
                        if done is not None:
                            aborted.append(done)
            if aborted:
                try:
                    txn.append_index(segment.txn_index_path, aborted)
                except OSError as exc:  # the seal (or a restart's replay) writes it again
                    log.warning("cannot append to %s: %s", segment.txn_index_path, exc)
            self._unflushed_messages += messages
            start = self._start
        if (
            durable
            or self._unflushed_messages >= settings.flush_messages
            or (settings.flush_ms is not None and self._clock() - self._last_flush_ms >= settings.flush_ms)
        ):
            try:
                self._flush_to(next_offset)
            except OSError as exc:  # the data is written but not known to be on disk: not acknowledged
                raise _disk_error(self._dir, f"fsync of {self.topic}-{self.partition} failed", exc) from exc
        return AppendResult(first, next_offset - 1, -1 if log_append_time is None else log_append_time, start)

    def _should_roll(self, settings: TopicSettings, incoming: int, incoming_max_ts: int, last_offset: int) -> bool:
        active = self._segments[-1]
        if active.size == 0:
            return False
        if active.size > settings.segment_bytes - incoming:
            return True
        if active.first_batch_timestamp >= 0 and incoming_max_ts >= 0:
            waited = incoming_max_ts - active.first_batch_timestamp  # Kafka measures in record time
        else:
            waited = self._clock() - active.created_ms
        return waited > settings.segment_ms or last_offset - active.base_offset > _MAX_RELATIVE_OFFSET

    def _roll(self) -> None:
        """Seal the active segment and start a new one at the log end (caller holds the write lock)."""
        old = self._segments[-1]
        observe = self._dir.fsync_observer
        if observe is None:
            old.seal()  # fsyncs log and indexes: sealed segments never need recovery
        else:
            t0 = time.perf_counter()
            old.seal()
            observe(time.perf_counter() - t0)
        self._write_txn_index(old, fsync=True)
        new = LogSegment(self.directory, self._end, created_ms=self._clock())
        new.create()
        # As Kafka at every roll: every producer's state as of the new segment's base, so a restart replays
        # no more than the active segment to rebuild it (open transactions and idempotence)
        self._write_producer_snapshot(new.base_offset, fsync=True)
        metadata.fsync_dir(self.directory)
        with self._state_lock:
            self._segments.append(new)
            self._bases.append(new.base_offset)
        self._note_flushed(old.next_offset)

    def roll(self) -> None:
        """Start a new segment now (if the active one holds anything)."""
        with self._write_lock:
            if self._segments[-1].size:
                self._roll()

    # -------------------------------------------------------------- flush

    def _note_flushed(self, offset: int) -> None:
        with self._flush_lock:
            if offset > self._flushed_offset:
                self._flushed_offset = offset

    def _flush_to(self, offset: int) -> None:
        with self._flush_lock:
            if self._flushed_offset >= offset:
                return  # someone else's fsync already covered it
            with self._state_lock:
                active, end = self._segments[-1], self._end
            observe = self._dir.fsync_observer
            if observe is None:
                active.fsync_log()  # anything before the active segment was fsynced when it rolled
            else:
                t0 = time.perf_counter()
                active.fsync_log()
                observe(time.perf_counter() - t0)
            self._flushed_offset = max(self._flushed_offset, end)
            self._unflushed_messages = 0
            self._last_flush_ms = self._clock()

    def flush(self) -> None:
        self._flush_to(self._end)

    def flush_if_due(self, now_ms: int) -> bool:
        flush_ms = self._settings().flush_ms
        if flush_ms is None or self._flushed_offset >= self._end or now_ms - self._last_flush_ms < flush_ms:
            return False
        self.flush()
        return True

    # --------------------------------------------------------------- read

    def read(self, offset: int, max_bytes: int, *, min_one: bool = True) -> ReadResult:
        return self._read(offset, max_bytes, min_one, regions=False)

    def read_regions(self, offset: int, max_bytes: int, *, min_one: bool = True) -> ReadResult:
        return self._read(offset, max_bytes, min_one, regions=True)

    def _read(self, offset: int, max_bytes: int, min_one: bool, regions: bool, committed: bool = False) -> ReadResult:
        with self._state_lock:
            start, end = self._start, self._end
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(offset, start, end)
            lso = self._txn.last_stable_offset(end, start) if self._txn.ongoing else end
            limit = lso if committed else end
            chunks, total = [], 0
            aborted = [] if committed else None
            if offset < limit:
                i = bisect_right(self._bases, offset) - 1
                position = self._segments[i].locate(offset)
                last_segment, last_end = i, position or 0  # where the read ended (for the aborted ones' bound)
                while i < len(self._segments):
                    segment = self._segments[i]
                    if limit <= segment.base_offset:
                        break
                    if position is not None and position < segment.size:
                        budget = max_bytes - total
                        if limit < segment.next_offset:
                            # read_committed with the LSO in this segment: it is a batch boundary (an open
                            # transaction's first batch), stop there
                            budget = min(budget, segment.locate(limit) - position)
                        stop = segment.extent(position, budget, min_one and not chunks)
                        if stop > position:
                            length = stop - position
                            chunks.append(
                                segment.region(position, length) if regions else segment.view(position, length)
                            )
                            total += length
                            last_segment, last_end = i, stop
                        if stop < segment.size:
                            break
                    i += 1
                    position = 0
                if committed:
                    aborted = self._txn.collect_aborted(offset, self._upper_bound(last_segment, last_end))
            return ReadResult(chunks, total, end, start, lso, aborted)

    def _upper_bound(self, i: int, position: int) -> int:
        """Kafka's bound for the aborted transactions of a read that ended at ``position`` of segment ``i``:
        the offset of the first offset index entry at or past it, else the next segment's base offset, else
        the log end (caller holds the state lock). Kafka reads from one segment only; a kafkawire read may
        go on into the next ones, so the bound is taken where it ended: the same as Kafka's when it stays
        in one segment, and covering all it returned when it does not."""
        index = self._segments[i].offset_index
        k = bisect_left(index.positions, position)
        if k < len(index.positions):
            return index.offsets[k]
        return self._segments[i + 1].base_offset if i + 1 < len(self._segments) else self._end

    def read_committed(self, offset: int, max_bytes: int, *, min_one: bool = True, regions: bool = False) -> ReadResult:
        return self._read(offset, max_bytes, min_one, regions, committed=True)

    @property
    def last_stable_offset(self) -> int:
        with self._state_lock:
            return self._txn.last_stable_offset(self._end, self._start)

    def open_transactions(self) -> dict[int, int]:
        with self._state_lock:
            return dict(self._txn.ongoing)

    def _open_transactions(self) -> dict[int, tuple[int, int]]:
        with self._state_lock:
            return self._txn.open_transactions()

    def _write_producer_snapshot(self, offset: int, *, fsync: bool) -> None:
        """The producer snapshot at ``offset`` (the log end, caller holds the write lock): the producer state's
        entries with this log's open transactions set on them (it tracks those itself; a transaction whose
        producer the state does not know still gets an entry), or the open transactions alone without a
        producer state. Nothing is written when the producer state says the file there is current."""
        opened = self._open_transactions()
        source = self._producers()
        if source is None:
            entries = snapshot.open_transaction_entries(opened)
        else:
            entries = source.snapshot_entries(self.topic, self.partition, self, offset)
            if entries is None:
                return
            entries = [
                e._replace(txn_first_offset=opened[e.producer_id][1] if e.producer_id in opened else -1)
                for e in entries
            ]
            known = {e.producer_id for e in entries}
            entries += snapshot.open_transaction_entries({p: o for p, o in opened.items() if p not in known})
        snapshot.write_entries(self.directory, offset, entries, fsync=fsync)

    def has_producer_snapshot(self, offset: int) -> bool:
        return os.path.exists(snapshot.path_for(self.directory, offset))

    def producer_snapshot(self) -> tuple[int, list[snapshot.Entry]] | None:
        """The newest snapshot at or below the log end and at or above the first segment's base that reads
        back whole; one that does not is logged, deleted and the next older one tried, as Kafka does."""
        with self._state_lock:
            end, first = self._end, self._segments[0].base_offset
        for offset in reversed(snapshot.offsets(self.directory)):
            if offset > end or offset < first:
                continue
            try:
                return offset, snapshot.read_entries(self.directory, offset)
            except FileNotFoundError:
                continue  # deleted meanwhile (retention)
            except (OSError, snapshot.CorruptSnapshotError) as exc:
                log.warning("ignoring producer snapshot %s: %s", snapshot.path_for(self.directory, offset), exc)
                snapshot.delete(self.directory, offset)
        return None

    def _write_txn_index(self, segment: LogSegment, *, fsync: bool) -> None:
        """Rewrite ``segment``'s .txnindex from the aborted transactions whose marker it holds."""
        with self._state_lock:
            entries = [a for a in self._txn.aborted if segment.base_offset <= a.last_offset < segment.next_offset]
        if entries or os.path.exists(segment.txn_index_path):
            txn.write_index(segment.txn_index_path, entries, fsync=fsync)

    def recover_transactions(self) -> None:
        """Rebuild the open and aborted transactions on a start: the newest producer snapshot at or below the
        log end gives the open ones as of its offset (later snapshots, of a log cut short by recovery, are
        deleted), the .txnindex files the aborted ones before it, and the log after it is replayed (header
        walks; only transactional batches are looked at), rewriting the .txnindex of the segments replayed.
        Without a snapshot (a log kafkawire wrote before it had transactions), as Kafka upgrading one, the
        replay starts at the last two segments."""
        segments, end, directory = self._segments, self._end, self.directory
        state = txn.TxnState()
        replay_from = None
        for offset in reversed(snapshot.offsets(directory)):
            if offset > end:
                snapshot.delete(directory, offset)
                continue
            if replay_from is None and offset >= segments[0].base_offset:
                try:
                    with open(snapshot.path_for(directory, offset), "rb") as f:
                        state.load_open(snapshot.decode(f.read()))
                    replay_from = offset
                except (OSError, snapshot.CorruptSnapshotError) as exc:
                    log.warning("ignoring producer snapshot %s: %s", snapshot.path_for(directory, offset), exc)
                    snapshot.delete(directory, offset)
        bases = set(self._bases)
        for offset in snapshot.offsets(directory):
            # as Kafka's removeStraySnapshots: keep those of segments and the one replayed from
            if offset != replay_from and (offset not in bases or offset < self._start):
                snapshot.delete(directory, offset)
        if replay_from is None:
            replay_from = segments[-2].base_offset if len(segments) > 1 else segments[0].base_offset
        for segment in segments:
            if segment.base_offset > replay_from:
                break
            try:
                found = txn.read_index(segment.txn_index_path)
            except (OSError, ValueError) as exc:
                log.warning("ignoring %s: %s", segment.txn_index_path, exc)
                found = []
            for entry in found:
                if segment.base_offset <= entry.last_offset < min(replay_from, segment.next_offset):
                    state.add_aborted(entry)
        i = bisect_right(self._bases, replay_from) - 1
        position = segments[i].locate(replay_from) if replay_from < end else None
        for k, segment in enumerate(segments[i:], start=i):
            if position is not None or k > i:
                buf = segment.buffer()
                try:
                    for event in txn.events(buf, list(txn.transactional_in(buf, position or 0, segment.size))):
                        state.apply(event)
                finally:
                    del buf
            position = None
        self._txn = state
        for k, segment in enumerate(segments[i:], start=i):
            try:
                self._write_txn_index(segment, fsync=k < len(segments) - 1)
            except OSError as exc:
                log.warning("cannot write %s: %s", segment.txn_index_path, exc)

    # --------------------------------------------------------- timestamps

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        with self._state_lock:
            for segment in self._segments:
                if segment.max_timestamp >= timestamp_ms and segment.next_offset > self._start:
                    found = segment.find_by_timestamp(timestamp_ms, self._start)
                    if found is not None:
                        return found
            return None

    def batch_epochs(self, from_offset: int) -> list[tuple[int, int]]:
        with self._state_lock:
            segments = [s for s in self._segments if s.size and s.next_offset > from_offset]
        found: list[tuple[int, int]] = []
        for segment in segments:
            buf = segment.buffer()
            start = segment.locate(max(from_offset, segment.base_offset)) or 0
            for info in _batch.iter_infos(buf, start, segment.size):
                epoch = _batch.leader_epoch(buf, info.position)
                if not found or epoch > found[-1][0]:
                    found.append((epoch, info.base_offset))
        return found

    def last_batch_epoch(self) -> int:
        with self._state_lock:
            segments = [s for s in self._segments if s.size]
        if not segments:
            return -1
        last = segments[-1]
        buf = last.buffer()
        position = last.offset_index.last_position_within(last.size)  # the last indexed batch: a few KiB walked
        last_position = -1
        for info in _batch.iter_infos(buf, position, last.size):
            last_position = info.position
        return _batch.leader_epoch(buf, last_position) if last_position >= 0 else -1

    def max_timestamp(self) -> tuple[int, int] | None:
        with self._state_lock:
            best = max((s for s in self._segments if s.size), key=lambda s: s.max_timestamp, default=None)
            if best is None:
                return None
            position = best.locate(best.offset_of_max_timestamp)
            if position is None:  # no batch had a timestamp (all -1)
                return best.next_offset - 1, best.max_timestamp
            return topics.record_with_timestamp(best.batch_at(position), best.max_timestamp)

    # ---------------------------------------------------- deletion & retention

    def delete_records_before(self, offset: int) -> int:
        with self._write_lock:
            with self._state_lock:
                if offset < 0 or offset > self._end:
                    raise OffsetOutOfRangeError(offset, self._start, self._end)
                if offset <= self._start:
                    return self._start
                self._start = offset
            self._checkpoint()  # acknowledged DeleteRecords survives a restart
            return offset

    def enforce_retention(self, now_ms: int) -> int:
        """Delete whole segments past retention.ms / retention.bytes or wholly below the log start,
        oldest first (Kafka's rules, including rolling the active segment when all of it expired)."""
        settings = self._settings()
        with self._write_lock:
            if self._closed:
                return 0
            deleted = 0
            if settings.deletes and settings.retention_ms >= 0:
                deleted += self._delete_oldest(
                    lambda seg, _next, _state: now_ms - self._segment_time(seg) > settings.retention_ms
                )
            if settings.deletes and settings.retention_bytes >= 0:
                excess = [self._size - settings.retention_bytes]

                def over_size(seg, _next, _state):
                    if excess[0] - seg.size < 0:
                        return False
                    excess[0] -= seg.size
                    return True

                deleted += self._delete_oldest(over_size)
            deleted += self._delete_oldest(lambda seg, nxt, _state: nxt is not None and nxt.base_offset <= self._start)
            return deleted

    @staticmethod
    def _segment_time(segment: LogSegment) -> int:
        if segment.max_timestamp >= 0:
            return segment.max_timestamp
        return int(os.path.getmtime(segment.log_path) * 1000)  # no timestamps: Kafka uses the file's mtime

    def _delete_oldest(self, predicate) -> int:
        segments = list(self._segments)
        count = 0
        for i, segment in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            if nxt is None and segment.size == 0:
                break
            if not predicate(segment, nxt, None):
                break
            count += 1
        if not count:
            return 0
        if count == len(segments):
            self._roll()  # keep an (empty) active segment at the log end
        with self._state_lock:
            doomed = self._segments[:count]
            del self._segments[:count], self._bases[:count]
            self._size -= sum(s.size for s in doomed)
            self._start = max(self._start, self._segments[0].base_offset)
            self._txn.drop_aborted_before(self._segments[0].base_offset)
        for segment in doomed:
            log.info(
                "deleting segment %s (offsets %d..%d)", segment.log_path, segment.base_offset, segment.next_offset - 1
            )
            segment.delete()
            snapshot.delete(self.directory, segment.base_offset)
        return count

    # ------------------------------------------------------------- scrubbing

    def verify_segment(self, segment: LogSegment, pace: Callable[[int], None] | None = None) -> recovery.Scan | None:
        """Check every batch of a sealed segment; repair it in place if damaged (quarantine, rewrite,
        swap in under the readers' lock). None if the segment is no longer a sealed one of this log."""
        with self._state_lock:
            if segment not in self._segments[:-1]:
                return None
            max_last = self._segments[self._segments.index(segment) + 1].base_offset - 1
        try:
            compacted = "compact" in self._settings().cleanup_policy.split(",")
            found = recovery.scan_segment(segment, max_last, pace=pace, compacted=compacted)  # sealed: no locks
        except FileNotFoundError:
            return None  # retention deleted it meanwhile
        if found.clean:
            return found
        with self._write_lock:
            with self._state_lock:
                if self._closed or segment not in self._segments[:-1]:
                    return None
            try:
                repair = recovery.prepare_repair(segment, found, keep_tail=True)
            except OSError as exc:
                log.error(
                    "cannot quarantine the damage found in %s: %s (the damaged batches are still "
                    "served until it is repaired)",
                    segment.log_path,
                    exc,
                )
                raise _disk_error(self._dir, f"repair of {segment.log_path} failed", exc) from exc
            interval = self._settings().index_interval_bytes
            with self._state_lock:
                old_size = segment.size
                repair.commit(interval)
                segment.time_index.maybe_append(segment.max_timestamp, segment.offset_of_max_timestamp)
                self._size += segment.size - old_size
            try:
                segment.write_indexes(fsync=True)
            except OSError as exc:
                log.warning("cannot write the indexes of %s: %s", segment.log_path, exc)
        log.error("repaired %s while serving: %d damaged bytes set aside", segment.log_path, repair.lost_bytes)
        return found

    # ---------------------------------------------------------- lifecycle

    def close(self) -> bool:
        """Flush and close; True when everything a clean-shutdown marker vouches for was written."""
        with self._write_lock:
            if self._closed:
                return False
            self._closed = True
            self.flush()
            active = self._segments[-1]
            # As Kafka's LogSegment.close: the largest timestamp becomes the time index's last entry, so a start
            # after this clean stop (Kafka's or kafkawire's) takes the active segment's indexes as they are.
            active.time_index.maybe_append(active.max_timestamp, active.offset_of_max_timestamp)
            active.write_indexes(fsync=True)
            complete = True
            if self._end > self._segments[0].base_offset:
                try:  # as Kafka on a clean shutdown: a restart then replays nothing to find open transactions
                    self._write_txn_index(active, fsync=True)
                    self._write_producer_snapshot(self._end, fsync=True)
                except OSError as exc:
                    complete = False
                    log.warning("cannot write the producer snapshot of %s-%d: %s", self.topic, self.partition, exc)
            for segment in self._segments:
                segment.close()
            return complete

    def discard(self) -> None:
        """Close without flushing (the topic is being deleted)."""
        with self._write_lock:
            self._closed = True
            for segment in self._segments:
                segment.close()


def plain_path(path: str | os.PathLike) -> str:
    """``str(pathlib.Path(path))`` on POSIX: "." parts and repeated or trailing slashes dropped, ".." kept (not
    resolved). Without importing pathlib, which brings urllib.parse and ipaddress: ~2.5 ms of every start."""
    text = os.fsdecode(os.fspath(path))
    root = "//" if text.startswith("//") and not text.startswith("///") else "/" if text.startswith("/") else ""
    return root + "/".join(part for part in text.split("/") if part and part != ".") or "."


class SegmentStorage(topics.TopicRegistry, Storage):
    def __init__(
        self,
        data_dir: str | os.PathLike,
        config: StorageConfig | Mapping[str, object] | None = None,
        *,
        clock: Callable[[], int] = _wall_ms,
        open_segments: int | None = None,
    ):
        self.config = StorageConfig.coerce(config)
        self.data_dir = plain_path(data_dir)
        self._clock = clock
        os.makedirs(self.data_dir, exist_ok=True)
        self._dir_state = LogDirState.of(self.data_dir)
        self._dir_state.failure = None  # a new start looks again
        self._scrubber: threading.Thread | None = None
        self._scrub_stop = threading.Event()
        limit = set_open_limit(open_segments)
        log.info("segment files: at most %d segments hold open files at once", limit)
        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        self._logs: dict[str, list[SegmentPartitionLog]] = {}
        self._settings_cache: dict[str, tuple[dict, TopicSettings]] = {}
        self._closed = False
        self._lock_file = self._lock_data_dir()
        try:
            props = metadata.load_or_create_meta_properties(self.data_dir, topics.new_cluster_id(), self.config.node_id)
            self._cluster_id = props["cluster.id"]
            self._node_id = int(props["node.id"]) if str(props.get("node.id", "")).lstrip("-").isdigit() else None
            self._topics: dict[str, TopicMeta] = metadata.load_topics(self.data_dir)
            starts = metadata.load_log_start_offsets(self.data_dir)
            self._sweep_directories(starts)
            clean = metadata.drop_kafka_recovery_marks(self.data_dir)
            if clean:
                log.info("%s: clean shutdown marker found; active segments are loaded without recovery", data_dir)
            for meta in self._topics.values():
                self._logs[meta.name] = [
                    self._open_partition(meta, p, starts.get((meta.name, p), 0), clean_shutdown=clean)
                    for p in range(meta.partitions)
                ]
            try:
                self._save_log_starts(unless=starts)  # drops entries of topics that no longer exist
            except OSError as exc:
                log.warning("cannot rewrite the log start offsets: %s", exc)
            self._check_free_space()
        except BaseException:
            self._release()
            raise

    def observe_fsyncs(self, observer: Callable[[float], None] | None) -> None:
        """Call ``observer(seconds)`` after every fsync of a segment of this data directory (None: stop)."""
        self._dir_state.fsync_observer = observer

    def _check_free_space(self) -> None:
        try:
            free = self._dir_state.free_bytes()
        except OSError:
            return
        if free < MIN_FREE_BYTES:
            self._dir_state.failed(
                LogDirError(
                    f"{self.data_dir} has only {free} bytes free (at least {MIN_FREE_BYTES} are needed to take "
                    f"writes); serving reads",
                    errno.ENOSPC,
                )
            )

    def log_dir_failure(self) -> LogDirError | None:
        """Why the log directory takes no writes, or None (a full disk with room again is back)."""
        try:
            self._dir_state.check()
        except LogDirError:
            return self._dir_state.failure
        return None

    # ------------------------------------------------------------- startup

    def _lock_data_dir(self):
        f = open(os.path.join(self.data_dir, ".lock"), "a+b")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            raise StorageError(f"{self.data_dir} is in use by another broker") from None
        return f

    def _release(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()  # closing drops the flock
            self._lock_file = None

    def _sweep_directories(self, starts: dict[tuple[str, int], int]) -> None:
        """Finish interrupted topic deletions (kafkawire's own ``-delete`` directories). Everything else no
        topic owns is left where it is, untouched, and listed once in the log (recovery.report_unknown);
        entries of the log start checkpoint for such partition directories are kept when it is rewritten."""
        for name in os.listdir(self.data_dir):
            path = os.path.join(self.data_dir, name)
            if name.endswith("-delete") and os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
        partitions, unknown = recovery.sort_entries(self.data_dir, self._topics)
        for name in partitions:
            path = os.path.join(self.data_dir, name)
            meta = self._topics[name.rsplit("-", 1)[0]]
            owner = metadata.read_partition_topic_id(path)
            if owner is not None and owner != meta.topic_id:
                raise StorageError(
                    f"{path} holds the partition of another topic (id {owner}) than topic {meta.name} "
                    f"(id {meta.topic_id}); kafkawire does not move it: move it away, then start"
                )
        recovery.report_unknown(self.data_dir, unknown)
        self._foreign_log_starts = {tp: o for tp, o in starts.items() if f"{tp[0]}-{tp[1]}/" in unknown}

    def _partition_dir(self, topic: str, partition: int) -> str:
        return os.path.join(self.data_dir, f"{topic}-{partition}")

    def _open_partition(
        self, meta: TopicMeta, partition: int, log_start: int, *, clean_shutdown: bool = False
    ) -> SegmentPartitionLog:
        directory = self._partition_dir(meta.name, partition)
        settings = self._settings_for(meta.name)
        now = self._clock()
        if not os.path.isdir(directory):
            os.makedirs(directory)
            metadata.fsync_dir(self.data_dir)
        metadata.ensure_partition_metadata(directory, meta.topic_id)
        cleaner.complete_swaps(directory, settings().index_interval_bytes, now)  # a cleaning cut short by a stop
        compacted = "compact" in settings().cleanup_policy.split(",")  # the cleaner leaves offset gaps
        segments = load_segments(directory, settings().index_interval_bytes, now, compacted, clean_shutdown)
        if not segments:
            segment = LogSegment(directory, max(log_start, 0), created_ms=now)
            segment.create()
            metadata.fsync_dir(directory)
            segments = [segment]
        plog = SegmentPartitionLog(
            meta.name,
            partition,
            directory,
            segments,
            log_start,
            settings,
            self._save_log_starts,
            self._clock,
            producers=self._producer_state,
        )
        plog.started_unclean = not clean_shutdown
        plog.recover_transactions()
        return plog

    def _producer_state(self):
        return self.producer_state

    def _settings_for(self, name: str) -> Callable[[], TopicSettings]:
        def settings() -> TopicSettings:
            meta = self._topics.get(name)
            configs = meta.configs if meta is not None else {}
            cached = self._settings_cache.get(name)
            if cached is None or cached[0] is not configs:
                cached = (configs, self.config.for_topic(configs))
                self._settings_cache[name] = cached
            return cached[1]

        return settings

    def _save_log_starts(self, unless: dict[tuple[str, int], int] | None = None) -> None:
        """Write the log start offsets checkpoint; not when its entries equal ``unless`` (what the file holds),
        which saves a start two fsyncs that would rewrite the same entries."""
        with self._checkpoint_lock:
            offsets = dict(getattr(self, "_foreign_log_starts", {}))  # partitions left in place, not kafkawire's
            offsets.update(
                {
                    (log_.topic, log_.partition): log_.log_start_offset
                    for logs in list(self._logs.values())
                    for log_ in logs
                    if log_.log_start_offset > 0
                }
            )
            if offsets == unless:
                if not offsets:  # as Kafka's log manager, which creates the file empty: empty reads as no entries
                    metadata.touch_log_start_offsets(self.data_dir)
                return
            metadata.save_log_start_offsets(self.data_dir, offsets)

    # ------------------------------------------------------------- topics

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError("storage is closed")

    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str] | None = None, topic_id: uuid.UUID | None = None
    ) -> TopicMeta:
        (result,) = self.create_topics([NewTopic(name, partitions, configs, topic_id)])
        if isinstance(result, StorageError):
            raise result
        return result

    def _admin_pending(self) -> set[str]:
        """Names of topics being created, grown or deleted (taken under ``_lock``)."""
        return self.__dict__.setdefault("_pending_topics", set())

    def create_topics(self, new) -> list[TopicMeta | StorageError]:
        """The topics' files are made outside ``_lock`` (readers and appends go on meanwhile), without an
        fsync per partition: an empty partition that a crash loses is recreated on start from
        ``topics.json``, which is written once, fsynced, after the data directory's single fsync. Only
        then do the topics become visible, all together."""
        results: list[TopicMeta | StorageError | None] = [None] * len(new)
        planned: list[tuple[int, TopicMeta]] = []
        with self._lock:
            self._check_open()
            pending = self._admin_pending()
            taken = dict(self._topics)
            for i, t in enumerate(new):
                try:
                    if t.name in pending:
                        raise TopicExistsError(f"topic {t.name} is being created or changed")
                    meta = topics.new_topic(taken, self.config, t.name, t.partitions, t.configs, t.topic_id)
                    self._check_directories_free(meta.name, 0, meta.partitions)
                except StorageError as exc:
                    results[i] = exc
                    continue
                taken[t.name] = meta
                planned.append((i, meta))
            pending.update(meta.name for _, meta in planned)
        try:
            made: dict[str, list[SegmentPartitionLog]] = {}
            for i, meta in planned:
                try:
                    made[meta.name] = self._new_partitions(meta, 0, meta.partitions)
                except OSError as exc:
                    results[i] = LogDirError.wrap(f"creating topic {meta.name} failed", exc)
            if made:
                try:
                    metadata.fsync_dir(self.data_dir)
                    with self._lock:
                        self._check_open()
                        grown = {**self._topics, **{m.name: m for _, m in planned if m.name in made}}
                        metadata.save_topics(self.data_dir, grown)
                        self._topics = grown
                        self._logs.update(made)
                except (OSError, StorageError) as exc:
                    for logs in made.values():
                        for log_ in logs:
                            log_.discard()  # the directories are strays now: set aside on the next start
                    failure = exc if isinstance(exc, StorageError) else LogDirError.wrap("saving topics failed", exc)
                    for i, meta in planned:
                        if meta.name in made:
                            results[i] = failure
                    made = {}
            for i, meta in planned:
                if meta.name in made:
                    results[i] = meta
        finally:
            with self._lock:
                self._admin_pending().difference_update(meta.name for _, meta in planned)
        return results

    def _new_partitions(self, meta: TopicMeta, first: int, end: int) -> list[SegmentPartitionLog]:
        """Directories, partition.metadata and an empty first segment for partitions [first, end) (no fsync)."""
        settings = self._settings_for(meta.name)
        now = self._clock()
        body = metadata.partition_metadata_bytes(meta.topic_id)
        out = []
        for p in range(first, end):
            directory = self._partition_dir(meta.name, p)
            self._move_aside(directory)
            os.makedirs(directory)
            with open(os.path.join(directory, metadata.PARTITION_METADATA), "wb") as f:
                f.write(body)
            segment = LogSegment(directory, 0, created_ms=now)
            segment.create()
            out.append(
                SegmentPartitionLog(
                    meta.name,
                    p,
                    directory,
                    [segment],
                    0,
                    settings,
                    self._save_log_starts,
                    self._clock,
                    producers=self._producer_state,
                )
            )
        return out

    def _check_directories_free(self, name: str, first: int, end: int) -> None:
        """DirectoryTakenError when a directory of partitions [first, end) of topic ``name`` exists and holds
        more than an empty partition of kafkawire's (recovery.holds_no_records): it is not moved or deleted."""
        for p in range(first, end):
            directory = self._partition_dir(name, p)
            if os.path.lexists(directory) and not recovery.holds_no_records(directory):
                raise recovery.DirectoryTakenError(
                    f"cannot create partition {p} of topic {name}: {directory} already exists and is not an empty "
                    f"partition of kafkawire's; it is left in place (move or delete it to create the topic)"
                )

    def _move_aside(self, directory: str) -> None:
        """Make room for a new partition: only an empty partition of kafkawire's (what a failed creation
        leaves) is replaced; anything else raises FileExistsError and stays (``_check_directories_free``
        refused the topic earlier unless it appeared since)."""
        if os.path.lexists(directory):
            if not recovery.holds_no_records(directory):
                raise FileExistsError(errno.EEXIST, "exists and is not kafkawire's; left in place", directory)
            log.info("replacing %s: an empty partition left by an earlier attempt", directory)
            shutil.rmtree(directory)

    def delete_topic(self, name: str) -> None:
        (result,) = self.delete_topics([name])
        if result is not None:
            raise result

    def delete_topics(self, names) -> list[StorageError | None]:
        """``topics.json`` is rewritten once, under ``_lock``; the directories are renamed and removed after."""
        results: list[StorageError | None] = [None] * len(names)
        doomed_logs: list[SegmentPartitionLog] = []
        with self._lock:
            self._check_open()
            pending = self._admin_pending()
            remaining = dict(self._topics)
            for i, name in enumerate(names):
                if name not in remaining or name in pending:
                    results[i] = UnknownTopicError(name)
                    continue
                del remaining[name]
            if len(remaining) != len(self._topics):
                metadata.save_topics(self.data_dir, remaining)
                gone = [n for n in self._topics if n not in remaining]
                self._topics = remaining
                for name in gone:
                    doomed_logs.extend(self._logs.pop(name))
                    self._settings_cache.pop(name, None)
        if not doomed_logs:
            return results
        self._save_log_starts()
        doomed_dirs = []
        for log_ in doomed_logs:
            log_.discard()
            doomed = f"{log_.directory}.{uuid.uuid4().hex}-delete"
            os.rename(log_.directory, doomed)
            doomed_dirs.append(doomed)
        metadata.fsync_dir(self.data_dir)
        for doomed in doomed_dirs:  # a crash before this point leaves "-delete" directories, removed on start
            shutil.rmtree(doomed, ignore_errors=True)
        return results

    def add_partitions(self, name: str, total: int) -> TopicMeta:
        (result,) = self.add_partitions_batch([(name, total)])
        if isinstance(result, StorageError):
            raise result
        return result

    def add_partitions_batch(self, totals) -> list[TopicMeta | StorageError]:
        results: list[TopicMeta | StorageError | None] = [None] * len(totals)
        planned: list[tuple[int, TopicMeta, TopicMeta]] = []  # (index, before, after)
        with self._lock:
            self._check_open()
            pending = self._admin_pending()
            for i, (name, total) in enumerate(totals):
                meta = self._topics.get(name)
                try:
                    if meta is None:
                        raise UnknownTopicError(name)
                    if name in pending:
                        raise InvalidPartitionsError(f"topic {name} is being changed by another request")
                    topics.check_new_total(meta, total)
                    self._check_directories_free(name, meta.partitions, total)
                except StorageError as exc:
                    results[i] = exc
                    continue
                pending.add(name)
                planned.append((i, meta, TopicMeta(meta.name, meta.topic_id, total, dict(meta.configs))))
        try:
            made: dict[str, list[SegmentPartitionLog]] = {}
            for i, before, after in planned:
                try:
                    made[after.name] = self._new_partitions(after, before.partitions, after.partitions)
                except OSError as exc:
                    results[i] = LogDirError.wrap(f"adding partitions to {after.name} failed", exc)
            if made:
                try:
                    metadata.fsync_dir(self.data_dir)
                    with self._lock:
                        self._check_open()
                        grown = dict(self._topics)
                        for _, _before, after in planned:
                            if after.name in made:
                                current = grown[after.name]  # configs may have changed meanwhile
                                grown[after.name] = TopicMeta(
                                    current.name, current.topic_id, after.partitions, dict(current.configs)
                                )
                        metadata.save_topics(self.data_dir, grown)
                        self._topics = grown
                        for name, logs in made.items():
                            self._logs[name].extend(logs)
                except (OSError, StorageError) as exc:
                    for logs in made.values():
                        for log_ in logs:
                            log_.discard()
                    failure = exc if isinstance(exc, StorageError) else LogDirError.wrap("saving topics failed", exc)
                    for i, _before, after in planned:
                        if after.name in made:
                            results[i] = failure
                    made = {}
            for i, _before, after in planned:
                if after.name in made:
                    results[i] = self._topics[after.name]
        finally:
            with self._lock:
                self._admin_pending().difference_update(after.name for _, _b, after in planned)
        return results

    def set_topic_configs(self, name: str, configs: dict[str, str | None]) -> TopicMeta:
        with self._lock:
            self._check_open()
            meta = self._topics.get(name)
            if meta is None:
                raise UnknownTopicError(name)
            changed = TopicMeta(
                meta.name, meta.topic_id, meta.partitions, topics.merged_configs(self.config, meta.configs, configs)
            )
            metadata.save_topics(self.data_dir, {**self._topics, name: changed})
            self._topics[name] = changed
            return changed

    def _all_logs(self) -> list[SegmentPartitionLog]:
        with self._lock:
            return [log_ for logs in self._logs.values() for log_ in logs]

    # --------------------------------------------------------- maintenance

    def enforce_retention(self, now_ms: int) -> int:
        deleted = 0
        for log_ in self._all_logs():
            deleted += log_.enforce_retention(now_ms)
        return deleted

    def flush(self) -> None:
        for log_ in self._all_logs():
            log_.flush()

    def flush_due(self, now_ms: int) -> int:
        return sum(log_.flush_if_due(now_ms) for log_ in self._all_logs())

    # ------------------------------------------------------------ scrubbing

    def verify(self, *, sleep: Callable[[float], None] | None = None, bytes_per_sec: int | None = None) -> dict:
        """Check the CRC of every batch of every sealed segment, repairing damaged ones (see
        ``SegmentPartitionLog.verify_segment``). With ``bytes_per_sec``, ``sleep`` paces the reading
        (every MiB read costs 1 MiB / ``bytes_per_sec`` of sleep). Returns
        {"segments": n, "bytes": n, "damaged": [log paths]}."""
        report = {"segments": 0, "bytes": 0, "damaged": []}
        pace = (lambda n: sleep(n / bytes_per_sec)) if bytes_per_sec and sleep is not None else None
        for log_ in self._all_logs():
            for segment in log_.segments[:-1]:
                if self._closed or self._scrub_stop.is_set():
                    return report
                found = log_.verify_segment(segment, pace)
                if found is None:
                    continue
                report["segments"] += 1
                report["bytes"] += segment.size
                if not found.clean:
                    report["damaged"].append(segment.log_path)
        return report

    def start_scrubber(self, bytes_per_sec: int, pause_s: float = 60.0) -> None:
        """Verify every sealed segment again and again in a background thread, reading at most about
        ``bytes_per_sec`` (paced per segment), pausing ``pause_s`` between passes."""
        if bytes_per_sec <= 0 or self._scrubber is not None:
            return

        def run():
            wait = self._scrub_stop.wait
            while not self._scrub_stop.is_set():
                try:
                    report = self.verify(sleep=wait, bytes_per_sec=bytes_per_sec)
                    log.info(
                        "scrubbed %d segments (%d bytes): %d damaged",
                        report["segments"],
                        report["bytes"],
                        len(report["damaged"]),
                    )
                except Exception:
                    log.exception("scrubbing failed")
                wait(pause_s)

        self._scrubber = threading.Thread(target=run, name="kafkawire-scrubber", daemon=True)
        self._scrubber.start()
        log.info("scrubber verifies sealed segments at up to %d bytes/s", bytes_per_sec)

    def start_cleaner(self, *, backoff_ms: int = 15000, bytes_per_sec: int = 0, **sizing) -> cleaner.CleanerThread:
        """Compact the topics with cleanup.policy compact in background threads (Kafka's log cleaner); ``sizing``:
        CleanerThread's threads, dedupe_buffer_size, load_factor."""
        if getattr(self, "_cleaner", None) is None:
            self._cleaner = cleaner.CleanerThread(self, backoff_ms=backoff_ms, bytes_per_sec=bytes_per_sec, **sizing)
            self._cleaner.start()
        return self._cleaner

    def close(self) -> None:
        if getattr(self, "_cleaner", None) is not None:
            self._cleaner.stop()  # a pass in progress finishes its segment group first
        self._scrub_stop.set()
        if self._scrubber is not None:
            self._scrubber.join(timeout=5)
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                closed = [log_ for logs in self._logs.values() for log_ in logs]
                complete = all([log_.close() for log_ in closed])
                try:
                    metadata.save_clean_stop_checkpoints(
                        self.data_dir, {(log_.topic, log_.partition): log_.log_end_offset for log_ in closed}
                    )
                    if complete and self._dir_state.failure is None:
                        # last, as Kafka's LogManager.shutdown: every log, snapshot and checkpoint is on disk
                        metadata.write_clean_shutdown_marker(
                            self.data_dir, metadata.registered_broker_epoch(self.data_dir, self._node_id)
                        )
                except OSError as exc:
                    log.warning("cannot write the recovery point checkpoints: %s", exc)
            finally:
                self._release()
