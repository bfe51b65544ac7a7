"""Wireshark's Kafka dissector as a reference: run tshark, read its PDML, line it up with kafkawire's events.

tshark reports every Kafka PDU in the frame whose segment completed it, as
kafkawire does, so the two sides are matched on (frame number, request or
response, correlation id). :func:`ours` reads from a decoded kafkawire event
the same facts that the dissector's fields report, walking the decoded
message in schema order (the order of the bytes, the order tshark shows them).
"""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass

from kafkawire.tools.pcap import Event, walk


def tshark_binary() -> str | None:
    return shutil.which("tshark")


def tshark_version() -> str:
    out = subprocess.run([tshark_binary(), "--version"], capture_output=True, text=True, timeout=30).stdout
    return out.splitlines()[0] if out else "?"


@dataclass
class Pdu:
    frame: int
    is_request: bool
    fields: dict[str, list[str]]
    malformed: bool

    def first(self, name: str) -> str | None:
        values = self.fields.get(name)
        return values[0] if values else None

    def ints(self, name: str) -> list[int]:
        return [int(v) for v in self.fields.get(name, [])]

    @property
    def correlation_id(self) -> int:
        return int(self.first("kafka.correlation_id"))

    @property
    def unsupported(self) -> str | None:
        """tshark's own words when it does not decode this PDU's version, else None."""
        return self.fields["_unsupported"][0] if "_unsupported" in self.fields else None


_RAW_FIELDS = ("kafka.message_key", "kafka.message_value")


def dissect(path, port: int) -> list[Pdu]:
    """Every Kafka PDU tshark finds (two passes, so that responses find requests later in the file)."""
    proc = subprocess.run(
        [tshark_binary(), "-2", "-r", str(path), "-d", f"tcp.port=={port},kafka", "-Y", "kafka", "-T", "pdml"],
        capture_output=True,
        timeout=120,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"tshark failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}")
    root = ET.fromstring(proc.stdout)
    pdus = []
    for packet in root.iter("packet"):
        protos = packet.findall("proto")
        frame = int(next(f.get("show") for f in packet.iter("field") if f.get("name") == "frame.number"))
        for i, proto in enumerate(protos):
            if proto.get("name") != "kafka":
                continue
            fields: dict[str, list[str]] = defaultdict(list)
            for f in proto.iter("field"):
                name = f.get("name")
                # record keys and values: the raw bytes as hex, not tshark's colon-separated rendering
                fields[name].append(f.get("value", "") if name in _RAW_FIELDS else f.get("show"))
            # "Unsupported X version" hangs under the PDU's own version field; an ApiVersions response
            # also carries it under every listed API newer than the dissector, which does not count
            for version_field in proto.iter("field"):
                if version_field.get("name") in ("kafka.api_version", "kafka.response.version"):
                    if any(f.get("name") == "kafka.unsupported_api_version" for f in version_field.iter("field")):
                        fields["_unsupported"] = [
                            next(
                                (
                                    f.get("show")
                                    for f in version_field.iter("field")
                                    if f.get("name") == "_ws.expert.message"
                                ),
                                "unsupported",
                            )
                        ]
            # the dissector's exception shows as a _ws.malformed proto right after the PDU it hit
            malformed = i + 1 < len(protos) and protos[i + 1].get("name") == "_ws.malformed"
            pdus.append(Pdu(frame, "kafka.request_key" in fields, dict(fields), malformed))
    return pdus


# dissector field -> schema field names it shows (every occurrence, in byte order). Left out because the
# dissector files other fields under the same name: kafka.node_id (also the controller id),
# kafka.producer_id/producer_epoch/leader_epoch (also record batch headers), kafka.timeout (CreateTopics'
# timeoutMs), kafka.protocol_name and kafka.metadata (also the consumer protocol inside JoinGroup metadata),
# kafka.offset_time (also LogAppendTimeMs).
SCALAR_FIELDS = {
    "kafka.coordinator_key": ("Key",),  # FindCoordinator; v0's key is shown as kafka.consumer_group
    "kafka.throttle_time": ("ThrottleTimeMs",),
    "kafka.client_software_name": ("ClientSoftwareName",),
    "kafka.client_software_version": ("ClientSoftwareVersion",),
    "kafka.error_message": ("ErrorMessage",),
    "kafka.num_partitions": ("NumPartitions",),
    "kafka.replication_factor": ("ReplicationFactor",),
    "kafka.coordinator_type": ("KeyType",),
    "kafka.host": ("Host",),
    "kafka.port": ("Port",),
    "kafka.rack": ("Rack",),
    "kafka.cluster_id": ("ClusterId",),
    "kafka.is_internal": ("IsInternal",),
    "kafka.allow_auto_topic_creation": ("AllowAutoTopicCreation",),
    "kafka.leader_id": ("LeaderId",),
    "kafka.isr_id": ("IsrNodes",),
    "kafka.replica_id": ("ReplicaNodes", "ReplicaId"),
    "kafka.consumer_group": ("GroupId",),
    "kafka.consumer_group_instance": ("GroupInstanceId",),
    "kafka.member_id": ("MemberId",),
    "kafka.group_leader_id": ("Leader",),
    "kafka.generation_id": ("GenerationId", "GenerationIdOrMemberEpoch"),
    "kafka.protocol_type": ("ProtocolType",),
    "kafka.session_timeout": ("SessionTimeoutMs",),
    "kafka.rebalance_timeout": ("RebalanceTimeoutMs",),
    "kafka.retention_time": ("RetentionTimeMs",),
    "kafka.required_acks": ("Acks",),
    "kafka.transactional_id": ("TransactionalId",),
    "kafka.max_wait_time": ("MaxWaitMs",),
    "kafka.min_bytes": ("MinBytes",),
    "kafka.max_bytes": ("MaxBytes", "PartitionMaxBytes"),
    "kafka.isolation_level": ("IsolationLevel",),
    "kafka.log_start_offset": ("LogStartOffset",),
    "kafka.last_stable_offset": ("LastStableOffset",),
}
_SCALAR_BY_NAME = {name: tf for tf, names in SCALAR_FIELDS.items() for name in names}


def _shown(value) -> str:
    """A decoded value as the dissector's ``show`` text."""
    if value is None:
        return "[ Null ]"
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


_PARTITION_FIELDS = ("PartitionIndex", "Partition", "PartitionId", "Index", "PartitionIndexes")
# int64 fields that the dissector shows as kafka.offset (log start and last stable offsets have fields of their own)
_OFFSET_FIELDS = ("Offset", "CommittedOffset", "BaseOffset", "FetchOffset", "HighWatermark")


def ours(event: Event) -> dict[str, list]:
    """What kafkawire decoded, as the lists the dissector's fields hold, in the same (byte) order.

    ``offset`` interleaves the offset fields with the record data where it
    sits: a v2 batch gives its base offset, then every record's offset; a
    magic 0/1 entry gives its own offset (the dissector does not list the
    messages inside a compressed wrapper).
    """
    from kafkawire.protocol.records import RecordBatch, iter_batches

    out: dict[str, list] = {
        "topic_name": [],
        "partition_id": [],
        "error": [],
        "offset": [],
        "message_key": [],
        "message_value": [],
        "header_key": [],
        "legacy_messages": 0,
    }
    scalars: dict[str, list[str]] = {tf: [] for tf in SCALAR_FIELDS}
    out["scalars"] = scalars
    for _path, f, value in walk(event.message.body, event.api_version):
        if f.struct is None and f.name in _SCALAR_BY_NAME:
            name = _SCALAR_BY_NAME[f.name]
            if name == "kafka.coordinator_key" and event.api_key == 10 and event.api_version == 0:
                name = "kafka.consumer_group"
            scalars[name] += [_shown(v) for v in (value if f.is_array else [value])]
        if f.entity_type == "topicName" and f.type == "string":
            out["topic_name"] += value if f.is_array else [value]
        elif f.type == "int32" and f.name in _PARTITION_FIELDS:
            out["partition_id"] += value if f.is_array else [value]
        elif f.type == "int16" and f.name == "ErrorCode":
            out["error"].append(value)
        elif f.type == "int64" and f.name in _OFFSET_FIELDS and not f.is_array:
            out["offset"].append(value)
        elif f.type == "records" and value:
            for batch in iter_batches(value):
                if isinstance(batch, RecordBatch):
                    records = list(batch.records())
                    out["offset"] += [batch.base_offset] + [r.offset for r in records]
                    out["message_key"] += [(r.key or b"").hex() for r in records]
                    out["message_value"] += [(r.value or b"").hex() for r in records]
                    out["header_key"] += [k for r in records for k, _v in r.headers]
                else:
                    out["offset"].append(batch.offset)
                    out["legacy_messages"] += 1
    return out
