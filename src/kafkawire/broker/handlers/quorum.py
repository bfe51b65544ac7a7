"""DescribeQuorum (KIP-595/KIP-853): the single node as a one-voter KRaft quorum and its leader.

kafkawire keeps no KRaft metadata log; it answers as a freshly formatted Kafka 4.4 combined node
with a static voter set (``controller.quorum.voters``, kraft.version 0, see ``broker/features.py``)
answers, with these values:

- leader: this node, leader epoch 1; the only voter, with the zero directory id (a static voter has
  none) and no observers;
- high watermark = the voter's log end offset = ``METADATA_LOG_END``: the metadata log is taken to
  hold only its bootstrap records, and the finalized features were written before its end
  (``features.FINALIZED_EPOCH`` < ``METADATA_LOG_END``). It never moves: topic changes are kept by
  the storage engine, not in a metadata log;
- last fetch and last caught-up timestamps (v1+): now, as Kafka reports for the leader itself;
- nodes (v2+): this node's one listener, under the name ``CONTROLLER``: Kafka lists the voter's
  controller listener there (``controller.listener.names``). kafkawire has no separate controller
  port (its quorum is in-process and serves every API on the one listener), so it names that
  listener as a controller listener would be named, at the broker's own host and port.

The leader epoch and the high watermark cannot be Kafka's: a fresh Kafka node holds one or more
elections at start-up (its epoch is 1 on some starts, higher on others) and appends to its metadata
log for every change and periodically (its high watermark grows with time); the conformance suite
records both in its explained.toml.

As Kafka does, anything but a request for the one partition ``__cluster_metadata``-0 is answered
with UNKNOWN_TOPIC_OR_PARTITION for every requested partition.

Versions: v1 added the voters' timestamps, v2 the directory ids, the error messages and the nodes.
"""

from __future__ import annotations

from kafkawire.protocol import errors
from kafkawire.protocol.messages import DescribeQuorumResponse as R

from .. import features
from ..dispatch import handles
from ._common import ZERO_UUID, now_ms

METADATA_TOPIC = "__cluster_metadata"
LEADER_EPOCH = 1
METADATA_LOG_END = features.FINALIZED_EPOCH + 1
CONTROLLER_LISTENER = "CONTROLLER"
NOT_HOSTED = "This server does not host this topic-partition."


@handles("DescribeQuorum", 0, 2)
def describe_quorum(broker, ctx, body):
    requested = [(t.topic_name, p.partition_index) for t in body.topics for p in t.partitions]
    if requested != [(METADATA_TOPIC, 0)]:
        return R(
            error_code=0,
            error_message="",
            nodes=[],
            topics=[
                R.TopicData(
                    topic_name=t.topic_name,
                    partitions=[
                        R.PartitionData(
                            partition_index=p.partition_index,
                            error_code=errors.UNKNOWN_TOPIC_OR_PARTITION,
                            error_message=NOT_HOSTED,
                            leader_id=0,
                            leader_epoch=0,
                            high_watermark=0,
                            current_voters=[],
                            observers=[],
                        )
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ],
        )
    node = broker.node_id
    now = now_ms()
    voter = R.ReplicaState(
        replica_id=node,
        replica_directory_id=ZERO_UUID,
        log_end_offset=METADATA_LOG_END,
        last_fetch_timestamp=now,
        last_caught_up_timestamp=now,
    )
    host, port = broker.advertised
    return R(
        error_code=0,
        error_message="",
        topics=[
            R.TopicData(
                topic_name=METADATA_TOPIC,
                partitions=[
                    R.PartitionData(
                        partition_index=0,
                        error_code=0,
                        error_message="",
                        leader_id=node,
                        leader_epoch=LEADER_EPOCH,
                        high_watermark=METADATA_LOG_END,
                        current_voters=[voter],
                        observers=[],
                    )
                ],
            )
        ],
        nodes=[R.Node(node_id=node, listeners=[R.Listener(name=CONTROLLER_LISTENER, host=host, port=port)])]
        if ctx.api_version >= 2
        else [],
    )
