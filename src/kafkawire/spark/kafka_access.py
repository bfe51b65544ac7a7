"""Every Kafka call the Spark data source makes goes through this module.

* :class:`Admin` - topics and partitions, earliest/latest/by-timestamp offsets (driver side);
* :func:`read_range` - the records of one partition between two offsets, as Arrow
  record batches in the data source's read schema (executor side);
* :class:`ArrowProducer` - writes Arrow batches with Spark's sink columns (executor side).
"""
from __future__ import annotations

import logging
import re
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

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
            "set the option 'failOnDataLoss' to 'false'.")
    log.warning("%s; going on since failOnDataLoss is false", message)


def _confluent_conf(conf: dict) -> dict:
    out = {k: v for k, v in conf.items()}
    out.setdefault("client.id", "kafkawire-spark")
    return out


class Admin:
    """Driver-side metadata and offset look-ups."""

    def __init__(self, conf: dict):
        from confluent_kafka import Consumer

        c = _confluent_conf(conf)
        c.update({"group.id": "kafkawire-spark-admin", "enable.auto.commit": False})
        self._consumer = Consumer(c)
        self._timeout = float(conf.get("request.timeout.ms", 30000)) / 1000.0

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def topics(self) -> dict[str, list[int]]:
        """All topics of the cluster (internal ones left out): {topic: sorted partitions}."""
        from confluent_kafka import KafkaException

        try:
            md = self._consumer.list_topics(timeout=self._timeout)
        except KafkaException as exc:
            raise KafkaAccessError(f"could not fetch the cluster's metadata: {exc}") from None
        out = {}
        for name, t in md.topics.items():
            if name.startswith("__") or t.error is not None:
                continue
            out[name] = sorted(t.partitions)
        return out

    def partitions_of(self, selection) -> list[tuple[str, int]]:
        """The (topic, partition) pairs a topic selection stands for, sorted."""
        topics = self.topics()
        if selection.kind == "subscribe":
            missing = [t for t in selection.topics if t not in topics]
            if missing:
                raise UnknownTopicError(
                    f"topic(s) {', '.join(repr(t) for t in missing)} do not exist on the broker(s) "
                    f"(subscribe={','.join(selection.topics)}); known topics: {sorted(topics)}")
            return sorted((t, p) for t in selection.topics for p in topics[t])
        if selection.kind == "subscribePattern":
            rx = re.compile(selection.pattern)
            return sorted((t, p) for t, parts in topics.items() if rx.fullmatch(t) for p in parts)
        out = []
        for t, p in selection.assignment:
            if t not in topics:
                raise UnknownTopicError(f"topic {t!r} of option 'assign' does not exist on the broker(s)")
            if p not in topics[t]:
                raise UnknownTopicError(
                    f"partition {p} of topic {t!r} (option 'assign') does not exist; the topic has "
                    f"partitions {topics[t]}")
            out.append((t, p))
        return sorted(out)

    def _watermarks(self, tps) -> dict:
        from confluent_kafka import KafkaException, TopicPartition

        out = {}
        for t, p in tps:
            try:
                out[(t, p)] = self._consumer.get_watermark_offsets(TopicPartition(t, p), timeout=self._timeout,
                                                                   cached=False)
            except KafkaException as exc:
                raise KafkaAccessError(f"could not list the offsets of {t}-{p}: {exc}") from None
        return out

    def earliest(self, tps) -> dict[tuple[str, int], int]:
        return {tp: lo for tp, (lo, hi) in self._watermarks(tps).items()}

    def latest(self, tps) -> dict[tuple[str, int], int]:
        return {tp: hi for tp, (lo, hi) in self._watermarks(tps).items()}

    def for_timestamps(self, wanted: dict) -> dict[tuple[str, int], int | None]:
        """{(t, p): ts_ms} -> {(t, p): first offset with timestamp >= ts, or None when there is none}."""
        from confluent_kafka import KafkaException, TopicPartition

        if not wanted:
            return {}
        req = [TopicPartition(t, p, ts) for (t, p), ts in wanted.items()]
        try:
            res = self._consumer.offsets_for_times(req, timeout=self._timeout)
        except KafkaException as exc:
            raise KafkaAccessError(f"could not look up offsets by timestamp: {exc}") from None
        out = {}
        for tp in res:
            out[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
        return out


def _timestamps(ms: list):
    arr = pa.array(ms, pa.int64())
    return pc.multiply(arr, 1000).cast(pa.timestamp("us", tz="UTC"))


def read_range(conf: dict, topic: str, partition: int, start: int, end: int, *, include_headers: bool,
               fail_on_data_loss: bool, max_records: int = 65536) -> Iterator[pa.RecordBatch]:
    """The records of ``topic``-``partition`` with ``start <= offset < end`` as Arrow batches."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    if end <= start:
        return
    schema = arrow_read_schema(include_headers)
    c = _confluent_conf(conf)
    c.update({"group.id": "kafkawire-spark-reader", "enable.auto.commit": False, "enable.partition.eof": True,
              "auto.offset.reset": "error"})
    consumer = Consumer(c)
    try:
        lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30, cached=False)
        if start < lo:
            data_loss(f"{topic}-{partition}: offsets {start}..{min(lo, end) - 1} were asked for but the earliest "
                      f"offset is now {lo}", fail_on_data_loss)
            start = lo
            if start >= end:
                return
        if hi < end:
            data_loss(f"{topic}-{partition}: offsets up to {end - 1} were asked for but the latest offset is now "
                      f"{hi}", fail_on_data_loss)
            end = hi
            if start >= end:
                return
        consumer.assign([TopicPartition(topic, partition, start)])
        topic_arr_cache = {}
        done = False
        idle = 0
        while not done:
            msgs = consumer.consume(num_messages=min(max_records, end - start), timeout=1.0)
            if not msgs:
                idle += 1
                if idle > 60:
                    raise KafkaAccessError(f"{topic}-{partition}: no records arrived for offsets {start}..{end - 1}")
                continue
            idle = 0
            keys, values, offsets, ts, tst, headers = [], [], [], [], [], []
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= end:
                            done = True
                        continue
                    raise KafkaAccessError(f"{topic}-{partition}: fetch failed: {err}")
                off = m.offset()
                if off >= end:
                    done = True
                    break
                keys.append(m.key())
                values.append(m.value())
                offsets.append(off)
                t_type, t = m.timestamp()
                ts.append(t)
                tst.append(t_type - 1 if t_type > 0 else -1)
                if include_headers:
                    h = m.headers()
                    headers.append([{"key": k, "value": v} for k, v in h] if h else [])
                if off >= end - 1:
                    done = True
                    break
            if offsets:
                n = len(offsets)
                if n not in topic_arr_cache:
                    topic_arr_cache = {n: (pa.array([topic] * n, pa.string()), pa.array([partition] * n, pa.int32()))}
                t_arr, p_arr = topic_arr_cache[n]
                cols = [pa.array(keys, pa.binary()), pa.array(values, pa.binary()), t_arr, p_arr,
                        pa.array(offsets, pa.int64()), _timestamps(ts), pa.array(tst, pa.int32())]
                if include_headers:
                    cols.append(pa.array(headers, schema.field("headers").type))
                yield pa.RecordBatch.from_arrays(cols, schema=schema)
    finally:
        consumer.close()


class ArrowProducer:
    """Writes Arrow batches whose columns follow Spark's Kafka sink (topic, key, value, headers, partition)."""

    def __init__(self, conf: dict, topic: str | None):
        from confluent_kafka import Producer

        c = _confluent_conf(conf)
        c.setdefault("partitioner", "murmur2_random")
        c.setdefault("linger.ms", "5")
        self._producer = Producer(c)
        self._topic = topic
        self._errors: list = []
        self.sent = 0

    def _on_delivery(self, err, msg):
        if err is not None and len(self._errors) < 10:
            self._errors.append(f"{msg.topic()}: {err}")

    def write(self, batch: pa.RecordBatch) -> None:
        names = {n.lower(): i for i, n in enumerate(batch.schema.names)}
        n = batch.num_rows
        if n == 0:
            return

        def col(name):
            i = names.get(name)
            if i is None:
                return None
            a = batch.column(i)
            if pa.types.is_string(a.type) or pa.types.is_large_string(a.type):
                a = a.cast(pa.binary()) if name in ("key", "value") else a
            return a.to_pylist()

        values = col("value")
        keys = col("key") or [None] * n
        topics = [self._topic] * n if self._topic is not None else col("topic")
        parts = col("partition") or [None] * n
        headers = col("headers") or [None] * n
        produce = self._producer.produce
        poll = self._producer.poll
        cb = self._on_delivery
        for i in range(n):
            t = topics[i]
            if t is None:
                raise KafkaAccessError("a row has a null topic and the option 'topic' is not set")
            h = headers[i]
            kwargs = {}
            if h:
                kwargs["headers"] = [(x["key"], x["value"]) for x in h]
            p = parts[i]
            if p is not None:
                kwargs["partition"] = p
            while True:
                try:
                    produce(t, values[i], keys[i], on_delivery=cb, **kwargs)
                    break
                except BufferError:
                    poll(0.1)
            self.sent += 1
        poll(0)
        self._check()

    def _check(self):
        if self._errors:
            raise KafkaAccessError(f"{len(self._errors)}+ records could not be delivered: {self._errors[:3]}")

    def flush(self) -> None:
        left = self._producer.flush(120)
        if left:
            raise KafkaAccessError(f"{left} records were not delivered within the flush timeout")
        self._check()

    def close(self) -> None:
        pass


def write_batches(conf: dict, topic: str | None, batches: Iterable[pa.RecordBatch]) -> int:
    p = ArrowProducer(conf, topic)
    try:
        for b in batches:
            p.write(b)
        p.flush()
    finally:
        p.close()
    return p.sent
