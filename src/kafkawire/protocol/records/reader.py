"""Walking a buffer of batches (any mix of magic 0, 1 and 2) without copying.

Every entry, whatever its magic, starts with ``offset int64, length int32``
and has its magic byte at position 16, which is all the walk needs.  A buffer
may end in the middle of an entry (a Fetch response is cut at the byte
limit): the walk stops there and reports the tail instead of failing.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from .batch import HEADER_SIZE, RecordBatch
from .errors import CorruptRecordError
from .legacy import RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1, LegacyBatch

_OFFSET_LEN = struct.Struct(">qi")
_MIN_SIZE_AFTER_PREFIX = (RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1, HEADER_SIZE - 12)

AnyBatch = RecordBatch | LegacyBatch


def _frame(view: memoryview, pos: int, n: int) -> int:
    """Size of the entry at ``pos``, 0 if the buffer ends inside it; raises if the framing is corrupt."""
    if n - pos < 12:
        return 0
    offset, length = _OFFSET_LEN.unpack_from(view, pos)
    if length < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            f"entry length {length} is below the minimum of {RECORD_OVERHEAD_V0}", base_offset=offset, position=pos
        )
    if n - pos >= 17:
        magic = view[pos + 16]
        if magic > 2:
            raise CorruptRecordError(f"unknown magic {magic}", base_offset=offset, position=pos)
        if length < _MIN_SIZE_AFTER_PREFIX[magic]:
            raise CorruptRecordError(
                f"length {length} is below the minimum of {_MIN_SIZE_AFTER_PREFIX[magic]} for magic {magic}",
                base_offset=offset,
                position=pos,
            )
    size = length + 12
    if size > n - pos:
        return 0
    return size


class BatchReader:
    """Iterator over the complete entries of ``buf``: :class:`RecordBatch` (magic 2) or :class:`LegacyBatch`.

    Each entry's ``buffer`` is a memoryview into ``buf`` (no copy).  After
    iterating (or at any time: they scan ahead without disturbing the
    iteration), :attr:`consumed` is the number of bytes in complete entries
    and :attr:`partial_tail_bytes` the number of bytes after them.

    Being views, the entries pin ``buf``: a bytearray cannot be resized
    while any of them (or the reader) is alive.

    ``check_crc=True`` validates each entry's CRC before yielding it.
    ``allow_partial=False`` turns a partial tail into a
    :class:`CorruptRecordError` (for inputs that must be whole, like a Produce
    request).
    """

    __slots__ = ("_view", "_pos", "_n", "check_crc", "allow_partial", "_tail")

    def __init__(self, buf, *, check_crc: bool = False, allow_partial: bool = True):
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self._view = view
        self._pos = 0
        self._n = len(view)
        self.check_crc = check_crc
        self.allow_partial = allow_partial
        self._tail: int | None = None

    def __iter__(self) -> BatchReader:
        return self

    def __next__(self) -> AnyBatch:
        view = self._view
        pos = self._pos
        size = _frame(view, pos, self._n)
        if not size:
            self._end(pos)
            raise StopIteration
        end = pos + size
        entry_view = view[pos:end]
        entry: AnyBatch
        if view[pos + 16] == 2:
            entry = RecordBatch(entry_view, pos)
        else:
            entry = LegacyBatch(entry_view, pos)
        if self.check_crc:
            entry.validate_crc()
        self._pos = end
        return entry

    def _end(self, pos: int) -> None:
        self._tail = self._n - pos
        if self._tail and not self.allow_partial:
            raise CorruptRecordError(
                f"buffer ends {self._tail} bytes into an entry"
                + (f" that declares {self.next_batch_size} bytes" if self.next_batch_size else ""),
                position=pos,
            )

    def _scan_end(self) -> int:
        """Position where complete entries end (walks lengths only, from the current position)."""
        pos = self._pos
        n = self._n
        view = self._view
        while True:
            size = _frame(view, pos, n)
            if not size:
                return pos
            pos += size

    @property
    def position(self) -> int:
        """Where the next entry starts."""
        return self._pos

    @property
    def consumed(self) -> int:
        """Bytes in complete entries (a scan of the lengths if iteration has not finished)."""
        if self._tail is not None:
            return self._n - self._tail
        return self._scan_end()

    @property
    def partial_tail_bytes(self) -> int:
        """Bytes after the last complete entry (0 when the buffer ends on an entry boundary)."""
        return self._n - self.consumed

    @property
    def next_batch_size(self) -> int | None:
        """Declared total size of the partial entry at the end, if its length field was received.

        Lets a client notice an entry larger than its fetch size."""
        end = self.consumed
        if self._n - end < 12:
            return None
        return _OFFSET_LEN.unpack_from(self._view, end)[1] + 12

    def batches(self) -> list[AnyBatch]:
        return list(self)


def iter_batches(buf, *, check_crc: bool = False, allow_partial: bool = True) -> BatchReader:
    """Walk the entries of ``buf`` (bytes, bytearray or memoryview) without copying; see :class:`BatchReader`."""
    return BatchReader(buf, check_crc=check_crc, allow_partial=allow_partial)


def iter_records(buf, *, check_crc: bool = True) -> Iterator:
    """Every record of every complete entry of ``buf`` (any magic); the partial tail is ignored."""
    for entry in BatchReader(buf, check_crc=check_crc):
        yield from entry.decode_records()


def assign_offsets(buf, first_offset: int, partition_leader_epoch: int | None = None) -> int:
    """Give the v2 batches of ``buf`` consecutive offsets from ``first_offset``, in place.

    What a leader does to a Produce request's records before appending them.
    Uses only the headers (``lastOffsetDelta``), touches nothing the CRC
    covers, and returns the next offset.  ``buf`` must be writable and hold
    only complete v2 batches.
    """
    from .batch import set_base_offset

    offset = first_offset
    for batch in BatchReader(buf, allow_partial=False):
        if batch.magic != 2:
            raise ValueError(
                f"entry at position {batch.position} has magic {batch.magic}; assign_offsets handles v2 batches only"
            )
        set_base_offset(buf, batch.position, offset, partition_leader_epoch)
        offset += batch.last_offset_delta + 1
    return offset
