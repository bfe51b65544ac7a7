"""Partitions' leader epochs: the current one from the metadata log, and each partition's history of epochs
(``leader-epoch-checkpoint``), as Kafka's LeaderEpochFileCache keeps it.

A partition's current leader epoch is its registration's in ``__cluster_metadata-0`` (PartitionRecord, then one
bump per PartitionChangeRecord naming a leader). Its history is a list of (epoch, start offset): the offset of
the log end when this node became leader in that epoch, in the partition directory's ``leader-epoch-checkpoint``
(version 0, the count, then ``epoch start-offset`` lines). Batches appended as leader carry the current epoch
(partitionLeaderEpoch), so a follower or a consumer (KIP-320) can ask where an epoch ended.

Entries before the log start offset are dropped as Kafka's truncateFromStart does (the earliest one kept starts
at the log start); kafkawire applies that when it answers and when it writes the file, so that moving the log
start (DeleteRecords, retention) needs no call here.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from .. import metadata as files

log = logging.getLogger(__name__)

CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED = -1  # Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET


def read_checkpoint(path: str) -> list[tuple[int, int]]:
    """The (epoch, start offset) entries of a ``leader-epoch-checkpoint``; [] when missing or unreadable (Kafka
    then starts with an empty cache, which its recovery fills from the batches)."""
    try:
        with open(path, encoding="ascii") as f:
            lines = f.read().splitlines()
    except (FileNotFoundError, UnicodeDecodeError):
        return []
    try:
        if lines[0].strip() != "0":
            raise ValueError(f"unknown version {lines[0]!r}")
        count = int(lines[1])
        out = [(int(e), int(o)) for e, o in (line.split() for line in lines[2 : 2 + count])]
        if len(out) != count:
            raise ValueError(f"{count} entries announced, {len(out)} found")
        return out
    except (IndexError, ValueError) as exc:
        log.warning("%s is unreadable (%s): starting the partition's epoch history afresh", path, exc)
        return []


def checkpoint_bytes(entries: list[tuple[int, int]]) -> bytes:
    return ("\n".join(["0", str(len(entries))] + [f"{e} {o}" for e, o in entries]) + "\n").encode("ascii")


class EpochCache:
    """One partition's epochs: [(epoch, start offset)], epochs and offsets rising."""

    __slots__ = ("path", "entries", "dirty", "plog", "version", "written", "write_lock")

    def __init__(self, path: str | None, plog=None):
        self.path = path  # None: an engine without files
        self.plog = plog  # the partition log it describes (a topic deleted and made again has a new one)
        self.entries: list[tuple[int, int]] = read_checkpoint(path) if path else []
        self.dirty = False
        self.version = 0  # bumped each time a state of ``entries`` is taken to be written
        self.written = 0  # the version on disk: an older state taken later is never written over a newer one
        self.write_lock = threading.Lock()

    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED

    def assign(self, epoch: int, start: int) -> None:
        """Record that ``epoch`` starts at ``start`` (becoming leader, or a batch appended in a newer epoch); an
        epoch not above the latest changes nothing. Entries at or after ``start`` go: they were never
        written (Kafka's assign does the same)."""
        if epoch <= self.latest_epoch():
            return
        self.entries = [(e, o) for e, o in self.entries if o < start]
        self.entries.append((epoch, start))
        self.dirty = True

    def effective(self, log_start: int) -> list[tuple[int, int]]:
        """The entries once those before ``log_start`` are dropped (truncateFromStart)."""
        entries = self.entries
        i = 0
        while i + 1 < len(entries) and entries[i + 1][1] <= log_start:
            i += 1
        out = entries[i:]
        if out and out[0][1] < log_start:
            out = [(out[0][0], log_start)] + out[1:]
        return out

    def end_offset_for(self, requested: int, log_end: int, log_start: int) -> tuple[int, int]:
        """(epoch, end offset) of ``requested`` as Kafka's endOffsetFor answers it: the log end for the latest
        epoch; else the start of the first later epoch, with the largest epoch not above ``requested`` (or
        ``requested`` itself when none is); (-1, -1) for an undefined or a future epoch."""
        entries = self.effective(log_start)
        if requested == UNDEFINED:
            return UNDEFINED, UNDEFINED
        if entries and entries[-1][0] == requested:
            return requested, log_end
        higher = next(((e, o) for e, o in entries if e > requested), None)
        if higher is None:
            return UNDEFINED, UNDEFINED
        floor = [e for e, _o in entries if e <= requested]
        return (floor[-1] if floor else requested), higher[1]

    def earliest_epoch(self, log_start: int) -> int:
        """The epoch of the first entry when it starts at or before the log start (ListOffsets EARLIEST), else -1."""
        entries = self.effective(log_start)
        return entries[0][0] if entries and entries[0][1] <= log_start else UNDEFINED

    def epoch_for_offset(self, offset: int, log_start: int) -> int:
        """The epoch the record at ``offset`` was written in, -1 when unknown."""
        found = UNDEFINED
        for e, o in self.effective(log_start):
            if o > offset:
                break
            found = e
        return found

    def take(self, log_start: int) -> tuple[int, list[tuple[int, int]]] | None:
        """The state to write (its version and entries), marked clean; None when nothing changed. Called under
        the owner's lock, so that an ``assign`` racing with it is either in this state or marks it dirty again."""
        if self.path is None or not self.dirty:
            self.dirty = False
            return None
        self.entries = self.effective(log_start)
        self.dirty = False
        self.version += 1
        return self.version, list(self.entries)

    def write(self, version: int, entries: list[tuple[int, int]]) -> None:
        """Write a state ``take`` gave, durably (Kafka's assign flushes its checkpoint synchronously too)."""
        with self.write_lock:
            if version <= self.written:
                return
            files.write_atomically(self.path, checkpoint_bytes(entries))
            self.written = version


class LeaderEpochs:
    """Every partition's current leader epoch and epoch history, for the handlers.

    ``metadata_log`` (None for an engine without files: every partition stays at epoch 0) answers the current
    epoch; ``partition_dir(topic, partition)`` the directory of the checkpoint (None: kept in memory)."""

    def __init__(self, metadata_log, partition_dir=None):
        self.metadata_log = metadata_log
        self.partition_dir = partition_dir
        self._caches: dict[tuple[str, int], EpochCache] = {}
        self._lock = threading.Lock()  # the storage thread (appends) and the event loop (reads) both assign

    def current(self, topic: str, partition: int) -> int:
        if self.metadata_log is None:
            return 0
        found = self.metadata_log.image.partition(topic, partition)
        return found.leader_epoch if found is not None else 0

    def cache(self, topic: str, partition: int, plog) -> EpochCache:
        """The partition's epoch history, with its current epoch assigned at the log end if it is not there yet
        (the partition became leader in it: at start, or created since)."""
        return self._cache(topic, partition, plog, self.current(topic, partition))

    def append(
        self, topic: str, partition: int, plog, batch: Callable[[int], bytes], epoch: int | None = None, **options
    ):
        """Append a batch as the partition's leader, and return what ``plog.append`` returns. ``batch(epoch)``
        gives the batch's bytes with ``epoch``, the partition's current leader epoch, as its
        partitionLeaderEpoch (as Kafka's leader stamps every batch it appends); ``options`` go to
        ``plog.append``. A new epoch is assigned before the append, so that it starts at the log end: the
        first batch of it. The checkpoint is written after the append, durably (a crash between the two is
        mended from the batches at the next start, ``_recover_from_batches``), so this runs where the caller's
        appends run: the storage thread for file engines. ``epoch``: the current epoch as the caller just
        looked it up (Produce looks it up once per partition: validation stamps the batch with it)."""
        if epoch is None:
            epoch = self.current(topic, partition)
        cache = self._caches.get((topic, partition))
        if cache is not None and cache.plog is plog and not cache.dirty and cache.latest_epoch() >= epoch:
            # settled (the usual append): nothing to assign before it, no checkpoint to write after it
            return plog.append(batch(epoch), **options)
        self._cache(topic, partition, plog, epoch)
        result = plog.append(batch(epoch), **options)
        self.save(topic, partition, plog)
        return result

    def settled(self, topic: str, partition: int, plog, epoch: int | None = None) -> bool:
        """Whether an append now would write no checkpoint: the partition's history is loaded for ``plog``,
        names the current epoch, and is on disk (or kept in memory only). An append for which this is False
        must run where a file may be written and fsynced: not on the event loop. ``epoch``: the current epoch
        if the caller has just looked it up."""
        cache = self._caches.get((topic, partition))
        return (
            cache is not None
            and cache.plog is plog
            and not (cache.dirty and cache.path is not None)
            and cache.latest_epoch() >= (self.current(topic, partition) if epoch is None else epoch)
        )

    def _cache(self, topic: str, partition: int, plog, epoch: int) -> EpochCache:
        key = (topic, partition)
        with self._lock:
            cache = self._caches.get(key)
            if cache is None or cache.plog is not plog:
                directory = self.partition_dir(topic, partition) if self.partition_dir is not None else None
                path = os.path.join(directory, CHECKPOINT) if directory else None
                cache = self._caches[key] = EpochCache(path, plog)
                if plog.started_unclean:
                    _recover_from_batches(cache, plog)
            if cache.latest_epoch() < epoch:
                # a partition first led in epoch 0 has had no other: its history starts at offset 0
                cache.assign(epoch, 0 if epoch == 0 and not cache.entries else plog.log_end_offset)
            return cache

    def save(self, topic: str, partition: int, plog) -> None:
        """Write the partition's checkpoint if it changed (off the event loop: the storage thread, start-up's
        background writer, or a stop). The file is written outside the lock the event loop's readers take."""
        with self._lock:
            cache = self._caches.get((topic, partition))
            state = cache.take(plog.log_start_offset) if cache is not None else None
        if state is None:
            return
        try:
            cache.write(*state)
        except BaseException:
            with self._lock:
                cache.dirty = True  # the next save tries again
            raise

    def error(self, topic: str, partition: int, current_leader_epoch: int) -> int:
        """Kafka's check of a request's current leader epoch: -1 is not checked, an older one is fenced, a newer
        one unknown to this node."""
        from kafkawire.protocol import errors

        epoch = self.current(topic, partition)
        if current_leader_epoch > epoch:
            return errors.UNKNOWN_LEADER_EPOCH
        if 0 <= current_leader_epoch < epoch:
            return errors.FENCED_LEADER_EPOCH
        return 0


def _recover_from_batches(cache: EpochCache, plog) -> None:
    """After an unclean stop, add the epochs of batches the checkpoint does not name yet (a crash between an
    append in a new epoch and the checkpoint's write), as Kafka's recovery assigns them from the batches. Only
    the last batch is read unless one is missing: epochs rise along the log, so every missing epoch starts
    after the checkpoint's latest entry."""
    try:
        if plog.last_batch_epoch() <= cache.latest_epoch():
            return
        since = cache.entries[-1][1] if cache.entries else plog.log_start_offset
        added = [(e, o) for e, o in plog.batch_epochs(since) if e > cache.latest_epoch()]
    except Exception as exc:  # a damaged batch header: the checkpoint stays as it was
        log.warning("%s: cannot read the leader epochs of its batches (%s)", cache.path, exc)
        return
    for epoch, start in added:
        cache.assign(epoch, start)
    if added:
        log.info("%s: epochs %s taken from the batches (missing after an unclean stop)", cache.path, added)
