"""Transactions as a partition's log sees them (both engines share this).

A transactional batch (attribute bit 0x10) opens its producer's transaction in the
partition unless one is open already; the producer's COMMIT or ABORT marker (a
control batch) closes it. Per partition:

- the last stable offset (LSO) is the first offset of the oldest open transaction,
  or the high watermark when none is open: read_committed consumers read below it;
- every aborted transaction is kept as Kafka's ``AbortedTxn`` (producer id, first
  offset, last offset = the marker's offset, and the LSO once it ended), in marker
  order, so Fetch finds those overlapping what it returns with a bisection
  (``TxnState.collect_aborted``, Kafka's ``collectAbortedTxns``).

The segments engine also writes each aborted transaction to the ``.txnindex`` of
the segment the marker lands in, in Kafka's format (``AbortedTxn``: version int16 0,
producer id int64, first offset int64, last offset int64, last stable offset int64;
34 bytes each, big endian, no header), and its open transactions to the producer
snapshot files (``snapshot.py``), so a restart reads only the log after the newest
snapshot (``SegmentPartitionLog.recover_transactions``). Both engines keep the
aborted transactions of the retained log in memory too (a tuple each): Fetch then
never reads a file to answer read_committed.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from kafkawire.protocol.records import CorruptRecordError, RecordBatch
from kafkawire.protocol.records.batch import ATTRIBUTES_OFFSET, PRODUCER_ID_OFFSET, TRANSACTIONAL_MASK

ABORTED_TXN = struct.Struct(">hqqqq")
ABORTED_TXN_VERSION = 0
_CONTROL_MASK = 0x20
_ATTRS_LOW = ATTRIBUTES_OFFSET + 1  # the flags live in the low byte of the big-endian int16
_PID_EPOCH = struct.Struct(">qh")
_CONTROL_KEY = struct.Struct(">hh")
ABORT, COMMIT = 0, 1


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return ABORTED_TXN.pack(ABORTED_TXN_VERSION, *self)


def decode_aborted(buf) -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file; a torn last entry is dropped, an unknown version raises ValueError."""
    out = []
    for pos in range(0, len(buf) - ABORTED_TXN.size + 1, ABORTED_TXN.size):
        version, *fields = ABORTED_TXN.unpack_from(buf, pos)
        if version != ABORTED_TXN_VERSION:
            raise ValueError(f"aborted transaction entry at {pos} has version {version}")
        out.append(AbortedTxn(*fields))
    return out


class TxnEvent(NamedTuple):
    """A transactional batch as stored: ``marker`` None for data, else ABORT/COMMIT (other control types are
    not events)."""

    producer_id: int
    producer_epoch: int
    base_offset: int
    marker: int | None


def any_transactional(view, infos) -> bool:
    """Whether any of the batches ``infos`` (``_batch.BatchInfo``, positions in ``view``) is transactional:
    one byte read per batch, on every append (a plain loop: cheaper than building a generator)."""
    flags = 0
    for info in infos:
        flags |= view[info.position + _ATTRS_LOW]
    return bool(flags & TRANSACTIONAL_MASK)


def events(view, batches: Iterable[tuple[int, int, int]]) -> Iterator[TxnEvent]:
    """Events of the transactional batches among ``batches``: (position in ``view``, size, stored base offset)."""
    for position, size, base_offset in batches:
        flags = view[position + _ATTRS_LOW]
        if not flags & TRANSACTIONAL_MASK:
            continue
        pid, epoch = _PID_EPOCH.unpack_from(view, position + PRODUCER_ID_OFFSET)
        if not flags & _CONTROL_MASK:
            yield TxnEvent(pid, epoch, base_offset, None)
            continue
        marker = control_type(bytes(view[position : position + size]))
        if marker in (ABORT, COMMIT):
            yield TxnEvent(pid, epoch, base_offset, marker)


def control_type(batch: bytes) -> int | None:
    """The type of a control batch's (first) record, None if it has none or it does not parse."""
    try:
        for record in RecordBatch.from_bytes(batch).records():
            key = record.key
            if key is None or len(key) < _CONTROL_KEY.size:
                return None
            return _CONTROL_KEY.unpack_from(key)[1]
    except CorruptRecordError:
        return None
    return None


class TxnState:
    """Open transactions and aborted ones of one partition. The engine calls ``apply`` under the lock that
    publishes an append (readers see both at once), and reads under the same lock."""

    __slots__ = ("ongoing", "epochs", "aborted", "_last_offsets")

    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.epochs: dict[int, int] = {}  # producer id -> epoch of its open transaction's first batch
        self.aborted: list[AbortedTxn] = []  # marker order
        self._last_offsets: list[int] = []  # aborted[i].last_offset, for bisection

    def first_unstable(self) -> int | None:
        return min(self.ongoing.values()) if self.ongoing else None

    def last_stable_offset(self, high_watermark: int, log_start: int = 0) -> int:
        """As Kafka: the first offset of the oldest open transaction, but never below the log start (DeleteRecords
        may move it past an open transaction's first records) nor above the high watermark."""
        if not self.ongoing:
            return high_watermark
        return min(max(min(self.ongoing.values()), log_start), high_watermark)

    def apply(self, event: TxnEvent) -> AbortedTxn | None:
        """Take one event; returns the aborted transaction an ABORT marker ended (to persist), else None."""
        pid, epoch, offset, marker = event
        if marker is None:
            if pid not in self.ongoing:
                self.ongoing[pid] = offset
                self.epochs[pid] = epoch
            return None
        # As Kafka: a marker without an open transaction still ends one that starts at the marker itself.
        first = self.ongoing.get(pid, offset)
        done = None
        if marker == ABORT:
            others = [o for p, o in self.ongoing.items() if p != pid]
            done = AbortedTxn(pid, first, offset, min(others) if others else offset + 1)
            self.add_aborted(done)
        self.ongoing.pop(pid, None)
        self.epochs.pop(pid, None)
        return done

    def open_transactions(self) -> dict[int, tuple[int, int]]:
        """Producer id -> (epoch, first offset) of each open transaction (what a producer snapshot holds)."""
        return {pid: (self.epochs.get(pid, -1), first) for pid, first in self.ongoing.items()}

    def load_open(self, entries: dict[int, tuple[int, int]]) -> None:
        self.ongoing = {pid: first for pid, (_epoch, first) in entries.items()}
        self.epochs = {pid: epoch for pid, (epoch, _first) in entries.items()}

    def add_aborted(self, txn: AbortedTxn) -> None:
        self.aborted.append(txn)
        self._last_offsets.append(txn.last_offset)

    def drop_aborted_before(self, offset: int) -> None:
        """Forget aborted transactions whose marker is below ``offset`` (their segments are gone)."""
        n = bisect_left(self._last_offsets, offset)
        if n:
            del self.aborted[:n], self._last_offsets[:n]

    def truncate(self, offset: int) -> None:
        """Forget aborted transactions whose marker is at or beyond ``offset`` (recovery replays from there)."""
        n = bisect_left(self._last_offsets, offset)
        del self.aborted[n:], self._last_offsets[n:]

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), as Kafka's ``collectAbortedTxns``
        walks the transaction indexes from the segment of ``fetch_offset``: entries in marker order, kept
        when last offset >= fetch_offset and first offset < upper_bound, stopping after the first whose last
        stable offset reaches upper_bound. (Entries whose marker is below ``fetch_offset`` can neither be kept
        nor stop the walk, since an entry's LSO never exceeds its marker + 1: the bisection skips them.)"""
        out = []
        aborted = self.aborted
        for i in range(bisect_left(self._last_offsets, fetch_offset), len(aborted)):
            txn = aborted[i]
            if txn.first_offset < upper_bound:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound:
                break
        return out


_SPAN = struct.Struct(">qi")
_LOG_OVERHEAD = 12


def transactional_in(buf, position: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(position, size, base offset) of the transactional batches among the (validated) batches of
    ``buf[position:end]``: a header walk reading two fields and one byte per batch (recovery's replay)."""
    unpack = _SPAN.unpack_from
    while position + _LOG_OVERHEAD <= end:
        base, length = unpack(buf, position)
        size = length + _LOG_OVERHEAD
        if position + size > end:
            return
        if buf[position + _ATTRS_LOW] & TRANSACTIONAL_MASK:
            yield position, size, base
        position += size


def read_index(path: str) -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file ([] when there is none)."""
    try:
        with open(path, "rb") as f:
            return decode_aborted(f.read())
    except FileNotFoundError:
        return []


def write_index(path: str, entries: list[AbortedTxn], *, fsync: bool) -> None:
    """Replace a ``.txnindex`` with ``entries`` (atomically; no file when there are none, as Kafka leaves an
    empty one out of the way)."""
    if not entries:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(b"".join(e.encode() for e in entries))
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def append_index(path: str, entries: list[AbortedTxn]) -> None:
    """Append entries to a ``.txnindex`` (not fsynced: the segment's seal rewrites and fsyncs it, and a restart
    rebuilds the active segment's from the log)."""
    with open(path, "ab") as f:
        f.write(b"".join(e.encode() for e in entries))
