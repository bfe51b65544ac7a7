"""Reading Kafka's and kafkawire's data directories offline: what ``kafkawire logs`` prints.

Each ``dump_*`` function takes the bytes (or text) of one file and returns plain dicts, ready for
JSON; batches are walked by :mod:`kafkawire.protocol.records` (the same reader the broker and the
client use), record schemas come from the generated spec. Nothing here writes a file.

Decoders for record keys and values:

- ``raw``: bytes shown as text when they are printable UTF-8, else as hex;
- ``metadata``: the KRaft metadata log (``__cluster_metadata``): each value is a frame version, a
  record type and a version (unsigned varints) followed by that record (``TopicRecord``...);
- ``offsets``: Kafka's ``__consumer_offsets``: key and value start with an int16 (the key's record type,
  the value's version) followed by the group coordinator record (``OffsetCommitKey``/``Value``...);
  kafkawire's own ``__consumer_offsets`` holds JSON, shown as such;
- ``transactions``: ``__transaction_state``, laid out the same way (``TransactionLogKey``/``Value``);
- control batches are always decoded: transaction markers and the KRaft control records
  (``LeaderChangeMessage``, ``SnapshotHeaderRecord``, ``VotersRecord``...).

Damaged bytes never raise out of here: they become ``{"kind": "error", "position": ..., "reason": ...}``
entries, with the byte position in the file.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import struct
import uuid
from collections.abc import Iterator
from typing import Any

from kafkawire.protocol.records import CorruptRecordError, iter_batches
from kafkawire.protocol.records.crc import crc32c
from kafkawire.protocol.records.errors import CodecUnavailableError
from kafkawire.protocol.records.model import ControlRecordType

DECODERS = ("auto", "raw", "metadata", "offsets", "transactions")
DEFAULT_MAX_BYTES = 256

LOG_FILE = re.compile(r"(\d{20})\.log")
INDEX_FILE = re.compile(r"(\d{20})\.index")
TIME_INDEX_FILE = re.compile(r"(\d{20})\.timeindex")
TXN_INDEX_FILE = re.compile(r"(\d{20})\.txnindex")
SNAPSHOT_FILE = re.compile(r"(\d{20})\.snapshot")
KRAFT_SNAPSHOT_FILE = re.compile(r"(\d{20})-(\d{10})\.checkpoint")
QUARANTINE_FILE = re.compile(r"(\d{20})\.(\d+)\.(\d+)\.quarantine")
PARTITION_DIR = re.compile(r"(.+)-(\d+)")
METADATA_TOPIC = "__cluster_metadata"
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTIONS_TOPIC = "__transaction_state"
KAFKAWIRE_META_DIR = "__kafkawire_meta"

# Text checkpoint files of a Kafka log directory (version line, count line, entry lines).
DIR_CHECKPOINTS = (
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
)

_I16 = struct.Struct(">h")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first offset, last offset, last stable offset
_SNAPSHOT_HEAD = struct.Struct(">hI")

# Raft control record types whose value is a versioned message of the spec.
_CONTROL_SCHEMAS = {
    ControlRecordType.LEADER_CHANGE: "LeaderChangeMessage",
    ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeaderRecord",
    ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooterRecord",
    ControlRecordType.KRAFT_VERSION: "KRaftVersionRecord",
    ControlRecordType.KRAFT_VOTERS: "VotersRecord",
}


class RecordDecodeError(ValueError):
    """A key or value does not parse with the schema the decoder chose."""


# ----------------------------------------------------------------- values


def render_bytes(data: bytes | None, max_bytes: int = DEFAULT_MAX_BYTES) -> dict | None:
    """``{"text": ...}`` for printable UTF-8, else ``{"hex": ...}``; cut at ``max_bytes`` (0: never),
    with ``"truncated": <bytes left out>``. None stays None (a null key or value)."""
    if data is None:
        return None
    data = bytes(data)
    cut = bool(max_bytes) and len(data) > max_bytes
    out: dict[str, Any]
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and all(c.isprintable() or c in "\t\n\r" for c in text):
        # the whole value decides that it is text; a cut inside a character drops that character
        shown = data[:max_bytes].decode("utf-8", "ignore") if cut else text
        out = {"text": shown}
        if cut:
            out["truncated"] = len(data) - len(shown.encode("utf-8"))
    else:
        out = {"hex": (data[:max_bytes] if cut else data).hex()}
        if cut:
            out["truncated"] = len(data) - max_bytes
    return out


def bytes_label(rendered: dict | None) -> str:
    """One-line human form of :func:`render_bytes`' result."""
    if rendered is None:
        return "null"
    if "text" in rendered:
        body = json.dumps(rendered["text"], ensure_ascii=False)
    else:
        body = "0x" + rendered["hex"]
    if "truncated" in rendered:
        body += f"... (+{rendered['truncated']} bytes)"
    return body


def kafka_uuid(value: uuid.UUID | str) -> str:
    """A UUID as Kafka prints it (URL-safe base64 without padding)."""
    u = value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


# ------------------------------------------------------- record schemas


@functools.cache
def _record_types(kind: str, family: str = "group") -> dict[int, str]:
    from kafkawire.protocol.schema import message_spec, record_names

    out: dict[int, str] = {}
    for name in record_names():
        spec = message_spec(name)
        if spec.kind != kind or spec.record_type is None:
            continue
        if kind == "metadata" and name.startswith("Remote"):
            continue  # tiered storage's own topic numbers its records separately
        if kind.startswith("coordinator") and (family == "transaction") != name.startswith("TransactionLog"):
            continue  # the transaction coordinator's records live in __transaction_state
        if kind.startswith("coordinator") and name.startswith("Share"):
            continue  # the share coordinator's, in __share_group_state
        out.setdefault(spec.record_type, name)
    return out


def _decode_message(name: str, body, version: int) -> dict:
    from kafkawire.protocol.messages import message_class

    try:
        cls = message_class(name)
        return _jsonable(cls.decode(bytes(body), version).to_dict())
    except (ValueError, KeyError, IndexError, struct.error) as exc:
        raise RecordDecodeError(f"{name} v{version}: {exc}") from exc


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise RecordDecodeError("unsigned varint runs past the end")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise RecordDecodeError("unsigned varint longer than 5 bytes")


def decode_metadata_record(value: bytes | None) -> dict:
    """A KRaft metadata log value: ``{"type": "TopicRecord", "version": 0, "data": {...}}``."""
    if value is None:
        raise RecordDecodeError("metadata record without a value")
    data = bytes(value)
    frame, pos = _read_uvarint(data, 0)
    if frame != 1:
        raise RecordDecodeError(f"unknown metadata frame version {frame}")
    rtype, pos = _read_uvarint(data, pos)
    version, pos = _read_uvarint(data, pos)
    name = _record_types("metadata").get(rtype)
    if name is None:
        raise RecordDecodeError(f"unknown metadata record type {rtype}")
    return {"type": name, "version": version, "data": _decode_message(name, data[pos:], version)}


def decode_offsets_record(key: bytes | None, value: bytes | None, family: str = "group") -> dict:
    """A ``__consumer_offsets`` record: Kafka's binary group coordinator records, or kafkawire's JSON
    (``family="transaction"``: a ``__transaction_state`` record)."""
    if key is None:
        raise RecordDecodeError("coordinator record without a key")
    key = bytes(key)
    if key[:1] in (b"[", b"{"):  # kafkawire's own layout (broker/groups/persistence.py)
        try:
            return {
                "type": "kafkawire",
                "key": json.loads(key),
                "value": None if value is None else json.loads(bytes(value)),
            }
        except ValueError as exc:
            raise RecordDecodeError(f"kafkawire group record is not JSON: {exc}") from exc
    if len(key) < 2:
        raise RecordDecodeError(f"coordinator key of {len(key)} bytes has no record type")
    (rtype,) = _I16.unpack_from(key)
    key_name = _record_types("coordinator-key", family).get(rtype)
    value_name = _record_types("coordinator-value", family).get(rtype)
    if key_name is None or value_name is None:
        raise RecordDecodeError(f"unknown coordinator record type {rtype}")
    out: dict[str, Any] = {"type": key_name[:-3], "key": _decode_message(key_name, key[2:], 0)}
    if value is None:
        out["value"] = None  # a tombstone: the key was deleted
        return out
    raw = bytes(value)
    if len(raw) < 2:
        raise RecordDecodeError(f"coordinator value of {len(raw)} bytes has no version")
    (version,) = _I16.unpack_from(raw)
    out["value_version"] = version
    out["value"] = _decode_message(value_name, raw[2:], version)
    if value_name == "GroupMetadataValue" and out["value"].get("protocol_type") == "consumer":
        for member in out["value"].get("members", []):
            _decode_consumer_protocol(member)
    elif value_name == "TransactionLogValue":
        _name_transaction_status(out["value"])
    return out


def _name_transaction_status(value: dict) -> None:
    """The state's name in place of its byte (``Empty`` for 0, ...), as Kafka's DumpLogSegments prints it since
    4.4; a byte no state has stays a number."""
    from kafkawire.broker.transactions.states import TxnState

    status = value.get("transaction_status")
    try:
        value["transaction_status"] = str(TxnState.from_status(status))
    except KeyError:
        pass


def _decode_consumer_protocol(member: dict) -> None:
    """A classic consumer group member's subscription and assignment (hex here) decoded, as Kafka's tools
    show them: an int16 version, then ConsumerProtocolSubscription / ConsumerProtocolAssignment. Left as hex
    when they do not parse (another client's protocol under the "consumer" type)."""
    for field, schema in (
        ("subscription", "ConsumerProtocolSubscription"),
        ("assignment", "ConsumerProtocolAssignment"),
    ):
        raw = member.get(field)
        if not isinstance(raw, str):
            continue
        try:
            data = bytes.fromhex(raw)
            if len(data) < 2:
                continue
            (version,) = _I16.unpack_from(data)
            member[field] = _decode_message(schema, data[2:], version)
        except (ValueError, RecordDecodeError):
            continue


def decode_control(key: bytes | None, value: bytes | None) -> dict:
    """A control record: transaction marker or KRaft control record, by name."""
    if key is None or len(key) < 4:
        raise RecordDecodeError(f"control key needs 4 bytes, got {None if key is None else len(key)}")
    _version, ctype = struct.unpack_from(">hh", bytes(key))
    try:
        name = ControlRecordType(ctype).name
    except ValueError:
        return {"control": f"UNKNOWN({ctype})"}
    out: dict[str, Any] = {"control": name}
    if ctype in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        if value is None or len(value) < 6:
            raise RecordDecodeError("transaction marker value needs 6 bytes")
        _mv, epoch = struct.unpack_from(">hi", bytes(value))
        out["coordinator_epoch"] = epoch
        return out
    schema = _CONTROL_SCHEMAS.get(ControlRecordType(ctype))
    if schema is not None and value is not None and len(value) >= 2:
        (version,) = _I16.unpack_from(bytes(value))
        out["version"] = version
        # these schemas carry their version as their own first field
        out["data"] = _decode_message(schema, bytes(value), version)
    return out


# ---------------------------------------------------------------- batches


def _codec_name(batch) -> str:
    cid = batch.compression_id
    names = ("none", "gzip", "snappy", "lz4", "zstd")
    return names[cid] if cid < len(names) else f"unknown({cid})"


def _batch_header(batch) -> dict:
    magic = batch.magic
    out: dict[str, Any] = {
        "kind": "batch",
        "position": batch.position,
        "base_offset": batch.base_offset,
        "last_offset": batch.last_offset,
        "size": batch.size,
        "magic": magic,
        "crc": batch.crc,
    }
    if magic == 2:
        out.update(
            count=batch.record_count,
            partition_leader_epoch=batch.partition_leader_epoch,
            attributes=batch.attributes & 0xFFFF,
            codec=_codec_name(batch),
            timestamp_type=batch.timestamp_type.name,
            transactional=batch.is_transactional,
            control=batch.is_control,
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            last_sequence=batch.last_sequence,
            base_timestamp=batch.base_timestamp,
            max_timestamp=batch.max_timestamp,
            delete_horizon_ms=batch.delete_horizon_ms,
        )
    else:
        out.update(
            attributes=batch.attributes,
            codec=_codec_name(batch),
            timestamp_type=batch.timestamp_type.name,
            timestamp=batch.max_timestamp,
            transactional=False,
            control=False,
        )
    return out


def _record(record, decoder: str, control: bool, max_bytes: int) -> dict:
    out: dict[str, Any] = {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key_size": -1 if record.key is None else len(record.key),
        "value_size": -1 if record.value is None else len(record.value),
        "key": render_bytes(record.key, max_bytes),
        "value": render_bytes(record.value, max_bytes),
        "headers": [[k, render_bytes(v, max_bytes)] for k, v in record.headers],
    }
    try:
        if control:
            out["decoded"] = decode_control(record.key, record.value)
        elif decoder == "metadata":
            out["decoded"] = decode_metadata_record(record.value)
        elif decoder == "offsets":
            out["decoded"] = decode_offsets_record(record.key, record.value)
        elif decoder == "transactions":
            out["decoded"] = decode_offsets_record(record.key, record.value, "transaction")
    except RecordDecodeError as exc:
        out["decode_error"] = str(exc)
    return out


def dump_batches(
    data, *, decoder: str = "raw", records: bool = True, max_bytes: int = DEFAULT_MAX_BYTES
) -> Iterator[dict]:
    """Every batch of a ``.log`` (or KRaft snapshot, or quarantine file) as a dict, then its records.

    Yields ``{"kind": "batch", ...}`` (with ``"records"`` unless ``records=False``, and ``"crc_valid"``)
    and ``{"kind": "error", "position", "reason"}`` for damage: a batch whose CRC fails is still shown
    (and an error follows it); a batch whose records do not decode is shown with its header; framing
    that cannot be followed (a bad length or magic) or a cut-off batch ends the walk."""
    if decoder not in DECODERS or decoder == "auto":
        raise ValueError(f"decoder must be raw, metadata, offsets or transactions, not {decoder!r}")
    reader = iter_batches(data)
    while True:
        position = reader.position
        try:
            batch = next(reader)
        except StopIteration:
            break
        except CorruptRecordError as exc:
            yield {
                "kind": "error",
                "position": exc.position if exc.position is not None else position,
                "reason": exc.problem + f"; the {len(data) - position} bytes from here are not read",
            }
            return
        out = _batch_header(batch)
        try:
            batch.validate_crc()
            out["crc_valid"] = True
        except CorruptRecordError as exc:
            out["crc_valid"] = False
            out["crc_error"] = exc.problem
        error = (
            None
            if out["crc_valid"]
            else {
                "kind": "error",
                "position": batch.position,
                "reason": f"batch at base offset {batch.base_offset}: {out['crc_error']}",
            }
        )
        if records:
            try:
                out["records"] = [_record(r, decoder, out["control"], max_bytes) for r in batch.records()]
            except (CorruptRecordError, CodecUnavailableError) as exc:
                out["records_error"] = getattr(exc, "problem", str(exc))
                if error is None:
                    error = {
                        "kind": "error",
                        "position": batch.position,
                        "reason": f"records of the batch at base offset {batch.base_offset}: {out['records_error']}",
                    }
        yield out
        if error is not None:
            yield error
    tail = reader.partial_tail_bytes
    if tail:
        declared = reader.next_batch_size
        what = f" of a batch that declares {declared} bytes" if declared else ""
        yield {
            "kind": "error",
            "position": reader.position,
            "reason": f"truncated: the file ends {tail} bytes into a batch{what}",
        }


# ---------------------------------------------------------------- indexes


def _zero_tail(data: bytes, entry_size: int, count: int) -> int:
    """Entries at the end that are all zero: Kafka preallocates index files and trims them on close."""
    n = count
    while n > 1 and not any(data[(n - 1) * entry_size : n * entry_size]):
        n -= 1
    if n == 1 and count > 1 and not any(data[:entry_size]):
        n = 0  # a preallocated file with no entry yet (a lone first entry (0, 0) cannot be told apart)
    return n


def dump_offset_index(data: bytes, base_offset: int) -> Iterator[dict]:
    """``.index`` entries ``{"offset", "position"}`` (absolute offsets), then a summary; errors for a
    size that is not whole entries and for entries that go backwards."""
    data = bytes(data)
    whole = len(data) // 8
    used = _zero_tail(data, 8, whole)
    last = (-1, -1)
    for i in range(used):
        rel, position = _OFFSET_ENTRY.unpack_from(data, i * 8)
        offset = base_offset + rel
        if i and (offset <= last[0] or position <= last[1]):
            yield {
                "kind": "error",
                "position": i * 8,
                "reason": f"entry {i} (offset {offset}, position {position}) does not follow "
                f"(offset {last[0]}, position {last[1]})",
            }
        yield {"kind": "index_entry", "offset": offset, "position": position}
        last = (offset, position)
    yield {"kind": "index_summary", "entries": used, "preallocated_bytes": (whole - used) * 8}
    if len(data) % 8:
        yield {"kind": "error", "position": whole * 8, "reason": f"{len(data) % 8} bytes after the last whole entry"}


def dump_time_index(data: bytes, base_offset: int) -> Iterator[dict]:
    """``.timeindex`` entries ``{"timestamp", "offset"}``, as :func:`dump_offset_index`."""
    data = bytes(data)
    whole = len(data) // 12
    used = _zero_tail(data, 12, whole)
    last = (-1, -1)
    for i in range(used):
        ts, rel = _TIME_ENTRY.unpack_from(data, i * 12)
        offset = base_offset + rel
        if i and (ts < last[0] or offset < last[1]):
            yield {
                "kind": "error",
                "position": i * 12,
                "reason": f"entry {i} (timestamp {ts}, offset {offset}) goes back from "
                f"(timestamp {last[0]}, offset {last[1]})",
            }
        yield {"kind": "index_entry", "timestamp": ts, "offset": offset}
        last = (ts, offset)
    yield {"kind": "index_summary", "entries": used, "preallocated_bytes": (whole - used) * 12}
    if len(data) % 12:
        yield {"kind": "error", "position": whole * 12, "reason": f"{len(data) % 12} bytes after the last whole entry"}


def dump_txn_index(data: bytes) -> Iterator[dict]:
    """``.txnindex`` entries: the aborted transactions of the segment (``version``, ``producer_id``,
    ``first_offset``, ``last_offset``, ``last_stable_offset``), then a summary."""
    data = bytes(data)
    whole = len(data) // _TXN_ENTRY.size
    for i in range(whole):
        version, pid, first, last, lso = _TXN_ENTRY.unpack_from(data, i * _TXN_ENTRY.size)
        if version != 0:
            yield {"kind": "error", "position": i * _TXN_ENTRY.size, "reason": f"unknown entry version {version}"}
            return
        yield {
            "kind": "aborted_txn",
            "producer_id": pid,
            "first_offset": first,
            "last_offset": last,
            "last_stable_offset": lso,
        }
    yield {"kind": "index_summary", "entries": whole, "preallocated_bytes": 0}
    if len(data) % _TXN_ENTRY.size:
        yield {
            "kind": "error",
            "position": whole * _TXN_ENTRY.size,
            "reason": f"{len(data) % _TXN_ENTRY.size} bytes after the last whole entry",
        }


def dump_producer_snapshot(data: bytes) -> Iterator[dict]:
    """A ``.snapshot`` (producer state): version int16, CRC-32C of what follows the CRC, the entries."""
    data = bytes(data)
    if len(data) < _SNAPSHOT_HEAD.size:
        yield {"kind": "error", "position": 0, "reason": f"{len(data)} bytes is too short for a producer snapshot"}
        return
    version, crc = _SNAPSHOT_HEAD.unpack_from(data)
    computed = crc32c(data[_SNAPSHOT_HEAD.size :])
    try:
        body = _decode_message("ProducerSnapshot", data[2:], version)
    except RecordDecodeError as exc:
        yield {"kind": "error", "position": 2, "reason": str(exc)}
        return
    yield {
        "kind": "producer_snapshot",
        "version": version,
        "crc": crc,
        "crc_valid": crc == computed,
        "producers": body.get("producer_entries", []),
    }
    if crc != computed:
        yield {"kind": "error", "position": 2, "reason": f"CRC mismatch: stored 0x{crc:08x}, computed 0x{computed:08x}"}


# ------------------------------------------------------------ text files


def parse_checkpoint(text: str) -> tuple[list[list[str]], list[dict]]:
    """A Kafka text checkpoint (``version``, ``count``, ``count`` entry lines): entries and errors
    (``position`` is a line number, counted from 1)."""
    lines = text.splitlines()
    errors: list[dict] = []
    if not text:
        return [], []  # Kafka creates some checkpoints empty (cleaner-offset-checkpoint before any cleaning)
    if len(lines) < 2:
        return [], [{"kind": "error", "line": len(lines) + 1, "reason": "missing the version or count line"}]
    if lines[0].strip() != "0" and lines[0].strip() != "1":
        errors.append({"kind": "error", "line": 1, "reason": f"unknown checkpoint version {lines[0]!r}"})
    try:
        count = int(lines[1])
    except ValueError:
        return [], errors + [{"kind": "error", "line": 2, "reason": f"count {lines[1]!r} is not a number"}]
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count:
        errors.append({"kind": "error", "line": 2, "reason": f"{count} entries announced, {len(entries)} found"})
    return entries, errors


def parse_properties(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def parse_partition_metadata(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


# ------------------------------------------------------ choosing a decoder


def decoder_for(path: str) -> str:
    """``metadata`` for the KRaft metadata log and its snapshots, ``offsets`` for ``__consumer_offsets``,
    ``raw`` for everything else (by the partition directory's name)."""
    name = os.path.basename(path)
    directory = os.path.basename(os.path.dirname(os.path.abspath(path)))
    m = PARTITION_DIR.fullmatch(directory)
    topic = m.group(1) if m else ""
    if topic == METADATA_TOPIC or KRAFT_SNAPSHOT_FILE.fullmatch(name) or name == "bootstrap.checkpoint":
        return "metadata"
    if topic == OFFSETS_TOPIC:
        return "offsets"
    if topic == TRANSACTIONS_TOPIC:
        return "transactions"
    return "raw"


def file_kind(path: str) -> str | None:
    """What ``--dump`` reads a file as: log, index, timeindex, snapshot, checkpoint, properties,
    partition-metadata, json; None when the name is not one it knows."""
    name = os.path.basename(path)
    if (
        name.endswith(".log")
        or KRAFT_SNAPSHOT_FILE.fullmatch(name)
        or QUARANTINE_FILE.fullmatch(name)
        or name == "bootstrap.checkpoint"
    ):
        return "log"
    if name.endswith(".index"):
        return "index"
    if name.endswith(".timeindex"):
        return "timeindex"
    if name.endswith(".txnindex"):
        return "txnindex"
    if name.endswith(".snapshot"):
        return "snapshot"
    if name.endswith("checkpoint"):
        return "checkpoint"
    if name.endswith(".properties"):
        return "properties"
    if name == "partition.metadata":
        return "partition-metadata"
    if name in ("quorum-state",) or name.endswith(".json"):
        return "json"
    return None


def base_offset_of(path: str) -> int:
    m = re.match(r"(\d{20})", os.path.basename(path))
    return int(m.group(1)) if m else 0


def dump_file(
    path: str, data: bytes, *, decoder: str = "auto", records: bool = True, max_bytes: int = DEFAULT_MAX_BYTES
) -> Iterator[dict]:
    """Everything :func:`file_kind` knows, from the file's bytes; ``{"kind": "error"}`` entries for damage."""
    kind = file_kind(path)
    if kind == "log":
        chosen = decoder_for(path) if decoder == "auto" else decoder
        yield from dump_batches(data, decoder=chosen, records=records, max_bytes=max_bytes)
    elif kind == "index":
        yield from dump_offset_index(data, base_offset_of(path))
    elif kind == "timeindex":
        yield from dump_time_index(data, base_offset_of(path))
    elif kind == "txnindex":
        yield from dump_txn_index(data)
    elif kind == "snapshot":
        yield from dump_producer_snapshot(data)
    elif kind in ("checkpoint", "properties", "partition-metadata", "json"):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            yield {"kind": "error", "position": exc.start, "reason": f"not UTF-8 text: {exc.reason}"}
            return
        if kind == "checkpoint":
            entries, errors = parse_checkpoint(text)
            yield {"kind": "checkpoint", "entries": entries}
            yield from errors
        elif kind == "properties":
            yield {"kind": "properties", "properties": parse_properties(text)}
        elif kind == "partition-metadata":
            yield {"kind": "partition_metadata", "fields": parse_partition_metadata(text)}
        else:
            try:
                yield {"kind": "json", "document": json.loads(text)}
            except ValueError as exc:
                yield {"kind": "error", "position": getattr(exc, "pos", 0), "reason": f"not JSON: {exc}"}
    else:
        yield {
            "kind": "error",
            "position": 0,
            "reason": "not a file kafkawire logs knows (.log, .index, "
            ".timeindex, .snapshot, checkpoints, partition.metadata, meta.properties, quorum-state)",
        }


# ------------------------------------------------------- a whole directory


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _headers_only(path: str) -> tuple[dict, list[dict]]:
    """Batches, records and the offset range of one segment from its batch headers (no decompression)."""
    data = _read(path)
    batches = records = 0
    first = last = None
    errors = []
    for item in dump_batches(data, records=False):
        if item["kind"] == "error":
            errors.append(item)
            continue
        batches += 1
        records += item.get("count", 1)
        first = item["base_offset"] if first is None else first
        last = item["last_offset"]
    return {
        "batches": batches,
        "records": records,
        "first_offset": first,
        "last_offset": last,
        "bytes": len(data),
    }, errors


def _unreadable(path: str, exc: OSError) -> dict:
    return {"kind": "error", "file": path, "position": 0, "reason": f"unreadable: {exc.strerror or exc}"}


def _summarize_entry(directory: str, name: str, out: dict) -> None:
    """Add one file of a partition directory to its summary ``out``; OSError when it cannot be read."""
    path = os.path.join(directory, name)
    if LOG_FILE.fullmatch(name):
        info, errors = _headers_only(path)
        base = int(name[:20])
        seg = {"base_offset": base, **info}
        for suffix, dumper in (
            (".index", dump_offset_index),
            (".timeindex", dump_time_index),
            (".txnindex", lambda data, _base: dump_txn_index(data)),
        ):
            ipath = os.path.join(directory, name[:20] + suffix)
            if os.path.exists(ipath):
                items = list(dumper(_read(ipath), base))
                summary = next(i for i in items if i["kind"] == "index_summary")
                seg[suffix[1:] + "_entries"] = summary["entries"]
                errors += [dict(e, file=ipath) for e in items if e["kind"] == "error"]
        out["segments"].append(seg)
        out["problems"] += [dict(e, file=path) if "file" not in e else e for e in errors]
    elif INDEX_FILE.fullmatch(name) or TIME_INDEX_FILE.fullmatch(name) or TXN_INDEX_FILE.fullmatch(name):
        if not os.path.exists(os.path.join(directory, name[:20] + ".log")):
            out["other_files"].append(name)
    elif SNAPSHOT_FILE.fullmatch(name):
        items = list(dump_producer_snapshot(_read(path)))
        snap = next((i for i in items if i["kind"] == "producer_snapshot"), None)
        out["snapshots"].append({"file": name, "producers": len(snap["producers"]) if snap else None})
        out["problems"] += [dict(e, file=path) for e in items if e["kind"] == "error"]
    elif KRAFT_SNAPSHOT_FILE.fullmatch(name):
        info, errors = _headers_only(path)
        out["kraft_snapshots"].append({"file": name, **info})
        out["problems"] += [dict(e, file=path) for e in errors]
    elif QUARANTINE_FILE.fullmatch(name):
        out["quarantined"].append(name)
    elif name == "partition.metadata":
        fields = parse_partition_metadata(_read(path).decode("utf-8", "replace"))
        out["topic_id"] = fields.get("topic_id")
    elif name == "leader-epoch-checkpoint":
        entries, errors = parse_checkpoint(_read(path).decode("utf-8", "replace"))
        out["leader_epochs"] = [
            [int(x) for x in e] for e in entries if len(e) == 2 and all(x.lstrip("-").isdigit() for x in e)
        ]
        out["problems"] += [dict(e, file=path) for e in errors]
    elif name == "quorum-state":
        try:
            out["quorum_state"] = json.loads(_read(path))
        except ValueError as exc:
            out["problems"].append({"kind": "error", "file": path, "position": 0, "reason": f"not JSON: {exc}"})
    else:
        out["other_files"].append(name)


def summarize_partition(directory: str) -> dict:
    """Segments (batches, records, offsets, bytes), indexes, snapshots and checkpoints of one partition
    directory, and the files in it that are none of those."""
    names = sorted(os.listdir(directory))
    out: dict[str, Any] = {
        "kind": "partition",
        "name": os.path.basename(directory),
        "segments": [],
        "snapshots": [],
        "kraft_snapshots": [],
        "quarantined": [],
        "other_files": [],
        "problems": [],
    }
    for name in names:
        try:
            _summarize_entry(directory, name, out)
        except OSError as exc:  # unreadable, or a directory where a file belongs
            out["problems"].append(_unreadable(os.path.join(directory, name), exc))
    segs = out["segments"]
    offsets = [s for s in segs if s["first_offset"] is not None]
    out["records"] = sum(s["records"] for s in segs)
    out["bytes"] = sum(s["bytes"] for s in segs)
    out["first_offset"] = offsets[0]["first_offset"] if offsets else None
    out["last_offset"] = offsets[-1]["last_offset"] if offsets else None
    return out


def _metadata_files(directory: str) -> tuple[list[str], int]:
    """The metadata log's newest KRaft snapshot (if any) and its segments, in replay order, and the offset
    the log is read from: the snapshot's end offset (its name), since it holds everything before it."""
    names = os.listdir(directory)
    snaps = sorted(n for n in names if KRAFT_SNAPSHOT_FILE.fullmatch(n))
    logs = sorted(n for n in names if LOG_FILE.fullmatch(n))
    return [os.path.join(directory, n) for n in snaps[-1:] + logs], int(snaps[-1][:20]) if snaps else 0


def metadata_topics(directory: str) -> tuple[dict[str, dict], int, list[dict]]:
    """Replay the metadata log of ``directory`` (``__cluster_metadata-0``) into topics:
    ``{name: {"topic_id", "partitions": {n: {"leader", "replicas"}}, "configs"}}``, the record count,
    and the problems met."""
    topics: dict[str, dict] = {}
    by_id: dict[str, str] = {}
    count = 0
    problems: list[dict] = []
    pending: list[dict] | None = None  # records of an open metadata transaction
    files, log_from = _metadata_files(directory)
    for path in files:
        snapshot = KRAFT_SNAPSHOT_FILE.fullmatch(os.path.basename(path)) is not None
        try:
            data = _read(path)
        except OSError as exc:
            problems.append(_unreadable(path, exc))
            continue
        for item in dump_batches(data, decoder="metadata", max_bytes=64):
            if item["kind"] == "error":
                problems.append(dict(item, file=path))
                continue
            for rec in item.get("records", []):
                dec = rec.get("decoded")
                if not dec or "type" not in dec or (not snapshot and rec["offset"] < log_from):
                    continue
                count += 1
                # a metadata transaction's records count once it ends; an aborted one's never (Kafka's loader)
                if dec["type"] == "BeginTransactionRecord":
                    pending = []
                    continue
                if dec["type"] in ("EndTransactionRecord", "AbortTransactionRecord"):
                    ready = pending if dec["type"] == "EndTransactionRecord" else []
                    pending = None
                    for dec in ready or []:
                        _apply_metadata(dec, topics, by_id)
                    continue
                if pending is not None:
                    pending.append(dec)
                    continue
                _apply_metadata(dec, topics, by_id)
    return topics, count, problems


def _apply_metadata(dec: dict, topics: dict[str, dict], by_id: dict[str, str]) -> None:
    """Apply one decoded metadata record to the topics being replayed."""
    fields = dec["data"]
    if dec["type"] == "TopicRecord":
        topics[fields["name"]] = {
            "topic_id": kafka_uuid(fields["topic_id"]),
            "partitions": {},
            "configs": {},
        }
        by_id[fields["topic_id"]] = fields["name"]
    elif dec["type"] == "RemoveTopicRecord":
        gone = by_id.pop(fields["topic_id"], None)
        if gone is not None:
            topics.pop(gone, None)
    elif dec["type"] in ("PartitionRecord", "PartitionChangeRecord"):
        name = by_id.get(fields["topic_id"])
        if name is None:
            return
        part = topics[name]["partitions"].setdefault(fields["partition_id"], {})
        for field in ("leader", "replicas", "isr"):
            if field in fields and fields[field] is not None and fields[field] != -2:
                part[field] = fields[field]
    elif dec["type"] == "ConfigRecord" and fields.get("resource_type") == 2:
        t = topics.get(fields["resource_name"])
        if t is not None:
            if fields.get("value") is None:
                t["configs"].pop(fields["name"], None)
            else:
                t["configs"][fields["name"]] = fields["value"]


def consumer_offsets(partition_dirs: list[str]) -> tuple[dict, list[dict]]:
    """Committed offsets in ``__consumer_offsets`` partitions, last write per key wins:
    ``{group: {"topic-partition": offset}}``, and the problems met."""
    committed: dict[tuple, int] = {}
    problems: list[dict] = []
    for directory in partition_dirs:
        for name in sorted(n for n in os.listdir(directory) if LOG_FILE.fullmatch(n)):
            path = os.path.join(directory, name)
            try:
                data = _read(path)
            except OSError as exc:
                problems.append(_unreadable(path, exc))
                continue
            for item in dump_batches(data, decoder="offsets", max_bytes=64):
                if item["kind"] == "error":
                    problems.append(dict(item, file=path))
                    continue
                for rec in item.get("records", []):
                    dec = rec.get("decoded")
                    if not dec:
                        continue
                    if dec.get("type") == "kafkawire":
                        k = dec["key"]
                        if isinstance(k, list) and len(k) == 4 and k[0] == "offset":
                            key = (k[1], k[2], k[3])
                            if dec["value"] is None:
                                committed.pop(key, None)
                            else:
                                committed[key] = dec["value"].get("offset")
                    elif dec.get("type") in ("OffsetCommit", "LegacyOffsetCommit"):
                        k = dec["key"]
                        key = (k["group"], k["topic"], k["partition"])
                        if dec["value"] is None:
                            committed.pop(key, None)
                        else:
                            committed[key] = dec["value"]["offset"]
    groups: dict[str, dict[str, int]] = {}
    for (group, topic, partition), offset in sorted(committed.items()):
        groups.setdefault(group, {})[f"{topic}-{partition}"] = offset
    return groups, problems


# kafkawire's own top-level entries, besides partition directories of its topics.
_KAFKAWIRE_ENTRIES = {"meta.properties", ".lock", "log-start-offset-checkpoint", KAFKAWIRE_META_DIR}
# A Kafka log directory's own top-level entries.
_KAFKA_ENTRIES = {"meta.properties", ".lock", "bootstrap.checkpoint", ".kafka_cleanshutdown", *DIR_CHECKPOINTS}


def _known_entry(name: str, is_dir: bool) -> bool:
    """A top-level entry of either layout: kafkawire's (with what its atomic writes and interrupted
    deletions leave, as broker/storage/recovery.py counts them) or Kafka's."""
    if name in _KAFKAWIRE_ENTRIES or name in _KAFKA_ENTRIES:
        return True
    if name.endswith(".tmp") and name[:-4] in _KAFKAWIRE_ENTRIES:
        return True
    return is_dir and name.endswith("-delete")


def summarize_data_dir(data_dir: str) -> Iterator[dict]:
    """``kafkawire logs DIR``: the directory's identity, its topics (from kafkawire's ``topics.json`` or
    Kafka's metadata log), every partition directory, the committed offsets, the top-level checkpoints,
    and the entries that belong to neither layout."""
    names = sorted(os.listdir(data_dir))
    kafkawire = KAFKAWIRE_META_DIR in names
    layout = "kafkawire" if kafkawire else ("kafka" if f"{METADATA_TOPIC}-0" in names else "unknown")
    props: dict[str, str] = {}
    problems: list[dict] = []
    if "meta.properties" in names:
        try:
            props = parse_properties(_read(os.path.join(data_dir, "meta.properties")).decode("utf-8", "replace"))
        except OSError as exc:
            problems.append(_unreadable(os.path.join(data_dir, "meta.properties"), exc))
    yield {"kind": "data_dir", "path": os.path.abspath(data_dir), "layout": layout, "meta_properties": props}
    if kafkawire:
        try:
            doc = json.loads(_read(os.path.join(data_dir, KAFKAWIRE_META_DIR, "topics.json")))
            for t in doc.get("topics", []):
                yield {
                    "kind": "topic",
                    "source": "topics.json",
                    "name": t["name"],
                    "topic_id": kafka_uuid(t["topic_id"]),
                    "partitions": t["partitions"],
                    "configs": t.get("configs", {}),
                }
        except FileNotFoundError:
            pass
        except OSError as exc:
            problems.append(_unreadable(os.path.join(data_dir, KAFKAWIRE_META_DIR, "topics.json"), exc))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            problems.append(
                {
                    "kind": "error",
                    "file": os.path.join(data_dir, KAFKAWIRE_META_DIR, "topics.json"),
                    "position": 0,
                    "reason": f"unreadable: {exc}",
                }
            )
    meta_dir = os.path.join(data_dir, f"{METADATA_TOPIC}-0")
    if os.path.isdir(meta_dir):
        topics, count, errs = metadata_topics(meta_dir)
        problems += errs
        for name, t in sorted(topics.items()):
            yield {
                "kind": "topic",
                "source": f"{METADATA_TOPIC}-0",
                "metadata_records": count,
                "name": name,
                "topic_id": t["topic_id"],
                "partitions": len(t["partitions"]),
                "leaders": {str(p): v.get("leader") for p, v in sorted(t["partitions"].items())},
                "configs": t["configs"],
            }
    offsets_dirs = []
    unknown = []
    for name in names:
        path = os.path.join(data_dir, name)
        m = PARTITION_DIR.fullmatch(name)
        if os.path.isdir(path) and m and not name.endswith(("-delete", "-stray")):
            try:
                part = summarize_partition(path)
            except OSError as exc:
                problems.append(_unreadable(path, exc))
                continue
            problems += part.pop("problems")
            yield part
            if m.group(1) == OFFSETS_TOPIC:
                offsets_dirs.append(path)
        elif name in DIR_CHECKPOINTS and os.path.isfile(path):
            try:
                entries, errors = parse_checkpoint(_read(path).decode("utf-8", "replace"))
            except OSError as exc:
                problems.append(_unreadable(path, exc))
                continue
            yield {
                "kind": "dir_checkpoint",
                "name": name,
                "entries": len(entries),
                "nonzero": sorted(" ".join(e) for e in entries if e and e[-1] != "0"),
            }
            problems += [dict(e, file=path) for e in errors]
        elif not _known_entry(name, os.path.isdir(path)):
            unknown.append(name + ("/" if os.path.isdir(path) else ""))
    if offsets_dirs:
        groups, errs = consumer_offsets(offsets_dirs)
        problems += errs
        yield {"kind": "consumer_offsets", "partitions": len(offsets_dirs), "groups": groups}
    if unknown:
        yield {"kind": "unknown_entries", "names": unknown}
    yield from problems
