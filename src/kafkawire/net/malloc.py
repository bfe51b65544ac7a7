"""Let glibc's malloc keep the memory of large request buffers between requests.

A Produce request of ~1 MB passes through several buffers of about its size on its way to the log: the event
loop's reads (256 KiB each), the frame being assembled, the writable payload handed to the handler, the
records section read by validation. glibc serves an allocation of 128 KiB or more (``M_MMAP_THRESHOLD``)
with fresh pages from ``mmap``, and gives the top of the heap back to the kernel once more than
``M_TRIM_THRESHOLD`` of it is free; its own adjustment of the two (raising them as large blocks are freed)
still left the broker taking about three minor page faults per 4 KiB it received (each a zero-filled page):
~160,000 faults and over a third of the broker's CPU for 2 M records of 100 B in ~600 KB requests from
librdkafka. With both thresholds raised the freed buffers are reused and those faults are gone.

The cost is memory the process keeps instead of returning: at most ``TRIM_THRESHOLD`` of free heap top, and
blocks below ``MMAP_THRESHOLD`` come from the heap (a larger frame is still mapped and unmapped). Setting
either value turns glibc's own adjustment off, so both are set. Nothing is done where the C library is not
glibc. Called once, on the first large frame a server receives (not at start: ``ctypes`` costs ~3 ms to
import, and a broker that never sees a large request does not need this).
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("kafkawire.net")

LARGE = 128 * 1024  # glibc's default M_MMAP_THRESHOLD: frames from this size on ask for the tuning
MMAP_THRESHOLD = 8 * 1024 * 1024  # blocks below this come from the heap (8x the clients' 1 MB request size)
TRIM_THRESHOLD = 32 * 1024 * 1024  # free heap top kept before it is given back
_M_TRIM_THRESHOLD = -1  # malloc.h
_M_MMAP_THRESHOLD = -3

tuned: bool | None = None  # None: not tried yet; True: tuned; False: not glibc, or mallopt refused


def keep_large_buffers() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; whether they are raised."""
    global tuned
    if tuned is None:
        tuned = _tune()
    return tuned


def _tune() -> bool:
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
    except (ValueError, OSError, AttributeError):  # not a glibc system (musl, macOS, Windows)
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if ok:
        log.debug("glibc malloc: mmap threshold %d, trim threshold %d", MMAP_THRESHOLD, TRIM_THRESHOLD)
    return ok
