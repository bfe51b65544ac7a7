"""Upstreams for the proxy tests: kafkawire's broker (a subprocess, memory storage) and the reference Apache
Kafka (``reference_kafka``: fails under CI when it cannot run, never skips there)."""
from __future__ import annotations

import uuid

import pytest


@pytest.fixture(scope="session")
def kafkawire_upstream():
    import kafkawire.testing

    with kafkawire.testing.broker(mode="subprocess") as broker:
        yield broker.bootstrap


@pytest.fixture(params=["kafkawire", "kafka"])
def upstream(request) -> str:
    """The bootstrap address of each upstream in turn."""
    if request.param == "kafkawire":
        return request.getfixturevalue("kafkawire_upstream")
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
