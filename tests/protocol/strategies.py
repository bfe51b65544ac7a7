"""Hypothesis strategies for every (message, version) of the spec.

Driven by the spec model only: for the definition valid at a version, every
field present at that version gets a random value of its wire type (null where
the version allows it), arrays and nested structs stay small, and absent
fields keep their defaults so that the message is encodable at that version.
"""

from __future__ import annotations

import uuid

from hypothesis import strategies as st

from kafkawire.protocol.schema import FieldSpec, StructSpec

INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}

# Tag numbers no schema uses, for unknown tagged fields.
UNKNOWN_TAGS = st.lists(st.integers(200, 40000), max_size=2, unique=True).map(sorted)


def scalar(type_name: str) -> st.SearchStrategy:
    if type_name in INT_RANGES:
        lo, hi = INT_RANGES[type_name]
        # bias towards boundaries and small values where varint/width bugs live
        return st.one_of(st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1]), st.integers(lo, hi))
    if type_name == "bool":
        return st.booleans()
    if type_name == "float64":
        return st.floats(allow_nan=False)
    if type_name == "uuid":
        return st.one_of(st.just(uuid.UUID(int=0)), st.builds(uuid.UUID, int=st.integers(0, (1 << 128) - 1)))
    if type_name == "string":
        return st.text(max_size=6)
    if type_name in ("bytes", "records"):
        return st.binary(max_size=10)
    raise ValueError(type_name)


class MessageStrategies:
    """Builds strategies for one message class; ``unknown_tags`` adds tagged fields no schema knows."""

    def __init__(self, cls, version: int, *, unknown_tags: bool = False, max_items: int = 3, override=None):
        """``override(field_spec)`` may return a strategy for a scalar field (a peer that can only
        represent some values of a type, e.g. known error codes), or None for the default."""
        self.override = override
        self.cls = cls
        self.version = version
        self.definition = cls.spec.definition(version)
        self.flexible = self.definition.is_flexible(version)
        self.unknown_tags = unknown_tags and self.flexible
        self.max_items = max_items

    def message(self) -> st.SearchStrategy:
        return self.struct(self.definition.root, self.cls, depth=0)

    def struct(self, spec: StructSpec, cls, depth: int) -> st.SearchStrategy:
        v = self.version
        present = [f for f in spec.fields if f.present(v)]
        kwargs = {f.attr: self.field(f, depth) for f in present}
        if self.unknown_tags:
            known = {f.tag for f in spec.fields if f.tag is not None}
            kwargs["_unknown_tags"] = UNKNOWN_TAGS.flatmap(
                lambda tags: st.tuples(
                    *[st.tuples(st.just(t), st.binary(max_size=4)) for t in tags if t not in known]
                ).map(lambda pairs: list(pairs) or None)
            )
        return st.fixed_dictionaries(kwargs).map(lambda kw: cls(**kw))

    def field(self, f: FieldSpec, depth: int) -> st.SearchStrategy:
        v = self.version
        if f.is_array:
            elem = self.element(f, depth + 1)
            value = st.lists(elem, max_size=max(1, self.max_items - depth))
        else:
            value = self.element(f, depth)
        if f.is_nullable(v):
            value = st.one_of(st.none(), value)
        return value

    def element(self, f: FieldSpec, depth: int) -> st.SearchStrategy:
        if f.struct is not None:
            cls = self.cls._classes[f.struct.name]
            return st.deferred(lambda: self.struct(f.struct, cls, depth))
        if self.override is not None:
            special = self.override(f)
            if special is not None:
                return special
        return scalar(f.type)


def messages(cls, version: int, **kw) -> st.SearchStrategy:
    return MessageStrategies(cls, version, **kw).message()


def all_pairs(include_tests: bool = True, include_records: bool = True) -> list[tuple[str, int]]:
    """Every (message name, version) in the spec, with Kafka's record schemas and its generator test schemas."""
    from kafkawire.protocol.schema import message_names, message_spec

    out = []
    for name in message_names(include_tests, include_records):
        spec = message_spec(name)
        out.extend((name, v) for v in range(spec.valid.lo, spec.valid.hi + 1))
    return out
