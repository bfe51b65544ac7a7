"""The streaming sink's exactly-once mode (option ``exactlyOnce``), read back with read_committed.

Each test replays a micro-batch the way a crash makes Spark replay it: by restarting the query from its
checkpoint after removing the batch's entry from the commit log (a crash after the tasks committed their
transactions but before Spark recorded the batch), or after a task failed in the middle of its write.
"""

from __future__ import annotations

import collections
import uuid

import pytest

from .test_read import produce


def read_topic(
    bootstrap: str, topic: str, isolation: str, *, partitions: int, expected: int, max_polls: int = 240
) -> list[tuple[bytes | None, bytes]]:
    """(key, value) of every record of ``topic`` with kafkawire's client; stops at ``expected`` plus one
    more poll so that a duplicate is seen."""
    from kafkawire.client import Consumer

    out = []
    with Consumer(bootstrap, isolation_level=isolation) as c:
        c.assign([(topic, p) for p in range(partitions)], offset="earliest")
        empty = 0
        while len(out) < expected and empty < max_polls:
            got = c.poll(timeout=0.5)
            if not got:
                empty += 1
            out += [(r.key, r.value) for r in got]
        out += [(r.key, r.value) for r in c.poll(timeout=1.0)]
    return out


def start_query(
    spark,
    broker,
    src: str,
    dst: str,
    checkpoint: str,
    *,
    per_trigger: int = 100,
    transform=None,
    extra: dict | None = None,
):
    df = (
        spark.readStream.format("kafkawire")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(per_trigger))
        .load()
    )
    out = transform(df) if transform is not None else df.selectExpr("key", "value")
    w = (
        out.writeStream.format("kafkawire")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", dst)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", checkpoint)
    )
    for k, v in (extra or {}).items():
        w = w.option(k, v)
    return w.trigger(availableNow=True).start()


def source_records(broker, n: int, partitions: int = 2) -> tuple[str, list]:
    src = broker.new_topic("eos-in", partitions=partitions)
    recs = [
        {"key": f"k{i % 13}".encode(), "value": f"v{i}".encode(), "headers": None, "timestamp": 1_700_000_000_000 + i}
        for i in range(n)
    ]
    produce(broker, src, recs)
    return src, recs


def assert_once(broker, dst: str, recs: list, partitions: int) -> None:
    got = read_topic(broker.bootstrap, dst, "read_committed", partitions=partitions, expected=len(recs))
    want = collections.Counter((r["key"], r["value"]) for r in recs)
    have = collections.Counter(got)
    dups = {k: c for k, c in have.items() if c > 1}
    missing = [k for k in want if k not in have]
    assert not dups and not missing, f"{len(dups)} duplicated, {len(missing)} missing of {len(want)}"
    assert have == want


def marker(broker, group: str, tp) -> int | None:
    from kafkawire.spark.kafka_access import committed_batch

    return committed_batch({"bootstrap.servers": broker.bootstrap}, group, tp)


def test_every_row_once_and_the_markers(spark, broker, tmp_path):
    src, recs = source_records(broker, 300)
    dst = broker.new_topic("eos-out", partitions=3)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    q = start_query(spark, broker, src, dst, str(tmp_path / "ck"), extra={"transactionalIdPrefix": prefix})
    assert q.awaitTermination(180)
    assert q.exception() is None
    batches = [p["batchId"] for p in q.recentProgress if p["numInputRows"]]
    assert len(batches) == 3  # 300 records, 100 per trigger
    assert_once(broker, dst, recs, 3)
    # each Spark partition (one per source partition here) recorded the last batch it wrote
    for part in (0, 1):
        assert marker(broker, f"{prefix}-p{part}", (dst, 0)) == max(batches) + 1


def test_replayed_batch_writes_nothing_new(spark, broker, tmp_path):
    src, recs = source_records(broker, 200)
    dst = broker.new_topic("eos-out", partitions=2)
    ck = tmp_path / "ck"
    q = start_query(spark, broker, src, dst, str(ck))
    assert q.awaitTermination(180) and q.exception() is None
    last = max(int(f.name) for f in (ck / "commits").iterdir() if f.name.isdigit())
    # the crash between the transactions' commit and Spark's: the batch is not in the commit log
    (ck / "commits" / str(last)).unlink()
    (ck / "commits" / f".{last}.crc").unlink(missing_ok=True)
    q = start_query(spark, broker, src, dst, str(ck))
    assert q.awaitTermination(180) and q.exception() is None
    replayed = [p for p in q.recentProgress if p["batchId"] == last]
    assert replayed and replayed[0]["numInputRows"] > 0  # Spark did run the batch again
    assert_once(broker, dst, recs, 2)
    # not even aborted records: the replayed tasks found their markers and wrote nothing
    raw = read_topic(broker.bootstrap, dst, "read_uncommitted", partitions=2, expected=len(recs))
    assert len(raw) == len(recs)


def test_task_failing_mid_write_leaves_no_duplicate(spark, broker, tmp_path):
    """A task fails in the middle of its write (a UDF raises on row 450 of 600, the writer gets rows in
    Arrow batches of 50); the query restarts from its checkpoint and the batch runs again (local mode does
    not retry tasks): what the first attempt sent is aborted (by the attempt, or by the retry's
    init_transactions fencing it), so read_committed sees each record once. The kill test
    (test_exactly_once_kill.py) covers attempts that die with their transaction open."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    src, recs = source_records(broker, 600, partitions=1)
    dst = broker.new_topic("eos-out", partitions=1)
    flag = tmp_path / "failed-once"

    def fail_once(value: bytes) -> bytes:
        import os

        if value == b"v450" and not os.path.exists(flag):
            open(flag, "w").close()
            raise RuntimeError("injected failure in the middle of the write")
        return value

    udf = F.udf(fail_once, BinaryType())
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        q = start_query(
            spark,
            broker,
            src,
            dst,
            str(tmp_path / "ck"),
            per_trigger=600,
            transform=lambda df: df.select("key", udf("value").alias("value")),
        )
        with pytest.raises(Exception, match="injected failure"):
            q.awaitTermination(180)
        assert flag.exists()
        q = start_query(
            spark,
            broker,
            src,
            dst,
            str(tmp_path / "ck"),
            per_trigger=600,
            transform=lambda df: df.select("key", udf("value").alias("value")),
        )
        assert q.awaitTermination(180) and q.exception() is None
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert_once(broker, dst, recs, 1)
