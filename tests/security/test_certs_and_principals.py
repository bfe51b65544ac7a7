"""``kafkawire certs`` and the principal of a TLS client (``ssl.principal.mapping.rules``)."""

from __future__ import annotations

import ipaddress
import subprocess
import sys

import pytest

from kafkawire.security.principal import apply_rules, parse_rules, subject_name


def test_certs_command_makes_a_ca_broker_and_client_that_fit_together(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import pkcs12

    out = subprocess.run(
        [sys.executable, "-m", "kafkawire", "certs", str(tmp_path / "c"), "--host", "broker.test"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    d = tmp_path / "c"
    for name in ("ca.pem", "broker.pem", "broker.p12", "client.pem", "client.p12", "truststore.p12"):
        assert (d / name).is_file()
    broker = x509.load_pem_x509_certificate((d / "broker-cert.pem").read_bytes())
    sans = broker.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert "broker.test" in sans.get_values_for_type(x509.DNSName)
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    ca = x509.load_pem_x509_certificate((d / "ca.pem").read_bytes())
    broker.verify_directly_issued_by(ca)
    key, cert, _ = pkcs12.load_key_and_certificates((d / "client.p12").read_bytes(), b"kafkawire")
    assert cert.subject.rfc4514_string().startswith("CN=client")
    assert (d / "broker-key.pem").stat().st_mode & 0o077 == 0  # private keys readable by their owner only


@pytest.mark.parametrize(
    "rules, name, principal",
    [
        ("DEFAULT", "CN=client,O=kafkawire development", "CN=client,O=kafkawire development"),
        ("RULE:^CN=(.*?),O=(.*)$/$1@$2/L,DEFAULT", "CN=Client,O=Dev", "client@dev"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=kafka,OU=ServiceUsers,O=x", "kafka"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=other,O=x", "CN=other,O=x"),
        ("RULE:^cn=(.*)$/$1/U", "cn=shout", "SHOUT"),
    ],
)
def test_principal_mapping_rules(rules, name, principal):
    assert apply_rules(parse_rules(rules), name) == principal


def test_a_name_no_rule_maps_is_refused():
    with pytest.raises(ValueError, match="no ssl.principal.mapping.rules rule applies"):
        apply_rules(parse_rules("RULE:^CN=admin$/admin/"), "CN=someone")


@pytest.mark.parametrize("bad", ["RULE:^CN=(.*)$", "RULE:(/x/", "NOPE"])
def test_malformed_rules_name_the_key(bad):
    with pytest.raises(ValueError, match=r"^ssl\.principal\.mapping\.rules: "):
        parse_rules(bad)


def test_subject_of_a_peer_certificate_reads_as_rfc_2253():
    cert = {"subject": ((("organizationName", "kafkawire, dev"),), (("commonName", "client"),))}
    assert subject_name(cert) == "CN=client,O=kafkawire\\, dev"
