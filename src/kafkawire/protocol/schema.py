"""The generated spec as a typed model: messages, definitions, structs, fields.

``spec/messages.json`` is written by ``tools/gen_spec.py``; this module only
reads it. Everything the codec compiler needs (types, version ranges, defaults,
tags) is resolved here once, so the compiler never looks at raw JSON.
"""

from __future__ import annotations

import base64
import functools
import json
import pkgutil
import re
import uuid

import msgspec

FIXED_TYPES = {
    # schema type -> (struct format char, width)
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "uuid": ("16s", 16),
}
PRIMITIVE_TYPES = set(FIXED_TYPES) | {"string", "bytes", "records"}
ZERO_UUID = uuid.UUID(int=0)


class Versions(msgspec.Struct, frozen=True):
    """An inclusive version range; ``hi`` None means open-ended ("N+")."""

    lo: int
    hi: int | None

    def __contains__(self, version: int) -> bool:
        return version >= self.lo and (self.hi is None or version <= self.hi)

    @classmethod
    def of(cls, raw) -> Versions | None:
        if raw is None or raw == "none":
            return None
        return cls(raw[0], raw[1])

    @classmethod
    def required(cls, raw) -> Versions:
        """A range the spec always gives (a message's valid versions, a definition's versions)."""
        versions = cls.of(raw)
        if versions is None:
            raise ValueError(f"a version range is required here, the spec has {raw!r}")
        return versions

    def __str__(self) -> str:
        if self.hi is None:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


def _contains(versions: Versions | None, version: int) -> bool:
    return versions is not None and version in versions


_CAMEL_1 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_2 = re.compile(r"([a-z0-9])([A-Z])")


def snake_case(name: str) -> str:
    """'ClientSoftwareName' -> 'client_software_name', 'KRaftVersion' -> 'k_raft_version'."""
    return _CAMEL_2.sub(r"\1_\2", _CAMEL_1.sub(r"\1_\2", name)).lower()


class FieldSpec(msgspec.Struct):
    name: str
    attr: str
    type: str  # element type for arrays
    is_array: bool
    versions: Versions | None
    nullable: Versions | None
    tagged: Versions | None
    tag: int | None
    default_text: str | None
    ignorable: bool
    map_key: bool
    zero_copy: bool
    entity_type: str | None
    flexible_override: Versions | None | str  # "none": never compact (ClientId)
    struct: StructSpec | None = None  # resolved for struct and struct-array types

    @property
    def is_struct(self) -> bool:
        return self.struct is not None

    def present(self, version: int) -> bool:
        return _contains(self.versions, version)

    def is_tagged(self, version: int) -> bool:
        return _contains(self.tagged, version)

    def is_nullable(self, version: int) -> bool:
        return _contains(self.nullable, version)

    def compact(self, version: int, flexible: bool) -> bool:
        if self.flexible_override == "none":
            return False
        if isinstance(self.flexible_override, Versions):
            return version in self.flexible_override
        return flexible

    def default_value(self):
        """The schema default as a Python value. Mutable defaults are built fresh by the caller."""
        text = self.default_text
        if self.is_array:
            return None if text == "null" else []
        if self.is_struct:
            return None if text == "null" else self.struct
        t = self.type
        if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
            return int(text, 0) if text not in (None, "") else 0
        if t == "bool":
            return (text or "false").strip().lower() == "true"
        if t == "float64":
            return float(text) if text not in (None, "") else 0.0
        if t == "uuid":
            if not text:
                return ZERO_UUID
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            return uuid.UUID(bytes=raw)
        if t == "string":
            return None if text == "null" else (text or "")
        if t in ("bytes", "records"):
            return None if text == "null" else b""
        raise ValueError(f"no default for type {t}")


class StructSpec(msgspec.Struct):
    name: str
    fields: list[FieldSpec]
    versions: Versions | None = None


class Definition(msgspec.Struct):
    """One schema of a message, valid for a contiguous version range."""

    versions: Versions
    flexible: Versions | None
    root: StructSpec
    structs: dict[str, StructSpec] = msgspec.field(default_factory=dict)
    source: str | None = None  # the jar and file it came from ("kafka-clients-4.4.0.jar!common/message/X.json")

    def is_flexible(self, version: int) -> bool:
        return _contains(self.flexible, version)


class MessageSpec(msgspec.Struct):
    name: str
    kind: str  # request, response, header, data; records: metadata, coordinator-key, coordinator-value
    valid: Versions
    definitions: list[Definition]
    api_key: int | None = None
    listeners: tuple[str, ...] = ()
    latest_version_unstable: bool = False
    former_name: str | None = None
    # For the record schemas (KRaft metadata, coordinator keys and values): the record type Kafka
    # writes in front of the data (its schema's "apiKey", which is not an API key)
    record_type: int | None = None

    def definition(self, version: int) -> Definition:
        for d in self.definitions:
            if version in d.versions:
                return d
        raise KeyError(version)

    def is_flexible(self, version: int) -> bool:
        return self.definition(version).is_flexible(version)

    @property
    def flexible_floor(self) -> int | None:
        floors = [d.flexible.lo for d in self.definitions if d.flexible is not None]
        # the lowest flexible version that is actually valid
        valid = [
            max(f, d.versions.lo)
            for f, d in zip(floors, self.definitions)
            if d.flexible is not None and (d.versions.hi is None or max(f, d.versions.lo) <= d.versions.hi)
        ]
        return min(valid) if valid else None

    def has_records(self) -> bool:
        def walk(struct: StructSpec) -> bool:
            return any(f.type == "records" or (f.struct is not None and walk(f.struct)) for f in struct.fields)

        return any(walk(d.root) for d in self.definitions)


def _parse_field(raw: dict, structs: dict[str, StructSpec], pending: list) -> FieldSpec:
    t = raw["type"]
    is_array = t.startswith("[]")
    elem = t[2:] if is_array else t
    versions = Versions.of(raw.get("versions"))
    tagged = Versions.of(raw.get("tagged"))
    if versions is None and tagged is not None:
        versions = tagged  # a tagged-only field exists exactly where it is tagged
    spec = FieldSpec(
        name=raw["name"],
        attr=snake_case(raw["name"]),
        type=elem,
        is_array=is_array,
        versions=versions,
        nullable=Versions.of(raw.get("nullable")),
        tagged=tagged,
        tag=raw.get("tag"),
        default_text=raw.get("default"),
        ignorable=bool(raw.get("ignorable")),
        map_key=bool(raw.get("map_key")),
        zero_copy=bool(raw.get("zero_copy")),
        entity_type=raw.get("entity_type"),
        flexible_override=("none" if raw.get("flexible") == "none" else Versions.of(raw.get("flexible"))),
    )
    if elem not in PRIMITIVE_TYPES:
        if "fields" in raw:
            struct = StructSpec(elem, [_parse_field(f, structs, pending) for f in raw["fields"]], versions)
            structs[elem] = struct
            spec.struct = struct
        else:
            pending.append(spec)  # a common struct, resolved once all are known
    return spec


def _parse_definition(name: str, raw: dict) -> Definition:
    structs: dict[str, StructSpec] = {}
    pending: list[FieldSpec] = []
    for cs in raw.get("common_structs", []):
        structs[cs["name"]] = StructSpec(
            cs["name"], [_parse_field(f, structs, pending) for f in cs["fields"]], Versions.of(cs.get("versions"))
        )
    root = StructSpec(name, [_parse_field(f, structs, pending) for f in raw["fields"]])
    for f in pending:
        f.struct = structs[f.type]
    return Definition(
        Versions.required(raw["versions"]), Versions.of(raw.get("flexible")), root, structs, raw.get("source")
    )


def _parse_message(raw: dict) -> MessageSpec:
    return MessageSpec(
        name=raw["name"],
        kind=raw["type"],
        valid=Versions.required(raw["valid"]),
        definitions=[_parse_definition(raw["name"], d) for d in raw["definitions"]],
        api_key=raw.get("api_key"),
        listeners=tuple(raw.get("listeners", ())),
        latest_version_unstable=bool(raw.get("latest_version_unstable")),
        former_name=raw.get("former_name"),
        record_type=raw.get("record_type"),
    )


@functools.cache
def _raw_spec() -> dict:
    # pkgutil, not importlib.resources: the same data from a zip (Spark's --py-files) without importing
    # importlib.resources, tempfile and zipfile at every broker and client start
    return _package_json("spec/messages.json")


def _package_json(name: str):
    data = pkgutil.get_data("kafkawire.protocol", name)
    if data is None:  # a loader that cannot read package data: kafkawire serves nothing without its spec
        raise RuntimeError(f"kafkawire.protocol: {name} cannot be read from the package")
    return json.loads(data)


@functools.cache
def message_names(include_tests: bool = False, include_records: bool = False) -> tuple[str, ...]:
    """The RPC messages, headers and data payloads of kafka-clients; with ``include_records`` also the
    record schemas of Kafka's metadata log and internal topics, with ``include_tests`` Kafka's generator
    test schemas."""
    raw = _raw_spec()
    names = list(raw["messages"])
    if include_records:
        names += list(raw["records"])
    if include_tests:
        names += list(raw["test_messages"])
    return tuple(names)


def record_names() -> tuple[str, ...]:
    """The record schemas only (KRaft metadata records, group/transaction/share coordinator records,
    raft quorum state, remote log metadata and producer snapshots)."""
    return tuple(_raw_spec()["records"])


def spec_source() -> dict:
    """The Kafka releases the spec was generated from: {"current": ..., "legacy": ..., "test_schemas": ...}."""
    return dict(_raw_spec()["kafka"])


@functools.cache
def message_spec(name: str) -> MessageSpec:
    raw = _raw_spec()
    for section in ("messages", "records", "test_messages"):
        if name in raw[section]:
            return _parse_message(raw[section][name])
    raise KeyError(f"no message named {name!r} in the spec")


class MessageSummary(msgspec.Struct, frozen=True):
    """What the API registry needs of a message, read without building its fields' specs: a start of the
    broker registers every handler (so reads every request and response) but builds only the messages it
    answers with, and parsing all ~200 schemas took ~18 ms of a ~230 ms start."""

    name: str
    kind: str
    api_key: int | None
    valid: Versions
    flexible_floor: int | None  # as MessageSpec.flexible_floor
    listeners: tuple[str, ...]
    latest_version_unstable: bool
    former_name: str | None
    has_records: bool  # as MessageSpec.has_records()


def _raw_has_records(definition: dict) -> bool:
    """A records field anywhere in one definition, its common structs reached through the fields naming them."""
    named: dict[str, list] = {cs["name"]: cs["fields"] for cs in definition.get("common_structs", ())}

    def collect(fields):  # nested structs are named by their type too, and may be referred to by that name
        for f in fields:
            if "fields" in f:
                named.setdefault(f["type"].removeprefix("[]"), f["fields"])
                collect(f["fields"])

    for cs in definition.get("common_structs", ()):
        collect(cs["fields"])
    collect(definition["fields"])

    def walk(fields, seen) -> bool:
        for f in fields:
            elem = f["type"].removeprefix("[]")
            if elem == "records":
                return True
            inner = f.get("fields", named.get(elem) if elem not in PRIMITIVE_TYPES else None)
            if inner is not None and elem not in seen and walk(inner, seen | {elem}):
                return True
        return False

    return walk(definition["fields"], frozenset())


@functools.cache
def message_summary(name: str) -> MessageSummary:
    raw = _raw_spec()["messages"][name]
    floors = []
    for d in raw["definitions"]:
        versions, flexible = Versions.required(d["versions"]), Versions.of(d.get("flexible"))
        if flexible is not None:
            floor = max(flexible.lo, versions.lo)
            if versions.hi is None or floor <= versions.hi:
                floors.append(floor)
    return MessageSummary(
        name=raw["name"],
        kind=raw["type"],
        api_key=raw.get("api_key"),
        valid=Versions.required(raw["valid"]),
        flexible_floor=min(floors) if floors else None,
        listeners=tuple(raw.get("listeners", ())),
        latest_version_unstable=bool(raw.get("latest_version_unstable")),
        former_name=raw.get("former_name"),
        has_records=any(_raw_has_records(d) for d in raw["definitions"]),
    )


def parse_message_spec(raw: dict) -> MessageSpec:
    """Parse one message in the generated format (used by tests on freshly generated specs)."""
    return _parse_message(raw)


@functools.cache
def error_table() -> list[tuple[int, str, bool, str]]:
    """(code, name, retriable, default message) of every error code Kafka defines."""
    raw = _package_json("spec/errors.json")
    return [tuple(row) for row in raw["errors"]]
