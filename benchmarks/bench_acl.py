#!/usr/bin/env python3
"""What the StandardAuthorizer costs: produce and consume throughput on kafkawire without an authorizer and
with one, side by side.

Two ``kafkawire serve`` processes (segments storage): one without ``authorizer.class.name``; one with it, where
the client (User:ANONYMOUS on PLAINTEXT, not a super user) is let in by a PREFIXED WRITE and READ ACL among
``--acls`` other ACLs (prefixed and literal, for other users), and its group by a GROUP ACL. The ACLs are created
through the Java-compatible admin API (confluent-kafka) while ANONYMOUS is a super user, then that broker is
started again without super users. librdkafka (confluent-kafka) produces ``--records`` records of ``--size``
bytes (acks=all) and reads them back with a consumer group; runs alternate between the brokers, ``--repeat``
times. Prints the median records/s of each side and the ratio (with/without; 1.00 is no cost).

Usage: python benchmarks/bench_acl.py [--records N] [--size B] [--acls N] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from kafkawire.testing import KafkaBroker

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _acls(others: int) -> list[AclBinding]:
    def acl(rtype, name, pattern, principal, op):
        return AclBinding(rtype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)

    out = [
        acl(ResourceType.TOPIC, "bench-", ResourcePatternType.PREFIXED, "User:ANONYMOUS", AclOperation.WRITE),
        acl(ResourceType.TOPIC, "bench-", ResourcePatternType.PREFIXED, "User:ANONYMOUS", AclOperation.READ),
        acl(ResourceType.TOPIC, "bench-", ResourcePatternType.PREFIXED, "User:ANONYMOUS", AclOperation.CREATE),
        acl(ResourceType.GROUP, "bench-", ResourcePatternType.PREFIXED, "User:ANONYMOUS", AclOperation.READ),
    ]
    for i in range(others // 2):
        out.append(acl(ResourceType.TOPIC, f"team{i}-", ResourcePatternType.PREFIXED, f"User:u{i}", AclOperation.WRITE))
        out.append(acl(ResourceType.TOPIC, f"bench-{i}", ResourcePatternType.LITERAL, f"User:u{i}", AclOperation.READ))
    return out


def _authorized_broker(data_dir: str, others: int) -> KafkaBroker:
    setup = KafkaBroker(
        storage="segments",
        data_dir=data_dir,
        config={"authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"},
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": setup.bootstrap})
        for future in admin.create_acls(_acls(others)).values():
            future.result(60)
    finally:
        setup.stop()
    broker = KafkaBroker(storage="segments", data_dir=data_dir, config={"authorizer.class.name": STANDARD}).start()
    _check_enforced(broker.bootstrap)
    return broker


def _check_enforced(bootstrap: str) -> None:
    """The measurement means something only if the ACLs apply: a topic outside the prefix is refused."""
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000})
    producer.produce("not-granted", b"x", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(15)
    if not errors or errors[0] is None or errors[0].name() != "TOPIC_AUTHORIZATION_FAILED":
        raise RuntimeError(f"the authorizer did not refuse a topic outside the ACLs: {errors}")


def _run(bootstrap: str, records: int, size: int) -> float:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    value = b"x" * size
    started = time.perf_counter()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failures = []
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, on_delivery=lambda err, _m: err and failures.append(err))
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)
    if failures:
        raise RuntimeError(f"{len(failures)} records failed: {failures[0]}")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": topic,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got, deadline = 0, time.monotonic() + 120
    while got < records and time.monotonic() < deadline:
        for m in consumer.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
    consumer.close()
    if got < records:
        raise RuntimeError(f"read {got} of {records}")
    return 2 * records / (time.perf_counter() - started)  # records produced and read, per second


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--acls", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-acl-") as tmp:
        plain = KafkaBroker(storage="segments", data_dir=f"{tmp}/plain").start()
        authorized = _authorized_broker(f"{tmp}/acl", args.acls)
        try:
            rates: dict[str, list[float]] = {"without": [], "with": []}
            _run(plain.bootstrap, 1000, args.size)  # warm-up of each
            _run(authorized.bootstrap, 1000, args.size)
            for _ in range(args.repeat):
                rates["without"].append(_run(plain.bootstrap, args.records, args.size))
                rates["with"].append(_run(authorized.bootstrap, args.records, args.size))
        finally:
            plain.stop()
            authorized.stop()
    without, with_ = statistics.median(rates["without"]), statistics.median(rates["with"])
    print(f"{args.records} records of {args.size} B produced and read, median of {args.repeat}, {args.acls} other ACLs")
    print(f"  without authorizer: {without:,.0f} records/s")
    print(f"  with authorizer:    {with_:,.0f} records/s")
    print(f"  ratio with/without: {with_ / without:.2f}")


if __name__ == "__main__":
    main()
