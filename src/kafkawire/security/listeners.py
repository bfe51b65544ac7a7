"""Listeners as Kafka configures them, checked before the broker binds anything.

``listeners`` (``NAME://host:port`` entries), ``advertised.listeners``,
``listener.security.protocol.map`` (listener name -> PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL) and
per-listener overrides ``listener.name.<name>.<key>`` (lower-case name) of the ``ssl.*`` and ``sasl.*``
keys. ``controller.listener.names`` entries are skipped (a single kafkawire node has no controller
listener) and ``inter.broker.listener.name`` is ignored (there is no other broker); both are logged.

Fails closed: a listener kafkawire cannot serve exactly as configured (no keystore, a key that does
not load, a mechanism it does not implement, a store type it cannot read) raises :class:`ListenerError`
naming the key, and the broker does not start. Nothing is silently served in plain text.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
from dataclasses import dataclass, field

from .principal import Rule, parse_rules
from .sasl import parse_jaas, plain_users_from_jaas

log = logging.getLogger("kafkawire.security")

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = {p: p for p in PROTOCOLS}
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SASL_MAX_RECEIVE = 524288  # Kafka's sasl.server.max.receive.size default
FAILED_AUTH_DELAY_MS = 100  # Kafka's connection.failed.authentication.delay.ms default

# keys this module reads (alone or after listener.name.<name>.): not "unknown" to the config loader
SSL_KEYS = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "ssl.protocol",
        "ssl.cipher.suites",
        "ssl.principal.mapping.rules",
        "ssl.endpoint.identification.algorithm",
    }
)
SASL_KEYS = frozenset(
    {
        "sasl.enabled.mechanisms",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.server.max.receive.size",
        "connection.failed.authentication.delay.ms",
        "connections.max.reauth.ms",
        "kafkawire.sasl.plain.users",
        "sasl.oauthbearer.jwks.endpoint.url",
        "sasl.oauthbearer.expected.issuer",
        "sasl.oauthbearer.expected.audience",
        "sasl.oauthbearer.clock.skew.seconds",
        "sasl.oauthbearer.sub.claim.name",
        "sasl.oauthbearer.scope.claim.name",
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "sasl.oauthbearer.allow.unverified.audience",
    }
)
OTHER_KEYS = frozenset(
    {
        "listener.security.protocol.map",
        "inter.broker.listener.name",
        "controller.listener.names",
        "security.inter.broker.protocol",
    }
)
_JAAS_KEY = re.compile(
    r"^(plain|scram-sha-256|scram-sha-512|oauthbearer|gssapi)\.sasl\.(jaas\.config|"
    r"server\.callback\.handler\.class)$"
)


def is_security_key(key: str) -> bool:
    if key in SSL_KEYS or key in SASL_KEYS or key in OTHER_KEYS:
        return True
    if key.startswith("listener.name."):
        rest = key[len("listener.name.") :].partition(".")[2]
        return rest in SSL_KEYS or rest in SASL_KEYS or bool(_JAAS_KEY.match(rest))
    return False


class ListenerError(ValueError):
    """A listener that cannot be served as configured; the message names the key."""


@dataclass
class Listener:
    name: str
    protocol: str
    host: str
    port: int
    advertised_host: str | None = None
    advertised_port: int | None = None
    ssl_context: ssl.SSLContext | None = None
    client_auth: str = "none"
    principal_rules: list[Rule] = field(default_factory=lambda: [Rule(None)])
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict, repr=False)
    oauth_options: dict = field(default_factory=dict)  # OAuthBearerServer's keyword arguments
    max_receive: int = SASL_MAX_RECEIVE
    failed_auth_delay_ms: int = FAILED_AUTH_DELAY_MS
    reauth_ms: int = 0  # connections.max.reauth.ms: sessions last this long, then re-authenticate (KIP-368)

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")


def _entries(value: str, key: str) -> list[tuple[str, str, int]]:
    out = []
    for raw in (e.strip() for e in value.split(",")):
        if not raw:
            continue
        m = re.fullmatch(r"([A-Za-z0-9_\-]+)://(\[[^\]]*\]|[^:]*):(-?\d+)", raw)
        if not m:
            raise ListenerError(f"{key}: {raw!r} is not NAME://HOST:PORT")
        host = m.group(2)[1:-1] if m.group(2).startswith("[") else m.group(2)
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise ListenerError(f"{key}: port {port} of {raw!r} is not 0-65535")
        out.append((m.group(1).upper(), host, port))
    names = [e[0] for e in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ListenerError(f"{key}: listener name {sorted(dup)[0]} appears twice")
    return out


def protocol_map(props: dict[str, str]) -> dict[str, str]:
    value = props.get("listener.security.protocol.map", "").strip()
    if not value:
        return dict(DEFAULT_PROTOCOL_MAP)
    out = {}
    for raw in (e.strip() for e in value.split(",")):
        if not raw:
            continue
        name, sep, proto = raw.partition(":")
        if not sep or proto.strip().upper() not in PROTOCOLS:
            raise ListenerError(
                f"listener.security.protocol.map: {raw!r} is not NAME:PROTOCOL with PROTOCOL one of "
                f"{', '.join(PROTOCOLS)}"
            )
        out[name.strip().upper()] = proto.strip().upper()
    return out


class _Lookup:
    """A key's value for one listener: ``listener.name.<name>.<key>`` first, then ``<key>``; remembers
    which key supplied it (error messages name that key)."""

    def __init__(self, props: dict[str, str], name: str):
        self.props = props
        self.prefix = f"listener.name.{name.lower()}."

    def key(self, key: str) -> str:
        return self.prefix + key if self.prefix + key in self.props else key

    def get(self, key: str, default: str | None = None) -> str | None:
        value = self.props.get(self.key(key))
        return value.strip() if value is not None and value.strip() != "" else default


def parse_listeners(
    props: dict[str, str],
    primary: tuple[str, int] | None = None,
    primary_advertised: tuple[str | None, int | None] = (None, None),
) -> list[Listener]:
    """Every listener of ``props``, checked and ready to serve (TLS contexts built). ``primary`` is the
    (host, port) the command line chose for the listener ``pick_listener`` picks (``--listen``); without
    ``listeners`` there is one PLAINTEXT listener there."""
    value = props.get("listeners", "").strip()
    if not value:
        host, port = primary if primary is not None else ("127.0.0.1", 9092)
        entries = [("PLAINTEXT", host, port)]
    else:
        entries = _entries(value, "listeners")
    # the listener the command line's --listen/--advertised apply to: as config.pick_listener chooses it
    names = [n for n, _, _ in entries]
    primary_name = "PLAINTEXT" if "PLAINTEXT" in names else next((n for n in names if n != "CONTROLLER"), "")
    pmap = protocol_map(props)
    controllers = {n.strip().upper() for n in props.get("controller.listener.names", "").split(",") if n.strip()}
    if props.get("inter.broker.listener.name"):
        log.info("inter.broker.listener.name is ignored: a single kafkawire node has no other broker to talk to")
    advertised = {}
    if props.get("advertised.listeners", "").strip():
        advertised = {n: (h, p) for n, h, p in _entries(props["advertised.listeners"], "advertised.listeners")}
    listeners = []
    for name, host, port in entries:
        if name in controllers or (name == "CONTROLLER" and name not in pmap):
            log.info("listener %s is a controller listener: not served (kafkawire is its own controller)", name)
            continue
        protocol = pmap.get(name)
        if protocol is None:
            raise ListenerError(
                f"listener.security.protocol.map: no security protocol for listener {name} (of listeners)"
            )
        if name == primary_name and primary is not None:
            host, port = primary
        listener = Listener(name, protocol, host, port)
        if name in advertised:
            listener.advertised_host, listener.advertised_port = advertised[name]
        if name == primary_name and primary_advertised != (None, None):
            listener.advertised_host, listener.advertised_port = primary_advertised
        look = _Lookup(props, name)
        if listener.tls:
            listener.ssl_context, listener.client_auth = build_ssl_context(look)
        if listener.tls or props.get(look.key("ssl.principal.mapping.rules")):
            try:
                listener.principal_rules = parse_rules(
                    look.get("ssl.principal.mapping.rules", "DEFAULT") or "", look.key("ssl.principal.mapping.rules")
                )
            except ValueError as exc:
                raise ListenerError(str(exc)) from None
        if listener.sasl:
            _configure_sasl(listener, look)
        listeners.append(listener)
    if not listeners:
        raise ListenerError("listeners: no listener kafkawire can serve (only controller listeners)")
    return listeners


def _int(look: _Lookup, key: str, default: int) -> int:
    value = look.get(key)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ListenerError(f"{look.key(key)}: {value!r} is not an integer") from None


def _configure_sasl(listener: Listener, look: _Lookup) -> None:
    key = look.key("sasl.enabled.mechanisms")
    # Kafka's default is GSSAPI (Kerberos), which kafkawire does not implement: no silent substitute
    mechanisms = [
        m.strip().upper() for m in (look.get("sasl.enabled.mechanisms", "GSSAPI") or "").split(",") if m.strip()
    ]
    if not mechanisms:
        raise ListenerError(f"{key}: empty for SASL listener {listener.name}")
    for m in mechanisms:
        if m not in SUPPORTED_MECHANISMS:
            default = "" if look.get("sasl.enabled.mechanisms") else " (Kafka's default)"
            raise ListenerError(
                f"{key}: mechanism {m}{default} of listener {listener.name} is not supported by "
                f"kafkawire (it has {', '.join(SUPPORTED_MECHANISMS)})"
            )
    listener.mechanisms = tuple(mechanisms)
    listener.max_receive = _int(look, "sasl.server.max.receive.size", SASL_MAX_RECEIVE)
    listener.failed_auth_delay_ms = _int(look, "connection.failed.authentication.delay.ms", FAILED_AUTH_DELAY_MS)
    listener.reauth_ms = _int(look, "connections.max.reauth.ms", 0)
    if listener.reauth_ms < 0:
        raise ListenerError(f"{look.key('connections.max.reauth.ms')}: must be 0 (off) or more")
    if "OAUTHBEARER" in mechanisms:
        _configure_oauthbearer(listener, look)
    if "PLAIN" in mechanisms:
        users: dict[str, str] = {}
        jaas_key = f"listener.name.{listener.name.lower()}.plain.sasl.jaas.config"
        jaas = look.props.get(jaas_key, "").strip()
        if jaas:
            try:
                module, options = parse_jaas(jaas, jaas_key)
            except ValueError as exc:
                raise ListenerError(str(exc)) from None
            if not module.endswith("PlainLoginModule"):
                raise ListenerError(
                    f"{jaas_key}: {module} is not PLAIN's login module "
                    "(org.apache.kafka.common.security.plain.PlainLoginModule)"
                )
            users.update(plain_users_from_jaas(options))
        simple = look.get("kafkawire.sasl.plain.users")
        if simple:
            for entry in (e.strip() for e in simple.split(",")):
                user, sep, password = entry.partition(":")
                if not sep or not user or not password:
                    raise ListenerError(f"{look.key('kafkawire.sasl.plain.users')}: entries are user:password")
                users[user] = password
        if not users:
            raise ListenerError(
                f"{jaas_key}: PLAIN is enabled on listener {listener.name} but no user is "
                'configured (user_<name>="<password>" options, or kafkawire.sasl.plain.users)'
            )
        listener.plain_users = users


# Kafka's validator of signed tokens, under its current and its former package
JWKS_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)


def _configure_oauthbearer(listener: Listener, look: _Lookup) -> None:
    """Verified tokens when the listener names Kafka's validator (its callback handler class) with a JWKS URL;
    else Kafka's unsecured development tokens. A JWKS URL without the validator class (Kafka would ignore the
    URL and accept unsecured tokens: surely not what was meant), another handler class, or a key set that
    cannot be read refuses to start."""
    name = listener.name.lower()
    handler_key = f"listener.name.{name}.oauthbearer.sasl.server.callback.handler.class"
    handler = look.props.get(handler_key, "").strip()
    jwks_url = look.get("sasl.oauthbearer.jwks.endpoint.url")
    if handler and handler not in JWKS_HANDLERS:
        raise ListenerError(f"{handler_key}: {handler} is not implemented by kafkawire (it has {JWKS_HANDLERS[0]})")
    if handler and not jwks_url:
        raise ListenerError(f"{look.key('sasl.oauthbearer.jwks.endpoint.url')}: {handler} needs the JWKS URL")
    if jwks_url and not handler:
        raise ListenerError(
            f"{look.key('sasl.oauthbearer.jwks.endpoint.url')}: set {handler_key}={JWKS_HANDLERS[0]} to verify "
            "tokens with these keys (without it Kafka accepts unsecured tokens)"
        )
    if jwks_url:
        _configure_jwks(listener, look, jwks_url)
        return
    jaas_key = f"listener.name.{name}.oauthbearer.sasl.jaas.config"
    options: dict[str, str] = {}
    if look.props.get(jaas_key, "").strip():
        try:
            module, options = parse_jaas(look.props[jaas_key].strip(), jaas_key)
        except ValueError as exc:
            raise ListenerError(str(exc)) from None
        if not module.endswith("OAuthBearerLoginModule"):
            raise ListenerError(
                f"{jaas_key}: {module} is not OAUTHBEARER's login module "
                "(org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule)"
            )
    try:
        skew = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0"))
    except ValueError:
        raise ListenerError(f"{jaas_key}: unsecuredValidatorAllowableClockSkewMs is not an integer") from None
    listener.oauth_options = {
        "principal_claim": options.get("unsecuredValidatorPrincipalClaimName", "sub"),
        "required_scope": tuple(
            s.strip() for s in options.get("unsecuredValidatorRequiredScope", "").split(",") if s.strip()
        ),
        "clock_skew_ms": skew,
    }
    log.warning(
        "listener %s accepts unsecured OAUTHBEARER tokens (alg none): anyone can mint one; for development only",
        listener.name,
    )


def _configure_jwks(listener: Listener, look: _Lookup, jwks_url: str) -> None:
    audience = look.get("sasl.oauthbearer.expected.audience")
    unverified = (look.get("sasl.oauthbearer.allow.unverified.audience", "false") or "").lower() == "true"
    if not audience and not unverified:  # as Kafka 4.4, which refuses to start: a token's aud must be checked
        raise ListenerError(
            f"{look.key('sasl.oauthbearer.expected.audience')}: verified OAUTHBEARER tokens need the expected "
            "audience, so that a token's aud claim is checked (or sasl.oauthbearer.allow.unverified.audience=true)"
        )
    try:
        from .oauthbearer import JwksValidator

        validator = JwksValidator(
            jwks_url,
            issuer=look.get("sasl.oauthbearer.expected.issuer"),
            audience=tuple(a.strip() for a in (audience or "").split(",") if a.strip()),
            clock_skew_s=_int(look, "sasl.oauthbearer.clock.skew.seconds", 30),
            principal_claim=look.get("sasl.oauthbearer.sub.claim.name", "sub") or "sub",
            scope_claim=look.get("sasl.oauthbearer.scope.claim.name", "scope") or "scope",
            refresh_ms=_int(look, "sasl.oauthbearer.jwks.endpoint.refresh.ms", 3_600_000),
        )
    except ImportError:
        raise ListenerError(
            f"{look.key('sasl.oauthbearer.jwks.endpoint.url')}: verified tokens need PyJWT "
            "(pip install 'kafkawire[oauth]')"
        ) from None
    except ListenerError:
        raise
    except (OSError, ValueError) as exc:
        raise ListenerError(f"{look.key('sasl.oauthbearer.jwks.endpoint.url')}: {exc}") from None
    listener.oauth_options = {"validator": validator}


# ------------------------------------------------------------------------------------------------ TLS

_PROTOCOL_VERSIONS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1": ssl.TLSVersion.TLSv1,
}


def _read(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ListenerError(f"{key}: cannot read {path}: {exc.strerror or exc}") from None


def _pkcs12(data: bytes, password: str | None, key: str):
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:  # pragma: no cover - a dependency
        raise ListenerError(f"{key}: PKCS12 stores need the 'cryptography' package") from None
    try:
        return pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except (ValueError, TypeError) as exc:
        raise ListenerError(f"{key}: cannot open the PKCS12 store (wrong password or not PKCS12): {exc}") from None


def _load_chain(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes, password: str | None, key: str) -> None:
    import tempfile  # here: only TLS key stores need it, and it is ~1.5 ms of every start with random and shutil

    # load_cert_chain reads files only: a private temporary directory, removed at once
    with tempfile.TemporaryDirectory(prefix="kafkawire-tls-") as tmp:
        os.chmod(tmp, 0o700)
        cert_path, key_path = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        for path, data in ((cert_path, cert_pem), (key_path, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        try:
            ctx.load_cert_chain(cert_path, key_path, password=password)
        except (ssl.SSLError, ValueError) as exc:
            raise ListenerError(
                f"{key}: the certificate and private key do not load ({exc}); check the key "
                "password (ssl.key.password) and that the key matches the certificate"
            ) from None


def build_ssl_context(look: _Lookup) -> tuple[ssl.SSLContext, str]:
    """The server TLS context of one listener, and its ``ssl.client.auth``."""
    from cryptography.hazmat.primitives import serialization

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ks_type_key = look.key("ssl.keystore.type")
    ks_type = (look.get("ssl.keystore.type") or "").upper()
    location = look.get("ssl.keystore.location")
    chain, pem_key = look.get("ssl.keystore.certificate.chain"), look.get("ssl.keystore.key")
    key_password = look.get("ssl.key.password")
    if not ks_type:  # Kafka's default is JKS; a PEM pair given inline implies PEM
        ks_type = "PEM" if chain or pem_key or (location and location.endswith((".pem", ".crt"))) else "JKS"
    if ks_type == "JKS":
        raise ListenerError(
            f"{ks_type_key}: JKS keystores are not supported (Kafka's default type); use PKCS12 "
            "(keytool -importkeystore -deststoretype PKCS12) or PEM"
        )
    if ks_type not in ("PKCS12", "PEM"):
        raise ListenerError(f"{ks_type_key}: {ks_type} is not PKCS12 or PEM")
    if ks_type == "PKCS12":
        if not location:
            raise ListenerError(f"{look.key('ssl.keystore.location')}: the TLS listener needs a keystore")
        password = look.get("ssl.keystore.password")
        priv, cert, extra = _pkcs12(
            _read(location, look.key("ssl.keystore.location")), password, look.key("ssl.keystore.location")
        )
        if priv is None or cert is None:
            raise ListenerError(
                f"{look.key('ssl.keystore.location')}: the PKCS12 store holds no private key with its certificate"
            )
        cert_pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [cert, *(extra or [])])
        key_pem = priv.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        _load_chain(ctx, cert_pem, key_pem, None, look.key("ssl.keystore.location"))
    elif chain or pem_key:
        if not (chain and pem_key):
            missing = "ssl.keystore.key" if chain else "ssl.keystore.certificate.chain"
            raise ListenerError(
                f"{look.key(missing)}: a PEM keystore given inline needs both the key and the certificate chain"
            )
        _load_chain(ctx, chain.encode(), pem_key.encode(), key_password, look.key("ssl.keystore.key"))
    else:
        if not location:
            raise ListenerError(f"{look.key('ssl.keystore.location')}: the TLS listener needs a keystore")
        data = _read(location, look.key("ssl.keystore.location"))
        _load_chain(ctx, data, data, key_password, look.key("ssl.keystore.location"))

    # trust: client certificates are checked against the truststore
    ts_key = look.key("ssl.truststore.location")
    ts_location, ts_inline = look.get("ssl.truststore.location"), look.get("ssl.truststore.certificates")
    ts_type = (
        look.get("ssl.truststore.type")
        or ("PEM" if ts_inline or (ts_location or "").endswith((".pem", ".crt")) else "JKS")
    ).upper()
    cadata = None
    if ts_inline:
        cadata = ts_inline
    elif ts_location:
        if ts_type == "JKS":
            raise ListenerError(
                f"{look.key('ssl.truststore.type')}: JKS truststores are not supported; use PKCS12 or PEM"
            )
        data = _read(ts_location, ts_key)
        if ts_type == "PKCS12":
            from cryptography.hazmat.primitives.serialization import pkcs12

            try:
                store = pkcs12.load_pkcs12(data, (look.get("ssl.truststore.password") or "").encode() or None)
            except (ValueError, TypeError) as exc:
                raise ListenerError(f"{ts_key}: cannot open the PKCS12 truststore: {exc}") from None
            certs = [c.certificate for c in store.additional_certs] + ([store.cert.certificate] if store.cert else [])
            cadata = "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)
        elif ts_type == "PEM":
            cadata = data.decode("ascii", "replace")
        else:
            raise ListenerError(f"{look.key('ssl.truststore.type')}: {ts_type} is not PKCS12 or PEM")
    if cadata is not None:
        try:
            ctx.load_verify_locations(cadata=cadata)
        except ssl.SSLError as exc:
            raise ListenerError(f"{ts_key}: no certificate loads from the truststore: {exc}") from None

    auth_key = look.key("ssl.client.auth")
    client_auth = (look.get("ssl.client.auth") or "none").lower()
    if client_auth not in ("none", "requested", "required"):
        raise ListenerError(f"{auth_key}: {client_auth!r} is not none, requested or required")
    if client_auth != "none" and cadata is None:
        raise ListenerError(
            f"{ts_key}: ssl.client.auth={client_auth} needs a truststore to check client certificates against"
        )
    ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}[
        client_auth
    ]

    proto_key = look.key("ssl.enabled.protocols")
    versions = []
    for v in (p.strip() for p in (look.get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",") if p.strip()):
        if v not in _PROTOCOL_VERSIONS:
            raise ListenerError(f"{proto_key}: unknown protocol {v!r} (TLSv1.2, TLSv1.3)")
        versions.append(_PROTOCOL_VERSIONS[v])
    if not versions:
        raise ListenerError(f"{proto_key}: no protocol enabled")
    try:
        ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    except ValueError as exc:
        raise ListenerError(f"{proto_key}: {exc}") from None
    suites = look.get("ssl.cipher.suites")
    if suites:
        names = [s.strip() for s in suites.split(",") if s.strip()]
        tls12 = [n for n in names if not n.startswith("TLS_AES_") and not n.startswith("TLS_CHACHA20_")]
        try:
            if tls12:
                ctx.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise ListenerError(
                f"{look.key('ssl.cipher.suites')}: none of {tls12} is a cipher suite OpenSSL "
                "knows (OpenSSL names, e.g. ECDHE-RSA-AES128-GCM-SHA256; TLS 1.3 suites "
                "cannot be restricted from Python)"
            ) from None
    return ctx, client_auth
