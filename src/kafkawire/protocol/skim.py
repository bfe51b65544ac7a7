"""A response body read as its bytes pass, for its error codes alone: record bytes are skipped by length.

An observer that forwards a large Fetch response (megabytes of records) needs to know little of it: its size,
its non-zero error codes, and where its top-level tagged fields sit (KIP-951's NodeEndpoints). A
:class:`Skimmer` walks the message's schema over the bytes as they are fed, piece by piece, in any cut:
fixed-width fields it does not need, strings, bytes and ``records`` are stepped over by their lengths without
being copied, and what it reads (an ``ErrorCode``, a length, a count) is a few bytes at a time. It holds
at most one field's bytes between pieces, so a frame of any size is skimmed without being gathered.

The error codes are those :func:`kafkawire.tools.pcap.error_names` finds in the decoded message, with the same
paths (``responses[0].partitions[3].error_code``), tagged fields included; ``tests/proxy/test_skim.py``
holds the two to the same answer, on every response schema and on real brokers' traffic.
"""

from __future__ import annotations

from collections.abc import Generator
from functools import lru_cache

import msgspec

from . import apis
from .primitives import DecodeError
from .schema import FIXED_TYPES, FieldSpec, StructSpec, message_spec

__all__ = ["Skim", "Skimmer", "error_codes"]

MAX_TAGGED_READ = 1024 * 1024  # a known tagged field larger than this is stepped over, not walked


class Skim(msgspec.Struct, frozen=True):
    """What a skimmed frame showed."""

    size: int  # payload bytes (without the size prefix)
    errors: tuple[tuple[str, int], ...]  # (field path, code) of every non-zero ErrorCode
    # the body's top-level tagged fields: (tag, payload offset of the tag number's varint, declared size)
    tags: tuple[tuple[int, int, int], ...] = ()
    problem: str | None = None  # the walk stopped (the body does not fit its schema): ``errors`` may be incomplete


# --------------------------------------------------------------------------- plans: the schema per version

# op kinds
_SKIP, _ERROR, _STRING, _BYTES, _ARRAY, _STRUCT = range(6)


class _Plan(msgspec.Struct, frozen=True):
    ops: tuple  # (kind, attr, ...) for each untagged field present at the version
    flexible: bool
    tagged: dict  # tag -> (attr, op) of the tagged fields present at the version


def _op(f: FieldSpec, version: int, flexible: bool, element: bool = False):
    compact = f.compact(version, flexible)
    nullable = f.is_nullable(version) and not element
    if f.is_array and not element:
        return (_ARRAY, f.attr, compact, _op(f, version, flexible, element=True))
    if f.struct is not None:
        return (_STRUCT, f.attr, nullable, _plan(f.struct, version, flexible))
    t = f.type
    if t in FIXED_TYPES:
        width = FIXED_TYPES[t][1]
        if t == "int16" and f.name == "ErrorCode" and not element:
            return (_ERROR, f.attr, width)
        return (_SKIP, f.attr, width)
    if t == "string":
        return (_STRING, f.attr, compact)
    if t in ("bytes", "records"):
        return (_BYTES, f.attr, compact)
    raise ValueError(f"no skim for field type {t}")


def _plan(struct: StructSpec, version: int, flexible: bool) -> _Plan:
    ops, tagged = [], {}
    for f in struct.fields:
        if not f.present(version):
            continue
        if f.is_tagged(version):
            tagged[f.tag] = (f.attr, _op(f, version, True))
        else:
            ops.append(_op(f, version, flexible))
    return _Plan(tuple(ops), flexible, tagged)


@lru_cache(maxsize=512)
def _message_plan(name: str, version: int) -> _Plan:
    spec = message_spec(name)
    definition = spec.definition(version)
    return _plan(definition.root, version, definition.is_flexible(version))


# --------------------------------------------------------------------------- the walk

# The walk is a generator: it yields n > 0 for "the next n bytes" (sent back as bytes), -n for "step over
# the next n bytes" (sent back None). The driver feeds it from whatever pieces arrive.


def _uvarint() -> Generator[int, bytes, int]:
    result = shift = 0
    for _ in range(5):
        b = (yield 1)[0]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result
        shift += 7
    raise DecodeError("varint longer than 5 bytes")


def _length(compact: bool, width: int) -> Generator[int, bytes, int]:
    """A string's, bytes' or array's length (-1: null)."""
    if compact:
        return (yield from _uvarint()) - 1
    return int.from_bytes((yield width), "big", signed=True)


class Skimmer:
    """Fed the payload of one response (header and body, no size prefix) in pieces; :meth:`result` once the
    last piece is in. ``size`` is the payload's length (from the frame's size prefix)."""

    __slots__ = ("size", "offset", "errors", "tags", "problem", "_gen", "_need", "_carry", "_done", "_inner")

    def __init__(self, api_key: int, api_version: int, size: int, body_version: int | None = None):
        self.size = size
        self.offset = 0  # payload bytes consumed by the walk
        self.errors: list[tuple[str, int]] = []
        self.tags: list[tuple[int, int, int]] = []
        self.problem: str | None = None
        self._carry = bytearray()
        self._done = False
        self._inner: _Walk | None = None  # a tagged field being walked from its bytes
        info = apis.api(api_key)
        header = _message_plan("ResponseHeader", apis.response_header_version(api_key, api_version))
        body = _message_plan(info.response, api_version if body_version is None else body_version)
        self._gen = self._message(header, body)
        self._need = 0
        self._advance(None)

    def _message(self, header: _Plan, body: _Plan):
        yield from self._struct(header, "", top=False, record=False)
        yield from self._struct(body, "", top=True)

    def _struct(self, plan: _Plan, path: str, top: bool = False, record: bool = True):
        for op in plan.ops:
            yield from self._value(op, path, record)
        if not plan.flexible:
            return
        count = yield from _uvarint()
        for _ in range(count):
            at = self.offset
            tag = yield from _uvarint()
            size = yield from _uvarint()
            if top:
                self.tags.append((tag, at, size))
            known = plan.tagged.get(tag)
            if known is None or size > MAX_TAGGED_READ or not record:
                if size:
                    yield -size
                continue
            data = (yield size) if size else b""
            outer, self._inner = self._inner, _Walk(data)
            try:
                self._inner.run(self._value(known[1], path, record))
            finally:
                self._inner = outer

    def _value(self, op, path: str, record: bool):
        kind = op[0]
        if kind == _SKIP:
            yield -op[2]
        elif kind == _ERROR:
            code = int.from_bytes((yield 2), "big", signed=True)
            if code and record:
                self.errors.append((f"{path}.{op[1]}" if path else op[1], code))
        elif kind == _STRING:
            n = yield from _length(op[2], 2)
            if n > 0:
                yield -n
        elif kind == _BYTES:
            n = yield from _length(op[2], 4)
            if n > 0:
                yield -n
        elif kind == _ARRAY:
            n = yield from _length(op[2], 4)
            element = op[3]
            if n <= 0:
                return
            left = self._inner.left if self._inner is not None else self.size - self.offset
            if n > left:  # as Kafka's decoders refuse: no count walks more elements than there are bytes
                raise DecodeError(f"array of {n} elements in {left} remaining bytes")
            p = f"{path}.{op[1]}" if path else op[1]
            if element[0] == _STRUCT:
                sub = element[3]
                for i in range(n):
                    yield from self._struct(sub, f"{p}[{i}]", record=record)
            elif element[0] == _SKIP:
                yield -(element[2] * n)
            else:
                for i in range(n):
                    yield from self._value(element, f"{p}[{i}]", record)
        else:  # a struct, maybe nullable (an int8 presence marker, < 0: null)
            if op[2] and int.from_bytes((yield 1), "big", signed=True) < 0:
                return
            p = f"{path}.{op[1]}" if path else op[1]
            yield from self._struct(op[3], p, record=record)

    # -- the driver
    def _advance(self, value) -> None:
        try:
            self._need = self._gen.send(value)
        except StopIteration:
            self._done = True
            self._need = 0
        except (DecodeError, ValueError) as exc:
            self._stop(str(exc))

    def _stop(self, problem: str) -> None:
        self.problem = self.problem or f"{problem} (payload offset {self.offset})"
        self._done = True
        self._need = 0

    def feed(self, data) -> None:
        """The next bytes of the payload (bytes, bytearray or memoryview; not kept)."""
        pos, n = 0, len(data)
        carry = self._carry
        while pos < n and not self._done:
            need = self._need
            if need < 0:  # step over
                take = min(-need, n - pos)
                pos += take
                self.offset += take
                if take == -need:
                    self._advance(None)
                else:
                    self._need = need + take
            elif not carry and n - pos >= need:
                chunk = bytes(data[pos : pos + need])
                pos += need
                self.offset += need
                self._advance(chunk)
            else:
                take = min(need - len(carry), n - pos)
                carry += data[pos : pos + take]
                pos += take
                self.offset += take
                if len(carry) == need:
                    chunk = bytes(carry)
                    carry.clear()
                    self._advance(chunk)

    def result(self) -> Skim:
        """Once the whole payload was fed: the error codes found, or how far the walk went."""
        if not self._done:
            self._stop(f"the payload ends inside its body ({self.size} bytes)")
        return Skim(self.size, tuple(self.errors), tuple(self.tags), self.problem)


class _Walk:
    """A tagged field's bytes, already read whole, walked at once (no more feeding)."""

    def __init__(self, data: bytes):
        self.data = data
        self.left = len(data)  # bytes not yet walked

    def run(self, gen) -> None:
        data, pos = self.data, 0
        try:
            need = gen.send(None)
            while True:
                if need < 0:
                    pos -= need
                    if pos > len(data):
                        raise DecodeError("a tagged field's content runs past its declared size")
                    self.left = len(data) - pos
                    need = gen.send(None)
                else:
                    if pos + need > len(data):
                        raise DecodeError("a tagged field's content runs past its declared size")
                    chunk = data[pos : pos + need]
                    pos += need
                    self.left = len(data) - pos
                    need = gen.send(chunk)
        except StopIteration:
            return


def error_codes(api_key: int, api_version: int, payload, body_version: int | None = None) -> Skim:
    """A whole payload skimmed at once (what a :class:`Skimmer` fed it in one piece finds)."""
    skimmer = Skimmer(api_key, api_version, len(payload), body_version)
    skimmer.feed(payload)
    return skimmer.result()
