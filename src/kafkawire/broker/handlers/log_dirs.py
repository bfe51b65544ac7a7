"""AlterReplicaLogDirs: move replicas between the broker's log directories (KIP-113).

kafkawire has one log directory (``log.dirs``/``--data-dir``), so every replica already is where a
request can ask for it: as Kafka 4.4 answers with a single log dir, asking for that directory
succeeds without moving anything, any other path (a relative one, or the same with a trailing slash)
gets LOG_DIR_NOT_FOUND, and a partition that does
not exist UNKNOWN_TOPIC_OR_PARTITION. A partition named twice is answered once, for the last
directory asked for; answers are grouped by topic. Kafka 4.x serves v1-2 (v0 was removed with
KIP-896; v1 is v0 with the throttle fixed, v2 is flexible).
"""

from __future__ import annotations

import os

from kafkawire.protocol import errors
from kafkawire.protocol.messages import AlterReplicaLogDirsResponse as R

from ..dispatch import handles


@handles("AlterReplicaLogDirs", 1, 2)
def alter_replica_log_dirs(broker, ctx, body):
    log_dir = os.path.abspath(broker.config.data_dir)
    topics = broker.storage.topics()
    codes: dict[tuple[str, int], int] = {}
    for d in body.dirs:
        here = d.path == log_dir  # compared as written, as Kafka does: "dir/" is not "dir"
        for t in d.topics:
            meta = topics.get(t.name)
            for p in t.partitions:
                if meta is None or not 0 <= p < meta.partitions:
                    code = errors.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    code = 0 if here else errors.LOG_DIR_NOT_FOUND
                codes[(t.name, p)] = code
    by_topic: dict[str, list] = {}
    for (name, p), code in codes.items():
        by_topic.setdefault(name, []).append(R.AlterReplicaLogDirPartitionResult(partition_index=p, error_code=code))
    return R(
        throttle_time_ms=0,
        results=[R.AlterReplicaLogDirTopicResult(topic_name=n, partitions=ps) for n, ps in by_topic.items()],
    )
