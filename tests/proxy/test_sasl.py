"""SASL through the proxy to a kafkawire SASL_SSL listener: the client authenticates to the upstream through
the proxy (plaintext on the client side, TLS verified against the CA toward the upstream), with
SaslAuthenticate (librdkafka) and with SaslHandshake v0's bare tokens, which the proxy's observer follows
so that the requests after them are paired and reported."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import time

import pytest

from kafkawire.protocol.api_keys import ApiKey
from kafkawire.protocol.messages import MetadataRequest, SaslHandshakeRequest
from kafkawire.protocol.rpc import decode_response, encode_request, request_header
from kafkawire.testing._process import free_port

from .harness import ProxyThread


@pytest.fixture(scope="module")
def sasl_ssl_upstream(tmp_path_factory):
    root = tmp_path_factory.mktemp("sasl-upstream")
    made = subprocess.run(
        [sys.executable, "-m", "kafkawire", "certs", str(root / "certs")], capture_output=True, text=True, timeout=60
    )
    assert made.returncode == 0, made.stderr
    port = free_port()
    props = root / "server.properties"
    props.write_text(
        f"listeners=SASL_SSL://127.0.0.1:{port}\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        "ssl.keystore.type=PKCS12\n"
        f"ssl.keystore.location={root / 'certs' / 'broker.p12'}\n"
        "ssl.keystore.password=kafkawire\n"
        "kafkawire.sasl.plain.users=alice:alice-secret\n"
    )
    log = open(root / "serve.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kafkawire",
            "serve",
            str(props),
            "--storage",
            "memory",
            "--data-dir",
            str(root / "data"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((root / "serve.log").read_text()[-2000:]) from None
                time.sleep(0.1)
        yield f"127.0.0.1:{port}", root / "certs" / "ca.pem"
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


def test_librdkafka_authenticates_through_the_proxy(sasl_ssl_upstream):
    from confluent_kafka import Consumer, Producer, TopicPartition

    address, ca = sasl_ssl_upstream
    sasl = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    with ProxyThread(address, upstream_ssl=ssl.create_default_context(cafile=str(ca))) as proxy:
        producer = Producer({"bootstrap.servers": proxy.bootstrap, **sasl})
        for i in range(5):
            producer.produce("proxy-sasl", f"v{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": "unused", **sasl})
        consumer.assign([TopicPartition("proxy-sasl", 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        consumer.close()
    assert got == [f"v{i}".encode() for i in range(5)]
    r = proxy.reporter
    assert r.named("SaslHandshake") and r.named("SaslAuthenticate")
    assert not [e.errors for e in r.named("SaslAuthenticate") if e.errors]
    assert r.named("Produce") and r.named("Fetch")


def test_a_wrong_password_is_reported(sasl_ssl_upstream):
    from confluent_kafka import Producer

    address, ca = sasl_ssl_upstream
    with ProxyThread(address, upstream_ssl=ssl.create_default_context(cafile=str(ca))) as proxy:
        producer = Producer(
            {
                "bootstrap.servers": proxy.bootstrap,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": "wrong",
            }
        )
        producer.produce("proxy-sasl", b"x")
        deadline = time.monotonic() + 20
        while not proxy.reporter.named("SaslAuthenticate") and time.monotonic() < deadline:
            producer.poll(0.2)
        failed = proxy.reporter.named("SaslAuthenticate")
    assert failed and failed[0].errors == ["error_code=SASL_AUTHENTICATION_FAILED"]


def _read_frame(s: socket.socket) -> bytes:
    size = int.from_bytes(s.recv(4, socket.MSG_WAITALL), "big")
    return s.recv(size, socket.MSG_WAITALL) if size else b""


def test_sasl_handshake_v0_bare_tokens_against_kafkawire(sasl_ssl_upstream):
    address, ca = sasl_ssl_upstream
    token = b"\x00alice\x00alice-secret"
    with ProxyThread(address, upstream_ssl=ssl.create_default_context(cafile=str(ca))) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.proxy.port), timeout=10) as s:
            s.sendall(
                encode_request(
                    request_header(ApiKey.SASL_HANDSHAKE, 0, 1, "old-client"), SaslHandshakeRequest(mechanism="PLAIN")
                )
            )
            handshake = decode_response(_read_frame(s), ApiKey.SASL_HANDSHAKE, 0, framed=False)
            assert handshake.body.error_code == 0
            s.sendall(len(token).to_bytes(4, "big") + token)  # bare, no Kafka header
            assert _read_frame(s) == b""  # PLAIN's empty answer, bare too
            s.sendall(encode_request(request_header(ApiKey.METADATA, 9, 2, "old-client"), MetadataRequest(topics=None)))
            metadata = decode_response(_read_frame(s), ApiKey.METADATA, 9, framed=False)
        exchanges = [(e.api_name, e.correlation_id, e.problem) for e in proxy.reporter.exchanges]
        tokens = proxy.reporter.sasl_tokens
    assert metadata.header.correlation_id == 2
    assert [b.port for b in metadata.body.brokers] == list(proxy.proxy.broker_ports.values())
    assert exchanges == [("SaslHandshake", 1, None), ("Metadata", 2, None)]
    assert tokens == 2


def _console(upstream: str, *extra: str) -> tuple[subprocess.Popen, str]:
    """``kafkawire proxy --ui`` as users run it; the console's base URL."""
    import re

    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkawire", "proxy", "--listen", "127.0.0.1:0", "--upstream", upstream]
        + ["--ui", "127.0.0.1:0", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = [proc.stderr.readline(), proc.stderr.readline()]
    found = re.search(r"console on (http://\S+)", lines[1])
    if not found:
        proc.kill()
        raise AssertionError(f"no console line: {lines!r} {proc.communicate(timeout=10)}")
    return proc, found.group(1)


def _api(base: str, path: str, body: dict | None = None) -> tuple[int, object]:
    import json
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path.lstrip("/"), data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def test_the_console_cluster_view_goes_through_a_sasl_ssl_upstream(sasl_ssl_upstream, tmp_path):
    """Topics, a test record, its records and the groups, through the upstream's TLS (the proxy's --upstream-ca)
    and SASL (--ui-config): the console's client authenticates on its own, as the proxy holds no credentials."""
    address, ca = sasl_ssl_upstream
    config = tmp_path / "console.properties"
    config.write_text("sasl.mechanism=PLAIN\nsasl.username=alice\nsasl.password=alice-secret\n")
    proc, base = _console(address, "--upstream-ca", str(ca), "--ui-config", str(config))
    try:
        status, info = _api(base, "/api/info")
        assert status == 200 and info["security"] == "SASL_SSL"
        status, produced = _api(base, "/api/produce", {"topic": "console-sasl", "value": "through TLS and SASL"})
        assert status == 200, produced
        assert produced["topic"] == "console-sasl" and produced["offset"] >= 0
        status, topics = _api(base, "/api/topics")
        assert status == 200, topics
        (topic,) = [t for t in topics if t["name"] == "console-sasl"]
        assert topic["partitions"][0]["latest"] > produced["offset"]
        status, records = _api(base, f"/api/records?topic=console-sasl&partition=0&offset={produced['offset']}")
        assert status == 200, records
        assert records["records"][0]["value"] == "through TLS and SASL"
        status, groups = _api(base, "/api/groups")
        assert status == 200 and isinstance(groups, list), groups
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_without_credentials_the_console_reports_the_upstream_refusal(sasl_ssl_upstream):
    """No --ui-config: the cluster view answers an error (the upstream wants SASL), never a made-up empty
    cluster."""
    address, ca = sasl_ssl_upstream
    proc, base = _console(address, "--upstream-ca", str(ca))
    try:
        status, body = _api(base, "/api/topics")
        assert status >= 400 and body.get("error"), body
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_a_console_config_that_contradicts_the_upstream_tls_is_refused(sasl_ssl_upstream, tmp_path):
    address, ca = sasl_ssl_upstream
    config = tmp_path / "console.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")
    done = subprocess.run(
        [sys.executable, "-m", "kafkawire", "proxy", "--listen", "127.0.0.1:0", "--upstream", address]
        + ["--upstream-ca", str(ca), "--ui", "127.0.0.1:0", "--ui-config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "security.protocol=SASL_PLAINTEXT" in done.stderr
