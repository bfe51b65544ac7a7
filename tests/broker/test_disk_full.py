"""A full disk: producers get KAFKA_STORAGE_ERROR, OffsetCommit NOT_COORDINATOR (as Kafka maps a storage error
in its group coordinator) and CreateTopics an error answer, never a dropped connection; reads go on; writes
resume once space is freed; and a broker started on the full disk serves reads and says why writes fail.

The disk is an 8 MiB tmpfs the test mounts (and unmounts); where mounting is not allowed the test skips."""

from __future__ import annotations

import errno
import logging
import os
import subprocess

import pytest

from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.server import start_in_thread
from kafkawire.protocol import errors

from .conftest import RawClient, msg
from .helpers import batch, create_topic, fetch_request, produce_request, values_of


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True, text=True, timeout=30
    )
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True, timeout=30)


def fill(disk) -> None:
    """Write a filler file until the disk has no byte left (bounded: 8 MiB in at most ~16k writes)."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for chunk in (1 << 20, 4096, 512):
            for _ in range(20_000):
                try:
                    os.write(fd, b"\0" * chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    assert os.statvfs(disk).f_bavail == 0


def free(disk) -> None:
    os.unlink(disk / "filler")


def produce(client, topic, partition, values):
    res = client.call(produce_request(topic, partition, batch(values)), 9)
    pr = res.responses[0].partition_responses[0]
    return pr.error_code, pr.base_offset


def fetch(client, topic, partition, offset=0):
    res = client.call(fetch_request([(topic, partition, offset)]), 12)
    p = res.responses[0].partitions[0]
    assert p.error_code == 0
    return values_of(p.records)


def commit(client, group, topic, partition, offset):
    R = msg("OffsetCommitRequest").__class__
    body = msg(
        "OffsetCommitRequest",
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            R.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    R.OffsetCommitRequestPartition(
                        partition_index=partition, committed_offset=offset, committed_metadata=""
                    )
                ],
            )
        ],
    )
    return client.call(body, 8).topics[0].partitions[0].error_code


def committed(client, group, topic, partition):
    R = msg("OffsetFetchRequest").__class__
    body = msg(
        "OffsetFetchRequest",
        group_id=group,
        topics=[R.OffsetFetchRequestTopic(name=topic, partition_indexes=[partition])],
    )
    return client.call(body, 7).topics[0].partitions[0].committed_offset


def create(client, name):
    R = msg("CreateTopicsRequest").__class__
    body = msg(
        "CreateTopicsRequest",
        topics=[R.CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000,
        validate_only=False,
    )
    return client.call(body, 7).topics[0].error_code


def log_dir_error(client):
    return client.call(msg("DescribeLogDirsRequest", topics=None), 4).results[0].error_code


def test_full_disk_is_a_storage_error_and_writes_resume_when_space_returns(small_disk, caplog):
    config = BrokerConfig(port=0, storage="segments", data_dir=str(small_disk / "data"))
    broker = start_in_thread(config)
    try:
        client = RawClient(broker.address)
        create_topic(client, "t", partitions=2)
        assert produce(client, "t", 0, [b"before-0"]) == (0, 0)
        assert produce(client, "t", 1, [b"before-1"]) == (0, 0)
        fill(small_disk)

        assert produce(client, "t", 0, [b"x" * 20_000]) == (errors.KAFKA_STORAGE_ERROR, -1)  # past the page it has
        # the log dir is now offline for writes: even a write that would fit in an allocated page waits
        assert produce(client, "t", 1, [b"y"]) == (errors.KAFKA_STORAGE_ERROR, -1)
        assert commit(client, "g", "t", 0, 1) == errors.NOT_COORDINATOR  # the first commit: no offsets topic yet
        assert create(client, "u") != 0
        assert log_dir_error(client) == errors.KAFKA_STORAGE_ERROR
        assert fetch(client, "t", 0) == [b"before-0"]  # reads go on, on the same connection
        assert fetch(client, "t", 1) == [b"before-1"]
        assert committed(client, "g", "t", 0) == -1  # the failed commit was not kept

        free(small_disk)
        assert produce(client, "t", 0, [b"after-0"]) == (0, 1)
        assert commit(client, "g", "t", 0, 2) == 0
        assert create(client, "u") == 0
        assert log_dir_error(client) == 0
        client.close()
    finally:
        broker.stop()

    # a restart on a full disk: reads are served, writes fail with the reason logged, and resume later
    fill(small_disk)
    with caplog.at_level(logging.ERROR, logger="kafkawire.storage"):
        broker = start_in_thread(config)
    try:
        assert any("offline for writes" in r.getMessage() for r in caplog.records)
        client = RawClient(broker.address)
        assert fetch(client, "t", 0) == [b"before-0", b"after-0"]
        assert committed(client, "g", "t", 0) == 2
        assert produce(client, "t", 1, [b"z"]) == (errors.KAFKA_STORAGE_ERROR, -1)
        assert commit(client, "g", "t", 0, 3) == errors.NOT_COORDINATOR
        free(small_disk)
        assert produce(client, "t", 1, [b"z"]) == (0, 1)
        assert commit(client, "g", "t", 0, 3) == 0
        assert fetch(client, "t", 1) == [b"before-1", b"z"]
        client.close()
    finally:
        broker.stop()
