"""A kafkawire broker subprocess for the group tests, and helpers to wait on things with a deadline.

The same scenarios run against Apache Kafka through ``peers.peer_harness.KafkaBroker``
(see conftest.py); both take the group timings of ``GROUP_OVERRIDES``.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

from kafkawire.testing import KafkaBroker

from peers.peer_harness import GROUP_SETTINGS

# broker settings that make group tests fast: short delays and session timeouts
GROUP_OVERRIDES = dict(GROUP_SETTINGS)


def wait_for(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


class Broker(KafkaBroker):
    """kafkawire serve on disk with the group timings (``kafkawire.testing``'s launcher): ``restart`` and
    ``kill`` then ``start`` keep its port and data."""

    target = "kafkawire"

    def __init__(self, data_dir: Path, overrides: dict | None = None, storage: str = "segments"):
        super().__init__(storage=storage, data_dir=data_dir, config=dict(GROUP_OVERRIDES, **(overrides or {})))


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def produce(bootstrap: str, topic: str, values: list[int], partitions: int) -> None:
    import confluent_kafka as ck

    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for v in values:
        p.produce(topic, value=str(v).encode(), key=str(v).encode(), partition=v % partitions)
    assert p.flush(30) == 0


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)
