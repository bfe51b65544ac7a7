"""Asking the reference Kafka (the ``reference_kafka`` fixture) the same question as kafkawire.

Answers differ in things that are not behaviour: topic ids, the cluster id, the broker's port, and
names a test made unique on the shared reference broker. :func:`normalized` replaces those with
labels, so that a test can assert ``normalized(ours) == normalized(theirs)``.
"""

from __future__ import annotations

import uuid

from .conftest import RawClient


def reference_client(reference_kafka) -> RawClient:
    return RawClient((reference_kafka.host, reference_kafka.port))


def unique(name: str) -> str:
    """A topic name not used before on the session-wide reference broker."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def normalized(value, labels: dict | None = None, drop: tuple = ("host", "port", "cluster_id")):
    """``value`` (a message or its ``to_dict()``) with ids and names in ``labels`` replaced by their label,
    and the fields named in ``drop`` removed."""
    labels = {str(k): v for k, v in (labels or {}).items()}
    if hasattr(value, "to_dict"):
        value = value.to_dict()

    def walk(v):
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items() if k not in drop}
        if isinstance(v, (list, tuple)):
            return type(v)(walk(x) for x in v)
        if isinstance(v, uuid.UUID) or isinstance(v, str):
            return labels.get(str(v), v if isinstance(v, str) else str(v))
        return v

    return walk(value)


def wait_for_topic(client: RawClient, name: str, timeout: float = 10.0) -> uuid.UUID:
    """Kafka answers CreateTopics before its metadata cache knows the topic: poll Metadata until it does;
    the topic's id."""
    import time

    from kafkawire.protocol import message_class

    R = message_class("MetadataRequest")
    deadline = time.monotonic() + timeout
    while True:
        res = client.call(R(topics=[R.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False), 12)
        t = res.topics[0]
        if t.error_code == 0 and t.partitions and all(p.leader_id >= 0 for p in t.partitions):
            return t.topic_id
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {name} did not appear in the reference's metadata: {t}")
        time.sleep(0.05)


def produce_when_led(client: RawClient, request, version: int, timeout: float = 10.0):
    """Kafka's partition may answer NOT_LEADER_OR_FOLLOWER for a moment after its topic appears in
    Metadata: send ``request`` (a ProduceRequest for one partition) until it is accepted; the response."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        res = client.call(request, version)
        code = res.responses[0].partition_responses[0].error_code
        if code != 6 or time.monotonic() > deadline:  # NOT_LEADER_OR_FOLLOWER
            assert code == 0, res
            return res
        time.sleep(0.05)
