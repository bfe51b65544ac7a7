"""Each API's answer to a request that failed as a whole: Kafka's ``AbstractRequest.getErrorResponse``.

When a handler raises (or its response does not encode), Kafka answers with an error response that the
request class builds for itself: the error code in every topic, partition, group or resource the request
named, or at the top level, with the sentinel values Kafka puts in the other fields (offsets -1, records
null, ...). ``SHAPES`` declares that answer per API, as data, and :func:`error_response` builds it from the
response schema. ``tools/error_answers.py`` compares the result with Kafka's own ``getErrorResponse``
(``tools/java/ErrorResponses.java``) for every API the broker handles at every version
(``tests/broker/test_error_answers.py``). An API without a shape gets every response array whose name a
request array shares, echoed with the error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkawire.protocol import ApiKey, api, errors, message_class

# Fields that identify an entry, copied from the request entry to its answer entry: request name -> the
# response names that echo it.
KEYS = {
    "name": ("name", "topic", "topic_name", "user"),
    "topic": ("topic", "name", "topic_name"),
    "topic_name": ("topic_name", "name", "topic"),
    "topic_id": ("topic_id",),
    "partition": ("partition", "partition_index", "index"),
    "partition_index": ("partition_index", "partition"),
    "index": ("index", "partition_index"),
    "partition_id": ("partition_id",),
    "group_id": ("group_id",),
    "resource_type": ("resource_type",),
    "resource_name": ("resource_name",),
    "key": ("key",),
    "member_id": ("member_id",),
    "group_instance_id": ("group_instance_id",),
}
# an answer entry made from a request value (a partition number, a group id): the entry field it fills
SCALAR_KEYS = ("partition_index", "partition", "partition_id", "index", "group_id", "key", "name", "transactional_id")


@dataclass(frozen=True)
class Entries:
    """A response array answered entry by entry from a request array: ``source`` is a path relative to the
    request struct at the same level ("topic_data"; "dirs.topics" flattens), ``since``/``until`` the
    versions that get entries (others answer at the top level only)."""

    source: str | tuple[str, ...]
    since: int = 0
    until: int = 1 << 15
    # a tuple of sources is alternatives (the first one the version has), unless ``users``: then one entry per
    # distinct name over all of them, sorted (AlterUserScramCredentials' getErrorResponse answers the set of
    # users named by its deletions and upsertions)
    users: bool = False


@dataclass(frozen=True)
class Shape:
    """One API's error answer: ``entries`` maps a response array path ("responses.partition_responses") to
    its request source; ``sentinels`` are the values Kafka sets in each struct that has the field (None
    only where the field is nullable at the version); ``echo`` the top-level request fields the answer
    repeats; ``message`` is what goes in ``error_message``:
    "keep" the schema default, "null" (Kafka's ``ApiError.fromThrowable``: no text for
    UNKNOWN_SERVER_ERROR), "default" (``Errors.message()``, the code's default text)."""

    entries: dict[str, Entries] = field(default_factory=dict)
    sentinels: dict[str, object] = field(default_factory=dict)
    message: str = "keep"
    echo: tuple[str, ...] = ()  # top-level request fields the answer repeats (Fetch's session id)
    null_keys: bool = False  # a null key of a request entry is echoed as null (else left at the default)


_OFFSETS = {"base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1}
SHAPES: dict[int, Shape] = {
    ApiKey.PRODUCE: Shape(
        {"responses": Entries("topic_data"), "responses.partition_responses": Entries("partition_data")}, _OFFSETS
    ),
    # v13+: the top-level error alone (the client can read it, Kafka's comment says)
    ApiKey.FETCH: Shape(
        {"responses": Entries("topics", until=12), "responses.partitions": Entries("partitions")},
        {
            "high_watermark": -1,
            "last_stable_offset": -1,
            "log_start_offset": -1,
            "records": b"",
            "preferred_read_replica": -1,
        },
        echo=("session_id",),
    ),
    ApiKey.LIST_OFFSETS: Shape(
        {"topics": Entries("topics"), "topics.partitions": Entries("partitions")},
        {"timestamp": -1, "offset": -1, "leader_epoch": -1},
    ),
    ApiKey.METADATA: Shape({"topics": Entries("topics")}),
    ApiKey.OFFSET_COMMIT: Shape({"topics": Entries("topics"), "topics.partitions": Entries("partitions")}),
    # v0-1 per partition; v2-7 the top-level error; v8+ per group, without its topics
    ApiKey.OFFSET_FETCH: Shape(
        {
            "topics": Entries("topics", until=1),
            "topics.partitions": Entries("partition_indexes"),
            "groups": Entries("groups"),
        },
        {"committed_offset": -1, "committed_leader_epoch": -1},
    ),
    ApiKey.FIND_COORDINATOR: Shape(
        {"coordinators": Entries("coordinator_keys")}, {"node_id": -1, "port": -1}, message="default"
    ),
    ApiKey.JOIN_GROUP: Shape(sentinels={"protocol_name": None, "generation_id": -1}),
    ApiKey.LEAVE_GROUP: Shape(),
    ApiKey.DESCRIBE_GROUPS: Shape({"groups": Entries("groups")}),
    ApiKey.CREATE_TOPICS: Shape(
        {"topics": Entries("topics")}, {"num_partitions": -1, "replication_factor": -1}, message="null"
    ),
    ApiKey.DELETE_TOPICS: Shape({"responses": Entries(("topics", "topic_names"))}, null_keys=True),
    ApiKey.DELETE_RECORDS: Shape(
        {"topics": Entries("topics"), "topics.partitions": Entries("partitions")}, {"low_watermark": -1}
    ),
    ApiKey.INIT_PRODUCER_ID: Shape(sentinels={"producer_id": -1, "producer_epoch": -1}),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Shape(
        {"topics": Entries("topics"), "topics.partitions": Entries("partitions")},
        {"leader_epoch": -1, "end_offset": -1},
    ),
    ApiKey.DESCRIBE_ACLS: Shape(message="null"),
    ApiKey.CREATE_ACLS: Shape({"results": Entries("creations")}, message="null"),
    ApiKey.DELETE_ACLS: Shape({"filter_results": Entries("filters")}, message="null"),
    ApiKey.DESCRIBE_CONFIGS: Shape({"results": Entries("resources")}, message="default"),
    ApiKey.ALTER_CONFIGS: Shape({"responses": Entries("resources")}, message="null"),
    ApiKey.ALTER_REPLICA_LOG_DIRS: Shape(
        {"results": Entries("dirs.topics"), "results.partitions": Entries("partitions")}
    ),
    ApiKey.DESCRIBE_LOG_DIRS: Shape(),
    ApiKey.SASL_AUTHENTICATE: Shape(message="null"),
    # one result per user asked about, its name left empty (as Kafka's getErrorResponse builds it)
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: Shape({"results": Entries("users")}, {"user": ""}, message="null"),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Shape(
        {"results": Entries(("deletions", "upsertions"), users=True)}, message="null"
    ),
    ApiKey.CREATE_PARTITIONS: Shape({"results": Entries("topics")}),
    ApiKey.DELETE_GROUPS: Shape({"results": Entries("groups_names")}),
    ApiKey.ELECT_LEADERS: Shape(
        {
            "replica_election_results": Entries("topic_partitions"),
            "replica_election_results.partition_result": Entries("partitions"),
        },
        message="null",
    ),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Shape({"responses": Entries("resources")}, message="null"),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: Shape(
        {"responses": Entries("topics"), "responses.partitions": Entries("partitions")}, message="null"
    ),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Shape(
        {"topics": Entries("topics"), "topics.partitions": Entries("partition_indexes")}, message="null"
    ),
    ApiKey.OFFSET_DELETE: Shape(),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: Shape(sentinels={"entries": None}, message="null"),
    ApiKey.DESCRIBE_QUORUM: Shape(message="default"),
    ApiKey.DESCRIBE_PRODUCERS: Shape({"topics": Entries("topics"), "topics.partitions": Entries("partition_indexes")}),
    ApiKey.CONSUMER_GROUP_DESCRIBE: Shape({"groups": Entries("group_ids")}),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: Shape({"topics": Entries("topics")}),
    # transactions: v0-3 per partition; v4+ (broker to broker) the top-level error alone
    ApiKey.ADD_PARTITIONS_TO_TXN: Shape(
        {
            "results_by_topic_v3_and_below": Entries("v3_and_below_topics"),
            "results_by_topic_v3_and_below.results_by_partition": Entries("partitions"),
        }
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: Shape(),
    ApiKey.END_TXN: Shape(sentinels={"producer_id": -1, "producer_epoch": -1}),
    ApiKey.TXN_OFFSET_COMMIT: Shape({"topics": Entries("topics"), "topics.partitions": Entries("partitions")}),
    ApiKey.DESCRIBE_TRANSACTIONS: Shape({"transaction_states": Entries("transactional_ids")}),
    ApiKey.LIST_TRANSACTIONS: Shape(),
}


def error_response(api_key: int, version: int, request, code: int, message: str | None = None):
    """The response Kafka gives when a request of this API fails as a whole, with ``code``; ``message``
    replaces the text Kafka would put in ``error_message``. None for a Produce with acks=0, which gets no
    answer (Kafka closes the connection instead)."""
    if api_key == ApiKey.PRODUCE and getattr(request, "acks", -1) == 0:
        return None
    cls = message_class(api(api_key).response)
    shape = SHAPES.get(api_key)
    out = cls()
    _Builder(cls, version, code, message, shape).fill(out, request, "")
    for attr in shape.echo if shape is not None and request is not None else ():
        setattr(out, attr, getattr(request, attr))
    return out


class _Builder:
    def __init__(self, root, version: int, code: int, message: str | None, shape: Shape | None):
        self.root, self.version, self.code, self.shape = root, version, code, shape
        mode = shape.message if shape is not None else "keep"
        if message is not None:
            self.message: tuple[str, str | None] = ("set", message)
        elif mode == "default":
            self.message = ("set", errors.error_for(code).message)
        else:
            self.message = (mode, None)

    def fill(self, out, request, path: str) -> None:
        version = self.version
        sentinels = self.shape.sentinels if self.shape is not None else {}
        for f in out._fields:
            if not (f.present(version) or f.is_tagged(version)):
                continue
            if f.attr in ("error_code", "partition_error_code"):  # the latter: AddPartitionsToTxn's
                setattr(out, f.attr, self.code)
            elif f.attr == "error_message":
                mode, text = self.message
                if mode == "set" or (mode == "null" and f.is_nullable(version)):
                    out.error_message = text
            elif f.attr in sentinels:
                value = sentinels[f.attr]
                if value is not None or f.is_nullable(version):
                    setattr(out, f.attr, value)
            elif f.is_array and f.is_struct and request is not None:
                at = f"{path}{f.attr}"
                items = self._source(request, at, f.attr)
                if items is not None:
                    setattr(out, f.attr, [self._entry(f, item, at) for item in items])

    def _source(self, request, at: str, attr: str) -> list | None:
        """The request values that answer the response array at path ``at``, or None for no entries."""
        if self.shape is None:  # no declared shape: the request array of the same name
            src = next((g for g in request._fields if g.attr == attr and g.is_array and g.present(self.version)), None)
            return getattr(request, attr) if src is not None else None
        rule = self.shape.entries.get(at)
        if rule is None or not rule.since <= self.version <= rule.until:
            return None
        if rule.users:
            named = [x for source in rule.source for x in (getattr(request, source, None) or [])]
            return sorted({x.name: x for x in reversed(named)}.values(), key=lambda x: x.name)
        for source in (rule.source,) if isinstance(rule.source, str) else rule.source:
            steps = source.split(".")
            if not any(g.attr == steps[0] and g.present(self.version) for g in request._fields):
                continue  # a source of other versions (DeleteTopics: topic_names before v6, topics after)
            items = [request]
            for step in steps:
                items = [x for item in items for x in (getattr(item, step) or [])]
            return items
        return None

    def _entry(self, f, item, at: str):
        elem = self.root._classes[f.struct.name]()
        present = [g for g in elem._fields if g.present(self.version) or g.is_tagged(self.version)]
        if hasattr(item, "_fields"):
            item_fields = {g.attr: g for g in item._fields if g.present(self.version) or g.is_tagged(self.version)}
            for g in present:
                src = next(
                    (
                        item_fields[a]
                        for a, targets in KEYS.items()
                        if g.attr in targets
                        and a in item_fields
                        and item_fields[a].type == g.type
                        and not item_fields[a].is_array
                    ),
                    None,
                )
                if src is None:
                    continue
                value = getattr(item, src.attr)
                # a key the request left null (a topic named by id only) stays at the answer's default (Metadata:
                # an empty name) unless the API echoes the null (DeleteTopics)
                if value is not None or (
                    self.shape is not None and self.shape.null_keys and g.is_nullable(self.version)
                ):
                    setattr(elem, g.attr, value)
            self.fill(elem, item, at + ".")
        else:  # a request value (a partition number, a group id) becomes an entry
            key = next(
                (
                    g
                    for g in present
                    if g.attr in SCALAR_KEYS and not g.is_array and isinstance(item, int) == (g.type != "string")
                ),
                None,
            )
            if key is not None:
                setattr(elem, key.attr, item)
            self.fill(elem, None, at + ".")
        return elem
