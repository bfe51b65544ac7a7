"""Message classes built from the spec, one per message, with nested struct classes.

Classes are created on first use (``from kafkawire.protocol.messages import
FetchRequest``), and each version's codec is compiled on the first encode or
decode at that version. A class carries the union of the fields of every
version; fields a version lacks keep their schema default.

    >>> from kafkawire.protocol.messages import ApiVersionsRequest
    >>> ApiVersionsRequest(client_software_name="x").encode(version=3)
    b'\\x02x\\x01\\x00'
"""

from __future__ import annotations

import functools
import gc
import struct
import threading
import uuid
from typing import ClassVar

import msgspec

from .codegen import Codec, compile_codec
from .primitives import DecodeError, EncodeError, UnsupportedVersionError
from .schema import FieldSpec, MessageSpec, message_names, message_spec


class Struct(msgspec.Struct, gc=False):
    """Base of every generated struct class: equality, repr, to_dict.

    The classes are msgspec structs: a decoder builds each element of an array with one call that
    takes its field values in order and stores them in C (a Python ``__init__`` or ``object.__new__``
    and a store per slot cost over twice as many instructions). They are not tracked by the cycle
    collector (``gc=False``): a decoded message is a tree, and keeping millions of partitions out of
    the collector's generations saves both their tracking and the collections they would set off.
    A reference cycle made through these objects by hand is therefore never collected."""

    _fields: ClassVar[tuple[FieldSpec, ...]] = ()
    _attrs: ClassVar[tuple[str, ...]] = ()

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, a) == getattr(other, a) for a in self._attrs) and (self._unknown_tags or None) == (
            other._unknown_tags or None
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self):
        parts = [f"{a}={getattr(self, a)!r}" for a in self._attrs]
        if self._unknown_tags:
            parts.append(f"unknown_tags={self._unknown_tags!r}")
        return f"{type(self).__qualname__}({', '.join(parts)})"

    @property
    def unknown_tags(self) -> list[tuple[int, bytes]]:
        """Tagged fields this version of kafkawire does not know, as (tag, raw bytes)."""
        return list(self._unknown_tags or ())

    def to_dict(self) -> dict:
        return {a: _plain(getattr(self, a)) for a in self._attrs}

    def replace(self, **changes):
        values = [changes.pop(a, getattr(self, a)) for a in self._attrs]
        unknown_tags = changes.pop("_unknown_tags", self._unknown_tags)
        if changes:
            raise TypeError(f"unknown fields for {type(self).__qualname__}: {sorted(changes)}")
        return type(self)(*values, unknown_tags)


def _plain(value):
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, memoryview):
        return bytes(value)
    return value


class Message(Struct):
    """A top-level message (request, response, header or data)."""

    # class attributes, not fields (msgspec makes a field of every other annotation)
    spec: ClassVar[MessageSpec]
    name: ClassVar[str]
    kind: ClassVar[str]
    api_key: ClassVar[int | None]
    min_version: ClassVar[int]
    max_version: ClassVar[int]
    _codecs: ClassVar[dict[int, Codec]]
    _lock: ClassVar[threading.Lock]

    @classmethod
    def codec(cls, version: int) -> Codec:
        codec = cls._codecs.get(version)
        if codec is None:
            if version not in cls.spec.valid:
                raise UnsupportedVersionError(
                    f"{cls.spec.name} has versions {cls.spec.valid}; version {version} is not one of them"
                )
            with cls._lock:
                codec = cls._codecs.get(version)
                if codec is None:
                    codec = compile_codec(cls.spec, version, cls._classes, cls._class_fields)
                    cls._codecs[version] = codec
        return codec

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return cls.spec.is_flexible(version)

    def encode(self, version: int) -> bytes:
        codec = self._codecs.get(version) or self.codec(version)
        parts: list = []
        try:
            codec.encode(self, parts.append)
        except EncodeError:
            raise
        except Exception as exc:  # struct.error (range), AttributeError, TypeError ...
            raise EncodeError(f"{self.spec.name} v{version}: {type(exc).__name__}: {exc}") from exc
        return b"".join(parts)

    def encode_into(self, write, version: int) -> None:
        """Write the encoding as a sequence of buffers; records fields pass through uncopied."""
        codec = self.codec(version)
        try:
            codec.encode(self, write)
        except EncodeError:
            raise
        except Exception as exc:  # struct.error (range), AttributeError, TypeError ...
            raise EncodeError(f"{self.spec.name} v{version}: {type(exc).__name__}: {exc}") from exc

    @classmethod
    def decode(cls, buf, version: int, *, strict: bool = True):
        """Decode a whole buffer. With ``strict``, bytes left after the message are an error."""
        view = buf if type(buf) is bytes else _as_view(buf)
        codec = cls._codecs.get(version) or cls.codec(version)
        paused = codec.pause_gc and len(view) >= _GC_PAUSE_BYTES and _gc_isenabled()
        if paused:
            _gc_disable()
        try:
            obj, pos = codec.decode(view, 0)
        except Exception:
            error = _diagnose(cls, codec, view, 0, version)
            raise error from error.__cause__
        finally:
            if paused:
                _gc_enable()
        if strict and pos != len(view):
            raise DecodeError(
                f"{len(view) - pos} trailing bytes after the message", offset=pos, message=f"{cls.spec.name} v{version}"
            )
        return obj

    @classmethod
    def decode_from(cls, buf, pos: int, version: int):
        """Decode at ``pos``; returns (message, position after it)."""
        view = buf if type(buf) is bytes else _as_view(buf)
        codec = cls._codecs.get(version) or cls.codec(version)
        paused = codec.pause_gc and len(view) - pos >= _GC_PAUSE_BYTES and _gc_isenabled()
        if paused:
            _gc_disable()
        try:
            return codec.decode(view, pos)
        except Exception:
            pass
        finally:
            if paused:
                _gc_enable()
        error = _diagnose(cls, codec, view, pos, version)
        raise error from error.__cause__


# A decoded message is a tree: the decoder never makes a reference cycle, so the cycle collector
# can find nothing to free among the objects it builds. Yet building thousands of them (a metadata
# response with a thousand partitions) sets off collections that promote them generation by
# generation, and full collections that walk the whole heap, which measured as much time again
# as the decoding itself. So a large input is decoded with the collector paused; it is resumed
# (only if it was running before) as soon as the message is built, or decoding fails.
_GC_PAUSE_BYTES = 16 * 1024
_gc_isenabled, _gc_disable, _gc_enable = gc.isenabled, gc.disable, gc.enable


def _as_view(buf):
    """Something the codecs index by byte: bytes and bytearray as they are (faster to slice into
    strings than a memoryview), any other buffer as a flat memoryview of bytes."""
    if type(buf) is bytes or type(buf) is bytearray:
        return buf
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def _diagnose(cls, codec: Codec, view: memoryview, pos: int, version: int) -> DecodeError:
    """Re-run the checked decoder to name the field path and offset of the failure. The checked decoder's
    own exception is the error's cause, so a traceback shows the generated line that refused the input."""
    ctx = ["", "", pos]
    label = f"{cls.spec.name} v{version}"
    try:
        codec.decode_checked(view, pos, ctx, "")
    except Exception as exc:
        if isinstance(exc, DecodeError):
            problem = exc.problem  # ctx[2] is where the failing field starts: the offset a hexdump reader wants
        elif isinstance(exc, UnicodeDecodeError):
            problem = f"invalid UTF-8 in string ({exc.reason})"
        elif isinstance(exc, (IndexError, ValueError, struct.error)):
            problem = f"truncated: {exc}"
        else:
            problem = f"{type(exc).__name__}: {exc}"
        error = DecodeError(problem, path=_path(ctx), offset=ctx[2], message=label)
        error.__cause__ = exc
        return error
    return DecodeError("decoder failed on input that decodes when checked", offset=pos, message=label)


def _path(ctx) -> str:
    prefix, field, _ = ctx
    return f"{prefix.lstrip('.')}.{field}".lstrip(".") if prefix else field


# -- class construction ------------------------------------------------------


def _class_fields(spec: MessageSpec) -> dict[str, list[FieldSpec]]:
    """Union of fields per struct name across definitions; newest definition wins on conflicts."""
    out: dict[str, dict[str, FieldSpec]] = {}

    def visit(name: str, fields: list[FieldSpec]):
        bucket = out.setdefault(name, {})
        for f in fields:
            bucket.setdefault(f.attr, f)
            if f.struct is not None:
                visit(f.struct.name, f.struct.fields)

    for definition in reversed(spec.definitions):
        visit(spec.name, definition.root.fields)
    # keep schema order of the newest definition, older-only fields appended
    return {name: list(fields.values()) for name, fields in out.items()}


def _struct_fields(fields: list[FieldSpec], classes: dict[str, type]) -> list[tuple]:
    """msgspec field definitions, in the order a decoder passes the values: each field with its schema
    default (a fresh list or struct per instance where the default is one), then the unknown tags."""
    out: list[tuple] = []
    for f in fields:
        value = f.default_value()
        if f.is_array:
            default = None if value is None else msgspec.field(default_factory=list)
        elif f.is_struct:
            default = None if value is None else msgspec.field(default_factory=classes[f.struct.name])
        else:
            default = value
        out.append((f.attr, object, default))
    out.append(("_unknown_tags", object, None))
    return out


def _build(spec: MessageSpec) -> type[Message]:
    class_fields = _class_fields(spec)
    classes: dict[str, type] = {}

    # nested first so that defaults can construct them; order by dependency
    def build(name: str) -> type:
        if name in classes:
            return classes[name]
        fields = class_fields[name]
        for f in fields:
            if f.struct is not None:
                build(f.struct.name)
        base = Message if name == spec.name else Struct
        attrs = tuple(f.attr for f in fields)
        cls = msgspec.defstruct(
            name,
            _struct_fields(fields, classes),
            bases=(base,),
            module=__name__,
            namespace={"_fields": tuple(fields), "_attrs": attrs},
            gc=False,
        )
        classes[name] = cls
        return cls

    root = build(spec.name)
    for name, cls in classes.items():
        if cls is not root:
            cls.__qualname__ = f"{spec.name}.{name}"
            setattr(root, name, cls)
    root.spec = spec
    # Convenience metadata; a field of the same name (DefaultPrincipalData.name) wins, and
    # kafkawire's own code reads ``spec`` so that it works either way.
    for meta, value in (
        ("name", spec.name),
        ("kind", spec.kind),
        ("api_key", spec.api_key),
        ("min_version", spec.valid.lo),
        ("max_version", spec.valid.hi),
    ):
        if meta not in root._attrs:
            setattr(root, meta, value)
    root._codecs = {}
    root._lock = threading.Lock()
    root._classes = classes
    root._class_fields = class_fields
    return root


@functools.cache
def message_class(name: str) -> type[Message]:
    return _build(message_spec(name))


def all_message_names(include_tests: bool = False, include_records: bool = False) -> tuple[str, ...]:
    return message_names(include_tests, include_records)


def __getattr__(name: str):
    if name[:1].isupper():
        try:
            return message_class(name)
        except KeyError:
            pass
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(message_names(include_records=True)))
