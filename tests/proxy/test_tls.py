"""TLS on both sides of the proxy: librdkafka speaks TLS to the proxy (its own certificate), the proxy
speaks TLS to the upstream and verifies it against a CA file. The upstream is kafkawire's broker behind a
small TLS-terminating relay of the test's own, whose address the broker advertises (as a TLS listener
would)."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket
import ssl
import threading
import time

import pytest

from kafkawire.testing._process import free_port

from .harness import ProxyThread


def _certificate(tmp_path):
    """A CA and a server certificate for 127.0.0.1 signed by it, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "proxy test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, cert_path, key_path = tmp_path / "ca.pem", tmp_path / "server.pem", tmp_path / "server.key"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca_path, cert_path, key_path


class TlsTerminator:
    """TLS on ``port``, plaintext to ``target``: a thread with its own loop, stopped by ``close()``."""

    def __init__(self, port: int, target: tuple[str, int], context: ssl.SSLContext):
        self.loop = asyncio.new_event_loop()
        self.handshakes = 0
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", port, ssl=context), self.loop
        ).result(10)
        self.target = target

    async def _handle(self, reader, writer):
        self.handshakes += 1
        ureader, uwriter = await asyncio.open_connection(*self.target)

        async def pipe(r, w):
            try:
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                w.close()

        await asyncio.gather(pipe(reader, uwriter), pipe(ureader, writer))

    def close(self):
        async def stop():
            self.server.close()
            await asyncio.wait_for(self.server.wait_closed(), 5)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


@pytest.fixture
def tls_upstream(tmp_path):
    import kafkawire.testing

    ca, cert, key = _certificate(tmp_path)
    port = free_port()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    with kafkawire.testing.broker(config={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}"}) as broker:
        terminator = TlsTerminator(port, (broker.host, broker.port), server_ctx)
        try:
            yield f"127.0.0.1:{port}", ca, cert, key, terminator
        finally:
            terminator.close()


def test_tls_to_the_upstream_and_to_the_client(tls_upstream):
    from confluent_kafka import Consumer, Producer, TopicPartition

    address, ca, cert, key, terminator = tls_upstream
    upstream_ctx = ssl.create_default_context(cafile=str(ca))
    listen_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    listen_ctx.load_cert_chain(cert, key)
    client_tls = {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
    with ProxyThread(address, upstream_ssl=upstream_ctx, listen_ssl=listen_ctx) as proxy:
        producer = Producer({"bootstrap.servers": proxy.bootstrap, **client_tls})
        for i in range(5):
            producer.produce("proxy-tls", f"v{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": "unused", **client_tls})
        consumer.assign([TopicPartition("proxy-tls", 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        consumer.close()
    assert got == [f"v{i}".encode() for i in range(5)]
    assert terminator.handshakes >= 2  # bootstrap and broker connections both went over TLS
    assert proxy.reporter.named("Produce") and proxy.reporter.named("Fetch")


def test_an_upstream_certificate_that_does_not_verify_is_refused(tls_upstream):
    address, *_ = tls_upstream
    with ProxyThread(address, upstream_ssl=ssl.create_default_context()) as proxy:  # system CAs only
        with socket.create_connection(("127.0.0.1", proxy.proxy.port), timeout=10) as s:
            s.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")  # ApiVersions v0
            assert s.recv(100) == b""  # closed: no upstream to talk to
        notes = " ".join(proxy.reporter.notes)
    assert "cannot reach upstream" in notes and "CERTIFICATE_VERIFY_FAILED" in notes


def test_the_console_cluster_view_uses_the_proxys_upstream_tls(tls_upstream):
    """TLS only (no SASL, no --ui-config): the console's client connects with the proxy's --upstream-ca."""
    from .test_sasl import _api, _console

    address, ca, _cert, _key, terminator = tls_upstream
    proc, base = _console(address, "--upstream-ca", str(ca))
    try:
        status, produced = _api(base, "/api/produce", {"topic": "console-tls", "value": "over TLS"})
        assert status == 200, produced
        status, records = _api(base, f"/api/records?topic=console-tls&partition=0&offset={produced['offset']}")
        assert status == 200 and records["records"][0]["value"] == "over TLS", records
        status, info = _api(base, "/api/info")
        assert info["security"] == "SSL"
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert terminator.handshakes >= 1
