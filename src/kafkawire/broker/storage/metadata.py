"""Small files that describe a data directory, each replaced atomically.

- ``meta.properties``: ``cluster.id``, ``node.id``, ``version`` (Kafka's names), created on first start.
- ``__kafkawire_meta/topics.json``: every topic's name, id, partition count and explicit configs.
- ``log-start-offset-checkpoint``: Kafka's checkpoint format (version line, count line, then
  ``topic partition offset`` lines), written whenever DeleteRecords or retention moves a log start.
- ``<topic>-<partition>/partition.metadata``: the owning topic's id, as Kafka writes it, so that a
  directory left from a deleted topic is never mistaken for a new topic of the same name.

A write goes to a temporary file that is fsynced, renamed over the old one,
and then the directory is fsynced: after a crash either the old or the new
content is there, never a mix.
"""

from __future__ import annotations

import json
import os
import time
import uuid

from .base import StorageError, TopicMeta

META_DIR = "__kafkawire_meta"
TOPICS_FILE = "topics.json"
META_PROPERTIES = "meta.properties"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
PARTITION_METADATA = "partition.metadata"


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str, data: bytes) -> None:
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
    """The directory's identity; a node id that disagrees with the recorded one is refused (as Kafka does)."""
    path = os.path.join(data_dir, META_PROPERTIES)
    text = _read_text(path)
    if text is not None:
        props = parse_properties(text)
        if not props.get("cluster.id"):
            raise StorageError(f"{path} has no cluster.id")
        if node_id is not None and props.get("node.id") not in (None, str(node_id)):
            raise StorageError(f"{path} belongs to node.id={props['node.id']}, this broker is node.id={node_id}")
        return props
    props = {"cluster.id": new_cluster_id, "node.id": str(node_id if node_id is not None else 1), "version": "1"}
    header = f"#\n#{time.strftime('%a %b %d %H:%M:%S UTC %Y', time.gmtime())}\n"
    write_atomically(path, (header + "".join(f"{k}={v}\n" for k, v in props.items())).encode())
    return props


# ---------------------------------------------------------------- topics.json


def load_topics(data_dir: str) -> dict[str, TopicMeta]:
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


def save_topics(data_dir: str, topics: dict[str, TopicMeta]) -> None:
    os.makedirs(os.path.join(data_dir, META_DIR), exist_ok=True)
    doc = {
        "version": 1,
        "topics": [
            {"name": m.name, "topic_id": str(m.topic_id), "partitions": m.partitions, "configs": dict(m.configs)}
            for m in sorted(topics.values(), key=lambda m: m.name)
        ],
    }
    write_atomically(os.path.join(data_dir, META_DIR, TOPICS_FILE), json.dumps(doc, indent=1, sort_keys=True).encode())


# ----------------------------------------------------- log start checkpoint


def load_log_start_offsets(data_dir: str) -> dict[tuple[str, int], int]:
    path = os.path.join(data_dir, LOG_START_CHECKPOINT)
    text = _read_text(path)
    if text is None:
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


def save_log_start_offsets(data_dir: str, offsets: dict[tuple[str, int], int]) -> None:
    lines = ["0", str(len(offsets))] + [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    write_atomically(os.path.join(data_dir, LOG_START_CHECKPOINT), ("\n".join(lines) + "\n").encode())


# --------------------------------------------------------- partition.metadata


def write_partition_metadata(partition_dir: str, topic_id: uuid.UUID) -> None:
    write_atomically(os.path.join(partition_dir, PARTITION_METADATA), f"version: 0\ntopic_id: {topic_id}\n".encode())


def read_partition_topic_id(partition_dir: str) -> uuid.UUID | None:
    text = _read_text(os.path.join(partition_dir, PARTITION_METADATA))
    if text is None:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id":
            try:
                return uuid.UUID(value.strip())
            except ValueError:
                return None
    return None
