"""The ``kafkawire`` data source: batch and streaming reads, batch and streaming writes.

Writes are at least once by default. A streaming write with the option ``exactlyOnce=true`` is exactly
once for read_committed consumers of the output:

* each task of a micro-batch writes its rows in one Kafka transaction, with the transactional id
  ``<prefix>-p<Spark partition id>``; the prefix is ``kafkawire-spark-<query id>`` (the query id is kept
  in the checkpoint, so a restarted query has the same ids) or the option ``transactionalIdPrefix``;
* before writing, ``init_transactions`` fences every earlier producer with that id (a failed attempt, a
  zombie of a killed driver) and aborts the transaction it left open;
* the transaction also commits a marker: for the consumer group named like the transactional id, the
  offset ``batch id + 1`` of partition 0 of the first topic the task writes, with the query, batch and
  partition as the offset's metadata. It becomes visible with the records or not at all;
* a task first reads its marker (after the fencing, so no earlier attempt can still commit): a marker
  past the batch means this part of the batch was committed before (the tasks committed, then Spark did
  not record the batch: a driver crash, a failed task elsewhere) and the task writes nothing.

So a task whose transaction committed is skipped when Spark replays the batch, and one whose transaction
did not commit is aborted and written again. Limits: the rows Spark gives a (batch, partition) must be the
same when the batch is replayed (true of the kafkawire source, which replays the offset ranges in the
checkpoint, with deterministic transformations; a nondeterministic query can lose or repeat rows); each
task's part is atomic, not the whole micro-batch (a read_committed consumer can see some partitions of a
batch before the others, and those of a failed batch before its replay); read_uncommitted consumers see
aborted records; a task left open by a killed run whose partition no later run writes holds back
read_committed consumers of its partitions until ``kafka.transaction.timeout.ms`` (60 s by default).
Batch writes (``write``) do not take the option: a batch job has no id to find its markers by again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from . import kafka_access
from .options import EARLIEST, LATEST, KafkaWireOptionError, SourceOptions, parse_sink, parse_source
from .schema import check_sink_schema, read_schema

log = logging.getLogger("kafkawire.spark")

# ---------------------------------------------------------------------------------------------
# offsets: {(topic, partition): offset} inside, Spark's JSON shape {"topic": {"0": 23}} outside


def to_json_offsets(offsets: dict) -> dict:
    out: dict = {}
    for (t, p), off in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(off)
    return out


def from_json_offsets(data: dict) -> dict:
    return {(t, int(p)): int(off) for t, parts in (data or {}).items() for p, off in parts.items()}


@dataclass(frozen=True)
class KafkaRange(InputPartition):
    """One Spark task: offsets ``start`` (inclusive) to ``end`` (exclusive) of one partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def split_ranges(ranges: list, min_partitions: int | None, max_records: int | None) -> list:
    """Split offset ranges so there are at least ``min_partitions`` tasks and none over ``max_records``.

    Big ranges get more pieces, in proportion to their share of all records.
    """
    ranges = [r for r in ranges if r.size > 0]
    out = []
    total = sum(r.size for r in ranges)
    counts = [1] * len(ranges)
    if min_partitions and len(ranges) < min_partitions and total:
        # largest-remainder apportionment: the pieces add up to min_partitions (rounding each
        # share on its own can fall short of it)
        shares = [r.size * min_partitions / total for r in ranges]
        counts = [max(1, int(x)) for x in shares]
        by_remainder = sorted(range(len(ranges)), key=lambda i: (-(shares[i] - int(shares[i])), i))
        for i in by_remainder:
            if sum(counts) >= min_partitions:
                break
            if counts[i] < ranges[i].size:
                counts[i] += 1
    for r, pieces in zip(ranges, counts):
        if max_records:
            pieces = max(pieces, -(-r.size // max_records))
        pieces = min(pieces, r.size)
        for i in range(pieces):
            lo = r.start + r.size * i // pieces
            hi = r.start + r.size * (i + 1) // pieces
            out.append(KafkaRange(r.topic, r.partition, lo, hi))
    return out


def rate_limit(start: dict, latest: dict, limit: int) -> dict:
    """End offsets reading at most ``limit`` records in all, shared in proportion to each partition's lag."""
    lags = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(lags.values())
    if total <= limit:
        return dict(latest)
    share = {tp: lag * limit // total for tp, lag in lags.items()}
    left = limit - sum(share.values())
    # hand out what rounding kept back, largest remainders first (deterministic order)
    by_rest = sorted(lags, key=lambda tp: (-(lags[tp] * limit % total), tp))
    for tp in by_rest:
        if left <= 0:
            break
        if share[tp] < lags[tp]:
            share[tp] += 1
            left -= 1
    return {tp: start.get(tp, latest[tp]) + share[tp] for tp in latest}


def resolve(admin: kafka_access.Admin, tps: list, spec, name: str, *, default_missing: int | None = None) -> dict:
    """Offsets for ``tps`` from ``"earliest"``/``"latest"`` or a JSON map (-2 earliest, -1 latest)."""
    if spec == "earliest":
        return admin.earliest(tps)
    if spec == "latest":
        return admin.latest(tps)
    known = set(tps)
    named = {(t, p) for t, parts in spec.items() for p in parts}
    unknown = sorted(named - known)
    if unknown:
        raise KafkaWireOptionError(
            f"option '{name}' names partitions that are not being read (or do not exist): {unknown}"
        )
    missing = sorted(known - named)
    if missing and default_missing is None:
        raise KafkaWireOptionError(f"option '{name}' must give an offset for every partition read; missing: {missing}")
    want = {tp: spec[tp[0]][tp[1]] if tp in named else default_missing for tp in tps}
    out = {tp: off for tp, off in want.items() if off >= 0}
    early = [tp for tp, off in want.items() if off == EARLIEST]
    late = [tp for tp, off in want.items() if off == LATEST]
    if early:
        out.update(admin.earliest(early))
    if late:
        out.update(admin.latest(late))
    return out


def starting_offsets(admin, tps: list, opts: SourceOptions) -> dict:
    """Where a read starts; the timestamp options win over ``startingOffsets``, as in Spark."""
    if opts.starting_timestamp is not None or opts.starting_by_timestamp is not None:
        if opts.starting_timestamp is not None:
            wanted = {tp: opts.starting_timestamp for tp in tps}
            name = "startingTimestamp"
        else:
            wanted = {}
            for t, parts in opts.starting_by_timestamp.items():
                for p, ts in parts.items():
                    if (t, p) not in set(tps):
                        raise KafkaWireOptionError(
                            f"option 'startingOffsetsByTimestamp' names {t}-{p}, which is not being read"
                        )
                    wanted[(t, p)] = ts
            missing = sorted(set(tps) - set(wanted))
            if missing:
                raise KafkaWireOptionError(
                    f"option 'startingOffsetsByTimestamp' must give a timestamp for every partition read; "
                    f"missing: {missing}"
                )
            name = "startingOffsetsByTimestamp"
        found = admin.for_timestamps(wanted)
        none = sorted(tp for tp, off in found.items() if off is None)
        out = {tp: off for tp, off in found.items() if off is not None}
        if none:
            if opts.timestamp_strategy == "error":
                raise kafka_access.KafkaAccessError(
                    f"{name}: no record at or after the timestamp in partitions {none}; set "
                    "'startingOffsetsByTimestampStrategy' to 'latest' to start those at the latest offset"
                )
            out.update(admin.latest(none))
        return out
    return resolve(admin, tps, opts.starting, "startingOffsets")


def ending_offsets(admin, tps: list, opts: SourceOptions) -> dict:
    """Where a batch read ends (exclusive); the timestamp options win over ``endingOffsets``, as in Spark.

    A timestamp ends a partition at its first record at or after it; with none, at the latest offset.
    """
    if opts.ending_timestamp is None and opts.ending_by_timestamp is None:
        return resolve(admin, tps, opts.ending, "endingOffsets")
    if opts.ending_timestamp is not None:
        wanted = {tp: opts.ending_timestamp for tp in tps}
    else:
        wanted = {}
        for t, parts in opts.ending_by_timestamp.items():
            for p, ts in parts.items():
                if (t, p) not in set(tps):
                    raise KafkaWireOptionError(
                        f"option 'endingOffsetsByTimestamp' names {t}-{p}, which is not being read"
                    )
                wanted[(t, p)] = ts
        missing = sorted(set(tps) - set(wanted))
        if missing:
            raise KafkaWireOptionError(
                f"option 'endingOffsetsByTimestamp' must give a timestamp for every partition read; missing: {missing}"
            )
    found = admin.for_timestamps(wanted)
    out = {tp: off for tp, off in found.items() if off is not None}
    none = [tp for tp, off in found.items() if off is None]
    if none:
        out.update(admin.latest(none))
    return out


def _read(opts: SourceOptions, part: KafkaRange):
    return kafka_access.read_range(
        opts.client_conf,
        part.topic,
        part.partition,
        part.start,
        part.end,
        include_headers=opts.include_headers,
        fail_on_data_loss=opts.fail_on_data_loss,
        max_records=opts.fetch_max_records,
    )


class KafkaBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions):
        self.opts = opts

    def partitions(self):
        opts = self.opts
        with kafka_access.Admin(opts.client_conf) as admin:
            tps = admin.partitions_of(opts.selection)
            if not tps:
                return []
            start = starting_offsets(admin, tps, opts)
            end = ending_offsets(admin, tps, opts)
        ranges = []
        for tp in tps:
            s, e = start[tp], end[tp]
            if s > e:
                raise kafka_access.KafkaAccessError(
                    f"{tp[0]}-{tp[1]}: the starting offset {s} is after the ending offset {e}"
                )
            ranges.append(KafkaRange(tp[0], tp[1], s, e))
        return split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)

    def read(self, partition):
        if not isinstance(partition, KafkaRange):  # Spark's placeholder when there is nothing to read
            return iter(())
        return _read(self.opts, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader; offsets are Spark's ``{"topic": {"partition": offset}}``, kept in the checkpoint."""

    def __init__(self, opts: SourceOptions):
        self.opts = opts
        self._admin = None
        self._target: dict | None = None  # Trigger.AvailableNow: do not read past these

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_admin"] = None
        return state

    @property
    def admin(self):
        if self._admin is None:
            self._admin = kafka_access.Admin(self.opts.client_conf)
        return self._admin

    def initialOffset(self) -> dict:
        tps = self.admin.partitions_of(self.opts.selection)
        return to_json_offsets(starting_offsets(self.admin, tps, self.opts))

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.admin.partitions_of(self.opts.selection)
        self._target = self.admin.latest(tps)

    def _current(self, start: dict) -> tuple[dict, dict]:
        """(start offsets for every partition now read, latest offsets), data loss checked."""
        tps = self.admin.partitions_of(self.opts.selection)
        if self._target is not None:
            tps = [tp for tp in tps if tp in self._target]
        gone = sorted(set(start) - set(tps))
        if gone and self._target is None:
            kafka_access.data_loss(
                f"partitions {gone} were being read but no longer exist", self.opts.fail_on_data_loss
            )
        latest = self.admin.latest(tps)
        if self._target is not None:
            latest = {tp: min(off, self._target[tp]) for tp, off in latest.items()}
        new = [tp for tp in tps if tp not in start]
        full = {tp: start[tp] for tp in tps if tp in start}
        if new:
            full.update(self.admin.earliest(new))
        for tp in tps:
            if latest[tp] < full[tp]:
                kafka_access.data_loss(
                    f"{tp[0]}-{tp[1]}: the latest offset {latest[tp]} is below the offset {full[tp]} already read "
                    "(was the topic recreated?)",
                    self.opts.fail_on_data_loss,
                )
                full[tp] = latest[tp]
        return full, latest

    def latestOffset(self, start: dict, limit) -> dict:
        begin, latest = self._current(from_json_offsets(start))
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, latest, int(limit.max_rows))
        else:
            end = latest
        # an offset never goes backwards, even when a partition went away
        return to_json_offsets(end)

    def reportLatestOffset(self):
        try:
            tps = self.admin.partitions_of(self.opts.selection)
            return to_json_offsets(self.admin.latest(tps))
        except Exception:  # only for the progress report
            return None

    def partitions(self, start: dict, end: dict):
        s, e = from_json_offsets(start), from_json_offsets(end)
        new = [tp for tp in e if tp not in s]
        if new:
            s.update(self.admin.earliest(new))
        ranges = [KafkaRange(t, p, min(s[(t, p)], off), off) for (t, p), off in sorted(e.items())]
        return split_ranges(ranges, self.opts.min_partitions, self.opts.max_records_per_partition)

    def read(self, partition):
        return _read(self.opts, partition)

    def commit(self, end: dict) -> None:
        pass  # offsets live in Spark's checkpoint, nothing to tell the broker

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


# ---------------------------------------------------------------------------------------------
# writes


@dataclass
class KafkaCommit(WriterCommitMessage):
    records: int


class KafkaBatchWriter(DataSourceArrowWriter):
    """Batch write, at least once: a task sends its rows and waits until every one is acknowledged."""

    def __init__(self, conf: dict, topic: str | None):
        self.conf = conf
        self.topic = topic

    def write(self, iterator):
        return KafkaCommit(kafka_access.write_batches(self.conf, self.topic, iterator))

    def commit(self, messages) -> None:
        total = sum(m.records for m in messages if m is not None)
        log.info("kafkawire: wrote %d records", total)

    def abort(self, messages) -> None:
        # what was acknowledged stays in Kafka: at least once, as with Spark's Kafka sink
        pass


# Spark sets these local properties on every task of a micro-batch (MicroBatchExecution, StreamExecution):
# the query id is kept in the checkpoint, so it is the same after a restart from it.
BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"


def transactional_id(prefix: str, partition: int) -> str:
    """The transactional id of one Spark partition of every micro-batch of a query.

    The same for every attempt of the task and every replay of the batch, so each one fences the one
    before (and aborts what it left open)."""
    return f"{prefix}-p{partition}"


def task_identity(prefix: str | None) -> tuple[str, int, int]:
    """(transactional id prefix, batch id, Spark partition id) of the running task of a micro-batch."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise kafka_access.KafkaAccessError("an exactly-once write runs inside a Spark task only")
    batch = ctx.getLocalProperty(BATCH_ID_PROPERTY)
    if batch is None:
        raise kafka_access.KafkaAccessError(
            f"exactlyOnce: the task has no '{BATCH_ID_PROPERTY}' property: not a micro-batch of a streaming query "
            "(continuous processing is not supported)"
        )
    if prefix is None:
        query = ctx.getLocalProperty(QUERY_ID_PROPERTY)
        if query is None:
            raise kafka_access.KafkaAccessError(
                f"exactlyOnce: the task has no '{QUERY_ID_PROPERTY}' property; set 'transactionalIdPrefix'"
            )
        prefix = f"kafkawire-spark-{query}"
    return prefix, int(batch), ctx.partitionId()


@dataclass
class KafkaTxnCommit(WriterCommitMessage):
    records: int
    skipped: bool
    transactional_id: str


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """Streaming write. At least once by default; with ``exactlyOnce``, each task's part of a micro-batch
    is one Kafka transaction that also commits a marker (see the module docstring)."""

    def __init__(self, conf: dict, topic: str | None, exactly_once: bool = False, prefix: str | None = None):
        self.conf = conf
        self.topic = topic
        self.exactly_once = exactly_once
        self.prefix = prefix

    def write(self, iterator):
        if not self.exactly_once:
            return KafkaCommit(kafka_access.write_batches(self.conf, self.topic, iterator))
        prefix, batch, partition = task_identity(self.prefix)
        txid = transactional_id(prefix, partition)
        sent, skipped = kafka_access.write_batches_exactly_once(
            self.conf,
            self.topic,
            iterator,
            transactional_id=txid,
            batch_id=batch,
            description=f"{prefix} batch {batch} partition {partition}",
        )
        return KafkaTxnCommit(sent, skipped, txid)

    def commit(self, messages, batchId: int) -> None:
        pass

    def abort(self, messages, batchId: int) -> None:
        pass


class KafkaWireDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("kafkawire")``, with Spark's Kafka options."""

    @classmethod
    def name(cls) -> str:
        return "kafkawire"

    def schema(self):
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return read_schema(include)

    def reader(self, schema: StructType):
        return KafkaBatchReader(parse_source(self.options, streaming=False))

    def streamReader(self, schema: StructType):
        return KafkaStreamReader(parse_source(self.options, streaming=True))

    def _sink(self, schema: StructType):
        opts = parse_sink(self.options)
        check_sink_schema(schema, opts.topic)
        return opts

    def writer(self, schema: StructType, overwrite: bool):
        opts = self._sink(schema)
        if opts.exactly_once:
            raise KafkaWireOptionError(
                "option 'exactlyOnce' is for streaming writes (writeStream); a batch write is at least once"
            )
        return KafkaBatchWriter(opts.client_conf, opts.topic)

    def streamWriter(self, schema: StructType, overwrite: bool):
        opts = self._sink(schema)
        return KafkaStreamWriter(opts.client_conf, opts.topic, opts.exactly_once, opts.transactional_id_prefix)
