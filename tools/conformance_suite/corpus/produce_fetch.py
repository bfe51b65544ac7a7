"""Produce, Fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch, InitProducerId, DescribeProducers."""

from __future__ import annotations

from kafkawire.protocol.records import build_message_set

from . import INTERNAL, RANDOM_ID, case, for_each

# -- Produce --------------------------------------------------------------------


def _produce(s, v, name, partitions, *, acks=-1, topic_id=None, label="", expect_answer=True, transactional_id=None):
    return s.probe(
        "Produce",
        v,
        {
            "transactional_id": transactional_id,
            "acks": acks,
            "timeout_ms": 30000,
            "topic_data": [
                {
                    "name": name,
                    "topic_id": topic_id if topic_id is not None else _tid(s, name),
                    "partition_data": [{"index": p, "records": r} for p, r in partitions],
                }
            ],
        },
        label=label,
        expect_answer=expect_answer,
    )


def _tid(s, name):
    try:
        return s.tid(name)
    except Exception:  # noqa: BLE001 - a topic this broker does not know: the id of nothing
        return RANDOM_ID


def _topic(s):
    s.create_topic(s.name(), partitions=2)


def _corrupt(batch: bytes) -> bytes:
    data = bytearray(batch)
    data[-1] ^= 0xFF  # the CRC covers the last byte
    return bytes(data)


for_each(
    "Produce",
    {
        "ok": lambda s, v: _produce(s, v, s.name(), [(0, s.batch(2))]),
        "two-partitions": lambda s, v: _produce(s, v, s.name(), [(0, s.batch(1)), (1, s.batch(3))]),
        "unknown-partition": lambda s, v: _produce(s, v, s.name(), [(0, s.batch(1)), (7, s.batch(1))]),
        "negative-partition": lambda s, v: _produce(s, v, s.name(), [(-1, s.batch(1))]),
        "acks-1": lambda s, v: _produce(s, v, s.name(), [(0, s.batch(1))], acks=1),
        "acks-invalid": lambda s, v: _produce(s, v, s.name(), [(0, s.batch(1))], acks=2),
        "acks-0": lambda s, v: _produce(s, v, s.name(), [(0, s.batch(1))], acks=0, expect_answer=False),
        "empty-records": lambda s, v: _produce(s, v, s.name(), [(0, b"")]),
        "corrupt-crc": lambda s, v: _produce(s, v, s.name(), [(0, _corrupt(s.batch(2)))]),
        "truncated-batch": lambda s, v: _produce(s, v, s.name(), [(0, s.batch(2)[:-5])]),
        "gzip": lambda s, v: _produce(s, v, s.name(), [(0, s.batch(4, compression="gzip"))]),
        "zstd": lambda s, v: _produce(s, v, s.name(), [(0, s.batch(4, compression="zstd"))]),
        "magic-1": lambda s, v: _produce(
            s, v, s.name(), [(0, build_message_set([(b"k", b"v", [], 1_700_000_000_000)], magic=1))]
        ),
        "unknown-topic": lambda s, v: _produce(s, v, s.name("missing"), [(0, s.batch(1))], topic_id=RANDOM_ID),
        "internal-topic": lambda s, v: _produce(s, v, INTERNAL, [(0, s.batch(1))]),
        "invalid-topic-name": lambda s, v: _produce(s, v, "bad name!", [(0, s.batch(1))], topic_id=RANDOM_ID),
        "no-topics": lambda s, v: s.probe("Produce", v, {"acks": -1, "timeout_ms": 1000, "topic_data": []}),
        "transactional-without-txn": lambda s, v: _produce(
            s, v, s.name(), [(0, s.batch(1))], transactional_id=s.name("txn")
        ),
        "oversized": lambda s, v: _produce(s, v, s.name(), [(0, _big())]),
    },
    setup=_topic,
    min_version=3,
)


def _per_version(s, v):
    name = s.name(f"v{v}")
    s.create_topic(name, partitions=1)
    _produce(s, v, name, [(0, s.batch(2))])
    _produce(s, v, name, [(0, s.batch(1, first=2))], label="again")


def _null_records(s, v):
    if v == s.top("Produce"):  # Kafka never answers this one: probed once, with a short wait
        s.probe(
            "Produce",
            v,
            {
                "acks": -1,
                "timeout_ms": 1000,
                "topic_data": [
                    {"name": s.name(), "topic_id": _tid(s, s.name()), "partition_data": [{"index": 0, "records": None}]}
                ],
            },
            timeout=2.0,
        )


case("Produce", "every-version")(_per_version)
case("Produce", "null-records", setup=_topic)(_null_records)


def _big() -> bytes:
    from kafkawire.protocol.records import build_batch

    return build_batch([(b"k", bytes(1_100_000), [], 1_700_000_000_000)])


def _idempotent(s):
    s.create_topic(s.name(), partitions=1)
    s.state["pid"] = s.call(
        "InitProducerId",
        None,
        {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
    )


def _idem_batch(s, seq, count=2, epoch=None, pid=None):
    answer = s.state["pid"]
    return s.batch(
        count,
        producer_id=answer.producer_id if pid is None else pid,
        producer_epoch=answer.producer_epoch if epoch is None else epoch,
        base_sequence=seq,
    )


def _sequence(s, v, seqs, **kw):
    # a fresh producer per version: sequences start at 0 for each
    s.state["pid"] = s.call(
        "InitProducerId",
        None,
        {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
    )
    for i, seq in enumerate(seqs):
        _produce(s, v, s.name(), [(0, _idem_batch(s, seq, **kw))], label=f"batch{i}")


for_each(
    "Produce",
    {
        "idempotent-in-order": lambda s, v: _sequence(s, v, [0, 2, 4]),
        "idempotent-duplicate": lambda s, v: _sequence(s, v, [0, 2, 2, 0]),
        "idempotent-out-of-order": lambda s, v: _sequence(s, v, [0, 5]),
        "idempotent-first-not-zero": lambda s, v: _sequence(s, v, [3]),
        "idempotent-wrong-epoch": lambda s, v: (
            _sequence(s, v, [0]),
            _produce(s, v, s.name(), [(0, _idem_batch(s, 2, epoch=7))], label="e7"),
        ),
        "idempotent-unknown-producer": lambda s, v: _produce(s, v, s.name(), [(0, _idem_batch(s, 0, pid=987654))]),
    },
    setup=_idempotent,
    min_version=3,
)


# -- Fetch ----------------------------------------------------------------------


def _fetched(s):
    s.create_topic(s.name(), partitions=2)
    s.produce(s.name(), 0, 3)
    s.produce(s.name(), 0, 2, first=3)
    s.produce(s.name(), 1, 1)


def _fetch(
    s,
    v,
    parts,
    *,
    name=None,
    topic_id=None,
    max_bytes=1 << 20,
    isolation=0,
    session_id=0,
    epoch=-1,
    label="",
    forgotten=(),
    max_wait=0,
    min_bytes=1,
):
    name = name or s.name()
    return s.probe(
        "Fetch",
        v,
        {
            "replica_id": -1,
            "max_wait_ms": max_wait,
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "isolation_level": isolation,
            "session_id": session_id,
            "session_epoch": epoch,
            "topics": [
                {
                    "topic": name,
                    "topic_id": topic_id if topic_id is not None else _tid(s, name),
                    "partitions": [
                        {
                            "partition": p,
                            "fetch_offset": o,
                            "current_leader_epoch": cle,
                            "last_fetched_epoch": lfe,
                            "log_start_offset": -1,
                            "partition_max_bytes": pmb,
                        }
                        for p, o, pmb, cle, lfe in parts
                    ],
                }
            ]
            if parts is not None
            else [],
            "forgotten_topics_data": [{"topic": name, "topic_id": _tid(s, name), "partitions": list(forgotten)}]
            if forgotten
            else [],
            "rack_id": "",
        },
        label=label,
    )


def P(partition, offset, pmb=1 << 20, cle=-1, lfe=-1):
    return (partition, offset, pmb, cle, lfe)


def _session(s, v):
    first = _fetch(s, v, [P(0, 0)], epoch=0, label="open")
    sid = getattr(first, "session_id", 0)
    _fetch(s, v, [], session_id=sid, epoch=1, label="incremental-empty")
    _fetch(s, v, [P(1, 0)], session_id=sid, epoch=2, label="add-partition")
    _fetch(s, v, [], session_id=sid, epoch=2, label="stale-epoch")
    _fetch(s, v, [], session_id=sid, epoch=3, forgotten=[1], label="forget")
    _fetch(s, v, [], session_id=sid, epoch=-1, label="close")
    _fetch(s, v, [P(0, 0)], session_id=123456, epoch=1, label="unknown-session")


for_each(
    "Fetch",
    {
        "from-start": lambda s, v: _fetch(s, v, [P(0, 0)]),
        "two-partitions": lambda s, v: _fetch(s, v, [P(0, 0), P(1, 0)]),
        "inside-batch": lambda s, v: _fetch(s, v, [P(0, 1)]),
        "second-batch": lambda s, v: _fetch(s, v, [P(0, 3)]),
        "at-high-watermark": lambda s, v: _fetch(s, v, [P(0, 5)]),
        "beyond-high-watermark": lambda s, v: _fetch(s, v, [P(0, 100)]),
        "negative-offset": lambda s, v: _fetch(s, v, [P(0, -1)]),
        "unknown-partition": lambda s, v: _fetch(s, v, [P(9, 0)]),
        "unknown-topic": lambda s, v: _fetch(s, v, [P(0, 0)], name=s.name("missing"), topic_id=RANDOM_ID),
        "tiny-partition-max-bytes": lambda s, v: _fetch(s, v, [P(0, 0, pmb=10)]),
        "tiny-max-bytes": lambda s, v: _fetch(s, v, [P(0, 0), P(1, 0)], max_bytes=10),
        "zero-partition-max-bytes": lambda s, v: _fetch(s, v, [P(0, 0, pmb=0)]),
        "read-committed": lambda s, v: _fetch(s, v, [P(0, 0)], isolation=1),
        "current-leader-epoch-0": lambda s, v: _fetch(s, v, [P(0, 0, cle=0)]),
        "current-leader-epoch-future": lambda s, v: _fetch(s, v, [P(0, 0, cle=5)]),
        "last-fetched-epoch-diverging": lambda s, v: _fetch(s, v, [P(0, 2, lfe=3)]),
        "no-topics": lambda s, v: _fetch(s, v, None),
        "internal-topic": lambda s, v: _fetch(s, v, [P(0, 1 << 40)], name=INTERNAL),
        "wait-min-bytes": lambda s, v: _fetch(s, v, [P(0, 5)], max_wait=50, min_bytes=1),
    },
    setup=_fetched,
)
case("Fetch", "sessions", setup=_fetched, min_version=7)(_session)


# -- ListOffsets ------------------------------------------------------------------


def _listed(s):
    s.create_topic(s.name(), partitions=2)
    s.produce(s.name(), 0, 3)
    s.produce(s.name(), 0, 2, first=3)


def _list(s, v, parts, *, name=None, isolation=0, replica=-1, label=""):
    return s.probe(
        "ListOffsets",
        v,
        {
            "replica_id": replica,
            "isolation_level": isolation,
            "timeout_ms": 1000,
            "topics": [
                {
                    "name": name or s.name(),
                    "partitions": [
                        {"partition_index": p, "timestamp": ts, "current_leader_epoch": cle, "max_num_offsets": 1}
                        for p, ts, cle in parts
                    ],
                }
            ]
            if parts is not None
            else [],
        },
        label=label,
    )


TS = 1_700_000_000_000
for_each(
    "ListOffsets",
    {
        "earliest": lambda s, v: _list(s, v, [(0, -2, -1)]),
        "latest": lambda s, v: _list(s, v, [(0, -1, -1)]),
        "latest-empty-partition": lambda s, v: _list(s, v, [(1, -1, -1)]),
        "max-timestamp": lambda s, v: _list(s, v, [(0, -3, -1)]),
        "earliest-local": lambda s, v: _list(s, v, [(0, -4, -1)]),
        "latest-tiered": lambda s, v: _list(s, v, [(0, -5, -1)]),
        "earliest-pending-upload": lambda s, v: _list(s, v, [(0, -6, -1)]),
        "unknown-special-timestamp": lambda s, v: _list(s, v, [(0, -9, -1)]),
        "by-timestamp": lambda s, v: _list(s, v, [(0, TS + 2, -1)]),
        "by-timestamp-exact-first": lambda s, v: _list(s, v, [(0, TS, -1)]),
        "by-timestamp-after-all": lambda s, v: _list(s, v, [(0, TS + 100, -1)]),
        "by-timestamp-empty-partition": lambda s, v: _list(s, v, [(1, TS, -1)]),
        "unknown-partition": lambda s, v: _list(s, v, [(0, -1, -1), (5, -1, -1)]),
        "unknown-topic": lambda s, v: _list(s, v, [(0, -1, -1)], name=s.name("missing")),
        "duplicate-partition": lambda s, v: _list(s, v, [(0, -1, -1), (0, -2, -1)]),
        "leader-epoch-current": lambda s, v: _list(s, v, [(0, -1, 0)]),
        "leader-epoch-future": lambda s, v: _list(s, v, [(0, -1, 4)]),
        "read-committed": lambda s, v: _list(s, v, [(0, -1, -1)], isolation=1),
        "debug-replica": lambda s, v: _list(s, v, [(0, -1, -1)], replica=-2),
        "follower-replica": lambda s, v: _list(s, v, [(0, -1, -1)], replica=1),
        "no-topics": lambda s, v: _list(s, v, None),
        "internal-topic": lambda s, v: _list(s, v, [(0, -2, -1)], name=INTERNAL),
    },
    setup=_listed,
)


# -- DeleteRecords ----------------------------------------------------------------


def _delete_records(s, v, parts, name=None, label=""):
    return s.probe(
        "DeleteRecords",
        v,
        {
            "timeout_ms": 5000,
            "topics": [
                {"name": name or s.name(), "partitions": [{"partition_index": p, "offset": o} for p, o in parts]}
            ],
        },
        label=label,
    )


def _fresh(s, v, parts, count=5):
    name = s.name(f"v{v}")
    s.create_topic(name, partitions=2)
    s.produce(name, 0, count)
    _delete_records(s, v, parts, name=name)
    _list(s, s.top("ListOffsets"), [(0, -2, -1)], name=name, label="after")


for_each(
    "DeleteRecords",
    {
        "to-offset": lambda s, v: _fresh(s, v, [(0, 2)]),
        "to-high-watermark": lambda s, v: _fresh(s, v, [(0, -1)]),
        "beyond-high-watermark": lambda s, v: _fresh(s, v, [(0, 9)]),
        "empty-partition": lambda s, v: _fresh(s, v, [(1, 0)]),
        "twice": lambda s, v: (
            _fresh(s, v, [(0, 3)]),
            _delete_records(s, v, [(0, 1)], name=s.name(f"v{v}"), label="backwards"),
        ),
        "unknown-partition": lambda s, v: _fresh(s, v, [(0, 1), (4, 1)]),
        "negative-offset": lambda s, v: _fresh(s, v, [(0, -7)]),
        "unknown-topic": lambda s, v: _delete_records(s, v, [(0, 1)], name=s.name("missing")),
        "internal-topic": lambda s, v: _delete_records(s, v, [(0, 0)], name=INTERNAL),
    },
)


# -- OffsetForLeaderEpoch ---------------------------------------------------------


def _ofle(s, v, parts, name=None, replica=-1):
    return s.probe(
        "OffsetForLeaderEpoch",
        v,
        {
            "replica_id": replica,
            "topics": [
                {
                    "topic": name or s.name(),
                    "partitions": [
                        {"partition": p, "current_leader_epoch": cle, "leader_epoch": le} for p, cle, le in parts
                    ],
                }
            ],
        },
    )


for_each(
    "OffsetForLeaderEpoch",
    {
        "epoch-0": lambda s, v: _ofle(s, v, [(0, -1, 0)]),
        "epoch-0-empty-partition": lambda s, v: _ofle(s, v, [(1, -1, 0)]),
        "future-epoch": lambda s, v: _ofle(s, v, [(0, -1, 3)]),
        "negative-epoch": lambda s, v: _ofle(s, v, [(0, -1, -1)]),
        "current-epoch-matches": lambda s, v: _ofle(s, v, [(0, 0, 0)]),
        "current-epoch-future": lambda s, v: _ofle(s, v, [(0, 2, 0)]),
        "unknown-partition": lambda s, v: _ofle(s, v, [(3, -1, 0)]),
        "unknown-topic": lambda s, v: _ofle(s, v, [(0, -1, 0)], name=s.name("missing")),
        "follower-replica": lambda s, v: _ofle(s, v, [(0, -1, 0)], replica=1),
    },
    setup=_listed,
)


# -- InitProducerId / DescribeProducers -------------------------------------------------


def _init(s, v, *, txn=None, timeout=60000, pid=-1, epoch=-1, label=""):
    return s.probe(
        "InitProducerId",
        v,
        {
            "transactional_id": txn,
            "transaction_timeout_ms": timeout,
            "producer_id": pid,
            "producer_epoch": epoch,
            "enable2_pc": False,
            "keep_prepared_txn": False,
        },
        label=label,
    )


def _bump(s, v):
    first = _init(s, v, label="first")
    _init(s, v, pid=first.producer_id, epoch=first.producer_epoch, label="bump")
    _init(s, v, pid=first.producer_id, epoch=first.producer_epoch + 5, label="wrong-epoch")
    _init(s, v, pid=424242, epoch=0, label="unknown-producer")


for_each(
    "InitProducerId",
    {
        "idempotent": lambda s, v: _init(s, v),
        "zero-timeout": lambda s, v: _init(s, v, timeout=0),
        "negative-timeout": lambda s, v: _init(s, v, timeout=-1),
    },
)
case("InitProducerId", "epoch-bump", min_version=3)(_bump)


def _described(s):
    _idempotent(s)
    s.produce(s.name(), records=_idem_batch(s, 0, count=3))


def _describe_producers(s, v, parts, name=None):
    return s.probe("DescribeProducers", v, {"topics": [{"name": name or s.name(), "partition_indexes": parts}]})


for_each(
    "DescribeProducers",
    {
        "after-idempotent-produce": lambda s, v: _describe_producers(s, v, [0]),
        "unknown-partition": lambda s, v: _describe_producers(s, v, [0, 6]),
        "unknown-topic": lambda s, v: _describe_producers(s, v, [0], name=s.name("missing")),
        "no-partitions": lambda s, v: _describe_producers(s, v, []),
        "internal-topic": lambda s, v: _describe_producers(s, v, [0], name=INTERNAL),
    },
    setup=_described,
)
