"""Every Kafka call the Spark data source makes goes through this module, on ``kafkawire.client``.

* :class:`Admin` - topics and partitions, earliest/latest/by-timestamp offsets (driver side);
* :func:`read_range` - the records of one partition between two offsets, as Arrow
  record batches in the data source's read schema (executor side, the hot path:
  the client decodes fetched record batches straight into Arrow columns, and this
  module only reorders and casts columns, in C);
* :class:`ArrowProducer` / :func:`write_batches` - Arrow batches with Spark's sink
  columns into the client's producer (executor side).

Options: every ``kafka.<name>`` option of the data source arrives here as ``<name>``
(Java client spelling) and is mapped to the client's keyword arguments; names the
client does not have are logged and ignored, as the Java client does with unknown configs.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from .schema import arrow_read_schema

log = logging.getLogger("kafkawire.spark")


class KafkaAccessError(RuntimeError):
    """A Kafka call failed; the message says what was asked and what the broker answered."""


class UnknownTopicError(KafkaAccessError):
    pass


class DataLossError(KafkaAccessError):
    pass


def data_loss(message: str, fail: bool) -> None:
    """Raise or warn, as the option ``failOnDataLoss`` says."""
    if fail:
        raise DataLossError(
            message + ". Some data may have been lost because it is no longer available in Kafka (deleted by "
            "retention or the topic was recreated). If you want the query to go on with what is left, "
            "set the option 'failOnDataLoss' to 'false'."
        )
    log.warning("%s; going on since failOnDataLoss is false", message)


# -- client settings ---------------------------------------------------------------------------


def _ms(v):
    return float(v) / 1000.0


def _int(v):
    return int(v)


def _bool(v):
    return str(v).strip().lower() in ("true", "1", "yes")


_COMMON = {
    "client.id": ("client_id", str),
    "request.timeout.ms": ("request_timeout", _ms),
    "metadata.max.age.ms": ("metadata_max_age", _ms),
    "socket.connection.setup.timeout.ms": ("connect_timeout", _ms),
}
_CONSUMER = {
    "fetch.max.wait.ms": ("fetch_max_wait_ms", _int),
    "fetch.min.bytes": ("fetch_min_bytes", _int),
    "fetch.max.bytes": ("fetch_max_bytes", _int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", _int),
    "isolation.level": ("isolation_level", str),
    "check.crcs": ("check_crcs", _bool),
}
_PRODUCER = {
    "acks": ("acks", str),
    "compression.type": ("compression", str),
    "batch.size": ("batch_size", _int),
    "linger.ms": ("linger_ms", float),
    "enable.idempotence": ("enable_idempotence", _bool),
    "delivery.timeout.ms": ("delivery_timeout", _ms),
    "buffer.memory": ("buffer_memory", _int),
    "transaction.timeout.ms": ("transaction_timeout_ms", _int),
}
_IGNORED_QUIETLY = {"bootstrap.servers", "security.protocol"}


def client_kwargs(conf: dict, role: str) -> tuple[str, dict]:
    """(bootstrap, keyword arguments) of a kafkawire client for ``role`` admin/consumer/producer."""
    from ..security.client import ClientSecurity, is_security_key

    # TLS and SASL: the kafka.-prefixed security options (Spark's convention) go to the client as they are,
    # checked here so that a bad one names its option before any task runs
    security = {name: raw for name, raw in conf.items() if is_security_key(name)}
    try:
        ClientSecurity.from_config(security)
    except ValueError as exc:
        raise KafkaAccessError(f"kafka.* security options: {exc}") from None
    table = dict(_COMMON)
    if role == "consumer":
        table.update(_CONSUMER)
    elif role == "producer":
        table.update(_PRODUCER)
    kwargs: dict = {}
    for name, raw in conf.items():
        if name in table:
            key, conv = table[name]
            try:
                kwargs[key] = conv(raw)
            except ValueError:
                raise KafkaAccessError(f"option 'kafka.{name}' has an invalid value {raw!r}") from None
        elif name in security:
            continue
        elif name not in _IGNORED_QUIETLY and name not in _COMMON and name not in _CONSUMER and name not in _PRODUCER:
            log.warning("option 'kafka.%s' is not a setting of the kafkawire client; ignored", name)
    if role == "producer":
        acks = kwargs.get("acks")
        if acks is not None and acks not in ("all", "-1") and "enable_idempotence" not in kwargs:
            kwargs["enable_idempotence"] = False  # idempotence needs acks=all, as in the Java client
    if role == "admin":
        kwargs = {
            k: v
            for k, v in kwargs.items()
            if k in ("client_id", "request_timeout", "metadata_max_age", "connect_timeout")
        }
    if security:
        kwargs["security"] = security
    return conf["bootstrap.servers"], kwargs


def _errtext(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# A topic deleted while a query reads it is seen by whichever driver call comes first: the metadata
# (partitions_of), or, when a broker's metadata still lists it, the leader's answer to ListOffsets. Spark's
# connector fails the query with UnknownTopicOrPartitionException either way; so does this one, saying so.
_GONE = ("UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_ID")


def _gone(what: str, exc: BaseException) -> KafkaAccessError:
    """An UnknownTopicError for a broker's answer that the topic does not exist, else a KafkaAccessError."""
    if getattr(exc, "name", None) in _GONE:
        return UnknownTopicError(f"{what}: the topic(s) do not exist (any longer) on the broker(s): {_errtext(exc)}")
    return KafkaAccessError(f"{what}: {_errtext(exc)}")


# -- driver side -------------------------------------------------------------------------------


class Admin:
    """Driver-side metadata and offset look-ups."""

    def __init__(self, conf: dict):
        from kafkawire.client import Admin as ClientAdmin

        bootstrap, kwargs = client_kwargs(conf, "admin")
        kwargs.setdefault("client_id", "kafkawire-spark")
        self._isolation = 1 if str(conf.get("isolation.level", "")).replace("-", "_") == "read_committed" else 0
        try:
            self._admin = ClientAdmin(bootstrap, **kwargs)
        except Exception as exc:
            raise KafkaAccessError(f"could not connect to {bootstrap}: {_errtext(exc)}") from None
        self._bootstrap = bootstrap

    def close(self) -> None:
        try:
            self._admin.close()
        except Exception:  # closing a client that failed to connect
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def topics(self) -> dict[str, list[int]]:
        """All topics of the cluster (internal ones left out): {topic: sorted partitions}."""
        try:
            infos = self._admin.describe_topics()
        except Exception as exc:
            raise KafkaAccessError(f"could not fetch the metadata of {self._bootstrap}: {_errtext(exc)}") from None
        return {
            name: sorted(info.partitions)
            for name, info in infos.items()
            if not info.is_internal and not info.error_code and not name.startswith("__")
        }

    def partitions_of(self, selection) -> list[tuple[str, int]]:
        """The (topic, partition) pairs a topic selection stands for, sorted."""
        topics = self.topics()
        if selection.kind == "subscribe":
            missing = [t for t in selection.topics if t not in topics]
            if missing:
                raise UnknownTopicError(
                    f"topic(s) {', '.join(repr(t) for t in missing)} do not exist on the broker(s) "
                    f"{self._bootstrap} (subscribe={','.join(selection.topics)})"
                )
            return sorted((t, p) for t in selection.topics for p in topics[t])
        if selection.kind == "subscribePattern":
            rx = re.compile(selection.pattern)
            return sorted((t, p) for t, parts in topics.items() if rx.fullmatch(t) for p in parts)
        out = []
        for t, p in selection.assignment:
            if t not in topics:
                raise UnknownTopicError(
                    f"topic {t!r} of option 'assign' does not exist on the broker(s) {self._bootstrap}"
                )
            if p not in topics[t]:
                raise UnknownTopicError(
                    f"partition {p} of topic {t!r} (option 'assign') does not exist; the topic has "
                    f"partitions {topics[t]}"
                )
            out.append((t, p))
        return sorted(out)

    def _list(self, specs: dict) -> dict:
        if not specs:
            return {}
        try:
            found = self._admin.list_offsets(specs, isolation_level=self._isolation)
        except Exception as exc:
            raise _gone(f"could not list offsets of {sorted(specs)}", exc) from None
        return {tp: found[tp].offset for tp in specs}

    def earliest(self, tps) -> dict[tuple[str, int], int]:
        return self._list({tuple(tp): "earliest" for tp in tps})

    def latest(self, tps) -> dict[tuple[str, int], int]:
        return self._list({tuple(tp): "latest" for tp in tps})

    def for_timestamps(self, wanted: dict) -> dict[tuple[str, int], int | None]:
        """{(t, p): ts_ms} -> {(t, p): first offset with timestamp >= ts, or None when there is none}."""
        found = self._list({tuple(tp): int(ts) for tp, ts in wanted.items()})
        return {tp: (off if off >= 0 else None) for tp, off in found.items()}


# -- executor side: reads ----------------------------------------------------------------------

_TS_US_UTC = pa.timestamp("us", tz="UTC")

# A reader fetches its partition in pieces of about this size (unless ``kafka.max.partition.fetch.bytes``
# says otherwise) and decodes and yields one piece per poll, while the client's fetcher keeps fetching the
# next ones. Small pieces keep what is decoded in the CPU cache until Spark's worker has written it to
# the JVM, and let the JVM work on one piece while Python decodes the next. Measured with
# benchmarks/bench_spark.py (5M x 100 B, local[2], old and new code run one after the other on a quiet
# machine): polls of everything buffered (up to 64 MiB) with 8 MiB fetches 1.09-1.22M records/s, one
# fetched piece per poll 1.53-1.60M. Interleaved in one Spark session, pieces of 0.5/1/2/4 MiB were
# within ~8% of each other (1.70/1.79/1.89/1.91M); on a busy machine the smaller ones did better.
READ_PARTITION_FETCH_BYTES = 2 << 20


def to_spark_batch(batch: pa.RecordBatch, schema: pa.Schema, include_headers: bool) -> pa.RecordBatch:
    """A client Arrow batch (topic, partition, offset, timestamp[ms], timestamp_type, key, value[, headers])
    as the data source's read schema; every step is a column-level operation in C (numpy over the
    columns' buffers: pyarrow.compute, which costs each new Spark worker its import, is not needed)."""
    col = batch.column
    names = batch.schema.names
    n = batch.num_rows
    ms = _values(col(names.index("timestamp")), np.int64)
    ts_us = pa.Array.from_buffers(_TS_US_UTC, n, [None, pa.py_buffer(ms * 1000)])
    ts_type = _values(col(names.index("timestamp_type")), np.int8).astype(np.int32)
    cols = [
        col(names.index("key")),
        col(names.index("value")),
        col(names.index("topic")),
        col(names.index("partition")),
        col(names.index("offset")),
        ts_us,
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(ts_type)]),
    ]
    if include_headers:
        h = col(names.index("headers"))
        target = schema.field("headers").type
        if h.type != target:
            h = pa.ListArray.from_arrays(h.offsets, h.values, type=target, mask=h.is_null() if h.null_count else None)
        cols.append(h)
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _values(arr: pa.Array, dtype) -> np.ndarray:
    """The values of a fixed-width column without nulls, as numpy (no copy)."""
    return np.frombuffer(arr.buffers()[1], dtype, len(arr), arr.offset * np.dtype(dtype).itemsize)


def _slice_below(batch: pa.RecordBatch, end: int) -> pa.RecordBatch:
    """The rows with offset < end (offsets ascend within a client batch)."""
    offs = _values(batch.column(batch.schema.names.index("offset")), np.int64)
    if offs[-1] < end:
        return batch
    return batch.slice(0, int(np.searchsorted(offs, end)))


def read_range(
    conf: dict,
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    max_records: int = 65536,
    idle_polls: int = 120,
) -> Iterator[pa.RecordBatch]:
    """The records of ``topic``-``partition`` with ``start <= offset < end`` as Arrow batches.

    Offsets that are no longer in the log follow ``fail_on_data_loss``. Offsets of control records and of
    records removed by compaction are simply absent. Raises after ``idle_polls`` polls of 1 s bring
    nothing while records below ``end`` are still missing.
    """
    from kafkawire.client import Consumer
    from kafkawire.protocol import KafkaError

    if end <= start:
        return
    schema = arrow_read_schema(include_headers)
    bootstrap, kwargs = client_kwargs(conf, "consumer")
    kwargs.setdefault("client_id", "kafkawire-spark-reader")
    # Small fetches, decoded one at a time (see READ_PARTITION_FETCH_BYTES)
    kwargs.setdefault("max_partition_fetch_bytes", READ_PARTITION_FETCH_BYTES)
    tp = (topic, partition)
    try:
        consumer = Consumer(bootstrap, auto_offset_reset="earliest" if not fail_on_data_loss else "none", **kwargs)
    except Exception as exc:
        raise KafkaAccessError(f"could not connect to {bootstrap}: {_errtext(exc)}") from None
    try:
        lo = consumer.beginning_offsets([tp])[tp]
        hi = consumer.end_offsets([tp])[tp]
        if start < lo:
            data_loss(
                f"{topic}-{partition}: offsets {start}..{min(lo, end) - 1} were asked for but the earliest "
                f"available offset is now {lo}",
                fail_on_data_loss,
            )
            start = lo
        if hi < end:
            data_loss(
                f"{topic}-{partition}: offsets up to {end - 1} were asked for but the latest offset is now {hi}",
                fail_on_data_loss,
            )
            end = hi
        if start >= end:
            return
        consumer.assign({tp: start})
        consumer.stop_at(tp, end)  # no fetching past the range
        idle = 0
        seen = -1  # the highest offset known to exist: fetched records (before slicing) and fetch high watermarks
        while True:
            try:
                got = consumer.poll_arrow(1.0, headers=include_headers, max_bytes=1)  # one fetched chunk
            except KafkaError as exc:
                if exc.name == "OFFSET_OUT_OF_RANGE":
                    data_loss(f"{topic}-{partition}: offset out of range while reading {start}..{end - 1}", True)
                raise KafkaAccessError(f"{topic}-{partition}: fetch failed: {_errtext(exc)}") from None
            done = False
            seen = max(seen, consumer.high_watermark(tp) - 1)
            for b in got:
                if b.num_rows == 0:
                    continue
                offs = b.column(b.schema.names.index("offset"))
                seen = max(seen, offs[len(offs) - 1].as_py())
                b = _slice_below(b, end)
                if b.num_rows:
                    idle = 0
                    for i in range(0, b.num_rows, max_records):
                        yield to_spark_batch(b.slice(i, max_records), schema, include_headers)
                    last = b.column(b.schema.names.index("offset"))[b.num_rows - 1].as_py()
                    if last >= end - 1:
                        done = True
                else:
                    done = True
            if done:
                break
            if not got:
                # the next record may sit past a gap (control records, compaction): ask where we are
                if consumer.position(tp) >= end:
                    break
                idle += 1
                if idle >= idle_polls:
                    raise KafkaAccessError(
                        f"{topic}-{partition}: no records arrived for offsets "
                        f"{consumer.position(tp)}..{end - 1} in {idle_polls} polls"
                    )
        if seen >= hi:
            _warn_if_end_offset_wrong(consumer, tp, hi, seen)
    finally:
        consumer.close()


def _warn_if_end_offset_wrong(consumer, tp, told: int, seen: int) -> None:
    """Records at or past the end offset the broker reported came back: the range read may stop short.

    A topic that grew since ``told`` was asked for explains that too, so the end offset is asked for again:
    a broker whose answer is still not past ``seen`` (an offset it has just served) reports a wrong end."""
    try:
        now = consumer.end_offsets([tp])[tp]
    except Exception as exc:  # the read itself succeeded; this is only a check
        log.debug("%s-%d: could not ask for the end offset again: %s", tp[0], tp[1], _errtext(exc))
        return
    if now <= seen:
        log.warning(
            "%s-%d: the broker reported end offset %d but returned records up to offset %d; ranges "
            "planned from its end offsets leave those records out (its ListOffsets answer looks wrong)",
            tp[0],
            tp[1],
            told,
            seen,
        )


# -- executor side: writes ---------------------------------------------------------------------


class ArrowProducer:
    """Writes Arrow batches whose columns follow Spark's Kafka sink (topic, key, value, headers, partition).

    Each Arrow batch goes to the client's producer in one ``produce_many`` call (no per-record future);
    keys are partitioned with the Java client's murmur2 partitioner; ``flush`` waits until every record
    is acknowledged and raises if any failed.

    ``write`` does not wait for the client's thread to take its batch (``produce_many_nowait``): Spark's
    worker reads the next Arrow batch from the JVM while the client partitions and encodes this one. At
    most one call is in the client's hands: the next ``write`` (or ``flush``) waits for it first, which
    keeps the batches in order, and raises its error if it had one.
    """

    def __init__(self, conf: dict, topic: str | None, *, transactional_id: str | None = None):
        from kafkawire.client import Producer

        bootstrap, kwargs = client_kwargs(conf, "producer")
        kwargs.setdefault("client_id", "kafkawire-spark-writer")
        if transactional_id is not None:
            kwargs["transactional_id"] = transactional_id
        self._topic = topic
        self._pending: list = []
        # the future of the last produce_many_nowait, until its DeliveryGroup is known
        self._queued: concurrent.futures.Future | None = None
        self.sent = 0
        try:
            self._producer = Producer(bootstrap, **kwargs)
        except ValueError as exc:  # settings the client refuses (a transactional producer needs acks=all)
            raise KafkaAccessError(f"could not start a producer: {exc}") from None
        except Exception as exc:
            raise KafkaAccessError(f"could not start a producer for {bootstrap}: {_errtext(exc)}") from None

    @property
    def producer(self):
        return self._producer

    def write(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        if n == 0:
            return
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}

        def column(name):
            i = names.get(name)
            return None if i is None else batch.column(i)

        # Arrow columns straight to the producer's columnar path: no per-record Python but for headers
        values = column("value")
        keys = column("key")
        if self._topic is not None:
            topics = self._topic
        else:
            if batch.column(names["topic"]).null_count:
                raise KafkaAccessError("a row has a null topic and the option 'topic' is not set")
            topics = column("topic")
        parts = column("partition")
        headers = None
        if "headers" in names and batch.column(names["headers"]).null_count < n:
            headers = [
                [(h["key"], h["value"]) for h in row] if row else None
                for row in batch.column(names["headers"]).to_pylist()
            ]
        self._taken()
        self._queued = self._producer.produce_many_nowait(topics, values, keys, partitions=parts, headers=headers)
        self.sent += n

    def _taken(self) -> None:
        """Wait until the client has queued the batch before (raising what queueing it raised); check the
        deliveries known so far."""
        queued, self._queued = self._queued, None
        if queued is not None:
            self._pending.append(queued.result())
        self._check(final=False)

    def _check(self, final: bool) -> None:
        still = []
        for group in self._pending:
            if not group.done():
                if final:
                    raise KafkaAccessError(f"{group.count - group.delivered} records not acknowledged")
                still.append(group)
            elif group.failed:
                errors = "; ".join(_errtext(e) for _, e in group.errors[:3])
                raise KafkaAccessError(f"{group.failed} of {group.count} records could not be delivered: {errors}")
        self._pending = still

    def flush(self, timeout: float | None = 300.0) -> None:
        self._taken()
        try:
            self._producer.flush(timeout)
            for group in self._pending:
                group.result(timeout)
        except TimeoutError:
            raise KafkaAccessError(f"records were not all acknowledged within {timeout}s") from None
        self._check(final=True)

    def close(self) -> None:
        p, self._producer = self._producer, None
        if p is not None:
            try:
                p.close(30)
            except Exception as exc:  # the error that matters was raised already
                log.warning("closing the producer: %s", _errtext(exc))


def write_batches(conf: dict, topic: str | None, batches: Iterable[pa.RecordBatch]) -> int:
    """Write every batch, wait until each record is acknowledged; raises if any was not."""
    p = ArrowProducer(conf, topic)
    try:
        for b in batches:
            p.write(b)
        p.flush()
    finally:
        p.close()
    return p.sent


# -- executor side: exactly-once writes ----------------------------------------------------------


def _first_topic(batch: pa.RecordBatch, topic: str | None) -> str:
    if topic is not None:
        return topic
    names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
    first = batch.column(names["topic"])[0].as_py()
    if first is None:
        raise KafkaAccessError("a row has a null topic and the option 'topic' is not set")
    return str(first)


def committed_batch(conf: dict, group: str, tp: tuple[str, int]) -> int | None:
    """The marker of ``group``: the offset it committed for ``tp`` (the next batch id to write), or None."""
    from kafkawire.client import Consumer

    bootstrap, kwargs = client_kwargs(conf, "consumer")
    kwargs.pop("isolation_level", None)
    kwargs.setdefault("client_id", "kafkawire-spark-writer")
    try:
        consumer = Consumer(bootstrap, group_id=group, enable_auto_commit=False, **kwargs)
    except Exception as exc:
        raise KafkaAccessError(f"could not connect to {bootstrap}: {_errtext(exc)}") from None
    try:
        return consumer.committed([tp])[tp]
    except Exception as exc:
        raise KafkaAccessError(f"could not read the committed marker of group {group!r}: {_errtext(exc)}") from None
    finally:
        consumer.close()


def write_batches_exactly_once(
    conf: dict,
    topic: str | None,
    batches: Iterable[pa.RecordBatch],
    *,
    transactional_id: str,
    batch_id: int,
    description: str,
) -> tuple[int, bool]:
    """Write one task's part of micro-batch ``batch_id`` in one transaction: (records written, skipped).

    The transaction also commits the offset ``batch_id + 1`` of partition 0 of the first topic written,
    for the consumer group named ``transactional_id`` (the marker: its metadata is ``description``).
    ``init_transactions`` first fences any earlier attempt with the same transactional id and ends what
    it left open; then a marker at ``batch_id + 1`` or later means this part was committed already (Spark
    is replaying the batch) and nothing is written. A task with no rows writes nothing and no marker.
    """
    it = iter(batches)
    first = None
    for b in it:
        if b.num_rows:
            first = b
            break
    if first is None:
        return 0, False
    marker_tp = (_first_topic(first, topic), 0)
    p = ArrowProducer(conf, topic, transactional_id=transactional_id)
    try:
        producer = p.producer
        try:
            producer.init_transactions()
        except Exception as exc:
            raise KafkaAccessError(f"init_transactions of {transactional_id!r} failed: {_errtext(exc)}") from None
        done = committed_batch(conf, transactional_id, marker_tp)
        if done is not None and done > batch_id:
            for _ in it:  # read the task's input to its end, as Spark expects of a writer
                pass
            log.info("%s: committed already (marker %d), skipped", description, done)
            return 0, True
        producer.begin_transaction()
        try:
            p.write(first)
            for b in it:
                p.write(b)
            p.flush()
            producer.send_offsets_to_transaction({marker_tp: (batch_id + 1, description)}, transactional_id)
            producer.commit_transaction()
        except BaseException:
            try:
                producer.abort_transaction()
            except Exception as exc:  # fenced or broken: the next attempt's init_transactions aborts it
                log.warning("%s: abort failed: %s", description, _errtext(exc))
            raise
    finally:
        p.close()
    return p.sent, False
