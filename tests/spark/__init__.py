"""Tests of kafkawire.spark (PySpark local mode, a real broker, confluent-kafka as the peer)."""
