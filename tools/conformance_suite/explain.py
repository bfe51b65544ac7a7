"""Differences with a written reason, read from ``explained.toml``.

Each entry names an API, a version range, a field path (a pattern over paths
such as ``topics[*].partitions[*].error_code``: brackets literal, ``*`` within one element), optionally a case-name
pattern and the two values it expects, and a reason. An entry must not be a
blanket: the path may not be ``*`` alone, and the reason must be written.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

FILE = Path(__file__).with_name("explained.toml")
_UNSET = object()


@dataclass
class Explanation:
    api: str
    versions: tuple[int, int]
    field: str
    reason: str
    case: str = "*"
    kafkawire: object = _UNSET
    kafka: object = _UNSET
    used: int = 0

    def matches(self, api: str, version: int, case: str, path: str, kw, ka) -> bool:
        return (
            api == self.api
            and self.versions[0] <= version <= self.versions[1]
            and _glob(self.field).fullmatch(path) is not None
            and _glob(self.case).fullmatch(case) is not None
            and (self.kafkawire is _UNSET or self.kafkawire == kw)
            and (self.kafka is _UNSET or self.kafka == ka)
        )


@functools.cache
def _glob(pattern: str) -> re.Pattern:
    """Brackets in a path are literal (``topics[events]``); ``*`` matches within one element or name,
    never across a bracket (``topics[*].error_code`` is not ``topics[a].partitions[0].error_code``)."""
    return re.compile("".join("[^\\[\\]]*" if c == "*" else re.escape(c) for c in pattern))


def load(path: Path = FILE) -> list[Explanation]:
    if not path.exists():
        return []
    raw = tomllib.loads(path.read_text())
    out = []
    for i, entry in enumerate(raw.get("explained", [])):
        where = f"{path.name} entry {i + 1}"
        for key in ("api", "versions", "field", "reason"):
            if key not in entry:
                raise ValueError(f"{where}: '{key}' is required")
        if entry["field"].strip("*.[]") == "" or not entry["reason"].strip():
            raise ValueError(f"{where}: a field path and a reason are required (no blanket entries)")
        lo, hi = entry["versions"]
        out.append(
            Explanation(
                api=entry["api"],
                versions=(lo, hi),
                field=entry["field"],
                reason=entry["reason"],
                case=entry.get("case", "*"),
                kafkawire=_value(entry.get("kafkawire", _UNSET)),
                kafka=_value(entry.get("kafka", _UNSET)),
            )
        )
    return out


def _value(v):
    """TOML has no null: the string "<null>" stands for it."""
    return None if v == "<null>" else v


def find(explanations: list[Explanation], api: str, version: int, case: str, path: str, kw, ka):
    for e in explanations:
        if e.matches(api, version, case, path, kw, ka):
            e.used += 1
            return e
    return None
