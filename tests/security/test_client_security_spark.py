"""The Spark data source over SASL_SSL: ``kafka.``-prefixed security options (Spark's convention) reach kafkawire's
client. A kafkawire broker with a SASL_SSL listener (SCRAM-SHA-256, a PKCS12 truststore on the client side); Spark
writes rows to a topic and reads them back; a wrong password fails the write with the broker's refusal."""

from __future__ import annotations

import os
import socket
import sys
import uuid

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def secured(certs, tmp_path_factory):
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    from kafkawire.broker.config import BrokerConfig
    from kafkawire.broker.server import start_in_thread

    plain, port = _free_port(), _free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{port}"
    cfg = BrokerConfig.from_properties(
        {
            "listeners": listeners,
            "advertised.listeners": listeners,
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(certs / "broker.p12"),
            "ssl.keystore.password": "kafkawire",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
        }
    )
    cfg.data_dir = str(tmp_path_factory.mktemp("kafkawire-spark-sasl"))
    broker = start_in_thread(cfg)
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
        upsert = UserScramCredentialUpsertion(
            "spark", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"s3cret"
        )
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(30)
        yield f"127.0.0.1:{port}"
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafkawire.spark import register

    session = (
        SparkSession.builder.master("local[1]")
        .appName("kafkawire-security-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


def _options(bootstrap: str, certs, password: str = "s3cret") -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.jaas.config": (
            f'org.apache.kafka.common.security.scram.ScramLoginModule required username="spark" password="{password}";'
        ),
        "kafka.ssl.truststore.location": str(certs / "truststore.p12"),
        "kafka.ssl.truststore.password": "kafkawire",
    }


def test_spark_writes_and_reads_over_sasl_ssl(spark, secured, certs):
    topic = f"spark-sasl-{uuid.uuid4().hex[:8]}"
    rows = [(f"k{i}", f"v{i}") for i in range(5)]
    df = spark.createDataFrame(rows, ["key", "value"])
    df.write.mode("append").format("kafkawire").options(**_options(secured, certs)).option("topic", topic).save()
    read = (
        spark.read.format("kafkawire")
        .options(**_options(secured, certs))
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(value AS STRING) AS v")
        .collect()
    )
    assert sorted(r.v for r in read) == [v for _, v in rows]


def test_spark_with_a_wrong_password_fails_with_the_brokers_refusal(spark, secured, certs):
    df = spark.createDataFrame([("k", "v")], ["key", "value"])
    with pytest.raises(Exception) as info:
        df.write.mode("append").format("kafkawire").options(**_options(secured, certs, "wrong")).option(
            "topic", "never-written"
        ).save()
    assert "SASL_AUTHENTICATION_FAILED" in str(info.value) or "invalid credentials" in str(info.value)
