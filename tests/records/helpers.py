"""Shared helpers for the record batch tests: build specs for the Java tool and a common description format."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from kafkawire.protocol.records import ControlRecordType, RecordBatch, iter_batches

# ----------------------------------------------------------------- cases


@dataclass
class Case:
    """One batch (or message set) to build with both Java and kafkawire."""

    name: str
    magic: int
    codec: str
    timestamp_type: str = "CREATE_TIME"
    base_offset: int = 0
    log_append_time: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    transactional: bool = False
    control: bool = False
    leader_epoch: int = -1
    # (offset, timestamp, key, value, headers)
    records: list = field(default_factory=list)
    # (ControlRecordType name, coordinator epoch), for control batches
    marker: tuple | None = None
    marker_offset: int = 0
    marker_timestamp: int = 0


def _hex(b: bytes | None) -> str:
    return "-" if b is None else "x" + b.hex()


def spec_lines(cases: list[Case]) -> str:
    """The build spec understood by ``KafkaRecordsTool build``."""
    lines = []
    for c in cases:
        lines.append(
            " ".join(
                map(
                    str,
                    [
                        "batch",
                        c.name,
                        c.magic,
                        c.codec,
                        c.timestamp_type,
                        c.base_offset,
                        c.log_append_time,
                        c.producer_id,
                        c.producer_epoch,
                        c.base_sequence,
                        str(c.transactional).lower(),
                        str(c.control).lower(),
                        c.leader_epoch,
                    ],
                )
            )
        )
        if c.marker is not None:
            lines.append(f"marker {c.marker_offset} {c.marker_timestamp} {c.marker[0]} {c.marker[1]}")
        for offset, ts, key, value, headers in c.records:
            toks = ["record", str(offset), str(ts), _hex(key), _hex(value)]
            for hk, hv in headers:
                toks += [_hex(hk.encode()), _hex(hv)]
            lines.append(" ".join(toks))
        lines.append("end")
    return "\n".join(lines) + "\n"


def random_bytes(rnd: random.Random, max_len: int) -> bytes:
    n = rnd.choice([0, 1, rnd.randrange(max_len + 1)])
    # Mix compressible and random content so every codec does real work.
    if rnd.random() < 0.5:
        return rnd.randbytes(n)
    return (b"kafkawire-" * (n // 10 + 1))[:n]


def random_records(
    rnd: random.Random,
    n: int,
    *,
    base_offset: int,
    headers: bool,
    gaps: bool,
    null_values: bool = True,
    base_ts: int = 1_700_000_000_000,
) -> list:
    records = []
    offset = base_offset
    for _i in range(n):
        key = None if rnd.random() < 0.3 else random_bytes(rnd, 40)
        value = None if null_values and rnd.random() < 0.2 else random_bytes(rnd, 300)
        hdrs = []
        if headers:
            for _ in range(rnd.choice([0, 0, 1, 3])):
                hk = rnd.choice(["h", "trace-id", "ünïcode-ключ", ""])
                hv = None if rnd.random() < 0.3 else random_bytes(rnd, 20)
                hdrs.append((hk, hv))
        ts = base_ts + rnd.randrange(0, 5000)
        records.append((offset, ts, key, value, hdrs))
        offset += 1 + (rnd.randrange(3) if gaps and rnd.random() < 0.3 else 0)
    return records


CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def describe(buf) -> list[dict]:
    """kafkawire's reading of ``buf`` in the shape ``KafkaRecordsTool read`` prints."""
    out = []
    for batch in iter_batches(buf):
        d = {
            "magic": batch.magic,
            "baseOffset": batch.base_offset,
            "lastOffset": batch.last_offset,
            "nextOffset": batch.next_offset,
            "sizeInBytes": batch.size,
            "checksum": batch.crc,
            "isValid": batch.crc_ok,
            "compression": batch.compression.name.lower(),
            "timestampType": batch.timestamp_type.name,
            "maxTimestamp": batch.max_timestamp,
            "partitionLeaderEpoch": batch.partition_leader_epoch,
            "producerId": batch.producer_id,
            "producerEpoch": batch.producer_epoch,
            "baseSequence": batch.base_sequence,
            "lastSequence": batch.last_sequence if isinstance(batch, RecordBatch) else -1,
            "isTransactional": batch.is_transactional,
            "isControlBatch": batch.is_control,
            "count": batch.record_count if isinstance(batch, RecordBatch) else None,
            "deleteHorizonMs": batch.delete_horizon_ms if isinstance(batch, RecordBatch) else None,
        }
        records = []
        controls = list(batch.control_records()) if batch.is_control else None
        for i, r in enumerate(batch.records()):
            rd = {
                "offset": r.offset,
                "timestamp": r.timestamp,
                "key": None if r.key is None else r.key.hex(),
                "value": None if r.value is None else r.value.hex(),
                "headers": [[k, None if v is None else v.hex()] for k, v in r.headers],
            }
            if controls is not None:
                c = controls[i]
                rd["controlType"] = c.type.name if isinstance(c.type, ControlRecordType) else "UNKNOWN"
                if c.coordinator_epoch is not None:
                    rd["coordinatorEpoch"] = c.coordinator_epoch
            records.append(rd)
        d["records"] = records
        out.append(d)
    return out


def expected_records(case: Case) -> list[dict]:
    """What a reader must return for ``case``, derived from the spec alone."""
    out = []
    for offset, ts, key, value, headers in case.records:
        if case.magic == 0:
            ts = -1
        elif case.timestamp_type == "LOG_APPEND_TIME":
            ts = case.log_append_time
        out.append(
            {
                "offset": offset,
                "timestamp": ts,
                "key": None if key is None else key.hex(),
                "value": None if value is None else value.hex(),
                "headers": [[k, None if v is None else v.hex()] for k, v in headers],
            }
        )
    return out
