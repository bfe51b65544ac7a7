"""Tables of legal state transitions, for the coordinators' state machines (groups, and transactions next).

A table lists its legal moves as rows ``(from states, event, to states)``;
the owner of a state machine writes a state only through ``Transitions.check``
(or a function built on it), so an illegal move is refused where it is tried,
naming the machine, the state it was in, the state asked for and the event.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum


class IllegalTransition(RuntimeError):
    """A state machine was asked for a move its table does not allow (a bug in the coordinator, not a client's
    mistake: clients' requests are answered with error codes before any move)."""

    def __init__(self, machine: str, name: str, from_state: Enum, to_state: Enum, event: Enum):
        self.machine, self.name = machine, name
        self.from_state, self.to_state, self.event = from_state, to_state, event
        super().__init__(
            f"{machine} {name!r}: illegal transition from {from_state.value} to {to_state.value} on {event.value}"
        )


class Transitions:
    """The legal moves of one kind of state machine (``machine`` names it in errors)."""

    def __init__(self, machine: str, rows: Iterable[tuple[tuple[Enum, ...], Enum, tuple[Enum, ...]]]):
        self.machine = machine
        self.legal = frozenset((f, event, t) for froms, event, tos in rows for f in froms for t in tos)

    def check(self, name: str, from_state: Enum, event: Enum, to_state: Enum) -> None:
        """Raise ``IllegalTransition`` unless the table has the move."""
        if (from_state, event, to_state) not in self.legal:
            raise IllegalTransition(self.machine, name, from_state, to_state, event)
