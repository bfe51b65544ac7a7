"""server.properties parsing and broker config resolution."""

from __future__ import annotations

import pytest

from kafkawire.broker.config import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    BrokerConfig,
    ConfigError,
    parse_host_port,
    parse_properties,
    pick_listener,
)


def test_parse_properties_syntax():
    text = (
        "# comment\n"
        "! also a comment\n"
        "a=1\n"
        "b = two words  \n"
        "c: colon\n"
        "d space separated\n"
        "e=line\\\n"
        "   continued\n"
        "f=tab\\tand\\u0041\n"
        "g=\n"
        "  h.i = indented\n"
        "key\\=with\\:escapes=v\n"
    )
    props = parse_properties(text)
    assert props == {
        "a": "1",
        "b": "two words  ",
        "c": "colon",
        "d": "space separated",
        "e": "linecontinued",
        "f": "tab\tandA",
        "g": "",
        "h.i": "indented",
        "key=with:escapes": "v",
    }


def test_listeners_and_host_port():
    assert pick_listener("PLAINTEXT://127.0.0.1:9093") == ("127.0.0.1", 9093)
    assert pick_listener("CONTROLLER://:9094,PLAINTEXT://localhost:9092") == ("localhost", 9092)
    assert pick_listener("PLAINTEXT://:9092") == ("", 9092)
    assert pick_listener("PLAINTEXT://[::1]:9095") == ("::1", 9095)
    assert parse_host_port("0.0.0.0:1234") == ("0.0.0.0", 1234)
    assert parse_host_port(":1234") == ("", 1234)


def test_from_properties():
    cfg = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.2:9999",
            "advertised.listeners": "PLAINTEXT://kafka.example:19999",
            "log.dirs": "/tmp/a,/tmp/b",
            "node.id": "3",
            "num.partitions": "6",
            "default.replication.factor": "1",
            "auto.create.topics.enable": "false",
            "message.max.bytes": "2000000",
            "socket.request.max.bytes": "5000",
            "log.retention.hours": "1",
            "kafkawire.acks.all.fsync": "false",
            "unknown.thing": "x",
            "controller.quorum.voters": "1@localhost:9093",
        }
    )
    assert (cfg.host, cfg.port) == ("127.0.0.2", 9999)
    assert cfg.advertised == ("kafka.example", 19999)
    assert cfg.data_dir == "/tmp/a" and cfg.node_id == 3 and cfg.num_partitions == 6
    assert cfg.auto_create_topics is False and cfg.message_max_bytes == 2000000
    assert cfg.socket_request_max_bytes == 5000 and cfg.acks_all_fsync is False
    assert cfg.unknown_keys == ["unknown.thing"]
    assert cfg.topic_default("retention.ms") == ("3600000", STATIC_BROKER_CONFIG, "log.retention.hours")
    assert cfg.topic_default("segment.bytes") == ("1073741824", DEFAULT_CONFIG, None)
    assert cfg.topic_default("max.message.bytes")[0] == "2000000"


def test_defaults():
    cfg = BrokerConfig.load(None)
    assert (cfg.host, cfg.port, cfg.data_dir) == ("127.0.0.1", 9092, "./kafkawire-data")
    assert cfg.advertised == ("127.0.0.1", 9092)
    assert cfg.broker_value("log.segment.bytes") == ("1073741824", DEFAULT_CONFIG)


def test_invalid_values_are_rejected():
    with pytest.raises(ConfigError):
        BrokerConfig.from_properties({"num.partitions": "many"})
    with pytest.raises(ConfigError):
        BrokerConfig.from_properties({"auto.create.topics.enable": "yes please"})


def test_load_file(tmp_path):
    p = tmp_path / "server.properties"
    p.write_text("node.id=9\nlog.dirs=/var/k\n")
    cfg = BrokerConfig.load(p, port=1234)
    assert cfg.node_id == 9 and cfg.data_dir == "/var/k" and cfg.port == 1234


def test_broker_synonyms_follow_the_unit_family():
    """As Kafka 4.4 lists them (checked with log.retention.minutes=30 in its server.properties): a key and the
    keys of its family below it, each with every layer that sets it and its default; nothing for a null value."""
    cfg = BrokerConfig.from_properties({"log.retention.minutes": "30"})
    assert cfg.broker_synonyms("log.retention.ms") == []
    assert cfg.broker_synonyms("log.retention.minutes") == [
        ("log.retention.minutes", "30", STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", DEFAULT_CONFIG),
    ]
    assert cfg.broker_synonyms("log.retention.hours") == [("log.retention.hours", "168", DEFAULT_CONFIG)]
    cfg.dynamic["log.retention.ms"] = "5"
    assert cfg.broker_synonyms("log.retention.ms") == [
        ("log.retention.ms", "5", DYNAMIC_BROKER_CONFIG),
        ("log.retention.minutes", "30", STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", DEFAULT_CONFIG),
    ]
    assert cfg.broker_synonyms("num.partitions") == [("num.partitions", "1", DEFAULT_CONFIG)]
