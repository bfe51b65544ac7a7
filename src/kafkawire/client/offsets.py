"""ListOffsets: earliest, latest or by-timestamp offsets of partitions, asked of each leader."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import TYPE_CHECKING, NamedTuple, cast

from ..protocol import KafkaError, errors as kerrors
from ..protocol.messages import message_class
from .cluster import STALE_METADATA, Cluster
from .connection import ConnectionClosed, RequestTimeout

if TYPE_CHECKING:  # built at run time by message_class()
    from ..protocol.messages import ListOffsetsResponse

LIST_OFFSETS = 2
LATEST = -1  # the log end offset (high watermark)
EARLIEST = -2  # the log start offset
MAX_TIMESTAMP = -3  # the offset of the record with the largest timestamp (ListOffsets v7+)

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int = -1


def offset_spec(spec) -> int:
    """``"earliest"``, ``"latest"``, ``"max_timestamp"`` or a timestamp in ms -> ListOffsets timestamp."""
    if isinstance(spec, str):
        names = {
            "earliest": EARLIEST,
            "beginning": EARLIEST,
            "latest": LATEST,
            "end": LATEST,
            "max_timestamp": MAX_TIMESTAMP,
        }
        if spec.lower() in names:
            return names[spec.lower()]
        return int(spec)
    return int(spec)


async def list_offsets(
    cluster: Cluster,
    specs: dict[tuple[str, int], int | str],
    *,
    isolation_level: int = READ_UNCOMMITTED,
    retries: int = 5,
) -> dict[tuple[str, int], OffsetAndTimestamp]:
    """{(topic, partition): spec} -> {(topic, partition): OffsetAndTimestamp}.

    For a timestamp, the earliest offset whose timestamp is >= it; offset -1
    when there is none (as Kafka answers). Stale-metadata errors refresh the
    metadata and retry; other errors raise ``KafkaError``.
    """
    wanted = {tp: offset_spec(s) for tp, s in specs.items()}
    result: dict[tuple[str, int], OffsetAndTimestamp] = {}
    attempt = 0
    while wanted:
        by_leader: dict[int, list] = defaultdict(list)
        failed: dict[tuple[str, int], KafkaError] = {}
        for tp in wanted:
            try:
                leader = await cluster.leader(*tp)
            except KafkaError as exc:
                failed[tp] = exc
                continue
            by_leader[leader].append(tp)
        answers = await asyncio.gather(
            *(_ask(cluster, node, tps, wanted, isolation_level) for node, tps in by_leader.items()),
            return_exceptions=True,
        )
        for (_node, tps), answer in zip(by_leader.items(), answers):
            if isinstance(answer, BaseException):
                if isinstance(answer, (ConnectionClosed, RequestTimeout)):
                    for tp in tps:
                        failed[tp] = KafkaError(kerrors.NETWORK_EXCEPTION, str(answer))
                    continue
                raise answer
            for tp, (code, value) in answer.items():
                if code:
                    failed[tp] = KafkaError(code, f"ListOffsets {tp[0]}-{tp[1]}")
                else:
                    result[tp] = value
        wanted = {tp: wanted[tp] for tp in failed}
        if not wanted:
            break
        attempt += 1
        retriable = [e for e in failed.values() if e.retriable or e.code in STALE_METADATA]
        if attempt > retries or len(retriable) != len(failed):
            bad = (
                next(e for e in failed.values() if not (e.retriable or e.code in STALE_METADATA))
                if len(retriable) != len(failed)
                else next(iter(failed.values()))
            )
            raise bad
        for tp, e in failed.items():
            cluster.handle_error(e.code, tp[0])
        await asyncio.sleep(cluster.backoff.delay(attempt))
        await cluster.refresh(sorted({t for t, _ in wanted} | set(cluster.topics)))
    return result


async def _ask(cluster: Cluster, node: int, tps, wanted, isolation_level):
    conn = await cluster.connection(node)
    cls = message_class("ListOffsetsRequest")
    version = conn.version_for(LIST_OFFSETS)
    topics: dict[str, list] = defaultdict(list)
    for topic, partition in tps:
        ts = wanted[(topic, partition)]
        if ts == MAX_TIMESTAMP and version < 7:
            raise KafkaError(kerrors.UNSUPPORTED_VERSION, "max_timestamp needs ListOffsets v7")
        topics[topic].append(
            cls.ListOffsetsPartition(
                partition_index=partition, timestamp=ts, current_leader_epoch=-1, max_num_offsets=1
            )
        )
    req = cls(
        replica_id=-1,
        isolation_level=isolation_level,
        topics=[cls.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()],
        timeout_ms=int(cluster.request_timeout * 1000),
    )
    # Connection.request decodes the answer with the API's response class; ListOffsets always answers
    resp = cast("ListOffsetsResponse", await conn.request(req))
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            offset = p.offset
            if version == 0:
                offset = p.old_style_offsets[0] if p.old_style_offsets else -1
            out[(t.name, p.partition_index)] = (
                p.error_code,
                OffsetAndTimestamp(offset, p.timestamp, p.leader_epoch if p.leader_epoch is not None else -1),
            )
    return out
