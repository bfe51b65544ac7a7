"""Small files that describe a data directory, each replaced atomically.

- ``meta.properties``: ``node.id``, ``directory.id``, ``version``, ``cluster.id`` as Kafka 4.4 writes them,
  created on first start (``directory.id`` added to one an older kafkawire wrote).
- ``__cluster_metadata-0``: the KRaft metadata log (``kraft/``) holding every topic's name, id, partitions
  and explicit configs; ``__kafkawire_meta/topics.json``, where older kafkawire kept them, is migrated into
  it once (and set aside as ``kafkawire-topics.json.migrated``).
- ``log-start-offset-checkpoint``: Kafka's checkpoint format (version line, count line, then
  ``topic partition offset`` lines), written whenever DeleteRecords or retention moves a log start.
- ``<topic>-<partition>/partition.metadata``: the owning topic's id in Kafka's base64 form, so that a
  directory left from a deleted topic is never mistaken for a new topic of the same name.

A write goes to a temporary file that is fsynced, renamed over the old one,
and then the directory is fsynced: after a crash either the old or the new
content is there, never a mix.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid

from .base import StorageError, TopicMeta

log = logging.getLogger(__name__)

META_DIR = "__kafkawire_meta"
TOPICS_FILE = "topics.json"
META_PROPERTIES = "meta.properties"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
PARTITION_METADATA = "partition.metadata"
KAFKA_CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str, data: bytes, *, sync_dir: bool = True) -> None:
    """``data`` fsynced under a temporary name, then renamed to ``path``; the rename made durable by an fsync of
    the directory unless ``sync_dir`` is False: for a caller that writes more files in the same directory and
    fsyncs it once after the last one, before anything relies on them."""
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync_dir:
        fsync_dir(os.path.dirname(path) or ".")


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None


# ------------------------------------------------------------ meta.properties


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


def load_or_create_meta_properties(data_dir: str, new_cluster_id: str, node_id: int | None) -> dict[str, str]:
    """The directory's identity; a node id that disagrees with the recorded one is refused (as Kafka does).
    A file without ``directory.id`` (older kafkawire) gets one: Kafka 4.4 refuses to start without it."""
    from .kraft import uuid_text

    path = os.path.join(data_dir, META_PROPERTIES)
    text = _read_text(path)
    if text is not None:
        props = parse_properties(text)
        if not props.get("cluster.id"):
            raise StorageError(f"{path} has no cluster.id")
        if node_id is not None and props.get("node.id") not in (None, str(node_id)):
            raise StorageError(f"{path} belongs to node.id={props['node.id']}, this broker is node.id={node_id}")
        if props.get("directory.id"):
            return props
    else:
        props = {"cluster.id": new_cluster_id, "node.id": str(node_id if node_id is not None else 1), "version": "1"}
    props.setdefault("node.id", str(node_id if node_id is not None else 1))
    props["directory.id"] = uuid_text(uuid.uuid4())
    props["version"] = "1"
    # Kafka's order (node.id, directory.id, version, cluster.id), then anything else the file had
    order = ["node.id", "directory.id", "version", "cluster.id"]
    keys = order + sorted(k for k in props if k not in order)
    header = f"#\n#{time.strftime('%a %b %d %H:%M:%S UTC %Y', time.gmtime())}\n"
    write_atomically(path, (header + "".join(f"{k}={props[k]}\n" for k in keys)).encode())
    return props


# ---------------------------------------------------------------- topics.json


_logs: dict[str, object] = {}  # data directory -> its open MetadataLog, from the last load_topics
_logs_lock = threading.Lock()


def _open_metadata_log(data_dir: str, *, repair: bool = True):
    from .kraft import MetadataLog, parse_uuid

    props = parse_properties(_read_text(os.path.join(data_dir, META_PROPERTIES)) or "")
    try:
        node_id = int(props.get("node.id", "1"))
        directory_id = parse_uuid(props["directory.id"]) if props.get("directory.id") else uuid.UUID(int=0)
    except ValueError as exc:
        raise StorageError(f"{os.path.join(data_dir, META_PROPERTIES)} is unreadable: {exc}") from exc
    try:
        return MetadataLog(data_dir, node_id, directory_id).load(repair=repair)
    except (ValueError, OSError) as exc:
        raise StorageError(f"the metadata log of {data_dir} is unreadable: {exc}") from exc


def load_topics(data_dir: str) -> dict[str, TopicMeta]:
    """Every topic of the metadata log, read from disk (a start). A directory without one but with an older
    kafkawire's ``topics.json`` is migrated: its topics are written to a new metadata log, once."""
    metadata_log = _open_metadata_log(data_dir)
    with _logs_lock:
        _logs[os.path.realpath(data_dir)] = metadata_log
    if not metadata_log.exists():
        legacy = load_legacy_topics(data_dir)
        if legacy:
            metadata_log.save_topics(legacy)
            path = os.path.join(data_dir, META_DIR, TOPICS_FILE)
            kept = set_aside_migrated(path)
            log.info(
                "%s: %d topics moved from %s into the KRaft metadata log (%s); the old file is kept as %s",
                data_dir,
                len(legacy),
                path,
                metadata_log.directory,
                kept,
            )
    return metadata_log.topics()


def drop_kafka_recovery_marks(data_dir: str) -> bool:
    """Called once a start is accepted, before anything is written. The clean-shutdown marker ("logs are as I
    left them", Kafka's or kafkawire's) and the recovery points ("nothing below these needs recovery") go:
    kafkawire is about to write past them, so until its own clean stop writes them again, a broker starting
    on the directory after a crash of kafkawire recovers every log from its start. Kafka's LogManager deletes
    the marker at the same moment, so that a crash while loading counts as unclean. Returns whether the
    marker was there (the previous stop was clean: the active segments' indexes can be trusted)."""
    marker = os.path.join(data_dir, KAFKA_CLEAN_SHUTDOWN)
    clean = os.path.isfile(marker)
    gone = False
    for path in (marker, os.path.join(data_dir, RECOVERY_POINT_CHECKPOINT)):
        if os.path.exists(path):
            os.unlink(path)
            gone = True
    if gone:
        fsync_dir(data_dir)
    return clean


def write_clean_shutdown_marker(data_dir: str, broker_epoch: int) -> None:
    """Kafka's ``.kafka_cleanshutdown`` as its CleanShutdownFileHandler writes it (version 0, the broker epoch
    this node registered with, -1 for none; Kafka's broker hands it to the controller as the previous
    epoch, KIP-966). Written last on a clean stop, after every log, index, producer snapshot and
    checkpoint is on disk: Kafka (and kafkawire) starting next skip recovering the active segments."""
    body = json.dumps({"version": 0, "brokerEpoch": int(broker_epoch)}, separators=(",", ":"))
    write_atomically(os.path.join(data_dir, KAFKA_CLEAN_SHUTDOWN), body.encode())


def registered_broker_epoch(data_dir: str, node_id: int | None) -> int:
    """The epoch of ``node_id``'s registration in the metadata log (a Kafka broker that ran on the directory
    registered; kafkawire does not), or -1, the epoch Kafka's broker holds before it registers."""
    if node_id is None:
        return -1
    from .kraft import records

    with _logs_lock:
        metadata_log = _logs.get(os.path.realpath(data_dir))
    if metadata_log is None:
        return -1
    for value in metadata_log.image.carried.get(("broker", int(node_id)), [])[:1]:
        try:
            name, _version, message = records.decode(value)
        except Exception:  # noqa: BLE001 - a record kafkawire cannot read says nothing of the epoch
            return -1
        if name == "RegisterBrokerRecord":
            return int(message.broker_epoch)
    return -1


def read_topics(data_dir: str) -> dict[str, TopicMeta]:
    """The topics of the metadata log (or of an older kafkawire's ``topics.json``), changing nothing: for
    tools that read a directory a broker may be serving."""
    metadata_log = _open_metadata_log(data_dir, repair=False)
    return metadata_log.topics() if metadata_log.exists() else load_legacy_topics(data_dir)


def save_topics(data_dir: str, topics: dict[str, TopicMeta]) -> None:
    """Append to the metadata log what makes its topics ``topics``."""
    key = os.path.realpath(data_dir)
    with _logs_lock:
        metadata_log = _logs.get(key)
        if metadata_log is None:
            metadata_log = _logs[key] = _open_metadata_log(data_dir)
        metadata_log.save_topics(topics)


def metadata_log_of(data_dir: str):
    """The data directory's MetadataLog (as the last load_topics read it), for other owners of metadata
    records (SCRAM credentials, ACLs): ``.image`` to read, ``.append([records])`` to write."""
    key = os.path.realpath(data_dir)
    with _logs_lock:
        metadata_log = _logs.get(key)
        if metadata_log is None:
            metadata_log = _logs[key] = _open_metadata_log(data_dir)
        return metadata_log


def set_aside_migrated(path: str) -> str:
    """Move an older kafkawire's file in ``__kafkawire_meta/`` that is now in the metadata log to the top of the
    data directory as ``kafkawire-<name>.migrated`` (Kafka ignores files there), and remove
    ``__kafkawire_meta/`` once it is empty: Kafka 4.4 refuses to start on a directory holding a directory
    that is not a partition's. Returns the new path."""
    meta_dir = os.path.dirname(path)
    data_dir = os.path.dirname(meta_dir)
    kept = os.path.join(data_dir, f"kafkawire-{os.path.basename(path)}.migrated")
    os.replace(path, kept)
    try:
        os.rmdir(meta_dir)
    except OSError:
        pass  # other files are still there (ACLs)
    fsync_dir(data_dir)
    return kept


def load_legacy_topics(data_dir: str) -> dict[str, TopicMeta]:
    """The topics of an older kafkawire's ``topics.json`` (empty when there is none)."""
    path = os.path.join(data_dir, META_DIR, TOPICS_FILE)
    text = _read_text(path)
    if text is None:
        return {}
    try:
        doc = json.loads(text)
        topics = {}
        for t in doc["topics"]:
            meta = TopicMeta(
                name=t["name"],
                topic_id=uuid.UUID(t["topic_id"]),
                partitions=int(t["partitions"]),
                configs={str(k): str(v) for k, v in t.get("configs", {}).items()},
            )
            topics[meta.name] = meta
        return topics
    except (ValueError, KeyError, TypeError) as exc:
        raise StorageError(f"{path} is unreadable: {exc}") from exc


# ----------------------------------------------------- log start checkpoint


def load_log_start_offsets(data_dir: str) -> dict[tuple[str, int], int]:
    path = os.path.join(data_dir, LOG_START_CHECKPOINT)
    text = _read_text(path)
    if not text:  # Kafka creates the file empty at start and fills it later: killed before, it stays empty
        return {}
    lines = text.splitlines()
    try:
        if lines[0].strip() != "0":
            raise ValueError(f"unknown version {lines[0]!r}")
        count = int(lines[1])
        out = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split()
            out[(topic, int(partition))] = int(offset)
        if len(out) != count:
            raise ValueError(f"{count} entries announced, {len(out)} found")
        return out
    except (IndexError, ValueError) as exc:
        raise StorageError(f"{path} is unreadable: {exc}") from exc


def touch_log_start_offsets(data_dir: str) -> None:
    """The checkpoint created empty where there is none, as Kafka's log manager creates it at start: nothing in it
    to keep, so not fsynced (lost in a crash, it is created again; absent or empty, it holds no entries)."""
    path = os.path.join(data_dir, LOG_START_CHECKPOINT)
    if not os.path.exists(path):
        with open(path, "ab"):
            pass


def save_log_start_offsets(data_dir: str, offsets: dict[tuple[str, int], int]) -> None:
    save_offsets_checkpoint(os.path.join(data_dir, LOG_START_CHECKPOINT), offsets)


def save_offsets_checkpoint(path: str, offsets: dict[tuple[str, int], int]) -> None:
    """Kafka's OffsetCheckpointFile: version 0, the count, then ``topic partition offset`` lines."""
    lines = ["0", str(len(offsets))] + [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    write_atomically(path, ("\n".join(lines) + "\n").encode())


def save_clean_stop_checkpoints(data_dir: str, ends: dict[tuple[str, int], int]) -> None:
    """On a clean stop, with every partition flushed up to ``ends``: Kafka's recovery points (nothing below
    them needs recovery) and high watermarks (a single node's are its log ends), so that Kafka starting on
    the directory recovers nothing kafkawire wrote."""
    for name in (RECOVERY_POINT_CHECKPOINT, REPLICATION_CHECKPOINT):
        path = os.path.join(data_dir, name)
        offsets = {tp: o for tp, o in _load_offsets(path).items() if (tp[0], tp[1]) not in ends}  # others' kept
        offsets.update(ends)
        save_offsets_checkpoint(path, offsets)


def _load_offsets(path: str) -> dict[tuple[str, int], int]:
    text = _read_text(path)
    if text is None:
        return {}
    lines = text.splitlines()
    out = {}
    try:
        for line in lines[2 : 2 + int(lines[1])]:
            topic, partition, offset = line.split()
            out[(topic, int(partition))] = int(offset)
    except (IndexError, ValueError):
        return {}  # rewritten whole below
    return out


# --------------------------------------------------------- partition.metadata


def partition_metadata_bytes(topic_id: uuid.UUID) -> bytes:
    from .kraft import uuid_text

    return f"version: 0\ntopic_id: {uuid_text(topic_id)}\n".encode()


def write_partition_metadata(partition_dir: str, topic_id: uuid.UUID) -> None:
    write_atomically(os.path.join(partition_dir, PARTITION_METADATA), partition_metadata_bytes(topic_id))


def ensure_partition_metadata(partition_dir: str, topic_id: uuid.UUID) -> None:
    """Write ``partition.metadata`` when it is missing or not in Kafka's form (an older kafkawire wrote the
    dashed UUID, which Kafka cannot parse); one in Kafka's form is left as it is."""
    if _read_text(os.path.join(partition_dir, PARTITION_METADATA)) != partition_metadata_bytes(topic_id).decode():
        write_partition_metadata(partition_dir, topic_id)


def read_partition_topic_id(partition_dir: str) -> uuid.UUID | None:
    text = _read_text(os.path.join(partition_dir, PARTITION_METADATA))
    if text is None:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id":
            from .kraft import parse_uuid

            try:
                return parse_uuid(value)
            except ValueError:
                return None
    return None
