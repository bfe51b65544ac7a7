"""``kafkawire serve``: run the broker until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
import time

# seconds a stopping broker may wait on anything (connections closing, the appends under way); storage is flushed
# and closed after that, within it or not: SIGTERM to exit takes about this long
STOP_BUDGET_S = 1.5


def configure(parser: argparse.ArgumentParser, name: str = "serve") -> None:
    parser.add_argument(
        "properties",
        nargs="?",
        metavar="PROPERTIES_FILE",
        help="a Kafka server.properties file (listeners, advertised.listeners, log.dirs, node.id, ...)",
    )
    parser.add_argument("--listen", metavar="HOST:PORT", help="address to listen on (default 127.0.0.1:9092)")
    parser.add_argument("--advertised", metavar="HOST:PORT", help="address clients are told to connect to")
    parser.add_argument("--data-dir", metavar="DIR", help="where the logs are kept (default ./kafkawire-data)")
    parser.add_argument("--node-id", type=int, metavar="N", help="this node's id (default 1)")
    parser.add_argument(
        "--storage", choices=("segments", "memory"), help="storage engine: segments on disk (default) or memory"
    )
    parser.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (needs kafkawire[metrics]; off by default)",
    )
    parser.add_argument(
        "--ui",
        metavar="[HOST:]PORT",
        help="serve the web console (live protocol view, topics, records, groups) at http://HOST:PORT/ "
        "(HOST 127.0.0.1 unless given); "
        "needs kafkawire[ui]",
    )
    parser.add_argument(
        "--ui-token",
        metavar="TOKEN",
        help="token the console asks for (default: $KAFKAWIRE_UI_TOKEN); required to bind beyond loopback",
    )
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="set a server.properties key (repeatable)"
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR (default INFO)")


def raise_open_file_limit(log) -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit where allowed; log and return the soft limit."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open file limit from %s to %s: %s", soft, target, exc)
    log.info("open file limit: %s (segment files beyond what it allows are opened and closed as needed)", soft)
    return soft


def build_config(args):
    from kafkawire.broker.config import BrokerConfig, parse_host_port, parse_properties

    props: dict[str, str] = {}
    if args.properties:
        with open(args.properties, encoding="utf-8") as f:
            props = parse_properties(f.read())
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--override expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    cfg = BrokerConfig.from_properties(props)
    if args.listen:
        cfg.host, cfg.port = parse_host_port(args.listen)
    if args.advertised:
        cfg.advertised_host, cfg.advertised_port = parse_host_port(args.advertised)
    if args.data_dir:
        cfg.data_dir = args.data_dir
    if args.node_id is not None:
        cfg.node_id = args.node_id
    if args.storage:
        cfg.storage = args.storage
    if getattr(args, "metrics", None):
        cfg.metrics_listener = parse_host_port(args.metrics, 9404)
    return cfg


def run(args) -> int:
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    log = logging.getLogger("kafkawire.serve")
    started = time.monotonic()
    # No cycle collections while starting: the imports, message classes and logs' state made here are kept
    # for the broker's life, so the ~90 collections a start would run (20-30 ms of its ~230 ms of CPU,
    # bench_startup.py) free almost nothing (~1,700 objects, under 0.5 MiB). Resumed once they are frozen.
    gc.disable()
    try:
        return _run(args, log, started)
    finally:
        gc.enable()


def _run(args, log, started: float) -> int:
    from kafkawire.broker.config import ConfigError
    from kafkawire.broker.server import Broker, install_event_loop_policy

    try:
        cfg = build_config(args)
    except (ConfigError, OSError, ValueError) as exc:
        log.error("%s", exc)
        return 2
    for key in cfg.unknown_keys:
        log.warning("ignoring unknown configuration key %s", key)
    if cfg.metrics_listener is not None:  # asked for metrics: without prometheus-client, do not start at all
        from kafkawire.broker.metrics import MetricsUnavailable, require

        try:
            require()
        except MetricsUnavailable as exc:
            log.error("%s", exc)
            return 2
    ui = None
    if getattr(args, "ui", None):  # checked before anything starts: an open console fails the command
        from kafkawire.ui.options import console_options

        try:
            ui = console_options(args.ui, args.ui_token)
        except ValueError as exc:
            log.error("%s", exc)
            return 2
    raise_open_file_limit(log)
    loop_name = install_event_loop_policy()

    async def main() -> int:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):
                signal.signal(sig, lambda *_: loop.call_soon_threadsafe(stop.set))
        console = None
        try:
            broker = Broker(cfg)
            if ui is not None:
                from kafkawire.ui import broker_tap
                from kafkawire.ui.server import Console
                from kafkawire.ui.tap import Tap

                tap = Tap()
                broker_tap.install(broker, tap)  # the listeners take the wrapped handler at start
            await broker.start()
        except Exception as exc:  # port in use, data directory locked or unreadable, bad configuration
            log.error("cannot start: %s", exc)
            return 1
        if ui is not None:
            host, port = broker.advertised
            console = Console(tap, f"{host}:{port}", token=ui.token, kind="broker")
            try:
                await console.start(ui.host, ui.port)
            except Exception as exc:  # the console's port in use: stop, as for the broker's own
                log.error("cannot start the console: %s", exc)
                await console.close()
                await broker.stop(STOP_BUDGET_S)
                return 1
            log.info("console on %s", console.url)
        scrub = getattr(cfg, "scrub_bytes_per_sec", 0)
        if scrub and hasattr(broker.storage, "start_scrubber"):
            broker.storage.start_scrubber(scrub)  # its own thread; stopped when the storage closes
        props = getattr(cfg, "properties", {}) or {}
        if hasattr(broker.storage, "start_cleaner") and props.get("log.cleaner.enable", "true").strip() != "false":
            # Kafka's log cleaner: compacts topics with cleanup.policy=compact; its own thread, stopped with the storage
            broker.storage.start_cleaner(
                backoff_ms=int(props.get("log.cleaner.backoff.ms", "15000")),
                bytes_per_sec=int(min(float(props.get("log.cleaner.io.max.bytes.per.second", "0")), 2**62)),
                threads=int(props.get("log.cleaner.threads", "1")),
                dedupe_buffer_size=int(props.get("log.cleaner.dedupe.buffer.size", "134217728")),
                load_factor=float(props.get("log.cleaner.io.buffer.load.factor", "0.9")),
            )
        # everything made while starting (codecs, configuration, the logs' state) leaves the collector's
        # generations: a full collection under traffic then does not walk it on the event loop (measured with
        # benchmarks/bench_latency_tail.py --in-process at 2,000 produces/s: gen-2 pauses of 44-268 ms, none after)
        gc.freeze()
        gc.enable()
        log.info("started in %.0f ms (%s event loop)", (time.monotonic() - started) * 1000, loop_name)
        await stop.wait()
        log.info("shutting down")
        if console is not None:
            await console.close()
        await broker.stop(STOP_BUDGET_S)  # its waits bounded by the budget; storage flushed and closed after them
        return 0

    try:
        code = asyncio.run(main())
    except KeyboardInterrupt:
        code = 0
    logging.shutdown()
    return code
