"""Kafka's error code space, from the spec's error table.

An error code this table does not know (a newer peer's) is carried as its
number and reported as unknown; looking it up never fails. Every code Kafka
defines is also a constant here (``errors.NOT_LEADER_OR_FOLLOWER == 6``), from
the generated ``error_codes.py``: a misspelt name fails at import and in mypy.
"""

from __future__ import annotations

import msgspec

from .error_codes import *  # noqa: F403  (one constant per Kafka error code, generated)
from .schema import error_table


class ErrorCode(msgspec.Struct, frozen=True):
    code: int
    name: str
    retriable: bool
    known: bool = True
    message: str = ""  # Kafka's default text for the code (Errors.message()), sent in some error answers

    def __int__(self) -> int:
        return self.code

    def __str__(self) -> str:
        return f"{self.name} ({self.code})"


ERRORS: dict[int, ErrorCode] = {
    code: ErrorCode(code, name, retriable, message=message) for code, name, retriable, message in error_table()
}
BY_NAME: dict[str, ErrorCode] = {e.name: e for e in ERRORS.values()}


def error_for(code: int) -> ErrorCode:
    found = ERRORS.get(code)
    if found is None:
        return ErrorCode(code, f"UNKNOWN_ERROR_CODE_{code}", False, known=False, message=f"unknown error code {code}")
    return found


def code_of(name: str) -> int:
    """``code_of('UNKNOWN_TOPIC_OR_PARTITION') == 3``; KeyError for a name Kafka does not define."""
    return BY_NAME[name].code


class KafkaError(Exception):
    """An error code returned by a Kafka peer, raised by the client and CLI."""

    def __init__(self, code: int, message: str | None = None):
        self.error = error_for(code)
        self.code = code
        self.name = self.error.name
        self.retriable = self.error.retriable
        super().__init__(f"{self.name} ({code})" + (f": {message}" if message else ""))
