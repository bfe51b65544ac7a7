"""A three-node Apache Kafka 4.4 cluster (``tools/kafka_cluster.py``) shared by the ``kafka_cluster`` tests.

One cluster for this package's tests: starting three JVMs costs ~10 s of the two-core machine's time, and
every test makes its own topics. Scoped to the package, not the session, so the three JVMs stop once the last
cluster test has run instead of idling beside the rest of the suite. A test that stops or kills a node restarts it before it returns
(``node_down``), so the next test starts with all three brokers up and leaders back in place.
"""

from __future__ import annotations

import contextlib
import time
import uuid

import pytest

from conftest import reference_unavailable

pytestmark = pytest.mark.kafka_cluster


@pytest.fixture(scope="package")
def kafka_cluster(tmp_path_factory):
    from kafka_cluster import KafkaUnavailable, ReferenceKafkaCluster

    # the tests' records carry old event times (examples/pipeline.py: January 2026; the Spark tests: 2023):
    # Kafka's time retention (7 days by default, checked every 5 minutes) deleted them in the middle of a run,
    # and the data source rightly failed with its data-loss error
    cluster = ReferenceKafkaCluster(tmp_path_factory.mktemp("kafka-cluster"), config={"log.retention.ms": -1})
    try:
        cluster.start()
    except KafkaUnavailable as exc:
        cluster.close()
        reference_unavailable(str(exc))
    yield cluster
    cluster.close()


@pytest.fixture
def topic_name():
    return f"cluster-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def node_down(cluster, node_id: int, *, kill: bool = False):
    """Node ``node_id`` stopped (controlled shutdown) or SIGKILLed inside the block, running again after it."""
    node = cluster.node(node_id)
    if kill:
        node.kill()
    else:
        node.stop()
    try:
        yield node
    finally:
        node.restart()
        cluster.wait_all_brokers()


def wait_until(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f}s: {what}")
        time.sleep(interval)
