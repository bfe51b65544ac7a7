"""kafkawire: Apache Kafka wire protocol, broker, client and PySpark data source."""

__version__ = "0.1.0"
