"""Fetch: stored batches go into the response as they are (no re-encoding): on a plaintext connection, file ranges
the net layer sends with ``os.sendfile`` (``fetch_sendfile``, on by default); on TLS, or with it off, views of the
mapped segments written with ``writelines``.

Long polling: when fewer than MinBytes are available the request waits (up to
MaxWaitMs) for a produce to one of its partitions. The first batch is
returned even when it is larger than MaxBytes/PartitionMaxBytes, so a
consumer always makes progress. A partition's records end at the last whole
batch within its limits, where Kafka (slicing the segment by bytes) adds the part
of the next batch that fits: every client drops that part and fetches the batch
again, so it is bytes sent twice, and the whole batches are the same as Kafka's
(tests/broker/test_fetch_limits_as_kafka.py). Fetch v0-3 get magic 0/1 message sets
(down-converted); fetch sessions are in ``kafkawire.broker.fetch_sessions``.
"""

from __future__ import annotations

import asyncio
import struct
import time

from kafkawire.protocol import ApiKey, errors, message_class
from kafkawire.protocol.apis import response_header_version
from kafkawire.protocol.framing import frame_size_prefix
from kafkawire.protocol.messages import FetchResponse
from kafkawire.protocol.records import batches_to_message_set
from kafkawire.security.authorizer.entries import merge as merge_denied

from ..dispatch import handles
from ..fetch_sessions import CachedPartition, FetchContext
from ..storage import base as sb
from ._common import ZERO_UUID, find_topic, log

INT32_MAX = 2147483647
READ_COMMITTED = 1

TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction


class Chunks:
    """Several stored buffers that go into one ``records`` field without being joined."""

    __slots__ = ("chunks", "size")

    def __init__(self, chunks, size):
        self.chunks = chunks
        self.size = size

    def __len__(self):
        return self.size

    def tobytes(self) -> bytes:
        return b"".join(bytes(c) if not isinstance(c, (bytes, memoryview)) else c for c in self.chunks)


def encode_fetch_response(correlation_id: int, body, version: int) -> list:
    """Like ``encode_response_parts`` but expands ``Chunks`` into their buffers (zero copy)."""
    parts: list = [b""]
    append = parts.append
    extend = parts.extend

    def write(buf):
        if type(buf) is Chunks:
            extend(buf.chunks)
        else:
            append(buf)

    header = message_class("ResponseHeader")(correlation_id=correlation_id)
    header.encode_into(append, response_header_version(ApiKey.FETCH, version))
    body.encode_into(write, version)
    parts[0] = frame_size_prefix(sum(len(p) for p in parts))
    return parts


class _Read:
    __slots__ = ("cached", "meta", "data", "size", "error", "diverging")

    def __init__(self, cached, meta):
        self.cached = cached
        self.meta = meta
        self.data = None
        self.size = 0
        self.error = 0
        self.diverging = None  # (epoch, end offset) when the fetcher's last fetched epoch diverges from the log


def _check_last_fetched_epoch(broker, topic, plog, cp) -> tuple[int, tuple | None]:
    """(error, diverging (epoch, end offset) or None) for a fetch that names the epoch of the last batch it has.

    As Kafka's Partition.readRecords: the end offset of that epoch comes from the partition's epoch history
    (OffsetForLeaderEpoch's answer); an epoch it has no end offset for is OFFSET_OUT_OF_RANGE, and so is a
    fetch offset below the log start whatever the epochs say. When the history's epoch is older than the
    fetcher's, or ends before the fetch offset, that (epoch, end offset) goes back as the diverging epoch,
    with the partition's offsets and no records."""
    cache = broker.leader_epochs.cache(topic, cp.partition, plog)
    epoch, end = cache.end_offset_for(cp.last_fetched_epoch, plog.log_end_offset, plog.log_start_offset)
    if end < 0 or epoch < 0 or cp.fetch_offset < plog.log_start_offset:
        return errors.OFFSET_OUT_OF_RANGE, None
    if epoch < cp.last_fetched_epoch or end < cp.fetch_offset:
        return 0, (epoch, end)
    return 0, None


def _partitions_of(broker, body, version: int) -> list[CachedPartition]:
    by_id = version >= 13
    out = []
    for t in body.topics:
        key = t.topic_id if by_id else t.topic
        for p in t.partitions:
            out.append(
                CachedPartition(
                    key,
                    p.partition,
                    p.fetch_offset,
                    p.partition_max_bytes,
                    p.current_leader_epoch,
                    p.last_fetched_epoch if version >= 12 else -1,
                )
            )
    return out


def _read_all(
    broker,
    version: int,
    parts: list[CachedPartition],
    max_bytes: int,
    metas: dict,
    committed: bool = False,
    regions: bool = False,
    may_read=None,
) -> tuple[list, int]:
    """One pass over the partitions: (reads, bytes found, any error). ``committed`` (read_committed) reads
    below each partition's last stable offset, with the aborted transactions of what it read. ``regions``:
    the records may be file ranges of the segments (``FileRegion``), for connections that sendfile them."""
    by_id = version >= 13
    remaining = max_bytes
    min_one = True
    total = 0
    reads = []
    for cp in parts:
        meta = metas.get(cp.topic_key, False)
        if meta is False:
            meta = metas[cp.topic_key] = find_topic(
                broker, None if by_id else cp.topic_key, cp.topic_key if by_id else None
            )
        r = _Read(cp, meta)
        reads.append(r)
        if meta is None:
            r.error = errors.UNKNOWN_TOPIC_ID if by_id else errors.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if not 0 <= cp.partition < meta.partitions:
            r.error = errors.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if may_read is not None and not may_read(meta.name):
            r.error = errors.TOPIC_AUTHORIZATION_FAILED
            continue
        r.error = broker.leader_epochs.error(meta.name, cp.partition, cp.current_leader_epoch)
        if r.error:
            continue
        try:
            plog = broker.storage.partition(meta.name, cp.partition)
            if cp.last_fetched_epoch >= 0:
                r.error, r.diverging = _check_last_fetched_epoch(broker, meta.name, plog, cp)
                if r.error:
                    continue
                if r.diverging is not None:
                    r.data = plog.read(r.diverging[1], 0, min_one=False)  # the offsets, no records
                    continue
            limit = min(cp.max_bytes, remaining)
            if limit <= 0 and not min_one:
                r.data = (plog.read_committed if committed else plog.read)(cp.fetch_offset, 0, min_one=False)
                continue
            if committed:
                result = plog.read_committed(cp.fetch_offset, max(limit, 0), min_one=min_one, regions=regions)
            elif regions:
                result = plog.read_regions(cp.fetch_offset, max(limit, 0), min_one=min_one)
            else:
                result = plog.read(cp.fetch_offset, max(limit, 0), min_one=min_one)
        except sb.OffsetOutOfRangeError:
            r.error = errors.OFFSET_OUT_OF_RANGE
            continue
        except sb.UnknownTopicError:
            r.error = errors.UNKNOWN_TOPIC_OR_PARTITION
            continue
        r.data = result
        r.size = result.size
        if result.size:
            min_one = False
            remaining -= result.size
            total += result.size
    return reads, total


# answered with Kafka's FetchResponse.partitionResponse (an empty aborted list): not found, or not readable
_NOT_FOUND = (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.UNKNOWN_TOPIC_ID, errors.TOPIC_AUTHORIZATION_FAILED)
_LEN = struct.Struct(">i")
_ATTRS = struct.Struct(">h")


def _has_zstd(chunks) -> bool:
    """Whether any stored batch is zstd-compressed (magic 0/1 message sets cannot carry those)."""
    for chunk in chunks:
        view = memoryview(chunk)
        pos, n = 0, len(view)
        while n - pos >= 23:
            if (_ATTRS.unpack_from(view, pos + 21)[0] & 0x07) == 4:
                return True
            pos += 12 + _LEN.unpack_from(view, pos + 8)[0]
    return False


def _records_field(result, version: int, fetch_offset: int):
    if result is None or not result.chunks:
        return b"" if version >= 4 else b""
    chunks = result.chunks
    if version <= 3:  # magic 0 (v0-1) or 1 (v2-3) message sets for old consumers
        buf = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        return batches_to_message_set(buf, 0 if version <= 1 else 1, first_offset=fetch_offset)
    if len(chunks) == 1:
        return chunks[0]
    return Chunks(chunks, result.size)


def _build(broker, version: int, body, ctx: FetchContext, reads: list) -> FetchResponse:
    by_id = version >= 13
    committed = version >= 4 and body.isolation_level == READ_COMMITTED
    topics: list = []
    last_key = object()
    for r in reads:
        cp = r.cached
        if version < 4 and r.data is not None and r.data.chunks and _has_zstd(r.data.chunks):
            # magic 0/1 message sets cannot carry zstd (Kafka 4.x no longer serves these versions at all)
            r.error, r.data, r.size = errors.UNSUPPORTED_COMPRESSION_TYPE, None, 0
        if r.error:
            # Kafka 4.4 reports no offsets for a partition in error, and an empty aborted list (whatever the
            # isolation level) only where the partition was not found; a failed read has none
            hw = start = lso = -1
            aborted = [] if r.error in _NOT_FOUND else None
        else:
            hw, start, lso = r.data.high_watermark, r.data.log_start_offset, r.data.last_stable_offset
            # read_committed: the aborted transactions overlapping the records returned, an empty list when
            # none; read_uncommitted: null, as Kafka answers
            aborted = None
            if committed:
                aborted = [
                    AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                    for a in r.data.aborted or ()
                ]
        if ctx.incremental:
            changed = (
                r.size > 0
                or r.error
                or r.diverging is not None
                or hw != cp.high_watermark
                or start != cp.log_start_offset
                or lso != cp.last_stable_offset
            )
            if not changed:
                continue
        if ctx.session is not None:
            cp.high_watermark, cp.log_start_offset, cp.last_stable_offset = hw, start, lso
            if ctx.incremental:
                # as Kafka does: a partition that is answered goes to the end of the session's order, so that
                # a size-limited response cannot starve the partitions behind it
                key = (cp.topic_key, cp.partition)
                if key in ctx.session.partitions:
                    ctx.session.partitions.move_to_end(key)
        pd = PartitionData(
            partition_index=cp.partition,
            error_code=r.error,
            high_watermark=hw,
            last_stable_offset=lso,
            log_start_offset=start,
            aborted_transactions=aborted,
            preferred_read_replica=-1,
            records=_records_field(r.data, version, cp.fetch_offset),
        )
        if r.diverging is not None:
            pd.diverging_epoch = FetchResponse.EpochEndOffset(epoch=r.diverging[0], end_offset=r.diverging[1])
        if cp.topic_key != last_key:
            last_key = cp.topic_key
            if by_id:
                name = r.meta.name if r.meta is not None else ""
                topics.append(TopicResponse(topic=name, topic_id=cp.topic_key, partitions=[pd]))
            else:
                topics.append(TopicResponse(topic=cp.topic_key, topic_id=ZERO_UUID, partitions=[pd]))
        else:
            topics[-1].partitions.append(pd)
    return FetchResponse(
        throttle_time_ms=0, error_code=0, session_id=ctx.response_session_id, responses=topics, node_endpoints=[]
    )


@handles("Fetch", 0, 18)
def fetch(broker, ctx, body):
    version = ctx.api_version
    if version <= 14 and body.replica_id >= 0 or version >= 15 and body.replica_state.replica_id >= 0:
        # a follower: kafkawire has no replicas
        return FetchResponse(throttle_time_ms=0, error_code=errors.NOT_LEADER_OR_FOLLOWER, session_id=0, responses=[])
    by_id = version >= 13
    requested = _partitions_of(broker, body, version)
    forgotten = []
    if version >= 7:
        for t in body.forgotten_topics_data:
            key = t.topic_id if by_id else t.topic
            forgotten.extend((key, p) for p in t.partitions)
    fctx = broker.fetch_sessions.new_context(
        body.session_id if version >= 7 else 0,
        body.session_epoch if version >= 7 else -1,
        requested,
        forgotten,
        by_id,
        version >= 7,
    )
    if fctx.error:
        log.info(
            "fetch session error %s for session %d epoch %d from %r",
            errors.error_for(fctx.error).name,
            body.session_id,
            body.session_epoch,
            ctx.client_id,
        )
        return FetchResponse(throttle_time_ms=0, error_code=fctx.error, session_id=0, responses=[])
    max_bytes = body.max_bytes if version >= 3 else INT32_MAX
    metas: dict = {}
    committed = version >= 4 and body.isolation_level == READ_COMMITTED
    regions = _sends_files(broker, ctx, version)
    may_read = _readable(broker, ctx)
    reads, total = _read_all(broker, version, fctx.partitions, max_bytes, metas, committed, regions, may_read)
    errored = any(r.error or r.diverging is not None for r in reads)  # answered at once, as Kafka does
    if total >= body.min_bytes or body.max_wait_ms <= 0 or errored or not fctx.partitions:
        return _respond(broker, ctx, body, fctx, reads)
    return _long_poll(broker, ctx, body, fctx, max_bytes, metas)


def _readable(broker, ctx):
    """None without ACLs. With ACLs: whether the principal may READ a topic, asked once per topic per request. The topics named in
    the request were checked before the handler (``security.authorizer.entries``); this covers the partitions an
    incremental fetch session carries from earlier requests, which Kafka authorizes on every request too, so
    that a READ ACL taken away stops a consumer's session at its next fetch (TOPIC_AUTHORIZATION_FAILED)."""
    if broker.authorizer is None:
        return None
    from kafkawire.security.authorizer.model import AclOperation, ResourceType
    from kafkawire.security.authorizer.rules import allowed

    decided: dict[str, bool] = {}

    def may_read(topic: str) -> bool:
        verdict = decided.get(topic)
        if verdict is None:
            verdict = decided[topic] = allowed(broker, ctx, AclOperation.READ, ResourceType.TOPIC, topic)
        return verdict

    return may_read


def _sends_files(broker, ctx, version: int) -> bool:
    """Whether the records go out as segment file ranges for os.sendfile: when the broker is configured so
    (``fetch_sendfile``, ``kafkawire.fetch.sendfile``, on by default), on connections whose transport can
    sendfile (plaintext), for v4+ (v0-3 get message sets converted in memory). Otherwise the records go out as
    views of the mapped segments, written with writev: no copy through Python either way."""
    return (
        version >= 4
        and getattr(broker.config, "fetch_sendfile", False) is True
        and getattr(ctx.connection, "sendfile", False) is True
    )


def _respond(broker, ctx, body, fctx, reads):
    response = _build(broker, ctx.api_version, body, fctx, reads)
    response = merge_denied(ctx, response)  # with ACLs: the answers of the topics the principal may not read
    return _Encoded(encode_fetch_response(ctx.correlation_id, response, ctx.api_version))


class _Encoded(list):
    """An already encoded response (the dispatcher writes it as it is)."""


async def _long_poll(broker, ctx, body, fctx, max_bytes, metas):
    """Wakes on every append to a partition read, markers included (whoever appends a transaction marker
    notifies ``broker.waiters`` as Produce does), so a read_committed poll answers once the last stable
    offset passes new records."""
    version = ctx.api_version
    committed = version >= 4 and body.isolation_level == READ_COMMITTED
    regions = _sends_files(broker, ctx, version)
    may_read = _readable(broker, ctx)
    deadline = time.monotonic() + body.max_wait_ms / 1000.0
    keys = []
    for cp in fctx.partitions:
        meta = metas.get(cp.topic_key)
        if meta:
            keys.append((meta.name, cp.partition))
    event = broker.waiters.register(keys)
    try:
        while True:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                break
            try:
                await asyncio.wait_for(event.wait(), timeout)
            except TimeoutError:
                break
            event.clear()
            reads, total = _read_all(broker, version, fctx.partitions, max_bytes, {}, committed, regions, may_read)
            if total >= body.min_bytes or any(r.error or r.diverging is not None for r in reads):
                return _respond(broker, ctx, body, fctx, reads)
            if broker.server is None:
                break
    finally:
        broker.waiters.unregister(event)
    reads, _ = _read_all(broker, version, fctx.partitions, max_bytes, {}, committed, regions, may_read)
    return _respond(broker, ctx, body, fctx, reads)
