"""A client's security configuration, read from Kafka's client property names.

``ClientSecurity.from_config(props)`` takes the keys the Java client and librdkafka take, so that a
``client.properties`` file written for Kafka's tools (``--command-config``) or a confluent-kafka dict works
as it is:

* ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL;
* TLS: the CA as ``ssl.ca.location`` (PEM) or ``ssl.truststore.location`` (PEM or PKCS12, with
  ``ssl.truststore.type`` and ``ssl.truststore.password``; JKS is refused); a client certificate as
  ``ssl.certificate.location`` + ``ssl.key.location`` (+ ``ssl.key.password``), or ``ssl.keystore.location``
  (PKCS12 or PEM, ``ssl.keystore.password``, ``ssl.key.password``); ``ssl.endpoint.identification.algorithm``
  ``https`` (default: the broker's certificate must name the host) or empty/``none``;
* SASL: ``sasl.mechanism`` (Java, default GSSAPI, which kafkawire does not have) or ``sasl.mechanisms``
  (librdkafka, default GSSAPI); the user as ``sasl.username``/``sasl.password``, or in
  ``sasl.jaas.config`` (``username="..." password="..."`` of PlainLoginModule or ScramLoginModule);
  OAUTHBEARER's token from ``oauth_cb`` (a callable returning (token, expiry in epoch seconds), as
  confluent-kafka's), or Kafka's unsecured development token: ``sasl.jaas.config`` with
  OAuthBearerLoginModule's ``unsecuredLoginStringClaim_sub`` (and ``unsecuredLoginListClaim_scope``), or
  librdkafka's ``enable.sasl.oauthbearer.unsecure.jwt=true`` with ``sasl.oauthbearer.config``
  (``principal=... scope=...``).

Anything unreadable raises ``ValueError`` naming the key, before any connection is made. Keys that are not
about security are ignored here (the caller reads them).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .sasl import parse_jaas
from .sasl_client import (
    OAuthBearerClient,
    PlainClient,
    SaslClient,
    ScramClient,
    TokenProvider,
    unsecured_token,
)
from .scram import MECHANISMS as SCRAM_MECHANISMS

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


@dataclass
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    check_hostname: bool = True
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    token_provider: TokenProvider | None = field(default=None, repr=False)

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def sasl_client(self) -> SaslClient:
        """A fresh exchange of the configured mechanism (one per login, re-authentication included)."""
        mech = self.mechanism
        if mech == "PLAIN":
            return PlainClient(self.username or "", self.password or "")
        if mech in SCRAM_MECHANISMS:
            return ScramClient(mech, self.username or "", self.password or "")
        if mech == "OAUTHBEARER":
            assert self.token_provider is not None  # from_config refuses OAUTHBEARER without one
            token, _expiry = self.token_provider()
            return OAuthBearerClient(token)
        raise ValueError(f"sasl.mechanism: {mech} is not supported")

    @classmethod
    def from_config(cls, props: Mapping[str, object] | None) -> ClientSecurity:
        props = dict(props or {})
        protocol = str(props.get("security.protocol", "PLAINTEXT")).upper()
        if protocol not in PROTOCOLS:
            raise ValueError(f"security.protocol: {protocol!r} is not one of {', '.join(PROTOCOLS)}")
        out = cls(protocol=protocol)
        if out.tls:
            out.ssl_context, out.check_hostname = _tls_context(props)
        if out.sasl:
            _read_sasl(out, props)
        return out


def _text(props: Mapping[str, object], key: str) -> str | None:
    value = props.get(key)
    if value is None or value == "":
        return None
    return str(value)


def _tls_context(props: Mapping[str, object]) -> tuple[ssl.SSLContext, bool]:
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ca = _text(props, "ssl.ca.location")
    truststore = _text(props, "ssl.truststore.location")
    try:
        if ca:
            ctx.load_verify_locations(cafile=ca)
        elif truststore:
            store_type = (_text(props, "ssl.truststore.type") or _guess_type(truststore)).upper()
            if store_type == "PEM":
                ctx.load_verify_locations(cafile=truststore)
            elif store_type == "PKCS12":
                ctx.load_verify_locations(cadata=_pkcs12_certificates(truststore, props, "ssl.truststore"))
            else:
                raise ValueError(f"ssl.truststore.type: {store_type} is not supported (PEM or PKCS12; convert JKS)")
    except (OSError, ssl.SSLError) as exc:
        key = "ssl.ca.location" if ca else "ssl.truststore.location"
        raise ValueError(f"{key}: cannot read {ca or truststore}: {exc}") from None
    _load_client_certificate(ctx, props)
    algorithm = (_text(props, "ssl.endpoint.identification.algorithm") or "https").lower()
    if algorithm not in ("https", "none"):
        raise ValueError(f"ssl.endpoint.identification.algorithm: {algorithm!r} is not https or none")
    check_hostname = algorithm == "https" and str(props.get("ssl.endpoint.identification.algorithm", "https")) != ""
    ctx.check_hostname = check_hostname
    return ctx, check_hostname


def _guess_type(path: str) -> str:
    return "PKCS12" if path.lower().endswith((".p12", ".pfx")) else "PEM"


def _pkcs12_certificates(path: str, props: Mapping[str, object], prefix: str) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    password = _text(props, f"{prefix}.password")
    try:
        with open(path, "rb") as f:
            store = pkcs12.load_pkcs12(f.read(), password.encode() if password else None)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{prefix}.location: cannot read the PKCS12 store {path}: {exc}") from None
    certs = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certs.append(store.cert.certificate)
    if not certs:
        raise ValueError(f"{prefix}.location: {path} holds no certificate")
    return "".join(c.public_bytes(Encoding.PEM).decode() for c in certs)


def _load_client_certificate(ctx: ssl.SSLContext, props: Mapping[str, object]) -> None:
    cert = _text(props, "ssl.certificate.location")
    key = _text(props, "ssl.key.location")
    key_password = _text(props, "ssl.key.password")
    keystore = _text(props, "ssl.keystore.location")
    if cert or key:
        if not (cert and key) and not (cert and not key and _pem_has_key(cert)):
            raise ValueError("ssl.certificate.location and ssl.key.location go together")
        try:
            ctx.load_cert_chain(cert, key, password=key_password)  # type: ignore[arg-type]
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"ssl.key.location: cannot load {cert} with {key}: {exc}") from None
    elif keystore:
        store_type = (_text(props, "ssl.keystore.type") or _guess_type(keystore)).upper()
        if store_type == "PEM":
            try:
                ctx.load_cert_chain(keystore, password=key_password)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"ssl.keystore.location: cannot load {keystore}: {exc}") from None
        elif store_type == "PKCS12":
            _load_pkcs12_keystore(ctx, keystore, props)
        else:
            raise ValueError(f"ssl.keystore.type: {store_type} is not supported (PEM or PKCS12; convert JKS)")


def _pem_has_key(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return b"PRIVATE KEY-----" in f.read()
    except OSError:
        return False


def _load_pkcs12_keystore(ctx: ssl.SSLContext, path: str, props: Mapping[str, object]) -> None:
    """The standard library loads PEM only: the key and chain go through a private temporary file (0600,
    removed at once) in PEM form."""
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12

    password = _text(props, "ssl.keystore.password")
    try:
        with open(path, "rb") as f:
            store = pkcs12.load_pkcs12(f.read(), password.encode() if password else None)
    except (OSError, ValueError) as exc:
        raise ValueError(f"ssl.keystore.location: cannot read the PKCS12 store {path}: {exc}") from None
    if store.key is None or store.cert is None:
        raise ValueError(f"ssl.keystore.location: {path} holds no key and certificate")
    pem = store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    pem += store.cert.certificate.public_bytes(Encoding.PEM)
    for extra in store.additional_certs:
        pem += extra.certificate.public_bytes(Encoding.PEM)
    fd, tmp = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(tmp)
    finally:
        os.unlink(tmp)


def _read_sasl(out: ClientSecurity, props: Mapping[str, object]) -> None:
    mech = (_text(props, "sasl.mechanism") or _text(props, "sasl.mechanisms") or "GSSAPI").upper()
    key = "sasl.mechanism" if "sasl.mechanism" in props else "sasl.mechanisms"
    if mech not in MECHANISMS:
        raise ValueError(f"{key}: {mech} is not supported by kafkawire's client ({', '.join(MECHANISMS)})")
    out.mechanism = mech
    jaas: dict[str, str] = {}
    jaas_text = _text(props, "sasl.jaas.config")
    if jaas_text:
        _module, jaas = parse_jaas(jaas_text, "sasl.jaas.config")
    if mech == "OAUTHBEARER":
        out.token_provider = _token_provider(props, jaas)
        return
    out.username = _text(props, "sasl.username") or jaas.get("username")
    out.password = _text(props, "sasl.password") or jaas.get("password")
    if not out.username or out.password is None:
        raise ValueError(f"{mech} needs sasl.username and sasl.password (or them in sasl.jaas.config)")


def _token_provider(props: Mapping[str, object], jaas: dict[str, str]) -> TokenProvider:
    provider = props.get("oauth_cb")
    if provider is not None:
        if not callable(provider):
            raise ValueError("oauth_cb: not a callable returning (token, expiry)")
        return _wrap_provider(provider, _text(props, "sasl.oauthbearer.config"))
    if "unsecuredLoginStringClaim_sub" in jaas:
        principal = jaas["unsecuredLoginStringClaim_sub"]
        scope = tuple(jaas.get("unsecuredLoginListClaim_scope", "").replace(",", " ").split())
        lifetime = float(jaas.get("unsecuredLoginLifetimeSeconds", "3600"))
        return lambda: unsecured_token(principal, scope=scope, lifetime_s=lifetime)
    if str(props.get("enable.sasl.oauthbearer.unsecure.jwt", "false")).lower() == "true":
        options = dict(kv.split("=", 1) for kv in (_text(props, "sasl.oauthbearer.config") or "").split() if "=" in kv)
        principal = options.get("principal")
        if not principal:
            raise ValueError("sasl.oauthbearer.config: principal=<name> is needed for an unsecured token")
        scope = tuple(options.get("scope", "").replace(",", " ").split())
        lifetime = float(options.get("lifeSeconds", "3600"))
        return lambda: unsecured_token(principal, scope=scope, lifetime_s=lifetime)
    raise ValueError(
        "OAUTHBEARER needs oauth_cb (a token provider), or an unsecured token: sasl.jaas.config with "
        "unsecuredLoginStringClaim_sub, or enable.sasl.oauthbearer.unsecure.jwt=true with sasl.oauthbearer.config"
    )


def _wrap_provider(provider: Callable, config: str | None) -> TokenProvider:
    """confluent-kafka calls oauth_cb with sasl.oauthbearer.config; a provider without a parameter is called
    with nothing."""

    def get() -> tuple[str, float]:
        result = provider(config) if _takes_argument(provider) else provider()
        token, expiry = result[0], float(result[1])
        return str(token), expiry

    return get


def _takes_argument(fn: Callable) -> bool:
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


SECURITY_KEY_PREFIXES = ("security.", "ssl.", "sasl.", "enable.sasl.", "oauth_cb")


def is_security_key(key: str) -> bool:
    """Whether a client property is one of those read here (the CLI and Spark pass these through)."""
    return key.startswith(SECURITY_KEY_PREFIXES)
