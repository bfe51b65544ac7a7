"""``kafkawire proxy``: a transparent Kafka-protocol proxy that prints what passes.

Clients bootstrap against ``--listen``; the proxy connects each of their connections to the upstream
cluster and rewrites the broker addresses in Metadata, FindCoordinator, DescribeCluster and the KIP-951
node endpoints of Produce, Fetch, ShareFetch and ShareAcknowledge, so that the clients' connections to
every broker go through it too (one local port per upstream node id). Every other frame is forwarded as
the same bytes.

One line per request/response pair on stdout (time, connection, client id, API and version, correlation
id, latency, sizes, topics, every non-zero error code); ``--json`` for JSON lines, ``--annotate`` for
every field of both frames; ``--api``, ``--client-id``, ``--topic``, ``--errors-only`` choose the lines
(the summary and ``--pcap`` take every exchange). ``--pcap FILE`` writes the client-side conversations
as pcapng. A large streamed response (a Fetch) is skimmed for its error codes rather than decoded whole,
unless ``--annotate``, ``--decode-all`` or a browser watching ``--ui`` needs its fields. ``--ui-config FILE``
gives the console's cluster view its SASL credentials toward the upstream (TLS follows ``--upstream-*``).
SIGINT or SIGTERM stops it and prints the summary on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import ssl
import sys

_DESCRIPTION_PORT_HELP = "node id N listens on BASE+N (default: a free port per node)"


def configure(parser: argparse.ArgumentParser, name: str = "proxy") -> None:
    parser.add_argument(
        "--listen",
        default="127.0.0.1:19092",
        metavar="HOST:PORT",
        help="where clients bootstrap (default 127.0.0.1:19092; port 0 picks one)",
    )
    parser.add_argument(
        "--upstream", required=True, metavar="HOST:PORT[,HOST:PORT...]", help="the upstream cluster's bootstrap servers"
    )
    parser.add_argument("--advertise", metavar="HOST", help="host name given to clients (default: the listen host)")
    parser.add_argument("--broker-ports", type=int, metavar="BASE", help=_DESCRIPTION_PORT_HELP)
    parser.add_argument(
        "--max-frame", type=int, metavar="BYTES", help="largest frame accepted either way (default 128 MiB)"
    )
    parser.add_argument("--max-connections", type=int, metavar="N", help="client connections at once (default 4096)")
    tls = parser.add_argument_group("TLS")
    tls.add_argument("--upstream-tls", action="store_true", help="connect to the upstream with TLS")
    tls.add_argument("--upstream-ca", metavar="FILE", help="CA certificates for the upstream (default: the system's)")
    tls.add_argument("--upstream-cert", metavar="FILE", help="client certificate (PEM) for the upstream")
    tls.add_argument("--upstream-key", metavar="FILE", help="its private key (default: in --upstream-cert)")
    tls.add_argument(
        "--upstream-insecure",
        action="store_true",
        help="do not verify the upstream's certificate or host name (debugging only)",
    )
    tls.add_argument("--tls-cert", metavar="FILE", help="serve clients with TLS, with this certificate (PEM)")
    tls.add_argument("--tls-key", metavar="FILE", help="its private key (default: in --tls-cert)")
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="one JSON object per exchange")
    out.add_argument("--annotate", action="store_true", help="every field of both frames, as `decode` prints them")
    out.add_argument(
        "--api", action="append", default=[], metavar="NAME|KEY[,...]", help="only these APIs (repeatable)"
    )
    out.add_argument("--client-id", action="append", default=[], metavar="GLOB", help="only these client ids")
    out.add_argument("--topic", action="append", default=[], metavar="GLOB", help="only exchanges naming a topic")
    out.add_argument(
        "--errors-only",
        action="store_true",
        help="only responses with a non-zero error code (or frames that did not decode)",
    )
    out.add_argument("--quiet", action="store_true", help="no lines, the summary only")
    out.add_argument(
        "--decode-all",
        action="store_true",
        help="decode every response whole; by default a large response that is streamed (a Fetch) is skimmed: "
        "its error codes read as it passes, its records never gathered (--annotate decodes all anyway)",
    )
    out.add_argument("--pcap", metavar="FILE", help="write the client-side conversations to FILE (pcapng)")
    ui = parser.add_argument_group("console")
    ui.add_argument(
        "--ui",
        metavar="[HOST:]PORT",
        help="serve the web console (live protocol view, the upstream's topics and groups) at http://HOST:PORT/ "
        "(HOST 127.0.0.1 unless given); "
        "needs kafkawire[ui]",
    )
    ui.add_argument(
        "--ui-config",
        metavar="FILE",
        help="client properties (sasl.*, ssl.*, security.protocol) with which the console's cluster view connects "
        "to the upstream; TLS is the proxy's --upstream-* settings unless the file has ssl.* keys",
    )
    ui.add_argument(
        "--ui-token",
        metavar="TOKEN",
        help="token the console asks for (default: $KAFKAWIRE_UI_TOKEN); required to bind beyond loopback",
    )


def _contexts(args):
    upstream = None
    if args.upstream_tls or args.upstream_ca or args.upstream_cert:
        upstream = ssl.create_default_context(cafile=args.upstream_ca)
        if args.upstream_insecure:
            upstream.check_hostname = False
            upstream.verify_mode = ssl.CERT_NONE
        if args.upstream_cert:
            upstream.load_cert_chain(args.upstream_cert, args.upstream_key)
    listen = None
    if args.tls_cert:
        listen = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        listen.load_cert_chain(args.tls_cert, args.tls_key)
    return upstream, listen


def console_security(args, upstream_ssl: ssl.SSLContext | None):
    """The ``ClientSecurity`` of the console's cluster view: SASL from ``--ui-config`` (the proxy relays its
    clients' own SASL exchanges and holds no credentials), TLS as the proxy connects to the upstream. Raises
    ValueError naming the setting that does not fit."""
    from kafkawire.broker.config import parse_properties
    from kafkawire.security.client import ClientSecurity, is_security_key

    props: dict[str, str] = {}
    if args.ui_config:
        with open(args.ui_config, encoding="utf-8") as f:
            props = {k: v for k, v in parse_properties(f.read()).items() if is_security_key(k)}
    given = props.get("security.protocol", "").upper()
    sasl = given.startswith("SASL_") or any(k.startswith("sasl.") for k in props)
    tls = upstream_ssl is not None
    protocol = ("SASL_" if sasl else "") + ("SSL" if tls else "PLAINTEXT")
    if given and given != protocol:
        raise ValueError(
            f"--ui-config: security.protocol={given}, but the proxy connects to the upstream "
            + ("with TLS (--upstream-tls)" if tls else "without TLS")
        )
    own_tls = any(k.startswith("ssl.") for k in props)
    security = ClientSecurity.from_config({**props, "security.protocol": protocol})
    if tls and not own_tls:
        security.ssl_context = upstream_ssl
        security.check_hostname = upstream_ssl.check_hostname  # type: ignore[union-attr]
    return security


def run(args) -> int:
    from kafkawire.proxy import Filters, PcapngWriter, ProxyConfig, Reporter, parse_address
    from kafkawire.proxy.relay import DEFAULT_MAX_FRAME, MAX_CONNECTIONS

    try:
        host, port = parse_address(args.listen, 19092)
        upstreams = [parse_address(u) for u in args.upstream.split(",") if u.strip()]
        upstream_ssl, listen_ssl = _contexts(args)
    except (ValueError, OSError, ssl.SSLError) as exc:
        print(f"kafkawire proxy: {exc}", file=sys.stderr)
        return 2
    apis_wanted = {a.strip().lower() for item in args.api for a in item.split(",") if a.strip()}
    filters = Filters(apis_wanted, args.client_id, args.topic, args.errors_only)
    reporter = Reporter(
        sys.stdout, fmt="json" if args.json else "text", annotate=args.annotate, filters=filters, quiet=args.quiet
    )
    config = ProxyConfig(
        host,
        port,
        upstreams,
        args.advertise,
        args.broker_ports,
        upstream_ssl,
        listen_ssl,
        args.max_frame or DEFAULT_MAX_FRAME,
        args.max_connections or MAX_CONNECTIONS,
        skim=not args.decode_all,
    )
    ui = security = None
    if args.ui:
        from kafkawire.ui.options import console_options

        try:
            ui = console_options(args.ui, args.ui_token)
            security = console_security(args, upstream_ssl)
        except (ValueError, OSError) as exc:
            print(f"kafkawire proxy: {exc}", file=sys.stderr)
            return 2
    pcap_file = None
    try:
        if args.pcap:
            pcap_file = open(args.pcap, "wb")
        pcap = PcapngWriter(pcap_file.write) if pcap_file is not None else None
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            return runner.run(_serve(config, reporter, pcap, ui, security))
    except OSError as exc:
        print(f"kafkawire proxy: {exc}", file=sys.stderr)
        return 2
    finally:
        if pcap_file is not None:
            pcap_file.close()
        print(reporter.summary(), file=sys.stderr, flush=True)


def _loop_factory():
    """uvloop's loop when installed (a dependency on POSIX, as for the broker): its streams cost less per
    byte relayed."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def _serve(config, reporter, pcap, ui=None, security=None) -> int:
    from kafkawire.proxy import Proxy

    proxy = Proxy(config, reporter, pcap)
    await proxy.start()
    console = None
    if ui is not None:
        from kafkawire.ui.server import Console
        from kafkawire.ui.tap import Tap

        proxy.tap = Tap()
        ups = ",".join(f"{h}:{p}" for h, p in config.upstreams)
        console = Console(proxy.tap, ups, token=ui.token, kind="proxy", security=security)
        try:
            await console.start(ui.host, ui.port)
        except (OSError, ValueError):
            await proxy.close()
            raise
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    ups = ",".join(f"{h}:{p}" for h, p in config.upstreams)
    print(
        f"kafkawire proxy: listening on {config.listen_host}:{proxy.port}, upstream {ups}"
        + (" (TLS)" if config.upstream_ssl else "")
        + f"; {type(loop).__module__.split('.')[0]} event loop",
        file=sys.stderr,
        flush=True,
    )
    if console is not None:  # after the line above, which scripts read for the port
        print(f"kafkawire proxy: console on {console.url}", file=sys.stderr, flush=True)
    try:
        await stop.wait()
    finally:
        if console is not None:
            await console.close()
        await proxy.close()
    return 0
