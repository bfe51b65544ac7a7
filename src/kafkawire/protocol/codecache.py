"""A disk cache of the byte code the codec generator compiles, shared by every kafkawire process of a user.

Generating a codec's source is cheap; ``compile()`` of it is ~90% of a codec's first use (FetchResponse v18:
~15 ms of CPU on a quiet machine, more under load), paid by every new process for every message version it
meets: a broker's first answer to each client version, each CLI run, each spawned broker of a test suite. As
Python keeps ``__pycache__`` for modules, the compiled code of a source is kept here, keyed by the source's
checksum and length and checked against the whole source on load (an entry holds both, compressed: ~5 KB
for most codecs), so a stale or colliding entry is never used: the source is the schema's, and a kafkawire
version that generates other code writes other entries.

Where: ``$KAFKAWIRE_CODEC_CACHE`` if set (``off`` or ``0`` turns the cache off), else
``$XDG_CACHE_HOME/kafkawire/codecs`` (``~/.cache/...``), one directory per interpreter's byte-code format
(``sys.implementation.cache_tag``). Entries are written atomically (a temporary file renamed), so a reader
never sees half of one; any failure to read or write one (a read-only home, a full disk, a damaged entry)
falls back to compiling, silently, and never fails a decode.

Bounded: an entry's mtime is its last use (refreshed when a process first loads it), and a process's first
write to a directory of more than ``_LIMIT`` entries removes the least recently used down to half of it, and
any temporary file a killed writer left over an hour ago: the entries of kafkawire versions no longer run go,
and two processes pruning at once only fail to unlink what the other removed first.
"""

from __future__ import annotations

import marshal
import os
import sys
import threading
import time
import zlib
from types import CodeType

_directory: str | None | bool = False  # False: not looked up yet; None: no cache in this process

# One kafkawire version can generate at most ~880 codecs (every message of the spec, with the KRaft and
# coordinator records and the generator's test schemas, times each of its versions: 876 for Kafka 4.4's
# schemas), and a process uses a fraction of them. 2,048 entries hold every codec of two versions and
# the used ones of several more (~12 KB each: ~25 MB at most), and half of it, what a prune keeps, still
# holds one version's whole set, so the running version's entries survive it.
_LIMIT = 2048
_TEMPORARY_AGE = 3600.0  # seconds: a writer takes milliseconds; an older .tmp is a killed writer's
_pruned = False  # once per process: a prune lists the directory


def _cache_dir() -> str | None:
    global _directory
    if _directory is False:
        _directory = _find_dir()
    return _directory  # type: ignore[return-value]


def _find_dir() -> str | None:
    tag = sys.implementation.cache_tag
    if tag is None:  # an interpreter without a byte-code cache format
        return None
    chosen = os.environ.get("KAFKAWIRE_CODEC_CACHE", "")
    if chosen.lower() in ("off", "0", "false", "no"):
        return None
    if not chosen:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        chosen = os.path.join(base, "kafkawire", "codecs")
    path = os.path.join(chosen, tag)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        return None
    return path


def compiled(source: str, filename: str) -> CodeType:
    """``compile(source, filename, "exec")``, from the cache when an entry holds this very source."""
    directory = _cache_dir()
    if directory is None:
        return compile(source, filename, "exec")
    data = source.encode()
    path = os.path.join(directory, f"{zlib.crc32(data):08x}-{len(data)}.bin")
    try:
        with open(path, "rb") as f:
            kept_source, code = marshal.loads(zlib.decompress(f.read()))
        if kept_source == source and isinstance(code, CodeType) and code.co_filename == filename:
            _touch(path)
            return code
    except Exception:  # absent, unreadable, damaged or from another source: compiled and written again
        pass
    code = compile(source, filename, "exec")
    temporary = f"{path}.{os.getpid()}-{threading.get_ident()}.tmp"
    try:
        with open(temporary, "wb") as f:
            f.write(zlib.compress(marshal.dumps((source, code)), 1))  # generated code packs ~5:1
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass
    # after the write, so the new entry is the newest; also when it failed, as a full disk is one reason
    _prune(directory)
    return code


def _touch(path: str) -> None:
    """Mark an entry as used now, so that a prune keeps it: once per codec per process, as a message class
    keeps its codecs in memory after their first use."""
    try:
        os.utime(path)
    except OSError:  # a read-only cache: the entry is as usable, only older to a prune
        pass


def _prune(directory: str) -> None:
    """Once per process, on a miss (which has just paid a compile of milliseconds): remove the least recently
    used entries down to half of ``_LIMIT`` when the directory holds more, and stale temporary files. The
    listing stops after twice the limit of names (a directory grown larger by other means shrinks over
    several processes); names are counted first, so under the limit only temporaries are stat'ed. Any
    failure is ignored: a reader that loses an entry to a prune compiles it again."""
    global _pruned
    if _pruned:
        return
    _pruned = True
    entries: list[os.DirEntry[str]] = []
    temporaries: list[os.DirEntry[str]] = []
    try:
        with os.scandir(directory) as listing:
            for seen, entry in enumerate(listing):
                if seen >= 2 * _LIMIT:
                    break
                if entry.name.endswith(".bin"):
                    entries.append(entry)
                elif entry.name.endswith(".tmp"):
                    temporaries.append(entry)
    except OSError:
        return
    stale = time.time() - _TEMPORARY_AGE
    for entry in temporaries:
        try:
            if entry.stat(follow_symlinks=False).st_mtime < stale:
                os.unlink(entry.path)
        except OSError:  # gone already (another process pruned it, or its writer renamed it) or read-only
            pass
    if len(entries) <= _LIMIT:
        return
    used: list[tuple[int, str]] = []
    for entry in entries:
        try:
            used.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.path))
        except OSError:
            pass
    used.sort()
    for _, path in used[: len(used) - _LIMIT // 2]:
        try:
            os.unlink(path)
        except OSError:
            pass
