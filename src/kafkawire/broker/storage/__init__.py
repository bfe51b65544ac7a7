"""Storage engines behind one interface (see base)."""
from .base import (AppendResult, CorruptBatchError, FileRegion, InvalidConfigError, InvalidPartitionsError,
                   InvalidTopicError, OffsetOutOfRangeError, PartitionInfo, PartitionLog, ReadResult, Storage,
                   StorageError, TopicExistsError, TopicMeta, UnknownTopicError)
from .config import StorageConfig, TopicSettings

__all__ = ["AppendResult", "CorruptBatchError", "FileRegion", "InvalidConfigError", "InvalidPartitionsError",
           "InvalidTopicError", "OffsetOutOfRangeError", "PartitionInfo", "PartitionLog", "ReadResult", "Storage",
           "StorageConfig", "StorageError", "TopicExistsError", "TopicMeta", "TopicSettings", "UnknownTopicError"]
