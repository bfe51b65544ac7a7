"""Storage engines by name: what ``--storage`` / ``kafkawire.storage`` selects.

The broker names an engine and gets a ``Storage``; it never imports an engine class itself. An engine that
cannot be loaded is an error with the reason (``EngineUnavailableError``), never a quiet switch to another.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .base import EngineUnavailableError, Storage

# the names the configuration accepts for each engine (Kafka has one; "disk"/"segment" are kept aliases)
SEGMENTS = ("segments", "disk", "segment")
MEMORY = ("memory",)


def open_engine(name: str, data_dir: str | os.PathLike, properties: Mapping[str, str]) -> Storage:
    """The engine called ``name`` over ``data_dir`` (unused by ``memory``), configured from server.properties
    keys. ValueError for a name no engine has; EngineUnavailableError when the engine's code cannot load."""
    if name in MEMORY:
        from .memory import MemoryStorage

        return MemoryStorage(dict(properties))
    if name in SEGMENTS:
        try:
            from .segments import SegmentStorage
        except ImportError as exc:
            raise EngineUnavailableError(f"the {name} storage engine cannot be loaded: {exc}") from exc
        from .config import StorageConfig

        return SegmentStorage(data_dir, StorageConfig.from_properties(dict(properties)))
    raise ValueError(f"unknown storage engine {name!r} (use segments or memory)")
