"""Transactions: the transaction coordinator's APIs (InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions, ListTransactions), FindCoordinator for a
transactional id, and the transactional side of Produce and OffsetFetch.

Each version of a case uses transactional ids of its own (``_tx``), so the steps of one version never see
another's transaction. Kafka writes its markers after answering EndTxn, so a step that depends on a
completed transaction first waits (set-up calls only) until DescribeTransactions says it is complete.
"""

from __future__ import annotations

import time

from ..session import SetupError
from . import for_each

TIMEOUT_MS = 60000
RETRIABLE = (14, 15, 16, 51)  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS

# Kafka checks a transactional Produce or TxnOffsetCommit with its transaction coordinator through one
# AddPartitionsToTxn call per coordinator that batches every check pending at that moment, and the whole
# batch takes the error mapping of the request that opened it. A Produce v9 whose partition was not added
# answers INVALID_TXN_STATE alone, but TRANSACTION_ABORTABLE (the v11+ answer) when its check rides in a
# batch a concurrent v11 request opened: CI saw that once. Cases that make such checks share this lane, so
# the two jobs never run two of them at once and each version's answer is its own.
TXN_VERIFICATION = "txn-verification"


def _tx(s, v, suffix=""):
    return s.name(f"tx{v}{suffix}")


def _topic(s):
    return s.name("t")


def _ready(s):
    """__transaction_state (Kafka creates it at the first FindCoordinator for a transactional id) and a topic."""
    s.coordinator_ready(s.name("tx"), key_type=1)
    s.create_topic(_topic(s), 2)


def _ready_group(s):
    _ready(s)
    s.coordinator_ready(s.name("g"))


def _init(s, tid, timeout=TIMEOUT_MS):
    """(producer id, epoch) for ``tid``, once the coordinator answers."""
    deadline = time.monotonic() + 30
    while True:
        a = s.call(
            "InitProducerId",
            None,
            {"transactional_id": tid, "transaction_timeout_ms": timeout, "producer_id": -1, "producer_epoch": -1},
        )
        if a.error_code == 0:
            return a.producer_id, a.producer_epoch
        if a.error_code not in RETRIABLE or time.monotonic() > deadline:
            raise SetupError(f"InitProducerId {tid}: error {a.error_code}")
        time.sleep(0.1)


def _add_data(tid, pid, epoch, topics):
    return {
        "v3_and_below_transactional_id": tid,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics],
    }


def _add(s, tid, pid, epoch, partitions=(0,)):
    a = s.call("AddPartitionsToTxn", 3, _add_data(tid, pid, epoch, [(_topic(s), list(partitions))]))
    codes = [p.partition_error_code for t in a.results_by_topic_v3_and_below for p in t.results_by_partition]
    if any(codes):
        raise SetupError(f"AddPartitionsToTxn {tid}: {codes}")


def _ongoing(s, v, suffix="", partitions=(0,)):
    """A transactional id of this version with a transaction holding ``partitions``."""
    tid = _tx(s, v, suffix)
    pid, epoch = _init(s, tid)
    _add(s, tid, pid, epoch, partitions)
    return tid, pid, epoch


def _state(s, tid):
    a = s.call("DescribeTransactions", 0, {"transactional_ids": [tid]})
    return a.transaction_states[0].transaction_state


def _wait_complete(s, tid):
    if not s.wait_until(lambda: _state(s, tid) in ("CompleteCommit", "CompleteAbort", "Empty"), timeout=10):
        raise SetupError(f"transaction {tid} did not complete")


def _end(s, tid, pid, epoch, commit, version=4):
    a = s.call(
        "EndTxn", version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": commit}
    )
    if a.error_code:
        raise SetupError(f"EndTxn {tid}: error {a.error_code}")
    _wait_complete(s, tid)
    return a


# -- FindCoordinator ---------------------------------------------------------------------------------

for_each(
    "FindCoordinator",
    {
        "transaction": lambda s, v: s.probe(
            "FindCoordinator", v, {"key": s.name("tx"), "key_type": 1, "coordinator_keys": [s.name("tx")]}
        ),
        "transaction-empty-id": lambda s, v: s.probe(
            "FindCoordinator", v, {"key": "", "key_type": 1, "coordinator_keys": ["", s.name("tx")]}
        ),
    },
    setup=lambda s: s.coordinator_ready(s.name("tx"), key_type=1),
    min_version=1,
)


# -- InitProducerId -------------------------------------------------------------------------------------


def _init_probe(s, v, tid, timeout=TIMEOUT_MS, pid=-1, epoch=-1, label=""):
    return s.probe(
        "InitProducerId",
        v,
        {"transactional_id": tid, "transaction_timeout_ms": timeout, "producer_id": pid, "producer_epoch": epoch},
        label=label,
    )


def _init_new(s, v):
    tid = _tx(s, v)
    _init(s, _tx(s, v, "warm"))  # the coordinator is loaded (Kafka may answer NOT_COORDINATOR at first)
    return _init_probe(s, v, tid)


def _init_twice(s, v):
    tid = _tx(s, v)
    _init(s, tid)
    return _init_probe(s, v, tid)


def _init_stale(s, v):
    tid = _tx(s, v)
    pid, epoch = _init(s, tid)
    _init(s, tid)
    return _init_probe(s, v, tid, pid=pid, epoch=epoch + 5)


def _init_kip360_retry(s, v):
    tid = _tx(s, v)
    pid, epoch = _init(s, tid)
    return _init_probe(s, v, tid, pid=pid, epoch=epoch, label="bump")


def _init_ongoing(s, v):
    tid, _, _ = _ongoing(s, v)
    return _init_probe(s, v, tid)


for_each(
    "InitProducerId",
    {
        "transactional-new": _init_new,
        "transactional-again": _init_twice,
        "transactional-empty-id": lambda s, v: _init_probe(s, v, ""),
        "transactional-timeout-too-large": lambda s, v: _init_probe(s, v, _tx(s, v), timeout=900001),
        "transactional-timeout-zero": lambda s, v: _init_probe(s, v, _tx(s, v), timeout=0),
        "transactional-ongoing": _init_ongoing,
    },
    setup=_ready,
)
for_each(
    "InitProducerId",
    {
        "transactional-stale-producer": _init_stale,
        "transactional-kip360-bump": _init_kip360_retry,
    },
    setup=_ready,
    min_version=3,
)


# -- AddPartitionsToTxn ---------------------------------------------------------------------------------


def _apt(s, v, tid, pid, epoch, topics, label=""):
    return s.probe("AddPartitionsToTxn", v, _add_data(tid, pid, epoch, topics), label=label)


def _apt_add(s, v, again=False):
    tid = _tx(s, v)
    pid, epoch = _init(s, tid)
    _apt(s, v, tid, pid, epoch, [(_topic(s), [0, 1])], label="add")
    if again:
        _apt(s, v, tid, pid, epoch, [(_topic(s), [1])], label="again")


def _apt_wrong(s, v, what):
    tid = _tx(s, v)
    pid, epoch = _init(s, tid)
    if what == "epoch":
        epoch += 1
    elif what == "producer":
        pid += 1
    elif what == "id":
        tid = _tx(s, v, "unknown")
    return _apt(s, v, tid, pid, epoch, [(_topic(s), [0])])


def _apt_unknown(s, v, topic_suffix, partition):
    tid = _tx(s, v)
    pid, epoch = _init(s, tid)
    return _apt(s, v, tid, pid, epoch, [(s.name(topic_suffix), [partition])])


def _apt_preparing_or_complete(s, v):
    tid, pid, epoch = _ongoing(s, v)
    _end(s, tid, pid, epoch, True)
    return _apt(s, v, tid, pid, epoch, [(_topic(s), [1])], label="after-commit")


for_each(
    "AddPartitionsToTxn",
    {
        "add": lambda s, v: _apt_add(s, v),
        "add-again": lambda s, v: _apt_add(s, v, again=True),
        "wrong-epoch": lambda s, v: _apt_wrong(s, v, "epoch"),
        "wrong-producer": lambda s, v: _apt_wrong(s, v, "producer"),
        "unknown-transactional-id": lambda s, v: _apt_wrong(s, v, "id"),
        "unknown-topic": lambda s, v: _apt_unknown(s, v, "missing", 0),
        "unknown-partition": lambda s, v: _apt_unknown(s, v, "t", 7),
        "after-commit": _apt_preparing_or_complete,
    },
    setup=_ready,
    max_version=3,
)


def _batched(s, v, verify_only, added=True):
    tid = _tx(s, v)
    pid, epoch = _init(s, tid)
    if added:
        _add(s, tid, pid, epoch, (0,))
    return s.probe(
        "AddPartitionsToTxn",
        v,
        {
            "transactions": [
                {
                    "transactional_id": tid,
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "verify_only": verify_only,
                    "topics": [{"name": _topic(s), "partitions": [0]}],
                }
            ]
        },
    )


def _batched_unknown(s, v):
    return s.probe(
        "AddPartitionsToTxn",
        v,
        {
            "transactions": [
                {
                    "transactional_id": _tx(s, v, "unknown"),
                    "producer_id": 1,
                    "producer_epoch": 0,
                    "verify_only": True,
                    "topics": [{"name": _topic(s), "partitions": [0]}],
                }
            ]
        },
    )


for_each(
    "AddPartitionsToTxn",
    {
        "batched-verify-added": lambda s, v: _batched(s, v, True),
        "batched-verify-not-added": lambda s, v: _batched(s, v, True, added=False),
        "batched-add": lambda s, v: _batched(s, v, False, added=False),
        "batched-unknown-id": _batched_unknown,
    },
    setup=_ready,
    min_version=4,
)


# -- AddOffsetsToTxn ------------------------------------------------------------------------------------


def _aot(s, v, what=None):
    tid = _tx(s, v)
    pid, epoch = _init(s, tid)
    if what == "epoch":
        epoch += 1
    elif what == "producer":
        pid += 1
    elif what == "id":
        tid = _tx(s, v, "unknown")
    return s.probe(
        "AddOffsetsToTxn",
        v,
        {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "group_id": s.name("g")},
    )


for_each(
    "AddOffsetsToTxn",
    {
        "add": lambda s, v: _aot(s, v),
        "wrong-epoch": lambda s, v: _aot(s, v, "epoch"),
        "wrong-producer": lambda s, v: _aot(s, v, "producer"),
        "unknown-transactional-id": lambda s, v: _aot(s, v, "id"),
    },
    setup=_ready_group,
)


# -- EndTxn ---------------------------------------------------------------------------------------------


def _end_probe(s, v, tid, pid, epoch, commit, label=""):
    return s.probe(
        "EndTxn",
        v,
        {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": commit},
        label=label,
    )


def _end_case(s, v, commit):
    tid, pid, epoch = _ongoing(s, v)
    _end_probe(s, v, tid, pid, epoch, commit)
    _wait_complete(s, tid)


def _end_retry(s, v, commit_again):
    tid, pid, epoch = _ongoing(s, v)
    _end(s, tid, pid, epoch, True, version=v)
    _end_probe(s, v, tid, pid, epoch, commit_again, label="again")


def _end_wrong(s, v, what):
    tid, pid, epoch = _ongoing(s, v)
    if what == "epoch":
        epoch += 1
    elif what == "producer":
        pid += 1
    elif what == "id":
        tid = _tx(s, v, "unknown")
    return _end_probe(s, v, tid, pid, epoch, True)


def _end_nothing(s, v, commit):
    tid = _tx(s, v)
    pid, epoch = _init(s, tid)
    return _end_probe(s, v, tid, pid, epoch, commit)


for_each(
    "EndTxn",
    {
        "commit": lambda s, v: _end_case(s, v, True),
        "abort": lambda s, v: _end_case(s, v, False),
        "commit-retried": lambda s, v: _end_retry(s, v, True),
        "abort-after-commit": lambda s, v: _end_retry(s, v, False),
        "wrong-epoch": lambda s, v: _end_wrong(s, v, "epoch"),
        "wrong-producer": lambda s, v: _end_wrong(s, v, "producer"),
        "unknown-transactional-id": lambda s, v: _end_wrong(s, v, "id"),
        "commit-nothing": lambda s, v: _end_nothing(s, v, True),
        "abort-nothing": lambda s, v: _end_nothing(s, v, False),
    },
    setup=_ready,
)


# -- TxnOffsetCommit ------------------------------------------------------------------------------------


def _toc_probe(s, v, tid, pid, epoch, *, topic=None, generation=-1, member="", label=""):
    name = topic or _topic(s)
    topic_id = s.tid(name) if topic is None else None
    return s.probe(
        "TxnOffsetCommit",
        v,
        {
            "transactional_id": tid,
            "group_id": s.name("g"),
            "producer_id": pid,
            "producer_epoch": epoch,
            "generation_id_or_member_epoch": generation,
            "member_id": member,
            "group_instance_id": None,
            "topics": [
                {
                    "name": name,
                    "topic_id": topic_id,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 5,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "m",
                        }
                    ],
                }
            ],
        },
        label=label,
    )


def _toc(s, v, *, add_offsets=True, epoch_delta=0, **kw):
    tid = _tx(s, v)
    pid, epoch = _init(s, tid)
    if add_offsets:
        a = s.call(
            "AddOffsetsToTxn",
            None,
            {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "group_id": s.name("g")},
        )
        if a.error_code:
            raise SetupError(f"AddOffsetsToTxn: {a.error_code}")
    return _toc_probe(s, v, tid, pid, epoch + epoch_delta, **kw)


for_each(
    "TxnOffsetCommit",
    {
        "commit": lambda s, v: _toc(s, v),
        "not-added": lambda s, v: _toc(s, v, add_offsets=False),
        "wrong-epoch": lambda s, v: _toc(s, v, epoch_delta=1),
    },
    setup=_ready_group,
    lane=TXN_VERIFICATION,
)
for_each(
    "TxnOffsetCommit",
    {
        "unknown-topic": lambda s, v: _toc(s, v, topic=s.name("missing")),
    },
    setup=_ready_group,
    max_version=5,
    lane=TXN_VERIFICATION,
)
for_each(
    "TxnOffsetCommit",
    {
        "unknown-member": lambda s, v: _toc(s, v, generation=3, member="nobody"),
    },
    setup=_ready_group,
    min_version=3,
    lane=TXN_VERIFICATION,
)


# -- DescribeTransactions / ListTransactions ---------------------------------------------------------------


def _describe(s, v, ids):
    return s.probe("DescribeTransactions", v, {"transactional_ids": ids})


def _describe_complete(s, v):
    tid, pid, epoch = _ongoing(s, v)
    _end(s, tid, pid, epoch, False)
    return _describe(s, v, [tid])


for_each(
    "DescribeTransactions",
    {
        "ongoing": lambda s, v: _describe(s, v, [_ongoing(s, v)[0]]),
        "empty": lambda s, v: (_init(s, _tx(s, v)), _describe(s, v, [_tx(s, v)])),
        "complete-abort": _describe_complete,
        "unknown": lambda s, v: _describe(s, v, [_tx(s, v, "unknown")]),
    },
    setup=_ready,
)


def _list(s, v, states=(), pids=None, duration=-1, pattern=None, **kw):
    tid, pid, _ = _ongoing(s, v)
    return s.probe(
        "ListTransactions",
        v,
        {
            "state_filters": list(states),
            "producer_id_filters": [pid] if pids is None else pids,
            "duration_filter": duration,
            "transactional_id_pattern": pattern,
        },
        **kw,
    )


for_each(
    "ListTransactions",
    {
        "by-producer": lambda s, v: _list(s, v),
        "by-state": lambda s, v: _list(s, v, states=["Ongoing"]),
        "other-state": lambda s, v: _list(s, v, states=["CompleteCommit"]),
        "unknown-state": lambda s, v: _list(s, v, states=["Ongoing", "Sleeping"]),
    },
    setup=_ready,
)
for_each(
    "ListTransactions",
    {
        "duration-hour": lambda s, v: _list(s, v, duration=3_600_000),
    },
    setup=_ready,
    min_version=1,
)
for_each(
    "ListTransactions",
    {
        "pattern": lambda s, v: _list(s, v, pids=[], pattern=_tx(s, v).replace("-", ".") + "$"),
        "bad-pattern": lambda s, v: _list(s, v, pids=[], pattern="("),
    },
    setup=_ready,
    min_version=2,
)


# -- Produce and OffsetFetch in a transaction ------------------------------------------------------------


def _txn_produce(s, v, *, added):
    tid = _tx(s, v)
    pid, epoch = _init(s, tid)
    if added:
        _add(s, tid, pid, epoch, (0,))
    batch = s.batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True)
    name = _topic(s)
    s.probe(
        "Produce",
        v,
        {
            "transactional_id": tid,
            "acks": -1,
            "timeout_ms": 30000,
            "topic_data": [{"name": name, "topic_id": s.tid(name), "partition_data": [{"index": 0, "records": batch}]}],
        },
    )
    return s.probe("DescribeTransactions", 0, {"transactional_ids": [tid]}, label="state")


for_each(
    "Produce",
    {
        "transactional-added": lambda s, v: _txn_produce(s, v, added=True),
        # v3-10 INVALID_TXN_STATE, v11 TRANSACTION_ABORTABLE, v12+ the partition joins the transaction
        "transactional-not-added": lambda s, v: _txn_produce(s, v, added=False),
    },
    setup=_ready,
    min_version=3,
    lane=TXN_VERIFICATION,
)


def _unstable(s, v):
    tid = _tx(s, v)
    pid, epoch = _init(s, tid)
    s.call(
        "AddOffsetsToTxn",
        None,
        {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "group_id": s.name("g")},
    )
    name = _topic(s)
    a = s.call(
        "TxnOffsetCommit",
        3,
        {
            "transactional_id": tid,
            "group_id": s.name("g"),
            "producer_id": pid,
            "producer_epoch": epoch,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 5,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        },
    )
    if a.topics[0].partitions[0].error_code:
        raise SetupError(f"TxnOffsetCommit: {a.topics[0].partitions[0].error_code}")
    return s.probe(
        "OffsetFetch",
        v,
        {
            "group_id": s.name("g"),
            "require_stable": True,
            "topics": [{"name": _topic(s), "partition_indexes": [0]}],
            "groups": [
                {
                    "group_id": s.name("g"),
                    "member_id": None,
                    "member_epoch": -1,
                    "topics": [{"name": _topic(s), "topic_id": s.tid(_topic(s)), "partition_indexes": [0]}],
                }
            ],
        },
        label="require-stable",
    )


for_each(
    "OffsetFetch",
    {
        "transaction-pending": _unstable,
    },
    setup=_ready_group,
    min_version=7,
    lane=TXN_VERIFICATION,
)
