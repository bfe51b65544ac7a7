"""Spark and Arrow schemas of the data source: Spark's Kafka source schema, sink columns."""

from __future__ import annotations

import functools

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def read_schema(include_headers: bool) -> StructType:
    """The columns of a read, as Spark's Kafka source has them."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


@functools.lru_cache(maxsize=4)
def arrow_read_schema(include_headers: bool):
    """The exact Arrow schema Spark expects back from ``read`` (it compares with ``equals``)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(read_schema(include_headers), timezone="UTC")


class SinkSchemaError(ValueError):
    pass


def _is(dt: DataType, *types) -> bool:
    return isinstance(dt, types)


def check_sink_schema(schema: StructType, topic_option: str | None) -> None:
    """Spark's Kafka sink rules: ``value`` required; ``key``, ``topic``, ``partition``, ``headers`` optional."""
    by_name = {f.name.lower(): f for f in schema.fields}
    if "value" not in by_name:
        raise SinkSchemaError(
            "the DataFrame written to kafkawire needs a 'value' column (string or binary); "
            f"it has {[f.name for f in schema.fields]}"
        )
    for name in ("key", "value"):
        f = by_name.get(name)
        if f is not None and not _is(f.dataType, StringType, BinaryType):
            raise SinkSchemaError(f"column '{f.name}' must be string or binary, not {f.dataType.simpleString()}")
    t = by_name.get("topic")
    if t is None and topic_option is None:
        raise SinkSchemaError("no topic to write to: add a 'topic' column (string) or set the option 'topic'")
    if t is not None and not _is(t.dataType, StringType):
        raise SinkSchemaError(f"column 'topic' must be string, not {t.dataType.simpleString()}")
    p = by_name.get("partition")
    if p is not None and not _is(p.dataType, IntegerType):
        raise SinkSchemaError(f"column 'partition' must be int, not {p.dataType.simpleString()}")
    h = by_name.get("headers")
    if h is not None:
        ok = (
            isinstance(h.dataType, ArrayType)
            and isinstance(h.dataType.elementType, StructType)
            and [f.name for f in h.dataType.elementType.fields] == ["key", "value"]
            and _is(h.dataType.elementType.fields[0].dataType, StringType)
            and _is(h.dataType.elementType.fields[1].dataType, BinaryType, StringType)
        )
        if not ok:
            raise SinkSchemaError(
                f"column 'headers' must be array<struct<key:string,value:binary>>, not {h.dataType.simpleString()}"
            )
