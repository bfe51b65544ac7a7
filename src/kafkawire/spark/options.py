"""Options of the ``kafkawire`` Spark data source, parsed and validated.

The names and meanings follow Spark's Kafka connector so a pipeline moves
between the two by changing the format name only:

* topics: exactly one of ``subscribe`` (comma-separated names),
  ``subscribePattern`` (a regular expression matched against whole topic
  names) or ``assign`` (JSON ``{"topic": [0, 1]}``);
* where to start/end: ``startingOffsets`` / ``endingOffsets`` (``earliest``,
  ``latest`` or JSON ``{"topic": {"0": 23, "1": -2}}`` where -2 means
  earliest and -1 latest), ``startingTimestamp`` (one timestamp in ms for
  every partition), ``startingOffsetsByTimestamp`` (JSON of timestamps per
  partition), ``startingOffsetsByTimestampStrategy`` (``error``/``latest``),
  ``endingTimestamp`` / ``endingOffsetsByTimestamp`` (batch only);
* ``maxOffsetsPerTrigger``, ``minPartitions``, ``maxRecordsPerPartition``,
  ``failOnDataLoss``, ``includeHeaders``;
* sink: ``topic``; ``exactlyOnce`` (streaming writes in transactions, see
  :mod:`kafkawire.spark.source`) and ``transactionalIdPrefix`` (default: from the query id);
* every ``kafka.<name>`` option becomes the client setting ``<name>``
  (``kafka.bootstrap.servers`` is required).

Every mistake is reported as :class:`KafkaWireOptionError` whose message
names the option and what was expected.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

EARLIEST = -2
LATEST = -1

log = logging.getLogger("kafkawire.spark")


class KafkaWireOptionError(ValueError):
    """An option of the kafkawire data source is missing or malformed."""


@dataclass(frozen=True)
class TopicSelection:
    kind: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple = ()  # subscribe: names
    pattern: str | None = None  # subscribePattern
    assignment: tuple = ()  # assign: ((topic, partition), ...)

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return "assign=" + json.dumps(_group(self.assignment))


@dataclass(frozen=True)
class SourceOptions:
    client_conf: dict
    selection: TopicSelection
    starting: object  # "earliest" | "latest" | {topic: {partition: offset}}
    ending: object  # "latest" | "earliest" | {topic: {partition: offset}} | None (stream)
    starting_timestamp: int | None = None
    starting_by_timestamp: dict | None = None  # {topic: {partition: ts}}
    ending_timestamp: int | None = None  # batch only
    ending_by_timestamp: dict | None = None  # batch only
    timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    fetch_max_records: int = 65536


@dataclass(frozen=True)
class SinkOptions:
    client_conf: dict
    topic: str | None = None
    exactly_once: bool = False  # streaming writes in transactions, a replayed part skipped (source.py)
    transactional_id_prefix: str | None = None


def _lower_map(options: Mapping[str, str]) -> dict:
    return {str(k).lower(): v for k, v in dict(options).items()}


def client_conf(options: Mapping[str, str]) -> dict:
    """``kafka.*`` options without their prefix; checks the bootstrap servers are given."""
    opts = _lower_map(options)
    conf = {k[len("kafka.") :]: str(v) for k, v in opts.items() if k.startswith("kafka.")}
    servers = conf.get("bootstrap.servers", "").strip()
    if not servers:
        raise KafkaWireOptionError(
            "option 'kafka.bootstrap.servers' is required: the broker(s) to connect to, e.g. "
            ".option('kafka.bootstrap.servers', 'localhost:9092')"
        )
    if "group.id" in conf:
        # accepted for compatibility with Spark's connector; offsets live in Spark's checkpoint, so no
        # consumer group is joined and nothing is committed to the broker
        log.warning("option 'kafka.group.id' is ignored: kafkawire reads assigned partitions, no group")
        conf.pop("group.id")
    for name in (
        "auto.offset.reset",
        "key.deserializer",
        "value.deserializer",
        "key.serializer",
        "value.serializer",
        "enable.auto.commit",
        "interceptor.classes",
    ):
        if name in conf:
            raise KafkaWireOptionError(
                f"option 'kafka.{name}' is not supported: the kafkawire data source manages it itself "
                "(offsets are tracked by Spark, keys and values are binary)"
            )
    return conf


def _bool(opts: dict, name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise KafkaWireOptionError(f"option '{name}' must be true or false, got {raw!r}")


def _positive_int(opts: dict, name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise KafkaWireOptionError(f"option '{name}' must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise KafkaWireOptionError(f"option '{name}' must be a positive integer, got {raw!r}")
    return value


def _group(pairs) -> dict:
    out: dict = {}
    for topic, partition in pairs:
        out.setdefault(topic, []).append(partition)
    return out


def parse_selection(opts: dict) -> TopicSelection:
    given = [name for name in ("subscribe", "subscribePattern", "assign") if name.lower() in opts]
    if len(given) != 1:
        what = "none was given" if not given else f"got {', '.join(given)}"
        raise KafkaWireOptionError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must say which "
            f"topics to read; {what}"
        )
    kind = given[0]
    raw = str(opts[kind.lower()])
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise KafkaWireOptionError(f"option 'subscribe' names no topic: {raw!r}")
        return TopicSelection("subscribe", topics=topics)
    if kind == "subscribePattern":
        if not raw.strip():
            raise KafkaWireOptionError("option 'subscribePattern' is empty")
        try:
            re.compile(raw)
        except re.error as exc:
            raise KafkaWireOptionError(f"option 'subscribePattern' is not a valid regular expression: {exc}") from None
        return TopicSelection("subscribePattern", pattern=raw)
    data = _json(raw, "assign", 'like {"topicA":[0,1],"topicB":[2,4]}')
    if not isinstance(data, dict) or not data:
        raise KafkaWireOptionError(f"option 'assign' must be a JSON object like {{\"topicA\":[0,1]}}, got {raw!r}")
    pairs = []
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise KafkaWireOptionError(
                f"option 'assign': topic {topic!r} must map to a list of partition numbers, got {parts!r}"
            )
        pairs.extend((topic, p) for p in parts)
    return TopicSelection("assign", assignment=tuple(sorted(set(pairs))))


def _json(raw: str, name: str, example: str):
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise KafkaWireOptionError(
            f"option '{name}' is not valid JSON ({exc}); expected {example}, got {raw!r}"
        ) from None


def parse_partition_map(raw: str, name: str, *, allow_special: bool = True) -> dict:
    """JSON ``{"topic": {"0": 23}}`` -> ``{topic: {0: 23}}`` with every value checked."""
    example = (
        '{"topicA":{"0":23,"1":-2}} (-2: earliest, -1: latest)' if allow_special else '{"topicA":{"0":1700000000000}}'
    )
    data = _json(raw, name, example)
    if not isinstance(data, dict) or not data:
        raise KafkaWireOptionError(f"option '{name}' must be a JSON object {example}, got {raw!r}")
    out: dict = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise KafkaWireOptionError(
                f"option '{name}': topic {topic!r} must map to an object of partition -> offset, got {parts!r}"
            )
        per: dict = {}
        for key, value in parts.items():
            try:
                partition = int(key)
            except (TypeError, ValueError):
                raise KafkaWireOptionError(
                    f"option '{name}': {key!r} of topic {topic!r} is not a partition number"
                ) from None
            if partition < 0 or not isinstance(value, int) or isinstance(value, bool):
                raise KafkaWireOptionError(
                    f"option '{name}': topic {topic!r} partition {key!r} must map to an integer, got {value!r}"
                )
            low = -2 if allow_special else 0
            if value < low:
                what = (
                    "offsets are >= 0, or -2 for earliest, -1 for latest"
                    if allow_special
                    else "timestamps are milliseconds >= 0"
                )
                raise KafkaWireOptionError(
                    f"option '{name}': topic {topic!r} partition {partition} has invalid value {value} ({what})"
                )
            per[partition] = value
        out[topic] = per
    return out


def _offsets(opts: dict, name: str, default: str, *, forbid: str | None, forbid_code: int | None):
    raw = opts.get(name.lower())
    if raw is None:
        return default
    text = str(raw).strip()
    if text.lower() in ("earliest", "latest"):
        if forbid and text.lower() == forbid:
            raise KafkaWireOptionError(f"option '{name}' can't be '{forbid}' for batch queries")
        return text.lower()
    if not text.startswith("{"):
        raise KafkaWireOptionError(
            f"option '{name}' must be 'earliest', 'latest' or a JSON object like "
            f'{{"topicA":{{"0":23,"1":-2}}}}, got {raw!r}'
        )
    parsed = parse_partition_map(text, name)
    if forbid_code is not None:
        for topic, parts in parsed.items():
            for partition, offset in parts.items():
                if offset == forbid_code:
                    raise KafkaWireOptionError(
                        f"option '{name}': {forbid_code} ({forbid}) is not allowed for topic {topic!r} "
                        f"partition {partition} in batch queries"
                    )
    return parsed


def _timestamp(opts: dict, name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise KafkaWireOptionError(f"option '{name}' must be a timestamp in milliseconds, got {raw!r}") from None
    if value < 0:
        raise KafkaWireOptionError(f"option '{name}' must be >= 0")
    return value


def parse_source(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = _lower_map(options)
    conf = client_conf(opts)
    selection = parse_selection(opts)
    if streaming:
        starting = _offsets(opts, "startingOffsets", "latest", forbid=None, forbid_code=None)
        if "endingoffsets" in opts:
            raise KafkaWireOptionError("option 'endingOffsets' is for batch queries only; a stream has no end")
        ending = None
    else:
        starting = _offsets(opts, "startingOffsets", "earliest", forbid="latest", forbid_code=LATEST)
        ending = _offsets(opts, "endingOffsets", "latest", forbid="earliest", forbid_code=EARLIEST)
    starting_ts = _timestamp(opts, "startingTimestamp")
    by_ts = None
    if "startingoffsetsbytimestamp" in opts:
        by_ts = parse_partition_map(
            str(opts["startingoffsetsbytimestamp"]), "startingOffsetsByTimestamp", allow_special=False
        )
    ending_ts = _timestamp(opts, "endingTimestamp")
    ending_by_ts = None
    if "endingoffsetsbytimestamp" in opts:
        ending_by_ts = parse_partition_map(
            str(opts["endingoffsetsbytimestamp"]), "endingOffsetsByTimestamp", allow_special=False
        )
    if streaming and (ending_ts is not None or ending_by_ts is not None):
        raise KafkaWireOptionError(
            "options 'endingTimestamp' and 'endingOffsetsByTimestamp' are for batch queries only"
        )
    strategy = str(opts.get("startingoffsetsbytimestampstrategy", "error")).strip().lower()
    if strategy not in ("error", "latest"):
        raise KafkaWireOptionError(
            f"option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got {strategy!r}"
        )
    if selection.kind == "assign" and isinstance(starting, dict):
        assigned = set(selection.assignment)
        named = {(t, p) for t, parts in starting.items() for p in parts}
        if named != assigned:
            raise KafkaWireOptionError(
                "option 'startingOffsets' must name exactly the partitions of 'assign': "
                f"assigned {sorted(assigned)}, startingOffsets names {sorted(named)}"
            )
    max_per_trigger = _positive_int(opts, "maxOffsetsPerTrigger")
    min_partitions = _positive_int(opts, "minPartitions")
    max_per_partition = _positive_int(opts, "maxRecordsPerPartition")
    fetch_max = _positive_int(opts, "fetchMaxRecords") or 65536
    return SourceOptions(
        client_conf=conf,
        selection=selection,
        starting=starting,
        ending=ending,
        starting_timestamp=starting_ts,
        starting_by_timestamp=by_ts,
        timestamp_strategy=strategy,
        ending_timestamp=ending_ts,
        ending_by_timestamp=ending_by_ts,
        max_offsets_per_trigger=max_per_trigger,
        min_partitions=min_partitions,
        max_records_per_partition=max_per_partition,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        fetch_max_records=fetch_max,
    )


def parse_sink(options: Mapping[str, str]) -> SinkOptions:
    opts = _lower_map(options)
    conf = client_conf(opts)
    topic = opts.get("topic")
    if topic is not None:
        topic = str(topic).strip()
        if not topic:
            raise KafkaWireOptionError("option 'topic' is empty")
    exactly_once = _bool(opts, "exactlyOnce", False)
    prefix = opts.get("transactionalidprefix")
    if prefix is not None:
        prefix = str(prefix).strip()
        if not prefix:
            raise KafkaWireOptionError("option 'transactionalIdPrefix' is empty")
        if not exactly_once:
            raise KafkaWireOptionError(
                "option 'transactionalIdPrefix' is for exactly-once writes: set 'exactlyOnce' to 'true' as well"
            )
    if exactly_once:
        acks = conf.get("acks")
        if acks is not None and acks.strip() not in ("all", "-1"):
            raise KafkaWireOptionError(
                f"option 'exactlyOnce' writes in transactions, which need acks=all; 'kafka.acks' is {acks!r}"
            )
        if conf.get("enable.idempotence", "true").strip().lower() in ("false", "0", "no"):
            raise KafkaWireOptionError(
                "option 'exactlyOnce' writes in transactions, which need an idempotent "
                "producer; 'kafka.enable.idempotence' is false"
            )
    return SinkOptions(client_conf=conf, topic=topic, exactly_once=exactly_once, transactional_id_prefix=prefix)
