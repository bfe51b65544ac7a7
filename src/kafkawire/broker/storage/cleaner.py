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
   control batches are not keys). As Kafka's SkimpyOffsetMap it holds an MD5 digest of each key (memory does
   not grow with key sizes) and at most ``max_map_entries`` keys: ``log.cleaner.dedupe.buffer.size`` shared by
   ``log.cleaner.threads``, 24 bytes a slot, times ``log.cleaner.io.buffer.load.factor`` (``map_entries``).
   When it is full the next keyed record ends it, mid-segment if so: the pass cleans up to the last offset the
   map covers, records after it stay as they are, and the next pass goes on from there.
3. The sealed segments from the log start to the end of the map are rewritten, in groups of consecutive
   segments whose retained bytes fit ``segment.bytes`` (Kafka's ``groupSegmentsBySize``), each group into
   one segment at the group's first base offset, by Kafka's cleanInto filter. A record is kept when no later
   record of its key is in the map; the records of aborted transactions and records without a key are
   removed. Tombstones follow KIP-534's delete horizon: the first pass that keeps a batch holding a
   tombstone (or a transaction marker whose transaction has no batch left) stamps the batch with the
   horizon now + ``delete.retention.ms`` (attribute bit 6, the horizon in the base timestamp, the records'
   timestamp deltas taken from it); a pass at or after the horizon removes the tombstones (and the marker).
   Offsets never change: a rewritten batch keeps its base offset, last offset delta, producer fields and
   leader epoch and is written as Kafka's MemoryRecordsBuilder writes it (base timestamp the first kept
   record's when there is no horizon, record attributes 0, max timestamp the newest kept record's or the
   log append time); a batch whose records all stay and that needs no stamp is copied whole. A batch left
   with no record is dropped unless it is the last batch of a producer active within
   ``producer.id.expiration.ms`` (or the last of the round), which stays as Kafka's empty header. Compressed
   batches are recompressed with their own codec.
4. Crash safety, Kafka's protocol: a group is written to ``<base>.log.cleaned`` and fsynced, renamed to
   ``<base>.log.swap`` (the commit point) with the directory fsynced, the group's other segments renamed
   to ``.log.deleted``, and the swap file renamed over ``<base>.log``. On start, ``complete_swaps`` deletes
   ``.cleaned`` files (a pass that did not finish: nothing was replaced) and finishes every ``.swap``
   (deleting the segments it covers and putting it in place, with fresh indexes). Nothing is lost at
   any point: until the rename over ``<base>.log`` the old segments are all there, and the swap file
   holds every record the pass kept.

The cleaner threads (``CleanerThread``, ``log.cleaner.threads`` of them, one partition each at a time) run
passes off the event loop, ``log.cleaner.backoff.ms`` apart; ``log.cleaner.io.max.bytes.per.second`` bounds their
reads.
The cleaner checkpoint is Kafka's ``cleaner-offset-checkpoint`` at the top of the data directory (Kafka's
format; Kafka on the same directory takes it up).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import struct
import threading
import time
from collections.abc import Callable

import msgspec

from kafkawire.protocol.records.batch import HEADER, HEADER_SIZE
from kafkawire.protocol.records.codecs import compress, decompress
from kafkawire.protocol.records.crc import crc32c
from kafkawire.protocol.records.varint import encode_varint, read_varint, read_varlong

from . import _batch, metadata
from .segment import LogSegment, segment_name

log = logging.getLogger("kafkawire.storage.cleaner")

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
_SWAP_FILE = re.compile(r"(\d{20})\.log\.swap")
_CLEANED_FILE = re.compile(r"(\d{20})\.log\.cleaned")
# Kafka's defaults: log.cleaner.dedupe.buffer.size 128 MiB, shared by log.cleaner.threads, 24 bytes a slot (an
# MD5 of the key and an offset), filled up to log.cleaner.io.buffer.load.factor 0.9
DEFAULT_DEDUPE_BUFFER_SIZE = 134_217_728
DEFAULT_LOAD_FACTOR = 0.9
_BYTES_PER_ENTRY = 16 + 8
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms


def map_entries(dedupe_buffer_size: int, load_factor: float = DEFAULT_LOAD_FACTOR, threads: int = 1) -> int:
    """How many keys one thread's offset map holds, as Kafka sizes its SkimpyOffsetMap: the buffer shared by the
    threads, 24 bytes a slot, filled up to the load factor. ValueError where Kafka's cleaner refuses to start."""
    slots = min(dedupe_buffer_size // max(threads, 1), 2**31 - 1) // _BYTES_PER_ENTRY
    if slots * load_factor <= 1:
        raise ValueError(
            "offset map is too small to fit in even a single message: increase log.cleaner.dedupe.buffer.size "
            "or decrease log.cleaner.threads"
        )
    return int(slots * load_factor)


DEFAULT_MAP_ENTRIES = map_entries(DEFAULT_DEDUPE_BUFFER_SIZE)

_ATTR_COMPRESSION = 0x07
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20
_ATTR_LOG_APPEND_TIME = 0x08
_ATTR_DELETE_HORIZON = 0x40  # KIP-534: the base timestamp is the batch's delete horizon
_KEEP_ATTRIBUTES = _ATTR_COMPRESSION | _ATTR_LOG_APPEND_TIME | _ATTR_TRANSACTIONAL | _ATTR_CONTROL
_CONTROL_ABORT, _CONTROL_COMMIT = 0, 1
_ATTRIBUTES_OFFSET = 21
_LENGTH = struct.Struct(">i")
_MAX_TS = struct.Struct(">q")


class CleanStats(msgspec.Struct):
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
    groups: list = msgspec.field(default_factory=list)


# -- records as bytes ------------------------------------------------------------------------------------
def _walk(payload, count: int):
    """Yield (start, end, offset_delta, timestamp_delta, key, is_tombstone, tail) for the records of a batch's
    (decompressed) payload: the records' own bytes are ``payload[start:end]``, and from ``tail`` on (the offset
    delta, key, value, headers) they are what a rewrite keeps."""
    pos = 0
    for _ in range(count):
        start = pos
        length, pos = read_varint(payload, pos)
        end = pos + length
        pos += 1  # attributes
        ts_delta, pos = read_varlong(payload, pos)
        tail = pos
        off_delta, pos = read_varint(payload, pos)
        klen, pos = read_varint(payload, pos)
        key = bytes(payload[pos : pos + klen]) if klen >= 0 else None
        pos += max(klen, 0)
        vlen, _ = read_varint(payload, pos)
        yield start, end, off_delta, ts_delta, key, vlen < 0, tail
        pos = end


def _payload(buf, pos: int, size: int, attributes: int):
    body = memoryview(buf)[pos + HEADER_SIZE : pos + size]
    codec = attributes & _ATTR_COMPRESSION
    return (decompress(codec, body) if codec else body), codec


def _rebuild(h: tuple, kept: list, payload, codec: int, delete_horizon: int | None) -> bytes:
    """The batch with header fields ``h`` holding only the ``kept`` records ((timestamp, tail start, end) in
    ``payload``), written as Kafka's cleaner writes a filtered batch (MemoryRecordsBuilder): base offset, last
    offset delta, producer fields and leader epoch as they were; the base timestamp is the delete horizon when
    there is one (attribute bit 6 set), else the first record's timestamp; every record's timestamp delta is
    taken from it again (its attributes byte 0); the max timestamp is the log append time of such a batch, else
    the newest kept record's."""
    log_append = h[5] & _ATTR_LOG_APPEND_TIME
    base_ts = delete_horizon if delete_horizon is not None else kept[0][0]
    max_ts = -1
    parts = []
    for ts, tail, end in kept:
        body = b"\x00" + encode_varint(ts - base_ts) + bytes(payload[tail:end])
        parts.append(encode_varint(len(body)))
        parts.append(body)
        if ts > max_ts:
            max_ts = ts
    records = b"".join(parts)
    if codec:
        records = compress(codec, records)
    attributes = h[5] & _KEEP_ATTRIBUTES | (_ATTR_DELETE_HORIZON if delete_horizon is not None else 0)
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out, 0, h[0], HEADER_SIZE - 12 + len(records), h[2], 2, 0, attributes, h[6], base_ts,
        h[8] if log_append else max_ts, h[9], h[10], h[11], len(kept),
    )  # fmt: skip
    out += records
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return bytes(out)


def _empty_batch(h: tuple) -> bytes:
    """Kafka's empty header for a batch kept only for its producer fields (DefaultRecordBatch.writeEmptyHeader):
    no records, no compression, no delete horizon, base timestamp -1, the batch's max timestamp and offsets."""
    attributes = h[5] & (_ATTR_LOG_APPEND_TIME | _ATTR_TRANSACTIONAL | _ATTR_CONTROL)
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(out, 0, h[0], HEADER_SIZE - 12, h[2], 2, 0, attributes, h[6], -1, h[8], h[9], h[10], h[11], 0)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return bytes(out)


def _key_digest(key: bytes) -> bytes:
    # the map holds at most 16 bytes of each key, as Kafka's SkimpyOffsetMap holds an MD5 of it: its memory does not
    # grow with key sizes. A key shorter than a digest is its own (no hashing; lengths keep the two apart)
    return key if len(key) < 16 else hashlib.md5(key, usedforsecurity=False).digest()


class _TxnState:
    """Kafka's CleanedTransactionMetadata over one pass: which batches belong to aborted transactions, and
    whether a transaction marker may go (no batch of its transaction was met since the transaction began)."""

    def __init__(self, aborted: list[tuple[int, int, int]]):
        self._pending = sorted(aborted, key=lambda a: a[1])  # (producer id, first offset, last offset)
        self._next = 0
        self._aborted: dict[int, bool] = {}  # producer id -> a batch of its aborted transaction was met
        self._committed: set[int] = set()

    def _consume_up_to(self, offset: int) -> None:
        while self._next < len(self._pending) and self._pending[self._next][1] <= offset:
            self._aborted[self._pending[self._next][0]] = False
            self._next += 1

    def on_batch(self, pid: int, transactional: bool, last_offset: int) -> bool:
        """A data batch: True when it belongs to an aborted transaction (its records go)."""
        self._consume_up_to(last_offset)
        if not transactional:
            return False
        if pid in self._aborted:
            self._aborted[pid] = True
            return True
        self._committed.add(pid)
        return False

    def on_marker(self, pid: int, last_offset: int, control_type: int | None) -> bool:
        """A control batch: True when it may go (its transaction has no batch left); ``control_type`` None for an
        empty control batch (one already cleaned away)."""
        self._consume_up_to(last_offset)
        if control_type is None:
            return True
        if control_type == _CONTROL_ABORT:
            return not self._aborted.pop(pid, False)
        if control_type == _CONTROL_COMMIT:
            if pid in self._committed:
                self._committed.discard(pid)
                return False
            return True
        return False


def build_offset_map(pieces, first_dirty: int, end: int, aborted, limit: int, throttle=None) -> tuple[dict, int]:
    """Key digest -> last offset over the dirty ``pieces`` ((buffer, size) of whole batches, in offset order), as
    Kafka's buildOffsetMap: the records of aborted transactions and control batches are not keys; when the map
    holds ``limit`` keys the next keyed record ends it, mid-segment. Returns (map, the last offset it covers)."""
    offset_map: dict[bytes, int] = {}
    txn = _TxnState(aborted)
    latest = first_dirty - 1
    for buf, size in pieces:
        for info in _batch.iter_infos(buf, 0, size):
            if info.base_offset >= end:
                break
            h = HEADER.unpack_from(buf, info.position)
            attributes, pid = h[5], h[9]
            if attributes & _ATTR_CONTROL:
                txn.on_marker(pid, info.last_offset, None)  # its type does not matter here
            elif not txn.on_batch(pid, bool(attributes & _ATTR_TRANSACTIONAL), info.last_offset):
                payload, _codec = _payload(buf, info.position, info.size, attributes)
                base = info.base_offset
                for _s, _e, off_delta, _ts, key, _tomb, _t in _walk(payload, h[12]):
                    offset = base + off_delta
                    if key is not None and offset >= first_dirty:
                        if len(offset_map) >= limit:
                            if throttle is not None:
                                throttle(size)
                            return offset_map, latest  # full: the pass cleans up to here
                        offset_map[_key_digest(key)] = offset
                        latest = offset
            if info.last_offset >= first_dirty:
                latest = max(latest, info.last_offset)
        if throttle is not None:
            throttle(size)
    return offset_map, min(latest, end - 1)


def active_producers(pieces, now: int, expiration_ms: int) -> dict[int, tuple[int | None, int]]:
    """Kafka's lastRecordsOfActiveProducers from a header walk of the whole log's ``pieces``: producer id -> (last
    offset of its last data batch or None, epoch of its last batch), for producers whose last batch is younger
    than producer.id.expiration.ms."""
    out: dict[int, tuple[int | None, int]] = {}
    last_ts: dict[int, int] = {}
    for buf, size in pieces:
        for info in _batch.iter_infos(buf, 0, size):
            h = HEADER.unpack_from(buf, info.position)
            pid = h[9]
            if pid < 0:
                continue
            data = None if h[5] & _ATTR_CONTROL else info.last_offset
            out[pid] = (data if data is not None else out.get(pid, (None, 0))[0], h[10])
            last_ts[pid] = h[8]
    expired = now - expiration_ms
    return {pid: last for pid, last in out.items() if last_ts[pid] > expired}


def cleaning_rules(offset_map, latest, upper_bound, now, settings, producers, aborted) -> tuple:
    """What ``filter_batches`` decides by, for one pass."""
    return (offset_map, latest, upper_bound, now, settings.delete_retention_ms, producers, _TxnState(aborted))


def filter_batches(buf, size: int, rules: tuple, stats: CleanStats):
    """Yield the batches of ``buf[:size]`` that stay, as they stay (``rules``: ``cleaning_rules``): Kafka's
    cleanInto filter (KIP-534's delete horizon). A batch holding a tombstone, or a marker whose transaction has no batch left, gets a delete
    horizon (now + delete.retention.ms) the first time a pass keeps it; a later pass past that horizon removes
    the tombstone (and such a marker). Records past the map's last offset stay as they are."""
    offset_map, latest, upper_bound, now, retention_ms, producers, txn = rules
    for info in _batch.iter_infos(buf, 0, size):
        pos, length = info.position, info.size
        h = HEADER.unpack_from(buf, pos)
        attributes, base_ts, pid, count = h[5], h[7], h[9], h[12]
        last_offset = info.last_offset
        horizon = base_ts if attributes & _ATTR_DELETE_HORIZON else None
        stats.bytes_read += length
        control = bool(attributes & _ATTR_CONTROL)
        payload, codec = _payload(buf, pos, length, attributes)
        if control:
            control_type = None
            if count:
                for _s, _e, _o, _t, key, _tomb, _tail in _walk(payload, 1):
                    control_type = struct.unpack_from(">h", key, 2)[0] if key is not None and len(key) >= 4 else -1
            can_discard = txn.on_marker(pid, last_offset, control_type)
            discard_records = can_discard and horizon is not None and horizon <= now
        else:
            can_discard = txn.on_batch(pid, bool(attributes & _ATTR_TRANSACTIONAL), last_offset)
            discard_records = can_discard
        producer = producers.get(pid) if pid >= 0 else None
        if producer is not None and (
            last_offset == producer[0] if producer[0] is not None else control and h[10] == producer[1]
        ):
            retain_empty = True  # the producer's last batch: its sequence and epoch must survive
        else:
            # the last batch of the round stays, even empty, so that its last offset is not lost
            retain_empty = last_offset + 1 == upper_bound
        if discard_records and not retain_empty:
            continue
        kept, tombstones = [], False
        if not discard_records:
            log_append = attributes & _ATTR_LOG_APPEND_TIME
            for _start, end, off_delta, ts_delta, key, tombstone, tail in _walk(payload, count):
                stats.records_read += not control
                offset = info.base_offset + off_delta
                if not control and offset <= latest:
                    if key is None:
                        continue  # Kafka refuses such records in a compacted topic; its cleaner drops any there
                    if offset_map.get(_key_digest(key), -1) > offset:
                        continue  # a later record of the key is in the map
                    if tombstone and horizon is not None and now >= horizon:
                        continue  # its delete horizon has passed
                kept.append((h[8] if log_append else base_ts + ts_delta, tail, end))
                tombstones = tombstones or tombstone
        elif not control:
            stats.records_read += count
        if not control:
            stats.records_kept += len(kept)
        if kept:
            stamp = horizon is None and (tombstones or (can_discard and control))
            if len(kept) == count and not stamp:
                yield memoryview(buf)[pos : pos + length]  # whole: copied to the file as it is
            else:
                yield _rebuild(h, kept, payload, codec, now + retention_ms if stamp else horizon)
        elif retain_empty:
            yield _empty_batch(h)


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
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ):
        self.data_dir = data_dir
        self.max_map_entries = max_map_entries
        self.throttle = throttle
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.checkpoints = read_checkpoint(data_dir)
        self._lock = threading.Lock()  # one pass over a partition at a time
        self._in_progress: set[tuple[str, int]] = set()  # partitions a thread is cleaning now
        self._checkpoint_lock = threading.Lock()

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
        tp = (plog.topic, plog.partition)
        with self._lock:
            if tp in self._in_progress:  # another cleaner thread has it
                return None
            self._in_progress.add(tp)
        try:
            return self._clean(plog, settings, now, force)
        finally:
            with self._lock:
                self._in_progress.discard(tp)

    def _clean(self, plog, settings, now: int, force: bool) -> CleanStats | None:
        ratio, overdue, first_dirty, end = self.dirty_ratio(plog, settings, now)
        if first_dirty >= end or not (force or overdue or ratio >= settings.min_cleanable_dirty_ratio):
            return None
        t0 = time.perf_counter()
        stats = CleanStats(first_dirty=first_dirty)
        offset_map, latest = self._build_map(plog, first_dirty, end, stats)
        map_end = latest + 1
        if map_end <= first_dirty:
            return None
        stats.end_offset = map_end
        self._clean_segments(plog, settings, offset_map, latest, end, now, stats)
        with self._checkpoint_lock:
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

    def _build_map(self, plog, first_dirty: int, end: int, stats: CleanStats) -> tuple[dict, int]:
        dirty = [s for s in plog.segments[:-1] if s.base_offset < end and s.next_offset > first_dirty]
        return build_offset_map(
            ((seg.buffer(), seg.size) for seg in dirty), first_dirty, end, self._aborted(plog), self.max_map_entries,
            self.throttle,
        )  # fmt: skip

    def _producers(self, plog, now: int) -> dict[int, tuple[int | None, int]]:
        return active_producers(
            ((seg.buffer(), seg.size) for seg in plog.segments), now, self.producer_id_expiration_ms
        )

    def _clean_segments(self, plog, settings, offset_map, latest, upper_bound, now, stats: CleanStats) -> None:
        producers = self._producers(plog, now)
        segments = [s for s in plog.segments[:-1] if s.base_offset <= latest]
        stats.segments_before = len(segments)
        rules = cleaning_rules(offset_map, latest, upper_bound, now, settings, producers, self._aborted(plog))
        for group in self._groups(segments, settings.segment_bytes):
            cleaned = group[0].log_path + CLEANED_SUFFIX
            infos, position = [], 0
            # the retained batches go to the file as they come: memory holds one batch at a time
            with open(cleaned, "wb") as f:
                for seg in group:
                    for batch in self._filter_segment(seg, rules, stats):
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

    def _filter_segment(self, seg, rules, stats):
        yield from filter_batches(seg.buffer(), seg.size, rules, stats)
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
    """Kafka's log cleaner: ``threads`` threads (log.cleaner.threads), each, every ``backoff_ms``, cleaning the
    dirtiest compacted partition that is due and that no other thread is cleaning, until ``stop``. They run beside
    the event loop; their reads together are paced to ``bytes_per_sec`` (0: unlimited). Each pass's offset map
    holds what ``dedupe_buffer_size`` / ``threads`` bytes hold in Kafka's map at ``load_factor``."""

    def __init__(
        self,
        storage,
        *,
        backoff_ms: int = 15000,
        bytes_per_sec: int = 0,
        max_map_entries: int = 0,
        threads: int = 1,
        dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
        load_factor: float = DEFAULT_LOAD_FACTOR,
    ):
        self.storage = storage
        self.backoff_s = backoff_ms / 1000
        self.bytes_per_sec = bytes_per_sec
        self.threads = max(1, threads)
        entries = max_map_entries or map_entries(dedupe_buffer_size, load_factor, self.threads)
        self.cleaner = Cleaner(storage.data_dir, max_map_entries=entries, throttle=self._throttle)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pick = threading.Lock()
        self._throttle_lock = threading.Lock()
        self.passes = 0

    def _throttle(self, nbytes: int) -> None:
        if self.bytes_per_sec > 0:
            with self._throttle_lock:  # one budget for all the threads, as Kafka's cleaners share one throttler
                self._stop.wait(nbytes / self.bytes_per_sec)

    def run_once(self, now_ms: int | None = None) -> CleanStats | None:
        """Clean the dirtiest due partition that no other thread is cleaning (None when none is due)."""
        now = self.cleaner.clock() if now_ms is None else now_ms
        best = None
        with self._pick:
            for plog in self.storage._all_logs():
                settings = plog._settings()
                if not cleanable(settings) or plog._closed or (plog.topic, plog.partition) in self.cleaner._in_progress:
                    continue
                ratio, overdue, first_dirty, end = self.cleaner.dirty_ratio(plog, settings, now)
                if first_dirty >= end or not (overdue or ratio >= settings.min_cleanable_dirty_ratio):
                    continue
                score = (overdue, ratio)
                if best is None or score > best[0]:
                    best = (score, plog, settings)
            if best is None:
                return None
            with self.cleaner._lock:
                self.cleaner._in_progress.add((best[1].topic, best[1].partition))
        try:
            stats = self.cleaner._clean(best[1], best[2], now, False)
        finally:
            with self.cleaner._lock:
                self.cleaner._in_progress.discard((best[1].topic, best[1].partition))
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
        for i in range(self.threads):
            thread = threading.Thread(target=self._run, name=f"kafkawire-log-cleaner-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


__all__ = ["Cleaner", "CleanerThread", "CleanStats", "complete_swaps", "map_entries", "segment_name"]
