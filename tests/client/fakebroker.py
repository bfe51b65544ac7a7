"""A scriptable in-process broker for connection-level tests (built on kafkawire.protocol).

``handlers[api_key](header, body, version)`` returns a response body, or
``None`` to send nothing (a lost response), or an awaitable of either.
ApiVersions and Metadata have defaults: every API in ``ranges`` and one
broker (this one) leading every topic in ``topics``.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid

from kafkawire.protocol import decode_request, encode_response, errors as kerrors, message_class
from kafkawire.protocol.negotiation import supported_ranges


class FakeBroker:
    def __init__(self, *, ranges: dict[int, tuple[int, int]] | None = None, topics: dict[str, int] | None = None):
        self.ranges = dict(ranges or supported_ranges())
        self.topics = dict(topics or {})
        self.topic_ids = {t: uuid.uuid4() for t in self.topics}
        self.handlers: dict = {}
        self.requests: list[tuple[int, int, object]] = []  # (api_key, version, body)
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self.in_flight = 0
        self.max_in_flight = 0

    async def start(self) -> FakeBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def close(self):
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    def count(self, api_key: int) -> int:
        return sum(1 for k, _, _ in self.requests if k == api_key)

    async def _serve(self, reader, writer):
        tasks = []
        lock = asyncio.Lock()
        queue: asyncio.Queue = asyncio.Queue()

        async def respond_in_order():
            while True:
                item = await queue.get()
                if item is None:
                    return
                cid, fut, version = item
                body = await fut
                self.in_flight -= 1
                if body is not None:
                    writer.write(encode_response(cid, body, version))
                    await writer.drain()

        sender = asyncio.create_task(respond_in_order())
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
                payload = await reader.readexactly(size)
                req = decode_request(payload, framed=False)
                key, version = req.header.request_api_key, req.header.request_api_version
                self.requests.append((key, version, req.body))
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                fut = asyncio.ensure_future(self._answer(key, version, req))
                tasks.append(fut)
                resp_version = version
                if key == 18 and not (self.ranges[18][0] <= version <= self.ranges[18][1]):
                    resp_version = 0
                await queue.put((req.header.correlation_id, fut, resp_version))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            await queue.put(None)
            sender.cancel()
            for t in tasks:
                t.cancel()
            writer.close()
            del lock

    async def _answer(self, key, version, req):
        handler = self.handlers.get(key) or getattr(self, f"_default_{key}", None)
        if handler is None:
            raise RuntimeError(f"fake broker has no handler for API {key}")
        out = handler(req.header, req.body, version)
        if inspect.isawaitable(out):
            out = await out
        return out

    # ApiVersions
    def _default_18(self, header, body, version):
        cls = message_class("ApiVersionsResponse")
        keys = [
            cls.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(self.ranges.items())
        ]
        lo, hi = self.ranges[18]
        code = 0 if lo <= version <= hi else kerrors.UNSUPPORTED_VERSION
        return cls(error_code=code, api_keys=keys)

    # Metadata
    def _default_3(self, header, body, version):
        cls = message_class("MetadataResponse")
        names = list(self.topics) if body.topics is None else [t.name for t in body.topics]
        topics = []
        for name in names:
            n = self.topics.get(name)
            if n is None:
                topics.append(
                    cls.MetadataResponseTopic(error_code=kerrors.UNKNOWN_TOPIC_OR_PARTITION, name=name, partitions=[])
                )
                continue
            topics.append(
                cls.MetadataResponseTopic(
                    error_code=0,
                    name=name,
                    topic_id=self.topic_ids[name],
                    partitions=[
                        cls.MetadataResponsePartition(
                            error_code=0,
                            partition_index=i,
                            leader_id=1,
                            leader_epoch=0,
                            replica_nodes=[1],
                            isr_nodes=[1],
                            offline_replicas=[],
                        )
                        for i in range(n)
                    ],
                )
            )
        return cls(
            brokers=[cls.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=self.port)],
            cluster_id="fake",
            controller_id=1,
            topics=topics,
        )

    # InitProducerId
    def _default_22(self, header, body, version):
        return message_class("InitProducerIdResponse")(error_code=0, producer_id=1000, producer_epoch=0)
