"""Testing with kafkawire: a real Kafka-protocol broker for tests, without a JVM or Docker.

* pytest: the plugin :mod:`kafkawire.testing.plugin` is registered through the ``pytest11`` entry point, so
  installing kafkawire gives every test the fixtures ``kafka_broker``, ``kafka_topic`` and ``kafka_admin``
  (see the README, "Testing with kafkawire").
* unittest and scripts: ``with kafkawire.testing.broker() as b: ... b.bootstrap ...``.
"""

from __future__ import annotations

from ._broker import KafkaBroker, broker

__all__ = ["KafkaBroker", "broker"]
