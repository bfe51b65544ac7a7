"""Compile one (message, version) of the spec into Python decode/encode functions.

Kafka's own generator writes Java source per message; kafkawire does the same
at run time: for each version it emits straight-line Python with runs of
fixed-width fields merged into one ``struct`` call, then ``exec``s it. The
generated code is the only serializer; there is no hand-written one. The byte code
of each generated source is kept on disk for the next process (``codecache``).

Nested structs are compiled in line into their parent's functions (up to a
few levels), since a call per element of a struct array costs more than the
element's own decoding.

Two decoders are emitted from the same walk: a fast one, and a *checked* one
that records the field path and byte offset as it goes. The fast one runs
first; only when it fails does the checked one run again to say precisely
where and why, so error reporting costs nothing on good input.

The fast decoder counts bytecodes, since in CPython each costs about as much
as the work it does: it reads the length or tag byte that follows a fixed run
in the run's own struct call, decodes varints of up to three bytes in line,
leaves bound checks to the struct calls where they fail anyway (any exception
sends the input to the checked decoder) and the end of a string, bytes or records value to
the read of the byte at that end, decodes arrays of fixed-width structs
in one struct call (and arrays of structs holding fixed-width value arrays, such
as a partition's replica lists, in one call per shape of their elements), builds
the elements of those arrays in one ``map`` over the class (the message classes
are msgspec structs, which take their field values positionally and store them
in C), and shares decoded UUIDs. It must never accept input the
checked decoder rejects: every short cut has a test next to its general path
in tests/protocol/test_decode_fast_paths.py.
"""

from __future__ import annotations

import itertools
import linecache
import operator
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from . import codecache
from .primitives import UVARINT_TABLE, DecodeError, EncodeError, read_uvarint, uvarint_bytes
from .schema import FIXED_TYPES, FieldSpec, MessageSpec, StructSpec


@dataclass
class Codec:
    message: str
    version: int
    flexible: bool
    decode: Callable  # (buf, pos) -> (obj, pos)
    decode_checked: Callable  # (buf, pos, ctx, path) -> (obj, pos)
    encode: Callable  # (obj, write) -> None
    source: str
    # Whether decoding a large input is worth a pause of the cycle collector: true unless the
    # message carries records (whose bytes are most of a large input, with few objects around them)
    pause_gc: bool = False


def _write_tags(tags, w):
    w(UVARINT_TABLE[len(tags)] if len(tags) < 16384 else uvarint_bytes(len(tags)))
    for tag, data in tags:
        w(UVARINT_TABLE[tag] if tag < 16384 else uvarint_bytes(tag))
        n = len(data)
        w(UVARINT_TABLE[n] if n < 16384 else uvarint_bytes(n))
        w(data)


_ZERO_UUID = uuid.UUID(int=0)
_ZERO_16 = bytes(16)
_set = object.__setattr__
_from_bytes = int.from_bytes
_SAFE_UNKNOWN = uuid.SafeUUID.unknown


# UUIDs are immutable, and the same topic ids come back in message after message: decoded ones are
# kept (up to _UUIDS_MAX, then the cache starts over) and shared. The fast decoder looks them up in
# line (``_UC(raw) or _uuid(raw)``; a UUID is always true).
_UUIDS: dict[bytes, uuid.UUID] = {_ZERO_16: _ZERO_UUID}
_UUIDS_MAX = 4096


def _uuid(raw) -> uuid.UUID:
    u = _UUIDS.get(raw)
    if u is None:
        # uuid.UUID(bytes=...) validates its arguments in Python and costs over a microsecond;
        # 16 bytes are always a valid UUID, so build it directly.
        u = object.__new__(uuid.UUID)
        _set(u, "int", _from_bytes(raw, "big"))
        _set(u, "is_safe", _SAFE_UNKNOWN)
        if len(_UUIDS) >= _UUIDS_MAX:
            _UUIDS.clear()
            _UUIDS[_ZERO_16] = _ZERO_UUID
        _UUIDS[bytes(raw)] = u
    return u


# The terms of a compact length of two or three varint bytes by the value of its second and third
# byte (with the offsets of the continuation bits folded in): a list index costs less than a shift
# and a subtraction, and hands out ints made once (a record batch's length is seldom a small int).
# value - 1 = (b0 - 1) + _V7[b1] (+ _V14[b2]); _V7_MINUS_ONE for a first byte read as it is.
_V7 = [(b << 7) - 128 for b in range(256)]
_V7_MINUS_ONE = [(b << 7) - 129 for b in range(256)]
_V14 = [(c << 14) - 16384 for c in range(256)]


# Arrays of fixed-width numbers are (un)packed in one struct call; formats for the
# common small counts are compiled once instead of per array.
_SMALL_ARRAY = 64
# How deep nested structs are compiled in line rather than called (deeper ones still get a call).
_MAX_INLINE = 3


def _array_codecs(ch: str):
    structs = [struct.Struct(f">{n}{ch}") for n in range(_SMALL_ARRAY)]
    return tuple(s.unpack_from for s in structs), tuple(s.pack for s in structs)


_ARRAY_CODECS = {ch: _array_codecs(ch) for ch in "?bhHiIqd"}


def _unpack_array(ch: str):
    small = _ARRAY_CODECS[ch][0]

    width = struct.calcsize(">" + ch)

    def unpack(n, buf, pos):
        if pos + n * width > len(buf):
            raise DecodeError(f"array of {n} values runs past the end of the buffer", offset=pos)
        if n < _SMALL_ARRAY:
            return list(small[n](buf, pos))
        return list(struct.unpack_from(f">{n}{ch}", buf, pos))

    return small, unpack


def _pack_array(ch: str):
    small = _ARRAY_CODECS[ch][1]

    def pack(values):
        n = len(values)
        if n < _SMALL_ARRAY:
            return small[n](*values)
        return struct.pack(f">{n}{ch}", *values)

    return pack


# Arrays of fixed-width structs: one compiled format per (element format, count), shared by all
# codecs, for counts from _FIXED_ARRAY_MIN to _FIXED_ARRAY_MAX. A compiled format holds ~24 bytes
# per field of every element, so all of them together hold at most _FIXED_ARRAY_BUDGET fields
# (~3 MB); counts met once that is spent are decoded by the general loop.
_FIXED_ARRAY_MIN = 10  # below this the general loop is faster (the one call costs ~8 C calls of setup)
_FIXED_ARRAY_MAX = 1024
_FIXED_ARRAY_BUDGET = 1 << 17
_FIXED_ARRAY_CACHES: dict[str, dict] = {}
_fixed_array_spent = 0


def _fixed_array_cache(fmt: str) -> dict:
    return _FIXED_ARRAY_CACHES.setdefault(fmt, {})


def _fixed_array(cache: dict, fmt: str, n: int):
    """The unpack_from of ``n`` repetitions of ``fmt``, or None (the caller then loops)."""
    global _fixed_array_spent
    fields = n * len(fmt)
    if n > _FIXED_ARRAY_MAX or _fixed_array_spent + fields > _FIXED_ARRAY_BUDGET:
        return None
    _fixed_array_spent += fields
    unpack = cache[n] = struct.Struct(">" + fmt * n).unpack_from
    return unpack


# Arrays of structs made of fixed-width fields and arrays of fixed-width values (a partition's
# replica lists): one compiled format per (count, shape), where the shape is the length of each inner
# array, shared by all codecs under the same budget as the fixed arrays.
_SHAPED_ARRAY_CACHES: dict[tuple, dict] = {}
_SCALAR, _COMPACT, _INT32 = 0, 1, 2  # the kinds of field in an element's layout
_copy_list = list.copy


_EMPTY: list = []  # copied for each element's inner array of a shape with no values there; never changed


def _shaped_array(cache: dict, key: tuple, layout: tuple, flexible: bool):
    """For ``key[0]`` elements laid out as ``layout`` (per field: its format char and kind, scalar
    or an inner array with a compact or int32 length) whose inner arrays hold ``key[1:]`` values:
    everything about the shape that the decoder would otherwise work out again for every array it
    decodes, or None when the budget is spent (the caller then loops). In order: the unpack_from of
    every element's scalars (all else skipped as pad bytes), the size in bytes of all elements, the
    unpack_from of every element's length and tag bytes, the tuple those must equal, the
    unpack_from of every element's inner array values, then per scalar field a strided slice of the
    scalars, and per inner array a function (None: the caller's slicing of the values as a list)
    and what it maps over to make that array in each element. Measured on a metadata response
    (callgrind): per array of partitions, one tuple comparison instead of a strided slice, a count
    and the offset arithmetic per length byte; copying an empty list instead of an empty slice."""
    global _fixed_array_spent
    n, counts = key[0], key[1:]
    scalars, values, checks = "", "", ""
    expect: list[int] = []
    spans: list[tuple[int, int]] = []  # (start, count) of each inner array in an element's values
    inner = iter(counts)
    for ch, kind in layout:
        width = struct.calcsize(">" + ch)
        if kind == _SCALAR:
            scalars += ch
            values += f"{width}x"
            checks += f"{width}x"
            continue
        c = next(inner)
        pad = "x" if kind == _COMPACT else "4x"
        scalars += f"{pad}{c * width}x"
        values += f"{pad}{c}{ch}"
        checks += f"{'B' if kind == _COMPACT else 'i'}{c * width}x"
        expect.append(c + 1 if kind == _COMPACT else c)
        spans.append((sum(c for _, c in spans), c))
    if flexible:
        scalars += "x"
        values += "x"
        checks += "B"
        expect.append(0)  # an empty tag section
    k = sum(kind == _SCALAR for _, kind in layout)
    at = sum(counts)
    fields = n * (k + at + len(expect))
    if n > _FIXED_ARRAY_MAX or _fixed_array_spent + fields > _FIXED_ARRAY_BUDGET:
        return None
    _fixed_array_spent += fields
    unpack = struct.Struct(">" + scalars * n)
    arrays: list[object] = []  # per inner array: a maker (None: slices taken as they are) and its slices
    for a, c in spans:
        if c:
            arrays += [None, tuple(slice(j * at + a, j * at + a + c) for j in range(n))]
        else:
            arrays += [_copy_list, (_EMPTY,) * n]
    shaped = cache[key] = (
        unpack.unpack_from,
        unpack.size,
        struct.Struct(">" + checks * n).unpack_from,
        tuple(expect) * n,
        struct.Struct(">" + values * n).unpack_from,
        *(slice(i, None, k) for i in range(k)),
        *arrays,
    )
    return shaped


def _write_unknown_tags(tags, w):
    _write_tags(sorted(tags, key=operator.itemgetter(0)), w)


def _tag_of(f: FieldSpec) -> int:
    """The sort key of a tagged field (compile time only)."""
    assert f.tag is not None  # the spec gives every field that is tagged in some version its tag
    return f.tag


def _has_records(struct_spec: StructSpec, version: int) -> bool:
    return any(
        f.type == "records" or (f.struct is not None and _has_records(f.struct, version))
        for f in struct_spec.fields
        if f.present(version)
    )


class _Source:
    def __init__(self):
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def indent(self):
        self.depth += 1

    def dedent(self):
        self.depth -= 1


class _Compiler:
    def __init__(self, spec: MessageSpec, version: int, classes: dict[str, type], class_fields: dict):
        self.spec = spec
        self.version = version
        self.definition = spec.definition(version)
        self.flexible = self.definition.is_flexible(version)
        self.classes = classes
        self.class_fields = class_fields  # struct name -> list[FieldSpec] (union over versions)
        self.ns: dict = {
            "_new": object.__new__,
            "_uv": read_uvarint,
            "_UV": UVARINT_TABLE,
            "_uvb": uvarint_bytes,
            "_DecodeError": DecodeError,
            "_EncodeError": EncodeError,
            "_uuid": _uuid,
            "_UC": _UUIDS.get,
            "_str": str,
            "_unpack_from": struct.unpack_from,
            "_pack": struct.pack,
            "_bytes": bytes,
            "_I8": struct.Struct(">b").unpack_from,
            "_I16": struct.Struct(">h").unpack_from,
            "_I32": struct.Struct(">i").unpack_from,
            "_P16": struct.Struct(">h").pack,
            "_P32": struct.Struct(">i").pack,
            "_write_tags": _write_tags,
            "_tagkey": operator.itemgetter(0),
            "_write_unknown_tags": _write_unknown_tags,
            "_mv": memoryview,
            "_fixed_array": _fixed_array,
            "_shaped_array": _shaped_array,
            "_map": map,
            "_repeat": itertools.repeat,
            "_list": list,
            "_SMALL": _SMALL_ARRAY,
            "_V7": _V7,
            "_V7m": _V7_MINUS_ONE,
            "_V14": _V14,
        }
        self.counter = 0
        self.inline_depth = 0
        self.done: set[str] = set()
        self.src = _Source()

    # -- helpers -----------------------------------------------------------
    def const(self, value, prefix="_K") -> str:
        self.counter += 1
        # the separator keeps generated names apart from fixed helpers such as _P16/_P32
        name = f"{prefix}_{self.counter}"
        self.ns[name] = value
        return name

    def tmp(self, prefix="v") -> str:
        """A fresh local: named after its field ("topic_id_12"), numbered so that inlined structs never clash."""
        self.counter += 1
        return f"{prefix}{self.counter}"

    def describe(self, f: FieldSpec) -> str:
        """The comment above a field's code: its schema name, type and the versions that carry it."""
        v = self.version
        parts = [f"{'[]' if f.is_array else ''}{f.type}", f"versions {f.versions}"]
        if f.is_nullable(v):
            parts.append(f"nullable {f.nullable}")
        if f.is_tagged(v):
            parts.append(f"tag {f.tag}")
        if f.map_key:
            parts.append("map key")
        return f"# {f.name}: {', '.join(parts)}"

    def default_expr(self, f: FieldSpec) -> str:
        value = f.default_value()
        if f.is_array:
            return "None" if value is None else "[]"
        if f.struct is not None:
            return "None" if value is None else f"C_{f.struct.name}()"
        return self.const(value, "_D")

    def default_compare(self, f: FieldSpec, var: str) -> str:
        """An expression that is true when ``var`` differs from the field's default."""
        value = f.default_value()
        if f.is_array:
            if value is None:
                return f"{var} is not None"
            # default empty: a null (where nullable) differs from it and is written, as Kafka does
            return f"({var} is None or {var})" if f.is_nullable(self.version) else f"{var}"
        if f.struct is not None:
            if value is None:
                return f"{var} is not None"
            # field by field in line, as Struct.__eq__ compares (a call of it per tagged struct
            # field of every element was most of the cost of encoding a fetch response)
            default = self.classes[f.struct.name]()
            parts = [f"type({var}) is not C_{f.struct.name}"]
            for g in self.class_fields[f.struct.name]:
                sub = getattr(default, g.attr)
                if sub is None:
                    parts.append(f"{var}.{g.attr} is not None")
                else:
                    parts.append(f"{var}.{g.attr} != {self.const(sub, '_DS')}")
            parts.append(f"{var}._unknown_tags")
            return "(" + " or ".join(parts) + ")"
        if value is None:
            return f"{var} is not None"
        return f"{var} != {self.const(value, '_D')}"

    # -- entry ---------------------------------------------------------------
    def compile(self) -> Codec:
        root = self.definition.root
        self.emit_struct(root)
        origin = self.definition.source or "spec/messages.json"
        header = [
            f"# {self.spec.name} v{self.version}{' (flexible)' if self.flexible else ''}: compiled by "
            f"kafkawire.protocol.codegen from spec/messages.json, itself from {origin}.",
            "# Per struct: d_<Struct> decodes fast, dc_<Struct> decodes again to name the failing field (c = [path,",
            "# field, offset]), e_<Struct> encodes through w; a local is named after its field.",
        ]
        source = "\n".join(header + self.src.lines) + "\n"
        for name, cls in self.classes.items():
            self.ns[f"C_{name}"] = cls
        filename = f"<kafkawire codec {self.spec.name} v{self.version}>"
        code = codecache.compiled(source, filename)  # compile(), or the byte code a run before kept
        # tracebacks through the generated functions show their lines (an mtime of None keeps
        # linecache.checkcache from dropping the entry: there is no file to compare it with)
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
        exec(code, self.ns)
        return Codec(
            self.spec.name,
            self.version,
            self.flexible,
            self.ns[f"d_{root.name}"],
            self.ns[f"dc_{root.name}"],
            self.ns[f"e_{root.name}"],
            source,
            pause_gc=not _has_records(root, self.version),
        )

    def emit_struct(self, struct_spec: StructSpec) -> None:
        if struct_spec.name in self.done:
            return
        self.done.add(struct_spec.name)
        present = [f for f in struct_spec.fields if f.present(self.version)]
        for f in present:
            if f.struct is not None:
                self.emit_struct(f.struct)
        self.emit_decoder(struct_spec, present, checked=False)
        self.emit_decoder(struct_spec, present, checked=True)
        self.emit_encoder(struct_spec, present)

    # -- decoding ------------------------------------------------------------
    def emit_decoder(self, struct_spec: StructSpec, present: list[FieldSpec], checked: bool) -> None:
        s = self.src
        name = struct_spec.name
        if checked:
            s(f"def dc_{name}(buf, pos, c, p):")
        else:
            s(f"def d_{name}(buf, pos):")
        s.indent()
        s("L = len(buf)")
        if not checked:
            s("B = type(buf) is not _mv")
        if not checked and _has_records(struct_spec, self.version):
            s("M = _mv(buf) if B else buf")  # records fields are slices of one view of the input
        self.emit_decode_body(struct_spec, present, checked, "o")
        s("return o, pos")
        s.dedent()
        s("")

    def emit_decode_body(
        self, struct_spec: StructSpec, present: list[FieldSpec], checked: bool, out: str, sink: str | None = None
    ) -> None:
        """Code that decodes one struct at ``pos`` into the variable ``out`` (or, given ``sink``,
        passes it to that call instead: one store and load fewer per element of an array). Its
        locals carry a unique suffix so that the body can be inlined into an enclosing struct's decoder."""
        s = self.src
        v = self.version
        name = struct_spec.name
        k = self.tmp("_")  # the suffix of this struct's own locals (tag section)
        values: dict[str, str] = {}
        untagged = [f for f in present if not f.is_tagged(v)]
        tagged = sorted((f for f in present if f.is_tagged(v)), key=_tag_of)
        i = 0
        prefetch = None  # (variable, size of the run before it) of a length or tag byte read ahead
        while i < len(untagged):
            f = untagged[i]
            if not f.is_array and f.type in FIXED_TYPES:
                run = [f]
                while (
                    i + len(run) < len(untagged)
                    and not untagged[i + len(run)].is_array
                    and untagged[i + len(run)].type in FIXED_TYPES
                ):
                    run.append(untagged[i + len(run)])
                i += len(run)
                # The fast decoder reads what follows a fixed run in the same struct call: the
                # length of a string, bytes or array (its first byte when compact), or the tag
                # byte that ends the struct. The consumer then adds the run's size to pos.
                extra = None
                if not checked:
                    if i < len(untagged):
                        extra = self.length_char(untagged[i])
                    elif self.flexible:
                        extra = "B"
                prefetch = self.emit_fixed_run(run, values, checked, extra)
                continue
            var = self.tmp(f"{f.attr}_")
            values[f.attr] = var
            s(self.describe(f))
            if checked:
                s(f"c[0] = p; c[1] = {f.name!r}; c[2] = pos")
            # what follows starts with a read at the new pos (the tag section's first byte after the
            # last untagged field; a length, a presence byte or a fixed run otherwise), which fails
            # (IndexError, struct.error) on an end past the input: that is then the check of the end
            nxt = untagged[i + 1] if i + 1 < len(untagged) else None
            bounded = not checked and (
                (nxt is None and self.flexible)
                or (nxt is not None and (nxt.is_array or nxt.struct is None or nxt.is_nullable(v)))
            )
            self.emit_decode_value(
                f, var, compact=f.compact(v, self.flexible), checked=checked, pre=prefetch, bounded=bounded
            )
            prefetch = None
            i += 1
        unk = "None"
        if self.flexible:
            unk, ntags, tag, size, end = (f"unknown_tags{k}", f"tag_count{k}", f"tag{k}", f"tag_size{k}", f"tag_end{k}")
            for f in tagged:
                var = self.tmp(f"{f.attr}_")
                values[f.attr] = var
                self.emit_default(f, var)
            s(f"{unk} = None")
            if checked:
                s("c[0] = p; c[1] = '_tagged_fields'; c[2] = pos")
            # almost every tag section is empty: one byte, no loop
            if prefetch is not None:
                s(f"if {prefetch[0]} == 0: pos += {prefetch[1] + 1}")
                s("else:")
                s.indent()
                s(f"pos += {prefetch[1]}")
            else:
                s("if buf[pos] == 0: pos += 1")
                s("else:")
                s.indent()
            self.emit_uvarint(ntags)
            s(
                f"if {ntags} > L - pos: raise _DecodeError('tagged field count %d exceeds the remaining bytes' % {ntags}, offset=pos)"
            )
            s(f"for _ in range({ntags}):")
            s.indent()
            self.emit_uvarint(tag)
            self.emit_uvarint(size)
            s(f"{end} = pos + {size}")
            s(
                f"if {end} > L: raise _DecodeError('tagged field %d of size %d runs past the end of the buffer' % ({tag}, {size}), offset=pos)"
            )
            first = True
            for f in tagged:
                s(f"{'if' if first else 'elif'} {tag} == {f.tag}:")
                first = False
                s.indent()
                s(self.describe(f))
                if checked:
                    s(f"c[0] = p; c[1] = {f.name!r}; c[2] = pos")
                self.in_tag = True
                self.emit_decode_value(f, values[f.attr], compact=True, checked=checked)
                self.in_tag = False
                s(
                    f"if pos != {end}: raise _DecodeError('tagged field %d: declared size %d does not match its content' % ({tag}, {size}), offset=pos)"
                )
                s.dedent()
            if tagged:
                s("else:")
                s.indent()
            s(f"if {unk} is None: {unk} = []")
            s(f"{unk}.append(({tag}, _bytes(buf[pos:{end}])))")
            if tagged:
                s.dedent()
            s(f"pos = {end}")
            s.dedent()
            s.dedent()
        for f in self.class_fields[name]:
            if f.attr not in values and f.is_struct and not f.is_array and f.default_value() is not None:
                values[f.attr] = var = self.tmp(f"{f.attr}_")
                self.emit_default(f, var)
        # one positional call: the class stores the values in field order, in C
        args = [values.get(f.attr) or self.default_expr(f) for f in self.class_fields[name]]
        if sink is not None:
            s(f"{sink}(C_{name}({', '.join(args + [unk])}))")
        else:
            s(f"{out} = C_{name}({', '.join(args + [unk])})")

    def emit_default(self, f: FieldSpec, var: str) -> None:
        """Set ``var`` to a fresh default of field ``f``. A struct default is built in line, as its
        class's constructor would build it, in one positional call."""
        if f.is_array or f.struct is None or f.default_value() is None:
            self.src(f"{var} = {self.default_expr(f)}")
            return
        fields = self.class_fields[f.struct.name]
        subs = {}
        for g in fields:
            if g.is_struct and not g.is_array and g.default_value() is not None:
                subs[g.attr] = self.tmp(f"{g.attr}_")
                self.emit_default(g, subs[g.attr])
        args = [subs.get(g.attr) or self.default_expr(g) for g in fields]
        self.src(f"{var} = C_{f.struct.name}({', '.join(args + ['None'])})")

    def emit_uvarint(self, var: str) -> None:
        s = self.src
        s(f"{var} = buf[pos]")
        s(f"if {var} < 128: pos += 1")
        s(f"else: {var}, pos = _uv(buf, pos)")

    def length_char(self, f: FieldSpec) -> str | None:
        """The struct format of the start of field ``f`` when it begins with a length: the whole
        length when it is an int16/int32, its first byte when it is a compact varint."""
        if not f.is_array and f.type not in ("string", "bytes", "records"):
            return None
        if f.compact(self.version, self.flexible):
            # the first byte, the rest read on from it; for records also the second, as a record
            # batch's length mostly needs two or three (a string's or array's mostly one, where
            # the second would cost more than it saves). A valid input always has a byte after a
            # compact length's first: compact lengths exist only in flexible versions, where the
            # struct's tag section follows the value, so this read fails only on input that the
            # checked decoder refuses too
            return "BB" if f.type == "records" else "B"
        return "h" if f.type == "string" and not f.is_array else "i"

    def emit_fixed_run(self, run: list[FieldSpec], values: dict, checked: bool, extra: str | None = None):
        """Unpack a run of fixed-width fields. With ``extra`` (a format character), also read what
        follows the run into a new variable and leave pos at the run's start: returns (variable,
        size of the run) for the code that consumes it, else None."""
        s = self.src
        fmt = ">" + "".join(FIXED_TYPES[f.type][0] for f in run)
        st = struct.Struct(fmt)
        names = []
        for f in run:
            var = self.tmp(f"{f.attr}_")
            values[f.attr] = var
            names.append(var)
            s(self.describe(f))
        if checked:
            s(f"c[0] = p; c[1] = {run[0].name!r}; c[2] = pos")
            s(
                f"if pos + {st.size} > L: raise _DecodeError('needs {st.size} bytes for {'/'.join(f.name for f in run)}, %d left' % (L - pos), offset=pos)"
            )
        targets = list(names)
        if extra is not None:
            targets.append(self.tmp("ahead_"))  # the length or tag byte after the run
            if extra == "BB":
                targets.append("b_")  # and the byte after a compact length's first (see length_char)
            unpack = self.const(struct.Struct(fmt + extra).unpack_from, "_U")
        else:
            unpack = self.const(st.unpack_from, "_U")
        s(f"{', '.join(targets)}{',' if len(targets) == 1 else ''} = {unpack}(buf, pos)")
        if extra is None:
            s(f"pos += {st.size}")
        for f, var in zip(run, names):
            if f.type == "uuid":
                s(f"{var} = {self.uuid_expr(var, checked)}")
        return None if extra is None else (targets[len(names)], st.size, extra == "BB")

    @staticmethod
    def uuid_expr(raw: str, checked: bool) -> str:
        return f"_uuid({raw})" if checked else f"_UC({raw}) or _uuid({raw})"

    def emit_length(self, var: str, compact: bool, width: int, checked: bool = True, pre=None) -> None:
        s = self.src
        if pre is not None:
            # ``var`` was read with the fixed run before it, whose size pos does not include yet
            size = pre[1]
            if not compact:
                s(f"pos += {size + width}")
                return
            # the first byte is the raw varint byte: the value minus one when under 128, else the
            # next bytes are read on from it as in the general case below (the same sums)
            s(f"if {var} < 128: {var} -= 1; pos += {size + 1}")
            s("else:")
            s.indent()
            if not pre[2]:  # else b_, the byte after it, was read with it
                s(f"b_ = buf[pos + {size + 1}]")
            s(f"if b_ < 128: {var} += _V7m[b_]; pos += {size + 2}")
            s("else:")
            s.indent()
            s(f"c_ = buf[pos + {size + 2}]")
            s(f"if c_ < 128: {var} += _V7m[b_] + _V14[c_]; pos += {size + 3}")
            s(f"else: {var}, pos = _uv(buf, pos + {size}); {var} -= 1")
            s.dedent()
            s.dedent()
            return
        if checked and not compact:
            s(
                f"if pos + {width} > L: raise _DecodeError('needs {width} bytes for a length, %d left' % (L - pos), offset=pos)"
            )
        if compact and not checked:
            # the compact length is the varint minus one: folded into the one-byte case
            s(f"{var} = buf[pos] - 1")
            s(f"if {var} < 127: pos += 1")
            # lengths of 127 B to 2 MiB (record batches, long strings) without a call
            # with b0 >= 128 (so var = b0 - 1) and b1 >= 128 in the three-byte case, the value is
            # b0 - 128 + (b1 - 128 << 7) + (b2 << 14): sums of the raw bytes, fewer operations
            s("else:")
            s.indent()
            s("b_ = buf[pos + 1]")
            s(f"if b_ < 128: {var} += _V7[b_]; pos += 2")
            s("else:")
            s.indent()
            s("c_ = buf[pos + 2]")
            s(f"if c_ < 128: {var} += _V7[b_] + _V14[c_]; pos += 3")
            s(f"else: {var}, pos = _uv(buf, pos); {var} -= 1")
            s.dedent()
            s.dedent()
        elif compact:
            self.emit_uvarint(var)
            s(f"{var} -= 1")
        else:
            s(f"{var} = {'_I16' if width == 2 else '_I32'}(buf, pos)[0]")
            s(f"pos += {width}")

    def emit_decode_value(
        self, f: FieldSpec, var: str, compact: bool, checked: bool, element=False, pre=None, bounded=False
    ) -> None:
        """Decode one value of field ``f`` (an array, or an element of it when ``element``) into ``var``;
        ``pre`` is its length, read ahead by emit_fixed_run. With ``bounded``, the code that follows
        reads the byte at the new pos, so a string, bytes or records value need not check its own end."""
        s = self.src
        v = self.version
        nullable = f.is_nullable(v) and not element
        if f.is_array and not element:
            n = self.tmp(f"{f.attr}_count_") if pre is None else pre[0]
            self.emit_length(n, compact, 4, checked, pre)
            s(f"if {n} < 0:")
            s.indent()
            if nullable:
                s(f"if {n} != -1: raise _DecodeError('invalid array length %d' % {n}, offset=pos)")
                s(f"{var} = None")
            else:
                s(f"raise _DecodeError('null or negative array length %d for a non-nullable array' % {n}, offset=pos)")
            s.dedent()
            if not checked:
                s(f"elif not {n}: {var} = []")  # empty arrays are common and need nothing below
            s("else:")
            s.indent()
            fixed = f.type in FIXED_TYPES and f.type != "uuid"
            if checked or not fixed:
                s(
                    f"if {n} > L - pos: raise _DecodeError('array count %d exceeds the %d remaining bytes' % ({n}, L - pos), offset=pos)"
                )
            if fixed:
                ch, width = FIXED_TYPES[f.type]
                small, unpack = _unpack_array(ch)
                small_name = self.const(small, "_UA")
                unpack_name = self.const(unpack, "_UAL")
                if checked:
                    s(f"e = pos + {n} * {width}")
                    s(
                        f"if e > L: raise _DecodeError('array of %d {f.type} runs past the end of the buffer' % {n}, offset=pos)"
                    )
                # the fast decoder leaves the bound check to the struct call (small counts) or to
                # the helper, which checks before it builds a format for the count
                s(f"{var} = [*{small_name}[{n}](buf, pos)] if {n} < _SMALL else {unpack_name}({n}, buf, pos)")
                s("pos = e" if checked else f"pos += {n} * {width}")
            else:
                bulk = (
                    not checked
                    and f.struct is not None
                    and (self.emit_fixed_struct_array(f, var, n) or self.emit_shaped_struct_array(f, var, n))
                )
                if bulk:
                    s(f"if {var} is None:")
                    s.indent()
                idx = self.tmp(f"{f.attr}_i_")
                item = self.tmp(f"{f.attr}_item_")
                s(f"{var} = []")
                s(f"for {idx} in range({n}):")
                s.indent()
                if checked and f.struct is None:
                    s(f"c[0] = p; c[1] = '%s[%d]' % ({f.name!r}, {idx}); c[2] = pos")
                if f.struct is None:
                    self.emit_decode_value(f, item, compact, checked, element=True)
                    s(f"{var}.append({item})")
                elif not self.emit_struct_call(
                    f, item, checked, f"p + '.%s[%d]' % ({f.name!r}, {idx})", f"{var}.append"
                ):
                    s(f"{var}.append({item})")
                s.dedent()
                if bulk:
                    s.dedent()
            s.dedent()
            return
        t = f.type
        if f.struct is not None:
            tagged, self.in_tag = getattr(self, "in_tag", False), False
            if nullable:
                # in a tagged field Kafka's presence is an unsigned varint (0: null), elsewhere an int8 (< 0: null)
                s("if buf[pos] == 0:" if tagged else "if _I8(buf, pos)[0] < 0:")
                s.indent()
                s("pos += 1")
                s(f"{var} = None")
                s.dedent()
                s("else:")
                s.indent()
                s("pos += 1")
                self.emit_struct_call(f, var, checked, f"p + '.{f.name}'")
                s.dedent()
            else:
                self.emit_struct_call(f, var, checked, f"p + '.{f.name}'")
            return
        if t in FIXED_TYPES:
            ch, width = FIXED_TYPES[t]
            unpack = self.const(struct.Struct(">" + ch).unpack_from, "_U")
            if checked:
                s(f"if pos + {width} > L: raise _DecodeError('needs {width} bytes, %d left' % (L - pos), offset=pos)")
            s(f"{var} = {unpack}(buf, pos)[0]")
            s(f"pos += {width}")
            if t == "uuid":
                s(f"{var} = {self.uuid_expr(var, checked)}")
            return
        # string, bytes, records
        n = self.tmp(f"{f.attr}_len_") if pre is None else pre[0]
        self.emit_length(n, compact, 2 if t == "string" else 4, checked, pre)
        s(f"if {n} < 0:")
        s.indent()
        if nullable:
            s(f"if {n} != -1: raise _DecodeError('invalid {t} length %d' % {n}, offset=pos)")
            s(f"{var} = None")
        else:
            s(f"raise _DecodeError('null or negative length %d for a non-nullable {t}' % {n}, offset=pos)")
        s.dedent()
        s("else:")
        s.indent()
        if bounded:
            # the end is computed inside the slice (a slice past the input is short, and the read
            # of the byte at the new pos fails)
            end = f"(pos := pos + {n})"
            if t == "string":
                s(f"{var} = buf[pos:{end}].decode() if B else buf[pos:{end}].tobytes().decode()")
            elif t == "records":
                s(f"{var} = M[pos:{end}]")
            else:
                s(f"{var} = _bytes(buf[pos:{end}])")
            s.dedent()
            return
        s(f"e = pos + {n}")
        s(
            f"if e > L: raise _DecodeError('{t} of length %d runs past the end of the buffer (%d bytes left)' % ({n}, L - pos), offset=pos)"
        )
        if t == "string" and not checked:
            # slicing bytes and calling .decode() is almost twice as fast as str(slice, 'utf-8');
            # a memoryview has no .decode, and .tobytes().decode() still beats str() on it
            s(f"{var} = buf[pos:e].decode() if B else buf[pos:e].tobytes().decode()")
        elif t == "string":
            s(f"{var} = _str(buf[pos:e], 'utf-8')")
        elif t == "records":
            # zero copy: a view into the input, even when it is bytes
            s(f"{var} = {'_mv(buf)' if checked else 'M'}[pos:e]")
        else:
            s(f"{var} = _bytes(buf[pos:e])")
        s("pos = e")
        s.dedent()

    def emit_fixed_struct_array(self, f: FieldSpec, var: str, n: str) -> bool:
        """For an array of structs whose elements are only fixed-width fields (and, in flexible
        versions, a tag section): unpack the whole array in one struct call and build the elements
        from the flat tuple. Any non-empty tag section (or a count too large to cache a format for)
        leaves ``var`` None, and the general loop that follows decodes the array instead. The tag bytes are checked before unpacking
        (a strided slice of the input and one count), and skipped by the format as pad bytes."""
        v = self.version
        st = f.struct
        assert st is not None  # called for arrays of structs only
        fields = [g for g in st.fields if g.present(v)]
        if not fields or any(g.is_array or g.type not in FIXED_TYPES or g.is_tagged(v) for g in fields):
            return False
        absent = [g for g in self.class_fields[st.name] if not g.present(v)]
        if any(g.is_array or g.is_struct for g in absent):
            return False
        s = self.src
        fmt = "".join(FIXED_TYPES[g.type][0] for g in fields)
        width = struct.calcsize(">" + fmt)
        if self.flexible:
            fmt += "x"  # the tag byte, checked apart: one C call over a strided slice
            width += 1
        cache = self.const(_fixed_array_cache(fmt), "_FA")
        fu, flat = self.tmp(f"{f.attr}_unpack_"), self.tmp(f"{f.attr}_flat_")
        s(f"{var} = None")
        # short arrays cost less in the loop; a format is only compiled for a count whose
        # elements the input actually holds
        s(f"if {n} >= {_FIXED_ARRAY_MIN} and pos + {n} * {width} <= L:")
        s.indent()
        s(f"{fu} = {cache}.get({n})")
        s(f"if {fu} is None: {fu} = _fixed_array({cache}, {fmt!r}, {n})")
        s(f"if {fu} is not None:")
        s.indent()
        if self.flexible:
            tags = f"buf[pos + {width - 1}:pos + {n} * {width}:{width}]"
            s(f"if ({tags} if B else _bytes({tags})).count(0) == {n}:")  # a memoryview has no count
            s.indent()
        s(f"{flat} = {fu}(buf, pos)")
        # the elements are built in one C loop: map calls the class with each element's values
        s(f"{var} = [*_map(C_{st.name}, {', '.join(self.element_args(st, fields, flat, n, {}))})]")
        s(f"pos += {n} * {width}")
        if self.flexible:
            s.dedent()
        s.dedent()
        s.dedent()
        return True

    def emit_shaped_struct_array(self, f: FieldSpec, var: str, n: str) -> bool:
        """For an array of structs whose elements are fixed-width fields and arrays of fixed-width
        values (a metadata partition: ids, then replica, ISR and offline lists): read the length of
        each inner array in the first element, unpack the whole array in one struct call compiled for
        that shape, and check that every element has the same lengths and an empty tag section (the
        length and tag bytes are skipped by that format and read by a second one, whose values must
        equal a tuple made once per shape). Anything else (other lengths in some element, a null or
        long inner array, a tag, too short an input) leaves ``var`` None, and the general loop
        decodes the array."""
        v = self.version
        st = f.struct
        assert st is not None  # called for arrays of structs only
        fields = [g for g in st.fields if g.present(v)]

        def scalar(g: FieldSpec) -> bool:
            return not g.is_array and g.type in FIXED_TYPES

        def values(g: FieldSpec) -> bool:
            return g.is_array and g.type in FIXED_TYPES and g.type != "uuid"

        if not fields or any(g.is_tagged(v) or not (scalar(g) or values(g)) for g in fields):
            return False
        if not any(g.is_array for g in fields):
            return False
        if any(g.is_struct for g in self.class_fields[st.name] if not g.present(v)):
            return False
        s = self.src
        # Walk the first element: ``q`` steps from each inner array's length to the next one's, so
        # each offset is computed once; the lengths name the shape.
        q = self.tmp(f"{f.attr}_at_")
        cond = [f"{n} >= {_FIXED_ARRAY_MIN}"]
        counts: list[str] = []
        layout: list[tuple[str, int]] = []
        base, step = "pos", 0  # the last length read (or the element's start), bytes from it to the next
        for g in fields:
            ch, width = FIXED_TYPES[g.type]
            if scalar(g):
                layout.append((ch, _SCALAR))
                step += width
                continue
            c = self.tmp(f"{g.attr}_count_")
            at = f"({q} := {base} + {step})"
            if g.compact(v, self.flexible):
                # one length byte, as long as the array holds fewer than 127 values
                cond.append(f"{at} < L and 0 <= ({c} := buf[{q}] - 1) < 127")
                layout.append((ch, _COMPACT))
                step = 1
            else:
                cond.append(f"{at} + 4 <= L and 0 <= ({c} := _I32(buf, {q})[0]) < 127")
                layout.append((ch, _INT32))
                step = 4
            counts.append(c)
            base = f"{q} + {c} * {width}"
        sh, sc, get = self.tmp(f"{f.attr}_shape_"), self.tmp(f"{f.attr}_scalars_"), self.tmp(f"{f.attr}_slice_")
        cache = self.const(_SHAPED_ARRAY_CACHES.setdefault((tuple(layout), self.flexible), {}), "_SA")
        key = f"({n}, {', '.join(counts)})"
        s(f"{var} = None")
        s(f"if {' and '.join(cond)}:")
        s.indent()
        s(f"{sh} = {cache}.get({key}) or _shaped_array({cache}, {key}, {tuple(layout)!r}, {self.flexible})")
        # the shape's check bytes are read only from an input long enough for all the elements
        s(f"if {sh} and ({q} := pos + {sh}[1]) <= L and {sh}[2](buf, pos) == {sh}[3]:")
        s.indent()
        # the elements are built in one C loop: map calls the class with each element's values, the
        # scalars from one iterator over them all when the class takes them in the input's order
        # (else from strided slices), each inner array a slice of the values as a list
        order = [g.attr for g in self.class_fields[st.name] if g.present(v)]
        shared = order == [g.attr for g in fields] and not any(g.type == "uuid" for g in fields)
        s(f"{sc} = iter({sh}[0](buf, pos))" if shared else f"{sc} = {sh}[0](buf, pos)")
        s(f"{get} = _list({sh}[4](buf, pos)).__getitem__")
        inner, k, a = {}, 5 + sum(scalar(g) for g in fields), 0
        for i, g in enumerate(g for g in fields if scalar(g)):
            inner[g.attr] = sc if shared else f"{sc}[{sh}[{5 + i}]]"
        for g in fields:
            if not scalar(g):
                inner[g.attr] = f"_map({sh}[{k + a}] or {get}, {sh}[{k + a + 1}])"
                a += 2
        args = self.element_args(st, fields, sc, n, inner, stride="", index={})
        s(f"{var} = [*_map(C_{st.name}, {', '.join(args)})]")
        s(f"pos = {q}")
        s.dedent()
        s.dedent()
        return True

    def element_args(
        self,
        st: StructSpec,
        fields: list[FieldSpec],
        flat: str,
        n: str,
        inner: dict[str, str],
        stride: str | None = None,
        index: dict[str, str] | None = None,
    ) -> list[str]:
        """The iterables that ``map`` passes to the class of ``st`` to build ``n`` elements from the
        flat tuple ``flat`` of their values, one per field in the class's order. Without ``stride``,
        the values of each element are consecutive and in the class's order: one shared iterator
        hands them out. Otherwise field ``g``'s values are ``flat[index[g]::stride]``, and the
        inner arrays' iterables are given in ``inner``. A field this version lacks repeats its
        default; trailing ones and the unknown tags are left to the class's defaults."""
        present = {g.attr for g in fields}
        order = [g.attr for g in self.class_fields[st.name] if g.attr in present]
        uuids = any(g.type == "uuid" for g in fields)
        if stride is None:
            if order == [g.attr for g in fields] and not uuids:
                self.src(f"{flat} = iter({flat})")
                source = {g.attr: flat for g in fields}
            else:
                k = len(fields)
                source = {g.attr: f"{flat}[{i}::{k}]" for i, g in enumerate(fields)}
        else:
            assert index is not None  # given with the stride
            source = {g.attr: inner.get(g.attr) or f"{flat}[{index[g.attr]}::{stride}]" for g in fields}
        args: list[str] = []
        for g in self.class_fields[st.name]:
            if g.attr in present:
                value = source[g.attr]
                if g.type == "uuid" and not g.is_array:
                    value = f"_map(_uuid, {value})"
                args.append(value)
            elif g.is_array and g.default_value() is not None:
                args.append(f"_map(_list, _repeat((), {n}))")  # a list of its own for each element
            else:
                args.append(f"_repeat({self.default_expr(g)})")
        while args and (args[-1].startswith("_repeat(") or args[-1].startswith("_map(_list, _repeat(")):
            args.pop()
        return args

    def emit_struct_call(self, f: FieldSpec, var: str, checked: bool, path_expr: str, sink: str | None = None) -> bool:
        """Decode a struct into ``var``; or, when it is decoded in line and ``sink`` is given (an
        array's append), pass it straight to ``sink`` and return True."""
        st = f.struct
        assert st is not None  # called for struct fields only
        if checked:
            self.src(f"{var}, pos = dc_{st.name}(buf, pos, c, {path_expr})")
        elif self.inline_depth < _MAX_INLINE:
            # Nested structs are decoded in line: a call per element of a struct array costs
            # more than the element's own work.
            self.inline_depth += 1
            self.emit_decode_body(st, [g for g in st.fields if g.present(self.version)], False, var, sink)
            self.inline_depth -= 1
            return sink is not None
        else:
            self.src(f"{var}, pos = d_{st.name}(buf, pos)")
        return False

    # -- encoding ------------------------------------------------------------
    def emit_encoder(self, struct_spec: StructSpec, present: list[FieldSpec]) -> None:
        s = self.src
        s(f"def e_{struct_spec.name}(o, w):")
        s.indent()
        self.emit_encode_body(struct_spec, present, "o", "w")
        s("return None")
        s.dedent()
        s("")

    def emit_encode_body(self, struct_spec: StructSpec, present: list[FieldSpec], o: str, w: str) -> None:
        """Code that writes the struct held in variable ``o`` through ``w``; inlinable like the decoder."""
        s = self.src
        v = self.version
        name = struct_spec.name
        k = self.tmp("_")  # the suffix of this struct's own locals (tag section)
        present_attrs = {f.attr for f in present}
        for f in self.class_fields[name]:
            if f.attr in present_attrs or f.ignorable:
                continue
            var = f"{o}.{f.attr}"
            s(f"if {self.default_compare(f, var)}:")
            s(
                f"    raise _EncodeError('{self.spec.name}: field {f.name} of {name} does not exist in version {v}; "
                f"it cannot hold the non-default value %r' % ({var},))"
            )
        untagged = [f for f in present if not f.is_tagged(v)]
        tagged = sorted((f for f in present if f.is_tagged(v)), key=_tag_of)
        i = 0
        while i < len(untagged):
            f = untagged[i]
            if not f.is_array and f.type in FIXED_TYPES:
                run = [f]
                while (
                    i + len(run) < len(untagged)
                    and not untagged[i + len(run)].is_array
                    and untagged[i + len(run)].type in FIXED_TYPES
                ):
                    run.append(untagged[i + len(run)])
                for g in run:
                    s(self.describe(g))
                fmt = ">" + "".join(FIXED_TYPES[g.type][0] for g in run)
                pack = self.const(struct.Struct(fmt).pack, "_P")
                args = ", ".join(f"{o}.{g.attr}.bytes" if g.type == "uuid" else f"{o}.{g.attr}" for g in run)
                s(f"{w}({pack}({args}))")
                i += len(run)
                continue
            s(self.describe(f))
            self.emit_encode_value(f, f"{o}.{f.attr}", f.compact(v, self.flexible), w)
            i += 1
        t, u, sub = f"tagged{k}", f"unknown_tags{k}", f"tag_bytes{k}"
        if self.flexible and not tagged:
            s(f"{u} = {o}._unknown_tags")
            s(f"if {u}: _write_unknown_tags({u}, {w})")
            s(f"else: {w}(b'\\x00')")
        elif self.flexible:
            s(f"{t} = None")
            for f in tagged:
                var = self.tmp(f"{f.attr}_")
                s(self.describe(f))
                s(f"{var} = {o}.{f.attr}")
                s(f"if {self.default_compare(f, var)}:")
                s.indent()
                s(f"{sub} = []")
                self.in_tag = True  # a nullable struct's presence is written as Kafka writes it in a tagged field
                self.emit_encode_value(f, var, True, f"{sub}.append")
                self.in_tag = False
                s(f"if {t} is None: {t} = []")
                s(f"{t}.append(({f.tag}, b''.join({sub})))")
                s.dedent()
            s(f"{u} = {o}._unknown_tags")
            s(f"if {u}: {t} = sorted(({t} or []) + list({u}), key=_tagkey)")
            s(f"if {t} is None: {w}(b'\\x00')")
            s(f"else: _write_tags({t}, {w})")

    def emit_struct_write(self, f: FieldSpec, var: str, w: str) -> None:
        """Write the (non-null) struct in variable ``var``."""
        st = f.struct
        assert st is not None  # called for struct fields only
        if self.inline_depth < _MAX_INLINE:
            self.inline_depth += 1
            self.emit_encode_body(st, [g for g in st.fields if g.present(self.version)], var, w)
            self.inline_depth -= 1
        else:
            self.src(f"e_{st.name}({var}, {w})")

    def emit_len(self, n: str, compact: bool, width: int, w: str) -> None:
        s = self.src
        if compact:
            s(f"{n} += 1")
            s(f"{w}(_UV[{n}] if {n} < 16384 else _uvb({n}))")
        else:
            s(f"{w}({'_P16' if width == 2 else '_P32'}({n}))")

    def emit_null(self, f: FieldSpec, compact: bool, width: int, w: str, element: bool) -> None:
        s = self.src
        if f.is_nullable(self.version) and not element:
            if compact:
                s(f"{w}(b'\\x00')")
            else:
                s(f"{w}({bytes([255] * width)!r})")
        else:
            s(
                f"raise _EncodeError('{self.spec.name}: field {f.name} is null but not nullable in version {self.version}')"
            )

    def emit_encode_value(self, f: FieldSpec, expr: str, compact: bool, w: str, element=False) -> None:
        s = self.src
        t = f.type
        if f.is_array and not element:
            lst = self.tmp(f"{f.attr}_")
            s(f"{lst} = {expr}")
            s(f"if {lst} is None:")
            s.indent()
            self.emit_null(f, compact, 4, w, element)
            s.dedent()
            s("else:")
            s.indent()
            n = self.tmp(f"{f.attr}_count_")
            s(f"{n} = len({lst})")
            self.emit_len(n, compact, 4, w)
            if t in FIXED_TYPES and t != "uuid":
                ch = FIXED_TYPES[t][0]
                s(f"{w}({self.const(_pack_array(ch), '_PA')}({lst}))")
            else:
                item = self.tmp(f"{f.attr}_item_")
                s(f"for {item} in {lst}:")
                s.indent()
                self.emit_encode_value(f, item, compact, w, element=True)
                s.dedent()
            s.dedent()
            return
        if f.struct is not None:
            var = self.tmp(f"{f.attr}_")
            s(f"{var} = {expr}")
            tagged, self.in_tag = getattr(self, "in_tag", False), False
            if f.is_nullable(self.version) and not element:
                # Kafka's generated code: -1 (int8) for null, but in a tagged field an unsigned varint, 0 for null
                null = b"\x00" if tagged else b"\xff"
                s(f"if {var} is None: {w}({null!r})")
                s("else:")
                s.indent()
                s(f"{w}(b'\\x01')")
                self.emit_struct_write(f, var, w)
                s.dedent()
            else:
                s(
                    f"if {var} is None: raise _EncodeError('{self.spec.name}: field {f.name} is null but not nullable "
                    f"in version {self.version}')"
                )
                self.emit_struct_write(f, var, w)
            return
        if t in FIXED_TYPES:
            pack = self.const(struct.Struct(">" + FIXED_TYPES[t][0]).pack, "_P")
            s(f"{w}({pack}({expr}{'.bytes' if t == 'uuid' else ''}))")
            return
        var = self.tmp(f"{f.attr}_")
        s(f"{var} = {expr}")
        s(f"if {var} is None:")
        s.indent()
        self.emit_null(f, compact, 2 if t == "string" else 4, w, element)
        s.dedent()
        s("else:")
        s.indent()
        if t == "string":
            s(f"{var} = {var}.encode('utf-8')")
        n = self.tmp(f"{f.attr}_len_")
        s(f"{n} = len({var})")
        self.emit_len(n, compact, 2 if t == "string" else 4, w)
        s(f"{w}({var})")
        s.dedent()


def compile_codec(spec: MessageSpec, version: int, classes: dict[str, type], class_fields: dict) -> Codec:
    return _Compiler(spec, version, classes, class_fields).compile()
