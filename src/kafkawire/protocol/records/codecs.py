"""Compression codecs with Kafka's framing quirks and a cap on decompressed size.

* gzip: one or more gzip members (Java's ``GZIPInputStream`` reads concatenated members).
* snappy: Java writes the xerial block stream (16-byte header, then big-endian
  length-prefixed raw snappy blocks of 32 KiB input); raw snappy is accepted too.
* lz4: the LZ4 frame format with independent 64 KiB blocks, no checksums, as
  Kafka's ``Lz4BlockOutputStream`` writes it.  For magic 0, Kafka computes the
  frame header checksum over the wrong bytes (KAFKA-3160) and ignores it on
  read; we do the same.
* zstd: one or more zstd frames.

Library imports are lazy so a missing optional package only matters when its
codec is used, and then the error names the package to install.
"""

from __future__ import annotations

import struct
import threading
import zlib

from .errors import CodecUnavailableError, CorruptRecordError, DecompressionLimitError, UnsupportedCodecError
from .model import Compression

# Default cap on the decompressed size of one batch or wrapper message.  Far
# above any sane batch (brokers default to ~1 MiB batches) but keeps a crafted
# payload from taking the process's memory.
DEFAULT_MAX_DECOMPRESSED_SIZE = 128 * 1024 * 1024

_GZIP_LEVEL = 6  # java.util.zip default, which Kafka uses
_ZSTD_LEVEL = 3  # zstd-jni default, which Kafka uses
_SNAPPY_BLOCK = 32 * 1024  # xerial SnappyOutputStream default block size

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_INT32 = struct.Struct(">i")

_modules: dict[str, object] = {}
_tls = threading.local()


def _require(module: str, codec: str, package: str):
    mod = _modules.get(module)
    if mod is None:
        try:
            mod = __import__(module, fromlist=["_"])
        except ImportError:
            raise CodecUnavailableError(codec, package) from None
        _modules[module] = mod
    return mod


def codec_available(codec: Compression | int) -> bool:
    """True when the package for ``codec`` is importable."""
    try:
        _codec_module(Compression(codec))
    except CodecUnavailableError:
        return False
    return True


def _codec_module(codec: Compression):
    if codec == Compression.SNAPPY:
        return _require("cramjam", "snappy", "cramjam")
    if codec == Compression.LZ4:
        return _require("lz4.frame", "lz4", "lz4")
    if codec == Compression.ZSTD:
        return _require("zstandard", "zstd", "zstandard")
    return zlib


# ---------------------------------------------------------------- compress


def compress(codec: Compression | int, data, *, magic: int = 2, level: int | None = None) -> bytes:
    """Compress ``data`` the way Kafka's Java client frames it for ``magic``."""
    if type(codec) is not Compression:
        codec = Compression(codec)
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        c = zlib.compressobj(_GZIP_LEVEL if level is None else level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == Compression.SNAPPY:
        return _snappy_xerial_compress(data)
    if codec == Compression.LZ4:
        return _lz4_compress(data, magic, level)
    if codec == Compression.ZSTD:
        if magic < 2:
            raise UnsupportedCodecError(4, problem="zstd needs magic 2 (message format v2)")
        return _zstd_compressor(_ZSTD_LEVEL if level is None else level).compress(data)
    raise UnsupportedCodecError(int(codec))


def _snappy_xerial_compress(data) -> bytes:
    snappy = _codec_module(Compression.SNAPPY).snappy
    view = memoryview(data).cast("B")
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _SNAPPY_BLOCK):
        block = snappy.compress_raw(view[start : start + _SNAPPY_BLOCK])
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _lz4_compress(data, magic: int, level: int | None) -> bytes:
    frame = _codec_module(Compression.LZ4)
    out = frame.compress(
        data,
        compression_level=0 if level is None else level,
        block_size=frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        block_checksum=False,
        store_size=False,
    )
    if magic == 0:
        # Reproduce Kafka's broken v0 header checksum so old readers that do
        # check it (0.8/0.9 brokers) accept our frames.
        out = bytearray(out)
        out[6] = (_xxh32(bytes(out[0:6])) >> 8) & 0xFF
        out = bytes(out)
    return out


def _zstd_compressor(level: int):
    zstd = _codec_module(Compression.ZSTD)
    cache = getattr(_tls, "zstd", None)
    if cache is None:
        cache = _tls.zstd = {}
    c = cache.get(level)
    if c is None:
        c = cache[level] = zstd.ZstdCompressor(level=level)
    return c


# -------------------------------------------------------------- decompress


_BY_ID = {int(c): c for c in Compression}


def decompress(codec: Compression | int, data, *, magic: int = 2, limit: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decompress ``data``; never returns more than ``limit`` bytes.

    Raises :class:`DecompressionLimitError` past ``limit`` and
    :class:`CorruptRecordError` for any malformed input (whatever the codec
    library raised is chained).
    """
    try:
        codec = _BY_ID[codec]  # (Compression(codec) costs an enum lookup per batch)
    except (KeyError, TypeError):
        raise UnsupportedCodecError(codec) from None
    if codec == Compression.NONE:
        out = bytes(data)
    elif codec == Compression.GZIP:
        out = _guard(_gzip_decompress, data, limit, "gzip")
    elif codec == Compression.SNAPPY:
        out = _guard(_snappy_decompress, data, limit, "snappy")
    elif codec == Compression.LZ4:
        out = _guard(_lz4_decompress, data, limit, "lz4", magic)
    else:
        out = _guard(_zstd_decompress, data, limit, "zstd")
    if len(out) > limit:
        raise _too_big(limit)
    return out


def _too_big(limit: int) -> DecompressionLimitError:
    return DecompressionLimitError(f"decompressed size exceeds the limit of {limit} bytes")


def _guard(fn, data, limit, name, *args):
    try:
        return fn(data, limit, *args)
    except (CorruptRecordError, CodecUnavailableError):
        raise
    except MemoryError:
        raise _too_big(limit) from None
    except (
        Exception
    ) as exc:  # codec libraries raise their own types (zlib.error, cramjam.DecompressionError, RuntimeError...)
        raise CorruptRecordError(f"invalid {name} data: {exc}") from exc


def _gzip_decompress(data, limit: int) -> bytes:
    view = memoryview(data).cast("B")
    out = []
    total = 0
    while True:
        d = zlib.decompressobj(31)
        chunk = d.decompress(view, limit + 1 - total)
        total += len(chunk)
        out.append(chunk)
        if total > limit:
            raise _too_big(limit)
        if not d.eof:
            if d.unconsumed_tail:
                # Output capped before the input ended: over the limit.
                raise _too_big(limit)
            raise CorruptRecordError("truncated gzip data")
        rest = d.unused_data
        if not rest:
            break
        if rest[:2] != b"\x1f\x8b":
            break  # trailing garbage after the last member: GZIPInputStream ignores it too
        view = memoryview(rest)
    return out[0] if len(out) == 1 else b"".join(out)


def _snappy_decompress(data, limit: int) -> bytes:
    snappy = _codec_module(Compression.SNAPPY).snappy
    view = memoryview(data).cast("B")
    if view[:8] != _XERIAL_MAGIC:
        if snappy.decompress_raw_len(view) > limit:
            raise _too_big(limit)
        return bytes(snappy.decompress_raw(view))
    if len(view) < 16:
        raise CorruptRecordError("truncated xerial snappy header")
    pos = 16
    end = len(view)
    blocks = []
    total = 0
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("truncated xerial snappy block length")
        (n,) = _INT32.unpack_from(view, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError(f"xerial snappy block length {n} runs past the data")
        block = view[pos : pos + n]
        pos += n
        total += snappy.decompress_raw_len(block)
        if total > limit:
            raise _too_big(limit)
        blocks.append(snappy.decompress_raw(block))
    return b"".join(blocks)


_LZ4_WINDOW_MAX = 8 << 20


def _lz4_decompress(data, limit: int, magic: int) -> bytes:
    frame = _codec_module(Compression.LZ4)
    if magic == 0:
        data = _fix_lz4_v0_header_checksum(data)
    # One decompression context per thread, reused batch after batch (the broker decompresses every
    # compressed batch it is sent), and the input passed as it is: LZ4FrameDecompressor makes a context per
    # frame and copies a memoryview input to bytes first. A frame that does not end cleanly leaves the context
    # mid-frame: it is reset before the next one.
    ctx = getattr(_tls, "lz4_d", None)
    if ctx is None:
        ctx = _tls.lz4_d = frame.create_decompression_context()
    chunk = frame.decompress_chunk
    ended = False
    try:
        # The decompressor allocates max_length up front, so the window is sized for the usual batch (4
        # times the frame, at least 64 KiB: a heap allocation), not the whole limit.
        first = min(limit + 1, max(len(data) << 2, 1 << 16))
        out, used, ended = chunk(ctx, data, max_length=first)
        if not ended and used < len(data) and len(out) <= limit:
            # A frame that expands more is read again from its start into one window for what it most likely
            # holds (lz4 expands at most ~255 times; past 8 MiB the window grows): read on in a chunk per
            # doubling joined after, a 14 KB frame of 1 MB took 1.3 ms of copies and page faults, 64 us so.
            frame.reset_decompression_context(ctx)
            whole = min(limit + 1, max(min(len(data) << 8, _LZ4_WINDOW_MAX), first << 2))
            out, used, ended = chunk(ctx, data, max_length=whole)
        parts = [out]
        total = len(out)
        while True:
            if total > limit:
                raise _too_big(limit)
            if ended:
                break
            if used >= len(data):
                raise CorruptRecordError("truncated lz4 frame")
            data = memoryview(data)[used:]  # output was capped before the input ended: go on from there
            out, used, ended = chunk(ctx, data, max_length=min(limit + 1 - total, max(total, 1 << 16)))
            parts.append(out)
            total += len(out)
    finally:
        if not ended:
            frame.reset_decompression_context(ctx)
    # Bytes after the end mark are ignored, as Kafka's Lz4BlockInputStream does.
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _fix_lz4_v0_header_checksum(data) -> bytes:
    buf = bytearray(data)
    if len(buf) < 7 or buf[:4] != b"\x04\x22\x4d\x18":
        return bytes(buf)  # let the decoder report it
    flg = buf[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(buf) <= end:
        return bytes(buf)
    buf[end] = (_xxh32(bytes(buf[4:end])) >> 8) & 0xFF
    return bytes(buf)


def _zstd_decompress(data, limit: int) -> bytes:
    zstd = _codec_module(Compression.ZSTD)
    dctx = getattr(_tls, "zstd_d", None)
    if dctx is None:
        dctx = _tls.zstd_d = zstd.ZstdDecompressor()
    parts = []
    total = 0
    # stream_reader (rather than decompress()) because Java writes frames
    # without a content size and because it lets us stop at the limit.
    with dctx.stream_reader(data, read_across_frames=True) as reader:
        while True:
            chunk = reader.read(min(limit + 1 - total, 1 << 20))
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
            if total > limit:
                raise _too_big(limit)
    return parts[0] if len(parts) == 1 else b"".join(parts)


# xxHash32, only ever applied to the few bytes of an LZ4 frame descriptor.
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32(data: bytes, seed: int = 0) -> int:
    n = len(data)
    if n >= 16:
        raise ValueError("only short inputs supported")
    h = (seed + _P5 + n) & _M32
    i = 0
    while i + 4 <= n:
        h = (h + int.from_bytes(data[i : i + 4], "little") * _P3) & _M32
        h = (_rotl(h, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (h + data[i] * _P5) & _M32
        h = (_rotl(h, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h
