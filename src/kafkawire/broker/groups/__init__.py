"""Consumer groups: the classic protocol, KIP-848's consumer protocol, committed offsets, durable state."""

from .classic import JoinRequest
from .config import GroupConfig
from .coordinator import CommitPartition, GroupCoordinator
from .timers import FakeScheduler, LoopScheduler

__all__ = ["GroupConfig", "GroupCoordinator", "CommitPartition", "FakeScheduler", "JoinRequest", "LoopScheduler"]
