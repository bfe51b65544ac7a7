"""Exceptions raised while reading or building records.

Everything that is wrong with the *bytes* is a :class:`CorruptRecordError`
(a ``ValueError``), so a broker or client can catch one type and map it to
``CORRUPT_MESSAGE``.  The message names the batch (base offset and byte
position, when known) and the problem.
"""

from __future__ import annotations


class CorruptRecordError(ValueError):
    """The bytes are not a valid record batch / message set.

    Attributes:
        problem: what is wrong, without location.
        base_offset: base offset of the batch (for legacy entries: the
            message offset), or ``None`` if it could not be read.
        position: byte position of the batch in the buffer that was walked,
            or ``None`` when unknown.
    """

    def __init__(self, problem: str, *, base_offset: int | None = None, position: int | None = None):
        self.problem = problem
        self.base_offset = base_offset
        self.position = position
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.base_offset is not None:
            where.append(f"base offset {self.base_offset}")
        if self.position is not None:
            where.append(f"byte position {self.position}")
        if where:
            return f"corrupt record batch at {', '.join(where)}: {self.problem}"
        return f"corrupt record batch: {self.problem}"

    def with_context(self, *, base_offset: int | None, position: int | None) -> CorruptRecordError:
        """Return a copy located at ``base_offset``/``position`` (keeps what is already known)."""
        clone = self.__class__.__new__(self.__class__)
        clone.__dict__.update(self.__dict__)
        if clone.base_offset is None:
            clone.base_offset = base_offset
        if clone.position is None:
            clone.position = position
        ValueError.__init__(clone, clone._render())
        return clone


class CrcMismatchError(CorruptRecordError):
    """The stored checksum does not match the bytes (CRC-32C for v2, CRC-32 for v0/v1)."""

    def __init__(
        self,
        stored: int,
        computed: int,
        *,
        base_offset: int | None = None,
        position: int | None = None,
        what: str = "CRC",
    ):
        self.stored = stored
        self.computed = computed
        super().__init__(
            f"{what} mismatch: stored 0x{stored:08x}, computed 0x{computed:08x}",
            base_offset=base_offset,
            position=position,
        )


class UnsupportedCodecError(CorruptRecordError):
    """The attributes name a compression codec id that Kafka does not define (or the magic does not allow)."""

    def __init__(
        self, codec_id: int, *, base_offset: int | None = None, position: int | None = None, problem: str | None = None
    ):
        self.codec_id = codec_id
        super().__init__(
            problem or f"unknown compression codec id {codec_id}", base_offset=base_offset, position=position
        )


class DecompressionLimitError(CorruptRecordError):
    """Decompressing would exceed the configured cap (a decompression bomb or a misconfigured limit)."""


class CodecUnavailableError(ImportError):
    """The Python package implementing a codec is not installed; the message names it."""

    def __init__(self, codec: str, package: str):
        self.codec = codec
        self.package = package
        super().__init__(f"{codec} compression needs the '{package}' package: pip install {package}")
