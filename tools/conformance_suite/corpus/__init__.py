"""The corpus: cases as data, each written once and run at every version both brokers serve.

A case is a function ``fn(s, v)`` registered with :func:`case`: given a
:class:`~conformance_suite.session.Session` ``s`` and an API version ``v``, it
probes the broker (``s.probe(api, v, {...})``) after any set-up it needs.
Request descriptions name every field of every version; :func:`build` keeps
those version ``v`` has. An optional ``setup(s)`` runs once per case and broker
before the first version. Names from ``s.name()`` are unique per run and case
and identical on both brokers.

The modules of this package register the cases by API family.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from ..session import Session  # noqa: F401  (for the case modules)


@dataclass(frozen=True)
class Case:
    api: str
    name: str
    fn: Callable
    setup: Callable | None = None
    min_version: int = 0
    max_version: int = 1 << 15
    # Cases that share a lane never run at the same time (see ``runner.run``).
    lane: str | None = None

    @property
    def slug(self) -> str:
        return self.name.replace("_", "-").replace("/", "-")[:40]

    def versions_for(self, common: dict[str, tuple[int, int]]) -> list[int]:
        if self.api not in common:
            return []
        lo, hi = common[self.api]
        return list(range(max(lo, self.min_version), min(hi, self.max_version) + 1))


CASES: list[Case] = []


def case(
    api: str,
    name: str,
    *,
    setup: Callable | None = None,
    min_version: int = 0,
    max_version: int = 1 << 15,
    lane: str | None = None,
):
    def register(fn):
        full = f"{api}/{name}"
        if any(c.name == full for c in CASES):
            raise ValueError(f"case {full} registered twice")
        CASES.append(Case(api, full, fn, setup, min_version, max_version, lane))
        return fn

    return register


def for_each(
    api: str,
    variants: dict,
    *,
    setup: Callable | None = None,
    min_version: int = 0,
    max_version: int = 1 << 15,
    lane: str | None = None,
):
    """One case per variant: ``variants`` maps a case name to ``fn(s, v)``."""
    for name, fn in variants.items():
        case(api, name, setup=setup, min_version=min_version, max_version=max_version, lane=lane)(fn)


RANDOM_ID = uuid.UUID("5c1b5e6e-3a3a-4a4a-9d9d-0123456789ab")  # an id no broker has
INTERNAL = "__consumer_offsets"

from . import admin, groups, produce_fetch, topics, transactions  # noqa: E402,F401  (register the cases)
