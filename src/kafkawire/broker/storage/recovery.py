"""Loading a partition directory after a restart, clean or not, and repairing damaged segments.

Every start is treated as a possible crash:

- the active (last) segment is read batch by batch, checking each length and
  CRC-32C; a torn or corrupt tail (no whole valid batch after it) is cut off
  (logged on ``kafkawire.storage``) and the indexes are rebuilt from what remains;
- sealed segments were fsynced (log and indexes) when they were rolled, so
  they are only sanity-checked: index files well-formed and agreeing with the
  batch headers they point at, and the bytes after the last index entry being
  whole batches. A segment failing that is re-validated fully;
- damage is never allowed to cost more than the damaged bytes. A corrupt batch
  followed by valid ones is *quarantined*: its bytes are moved to a file beside
  the segment and the segment is rewritten without them (the log then has a gap
  in its offsets, as a compacted log does; readers asking for an offset in the
  gap get the next batch). Later segments are always kept;
- files a crash can leave behind (``*.tmp``, ``*.deleted``, index files whose
  ``.log`` is gone) are removed.

Quarantine files: ``<20-digit segment base offset>.<byte position>.<unix ms>.quarantine``
holds exactly the bytes removed from that segment's ``.log``, starting at that byte
position of the file as it was before the repair. They are never read by the broker;
``kafkawire check`` lists them. Delete them once inspected.

The same scan (``scan_segment``) serves ``kafkawire check`` and the background
scrubber, which repairs a sealed segment of a running broker (``repair``) so that a
batch whose CRC is known to be bad is never served.

Repair is for kafkawire's own segments only. Entries of the data directory that are not
kafkawire's (no topic of ``topics.json`` owns them: a Kafka data directory's partitions and
checkpoints, files of other tools) are never moved or deleted: they are listed once in the log
(``report_unknown``), and a topic whose partition directory is taken by one is refused.
"""

from __future__ import annotations

import logging
import mmap
import os
import re
import time
from collections.abc import Callable
from typing import NamedTuple

from kafkawire.protocol import errors
from kafkawire.protocol.records.batch import ATTRIBUTES_OFFSET, HEADER, HEADER_SIZE, MAGIC_OFFSET
from kafkawire.protocol.records.crc import crc32c

from . import _batch
from .base import CorruptBatchError, StorageError
from .index import IndexCorruptError
from .segment import LogSegment, segment_name

log = logging.getLogger("kafkawire.storage")

_SEGMENT_FILE = re.compile(r"(\d{20})\.(log|index|timeindex|txnindex)")
QUARANTINE_FILE = re.compile(r"(\d{20})\.(\d+)\.(\d+)\.quarantine")
_LOG_OVERHEAD = _batch.LOG_OVERHEAD
PACE_BYTES = 1 << 20


class Damage(NamedTuple):
    start: int  # byte position in the segment file
    end: int
    why: str


class Scan(NamedTuple):
    """What a full check of one segment found."""

    infos: list  # the valid batches (BatchInfo), in file order
    damaged: list  # Damage regions followed by valid batches (quarantined on repair)
    tail: Damage | None  # bytes after the last valid batch that hold no whole valid batch

    @property
    def clean(self) -> bool:
        return not self.damaged and self.tail is None


def _mapped(path: str, size: int, *, whole: bool = False):
    """Read-only map of the file; ``whole``: about to read every byte, so map all pages up front
    (MAP_POPULATE: one kernel call instead of a page fault per few pages)."""
    flags = mmap.MAP_SHARED | (getattr(mmap, "MAP_POPULATE", 0) if whole else 0)
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), size, flags=flags, prot=mmap.PROT_READ)


# ------------------------------------------------------------------ scanning


def _valid_batch(buf, view, pos: int, size: int, min_base: int, max_last: int | None):
    """BatchInfo if a whole v2 batch with a correct CRC starts at ``pos`` and its offsets are in
    [min_base, max_last]; else None. ``why`` is not needed here: callers report regions."""
    if pos + HEADER_SIZE > size:
        return None
    base, length, _epoch, magic, crc, _attrs, delta, _ts, max_ts, _pid, _pe, _seq, count = HEADER.unpack_from(buf, pos)
    end = pos + _LOG_OVERHEAD + length
    if magic != 2 or length < HEADER_SIZE - _LOG_OVERHEAD or end > size or delta < 0 or base < min_base:
        return None
    if max_last is not None and base + delta > max_last:
        return None
    if crc32c(view[pos + ATTRIBUTES_OFFSET : end]) != crc:
        return None
    return _batch.BatchInfo(pos, end - pos, base, base + delta, max_ts, count)


def _problem(buf, pos: int, size: int, expect: int) -> str:
    """Why the bytes at ``pos`` are not the batch expected there (for the log line)."""
    if pos + HEADER_SIZE > size:
        return f"{size - pos} bytes at {pos} are a torn batch"
    base, length, *_ = HEADER.unpack_from(buf, pos)
    magic = buf[pos + MAGIC_OFFSET]
    if magic != 2:
        return f"batch at {pos} has magic {magic}"
    if pos + _LOG_OVERHEAD + length > size:
        return f"batch at {pos} declares {length} bytes but the file ends at {size}"
    if base < expect:
        return f"batch at {pos} has offset {base}, expected at least {expect}"
    return f"batch at {pos} (offset {base}) fails its CRC"


def _resync(buf, view, pos: int, size: int, min_base: int, max_last: int | None):
    """The first valid batch after the damaged bytes at ``pos``, or None.

    First where the damaged batch's own length says the next one starts (a flipped byte in a
    payload), then at every later position holding the v2 magic byte (a damaged length)."""
    if pos + HEADER_SIZE <= size:
        declared = pos + _LOG_OVERHEAD + HEADER.unpack_from(buf, pos)[1]
        if pos < declared <= size - HEADER_SIZE:
            info = _valid_batch(buf, view, declared, size, min_base, max_last)
            if info is not None:
                return info
    q = pos + 1
    while True:
        m = buf.find(b"\x02", q + MAGIC_OFFSET, size)
        if m < 0:
            return None
        q = m - MAGIC_OFFSET
        info = _valid_batch(buf, view, q, size, min_base, max_last)
        if info is not None:
            return info
        q += 1


def scan(
    buf,
    size: int,
    base_offset: int,
    max_last: int | None = None,
    *,
    allow_gaps: bool | str = False,
    pace: Callable[[int], None] | None = None,
) -> Scan:
    """Check every batch of a segment's bytes: length, magic, CRC-32C and offsets.

    Offsets must follow each other densely (the CRC does not cover the base offset, so density is
    what catches a damaged one), except after damaged bytes and, when ``allow_gaps`` (the segment
    was repaired before: it has quarantine files), across a gap confirmed by the batch after it
    (starting right after the jumping one; with ``allow_gaps="compacted"``, a log the cleaner rewrote,
    anywhere after it: the next batch may follow a gap too).
    ``max_last``: the next segment's base offset - 1 (no offset of this one may reach it).
    ``pace(bytes)`` is called after about every ``PACE_BYTES`` read (the scrubber sleeps in it).
    """
    view = memoryview(buf)
    try:
        infos, damaged, tail = [], [], None
        pos, expect, paced = 0, base_offset, 0
        while pos < size:
            if pace is not None and pos - paced >= PACE_BYTES:
                pace(pos - paced)
                paced = pos
            info = _valid_batch(buf, view, pos, size, expect, max_last)
            if info is not None and info.base_offset > expect and not allow_gaps:
                info = None
            elif info is not None and info.base_offset > expect:
                after = info.position + info.size
                nxt = _valid_batch(buf, view, after, size, info.last_offset + 1, max_last) if after < size else None
                if after < size and (
                    nxt is None or (nxt.base_offset != info.last_offset + 1 and allow_gaps != "compacted")
                ):
                    info = None  # a jump nothing confirms: the base offset itself may be damaged
            if info is not None:
                infos.append(info)
                pos, expect = info.position + info.size, info.last_offset + 1
                continue
            why = _problem(buf, pos, size, expect)
            found = _resync(buf, view, pos, size, expect, max_last)
            if found is None:
                tail = Damage(pos, size, why)
                break
            damaged.append(Damage(pos, found.position, why))
            infos.append(found)
            pos, expect = found.position + found.size, found.last_offset + 1
        if pace is not None and pos > paced:
            pace(pos - paced)
        return Scan(infos, damaged, tail)
    finally:
        view.release()


def quarantined(directory: str, base_offset: int) -> list[str]:
    """The quarantine files of the segment at ``base_offset``."""
    prefix = segment_name(base_offset) + "."
    return sorted(n for n in os.listdir(directory) if n.startswith(prefix) and QUARANTINE_FILE.fullmatch(n))


def scan_segment(
    segment: LogSegment,
    max_last: int | None = None,
    *,
    pace: Callable[[int], None] | None = None,
    repaired: bool | None = None,
    compacted: bool = False,
) -> Scan:
    """``repaired``: whether the segment has quarantine files (looked up when None). ``compacted``: the log
    cleaner may have removed batches (storage/cleaner.py), so offsets may jump wherever a valid batch follows."""
    size = segment.file_size()
    if not size:
        return Scan([], [], None)
    gaps = bool(quarantined(segment.directory, segment.base_offset)) if repaired is None else repaired
    buf = _mapped(segment.log_path, size, whole=pace is None)
    try:
        return scan(buf, size, segment.base_offset, max_last, allow_gaps="compacted" if compacted else gaps, pace=pace)
    finally:
        buf.close()


# ------------------------------------------------------------------ repairing


def quarantine_path(segment: LogSegment, position: int) -> str:
    return os.path.join(
        segment.directory, f"{segment_name(segment.base_offset)}.{position}.{int(time.time() * 1000)}.quarantine"
    )


def _write_file(path: str, chunks) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for chunk in chunks:
            data = memoryview(chunk)
            while data:
                data = data[os.write(fd, data) :]
        os.fsync(fd)
    finally:
        os.close(fd)


class Repair(NamedTuple):
    """A segment rewritten without its damaged bytes, ready to be swapped in (``commit``)."""

    segment: LogSegment
    tmp_path: str
    infos: list  # positions in the rewritten file
    lost_bytes: int

    def commit(self, index_interval_bytes: int) -> None:
        """Put the rewritten file in place and reset the segment (callers that share it with
        readers hold its partition's reader lock)."""
        self.segment.replace_file(self.tmp_path)
        self.segment.rebuild_from(self.infos, index_interval_bytes, write=False)

    def abandon(self) -> None:
        try:
            os.unlink(self.tmp_path)
        except FileNotFoundError:
            pass


def prepare_repair(segment: LogSegment, found: Scan, *, keep_tail: bool) -> Repair:
    """Copy the damaged regions into quarantine files and write the segment's valid batches to
    ``<segment>.log.tmp`` (swept on start if a crash comes first). ``keep_tail``: quarantine the
    damaged tail too (a sealed segment's); otherwise it is simply dropped (an active segment's
    torn tail). Raises OSError (disk full...) with nothing changed but leftover tmp files."""
    size = segment.file_size()
    regions = list(found.damaged) + ([found.tail] if found.tail is not None and keep_tail else [])
    buf = _mapped(segment.log_path, size, whole=True)
    tmp = segment.log_path + ".tmp"
    try:
        view = memoryview(buf)
        try:
            for region in regions:
                path = quarantine_path(segment, region.start)
                _write_file(path, [view[region.start : region.end]])
                log.error(
                    "quarantined %d damaged bytes of %s at position %d in %s: %s",
                    region.end - region.start,
                    segment.log_path,
                    region.start,
                    path,
                    region.why,
                )
            runs, moved, infos, shift, prev_end = [], [], [], 0, 0
            for info in found.infos:
                if info.position != prev_end:
                    shift += info.position - prev_end
                moved.append(info._replace(position=info.position - shift))
                if runs and runs[-1][1] == info.position:
                    runs[-1][1] = info.position + info.size
                else:
                    runs.append([info.position, info.position + info.size])
                prev_end = info.position + info.size
            _write_file(tmp, [view[a:b] for a, b in runs])
            infos = moved
        finally:
            view.release()
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    finally:
        buf.close()
    kept = sum(i.size for i in infos)
    return Repair(segment, tmp, infos, size - kept)


# ------------------------------------------------------------------ loading


def load_segments(
    directory: str, index_interval_bytes: int, now_ms: int, compacted: bool = False, clean_shutdown: bool = False
) -> list[LogSegment]:
    """The partition's segments, oldest first, with the active one recovered; [] if there are none.

    Recovering the active segment means checking every batch (CRC, offsets), cutting a torn tail and rebuilding
    its indexes from the scan. After a clean shutdown (the marker Kafka and kafkawire write last on a clean stop)
    it is loaded as a sealed segment is instead, as Kafka skips recovery then: its indexes as written, only the
    batch headers after the last index entry walked; anything inconsistent still sends it to recovery."""
    bases, others, repaired = set(), [], set()
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if name.endswith((".tmp", ".deleted")):
            os.unlink(path)
            continue
        m = _SEGMENT_FILE.fullmatch(name)
        if m is None:
            q = QUARANTINE_FILE.fullmatch(name)
            if q is not None:
                repaired.add(int(q.group(1)))
            continue
        if m.group(2) == "log":
            bases.add(int(m.group(1)))
        else:
            others.append((int(m.group(1)), path))
    for base, path in others:
        if base not in bases:
            log.info("removing %s: its segment is gone", path)
            _unlink_quietly(path)
    segments = [LogSegment(directory, base, created_ms=now_ms) for base in sorted(bases)]
    for i, segment in enumerate(segments[:-1]):
        _load_sealed(
            segment, index_interval_bytes, segments[i + 1].base_offset - 1, segment.base_offset in repaired, compacted
        )
    if segments:
        active, was_repaired = segments[-1], segments[-1].base_offset in repaired
        if not (
            clean_shutdown
            and active.file_size() > 0
            and _load_sealed(active, index_interval_bytes, None, was_repaired, compacted, active=True)
        ):
            # a compacted log's last segment may hold the cleaner's gaps too (it was cleaned when it was not last)
            _recover(active, index_interval_bytes, None, active=True, repaired=was_repaired, compacted=compacted)
    return segments


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError as exc:  # a read-only or failing disk: the leftover is harmless
        log.warning("cannot remove %s: %s", path, exc)


def _load_sealed(
    segment: LogSegment,
    index_interval_bytes: int,
    max_last: int | None,
    repaired: bool,
    compacted: bool = False,
    *,
    active: bool = False,
) -> bool:
    """Load a sealed segment cheaply; False if a full check found damage. ``active``: the last segment after a
    clean shutdown, which no next segment bounds; when anything is off it gets no full check here (False)
    and the caller recovers it as an active segment."""
    size = segment.file_size()
    try:
        for index in (segment.offset_index, segment.time_index):
            if not os.path.exists(index.path):
                raise IndexCorruptError(f"{index.path} is missing")
        segment.offset_index.load(size)
        segment.time_index.load()
        if size == 0:
            raise IndexCorruptError(f"{segment.log_path} is empty but not the last segment")
        buf = _mapped(segment.log_path, size)
        try:
            first = _batch.read_info(buf, 0)
            if first.base_offset < segment.base_offset:
                raise IndexCorruptError(f"{segment.log_path} starts at offset {first.base_offset}")
            if first.max_timestamp >= 0 and not len(segment.time_index):
                raise IndexCorruptError(f"{segment.time_index.path} lacks the entry written at roll")
            idx = segment.offset_index
            if not len(idx) and size > first.size + index_interval_bytes:
                raise IndexCorruptError(f"{idx.path} is empty for a {size}-byte segment")
            if len(idx):
                info = _batch.read_info(buf, idx.positions[-1])
                if info.last_offset != idx.offsets[-1]:
                    raise IndexCorruptError(f"{idx.path} points at a batch ending at {info.last_offset}")
            tail_start = idx.positions[-1] if len(idx) else 0
            tail = list(_batch.iter_infos(buf, tail_start, size))
            if not tail or tail[-1].position + tail[-1].size != size:
                raise IndexCorruptError(f"{segment.log_path} does not end with a whole batch")
            if any(b.base_offset <= a.last_offset for a, b in zip(tail, tail[1:])):
                raise IndexCorruptError(f"{segment.log_path}: offsets go backwards after its last index entry")
            if max_last is not None and tail[-1].last_offset > max_last:
                raise IndexCorruptError(
                    f"{segment.log_path} reaches offset {tail[-1].last_offset}, past the next segment's base"
                )
        finally:
            buf.close()
    except (IndexCorruptError, CorruptBatchError) as exc:
        log.warning("segment %s needs a full check: %s", segment.log_path, exc)
        if active:
            return False
        return _recover(segment, index_interval_bytes, max_last, active=False, repaired=repaired, compacted=compacted)
    segment.size = size
    segment.next_offset = tail[-1].last_offset + 1
    segment.first_batch_timestamp = first.max_timestamp
    last_entry = segment.time_index.last
    if last_entry is not None:
        segment.max_timestamp, segment.offset_of_max_timestamp = last_entry
    for info in tail:  # batches after the last index entry (normally covered by the seal entry)
        if info.max_timestamp > segment.max_timestamp:
            segment.max_timestamp, segment.offset_of_max_timestamp = info.max_timestamp, info.last_offset
    return True


def _recover(
    segment: LogSegment,
    index_interval_bytes: int,
    max_last: int | None,
    *,
    active: bool,
    repaired: bool,
    compacted: bool = False,
) -> bool:
    """Check every batch of the segment and repair what is damaged. True if nothing was."""
    found = scan_segment(segment, max_last, repaired=repaired, compacted=compacted)
    size = segment.file_size()
    if found.clean:
        segment.rebuild_from(found.infos, index_interval_bytes, write=active)
        if not active:
            _reseal(segment)
        return True
    if not found.damaged and active:
        # the usual crash: a torn write at the end of the active segment
        good_end = found.tail.start
        log.warning(
            "truncating %s from %d to %d bytes (%d bytes lost): %s",
            segment.log_path,
            size,
            good_end,
            size - good_end,
            found.tail.why,
        )
        segment.truncate(good_end)
        segment.rebuild_from(found.infos, index_interval_bytes)
        return False
    try:
        repair = prepare_repair(segment, found, keep_tail=not active)
    except OSError as exc:
        # No room to set the damage aside (full disk). Keep the file as it is and serve only the valid
        # batches before the first damage; the next start tries again. An active segment must end with
        # valid batches (appends go after them), so its damaged rest is cut as a torn tail would be.
        first_bad = (found.damaged or [found.tail])[0]
        kept = [i for i in found.infos if i.position < first_bad.start]
        if active:
            log.error(
                "cannot quarantine the damage in %s (%s); truncating it at %d (%d bytes lost): %s",
                segment.log_path,
                exc,
                first_bad.start,
                size - first_bad.start,
                first_bad.why,
            )
            segment.truncate(first_bad.start)
        else:
            log.error(
                "cannot quarantine the damage in %s (%s); serving only its first %d bytes until a "
                "restart with free space repairs it: %s",
                segment.log_path,
                exc,
                first_bad.start,
                first_bad.why,
            )
        segment.rebuild_from(kept, index_interval_bytes)
        return False
    repair.commit(index_interval_bytes)
    if active:
        try:
            segment.write_indexes(fsync=True)
        except OSError as exc:
            log.warning("cannot write the indexes of %s: %s", segment.log_path, exc)
    else:
        _reseal(segment)
    log.error(
        "repaired %s: %d damaged bytes set aside, %d valid batches kept (offsets %s)",
        segment.log_path,
        repair.lost_bytes,
        len(repair.infos),
        f"{repair.infos[0].base_offset}..{repair.infos[-1].last_offset}" if repair.infos else "none",
    )
    return False


def _reseal(segment: LogSegment) -> None:
    """Give a rebuilt sealed segment the time index entry it got when it rolled (its largest timestamp),
    so the next start loads it cheaply, and write its indexes."""
    segment.time_index.maybe_append(segment.max_timestamp, segment.offset_of_max_timestamp)
    try:
        segment.write_indexes(fsync=True)
    except OSError as exc:  # a full disk: they are rebuilt again on the next start
        log.warning("cannot write the indexes of %s: %s", segment.log_path, exc)


# ------------------------------------------------- entries of the data directory that are not kafkawire's

# What kafkawire itself keeps at the top of a data directory, besides its topics' partition directories
# (metadata.py), and what write_atomically leaves of them after a crash.
OWN_ENTRIES = frozenset(
    {
        "meta.properties",
        ".lock",
        "log-start-offset-checkpoint",
        "__kafkawire_meta",
        "__cluster_metadata-0",  # the KRaft metadata log (kraft/)
        "kafkawire-topics.json.migrated",  # an older kafkawire's files, now in the metadata log
        "kafkawire-scram-credentials.json.migrated",
        # Kafka's own checkpoints of the directory, which Kafka rewrites on its next start
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
        "cleaner-offset-checkpoint",
        ".kafka_cleanshutdown",
    }
)
_PARTITION_NAME = re.compile(r"(.+)-(\d+)")
_EMPTY_PARTITION_FILE = re.compile(r"\d{20}\.(log|index|timeindex|txnindex|snapshot)|partition\.metadata")


class DirectoryTakenError(StorageError):
    """A new partition's directory exists and is not an empty partition of kafkawire's: the topic (or the
    partitions) are refused and the directory is kept. Not a TopicExistsError: no topic of that name exists,
    and callers that take TopicExistsError for a concurrent creation must not wait for one."""

    error_code = errors.TOPIC_ALREADY_EXISTS


def is_own_entry(name: str) -> bool:
    return name in OWN_ENTRIES or (name.endswith(".tmp") and name[:-4] in OWN_ENTRIES)


def sort_entries(data_dir: str, topics: dict) -> tuple[list[str], list[str]]:
    """The entries of ``data_dir``: partition directories of ``topics`` (name -> TopicMeta), and what is not
    kafkawire's (directories with a trailing ``/``), both sorted. Interrupted deletions (``-delete``) are
    kafkawire's and in neither list. The broker's start and ``kafkawire check`` both sort by this."""
    partitions, unknown = [], []
    for name in sorted(os.listdir(data_dir)):
        is_dir = os.path.isdir(os.path.join(data_dir, name))
        if is_own_entry(name) or (is_dir and name.endswith("-delete")):
            continue
        m = _PARTITION_NAME.fullmatch(name) if is_dir else None
        meta = topics.get(m.group(1)) if m else None
        if meta is not None and int(m.group(2)) < meta.partitions:
            partitions.append(name)
        else:
            unknown.append(name + ("/" if is_dir else ""))
    return partitions, unknown


def report_unknown(data_dir: str, names: list[str]) -> None:
    """One log line for everything in ``data_dir`` that kafkawire does not own: such entries (a Kafka data
    directory's ``__cluster_metadata-0`` and checkpoints, a topic's partitions from another broker, another
    tool's files) are never moved, changed or deleted, whatever they hold."""
    if names:
        log.warning(
            "%s holds %d entries that are not kafkawire's; left in place, untouched: %s",
            data_dir,
            len(names),
            " ".join(names),
        )


def holds_no_records(directory: str) -> bool:
    """Whether ``directory`` is an empty partition as kafkawire makes one (``partition.metadata`` and empty
    segments, nothing else): the only existing directory a new partition may replace, since it loses
    nothing. What a failed topic creation leaves behind looks like this; Kafka's partitions never do (they
    have a leader-epoch-checkpoint)."""
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if not _EMPTY_PARTITION_FILE.fullmatch(entry.name) or not entry.is_file(follow_symlinks=False):
                    return False
                if entry.name.endswith(".log") and entry.stat(follow_symlinks=False).st_size:
                    return False
    except NotADirectoryError:
        return False
    return True
