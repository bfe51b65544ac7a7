"""Transaction coordinator settings, read from the broker's properties (Kafka's key names and defaults)."""

from __future__ import annotations

import msgspec

# key -> (attribute, Kafka default)
KEYS = {
    "transaction.max.timeout.ms": ("max_timeout_ms", 900000),
    "transactional.id.expiration.ms": ("id_expiration_ms", 604800000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ("abort_interval_ms", 10000),
    "transaction.remove.expired.transaction.cleanup.interval.ms": ("remove_expired_interval_ms", 3600000),
    "transaction.state.log.num.partitions": ("log_partitions", 1),
    "kafkawire.transactions.fsync": ("fsync", True),
    "kafkawire.transactions.compact.records": ("compact_after_records", 50000),
}


class TxnConfig(msgspec.Struct):
    max_timeout_ms: int = 900000
    id_expiration_ms: int = 604800000
    abort_interval_ms: int = 10000
    remove_expired_interval_ms: int = 3600000
    # a transaction's state change is on disk before it is answered, as Kafka writes __transaction_state
    # with acks=all (a single node has no replica to keep it)
    fsync: bool = True
    compact_after_records: int = 50000
    # the partition count of a new __transaction_state (kafkawire's default 1 where Kafka's is 50: see
    # log.TOPIC_CONFIGS); a topic that exists keeps its own
    log_partitions: int = 1

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> TxnConfig:
        cfg = cls()
        for key, (attr, default) in KEYS.items():
            if key in props:
                raw = props[key].strip()
                setattr(cfg, attr, raw.lower() == "true" if isinstance(default, bool) else int(raw))
        return cfg
