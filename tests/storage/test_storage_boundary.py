"""What the broker learns from a storage engine, it asks the engine: its error codes, whether it blocks, and
whether it could be opened at all."""

from __future__ import annotations

import sys

import pytest

import kafkawire.broker.groups.persistence  # noqa: F401  (defines a StorageError of its own)
import kafkawire.broker.storage.segment  # noqa: F401  (LogDirError)
from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.handlers._common import StorageFailure, storage_error_code
from kafkawire.broker.server import open_storage, start_in_thread
from kafkawire.broker.storage import base as sb
from kafkawire.broker.storage.memory import MemoryStorage
from kafkawire.broker.storage.segments import SegmentStorage
from kafkawire.protocol import errors


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


STORAGE_ERRORS = sorted(_all_subclasses(sb.StorageError), key=lambda c: c.__qualname__)


def test_the_storage_errors_are_all_found():
    names = {cls.__name__ for cls in STORAGE_ERRORS}
    assert {
        "UnknownTopicError",
        "OffsetOutOfRangeError",
        "LogDirError",
        "StorageFailure",
        "GroupLogError",
        "EngineUnavailableError",
    } <= names


@pytest.mark.parametrize("cls", STORAGE_ERRORS, ids=lambda c: c.__name__)
def test_every_storage_error_carries_a_code_kafka_defines(cls):
    assert isinstance(cls.error_code, int)
    assert cls.error_code in errors.ERRORS, f"{cls.__name__}.error_code {cls.error_code} is not a Kafka error code"


@pytest.mark.parametrize(
    "exc, code",
    [
        (sb.UnknownTopicError("t"), errors.UNKNOWN_TOPIC_OR_PARTITION),
        (sb.TopicExistsError("t"), errors.TOPIC_ALREADY_EXISTS),
        (sb.InvalidTopicError("t"), errors.INVALID_TOPIC_EXCEPTION),
        (sb.InvalidPartitionsError("3"), errors.INVALID_PARTITIONS),
        (sb.InvalidConfigError("x"), errors.INVALID_CONFIG),
        (sb.CorruptBatchError("short"), errors.CORRUPT_MESSAGE),
        (sb.OffsetOutOfRangeError(9, 0, 3), errors.OFFSET_OUT_OF_RANGE),
        (StorageFailure("disk full"), errors.KAFKA_STORAGE_ERROR),
        (sb.StorageError("engine-specific"), errors.UNKNOWN_SERVER_ERROR),
        (ValueError("not from storage"), errors.UNKNOWN_SERVER_ERROR),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v),
)
def test_handlers_answer_the_code_the_error_carries(exc, code):
    assert storage_error_code(exc) == code


@pytest.mark.parametrize("cls", [c for c in STORAGE_ERRORS if c.log_dir_failure], ids=lambda c: c.__name__)
def test_errors_the_disk_caused_answer_kafka_storage_error(cls):
    exc = cls.__new__(cls)  # whatever its constructor wants, the class alone decides the answer
    Exception.__init__(exc, "disk")
    assert storage_error_code(exc) == errors.KAFKA_STORAGE_ERROR


def test_an_os_error_under_any_storage_error_is_a_disk_failure():
    try:
        try:
            raise OSError(28, "No space left on device")
        except OSError as os_error:
            raise sb.UnknownTopicError("t") from os_error
    except sb.UnknownTopicError as exc:
        assert storage_error_code(exc) == errors.KAFKA_STORAGE_ERROR


def test_a_durable_broker_whose_engine_cannot_load_refuses_to_start(tmp_path, monkeypatch):
    # None in sys.modules makes the import fail as a missing module or library would
    monkeypatch.setitem(sys.modules, "kafkawire.broker.storage.segments", None)
    config = BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data"))
    with pytest.raises(sb.EngineUnavailableError) as info:
        open_storage(config)
    assert "segments storage engine cannot be loaded" in str(info.value)
    assert isinstance(info.value.__cause__, ImportError)
    assert not (tmp_path / "data").exists()


def test_an_unknown_engine_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="unknown storage engine 'tape'"):
        open_storage(BrokerConfig(port=0, storage="tape", data_dir=str(tmp_path)))


def test_each_engine_says_whether_it_blocks(tmp_path):
    assert MemoryStorage.blocking is False
    disk = open_storage(BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data")))
    try:
        assert isinstance(disk, SegmentStorage) and disk.blocking is True
    finally:
        disk.close()


class _BlockingMemory(MemoryStorage):
    blocking = True  # an engine of another class that says it blocks


def test_the_broker_runs_storage_in_threads_when_the_engine_says_it_blocks():
    with start_in_thread(storage=_BlockingMemory()) as running:
        assert running.broker.storage_in_thread
    with start_in_thread(storage=MemoryStorage()) as running:
        assert not running.broker.storage_in_thread
