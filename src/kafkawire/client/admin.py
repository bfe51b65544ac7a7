"""Admin operations: create/delete/describe/list topics, list offsets, describe configs (asyncio).

Every per-topic error in a response is raised as ``KafkaError`` with Kafka's
name and code (``TOPIC_ALREADY_EXISTS (36)``...), unless the caller asks
for the per-topic results.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from ..protocol import KafkaError, errors as kerrors
from ..protocol.messages import message_class
from .cluster import ZERO_UUID, Cluster, TopicInfo
from .offsets import READ_UNCOMMITTED, OffsetAndTimestamp, list_offsets

if TYPE_CHECKING:  # built at run time by message_class()
    from ..protocol.messages import CreateTopicsResponse, DeleteTopicsResponse, DescribeConfigsResponse

# Connection.request decodes an answer with its API's response class and returns None only for a request
# without a response on the wire (Produce with acks=0): the casts below name the class it returns.

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: the broker's default
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)


class AsyncAdmin:
    """``async with AsyncAdmin("127.0.0.1:9092") as admin: await admin.create_topics([...])``."""

    def __init__(self, bootstrap="127.0.0.1:9092", *, cluster: Cluster | None = None, **cluster_options):
        self._own_cluster = cluster is None
        self.cluster = cluster or Cluster(bootstrap, **cluster_options)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def close(self):
        if self._own_cluster:
            await self.cluster.close()

    # -- topics ------------------------------------------------------------------

    async def create_topics(
        self,
        topics: list[NewTopic | str],
        *,
        timeout: float = 30.0,
        validate_only: bool = False,
        raise_errors: bool = True,
        wait: bool = True,
    ) -> dict[str, KafkaError | None]:
        """Create topics. ``wait``: return only once the metadata shows them with leaders."""
        cls = message_class("CreateTopicsRequest")
        items = [NewTopic(t) if isinstance(t, str) else t for t in topics]
        req = cls(
            topics=[
                cls.CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    assignments=[],
                    configs=[cls.CreatableTopicConfig(name=k, value=str(v)) for k, v in t.configs.items()],
                )
                for t in items
            ],
            timeout_ms=int(timeout * 1000),
            validate_only=validate_only,
        )
        conn = await self.cluster.controller()
        resp = cast("CreateTopicsResponse", await conn.request(req, timeout=timeout + self.cluster.request_timeout))
        results = {r.name: (KafkaError(r.error_code, r.error_message) if r.error_code else None) for r in resp.topics}
        self._raise_first(results, raise_errors)
        if wait and not validate_only:
            created = [n for n, e in results.items() if e is None]
            if created:
                await self._wait_for(created, present=True, timeout=timeout)
        return results

    async def delete_topics(
        self, names: list[str], *, timeout: float = 30.0, raise_errors: bool = True, wait: bool = True
    ) -> dict[str, KafkaError | None]:
        cls = message_class("DeleteTopicsRequest")
        conn = await self.cluster.controller()
        req = cls(
            topics=[cls.DeleteTopicState(name=n, topic_id=ZERO_UUID) for n in names],
            topic_names=list(names),
            timeout_ms=int(timeout * 1000),
        )
        resp = cast("DeleteTopicsResponse", await conn.request(req, timeout=timeout + self.cluster.request_timeout))
        results = {}
        for r in resp.responses:
            name = r.name if r.name is not None else self.cluster.topic_names.get(r.topic_id, str(r.topic_id))
            results[name] = KafkaError(r.error_code, r.error_message) if r.error_code else None
        self._raise_first(results, raise_errors)
        for n, e in results.items():
            if e is None:
                self.cluster.topics.pop(n, None)
        if wait:
            deleted = [n for n, e in results.items() if e is None]
            if deleted:
                await self._wait_for(deleted, present=False, timeout=timeout)
        return results

    @staticmethod
    def _raise_first(results, raise_errors):
        if raise_errors:
            for err in results.values():
                if err is not None:
                    raise err

    async def _wait_for(self, names, *, present: bool, timeout: float):
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        delay = 0.02
        while True:
            resp = await self.cluster.refresh(list(names), auto_create=False)
            state = {
                t.name: (t.error_code == 0 and bool(t.partitions) and all(p.leader_id >= 0 for p in t.partitions))
                for t in resp.topics
            }
            if all(state.get(n, False) == present for n in names):
                return
            if loop.time() >= end:
                return  # the broker said yes; metadata propagation is slow, not an error here
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        await self.cluster.refresh(all_topics=True)
        return sorted(n for n, t in self.cluster.topics.items() if include_internal or not t.is_internal)

    async def describe_topics(self, names: list[str] | None = None) -> dict[str, TopicInfo]:
        """Topic metadata (partitions, leaders, replicas, ISR); unknown topics raise."""
        if names is None:
            await self.cluster.refresh(all_topics=True)
            return dict(sorted(self.cluster.topics.items()))
        resp = await self.cluster.refresh(list(names), auto_create=False)
        for t in resp.topics:
            if t.error_code and t.error_code != kerrors.LEADER_NOT_AVAILABLE:
                raise KafkaError(t.error_code, f"topic {t.name!r}")
        return {n: self.cluster.topics[n] for n in names}

    async def describe_cluster(self) -> dict:
        await self.cluster.refresh()
        return {
            "cluster_id": self.cluster.cluster_id,
            "controller_id": self.cluster.controller_id,
            "brokers": sorted(self.cluster.brokers.values(), key=lambda b: b.node_id),
        }

    # -- offsets and configs -----------------------------------------------------------

    async def list_offsets(
        self, specs: dict[tuple[str, int], int | str], *, isolation_level: int = READ_UNCOMMITTED
    ) -> dict[tuple[str, int], OffsetAndTimestamp]:
        """{(topic, partition): "earliest" | "latest" | "max_timestamp" | timestamp_ms} -> offsets."""
        return await list_offsets(self.cluster, specs, isolation_level=isolation_level)

    async def describe_configs(
        self,
        name: str,
        *,
        resource_type: int = RESOURCE_TOPIC,
        keys: list[str] | None = None,
        with_details: bool = False,
    ) -> dict:
        """Configs of a topic (or, with ``resource_type=RESOURCE_BROKER``, a broker id as ``name``).

        -> {config name: value}, or with ``with_details`` {name: DescribeConfigsResourceResult}.
        """
        cls = message_class("DescribeConfigsRequest")
        req = cls(
            resources=[
                cls.DescribeConfigsResource(
                    resource_type=resource_type, resource_name=str(name), configuration_keys=keys
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        if resource_type == RESOURCE_BROKER:
            conn = await self.cluster.connection(int(name))
        else:
            conn = await self.cluster.any_connection()
        resp = cast("DescribeConfigsResponse", await conn.request(req))
        out = {}
        for r in resp.results:
            if r.error_code:
                raise KafkaError(r.error_code, r.error_message or f"describe configs of {name}")
            for c in r.configs:
                out[c.name] = c if with_details else c.value
        return out

    async def api_versions(self, node_id: int | None = None) -> dict[int, tuple[int, int]]:
        """The broker's {api_key: (min, max)} as its ApiVersions response said."""
        conn = await (self.cluster.connection(node_id) if node_id is not None else self.cluster.any_connection())
        return dict(conn.broker_versions)
