"""Storage engines behind one interface (see base)."""
from .base import (AppendResult, OffsetOutOfRangeError, PartitionInfo, PartitionLog, ReadResult, Storage,
                   StorageError, TopicExistsError, TopicMeta, UnknownTopicError)

__all__ = ["AppendResult", "OffsetOutOfRangeError", "PartitionInfo", "PartitionLog", "ReadResult", "Storage",
           "StorageError", "TopicExistsError", "TopicMeta", "UnknownTopicError"]
