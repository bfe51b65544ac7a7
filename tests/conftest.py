"""Shared pytest setup for kafkawire's tests.

Subdirectories add their own fixtures in their own conftest.py. This file's
presence puts ``tests/`` on ``sys.path`` (for the helpers in ``tests/support``);
it also puts ``tools/`` there, for the reference broker
(``tools/kafka_reference.py``), and offers that broker as a fixture.

The reference is Apache Kafka itself (the release pinned in
``tools/kafka_pins.py``). When it cannot run here (no JDK, no Maven, Maven
Central refusing), tests that need it fail when ``CI`` is set and skip with the
reason otherwise: in CI a missing reference must never look like a pass.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))


def reference_unavailable(reason: str):
    """Fail in CI, skip elsewhere: a test that needs the reference Kafka must not silently pass."""
    if os.environ.get("CI"):
        pytest.fail(f"the reference Kafka is required in CI: {reason}", pytrace=False)
    pytest.skip(f"reference Kafka unavailable: {reason}")


@pytest.fixture(scope="session")
def reference_kafka(tmp_path_factory):
    """One Apache Kafka node (KRaft combined mode, loopback, fresh log dir) for the whole test session."""
    from kafka_reference import KafkaUnavailable, ReferenceKafka

    kafka = ReferenceKafka(tmp_path_factory.mktemp("reference-kafka"))
    try:
        kafka.start()
    except KafkaUnavailable as exc:
        kafka.close()
        reference_unavailable(str(exc))
    yield kafka
    kafka.close()


def pytest_configure(config):
    # registered here, not in tests/groups/conftest.py: tests/client imports group scenarios that carry it
    # before pytest reaches tests/groups
    config.addinivalue_line(
        "markers",
        "restarts_broker: the test restarts or kills its broker, so on Kafka it gets a private node instead "
        "of the shared one",
    )
    config.addinivalue_line(
        "markers",
        "kafka_cluster: the test uses the three-node Kafka 4.4 cluster of tests/cluster (tools/kafka_cluster.py)",
    )
