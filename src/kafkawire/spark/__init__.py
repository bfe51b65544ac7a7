"""kafkawire.spark: a PySpark data source for Kafka-protocol brokers, with Spark's Kafka conventions.

from kafkawire.spark import register
register(spark)                      # spark.dataSource.register(KafkaWireDataSource)
df = (spark.read.format("kafkawire")
      .option("kafka.bootstrap.servers", "localhost:9092")
      .option("subscribe", "events").load())
"""

from __future__ import annotations

from .options import KafkaWireOptionError
from .source import KafkaWireDataSource

__all__ = ["KafkaWireDataSource", "KafkaWireOptionError", "register"]


def register(spark) -> None:
    """Make ``format("kafkawire")`` available in ``spark``."""
    spark.dataSource.register(KafkaWireDataSource)
