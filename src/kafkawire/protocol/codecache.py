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
"""

from __future__ import annotations

import marshal
import os
import sys
import threading
import zlib
from types import CodeType

_directory: str | None | bool = False  # False: not looked up yet; None: no cache in this process


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
    return code
