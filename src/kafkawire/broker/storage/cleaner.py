"""Log compaction of the segments engine: Kafka's log cleaner for ``cleanup.policy=compact`` (and
``compact,delete``).

A pass over one partition, as Kafka's ``Cleaner.clean`` does it:

1. The *dirty* section runs from the cleaner checkpoint (the first offset not yet cleaned; the log start at
   first) to the *first uncleanable offset*: the active segment's base, the last stable offset (an open
   transaction's records are not cleaned), and the first segment holding a record newer than
   ``min.compaction.lag.ms``. ``choose`` cleans a partition only when its dirty bytes are at least
   ``min.cleanable.dirty.ratio`` of its cleanable bytes, or when a dirty record is older than
   ``max.compaction.lag.ms``.
2. An offset map, key -> last offset, is built over the dirty section (aborted transactions' records and
   control batches are not keys); it holds at most ``max_map_entries`` keys (Kafka's
   ``log.cleaner.dedupe.buffer.size``): when full, the pass cleans up to the segment where it filled, and
   the next pass goes on from there.
3. The sealed segments from the log start to the end of the map are rewritten, in groups of consecutive
   segments whose retained bytes fit ``segment.bytes`` (Kafka's ``groupSegmentsBySize``), each group into
   one segment at the group's first base offset. A record is kept when no later record of its key is in
   the map; the records of aborted transactions and records without a key are removed; a tombstone (null value) is kept until it
   has been through a cleaning and ``delete.retention.ms`` has passed since the newest record of its
   segment (the horizon Kafka's cleaner uses for batches that carry no delete horizon of their own;
   kafkawire does not stamp one); a transaction marker goes when no record of its transaction is left and
   it is as old as a tombstone that may go. Offsets never change:
   a batch keeps its base offset, last offset delta, timestamps' base and producer fields (so a
   producer's sequence state survives), and a batch left with no record is dropped unless it is its
   producer's last one, which stays as an empty batch, as Kafka's cleaner keeps it. Retained records
   are moved as bytes (a batch whose records all survive is copied whole); compressed batches are
   decompressed and recompressed with their own codec. Every rewritten batch gets its CRC.
4. Crash safety, Kafka's protocol: a group is written to ``<base>.log.cleaned`` and fsynced, renamed to
   ``<base>.log.swap`` (the commit point) with the directory fsynced, the group's other segments renamed
   to ``.log.deleted``, and the swap file renamed over ``<base>.log``. On start, ``complete_swaps`` deletes
   ``.cleaned`` files (a pass that did not finish: nothing was replaced) and finishes every ``.swap``
   (deleting the segments it covers and putting it in place, with fresh indexes). Nothing is lost at
   any point: until the rename over ``<base>.log`` the old segments are all there, and the swap file
   holds every record the pass kept.

The cleaner thread (``CleanerThread``, one, as Kafka's ``log.cleaner.threads`` default) runs passes off the
event loop, ``log.cleaner.backoff.ms`` apart; ``log.cleaner.io.max.bytes.per.second`` bounds its reads.
The cleaner checkpoint is Kafka's ``cleaner-offset-checkpoint`` at the top of the data directory (Kafka's
format; Kafka on the same directory takes it up).
"""

from __future__ import annotations

import logging
import os
import re
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from crc32c import crc32c

from kafkawire.protocol.records.batch import HEADER, HEADER_SIZE
from kafkawire.protocol.records.codecs import compress, decompress
from kafkawire.protocol.records.varint import read_varint, read_varlong

from . import _batch, metadata
from .segment import LogSegment, segment_name

log = logging.getLogger("kafkawire.storage.cleaner")

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
_SWAP_FILE = re.compile(r"(\d{20})\.log\.swap")
_CLEANED_FILE = re.compile(r"(\d{20})\.log\.cleaned")
# Kafka: log.cleaner.dedupe.buffer.size 128 MiB, 24 bytes an entry (MD5 + offset), load factor 0.9
DEFAULT_MAP_ENTRIES = 134217728 // 24 * 9 // 10

_ATTR_COMPRESSION = 0x07
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20
_ATTRIBUTES_OFFSET = 21
_LENGTH = struct.Struct(">i")
_MAX_TS = struct.Struct(">q")


@dataclass
class CleanStats:
    """What one pass did (and what the benchmark reports)."""

    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    segments_before: int = 0
    segments_after: int = 0
    first_dirty: int = 0
    end_offset: int = 0
    elapsed_s: float = 0.0
    groups: list = field(default_factory=list)


# -- records as bytes ------------------------------------------------------------------------------------
def _walk(payload, count: int):
    """Yield (start, end, offset_delta, timestamp_delta, key, is_tombstone) for the records of a batch's
    (decompressed) payload: the records' own bytes are ``payload[start:end]``."""
    pos = 0
    for _ in range(count):
        start = pos
        length, pos = read_varint(payload, pos)
        end = pos + length
        pos += 1  # attributes
        ts_delta, pos = read_varlong(payload, pos)
        off_delta, pos = read_varint(payload, pos)
        klen, pos = read_varint(payload, pos)
        key = bytes(payload[pos : pos + klen]) if klen >= 0 else None
        pos += max(klen, 0)
        vlen, _ = read_varint(payload, pos)
        yield start, end, off_delta, ts_delta, key, vlen < 0
        pos = end


def _payload(buf, pos: int, size: int, attributes: int):
    body = memoryview(buf)[pos + HEADER_SIZE : pos + size]
    codec = attributes & _ATTR_COMPRESSION
    return (decompress(codec, body) if codec else body), codec


def _rebuild(buf, pos: int, kept: list, payload, codec: int, max_ts: int) -> bytes:
    """The batch at ``pos`` with only the ``kept`` (start, end) record spans: the header as it was (base
    offset, last offset delta, base timestamp, producer fields), a new length, count, max timestamp, CRC."""
    records = b"".join(bytes(payload[s:e]) for s, e in kept)
    if codec and records:
        records = compress(codec, records)
    out = bytearray(memoryview(buf)[pos : pos + HEADER_SIZE])
    out += records
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">q", out, 35, max_ts)
    struct.pack_into(">i", out, 57, len(kept))
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return bytes(out)


# -- the checkpoint --------------------------------------------------------------------------------------
def _checkpoint_path(data_dir: str) -> str:
    # Kafka's own file, at the top of the log directory: Kafka on the same directory reads what kafkawire cleaned
    return os.path.join(data_dir, CHECKPOINT_FILE)


def read_checkpoint(data_dir: str) -> dict[tuple[str, int], int]:
    """Kafka's ``cleaner-offset-checkpoint`` format: version 0, a count, then ``topic partition offset`` lines."""
    path = _checkpoint_path(data_dir)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}
    out = {}
    try:
        if int(lines[0]) != 0:
            raise ValueError(f"version {lines[0]}")
        for line in lines[2 : 2 + int(lines[1])]:
            topic, partition, offset = line.rsplit(" ", 2)
            out[(topic, int(partition))] = int(offset)
    except (ValueError, IndexError) as exc:  # a damaged checkpoint costs a full pass, nothing else
        log.warning("ignoring %s: %s", path, exc)
        return {}
    return out


def write_checkpoint(data_dir: str, offsets: dict[tuple[str, int], int]) -> None:
    path = _checkpoint_path(data_dir)
    lines = ["0", str(len(offsets))] + [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    metadata.fsync_dir(os.path.dirname(path))


# -- crash recovery --------------------------------------------------------------------------------------
def complete_swaps(directory: str, index_interval_bytes: int, now_ms: int) -> int:
    """Finish what a cleaning pass committed before the process stopped (call before the segments load):
    ``.cleaned`` files are dropped, every ``.swap`` file replaces the segments whose offsets it covers.
    Returns the number of swaps completed."""
    names = os.listdir(directory)
    for name in names:
        if _CLEANED_FILE.fullmatch(name):
            log.info("removing %s: a cleaning pass that did not finish", os.path.join(directory, name))
            os.unlink(os.path.join(directory, name))
    done = 0
    for name in sorted(names):
        m = _SWAP_FILE.fullmatch(name)
        if m is None:
            continue
        base = int(m.group(1))
        swap = os.path.join(directory, name)
        data = open(swap, "rb").read()
        infos = list(_batch.iter_infos(data, 0, len(data)))
        last = infos[-1].last_offset if infos else base
        for other in os.listdir(directory):
            seg = re.fullmatch(r"(\d{20})\.(log|index|timeindex|txnindex)(\.deleted)?", other)
            if seg is not None and base < int(seg.group(1)) <= last:
                os.unlink(os.path.join(directory, other))
        segment = LogSegment(directory, base, created_ms=now_ms)
        for index in (segment.offset_index.path, segment.time_index.path):
            if os.path.exists(index):
                os.unlink(index)
        os.replace(swap, segment.log_path)
        metadata.fsync_dir(directory)
        segment.rebuild_from(infos, index_interval_bytes, write=False)
        segment.seal()
        segment.close()
        log.info("completed the cleaning of %s (offsets %d..%d) interrupted by a stop", segment.log_path, base, last)
        done += 1
    return done


# -- one pass ----------------------------------------------------------------------------------------------
class Cleaner:
    """Cleans partitions of one ``SegmentStorage`` (``clean_partition``); ``throttle(n)`` is called after every
    ``n`` bytes read (the thread sleeps in it to honour the I/O limit)."""

    def __init__(
        self,
        data_dir: str,
        *,
        max_map_entries: int = DEFAULT_MAP_ENTRIES,
        throttle: Callable[[int], None] | None = None,
        clock: Callable[[], int] | None = None,
    ):
        self.data_dir = data_dir
        self.max_map_entries = max_map_entries
        self.throttle = throttle
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.checkpoints = read_checkpoint(data_dir)
        self._lock = threading.Lock()  # one pass at a time

    # which partition, up to where ------------------------------------------------------------------------
    def first_uncleanable(self, plog, settings, now_ms: int) -> int:
        with plog._state_lock:
            segments = list(plog._segments)
            lso = plog._txn.last_stable_offset(plog._end, plog._start)
        bound = min(segments[-1].base_offset, lso)
        if settings.min_compaction_lag_ms > 0:
            for seg in segments[:-1]:
                if seg.max_timestamp >= 0 and seg.max_timestamp > now_ms - settings.min_compaction_lag_ms:
                    bound = min(bound, seg.base_offset)
                    break
        return bound

    def dirty_ratio(self, plog, settings, now_ms: int) -> tuple[float, bool, int, int]:
        """(dirty bytes / cleanable bytes, max.compaction.lag.ms exceeded, first dirty, first uncleanable)."""
        checkpoint = self.checkpoints.get((plog.topic, plog.partition), 0)
        if checkpoint > plog.log_end_offset:  # a topic of that name deleted and created again: start over
            checkpoint = 0
        first_dirty = max(checkpoint, plog.log_start_offset)
        end = self.first_uncleanable(plog, settings, now_ms)
        clean_bytes = dirty_bytes = 0
        overdue = False
        for seg in plog.segments[:-1]:
            if seg.base_offset >= end:
                break
            if seg.next_offset <= first_dirty:
                clean_bytes += seg.size
            else:
                dirty_bytes += seg.size
                if 0 <= seg.first_batch_timestamp < now_ms - settings.max_compaction_lag_ms:
                    overdue = True
        total = clean_bytes + dirty_bytes
        return (dirty_bytes / total if total else 0.0), overdue, first_dirty, end

    def needs_cleaning(self, plog, settings, now_ms: int) -> bool:
        ratio, overdue, first_dirty, end = self.dirty_ratio(plog, settings, now_ms)
        return first_dirty < end and (overdue or ratio >= settings.min_cleanable_dirty_ratio)

    # the pass -----------------------------------------------------------------------------------------
    def clean_partition(self, plog, settings, *, now_ms: int | None = None, force: bool = False) -> CleanStats | None:
        """One pass over ``plog`` (a ``SegmentPartitionLog`` of a compacted topic); None if nothing was due."""
        now = self.clock() if now_ms is None else now_ms
        with self._lock:
            ratio, overdue, first_dirty, end = self.dirty_ratio(plog, settings, now)
            if first_dirty >= end or not (force or overdue or ratio >= settings.min_cleanable_dirty_ratio):
                return None
            t0 = time.perf_counter()
            stats = CleanStats(first_dirty=first_dirty)
            offset_map, map_end = self._build_map(plog, first_dirty, end, stats)
            if map_end <= first_dirty:
                return None
            stats.end_offset = map_end
            self._clean_segments(plog, settings, offset_map, first_dirty, map_end, now, stats)
            self.checkpoints[(plog.topic, plog.partition)] = map_end
            write_checkpoint(self.data_dir, self.checkpoints)
            stats.elapsed_s = time.perf_counter() - t0
            log.info(
                "cleaned %s-%d: offsets up to %d, %d of %d records kept, %d -> %d bytes, %d -> %d segments in %.3f s",
                plog.topic,
                plog.partition,
                map_end,
                stats.records_kept,
                stats.records_read,
                stats.bytes_read,
                stats.bytes_written,
                stats.segments_before,
                stats.segments_after,
                stats.elapsed_s,
            )
            return stats

    def _aborted(self, plog):
        with plog._state_lock:
            return [(a.producer_id, a.first_offset, a.last_offset) for a in plog._txn.aborted]

    @staticmethod
    def _is_aborted(aborted, pid: int, offset: int) -> bool:
        for a_pid, first, last in aborted:
            if a_pid == pid and first <= offset <= last:
                return True
        return False

    def _build_map(self, plog, first_dirty: int, end: int, stats: CleanStats) -> tuple[dict, int]:
        """key -> last offset over the dirty segments, whole segments only; (map, offset it covers up to)."""
        offset_map: dict[bytes, int] = {}
        aborted = self._aborted(plog)
        covered = first_dirty
        for seg in plog.segments[:-1]:
            if seg.base_offset >= end:
                break
            if seg.next_offset <= first_dirty:
                continue
            buf = seg.buffer()
            keys = []
            for info in _batch.iter_infos(buf, 0, seg.size):
                if info.last_offset < first_dirty:
                    continue
                h = HEADER.unpack_from(buf, info.position)
                attributes, pid = h[5], h[9]
                if attributes & _ATTR_CONTROL:
                    continue
                if attributes & _ATTR_TRANSACTIONAL and self._is_aborted(aborted, pid, info.base_offset):
                    continue
                payload, _codec = _payload(buf, info.position, info.size, attributes)
                base = info.base_offset
                for _s, _e, off_delta, _ts, key, _tomb in _walk(payload, h[12]):
                    if key is not None and base + off_delta >= first_dirty:
                        keys.append((key, base + off_delta))
            if self.throttle is not None:
                self.throttle(seg.size)
            if len(offset_map) + len(keys) > self.max_map_entries and covered > first_dirty:
                break  # the map is full: this pass stops before this segment
            offset_map.update(keys)
            covered = seg.next_offset
            if len(offset_map) >= self.max_map_entries:
                break
        return offset_map, min(covered, end)

    def _last_batch_of_producers(self, plog) -> dict[int, int]:
        """producer id -> base offset of its last data batch in the log (header walk)."""
        out: dict[int, int] = {}
        for seg in plog.segments:
            buf = seg.buffer()
            for info in _batch.iter_infos(buf, 0, seg.size):
                h = HEADER.unpack_from(buf, info.position)
                if h[9] >= 0 and not h[5] & _ATTR_CONTROL:
                    out[h[9]] = info.base_offset
        return out

    def _clean_segments(self, plog, settings, offset_map, first_dirty, map_end, now, stats: CleanStats) -> None:
        aborted = self._aborted(plog)
        last_of_producer = self._last_batch_of_producers(plog)
        segments = [s for s in plog.segments[:-1] if s.next_offset <= map_end or s.base_offset < map_end]
        segments = [s for s in segments if s.base_offset < map_end]
        stats.segments_before = len(segments)
        horizon = now - settings.delete_retention_ms
        txn_kept: dict[int, bool] = {}  # producer id -> records of its current transaction were kept
        for group in self._groups(segments, settings.segment_bytes):
            cleaned = group[0].log_path + CLEANED_SUFFIX
            infos, position = [], 0
            # the retained batches go to the file as they come: memory holds one batch at a time
            with open(cleaned, "wb") as f:
                for seg in group:
                    # tombstones go once they have been through a cleaning (below the first dirty offset) and
                    # their segment's newest record is older than delete.retention.ms
                    drop_tombstones = seg.next_offset <= first_dirty and 0 <= seg.max_timestamp < horizon
                    for batch in self._filter_segment(
                        seg, offset_map, aborted, last_of_producer, drop_tombstones, txn_kept, stats
                    ):
                        f.write(batch)
                        info = _batch.read_info(batch, 0)
                        infos.append(info._replace(position=position))
                        position += len(batch)
                f.flush()
                os.fsync(f.fileno())
            self._swap_in(plog, group, cleaned, infos, stats)
        stats.segments_after = len(stats.groups)

    @staticmethod
    def _groups(segments: list[LogSegment], max_bytes: int):
        """Consecutive segments whose sizes add up to at most ``max_bytes`` (at least one each) and whose offsets
        a segment can index (Kafka's groupSegmentsBySize): each group becomes one cleaned segment."""
        group: list[LogSegment] = []
        size = 0
        for seg in segments:
            if group and (size + seg.size > max_bytes or seg.next_offset - group[0].base_offset >= 2**31):
                yield group
                group, size = [], 0
            group.append(seg)
            size += seg.size
        if group:
            yield group

    def _filter_segment(self, seg, offset_map, aborted, last_of_producer, drop_tombstones, txn_kept, stats):
        """Yield the batches of ``seg`` that stay, as they stay."""
        buf = seg.buffer()
        for info in _batch.iter_infos(buf, 0, seg.size):
            pos, size = info.position, info.size
            h = HEADER.unpack_from(buf, pos)
            attributes, base_ts, max_ts, pid, count = h[5], h[7], h[8], h[9], h[12]
            stats.bytes_read += size
            if attributes & _ATTR_CONTROL:
                # a transaction marker goes, as Kafka's cleaner removes it, once no record of its transaction is
                # left and it is as old as a tombstone that may go
                if txn_kept.pop(pid, False) or not drop_tombstones or not attributes & _ATTR_TRANSACTIONAL:
                    yield memoryview(buf)[pos : pos + size]  # whole: copied to the file as it is
                continue
            aborted_batch = bool(attributes & _ATTR_TRANSACTIONAL) and self._is_aborted(aborted, pid, info.base_offset)
            payload, codec = _payload(buf, pos, size, attributes)
            kept, new_max = [], -1
            log_append = bool(attributes & 0x08)
            for start, end, off_delta, ts_delta, key, tombstone in _walk(payload, count):
                stats.records_read += 1
                offset = info.base_offset + off_delta
                if aborted_batch:
                    continue
                if key is None:
                    continue  # Kafka refuses such records in a compacted topic; its cleaner drops any there
                if offset_map.get(key, offset) > offset:
                    continue  # a later record of the key is in the map
                if tombstone and drop_tombstones:
                    continue
                kept.append((start, end))
                ts = base_ts + ts_delta
                if ts > new_max:
                    new_max = ts
            stats.records_kept += len(kept)
            if kept and attributes & _ATTR_TRANSACTIONAL:
                txn_kept[pid] = True
            if len(kept) == count:
                yield memoryview(buf)[pos : pos + size]  # whole: copied to the file as it is
            elif kept:
                yield _rebuild(buf, pos, kept, payload, codec, max_ts if log_append else new_max)
            elif pid >= 0 and last_of_producer.get(pid) == info.base_offset:
                # the producer's last batch stays, empty, so its sequence and epoch survive (as Kafka)
                yield _rebuild(buf, pos, [], payload, codec, max_ts)
        if self.throttle is not None:
            self.throttle(seg.size)

    def _swap_in(self, plog, group: list[LogSegment], cleaned: str, infos: list, stats: CleanStats) -> None:
        """Replace the ``group`` of segments by the fsynced ``cleaned`` file (its batches ``infos``), by the
        .cleaned/.swap protocol."""
        first = group[0]
        directory = plog.directory
        swap = first.log_path + SWAP_SUFFIX
        os.replace(cleaned, swap)  # the commit point: a restart finishes the swap
        metadata.fsync_dir(directory)
        settings = plog._settings()
        with plog._write_lock, plog._state_lock:
            at = plog._segments.index(first) if first in plog._segments else -1
            if at < 0 or plog._segments[at : at + len(group)] != group or at + len(group) >= len(plog._segments):
                # retention deleted some of them meanwhile (compact,delete), or the log was closed: drop the work
                os.unlink(swap)
                metadata.fsync_dir(directory)
                return
            old_size = sum(seg.size for seg in group)
            for seg in group[1:]:
                os.replace(seg.log_path, seg.log_path + DELETED_SUFFIX)
            # the new indexes first (a restart that finds the .swap file rebuilds them anyway), then the log:
            # once it is in place, its indexes on disk match it and a restart loads it without a full check
            first.rebuild_from(infos, settings.index_interval_bytes, write=False)
            first.time_index.maybe_append(first.max_timestamp, first.offset_of_max_timestamp)
            first.write_indexes(fsync=True)
            first.replace_file(swap)  # os.replace over <base>.log, directory fsynced
            if not infos:
                first.next_offset = group[-1].next_offset  # an empty group still spans its offsets
            index = plog._segments.index(first)
            removed = plog._segments[index + 1 : index + len(group)]
            del plog._segments[index + 1 : index + len(group)], plog._bases[index + 1 : index + len(group)]
            plog._size += first.size - old_size
        for seg in removed:
            seg.delete()
            deleted = seg.log_path + DELETED_SUFFIX
            if os.path.exists(deleted):
                os.unlink(deleted)
        plog._write_txn_index(first, fsync=True)
        stats.bytes_written += first.size
        stats.groups.append((first.base_offset, len(group), first.size))


def cleanable(settings) -> bool:
    return "compact" in settings.cleanup_policy.split(",")


class CleanerThread:
    """Kafka's log cleaner thread: every ``backoff_ms`` it cleans the dirtiest compacted partition that is due,
    until ``stop``. Runs beside the event loop; its reads are paced to ``bytes_per_sec`` (0: unlimited)."""

    def __init__(self, storage, *, backoff_ms: int = 15000, bytes_per_sec: int = 0, max_map_entries: int = 0):
        self.storage = storage
        self.backoff_s = backoff_ms / 1000
        self.bytes_per_sec = bytes_per_sec
        self.cleaner = Cleaner(
            storage.data_dir, max_map_entries=max_map_entries or DEFAULT_MAP_ENTRIES, throttle=self._throttle
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.passes = 0

    def _throttle(self, nbytes: int) -> None:
        if self.bytes_per_sec > 0:
            self._stop.wait(nbytes / self.bytes_per_sec)

    def run_once(self, now_ms: int | None = None) -> CleanStats | None:
        """Clean the dirtiest due partition (None when none is due)."""
        now = self.cleaner.clock() if now_ms is None else now_ms
        best = None
        for plog in self.storage._all_logs():
            settings = plog._settings()
            if not cleanable(settings) or plog._closed:
                continue
            ratio, overdue, first_dirty, end = self.cleaner.dirty_ratio(plog, settings, now)
            if first_dirty >= end or not (overdue or ratio >= settings.min_cleanable_dirty_ratio):
                continue
            score = (overdue, ratio)
            if best is None or score > best[0]:
                best = (score, plog, settings)
        if best is None:
            return None
        stats = self.cleaner.clean_partition(best[1], best[2], now_ms=now)
        self.passes += 1
        return stats

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                while not self._stop.is_set() and self.run_once() is not None:
                    pass
            except Exception:  # a failed pass is retried at the next round; the log stays as it was
                log.exception("log cleaning failed")
            self._stop.wait(self.backoff_s)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kafkawire-log-cleaner", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


__all__ = ["Cleaner", "CleanerThread", "CleanStats", "complete_swaps", "segment_name"]
