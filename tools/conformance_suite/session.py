"""A case's view of one broker: its connection, its ids, and the answers to compare.

A case is written once and run on both brokers; it asks the session for names
(unique per run, identical on both brokers), for this broker's ids (topic ids,
member ids, producer ids as this broker handed them out), and sends two kinds
of request:

- :meth:`Session.probe`: the answer is recorded, normalised, and compared with
  the other broker's answer to the same probe;
- :meth:`Session.call`: set-up; the answer is only returned to the case.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field

from kafkawire.protocol import api_by_name, encode_request, request_header
from kafkawire.protocol.records import build_batch

from .build import build
from .normalise import Normaliser
from .transport import Closed, Connection, NoAnswer, Undecodable


class SetupError(RuntimeError):
    """A set-up step did not get the answer the case needs."""


@dataclass
class Broker:
    """A running broker to compare: its address, own node id, and the versions it serves."""

    label: str  # "kafkawire" or "kafka"
    host: str
    port: int
    node_id: int | None = None
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)


@dataclass
class Outcome:
    api: str
    version: int
    label: str
    tree: object


BASE_TIMESTAMP = 1_700_000_000_000  # record timestamps are fixed so that batches are identical


class Session:
    def __init__(self, broker: Broker, common: dict[str, tuple[int, int]], prefix: str):
        self.broker = broker
        self.common = common  # API name -> (lo, hi) both brokers serve
        self.prefix = prefix  # unique per run and case, identical on both brokers
        self.norm = Normaliser(broker.node_id)
        self.outcomes: list[Outcome] = []
        self.conn = Connection(broker.host, broker.port)
        self._extra: list[Connection] = []
        self.state: dict = {}  # the case's own per-broker values

    def close(self) -> None:
        self.conn.close()
        for c in self._extra:
            c.close()

    def connection(self) -> Connection:
        """Another connection to the same broker (a second group member, ...)."""
        c = Connection(self.broker.host, self.broker.port)
        self._extra.append(c)
        return c

    # -- names and ids ----------------------------------------------------
    def name(self, suffix: str = "t") -> str:
        return f"{self.prefix}-{suffix}"

    def top(self, api: str) -> int:
        """The highest version of ``api`` both brokers serve."""
        return self.common[api][1]

    def serves(self, api: str, version: int) -> bool:
        lo, hi = self.common.get(api, (0, -1))
        return lo <= version <= hi

    def tid(self, name: str):
        """This broker's id for topic ``name`` (the one it first reported)."""
        for topic_id, bound in self.norm.topic_ids.items():
            if bound == name:
                return topic_id
        raise SetupError(f"no topic id known for {name}")

    # -- requests ---------------------------------------------------------
    def call(
        self, api: str, version: int | None, data: dict, *, conn: Connection | None = None, timeout: float | None = None
    ):
        """Set-up request (not compared). ``version`` None: the highest both serve."""
        version = self.top(api) if version is None else version
        body = build(api, version, data)
        answer = (conn or self.conn).request(body, version, timeout=timeout)
        if isinstance(answer, (Closed, NoAnswer, Undecodable)):
            raise SetupError(f"{api} v{version}: {answer.to_dict()}")
        self.norm.learn(answer)
        return answer

    def probe(
        self,
        api: str,
        version: int,
        data: dict,
        *,
        label: str = "",
        keep_names=None,
        expect_answer: bool = True,
        conn: Connection | None = None,
        timeout: float | None = None,
    ):
        """A compared request; returns the answer (or an outcome value) for later steps."""
        body = build(api, version, data)
        answer = (conn or self.conn).request(body, version, expect_answer=expect_answer, timeout=timeout)
        self.outcomes.append(Outcome(api, version, label, self.norm.tree(answer, version, keep_names)))
        return answer

    def probe_frame(
        self,
        api: str,
        header_version: int,
        body_version: int,
        data: dict,
        *,
        label: str,
        answer_version: int | None = None,
        mangle=None,
    ):
        """A request whose header claims ``header_version`` but whose body is encoded at
        ``body_version`` (versions the codec does not have, truncated or garbled bodies).
        ``mangle`` may rewrite the frame's payload (after the size)."""
        info = api_by_name(api)
        body = build(api, body_version, data)
        conn = self.conn
        conn.correlation_id += 1
        frame = bytearray(
            encode_request(request_header(info.key, body_version, conn.correlation_id, conn.client_id), body)
        )
        struct.pack_into(">h", frame, 6, header_version)
        if mangle is not None:
            payload = mangle(bytes(frame[4:]))
            frame = struct.pack(">i", len(payload)) + payload
        version = body_version if answer_version is None else answer_version
        answer = conn.send_frame(bytes(frame), info.key, version)
        self.outcomes.append(Outcome(api, header_version, label, self.norm.tree(answer, version)))
        return answer

    # -- common set-up ----------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, configs: dict | None = None, wait: bool = True):
        answer = self.call(
            "CreateTopics",
            None,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": 1,
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                    }
                ],
                "timeout_ms": 30000,
            },
        )
        err = answer.topics[0].error_code
        if err:
            raise SetupError(f"CreateTopics {name}: error {err}")
        if wait:
            self.wait_topic(name, partitions)
        return answer

    def wait_topic(self, name: str, partitions: int, timeout: float = 15.0) -> None:
        """Until Metadata shows every partition with a leader (Kafka's metadata propagates)."""
        deadline = time.monotonic() + timeout
        while True:
            md = self.call("Metadata", None, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
            t = md.topics[0]
            if (
                t.error_code == 0
                and len(t.partitions) == partitions
                and all(p.leader_id >= 0 and p.error_code == 0 for p in t.partitions)
            ):
                # the metadata is there; the partitions are served once ListOffsets answers for them
                lo = self.call(
                    "ListOffsets",
                    None,
                    {
                        "replica_id": -1,
                        "topics": [
                            {
                                "name": name,
                                "partitions": [{"partition_index": i, "timestamp": -1} for i in range(partitions)],
                            }
                        ],
                    },
                )
                if all(p.error_code == 0 for p in lo.topics[0].partitions):
                    return
            if time.monotonic() > deadline:
                raise SetupError(f"topic {name} not ready: {t}")
            time.sleep(0.05)

    def batch(self, count: int = 3, *, first: int = 0, **kwargs) -> bytes:
        """A deterministic v2 batch: fixed keys, values and timestamps."""
        return build_batch(
            [(b"k%d" % i, b"value-%d" % i, [], BASE_TIMESTAMP + i) for i in range(first, first + count)], **kwargs
        )

    def produce(
        self, name: str, partition: int = 0, count: int = 3, *, first: int = 0, records: bytes = None, **kwargs
    ):
        deadline = time.monotonic() + 15
        while True:
            answer = self.call(
                "Produce",
                None,
                {
                    "acks": -1,
                    "timeout_ms": 30000,
                    "topic_data": [
                        {
                            "name": name,
                            "topic_id": self.tid(name),
                            "partition_data": [
                                {"index": partition, "records": records or self.batch(count, first=first, **kwargs)}
                            ],
                        }
                    ],
                },
            )
            err = answer.responses[0].partition_responses[0].error_code
            if not err:
                return answer
            if err not in (3, 5, 6, 100) or time.monotonic() > deadline:  # retriable while a topic settles
                raise SetupError(f"Produce {name}-{partition}: error {err}")
            time.sleep(0.05)

    def wait_until(self, done, timeout: float = 3.0) -> bool:
        """Poll ``done()`` (set-up calls only) until true or ``timeout``; whether it became true.
        For changes Kafka applies after answering (through its metadata log)."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def coordinator_ready(self, key: str, key_type: int = 0, timeout: float = 30.0) -> None:
        """Until FindCoordinator for ``key`` answers without error (Kafka creates __consumer_offsets first)."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.call("FindCoordinator", None, {"key": key, "key_type": key_type, "coordinator_keys": [key]})
            errors = [c.error_code for c in answer.coordinators] if answer.coordinators else [answer.error_code]
            if not any(errors):
                return
            if time.monotonic() > deadline:
                raise SetupError(f"no coordinator for {key}: {answer}")
            time.sleep(0.1)
