"""The console's cluster view: what kafkawire's client reads from a cluster, as plain dicts for JSON.

Topics with partitions, offsets and configs (Metadata, ListOffsets, DescribeConfigs), records of one
partition from an offset or a timestamp (Fetch, through :class:`~kafkawire.client.AsyncConsumer`), consumer
groups with members, assignments and lag (ListGroups, FindCoordinator, DescribeGroups, OffsetFetch) and a
test record (Produce). The broker's console asks the broker itself; the proxy's asks its upstream, with
``security`` (a :class:`~kafkawire.security.client.ClientSecurity`: TLS and SASL as Kafka's clients
configure them) when the upstream needs them.
Every answer is bounded: at most ``MAX_RECORDS`` records, values cut at ``MAX_VALUE`` bytes.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from kafkawire.client import AsyncAdmin, AsyncConsumer, AsyncProducer
from kafkawire.client.groups.protocol import decode_assignment
from kafkawire.protocol import KafkaError
from kafkawire.protocol.messages import message_class
from kafkawire.security.client import ClientSecurity

MAX_RECORDS = 200
MAX_VALUE = 64 * 1024


def _text(data: bytes | None, fmt: str) -> Any:
    if data is None:
        return None
    cut = data[:MAX_VALUE]
    if fmt == "hex":
        return cut.hex(" ")
    text = cut.decode("utf-8", "replace")
    if fmt == "json":
        try:
            return json.dumps(json.loads(text), indent=2)
        except ValueError:
            return text
    return text


class ClusterView:
    def __init__(self, bootstrap: str, security: ClientSecurity | None = None):
        self.bootstrap = bootstrap
        self.security = security
        self.admin = AsyncAdmin(bootstrap, client_id="kafkawire-console", security=security)

    async def close(self) -> None:
        await self.admin.close()

    async def topics(self) -> list[dict]:
        infos = await self.admin.describe_topics()
        specs: dict[tuple[str, int], str] = {}
        for name, info in infos.items():
            for p in info.partitions:
                specs[(name, p)] = "earliest"
        earliest = await self.admin.list_offsets(specs) if specs else {}
        latest = await self.admin.list_offsets(dict.fromkeys(specs, "latest")) if specs else {}
        out = []
        for name, info in infos.items():
            parts = [
                {
                    "partition": p,
                    "leader": info.partitions[p].leader,
                    "replicas": info.partitions[p].replicas,
                    "isr": info.partitions[p].isr,
                    "earliest": earliest[(name, p)].offset,
                    "latest": latest[(name, p)].offset,
                }
                for p in sorted(info.partitions)
            ]
            out.append(
                {
                    "name": name,
                    "topic_id": str(info.topic_id),
                    "internal": info.is_internal,
                    "partitions": parts,
                    "records": sum(p["latest"] - p["earliest"] for p in parts),
                }
            )
        return out

    async def topic(self, name: str) -> dict:
        topics = {t["name"]: t for t in await self.topics()}
        if name not in topics:
            raise KafkaError(3, f"topic {name!r}")  # UNKNOWN_TOPIC_OR_PARTITION
        topic = topics[name]
        topic["configs"] = {k: v for k, v in sorted((await self.admin.describe_configs(name)).items())}
        topic["sizes"] = await self._sizes(name)
        return topic

    async def _sizes(self, name: str) -> dict[int, int]:
        """Partition sizes in bytes from DescribeLogDirs (empty when the broker does not answer it)."""
        cls = message_class("DescribeLogDirsRequest")
        req = cls(topics=[cls.DescribableLogDirTopic(topic=name, partitions=list(range(0, 1024)))])
        sizes: dict[int, int] = {}
        try:
            conn = await self.admin.cluster.any_connection()
            resp: Any = await conn.request(req)
        except (KafkaError, OSError, ConnectionError, TimeoutError, ValueError):
            return sizes
        for d in resp.results:
            for t in d.topics:
                for p in t.partitions:
                    sizes[p.partition_index] = sizes.get(p.partition_index, 0) + p.partition_size
        return sizes

    async def records(
        self,
        topic: str,
        partition: int,
        *,
        offset: int | None = None,
        timestamp_ms: int | None = None,
        limit: int = 50,
        fmt: str = "text",
    ) -> dict:
        limit = max(1, min(limit, MAX_RECORDS))
        tp = (topic, partition)
        if timestamp_ms is not None:
            found = await self.admin.list_offsets({tp: timestamp_ms})
            start = found[tp].offset
        else:
            start = offset if offset is not None else 0
        end = (await self.admin.list_offsets({tp: "latest"}))[tp].offset
        out: list[dict] = []
        if 0 <= start < end:
            consumer = AsyncConsumer(
                self.bootstrap, client_id="kafkawire-console", fetch_max_wait_ms=100, security=self.security
            )
            try:
                consumer.assign({tp: start})
                deadline = asyncio.get_running_loop().time() + 5.0
                while len(out) < limit and asyncio.get_running_loop().time() < deadline:
                    for r in await consumer.records(timeout=0.5):
                        if len(out) >= limit:
                            break
                        out.append(_record(r, fmt))
                    if out and out[-1]["offset"] >= end - 1:
                        break
            finally:
                await consumer.close()
        return {"topic": topic, "partition": partition, "start": start, "end": end, "records": out}

    async def produce(self, topic: str, value: str, key: str | None, headers: dict[str, str], partition: int | None):
        producer = AsyncProducer(self.bootstrap, client_id="kafkawire-console", security=self.security)
        try:
            await producer.start()
            meta = await producer.send_and_wait(
                topic,
                value.encode(),
                key=key.encode() if key else None,
                partition=partition,
                headers=[(k, v.encode()) for k, v in headers.items()],
            )
        finally:
            await producer.close()
        return {"topic": meta.topic, "partition": meta.partition, "offset": meta.offset}

    async def groups(self) -> list[dict]:
        cluster = self.admin.cluster
        await cluster.refresh()
        ids: dict[str, dict] = {}
        for node in list(cluster.brokers):
            conn = await cluster.connection(node)
            resp: Any = await conn.request(message_class("ListGroupsRequest")(), version=4)
            for g in resp.groups:
                ids[g.group_id] = {"group_id": g.group_id, "protocol_type": g.protocol_type, "state": g.group_state}
        out = []
        for gid in sorted(ids):
            try:
                out.append(await self.group(gid))
            except (KafkaError, OSError, ConnectionError, TimeoutError) as exc:
                out.append({**ids[gid], "error": str(exc), "members": [], "offsets": []})
        return out

    async def group(self, group_id: str) -> dict:
        cluster = self.admin.cluster
        any_conn = await cluster.any_connection()
        find: Any = await any_conn.request(message_class("FindCoordinatorRequest")(key=group_id, key_type=0), version=3)
        if find.error_code:
            raise KafkaError(find.error_code, f"FindCoordinator for group {group_id!r}")
        conn = await cluster.connection(find.node_id)
        described: Any = await conn.request(message_class("DescribeGroupsRequest")(groups=[group_id]), version=5)
        g = described.groups[0]
        members = []
        for m in g.members:
            try:
                assigned = decode_assignment(bytes(m.member_assignment)) if m.member_assignment else []
            except Exception:  # an assignment of another protocol type (not a consumer's): shown as absent
                assigned = []
            members.append(
                {
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "host": m.client_host,
                    "assignment": [f"{t}-{p}" for t, p in assigned],
                }
            )
        fetched: Any = await conn.request(
            message_class("OffsetFetchRequest")(group_id=group_id, topics=None), version=7
        )
        committed = [(t.name, p.partition_index, p.committed_offset) for t in fetched.topics for p in t.partitions]
        ends = await self.admin.list_offsets({(t, p): "latest" for t, p, _ in committed}) if committed else {}
        offsets = [
            {
                "topic": t,
                "partition": p,
                "committed": c,
                "end": ends[(t, p)].offset,
                "lag": ends[(t, p)].offset - c if c >= 0 else None,
            }
            for t, p, c in sorted(committed)
        ]
        return {
            "group_id": group_id,
            "state": g.group_state,
            "protocol_type": g.protocol_type,
            "protocol": g.protocol_data,
            "coordinator": find.node_id,
            "members": members,
            "offsets": offsets,
        }


def _record(r, fmt: str) -> dict:
    return {
        "offset": r.offset,
        "timestamp": r.timestamp,
        "key": _text(r.key, fmt),
        "value": _text(r.value, fmt),
        "value_bytes": None if r.value is None else len(r.value),
        "headers": [
            [k, None if v is None else base64.b64encode(v).decode() if fmt == "hex" else _text(v, "text")]
            for k, v in r.headers
        ],
    }


__all__ = ["ClusterView", "MAX_RECORDS"]
