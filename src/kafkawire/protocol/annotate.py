"""Field-by-field annotation of encoded messages, for tooling (``kafkawire decode``).

A small interpreter over the spec model: it walks the definition of a
(message, version) and reports, for every field it reads, the byte offset,
width, field path, wire type and value, the way one would annotate a hexdump
by hand. It shares nothing with the compiled codec except the spec, so tests
use it as an independent second reading of the same bytes. Speed is not a goal.

Like the rest of ``kafkawire.protocol`` it only knows bytes.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from . import apis
from .errors import error_for
from .primitives import DecodeError, read_uvarint
from .schema import FIXED_TYPES, FieldSpec, StructSpec, message_spec

_SIZE = struct.Struct(">i")


@dataclass
class Annotation:
    """One line of the annotated tree.

    ``width`` covers everything the line stands for (a string's length prefix and
    text; a struct's fields). ``value`` is the decoded value for scalars, the item
    count for arrays and None for structs. ``note`` explains a value (an error
    code's name, an API key's name).
    """

    offset: int
    width: int | None
    path: str
    wire_type: str
    value: object = None
    depth: int = 0
    note: str = ""

    def to_dict(self) -> dict:
        value = self.value
        if isinstance(value, (bytes, bytearray, memoryview)):
            value = bytes(value).hex()
        elif isinstance(value, uuid.UUID):
            value = str(value)
        out = {
            "offset": self.offset,
            "width": self.width,
            "path": self.path,
            "type": self.wire_type,
            "value": value,
            "depth": self.depth,
        }
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class Annotated:
    events: list[Annotation]
    value: dict  # field attr -> value, for the fields present at the version (plus "_unknown_tags")
    end: int


class AnnotationError(DecodeError):
    """A DecodeError that also carries the annotations read before the failure."""

    def __init__(self, error: DecodeError, events: list[Annotation]):
        super().__init__(error.problem, path=error.path, offset=error.offset, message=error.message)
        self.events = events


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class _Walker:
    def __init__(self, buf, pos: int, events: list[Annotation], message: str):
        self.buf = buf
        self.pos = pos
        self.events = events
        self.message = message

    # -- reading ------------------------------------------------------------------
    def fail(self, problem: str, path: str, offset: int):
        raise DecodeError(problem, path=path, offset=offset, message=self.message)

    def take(self, n: int, path: str, what: str) -> int:
        start = self.pos
        if n > len(self.buf) - start:
            self.fail(f"{what} needs {n} bytes, {len(self.buf) - start} left", path, start)
        self.pos = start + n
        return start

    def uvarint(self, path: str) -> int:
        try:
            value, self.pos = read_uvarint(self.buf, self.pos)
        except DecodeError as exc:
            self.fail(exc.problem, path, self.pos)
        return value

    def emit(self, offset, width, path, wire_type, value=None, depth=0, note="") -> Annotation:
        ann = Annotation(offset, width, path, wire_type, value, depth, note)
        self.events.append(ann)
        return ann

    # -- structure ----------------------------------------------------------------
    def struct(self, spec: StructSpec, version: int, flexible: bool, path: str, depth: int) -> dict:
        present = [f for f in spec.fields if f.present(version)]
        out: dict = {}
        for f in present:
            if not f.is_tagged(version):
                out[f.attr] = self.field(f, version, flexible, f.compact(version, flexible), _join(path, f.name), depth)
        if flexible:
            tagged = {f.tag: f for f in present if f.is_tagged(version)}
            for f in tagged.values():
                out[f.attr] = _plain_default(f)
            section = _join(path, "_tagged_fields")
            start = self.pos
            count = self.uvarint(section)
            if count > len(self.buf) - self.pos:
                self.fail(f"tagged field count {count} exceeds the remaining bytes", section, start)
            head = self.emit(start, None, section, "tagged_fields", count, depth)
            unknown: list[tuple[int, bytes]] = []
            for _ in range(count):
                tag_start = self.pos
                tag = self.uvarint(section)
                size = self.uvarint(section)
                end = self.pos + size
                if end > len(self.buf):
                    self.fail(f"tagged field {tag} of size {size} runs past the end of the buffer", section, tag_start)
                known = tagged.get(tag)
                if known is None:
                    raw = bytes(self.buf[self.pos : end])
                    self.emit(
                        tag_start,
                        end - tag_start,
                        _join(section, f"tag{tag}"),
                        "unknown_tagged_field",
                        raw,
                        depth + 1,
                        f"tag {tag}, {size} byte{'s' if size != 1 else ''}, not in the schema",
                    )
                    unknown.append((tag, raw))
                else:
                    sub = _join(path, known.name)
                    self.emit(
                        tag_start,
                        self.pos - tag_start,
                        _join(section, f"tag{tag}"),
                        "tag_header",
                        f"tag {tag}, size {size}",
                        depth + 1,
                    )
                    out[known.attr] = self.field(known, version, flexible, True, sub, depth + 1, tagged=True)
                    if self.pos != end:
                        self.fail(
                            f"tagged field {tag}: declared size {size} does not match its content", sub, tag_start
                        )
                self.pos = end
            head.width = self.pos - start
            if unknown:
                out["_unknown_tags"] = unknown
        return out

    def field(self, f: FieldSpec, version: int, flexible: bool, compact: bool, path: str, depth: int, tagged=False):
        nullable = f.is_nullable(version)
        if f.is_array:
            start = self.pos
            if compact:
                n = self.uvarint(path) - 1
            else:
                (n,) = _SIZE.unpack_from(self.buf, self.take(4, path, "array length"))
            wire = f"{'compact_' if compact else ''}{'nullable_' if nullable else ''}array"
            if n < 0:
                if n == -1 and nullable:
                    self.emit(start, self.pos - start, path, wire, None, depth, "null")
                    return None
                self.fail(
                    f"invalid array length {n}"
                    if nullable
                    else f"null or negative array length {n} for a non-nullable array",
                    path,
                    start,
                )
            if n > len(self.buf) - self.pos:
                self.fail(f"array count {n} exceeds the {len(self.buf) - self.pos} remaining bytes", path, start)
            head = self.emit(start, None, path, wire, n, depth, f"{n} × {f.type}")
            items = [self.element(f, version, flexible, compact, f"{path}[{i}]", depth + 1) for i in range(n)]
            head.width = self.pos - start
            return items
        if f.struct is not None and nullable:
            start = self.take(1, path, "struct presence marker")
            (marker,) = struct.unpack_from(">b", self.buf, start)
            if (marker == 0) if tagged else (marker < 0):  # in a tagged field Kafka writes 0 for null, else -1
                self.emit(start, 1, path, "nullable_struct", None, depth, "null")
                return None
            head = self.emit(start, None, path, "nullable_struct", None, depth, "present")
            value = self.struct(f.struct, version, flexible, path, depth + 1)
            head.width = self.pos - start
            return value
        return self.element(f, version, flexible, compact, path, depth, nullable)

    def element(self, f: FieldSpec, version, flexible, compact, path, depth, nullable=False):
        start = self.pos
        t = f.type
        if f.struct is not None:
            head = self.emit(start, None, path, "struct", None, depth)
            fields = self.struct(f.struct, version, flexible, path, depth + 1)
            head.width = self.pos - start
            return fields
        if t in FIXED_TYPES:
            fmt, width = FIXED_TYPES[t]
            (raw,) = struct.unpack_from(">" + fmt, self.buf, self.take(width, path, t))
            value = uuid.UUID(bytes=bytes(raw)) if t == "uuid" else raw
            self.emit(start, width, path, t, value, depth, _note(f, value))
            return str(value) if t == "uuid" else value
        # string, bytes, records
        if compact:
            n = self.uvarint(path) - 1
        else:
            width = 2 if t == "string" else 4
            (n,) = struct.unpack_from(">h" if width == 2 else ">i", self.buf, self.take(width, path, f"{t} length"))
        wire = f"{'compact_' if compact else ''}{'nullable_' if nullable else ''}{t}"
        if n < 0:
            if n == -1 and nullable:
                self.emit(start, self.pos - start, path, wire, None, depth, "null")
                return None
            self.fail(
                f"invalid {t} length {n}" if nullable else f"null or negative length {n} for a non-nullable {t}",
                path,
                start,
            )
        if n > len(self.buf) - self.pos:
            self.fail(
                f"{t} of length {n} runs past the end of the buffer ({len(self.buf) - self.pos} bytes left)",
                path,
                start,
            )
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        if t == "string":
            try:
                value = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                self.fail(f"invalid UTF-8 in string ({exc.reason})", path, start)
            self.emit(start, self.pos - start, path, wire, value, depth)
            return value
        self.emit(start, self.pos - start, path, wire, raw, depth, f"{n} byte{'s' if n != 1 else ''}")
        return raw


def _plain_default(f: FieldSpec):
    value = f.default_value()
    if f.struct is not None and not f.is_array and value is not None:
        return {g.attr: _plain_default(g) for g in f.struct.fields}
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def _note(f: FieldSpec, value) -> str:
    if f.name == "ErrorCode" and f.type == "int16":
        return error_for(value).name
    if f.name in ("RequestApiKey", "ApiKey") and f.type == "int16":
        try:
            return apis.api(value).name
        except KeyError:
            return "unknown API key"
    return ""


def _walk_message(name: str, buf, pos: int, version: int, events: list, path: str, depth: int):
    spec = message_spec(name)
    if version not in spec.valid:
        raise DecodeError(
            f"{name} has versions {spec.valid}; version {version} is not one of them", offset=pos, message=name
        )
    definition = spec.definition(version)
    walker = _Walker(buf, pos, events, f"{name} v{version}")
    head = walker.emit(pos, None, path or name, f"{name} v{version}", None, depth)
    value = walker.struct(definition.root, version, definition.is_flexible(version), path, depth + 1)
    head.width = walker.pos - pos
    return value, walker.pos


def _view(data) -> memoryview:
    view = data if isinstance(data, memoryview) else memoryview(data)
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def annotate(message: str, data, version: int, *, strict: bool = True) -> Annotated:
    """Annotate one message (no header, no frame)."""
    view = _view(data)
    events: list[Annotation] = []
    try:
        value, end = _walk_message(message, view, 0, version, events, "", 0)
        _check_end(view, end, strict, f"{message} v{version}")
    except DecodeError as exc:
        raise AnnotationError(exc, events) from None
    return Annotated(events, value, end)


def _check_end(view, end: int, strict: bool, label: str) -> None:
    if strict and end != len(view):
        raise DecodeError(f"{len(view) - end} trailing bytes after the message", offset=end, message=label)


def _frame(view, events: list) -> int:
    if len(view) < 4:
        raise DecodeError("frame shorter than its 4-byte size", offset=0, message="frame")
    (size,) = _SIZE.unpack_from(view, 0)
    events.append(Annotation(0, 4, "size", "int32", size, 0, "frame size: header + body"))
    if size != len(view) - 4:
        raise DecodeError(
            f"frame size {size} does not match the {len(view) - 4} bytes that follow it", offset=0, message="frame"
        )
    return 4


def annotate_request(data, *, framed: bool = True, strict: bool = True) -> Annotated:
    """Annotate a request: optional size, header (its version derived from key and version), body."""
    view = _view(data)
    events: list[Annotation] = []
    try:
        pos = _frame(view, events) if framed else 0
        if len(view) - pos < 4:
            raise DecodeError("request shorter than its API key and version", offset=pos, message="RequestHeader")
        key, version = struct.unpack_from(">hh", view, pos)
        try:
            info = apis.api(key)
        except KeyError:
            raise DecodeError(
                f"unknown API key {key}", path="RequestApiKey", offset=pos, message="RequestHeader"
            ) from None
        if not info.supports(version):
            raise DecodeError(
                f"{info.name} v{version} is outside {info.min_version}-{info.max_version}",
                path="RequestApiVersion",
                offset=pos + 2,
                message="RequestHeader",
            )
        header_version = apis.request_header_version(key, version)
        header, pos = _walk_message("RequestHeader", view, pos, header_version, events, "header", 0)
        body, end = _walk_message(info.request, view, pos, version, events, "body", 0)
        _check_end(view, end, strict, f"{info.request} v{version}")
    except DecodeError as exc:
        raise AnnotationError(exc, events) from None
    return Annotated(events, {"header": header, "body": body}, end)


def annotate_response(data, api_key: int, api_version: int, *, framed: bool = True, strict: bool = True) -> Annotated:
    """Annotate a response; its API key and version are not on the wire, so the caller names them."""
    view = _view(data)
    events: list[Annotation] = []
    try:
        try:
            info = apis.api(api_key)
        except KeyError:
            raise DecodeError(f"unknown API key {api_key}", offset=0, message="response") from None
        pos = _frame(view, events) if framed else 0
        header_version = apis.response_header_version(api_key, api_version)
        header, pos = _walk_message("ResponseHeader", view, pos, header_version, events, "header", 0)
        body, end = _walk_message(info.response, view, pos, api_version, events, "body", 0)
        _check_end(view, end, strict, f"{info.response} v{api_version}")
    except DecodeError as exc:
        raise AnnotationError(exc, events) from None
    return Annotated(events, {"header": header, "body": body}, end)
