"""The broker's Prometheus endpoint: scraped over HTTP, read with prometheus-client's own parser, and checked
against what the clients did and what storage and the group coordinator hold."""

from __future__ import annotations

import sys
import time
import urllib.error
import urllib.request

import pytest

from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.server import start_in_thread

from .conftest import RawClient
from .helpers import batch, create_topic, fetch_request, produce_request

parser = pytest.importorskip("prometheus_client.parser")
confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "metrics-events"


def scrape(port: int) -> dict:
    """{(sample name, sorted label items): value} of one scrape of /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    out = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))), 0.0)


def series(samples: dict, name: str) -> dict:
    """{labels dict as sorted tuple: value} of every sample called ``name``."""
    return {labels: v for (n, labels), v in samples.items() if n == name}


def wait_until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


@pytest.fixture
def metrics_broker(tmp_path):
    cfg = BrokerConfig(port=0, data_dir=str(tmp_path / "data"), storage="segments")
    cfg.metrics_listener = ("127.0.0.1", 0)
    with start_in_thread(cfg) as b:
        yield b


def test_counters_gauges_and_lag_follow_real_clients(metrics_broker):
    b = metrics_broker
    port = b.broker.metrics.port
    storage = b.broker.storage
    before = scrape(port)

    admin = RawClient(b.address)
    assert create_topic(admin, TOPIC, partitions=2).error_code == 0
    admin.close()

    # librdkafka, acks=all (fsynced): 30 records to partition 0, 12 to partition 1
    producer = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(30):
        producer.produce(TOPIC, b"v%03d" % i, partition=0)
    for i in range(12):
        producer.produce(TOPIC, b"w%03d" % i, partition=1)
    assert producer.flush(30) == 0
    after_produce = scrape(port)
    logs = [storage.partition(TOPIC, p) for p in range(2)]
    stored_bytes = sum(log.size_bytes for log in logs)
    assert [log.log_end_offset for log in logs] == [30, 12]

    def moved(now, name, **labels):
        return value(now, name, **labels) - value(before, name, **labels)

    assert moved(after_produce, "kafka_server_brokertopicmetrics_messagesin_total") == 42
    assert moved(after_produce, "kafka_server_brokertopicmetrics_bytesin_total") == stored_bytes  # as sent
    produce_requests = sum(
        v
        for labels, v in series(after_produce, "kafka_network_requestmetrics_requests_total").items()
        if ("request", "Produce") in labels
    )
    assert produce_requests >= 1
    assert value(after_produce, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produce_requests
    assert moved(after_produce, "kafka_log_logflushstats_logflushrateandtimems_count") >= 1  # acks=all fsyncs

    # per-partition gauges equal storage's offsets, sizes and segment counts
    for p, log in enumerate(logs):
        assert value(after_produce, "kafka_log_log_logendoffset", topic=TOPIC, partition=p) == log.log_end_offset
        assert value(after_produce, "kafka_log_log_logstartoffset", topic=TOPIC, partition=p) == 0
        assert value(after_produce, "kafka_log_log_size", topic=TOPIC, partition=p) == log.size_bytes > 0
        assert value(after_produce, "kafka_log_log_numlogsegments", topic=TOPIC, partition=p) == len(log.segments) == 1

    # a consumer reads everything and commits 20 of partition 0 and all of partition 1
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": "metrics-group",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0), confluent_kafka.TopicPartition(TOPIC, 1, 0)])
    got = 0
    deadline = time.monotonic() + 20
    while got < 42 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    assert got == 42
    consumer.commit(
        offsets=[confluent_kafka.TopicPartition(TOPIC, 0, 20), confluent_kafka.TopicPartition(TOPIC, 1, 12)],
        asynchronous=False,
    )
    consumer.close()
    after_consume = scrape(port)
    assert moved(after_consume, "kafka_server_brokertopicmetrics_bytesout_total") >= stored_bytes
    assert (
        value(
            after_consume,
            "kafka_network_requestmetrics_requests_total",
            request="OffsetCommit",
            version=_version_of(after_consume, "OffsetCommit"),
        )
        >= 1
    )
    lag = dict(consumergroup="metrics-group", topic=TOPIC)
    assert value(after_consume, "kafka_consumergroup_current_offset", partition=0, **lag) == 20
    assert value(after_consume, "kafka_consumergroup_current_offset", partition=1, **lag) == 12
    assert value(after_consume, "kafka_consumergroup_lag", partition=0, **lag) == 10
    assert value(after_consume, "kafka_consumergroup_lag", partition=1, **lag) == 0
    assert value(after_consume, "kafka_consumergroup_lag_sum", **lag) == 10
    assert ("kafka_consumergroup_lag", tuple(sorted({**lag, "partition": "0"}.items()))) not in after_produce

    # more records move the lag with the log end offset
    producer = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for _ in range(5):
        producer.produce(TOPIC, b"x", partition=1)
    assert producer.flush(30) == 0
    later = scrape(port)
    assert value(later, "kafka_consumergroup_lag", partition=1, **lag) == 5
    assert value(later, "kafka_log_log_logendoffset", topic=TOPIC, partition=1) == 17


def _version_of(samples, request: str) -> str:
    versions = [
        dict(labels)["version"]
        for labels in series(samples, "kafka_network_requestmetrics_requests_total")
        if ("request", request) in labels
    ]
    assert len(versions) == 1, versions
    return versions[0]


def test_exact_counts_on_one_raw_connection(metrics_broker):
    """Request, error, byte and connection counters move by exactly what one connection did."""
    b = metrics_broker
    port = b.broker.metrics.port
    setup = RawClient(b.address)
    assert create_topic(setup, "raw-metrics").error_code == 0
    setup.close()
    wait_until(
        lambda: (
            value(
                scrape(port),
                "kafka_server_socket_server_metrics_connection_count",
                listener="PLAINTEXT",
                networkProcessor="0",
            )
            == 0
        )
    )
    before = scrape(port)

    client = RawClient(b.address)
    sent = 0
    received = 0
    records = batch([b"a", b"b", b"c"])
    for _ in range(3):
        req = produce_request("raw-metrics", 0, records)
        frame_len = _frame_len(req, 9)
        cid = client.send(req, 9)
        sent += frame_len
        payload = client.read_frame()
        received += 4 + len(payload)
        assert cid
    bad = produce_request("raw-metrics", 99, records)  # no such partition
    sent += _frame_len(bad, 9)
    client.send(bad, 9)
    received += 4 + len(client.read_frame())
    fetch = fetch_request([("raw-metrics", 0, 0)])
    sent += _frame_len(fetch, 11)
    client.send(fetch, 11)
    fetch_answer = 4 + len(client.read_frame())
    received += fetch_answer
    during = scrape(port)
    client.close()

    def moved(now, name, **labels):
        return value(now, name, **labels) - value(before, name, **labels)

    at = dict(listener="PLAINTEXT", networkProcessor="0")
    assert moved(during, "kafka_network_requestmetrics_requests_total", request="Produce", version=9) == 4
    assert moved(during, "kafka_network_requestmetrics_requests_total", request="Fetch", version=11) == 1
    assert moved(during, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == 4
    assert (
        moved(
            during, "kafka_network_requestmetrics_errors_total", request="Produce", error="UNKNOWN_TOPIC_OR_PARTITION"
        )
        == 1
    )
    assert moved(during, "kafka_server_brokertopicmetrics_messagesin_total") == 9
    assert moved(during, "kafka_server_brokertopicmetrics_bytesin_total") == 3 * len(records)
    assert moved(during, "kafka_server_brokertopicmetrics_bytesout_total") == fetch_answer
    assert moved(during, "kafka_server_socket_server_metrics_incoming_byte_total", **at) == sent
    assert moved(during, "kafka_server_socket_server_metrics_outgoing_byte_total", **at) == received
    assert moved(during, "kafka_server_socket_server_metrics_connection_creation_total", **at) == 1
    assert value(during, "kafka_server_socket_server_metrics_connection_count", **at) == 1
    assert value(during, "kafka_log_log_logendoffset", topic="raw-metrics", partition=0) == 9

    wait_until(
        lambda: (
            value(scrape(port), "kafka_server_socket_server_metrics_connection_close_total", reason="peer", **at)
            == value(before, "kafka_server_socket_server_metrics_connection_close_total", reason="peer", **at) + 1
        )
    )
    closed = scrape(port)
    assert value(closed, "kafka_server_socket_server_metrics_connection_count", **at) == 0

    # a frame above socket.request.max.bytes closes its connection: counted under its own reason
    rogue = RawClient(b.address)
    rogue.send_raw((b.broker.config.socket_request_max_bytes + 1).to_bytes(4, "big"))
    assert rogue.is_closed()
    rogue.close()
    wait_until(
        lambda: (
            value(
                scrape(port),
                "kafka_server_socket_server_metrics_connection_close_total",
                reason="frame_too_large",
                **at,
            )
            == 1
        )
    )


def _frame_len(body, version: int) -> int:
    from kafkawire.protocol import encode_request, request_header

    return len(encode_request(request_header(body.api_key, version, 1, "kafkawire-tests"), body))


def _listening_ports() -> set[int]:
    ports = set()
    for path in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A":  # LISTEN
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except FileNotFoundError:
            pass
    return ports


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/net/tcp")
def test_metrics_off_by_default_listens_on_nothing_more(tmp_path):
    cfg = BrokerConfig(port=0, storage="memory")
    assert cfg.metrics_listener is None
    ours = _listening_ports()
    with start_in_thread(cfg) as b:
        assert b.broker.metrics is None
        new = _listening_ports() - ours
        assert new == {b.port}
    # and on: exactly one more listening port, which answers /metrics
    cfg = BrokerConfig(port=0, storage="memory")
    cfg.metrics_listener = ("127.0.0.1", 0)
    ours = _listening_ports()
    with start_in_thread(cfg) as b:
        new = _listening_ports() - ours
        assert new == {b.port, b.broker.metrics.port}
        assert "kafka_network_requestmetrics_requests" in {
            f.name
            for f in parser.text_string_to_metric_families(
                urllib.request.urlopen(f"http://127.0.0.1:{b.broker.metrics.port}/metrics", timeout=10).read().decode()
            )
        }
        metrics_port = b.broker.metrics.port
    with pytest.raises(urllib.error.URLError):  # stopped with the broker
        urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2)


def test_memory_engine_gauges(tmp_path):
    cfg = BrokerConfig(port=0, storage="memory")
    cfg.metrics_listener = ("127.0.0.1", 0)
    with start_in_thread(cfg) as b:
        client = RawClient(b.address)
        assert create_topic(client, "mem-metrics", partitions=3).error_code == 0
        assert (
            client.call(produce_request("mem-metrics", 2, batch([b"1", b"2"])), 9)
            .responses[0]
            .partition_responses[0]
            .error_code
            == 0
        )
        client.close()
        now = scrape(b.broker.metrics.port)
        ends = {
            dict(labels)["partition"]: v
            for labels, v in series(now, "kafka_log_log_logendoffset").items()
            if ("topic", "mem-metrics") in labels
        }
        assert ends == {"0": 0, "1": 0, "2": 2}
        assert (
            value(now, "kafka_log_log_size", topic="mem-metrics", partition=2)
            == b.broker.storage.partition("mem-metrics", 2).size_bytes
            > 0
        )


def test_properties_key():
    cfg = BrokerConfig.from_properties({"kafkawire.metrics.listener": "127.0.0.1:9404"})
    assert cfg.metrics_listener == ("127.0.0.1", 9404)
    assert not cfg.unknown_keys
    assert BrokerConfig.from_properties({}).metrics_listener is None


def test_fails_closed_without_prometheus_client(monkeypatch, tmp_path, caplog):
    from kafkawire.broker.metrics import MetricsUnavailable
    from kafkawire.cli.main import main

    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import fails as if not installed
    cfg = BrokerConfig(port=0, storage="memory")
    cfg.metrics_listener = ("127.0.0.1", 0)
    with pytest.raises(MetricsUnavailable, match=r"kafkawire\[metrics\]"):
        start_in_thread(cfg)
    code = main(
        [
            "serve",
            "--metrics",
            "127.0.0.1:0",
            "--listen",
            "127.0.0.1:0",
            "--storage",
            "memory",
            "--data-dir",
            str(tmp_path),
        ]
    )
    assert code == 2
    assert "prometheus-client" in caplog.text
