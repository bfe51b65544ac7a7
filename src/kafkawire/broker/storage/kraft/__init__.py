"""A data directory's KRaft metadata log (``__cluster_metadata-0``) in Kafka 4.4's format: its record
frames (``records``), what it says (``image``), reading and appending it (``log``)."""

from .log import METADATA_DIR, MetadataLog, parse_uuid, uuid_text

__all__ = ["METADATA_DIR", "MetadataLog", "parse_uuid", "uuid_text"]
