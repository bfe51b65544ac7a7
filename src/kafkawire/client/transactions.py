"""The transactional producer's state: its coordinator, the partitions and groups of the open transaction.

An ``AsyncProducer`` with a ``transactional_id`` owns one ``TransactionManager``.
It follows what Kafka's Java producer does (the wire behaviour, not its code):

* ``init_transactions``: FindCoordinator (key type 1, the transactional id),
  then InitProducerId with the id and ``transaction.timeout.ms``; the
  coordinator ends whatever the id's previous producer left open and fences it
  (a higher epoch). CONCURRENT_TRANSACTIONS and a loading or moved coordinator
  are retried.
* transaction version: the broker's ApiVersions finalized feature
  ``transaction.version``. With 2 (Kafka 4.x, KIP-890) the partitions are
  added by the Produce requests themselves (Produce v12+), offsets are
  committed with TxnOffsetCommit v5 and no AddOffsetsToTxn, and each EndTxn
  (v5) answers a new epoch the producer uses from then on. With 1 (or an older
  broker) every partition is added with AddPartitionsToTxn v3 before its first
  batch is sent, the group with AddOffsetsToTxn, and Produce stays at v11,
  EndTxn at v4, TxnOffsetCommit at v4 (the versions that mean "version 1").
* errors: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
  INVALID_TXN_STATE, TRANSACTION_COORDINATOR_FENCED and an unexpected InitProducerId answer are
  *fatal*: the producer can only be closed. Anything else that fails a transaction (a batch that
  could not be written, a refused partition or offset commit) is *abortable*: ``commit_transaction``
  raises it and ``abort_transaction`` makes the producer usable again.
"""

from __future__ import annotations

import asyncio
import enum
import time
from typing import TYPE_CHECKING, Any

from ..protocol import ApiKey, KafkaError, errors as kerrors
from ..protocol.messages import message_class
from .connection import Connection, ConnectionClosed, RequestTimeout
from .groups.membership import fit

if TYPE_CHECKING:
    from .producer import AsyncProducer

TP = tuple[str, int]

# the versions a producer of transaction version 1 uses: higher ones mean version 2 to a Kafka 4 broker
TV1_PRODUCE_MAX = 11
TV1_END_TXN_MAX = 4
TV1_TXN_OFFSET_COMMIT_MAX = 4
ADD_PARTITIONS_CLIENT_MAX = 3  # v4+ is for brokers (verification), not producers
TXN_OFFSET_COMMIT_MAX = 5  # v6 names topics by id; v5 is what TV2 needs

FATAL = frozenset(
    {
        kerrors.PRODUCER_FENCED,
        kerrors.INVALID_PRODUCER_EPOCH,
        kerrors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        kerrors.INVALID_TXN_STATE,
        kerrors.TRANSACTION_COORDINATOR_FENCED,
        kerrors.INVALID_PRODUCER_ID_MAPPING,
        kerrors.UNSUPPORTED_VERSION,
        kerrors.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    }
)
# answers of the transaction or group coordinator that mean: find it again, then retry
COORDINATOR_MOVED = frozenset({kerrors.COORDINATOR_NOT_AVAILABLE, kerrors.NOT_COORDINATOR})
# answers that mean: the same request again after a short while
RETRY = frozenset(
    {
        kerrors.CONCURRENT_TRANSACTIONS,
        kerrors.COORDINATOR_LOAD_IN_PROGRESS,
        kerrors.UNKNOWN_TOPIC_OR_PARTITION,
        kerrors.REQUEST_TIMED_OUT,
        kerrors.NETWORK_EXCEPTION,
    }
)


class State(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"


class TransactionStateError(RuntimeError):
    """A transactional call made in a state that does not allow it (Java's IllegalStateException)."""


def is_fatal(code: int) -> bool:
    return code in FATAL


class TransactionManager:
    """The transaction state of one producer; every method runs on the producer's event loop."""

    def __init__(
        self,
        producer: AsyncProducer,
        transactional_id: str,
        timeout_ms: int,
        max_block: float,
        version: int | None = None,
    ):
        self.producer = producer
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.max_block = max_block
        self.state = State.UNINITIALIZED
        self.error: KafkaError | None = None
        self.version = 1  # transaction.version in use: the broker's, at most ``forced``
        self.forced = version  # the producer's ``transaction_version`` option
        self.partitions: set[TP] = set()  # in the open transaction (added, or sent with TV2)
        self.pending: set[TP] = set()  # waiting for AddPartitionsToTxn
        self._adding: asyncio.Task | None = None
        self._coordinator: Connection | None = None
        self._groups: dict[str, Connection] = {}
        self._offsets_sent = False  # the transaction has offsets (so EndTxn is needed)
        self._bump_epoch = False  # TV1: the producer's sequences broke; new epoch after the abort

    # -- state ---------------------------------------------------------------------------------------------

    @property
    def tv2(self) -> bool:
        return self.version >= 2

    def _check(self, *allowed: State, what: str) -> None:
        if self.state is State.FATAL_ERROR or (
            self.state is State.ABORTABLE_ERROR and State.ABORTABLE_ERROR not in allowed
        ):
            assert self.error is not None
            raise self.error
        if self.state not in allowed:
            raise TransactionStateError(f"cannot {what} while the producer is {self.state.value}")

    def fail(self, exc: BaseException) -> None:
        """Something failed the open transaction (or the producer, if fatal)."""
        if self.state is State.FATAL_ERROR:
            return
        code = getattr(exc, "code", None)
        err = exc if isinstance(exc, KafkaError) else KafkaError(kerrors.UNKNOWN_SERVER_ERROR, str(exc))
        if code is not None and is_fatal(code):
            if code == kerrors.INVALID_PRODUCER_EPOCH:
                # as Kafka's client: an old epoch means another producer with our id took over
                err = KafkaError(kerrors.PRODUCER_FENCED, f"{self.transactional_id!r}: {exc}")
            self.state, self.error = State.FATAL_ERROR, err
        elif self.state in (State.IN_TRANSACTION, State.COMMITTING, State.ABORTABLE_ERROR):
            if self.state is not State.ABORTABLE_ERROR:
                self.error = err
            self.state = State.ABORTABLE_ERROR
        if code in (kerrors.UNKNOWN_PRODUCER_ID, kerrors.OUT_OF_ORDER_SEQUENCE_NUMBER):
            self._bump_epoch = True

    def _raise_fatal(self) -> None:
        """Raise the producer's fatal error (INVALID_PRODUCER_EPOCH reads as PRODUCER_FENCED), if it has one."""
        if self.state is State.FATAL_ERROR and self.error is not None:
            raise self.error

    def check_send(self) -> None:
        """Before a record is queued: only inside a transaction."""
        if self.state is State.IN_TRANSACTION:
            return
        self._check(State.IN_TRANSACTION, what="send")

    def ready_to_send(self, tp: TP) -> bool:
        """May a batch of ``tp`` go out now? With TV1 not before AddPartitionsToTxn has added it."""
        if self.tv2 or tp in self.partitions:
            self.partitions.add(tp)
            return True
        if self.state is not State.IN_TRANSACTION and self.state is not State.COMMITTING:
            # the transaction failed: its records for partitions it never added can only fail (sent, the
            # broker would refuse them as outside the transaction, a fatal error)
            err = self.error or KafkaError(kerrors.TRANSACTION_ABORTABLE, "the transaction failed")
            self.producer._fail_unsent(lambda t: t == tp, err)
            return False
        if tp not in self.pending:
            self.pending.add(tp)
            if self._adding is None or self._adding.done():
                self._adding = self.producer._spawn(self._add_partitions())
        return False

    def _wake(self) -> None:
        """Let the producer's sender look at its queues again."""
        if self.producer._wakeup is not None:
            self.producer._wakeup.set()

    def produce_version(self, conn: Connection) -> int:
        v = conn.version_for(ApiKey.PRODUCE)
        return v if self.tv2 else min(v, TV1_PRODUCE_MAX)

    # -- coordinators --------------------------------------------------------------------------------------

    async def _find(self, key: str, key_type: int) -> Connection:
        cls = message_class("FindCoordinatorRequest")
        any_conn = await self.producer.cluster.any_connection()
        version = any_conn.version_for(ApiKey.FIND_COORDINATOR)
        resp: Any = await any_conn.request(
            fit(cls, version, key=key, key_type=key_type, coordinator_keys=[key]), version=version
        )
        if version >= 4:
            c = resp.coordinators[0]
            code, node, host, port = c.error_code, c.node_id, c.host, c.port
        else:
            code, node, host, port = resp.error_code, resp.node_id, resp.host, resp.port
        if code:
            raise KafkaError(code, f"FindCoordinator for {'transaction' if key_type else 'group'} {key!r}")
        # a connection of its own: the coordinator's answers must not queue behind Produce requests
        return await Connection.open(host, port, **self.producer.cluster._conn_kwargs(node))

    async def _txn_coordinator(self) -> Connection:
        conn = self._coordinator
        if conn is None or conn.closed:
            conn = self._coordinator = await self._find(self.transactional_id, 1)
        return conn

    async def _group_coordinator(self, group_id: str) -> Connection:
        conn = self._groups.get(group_id)
        if conn is None or conn.closed:
            conn = self._groups[group_id] = await self._find(group_id, 0)
        return conn

    async def _forget(self, conn: Connection | None) -> None:
        if conn is None:
            return
        if conn is self._coordinator:
            self._coordinator = None
        for g, c in list(self._groups.items()):
            if c is conn:
                del self._groups[g]
        await conn.close()

    async def _call(self, what: str, coordinator, build, check) -> Any:
        """Send ``build(conn)`` -> (request, version) to ``coordinator()`` until ``check(answer)`` returns
        without raising a retriable error; bounded by ``max_block``."""
        deadline = time.monotonic() + self.max_block
        attempt = 0
        while True:
            attempt += 1
            conn = None
            try:
                conn = await coordinator()
                req, version = build(conn)
                resp = await conn.request(req, version=version)
                return check(resp)
            except (KafkaError, OSError, TimeoutError) as exc:
                code = getattr(exc, "code", None)
                moved = code in COORDINATOR_MOVED or isinstance(exc, (ConnectionClosed, RequestTimeout, OSError))
                if moved:
                    await self._forget(conn)
                if not (moved or code in RETRY) or time.monotonic() >= deadline:
                    raise
                # CONCURRENT_TRANSACTIONS is usually the previous EndTxn still writing its markers: soon done
                delay = (
                    0.02
                    if code == kerrors.CONCURRENT_TRANSACTIONS and attempt < 5
                    else self.producer.backoff.delay(attempt)
                )
                await asyncio.sleep(delay)

    # -- init ----------------------------------------------------------------------------------------------

    async def _read_version(self, conn: Connection) -> int:
        """The broker's finalized ``transaction.version`` (0 when it has none: an older broker)."""
        cls = message_class("ApiVersionsRequest")
        version = conn.version_for(ApiKey.API_VERSIONS)
        resp: Any = await conn.request(
            fit(cls, version, client_software_name="kafkawire-python", client_software_version="0"), version=version
        )
        for f in resp.finalized_features or ():
            if f.name == "transaction.version":
                return int(f.max_version_level)
        return 0

    async def init(self) -> None:
        if self.state is State.READY and self.producer.producer_id >= 0:
            return
        self._check(State.UNINITIALIZED, State.READY, what="init_transactions")
        self.state = State.INITIALIZING
        try:
            await self._init_producer_id(bump=False)
        except BaseException as exc:
            self.state = State.UNINITIALIZED
            if isinstance(exc, KafkaError) and is_fatal(exc.code):
                self.fail(exc)
            raise
        self.state = State.READY

    async def _init_producer_id(self, *, bump: bool) -> None:
        cls = message_class("InitProducerIdRequest")
        p = self.producer
        pid, epoch = (p.producer_id, p.producer_epoch) if bump else (-1, -1)

        def build(conn):
            version = conn.version_for(ApiKey.INIT_PRODUCER_ID)
            return fit(
                cls,
                version,
                transactional_id=self.transactional_id,
                transaction_timeout_ms=self.timeout_ms,
                producer_id=pid,
                producer_epoch=epoch,
            ), version

        def check(resp):
            if resp.error_code:
                raise KafkaError(resp.error_code, f"InitProducerId for {self.transactional_id!r}")
            return resp

        found: dict[str, Any] = {}

        async def coordinator():
            conn = await self._txn_coordinator()
            if found.get("conn") is not conn:
                found["tv"], found["conn"] = await self._read_version(conn), conn
            return conn

        resp = await self._call("InitProducerId", coordinator, build, check)
        tv, conn = found["tv"], found["conn"]
        if self.forced is not None:
            tv = min(tv, self.forced)
        self.version = tv if tv >= 2 and conn.supports(ApiKey.PRODUCE, 12) and conn.supports(ApiKey.END_TXN, 5) else 1
        p.producer_id, p.producer_epoch = resp.producer_id, resp.producer_epoch
        p._sequences.clear()
        self._bump_epoch = False

    # -- the transaction -----------------------------------------------------------------------------------

    def begin(self) -> None:
        self._check(State.READY, what="begin_transaction")
        self.partitions.clear()
        self.pending.clear()
        self._offsets_sent = False
        self.error = None
        self.state = State.IN_TRANSACTION

    async def _add_partitions(self) -> None:
        cls = message_class("AddPartitionsToTxnRequest")
        p = self.producer
        while self.pending and self.state in (State.IN_TRANSACTION, State.COMMITTING):
            tps = sorted(self.pending)
            topics: dict[str, list[int]] = {}
            for t, part in tps:
                topics.setdefault(t, []).append(part)

            def build(conn, topics=topics):
                version = min(conn.version_for(ApiKey.ADD_PARTITIONS_TO_TXN), ADD_PARTITIONS_CLIENT_MAX)
                return cls(
                    v3_and_below_transactional_id=self.transactional_id,
                    v3_and_below_producer_id=p.producer_id,
                    v3_and_below_producer_epoch=p.producer_epoch,
                    v3_and_below_topics=[
                        cls.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()
                    ],
                ), version

            def check(resp):
                codes = {
                    (t.name, r.partition_index): r.partition_error_code
                    for t in resp.results_by_topic_v3_and_below
                    for r in t.results_by_partition
                }
                bad = {c for c in codes.values() if c and c != kerrors.OPERATION_NOT_ATTEMPTED}
                retry = bad & (RETRY | COORDINATOR_MOVED)
                if retry and retry == bad:
                    raise KafkaError(min(retry), "AddPartitionsToTxn")
                return codes

            try:
                codes = await self._call("AddPartitionsToTxn", self._txn_coordinator, build, check)
            except Exception as exc:
                self.fail(exc)
                break
            failed = [(tp, c) for tp, c in codes.items() if c and c != kerrors.OPERATION_NOT_ATTEMPTED]
            if failed:
                self.fail(KafkaError(failed[0][1], f"AddPartitionsToTxn {failed[0][0][0]}-{failed[0][0][1]}"))
                break
            for tp in tps:
                self.pending.discard(tp)
                self.partitions.add(tp)
            self._wake()
        if self.state not in (State.IN_TRANSACTION, State.COMMITTING):
            # the batches waiting for their partitions can never be written in this transaction
            err = self.error or KafkaError(kerrors.UNKNOWN_SERVER_ERROR, "transaction failed")
            p._fail_unsent(lambda tp: tp in self.pending, err)
            self.pending.clear()
        self._wake()

    async def send_offsets(self, offsets: dict, group_metadata) -> None:
        self._check(State.IN_TRANSACTION, what="send_offsets_to_transaction")
        if isinstance(group_metadata, str):
            group_metadata = {"group_id": group_metadata}
        group_id = group_metadata["group_id"]
        generation = group_metadata.get("generation", -1)
        member_id = group_metadata.get("member_id", "") or ""
        instance_id = group_metadata.get("instance_id")
        p = self.producer
        try:
            if not self.tv2:
                add_cls = message_class("AddOffsetsToTxnRequest")

                def build_add(conn):
                    return add_cls(
                        transactional_id=self.transactional_id,
                        producer_id=p.producer_id,
                        producer_epoch=p.producer_epoch,
                        group_id=group_id,
                    ), None

                def check_add(resp):
                    if resp.error_code:
                        raise KafkaError(resp.error_code, f"AddOffsetsToTxn for group {group_id!r}")

                await self._call("AddOffsetsToTxn", self._txn_coordinator, build_add, check_add)
            self._offsets_sent = True
            cls = message_class("TxnOffsetCommitRequest")
            by_topic: dict[str, list] = {}
            for (topic, partition), value in sorted(offsets.items()):
                offset, metadata = (value, "") if isinstance(value, int) else (value[0], value[1])
                by_topic.setdefault(topic, []).append(
                    cls.TxnOffsetCommitRequestPartition(
                        partition_index=partition,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata=metadata,
                    )
                )

            def build(conn):
                top = TXN_OFFSET_COMMIT_MAX if self.tv2 else TV1_TXN_OFFSET_COMMIT_MAX
                version = min(conn.version_for(ApiKey.TXN_OFFSET_COMMIT), top)
                return fit(
                    cls,
                    version,
                    transactional_id=self.transactional_id,
                    group_id=group_id,
                    producer_id=p.producer_id,
                    producer_epoch=p.producer_epoch,
                    generation_id_or_member_epoch=generation,
                    member_id=member_id,
                    group_instance_id=instance_id,
                    topics=[cls.TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                ), version

            def check(resp):
                codes = [q.error_code for t in resp.topics for q in t.partitions if q.error_code]
                if codes:
                    raise KafkaError(codes[0], f"TxnOffsetCommit for group {group_id!r}")

            await self._call("TxnOffsetCommit", lambda: self._group_coordinator(group_id), build, check)
        except Exception as exc:
            self.fail(exc)
            self._raise_fatal()
            raise

    async def end(self, commit: bool) -> None:
        what = "commit_transaction" if commit else "abort_transaction"
        p = self.producer
        if commit:
            self._check(State.IN_TRANSACTION, what=what)
            self.state = State.COMMITTING
            await p.flush()
            if self.state is State.ABORTABLE_ERROR or self.state is State.FATAL_ERROR:
                assert self.error is not None
                raise self.error
        else:
            self._check(State.IN_TRANSACTION, State.ABORTABLE_ERROR, what=what)
            self.state = State.ABORTING
            # records not sent yet are dropped (as Kafka's client does); those in flight finish first
            p._fail_unsent(lambda tp: True, KafkaError(kerrors.TRANSACTION_ABORTABLE, "the transaction was aborted"))
            self.pending.clear()
            await p.flush()
            if self.state is State.FATAL_ERROR:
                assert self.error is not None
                raise self.error
        if not (self.partitions or self._offsets_sent):
            self._finish()  # nothing was added: the coordinator has no transaction to end
            return
        cls = message_class("EndTxnRequest")

        def build(conn):
            version = conn.version_for(ApiKey.END_TXN)
            if not self.tv2:
                version = min(version, TV1_END_TXN_MAX)
            return cls(
                transactional_id=self.transactional_id,
                producer_id=p.producer_id,
                producer_epoch=p.producer_epoch,
                committed=commit,
            ), version

        def check(resp):
            if resp.error_code:
                raise KafkaError(resp.error_code, "EndTxn " + ("commit" if commit else "abort"))
            return resp

        try:
            resp = await self._call("EndTxn", self._txn_coordinator, build, check)
        except Exception as exc:
            self.fail(exc)
            self._raise_fatal()
            raise
        if self.tv2 and resp.producer_epoch is not None and resp.producer_epoch >= 0:
            # KIP-890: every transaction ends with a new epoch (and sequences start again)
            p.producer_id, p.producer_epoch = resp.producer_id, resp.producer_epoch
            p._sequences.clear()
        elif self._bump_epoch and not commit:
            await self._init_producer_id(bump=True)
        self._finish()

    def _finish(self) -> None:
        self.partitions.clear()
        self.pending.clear()
        self._offsets_sent = False
        self.error = None
        self.state = State.READY

    async def close(self) -> None:
        for conn in [self._coordinator, *self._groups.values()]:
            if conn is not None:
                await conn.close()
        self._coordinator = None
        self._groups.clear()


__all__ = ["State", "TransactionManager", "TransactionStateError"]
