"""Storage engines behind one interface (see base).

- ``segments.SegmentStorage(data_dir, config)``: the default; Kafka's on-disk segment layout, crash
  recovery, retention, fsync before acknowledging acks=all. Reads return memoryviews of mmapped
  segments; ``read_regions`` returns ``FileRegion``s for ``os.sendfile``.
- ``memory.MemoryStorage(config)``: everything in RAM.

``engines.open_engine(name, data_dir, properties)`` opens one by its configured name.

``config`` is a ``StorageConfig`` or a dict of server.properties keys (``StorageConfig.from_properties``).
"""

from .base import (
    AppendResult,
    CorruptBatchError,
    EngineUnavailableError,
    FileRegion,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    PartitionInfo,
    PartitionLog,
    ReadResult,
    Storage,
    StorageError,
    TopicExistsError,
    TopicMeta,
    UnknownTopicError,
)
from .config import StorageConfig, TopicSettings
from .engines import open_engine

__all__ = [
    "AppendResult",
    "CorruptBatchError",
    "EngineUnavailableError",
    "FileRegion",
    "InvalidConfigError",
    "InvalidPartitionsError",
    "InvalidTopicError",
    "OffsetOutOfRangeError",
    "PartitionInfo",
    "PartitionLog",
    "ReadResult",
    "Storage",
    "StorageConfig",
    "StorageError",
    "TopicExistsError",
    "TopicMeta",
    "TopicSettings",
    "UnknownTopicError",
    "open_engine",
]
