"""Compile one (message, version) of the spec into Python decode/encode functions.

Kafka's own generator writes Java source per message; kafkawire does the same
at run time: for each version it emits straight-line Python with runs of
fixed-width fields merged into one ``struct`` call, then ``exec``s it. The
generated code is the only serializer; there is no hand-written one.

Two decoders are emitted from the same walk: a fast one, and a *checked* one
that records the field path and byte offset as it goes. The fast one runs
first; only when it fails does the checked one run again to say precisely
where and why, so error reporting costs nothing on good input.
"""
from __future__ import annotations

import operator
import struct
import uuid
from dataclasses import dataclass
from typing import Callable

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


def _write_tags(tags, w):
    w(UVARINT_TABLE[len(tags)] if len(tags) < 16384 else uvarint_bytes(len(tags)))
    for tag, data in tags:
        w(UVARINT_TABLE[tag] if tag < 16384 else uvarint_bytes(tag))
        n = len(data)
        w(UVARINT_TABLE[n] if n < 16384 else uvarint_bytes(n))
        w(data)


def _uuid(raw) -> uuid.UUID:
    return uuid.UUID(bytes=bytes(raw))


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
            "_new": object.__new__, "_uv": read_uvarint, "_UV": UVARINT_TABLE, "_uvb": uvarint_bytes,
            "_DecodeError": DecodeError, "_EncodeError": EncodeError, "_uuid": _uuid, "_str": str,
            "_unpack_from": struct.unpack_from, "_pack": struct.pack, "_bytes": bytes,
            "_I8": struct.Struct(">b").unpack_from, "_I16": struct.Struct(">h").unpack_from,
            "_I32": struct.Struct(">i").unpack_from, "_P16": struct.Struct(">h").pack,
            "_P32": struct.Struct(">i").pack, "_write_tags": _write_tags, "_tagkey": operator.itemgetter(0),
        }
        self.counter = 0
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
        self.counter += 1
        return f"{prefix}{self.counter}"

    def default_expr(self, f: FieldSpec) -> str:
        value = f.default_value()
        if f.is_array:
            return "None" if value is None else "[]"
        if f.is_struct:
            return "None" if value is None else f"C_{f.struct.name}()"
        return self.const(value, "_D")

    def default_compare(self, f: FieldSpec, var: str) -> str:
        """An expression that is true when ``var`` differs from the field's default."""
        value = f.default_value()
        if f.is_array:
            return f"{var} is not None" if value is None else f"{var}"
        if f.is_struct:
            if value is None:
                return f"{var} is not None"
            return f"{var} != {self.const(self.classes[f.struct.name](), '_DS')}"
        if value is None:
            return f"{var} is not None"
        return f"{var} != {self.const(value, '_D')}"

    # -- entry ---------------------------------------------------------------
    def compile(self) -> Codec:
        root = self.definition.root
        self.emit_struct(root)
        source = "\n".join(self.src.lines) + "\n"
        for name, cls in self.classes.items():
            self.ns[f"C_{name}"] = cls
        code = compile(source, f"<kafkawire codec {self.spec.name} v{self.version}>", "exec")
        exec(code, self.ns)
        return Codec(self.spec.name, self.version, self.flexible, self.ns[f"d_{root.name}"],
                     self.ns[f"dc_{root.name}"], self.ns[f"e_{root.name}"], source)

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
        v = self.version
        name = struct_spec.name
        if checked:
            s(f"def dc_{name}(buf, pos, c, p):")
        else:
            s(f"def d_{name}(buf, pos):")
        s.indent()
        s("L = len(buf)")
        values: dict[str, str] = {}
        untagged = [f for f in present if not f.is_tagged(v)]
        tagged = sorted((f for f in present if f.is_tagged(v)), key=lambda f: f.tag)
        i = 0
        while i < len(untagged):
            f = untagged[i]
            if not f.is_array and f.type in FIXED_TYPES:
                run = [f]
                while (i + len(run) < len(untagged) and not untagged[i + len(run)].is_array
                       and untagged[i + len(run)].type in FIXED_TYPES):
                    run.append(untagged[i + len(run)])
                self.emit_fixed_run(run, values, checked)
                i += len(run)
                continue
            var = self.tmp()
            values[f.attr] = var
            if checked:
                s(f"c[0] = p; c[1] = {f.name!r}; c[2] = pos")
            self.emit_decode_value(f, var, compact=f.compact(v, self.flexible), checked=checked)
            i += 1
        unk = "None"
        if self.flexible:
            unk = "unk"
            for f in tagged:
                var = self.tmp()
                values[f.attr] = var
                s(f"{var} = {self.default_expr(f)}")
            s("unk = None")
            if checked:
                s("c[0] = p; c[1] = '<tagged fields>'; c[2] = pos")
            self.emit_uvarint("ntags")
            s("if ntags > L - pos: raise _DecodeError('tagged field count %d exceeds the remaining bytes' % ntags, offset=pos)")
            s("for _ in range(ntags):")
            s.indent()
            self.emit_uvarint("tag")
            self.emit_uvarint("size")
            s("end = pos + size")
            s("if end > L: raise _DecodeError('tagged field %d of size %d runs past the end of the buffer' % (tag, size), offset=pos)")
            first = True
            for f in tagged:
                s(f"{'if' if first else 'elif'} tag == {f.tag}:")
                first = False
                s.indent()
                if checked:
                    s(f"c[0] = p; c[1] = {f.name!r}; c[2] = pos")
                self.emit_decode_value(f, values[f.attr], compact=True, checked=checked)
                s("if pos != end: raise _DecodeError('tagged field %d: declared size %d does not match its content' % (tag, size), offset=pos)")
                s.dedent()
            if tagged:
                s("else:")
                s.indent()
            s("if unk is None: unk = []")
            s("unk.append((tag, _bytes(buf[pos:end])))")
            if tagged:
                s.dedent()
            s("pos = end")
            s.dedent()
        s(f"o = _new(C_{name})")
        for f in self.class_fields[name]:
            s(f"o.{f.attr} = {values.get(f.attr) or self.default_expr(f)}")
        s(f"o._unknown_tags = {unk}")
        s("return o, pos")
        s.dedent()
        s("")

    def emit_uvarint(self, var: str) -> None:
        s = self.src
        s(f"{var} = buf[pos]")
        s(f"if {var} < 128: pos += 1")
        s(f"else: {var}, pos = _uv(buf, pos)")

    def emit_fixed_run(self, run: list[FieldSpec], values: dict, checked: bool) -> None:
        s = self.src
        fmt = ">" + "".join(FIXED_TYPES[f.type][0] for f in run)
        st = struct.Struct(fmt)
        unpack = self.const(st.unpack_from, "_U")
        names = []
        for f in run:
            var = self.tmp()
            values[f.attr] = var
            names.append(var)
        if checked:
            s(f"c[0] = p; c[1] = {run[0].name!r}; c[2] = pos")
            s(f"if pos + {st.size} > L: raise _DecodeError('needs {st.size} bytes for {'/'.join(f.name for f in run)}, %d left' % (L - pos), offset=pos)")
        s(f"{', '.join(names)}{',' if len(names) == 1 else ''} = {unpack}(buf, pos)")
        s(f"pos += {st.size}")
        for f, var in zip(run, names):
            if f.type == "uuid":
                s(f"{var} = _uuid({var})")

    def emit_length(self, var: str, compact: bool, width: int, checked: bool = True) -> None:
        s = self.src
        if checked and not compact:
            s(f"if pos + {width} > L: raise _DecodeError('needs {width} bytes for a length, %d left' % (L - pos), offset=pos)")
        if compact:
            self.emit_uvarint(var)
            s(f"{var} -= 1")
        else:
            s(f"{var} = {'_I16' if width == 2 else '_I32'}(buf, pos)[0]")
            s(f"pos += {width}")

    def emit_decode_value(self, f: FieldSpec, var: str, compact: bool, checked: bool, element=False) -> None:
        """Decode one value of field ``f`` (an array, or an element of it when ``element``) into ``var``."""
        s = self.src
        v = self.version
        nullable = f.is_nullable(v) and not element
        if f.is_array and not element:
            n = self.tmp("n")
            self.emit_length(n, compact, 4, checked)
            s(f"if {n} < 0:")
            s.indent()
            if nullable:
                s(f"if {n} != -1: raise _DecodeError('invalid array length %d' % {n}, offset=pos)")
                s(f"{var} = None")
            else:
                s(f"raise _DecodeError('null or negative array length %d for a non-nullable array' % {n}, offset=pos)")
            s.dedent()
            s("else:")
            s.indent()
            s(f"if {n} > L - pos: raise _DecodeError('array count %d exceeds the %d remaining bytes' % ({n}, L - pos), offset=pos)")
            if f.type in FIXED_TYPES and f.type != "uuid":
                ch, width = FIXED_TYPES[f.type]
                s(f"e = pos + {n} * {width}")
                s(f"if e > L: raise _DecodeError('array of %d {f.type} runs past the end of the buffer' % {n}, offset=pos)")
                s(f"{var} = list(_unpack_from('>%d{ch}' % {n}, buf, pos))")
                s("pos = e")
            else:
                idx = self.tmp("i")
                item = self.tmp("x")
                s(f"{var} = []")
                s(f"for {idx} in range({n}):")
                s.indent()
                if checked and f.struct is None:
                    s(f"c[0] = p; c[1] = '%s[%d]' % ({f.name!r}, {idx}); c[2] = pos")
                if f.struct is None:
                    self.emit_decode_value(f, item, compact, checked, element=True)
                else:
                    self.emit_struct_call(f, item, checked, f"p + '.%s[%d]' % ({f.name!r}, {idx})")
                s(f"{var}.append({item})")
                s.dedent()
            s.dedent()
            return
        t = f.type
        if f.struct is not None:
            if nullable:
                s(f"if _I8(buf, pos)[0] < 0:")
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
                s(f"{var} = _uuid({var})")
            return
        # string, bytes, records
        n = self.tmp("n")
        self.emit_length(n, compact, 2 if t == "string" else 4, checked)
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
        s(f"e = pos + {n}")
        s(f"if e > L: raise _DecodeError('{t} of length %d runs past the end of the buffer (%d bytes left)' % ({n}, L - pos), offset=pos)")
        if t == "string":
            s(f"{var} = _str(buf[pos:e], 'utf-8')")
        elif t == "records":
            s(f"{var} = buf[pos:e]")  # zero copy: a view into the input
        else:
            s(f"{var} = _bytes(buf[pos:e])")
        s("pos = e")
        s.dedent()

    def emit_struct_call(self, f: FieldSpec, var: str, checked: bool, path_expr: str) -> None:
        if checked:
            self.src(f"{var}, pos = dc_{f.struct.name}(buf, pos, c, {path_expr})")
        else:
            self.src(f"{var}, pos = d_{f.struct.name}(buf, pos)")

    # -- encoding ------------------------------------------------------------
    def emit_encoder(self, struct_spec: StructSpec, present: list[FieldSpec]) -> None:
        s = self.src
        v = self.version
        name = struct_spec.name
        s(f"def e_{name}(o, w):")
        s.indent()
        present_attrs = {f.attr for f in present}
        for f in self.class_fields[name]:
            if f.attr in present_attrs or f.ignorable:
                continue
            var = f"o.{f.attr}"
            s(f"if {self.default_compare(f, var)}:")
            s(f"    raise _EncodeError('{self.spec.name}: field {f.name} of {name} does not exist in version {v}; "
              f"it cannot hold the non-default value %r' % ({var},))")
        untagged = [f for f in present if not f.is_tagged(v)]
        tagged = sorted((f for f in present if f.is_tagged(v)), key=lambda f: f.tag)
        i = 0
        while i < len(untagged):
            f = untagged[i]
            if not f.is_array and f.type in FIXED_TYPES:
                run = [f]
                while (i + len(run) < len(untagged) and not untagged[i + len(run)].is_array
                       and untagged[i + len(run)].type in FIXED_TYPES):
                    run.append(untagged[i + len(run)])
                fmt = ">" + "".join(FIXED_TYPES[g.type][0] for g in run)
                pack = self.const(struct.Struct(fmt).pack, "_P")
                args = ", ".join(f"o.{g.attr}.bytes" if g.type == "uuid" else f"o.{g.attr}" for g in run)
                s(f"w({pack}({args}))")
                i += len(run)
                continue
            self.emit_encode_value(f, f"o.{f.attr}", f.compact(v, self.flexible), "w")
            i += 1
        if self.flexible:
            s("t = None")
            for f in tagged:
                var = self.tmp()
                s(f"{var} = o.{f.attr}")
                s(f"if {self.default_compare(f, var)}:")
                s.indent()
                s("sub = []")
                self.emit_encode_value(f, var, True, "sub.append")
                s("if t is None: t = []")
                s(f"t.append(({f.tag}, b''.join(sub)))")
                s.dedent()
            s("u = o._unknown_tags")
            s("if u: t = sorted((t or []) + list(u), key=_tagkey)")
            s("if t is None: w(b'\\x00')")
            s("else: _write_tags(t, w)")
        s("return None")
        s.dedent()
        s("")

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
            s(f"raise _EncodeError('{self.spec.name}: field {f.name} is null but not nullable in version {self.version}')")

    def emit_encode_value(self, f: FieldSpec, expr: str, compact: bool, w: str, element=False) -> None:
        s = self.src
        t = f.type
        if f.is_array and not element:
            lst = self.tmp("l")
            s(f"{lst} = {expr}")
            s(f"if {lst} is None:")
            s.indent()
            self.emit_null(f, compact, 4, w, element)
            s.dedent()
            s("else:")
            s.indent()
            n = self.tmp("n")
            s(f"{n} = len({lst})")
            self.emit_len(n, compact, 4, w)
            if t in FIXED_TYPES and t != "uuid":
                ch = FIXED_TYPES[t][0]
                s(f"{w}(_pack('>%d{ch}' % len({lst}), *{lst}))")
            else:
                item = self.tmp("x")
                s(f"for {item} in {lst}:")
                s.indent()
                self.emit_encode_value(f, item, compact, w, element=True)
                s.dedent()
            s.dedent()
            return
        if f.struct is not None:
            if f.is_nullable(self.version) and not element:
                var = self.tmp()
                s(f"{var} = {expr}")
                s(f"if {var} is None: {w}(b'\\xff')")
                s("else:")
                s(f"    {w}(b'\\x01')")
                s(f"    e_{f.struct.name}({var}, {w})")
            elif element:
                s(f"e_{f.struct.name}({expr}, {w})")
            else:
                var = self.tmp()
                s(f"{var} = {expr}")
                s(f"if {var} is None: raise _EncodeError('{self.spec.name}: field {f.name} is null but not nullable "
                  f"in version {self.version}')")
                s(f"e_{f.struct.name}({var}, {w})")
            return
        if t in FIXED_TYPES:
            pack = self.const(struct.Struct(">" + FIXED_TYPES[t][0]).pack, "_P")
            s(f"{w}({pack}({expr}{'.bytes' if t == 'uuid' else ''}))")
            return
        var = self.tmp()
        s(f"{var} = {expr}")
        s(f"if {var} is None:")
        s.indent()
        self.emit_null(f, compact, 2 if t == "string" else 4, w, element)
        s.dedent()
        s("else:")
        s.indent()
        if t == "string":
            s(f"{var} = {var}.encode('utf-8')")
        n = self.tmp("n")
        s(f"{n} = len({var})")
        self.emit_len(n, compact, 2 if t == "string" else 4, w)
        s(f"{w}({var})")
        s.dedent()


def compile_codec(spec: MessageSpec, version: int, classes: dict[str, type], class_fields: dict) -> Codec:
    return _Compiler(spec, version, classes, class_fields).compile()
