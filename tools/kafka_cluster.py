#!/usr/bin/env python3
"""A three-node Apache Kafka cluster on loopback, for the day a kafkawire user outgrows one node.

kafkawire promises that the client, the CLI and the Spark data source work unchanged against a
real Kafka cluster. :class:`ReferenceKafkaCluster` runs the pinned Kafka release
(``tools/kafka_pins.py``, jars from :func:`kafka_reference.resolve`) as ``size`` KRaft nodes that
are each broker and controller (one quorum of three voters: the smallest layout where a node can
stop and both the controller quorum and ``min.insync.replicas=2`` survive). Heaps are small
(``-Xmx256m``) because the test machine has two cores shared with other JVMs.

Each node is a :class:`kafka_reference.ReferenceKafka` with its own node id, log directory and
ports, so ``cluster.nodes[i].stop()/kill()/restart()`` act on one broker.

Command line::

    python tools/kafka_cluster.py serve [--size 3]    # prints the bootstrap; Ctrl-C or SIGTERM stops every node
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kafkawire.testing._process import serve_until_signalled, terminate_all  # noqa: E402

from kafka_reference import (  # noqa: E402  (tools/ is not a package)
    KafkaUnavailable,
    ReferenceKafka,
    free_port,
    metadata_broker_ids,
)


class ClusterNode(ReferenceKafka):
    """One voter-and-broker of a :class:`ReferenceKafkaCluster` (ports fixed by the cluster)."""

    def __init__(self, cluster: ReferenceKafkaCluster, node_id: int, data_dir: Path, **kw):
        super().__init__(data_dir, **kw)
        self.cluster = cluster
        self.node_id = node_id
        self.cluster_id = cluster.cluster_id
        self.port = free_port(self.host)
        self.controller_port = free_port(self.host)

    def properties(self) -> dict[str, object]:
        props = super().properties()
        props["controller.quorum.voters"] = self.cluster.voters
        return {**props, **self.cluster.shared_config, **self.extra_config}

    @property
    def name(self) -> str:
        return f"Kafka node {self.node_id}"

    def _ready(self) -> bool:
        # a node of a cluster is ready when its Metadata lists itself (registered, metadata log caught
        # up): the base probe's "any broker" would pass as soon as another node is known
        return self.node_id in metadata_broker_ids(self.host, self.port, 2.0)


class ReferenceKafkaCluster:
    """``size`` Kafka 4.4 nodes (KRaft, each broker and controller) on 127.0.0.1.

    ``config`` adds or overrides ``server.properties`` keys on every node. The defaults are those
    of a small production-like cluster: replication factor 3 for new topics and the internal ones,
    ``min.insync.replicas=2``, so that one node can be stopped without losing an acknowledged write.
    """

    def __init__(
        self,
        data_dir: Path | str | None = None,
        *,
        size: int = 3,
        config: dict[str, object] | None = None,
        heap: str = "256m",
        host: str = "127.0.0.1",
    ):
        self._owned = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="kafka-cluster-"))
        self.host = host
        self.cluster_id = uuid.UUID(int=uuid.uuid4().int).bytes.hex()[:22]
        replicas = min(3, size)
        self.shared_config: dict[str, object] = {
            "num.partitions": 3,
            "default.replication.factor": replicas,
            "min.insync.replicas": min(2, replicas),
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": 10,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min(2, replicas),
            "transaction.state.log.num.partitions": 5,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min(2, replicas),
            # a stopped node's partitions move to the others at once, and come back soon after it does
            "leader.imbalance.check.interval.seconds": 10,
            "controlled.shutdown.enable": True,
            # the JVMs share two cores: no background threads beyond what a test needs
            "num.network.threads": 2,
            "num.io.threads": 2,
            "num.replica.fetchers": 1,
            "background.threads": 2,
            "log.cleaner.threads": 1,
            # the cleaner's dedupe buffer is 128 MB by default: in a 256 MB heap a restart could die with
            # OutOfMemoryError while allocating it (seen in tests/cluster)
            "log.cleaner.dedupe.buffer.size": 16 << 20,
            **dict(config or {}),
        }
        self.nodes = [
            ClusterNode(self, node_id, self.data_dir / f"node-{node_id}", heap=heap, host=host)
            for node_id in range(1, size + 1)
        ]

    @property
    def voters(self) -> str:
        return ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in self.nodes)

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def node(self, node_id: int) -> ClusterNode:
        return next(n for n in self.nodes if n.node_id == node_id)

    def start(self, timeout: float = 180.0) -> ReferenceKafkaCluster:
        """Start every node (in parallel: a quorum needs a majority up before any broker is ready)."""
        pool = ThreadPoolExecutor(len(self.nodes))
        try:
            list(pool.map(lambda n: n._format(n._write_config()), self.nodes))
            for node in self.nodes:
                node._spawn(node.data_dir / "server.properties")
            list(pool.map(lambda n: n._wait_ready(timeout), self.nodes))
            self.wait_all_brokers(timeout)
        except BaseException:
            # killed before the pool is joined: a node's readiness wait ends as soon as its process is gone,
            # not after its timeout (an interrupted start returns at once)
            self.kill()
            raise
        finally:
            pool.shutdown()
        return self

    def wait_all_brokers(self, timeout: float = 120.0) -> None:
        """Until every running node's Metadata lists every running node."""
        deadline = time.monotonic() + timeout
        want = {n.node_id for n in self.nodes if n.proc is not None}
        while True:
            seen = []
            for n in self.nodes:
                if n.proc is None:
                    continue
                try:
                    seen.append(metadata_broker_ids(n.host, n.port, 2.0))
                except OSError:
                    seen.append(set())
            if all(want <= s for s in seen):
                return
            if time.monotonic() > deadline:
                raise KafkaUnavailable(f"cluster brokers {want} not all registered after {timeout:.0f}s: {seen}")
            time.sleep(0.25)

    def _terminate(self, sig: int, grace: float) -> None:
        procs = [n.proc for n in self.nodes]
        for node in self.nodes:
            node.proc = None
        terminate_all(procs, sig, grace)

    def kill(self) -> None:
        self._terminate(signal.SIGKILL, 5.0)

    def stop(self) -> None:
        """SIGTERM to every node at once (Kafka's controlled shutdown), SIGKILL after 30 s."""
        self._terminate(signal.SIGTERM, 30.0)

    def close(self) -> None:
        self.stop()
        if self._owned:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> ReferenceKafkaCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a cluster until SIGINT (Ctrl-C) or SIGTERM")
    serve.add_argument("--size", type=int, default=3)
    serve.add_argument("--data-dir", type=Path)
    args = parser.parse_args(argv)
    # SIGINT or SIGTERM (also when started in the background, where SIGINT comes in ignored) stops every node
    return serve_until_signalled(ReferenceKafkaCluster(args.data_dir, size=args.size), lambda c: c.bootstrap)


if __name__ == "__main__":
    sys.exit(main())
