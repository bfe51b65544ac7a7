"""In-RAM engine: tests and throw-away brokers. Nothing survives the process.

Each partition keeps its batches as immutable ``bytes`` (offsets assigned) in
a list, with their base offsets in a parallel list for bisection. Reads hand
out memoryviews of those bytes. Retention works per batch here (a batch plays
the part of a segment), so ``enforce_retention`` counts deleted batches.
Timestamp lookups scan the batch headers linearly: fine for the sizes a
RAM-only broker holds, and ListOffsets by time is rare.

Compaction (cleanup.policy=compact) follows the log cleaner's rules (``cleaner.py``: the offset map, the
delete horizon, transaction markers, producers' last batches), with a batch in the part of a segment: the
last batch is the active one, never cleaned; the dirty ratio counts batches. ``start_cleaner`` runs the passes
in a thread, as the segments engine's cleaner does. Offsets never change; reads step over the gaps.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable, Mapping

from . import _batch, cleaner, topics, txn
from .base import (
    AppendResult,
    OffsetOutOfRangeError,
    PartitionLog,
    ReadResult,
    Storage,
    StorageError,
    TopicMeta,
    UnknownTopicError,
)
from .config import StorageConfig, TopicSettings

log = logging.getLogger("kafkawire.storage.memory")


class MemoryPartitionLog(topics.LogOffsets, PartitionLog):
    def __init__(self, topic: str, partition: int, settings: Callable[[], TopicSettings]):
        self.topic, self.partition = topic, partition
        self._settings = settings
        # Appends may run in an executor thread while the event loop reads.
        self._lock = threading.Lock()
        self._batches: list[bytes] = []
        self._bases: list[int] = []
        self._infos: list[_batch.BatchInfo] = []
        self._start = 0
        self._end = 0
        self._size = 0
        self._txn = txn.TxnState()
        self._cleaned_to = 0  # the cleaner's checkpoint: the first offset not yet cleaned

    def append(self, batches, *, log_append_time: int | None = None, durable: bool = False) -> AppendResult:
        view = memoryview(batches).cast("B")
        infos = _batch.split(view)
        with self._lock:
            first = self._end
            for chunks, info in _batch.stored(view, infos, first, log_append_time):
                self._batches.append(b"".join(chunks))
                self._bases.append(info.base_offset)
                self._infos.append(info)  # (its position counts within this append: unused here)
                self._size += info.size
            self._end = info.last_offset + 1
            if txn.any_transactional(view, infos):
                placed = self._infos[-len(infos) :]
                for event in txn.events(view, [(i.position, i.size, p.base_offset) for i, p in zip(infos, placed)]):
                    self._txn.apply(event)
            return AppendResult(first, self._end - 1, -1 if log_append_time is None else log_append_time, self._start)

    def read(self, offset: int, max_bytes: int, *, min_one: bool = True) -> ReadResult:
        with self._lock:
            if offset < self._start or offset > self._end:
                raise OffsetOutOfRangeError(offset, self._start, self._end)
            chunks, size = [], 0
            i = self._first_batch_at(offset) if offset < self._end else len(self._batches)
            while i < len(self._batches):
                n = len(self._batches[i])
                if size + n > max_bytes and not (min_one and not chunks):
                    break
                chunks.append(memoryview(self._batches[i]))
                size += n
                i += 1
            end = self._end
            return ReadResult(
                chunks,
                size,
                end,
                self._start,
                self._txn.last_stable_offset(end, self._start) if self._txn.ongoing else end,
            )

    def _first_batch_at(self, offset: int) -> int:
        """Index of the batch holding ``offset``, or of the first one after it (compaction leaves gaps, before the
        first batch too)."""
        i = bisect_right(self._bases, offset) - 1
        if i < 0:
            return 0
        return i + 1 if self._infos[i].last_offset < offset else i

    @property
    def last_stable_offset(self) -> int:
        return self._txn.last_stable_offset(self._end, self._start)

    def open_transactions(self) -> dict[int, int]:
        with self._lock:
            return dict(self._txn.ongoing)

    def read_committed(self, offset: int, max_bytes: int, *, min_one: bool = True, regions: bool = False) -> ReadResult:
        with self._lock:
            if offset < self._start or offset > self._end:
                raise OffsetOutOfRangeError(offset, self._start, self._end)
            lso = self._txn.last_stable_offset(self._end, self._start)
            chunks, size = [], 0
            if offset < lso:
                i = self._first_batch_at(offset)
                while i < len(self._batches) and self._bases[i] < lso:
                    n = len(self._batches[i])
                    if size + n > max_bytes and not (min_one and not chunks):
                        break
                    chunks.append(memoryview(self._batches[i]))
                    size += n
                    i += 1
                # No offset index here: the bound is the log end, as Kafka's when no index entry lies past
                # what it read (a segment under index.interval.bytes)
                aborted = self._txn.collect_aborted(offset, self._end)
            else:
                aborted = []
            return ReadResult(chunks, size, self._end, self._start, lso, aborted)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        with self._lock:
            return topics.first_record_in(zip(self._batches, self._infos), timestamp_ms, self._start)

    def max_timestamp(self) -> tuple[int, int] | None:
        with self._lock:
            best = max(zip(self._batches, self._infos), key=lambda pair: pair[1].max_timestamp, default=None)
            if best is None:
                return None
            return topics.record_with_timestamp(best[0], best[1].max_timestamp)

    def delete_records_before(self, offset: int) -> int:
        with self._lock:
            if offset < 0 or offset > self._end:
                raise OffsetOutOfRangeError(offset, self._start, self._end)
            # As in Kafka, the batches below the new start are freed by the next retention pass.
            self._start = max(self._start, offset)
            return self._start

    def enforce_retention(self, now_ms: int) -> int:
        settings = self._settings()
        with self._lock:
            dropped = 0
            if settings.deletes and settings.retention_ms >= 0:
                dropped += self._drop_while(lambda info: now_ms - info.max_timestamp > settings.retention_ms)
            if settings.deletes and settings.retention_bytes >= 0:
                dropped += self._drop_while(lambda info: self._size - info.size >= settings.retention_bytes)
            # Batches wholly below the log start (DeleteRecords), except the last, whatever the policy.
            dropped += self._drop_while(lambda info: info.last_offset < self._start, keep_last=True)
            return dropped

    def _drop_while(self, predicate, keep_last: bool = False) -> int:
        n, limit = 0, len(self._infos) - (1 if keep_last else 0)
        while n < limit and predicate(self._infos[n]):
            self._size -= self._infos[n].size
            n += 1
        if n:
            del self._batches[:n], self._bases[:n], self._infos[:n]
            self._start = max(self._start, self._bases[0] if self._bases else self._end)
            self._txn.drop_aborted_before(self._start)
        return n

    def flush(self) -> None:
        pass

    # -- compaction ------------------------------------------------------------------------------------------
    def _dirty(self, settings: TopicSettings, now_ms: int) -> tuple[int, int, float, bool]:
        """(first dirty, first uncleanable, dirty ratio, max.compaction.lag.ms passed), under the lock."""
        first_dirty = max(self._cleaned_to, self._start)
        bound = min(self._bases[-1] if self._bases else self._end, self._txn.last_stable_offset(self._end, self._start))
        if settings.min_compaction_lag_ms > 0:
            for info in self._infos[:-1]:
                if info.max_timestamp > now_ms - settings.min_compaction_lag_ms:
                    bound = min(bound, info.base_offset)
                    break
        clean = dirty = 0
        overdue = False
        for info in self._infos[:-1]:
            if info.base_offset >= bound:
                break
            if info.last_offset < first_dirty:
                clean += info.size
            else:
                dirty += info.size
                overdue = overdue or 0 <= info.max_timestamp < now_ms - settings.max_compaction_lag_ms
        return first_dirty, bound, (dirty / (clean + dirty) if clean + dirty else 0.0), overdue

    def clean(
        self,
        now_ms: int,
        *,
        max_map_entries: int = cleaner.DEFAULT_MAP_ENTRIES,
        producer_id_expiration_ms: int = cleaner.DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        force: bool = False,
    ) -> cleaner.CleanStats | None:
        """One cleaning pass, when due (or ``force``): the batches up to the end of the offset map are filtered as
        the segments engine's cleaner filters a segment. Appends go on meanwhile; a pass that retention overtook
        is dropped. None when nothing was due."""
        settings = self._settings()
        with self._lock:
            first_dirty, bound, ratio, overdue = self._dirty(settings, now_ms)
            if first_dirty >= bound or not (force or overdue or ratio >= settings.min_cleanable_dirty_ratio):
                return None
            batches, infos = list(self._batches), list(self._infos)
            aborted = [(a.producer_id, a.first_offset, a.last_offset) for a in self._txn.aborted]
        dirty = [(b, i.size) for b, i in zip(batches, infos) if i.base_offset < bound and i.last_offset >= first_dirty]
        offset_map, latest = cleaner.build_offset_map(dirty, first_dirty, bound, aborted, max_map_entries)
        if latest < first_dirty:
            return None
        producers = cleaner.active_producers(((b, len(b)) for b in batches), now_ms, producer_id_expiration_ms)
        rules = cleaner.cleaning_rules(offset_map, latest, bound, now_ms, settings, producers, aborted)
        stats = cleaner.CleanStats(first_dirty=first_dirty, end_offset=latest + 1)
        n = sum(1 for i in infos if i.base_offset <= latest)
        kept = [bytes(b) for old in batches[:n] for b in cleaner.filter_batches(old, len(old), rules, stats)]
        with self._lock:
            if len(self._batches) < n or any(a is not b for a, b in zip(self._batches[:n], batches[:n])):
                return None  # retention or DeleteRecords dropped some of them meanwhile
            new_infos = [_batch.read_info(b, 0) for b in kept]
            self._size += sum(i.size for i in new_infos) - sum(i.size for i in infos[:n])
            self._batches[:n] = kept
            self._bases[:n] = [i.base_offset for i in new_infos]
            self._infos[:n] = new_infos
            self._cleaned_to = latest + 1
        stats.segments_before, stats.segments_after = n, len(kept)
        return stats


class MemoryStorage(topics.TopicRegistry, Storage):
    blocking = False  # RAM only: appends are quick enough to run on the event loop

    def __init__(self, config: StorageConfig | Mapping[str, object] | None = None, *, cluster_id: str | None = None):
        self.config = StorageConfig.coerce(config)
        self._cluster_id = cluster_id or topics.new_cluster_id()
        self._lock = threading.Lock()
        self._topics: dict[str, TopicMeta] = {}
        self._logs: dict[str, list[MemoryPartitionLog]] = {}
        self._cleaner: threading.Thread | None = None
        self._cleaner_stop = threading.Event()

    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str] | None = None, topic_id: uuid.UUID | None = None
    ) -> TopicMeta:
        with self._lock:
            meta = topics.new_topic(self._topics, self.config, name, partitions, configs, topic_id)
            self._topics[name] = meta
            self._logs[name] = [MemoryPartitionLog(name, p, self._settings_for(name)) for p in range(partitions)]
            return meta

    def create_topics(self, new) -> list[TopicMeta | StorageError]:
        results: list[TopicMeta | StorageError] = []
        with self._lock:
            taken = dict(self._topics)
            for t in new:
                try:
                    meta = topics.new_topic(taken, self.config, t.name, t.partitions, t.configs, t.topic_id)
                except StorageError as exc:
                    results.append(exc)
                    continue
                taken[t.name] = meta
                results.append(meta)
            made = {
                m.name: [MemoryPartitionLog(m.name, p, self._settings_for(m.name)) for p in range(m.partitions)]
                for m in results
                if isinstance(m, TopicMeta)
            }
            self._topics = taken
            self._logs.update(made)
        return results

    def delete_topics(self, names) -> list[StorageError | None]:
        results: list[StorageError | None] = []
        with self._lock:
            for name in names:
                if name not in self._topics:
                    results.append(UnknownTopicError(name))
                    continue
                del self._topics[name], self._logs[name]
                results.append(None)
        return results

    def _settings_for(self, name: str):
        def settings() -> TopicSettings:
            meta = self._topics.get(name)
            return self.config.for_topic(meta.configs if meta else {})

        return settings

    def delete_topic(self, name: str) -> None:
        with self._lock:
            if name not in self._topics:
                raise UnknownTopicError(name)
            del self._topics[name], self._logs[name]

    def add_partitions(self, name: str, total: int) -> TopicMeta:
        with self._lock:
            meta = self._topics.get(name)
            if meta is None:
                raise UnknownTopicError(name)
            topics.check_new_total(meta, total)
            logs = self._logs[name]
            logs.extend(MemoryPartitionLog(name, p, self._settings_for(name)) for p in range(len(logs), total))
            meta = TopicMeta(meta.name, meta.topic_id, total, dict(meta.configs))
            self._topics[name] = meta
            return meta

    def set_topic_configs(self, name: str, configs: dict[str, str | None]) -> TopicMeta:
        with self._lock:
            meta = self._topics.get(name)
            if meta is None:
                raise UnknownTopicError(name)
            meta = TopicMeta(
                meta.name, meta.topic_id, meta.partitions, topics.merged_configs(self.config, meta.configs, configs)
            )
            self._topics[name] = meta
            return meta

    def enforce_retention(self, now_ms: int) -> int:
        with self._lock:
            logs = [log for per_topic in self._logs.values() for log in per_topic]
        return sum(log.enforce_retention(now_ms) for log in logs)

    def flush(self) -> None:
        pass

    def clean(self, now_ms: int | None = None, **options) -> list[cleaner.CleanStats]:
        """A cleaning pass over every compacted partition that is due (``MemoryPartitionLog.clean`` options)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            logs = [log_ for per_topic in self._logs.values() for log_ in per_topic]
        done = []
        for log_ in logs:
            if cleaner.cleanable(log_._settings()):
                stats = log_.clean(now, **options)
                if stats is not None:
                    done.append(stats)
        return done

    def start_cleaner(
        self,
        *,
        backoff_ms: int = 15000,
        bytes_per_sec: int = 0,
        threads: int = 1,
        dedupe_buffer_size: int = cleaner.DEFAULT_DEDUPE_BUFFER_SIZE,
        load_factor: float = cleaner.DEFAULT_LOAD_FACTOR,
    ) -> threading.Thread:
        """Kafka's log cleaner over RAM: one thread (``bytes_per_sec`` bounds disk reads, none here), passes
        ``backoff_ms`` apart, each offset map as large as the segments engine's."""
        entries = cleaner.map_entries(dedupe_buffer_size, load_factor, threads)
        if self._cleaner is None:

            def run() -> None:
                while not self._cleaner_stop.is_set():
                    try:
                        while not self._cleaner_stop.is_set() and self.clean(max_map_entries=entries):
                            pass
                    except Exception:  # a failed pass is retried at the next round; the log stays as it was
                        log.exception("log cleaning failed")
                    self._cleaner_stop.wait(backoff_ms / 1000)

            self._cleaner = threading.Thread(target=run, name="kafkawire-log-cleaner", daemon=True)
            self._cleaner.start()
        return self._cleaner

    def close(self) -> None:
        self._cleaner_stop.set()
        if self._cleaner is not None:
            self._cleaner.join()
