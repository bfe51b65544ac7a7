"""Produce: check each partition's records (records.validation: batch headers and CRCs, records decoded only
when the topic needs it), check idempotent sequences, append.

v3+ requests carry exactly one v2 batch per partition (as Kafka requires);
v0-2 requests may carry magic 0/1 message sets, which are up-converted to v2
batches first. Base offsets are assigned by the storage engine rewriting the
batch header in place. acks=0 requests get no response; if one of them fails
the connection is closed, which is how Kafka tells such a producer.
"""

from __future__ import annotations

import functools
import weakref

from kafkawire.net.server import CloseConnection
from kafkawire.protocol import errors
from kafkawire.protocol.messages import ProduceResponse
from kafkawire.protocol.records import validation
from kafkawire.protocol.records.validation import Accepted, Refusal

from ..dispatch import handles
from ..producer_state import BatchMeta
from ..transactions import produce as txn_produce
from ._common import find_topic, log, now_ms, partition_log, storage_error_code

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
# a partition's records of this many bytes or more are appended in the storage threads (see produce())
OFFLOAD_APPEND_BYTES = 128 * 1024
TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse
_RULES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # broker -> {topic: (configs, generation, rules)}


def _rules(broker, meta) -> validation.TopicRules:
    """The topic's rules, resolved once per change of its configs or of the broker's topic defaults: a topic's
    configs are replaced, never changed in place, when altered (as the storage engines' settings caches rely
    on), and the broker's defaults say when they change."""
    configs, generation = meta.configs, broker.config.topic_defaults_generation
    cache = _RULES.get(broker)
    if cache is None:
        cache = _RULES[broker] = {}
    cached = cache.get(meta.name)
    if cached is not None and cached[0] is configs and cached[1] is generation:
        return cached[2]
    rules = _resolve_rules(broker, meta)
    if len(cache) > 10_000:  # names of deleted topics are never looked up again
        cache.clear()
    cache[meta.name] = (configs, generation, rules)
    return rules


def _resolve_rules(broker, meta) -> validation.TopicRules:
    value, configs = broker.config.topic_value, meta.configs
    return validation.TopicRules(
        int(value(configs, "max.message.bytes")),
        value(configs, "message.timestamp.type"),
        int(value(configs, "message.timestamp.before.max.ms")),
        int(value(configs, "message.timestamp.after.max.ms")),
        value(configs, "compression.type"),
        "compact" in str(value(configs, "cleanup.policy")).split(","),
        int(configs.get("internal.segment.bytes") or value(configs, "segment.bytes")),
    )


def _prepare(
    broker,
    version: int,
    meta,
    records,
    partition: int = -1,
    transactional_id: str | None = None,
    rules: validation.TopicRules | None = None,
    found: list | None = None,
    leader_epoch: int | None = None,
    maybe_transactional: bool = True,
) -> Accepted | Refusal | None:
    """The partition's records checked and ready to append, why they are refused, or None (nothing to
    append). The broker's own checks (transactions, internal topics) stand where Kafka makes them: after the
    request-level format checks, before the log validates the batches. ``rules``: the topic's (looked up once
    per topic of a request); ``found``: the frames the request-level walk found in ``records``;
    ``leader_epoch``: the partition's current epoch, if looked up already; ``maybe_transactional`` False: the
    request-level walk found no transactional batch in the whole request."""
    found = validation.check_format(records, version, found)
    if found is None or isinstance(found, Refusal):
        return found
    if maybe_transactional and validation.has_transactional_batch(records, found):
        # Kafka asks the transaction coordinator whether the partition is in the producer's transaction
        # before appending (the decision: transactions/produce.py). Without a coordinator the batch is refused
        # as Kafka refuses it while its coordinator is unavailable: retriable, nothing appended.
        if broker.txn_coordinator is not None:
            refused = txn_produce.check(
                broker.txn_coordinator, transactional_id, version, meta.name, partition, records, found
            )
            if refused is not None:
                return refused
        else:
            return Refusal(
                errors.NOT_ENOUGH_REPLICAS,
                "transactional batch with no transaction coordinator to verify it against",
                answer="cannot verify that the partition is part of the transaction: no transaction "
                "coordinator is available",
            )
    if meta.name in INTERNAL_TOPICS:
        return Refusal(errors.INVALID_TOPIC_EXCEPTION, f"cannot append to internal topic {meta.name}")
    return validation.validate(
        records,
        found,
        version,
        rules if rules is not None else _rules(broker, meta),
        now_ms(),
        broker.leader_epochs.current(meta.name, partition) if leader_epoch is None else leader_epoch,
    )


def _append(broker, meta, partition: int, plog, buf, header, durable: bool, lat: int | None, leader_epoch=None):
    """Idempotence check + append; runs in order per partition (in a storage thread for file engines).
    Returns ((error, message, base_offset, log_append_time, log_start_offset), whether it fsynced).
    ``leader_epoch``: the partition's current leader epoch as validation stamped it, when nothing can have
    changed it since (an inline append); None: looked up here. (Not ``epoch``: that is the producer's.)"""
    producers = broker.producers
    if header is not None:
        pid, epoch, first_seq, count = (
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.record_count,
        )
        producers.ensure_loaded(meta.name, partition, plog)
        last_seq = first_seq + count - 1
        if last_seq > 2147483647:  # sequences wrap around to 0 (DefaultRecordBatch.incrementSequence)
            last_seq -= 2147483648
        code, message, dup = producers.check(meta.name, partition, pid, epoch, first_seq, last_seq)
        if code:
            # Kafka answers these with the partition's log start offset and no message
            log.info("produce to %s-%d refused: %s (%s)", meta.name, partition, message, errors.error_for(code).name)
            return (code, None, -1, -1, plog.log_start_offset), False
        if dup is not None:
            # a retried batch: its offsets as first appended and, as Kafka answers, its max timestamp (the
            # append time under LogAppendTime) in log_append_time_ms whatever the topic's timestamp type
            return (0, None, dup.base_offset, dup.timestamp, plog.log_start_offset), False
    # the partition's epoch history names its current epoch before a batch of it is appended (a partition
    # created since start gets (0, 0) here, written off the event loop for file engines); validation stamped
    # the batch with that epoch already
    result = broker.leader_epochs.append(
        meta.name, partition, plog, lambda _epoch: buf, leader_epoch, log_append_time=lat, durable=durable
    )
    if header is not None:
        producers.record(
            meta.name,
            partition,
            pid,
            epoch,
            BatchMeta(
                first_seq,
                last_seq,
                result.base_offset,
                result.last_offset,
                lat if lat is not None else header.max_timestamp,
                result.log_append_time,
            ),
        )
    return (0, None, result.base_offset, result.log_append_time, result.log_start_offset), durable


def _fill(pr, outcome) -> None:
    code, message, base, lat, start = outcome[:5]
    if len(outcome) > 5:  # else the response's record_errors stay as made: []
        pr.record_errors = outcome[5]
    pr.error_code = code
    pr.error_message = message
    pr.base_offset = base
    pr.log_append_time_ms = lat
    pr.log_start_offset = start


@handles("Produce", 0, 13)
def produce(broker, ctx, body):
    version = ctx.api_version
    acks = body.acks
    durable = acks == -1 and broker.config.acks_all_fsync
    by_id = version >= 13
    responses = []
    work = []  # (partition response, meta, partition, log, buf, header, lat, leader epoch)
    # one walk of every partition's frames: the request-level checks, and then each partition's format check
    walked, whole = validation.request_frames(
        (p.records for t in body.topic_data for p in t.partition_data), body.transactional_id
    )
    # without a transactional id a transactional batch anywhere refuses the whole request (``whole``), so no
    # partition's batches need the look for one
    maybe_transactional = body.transactional_id is not None
    leader_epochs = broker.leader_epochs
    walk = iter(walked)
    for t in body.topic_data:
        meta = find_topic(broker, None if by_id else t.name, t.topic_id if by_id else None)
        tr = TopicResponse(name=t.name, topic_id=t.topic_id, partition_responses=[])
        responses.append(tr)
        rules = None  # the topic's configs, looked up once per topic
        for p in t.partition_data:
            found = next(walk, None)
            pr = PartitionResponse(
                index=p.index,
                error_code=0,
                base_offset=-1,
                log_append_time_ms=-1,
                log_start_offset=-1,
                record_errors=[],
                error_message=None,
            )
            tr.partition_responses.append(pr)
            if whole is not None:
                pr.error_code, pr.error_message = whole.code, whole.answer
                continue
            if acks not in (0, 1, -1):
                pr.error_code = errors.INVALID_REQUIRED_ACKS
                continue
            if meta is None:
                pr.error_code = errors.UNKNOWN_TOPIC_ID if by_id else errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            plog = partition_log(broker, meta, p.index)
            if plog is None:
                pr.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if rules is None:
                rules = _rules(broker, meta)
            # Checked here even when the append goes to a storage thread: for a 1 MB lz4 batch only the lz4 and CRC
            # calls (~20% of the checks' CPU) release the GIL, the records walk holds it, and moving the checks
            # into the append's job cost more broker CPU than it took off the event loop (tree against tree, kcat
            # p1 lz4: loop -0.4..-1.1 ms/MB, total +0.4..+0.7 ms/MB, no gain in wall time).
            # looked up once: validation stamps the batch with it, and an inline append assigns it
            epoch = leader_epochs.current(meta.name, p.index)
            prepared = _prepare(
                broker,
                version,
                meta,
                p.records,
                p.index,
                body.transactional_id,
                rules,
                found,
                epoch,
                maybe_transactional,
            )
            if prepared is None:
                continue
            if isinstance(prepared, Refusal):
                pr.error_code, pr.error_message = prepared.code, prepared.answer
                pr.record_errors = [
                    ProduceResponse.BatchIndexAndErrorMessage(batch_index=index, batch_index_error_message=why)
                    for index, why in prepared.record_errors
                ]
                if prepared.validated:
                    pr.log_start_offset = plog.log_start_offset
                log.warning(
                    "produce to %s-%d from %r rejected: %s (%s)",
                    meta.name,
                    p.index,
                    ctx.client_id,
                    prepared.message,
                    errors.error_for(prepared.code).name,
                )
                continue
            buf, header = prepared
            lat = now_ms() if rules.timestamp_type == "LogAppendTime" else None
            work.append((pr, meta, p.index, plog, buf, header, lat, epoch))
    if not work:
        return _respond(ctx, acks, responses)
    pending = []
    for item in work:
        pr, meta, partition, plog, buf, header, lat, epoch = item
        # A large append goes to the partition's turn of the storage threads even when nothing need be fsynced:
        # its write to the page cache (about half the broker's CPU for 100 B records) then runs while the event
        # loop reads and checks the connection's next request. A small one is appended at once, where the hop
        # to a thread and back would cost more than its write (a request spread over many partitions brings
        # many small ones).
        if not broker.storage_in_thread or (
            not durable
            and len(buf) < OFFLOAD_APPEND_BYTES
            and broker.partition_idle(meta.name, partition)
            and leader_epochs.settled(meta.name, partition, plog, epoch)
        ):
            # in-memory engine, or a small append with nothing queued for the partition, no fsync to wait for and
            # no epoch checkpoint to write (a partition's first append in an epoch writes one, fsynced); appended
            # now, in the epoch validation stamped
            try:
                outcome, _ = _append(broker, meta, partition, plog, buf, header, durable, lat, epoch)
            except Exception as exc:
                outcome = _append_failed(meta, partition, exc)
            _fill(pr, outcome)
            if not outcome[0]:
                broker.waiters.notify(meta.name, partition)
            continue
        job = functools.partial(_queued_append, broker, meta, partition, plog, buf, header, lat)
        pending.append((item, (meta.name, partition, plog, job, durable)))
    if not pending:
        return _respond(ctx, acks, responses)
    # one hand-over to the storage threads for the request's partitions that have nothing queued (each hand-over
    # costs about 45 us of CPU: futures, wake-ups, passing the GIL)
    futures = broker.submit_appends([submission for _item, submission in pending])
    pending = [(item, fut) for (item, _submission), fut in zip(pending, futures)]
    return _produce_async(broker, ctx, acks, responses, pending)


def _queued_append(broker, meta, partition, plog, buf, header, lat, sync: bool):
    return _append(broker, meta, partition, plog, buf, header, sync, lat)


async def _produce_async(broker, ctx, acks, responses, pending):
    for (pr, meta, partition, *_), fut in pending:
        try:
            outcome = await fut
        except Exception as exc:
            outcome = _append_failed(meta, partition, exc)
        _fill(pr, outcome)
        if not outcome[0]:
            broker.waiters.notify(meta.name, partition)
    return _respond(ctx, acks, responses)


def _append_failed(meta, partition, exc):
    code = storage_error_code(exc)
    if code == errors.KAFKA_STORAGE_ERROR:  # the storage engine logs the disk failure itself, loudly, once
        log.warning("append to %s-%d failed: %s", meta.name, partition, exc)
    else:
        log.error("append to %s-%d failed: %s", meta.name, partition, exc, exc_info=code == errors.UNKNOWN_SERVER_ERROR)
    return code, str(exc), -1, -1, -1


def _respond(ctx, acks, responses):
    if acks == 0:
        failed = [
            (tr.name, pr.index, pr.error_code) for tr in responses for pr in tr.partition_responses if pr.error_code
        ]
        if failed:
            raise CloseConnection(f"acks=0 produce failed for {failed}; closing the connection to tell the producer")
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)
