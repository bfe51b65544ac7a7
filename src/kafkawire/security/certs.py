"""A throwaway certificate authority with broker and client certificates, for local development and
tests only (``kafkawire certs DIR``). Keys are fresh EC P-256 keys; nothing here is fit for production.

Written to DIR::

    ca.pem, ca-key.pem              the CA (trust it in clients: ssl.ca.location / ssl.truststore.*)
    broker.pem                      the broker's key and certificate in one file (ssl.keystore.type=PEM)
    broker-cert.pem, broker-key.pem the same, apart (for tools that want them separately)
    broker.p12                      the same as PKCS12 (ssl.keystore.type=PKCS12)
    client.pem, client-cert.pem, client-key.pem, client.p12   a client certificate (CN=client)
    truststore.p12                  the CA as a Java truststore (ssl.truststore.type=PKCS12)

The PKCS12 stores use ``password`` (default ``kafkawire``); the PEM keys are not encrypted. The broker's
certificate names ``localhost``, ``127.0.0.1`` and ``::1`` (and any ``--host`` given).
"""

from __future__ import annotations

import datetime
import ipaddress
import os

DEFAULT_PASSWORD = "kafkawire"


def _write(path: str, data: bytes, private: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def create(
    directory: str,
    *,
    password: str = DEFAULT_PASSWORD,
    hosts: tuple[str, ...] = (),
    client_cn: str = "client",
    days: int = 365,
) -> dict[str, str]:
    """Make the files above in ``directory`` (created if missing); returns name -> path."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    os.makedirs(directory, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=days)

    def name(cn: str) -> x509.Name:
        return x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafkawire development"),
                x509.NameAttribute(NameOID.COMMON_NAME, cn),
            ]
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("kafkawire development CA"))
        .issuer_name(name("kafkawire development CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
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

    def leaf(cn: str, usage, sans):
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(until)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    sans: list[x509.GeneralName] = [x509.DNSName("localhost")]
    for host in ("127.0.0.1", "::1", *hosts):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    pem = serialization.Encoding.PEM
    plain_key = (pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    enc = serialization.BestAvailableEncryption(password.encode())
    out = {}

    def put(filename: str, data: bytes, private: bool = False) -> None:
        path = os.path.join(directory, filename)
        _write(path, data, private)
        out[filename] = path

    put("ca.pem", ca.public_bytes(pem))
    put("ca-key.pem", ca_key.private_bytes(*plain_key), private=True)
    for who, (key, cert) in (
        ("broker", leaf("localhost", ExtendedKeyUsageOID.SERVER_AUTH, sans)),
        ("client", leaf(client_cn, ExtendedKeyUsageOID.CLIENT_AUTH, [])),
    ):
        key_pem, cert_pem = key.private_bytes(*plain_key), cert.public_bytes(pem)
        put(f"{who}-key.pem", key_pem, private=True)
        put(f"{who}-cert.pem", cert_pem)
        put(f"{who}.pem", key_pem + cert_pem + ca.public_bytes(pem), private=True)
        put(f"{who}.p12", pkcs12.serialize_key_and_certificates(who.encode(), key, cert, [ca], enc), private=True)
    put("truststore.p12", pkcs12.serialize_java_truststore([pkcs12.PKCS12Certificate(ca, b"kafkawire-ca")], enc))
    return out
