"""Client sub-commands of ``kafkawire``: produce, consume, topics, apis.

    kafkawire produce TOPIC [--key-separator SEP] < lines
    kafkawire consume TOPIC [--from-beginning] [--partition N] [--offset N] [--max-messages N] [--timeout S]
    kafkawire consume TOPIC[,TOPIC...] --group G [--group-protocol classic|consumer] [--assignor NAME]
    kafkawire consume --include REGEX --group G
    kafkawire topics list | create NAME [--partitions N] | delete NAME... | describe [NAME...]
    kafkawire apis

All take ``--bootstrap HOST:PORT[,HOST:PORT...]`` (default 127.0.0.1:9092), and TLS/SASL settings with
Kafka's client property names: ``--command-config FILE`` (a ``client.properties`` file, as Kafka's tools
take it) and ``-X KEY=VALUE`` (as kcat; repeatable, after the file).
Broker errors print as ``error: NAME (code): message`` and exit with 1.
"""

from __future__ import annotations

import argparse
import sys
import time

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def configure(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument(
        "--bootstrap",
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"broker(s) to bootstrap from (default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--command-config",
        "--command.config",
        metavar="FILE",
        help="client properties (security.protocol, ssl.*, sasl.*), as Kafka's tools read them",
    )
    parser.add_argument(
        "-X",
        dest="client_properties",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a client property (repeatable; overrides --command-config)",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds to wait for a broker's response (default 30)",
    )
    if name == "produce":
        parser.add_argument("topic")
        parser.add_argument(
            "--key-separator",
            metavar="SEP",
            help="each line is KEY SEP VALUE (split at the first SEP); default: no key",
        )
        parser.add_argument("--partition", type=int, help="produce to this partition (default: by key / sticky)")
        parser.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
        parser.add_argument("--acks", default="all", choices=["0", "1", "all", "-1"])
        parser.add_argument(
            "--header",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="add this header to every record (repeatable)",
        )
        parser.add_argument("--linger-ms", type=float, default=5.0)
        parser.add_argument("--no-idempotence", action="store_true", help="disable the idempotent producer")
        parser.add_argument(
            "--verbose", "-v", action="store_true", help="print partition@offset of each record to stderr"
        )
    elif name == "consume":
        parser.add_argument("topic", nargs="?", help="the topic (with --group: a comma list of topics)")
        parser.add_argument(
            "--from-beginning",
            action="store_true",
            help="start at the earliest offset (default: only new records); with --group: "
            "where a partition without a committed offset starts",
        )
        parser.add_argument(
            "--group",
            metavar="G",
            help="consume as a member of consumer group G: the group assigns partitions, "
            "offsets are committed (auto-commit, and on exit)",
        )
        parser.add_argument("--include", metavar="REGEX", help="with --group: every topic whose name matches")
        parser.add_argument(
            "--group-protocol",
            default="classic",
            choices=["classic", "consumer"],
            help="classic (JoinGroup/SyncGroup) or consumer (KIP-848) (default: classic)",
        )
        parser.add_argument(
            "--assignor",
            action="append",
            metavar="NAME",
            help="classic protocol: range, roundrobin or cooperative-sticky (repeatable, in order "
            "of preference; default: range, cooperative-sticky); consumer protocol: the "
            "broker's assignor, uniform or range",
        )
        parser.add_argument("--group-instance-id", metavar="ID", help="static membership (group.instance.id)")
        parser.add_argument(
            "--consumer-property",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a consumer option by its Java name, e.g. session.timeout.ms=10000 (repeatable)",
        )
        parser.add_argument(
            "--partition", type=int, action="append", help="consume only this partition (repeatable; default: all)"
        )
        parser.add_argument("--offset", help="start offset: a number, 'earliest' or 'latest' (needs --partition)")
        parser.add_argument("--max-messages", type=int, help="exit after this many records")
        parser.add_argument(
            "--timeout", type=float, help="exit when no record arrives for this many seconds (default: wait forever)"
        )
        parser.add_argument("--print-key", action="store_true", help="print KEY SEP VALUE")
        parser.add_argument("--print-offset", action="store_true", help="prefix partition:offset SEP")
        parser.add_argument("--print-headers", action="store_true", help="print headers as k=v,k=v SEP")
        parser.add_argument("--key-separator", default="\t", metavar="SEP", help="separator (default: tab)")
        parser.add_argument(
            "--isolation-level", default="read_uncommitted", choices=["read_uncommitted", "read_committed"]
        )
        parser.add_argument(
            "--verbose", "-v", action="store_true", help="with --group: print each assignment change to stderr"
        )
    elif name == "topics":
        parser.add_argument("action", choices=["list", "create", "alter", "delete", "describe"])
        parser.add_argument("names", nargs="*", metavar="TOPIC")
        parser.add_argument(
            "--partitions", type=int, default=-1, help="create: partitions (default: broker's); alter: the new total"
        )
        parser.add_argument(
            "--replication-factor", type=int, default=-1, help="create: replication factor (default: broker's)"
        )
        parser.add_argument(
            "--config", action="append", default=[], metavar="KEY=VALUE", help="create: a topic config (repeatable)"
        )
        parser.add_argument("--if-not-exists", action="store_true", help="create: an existing topic is not an error")
        parser.add_argument("--if-exists", action="store_true", help="delete: a missing topic is not an error")
        parser.add_argument("--include-internal", action="store_true", help="list: internal topics too")
    elif name == "apis":
        parser.add_argument(
            "--bootstrap-only",
            action="store_true",
            help="ask only the bootstrap broker (default: every broker in the metadata)",
        )
    else:
        raise ValueError(f"unknown client command {name!r}")


def run(args: argparse.Namespace) -> int:
    from ..protocol import KafkaError

    handler = {"produce": _produce, "consume": _consume, "topics": _topics, "apis": _apis}[args.command]
    try:
        args.security = client_security(args)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return handler(args)
    except KafkaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (OSError, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def client_security(args):
    """The ``ClientSecurity`` of ``--command-config`` and ``-X`` (``ValueError`` naming a bad key). Properties
    that are not about security are reported and ignored: these commands have their own options."""
    from ..broker.config import parse_properties
    from ..security.client import ClientSecurity, is_security_key

    props: dict[str, str] = {}
    if args.command_config:
        with open(args.command_config, encoding="utf-8") as f:
            props.update(parse_properties(f.read()))
    props.update(_pairs(args.client_properties, "-X"))
    ignored = sorted(k for k in props if not is_security_key(k) and k != "bootstrap.servers")
    if ignored:
        print(f"warning: client properties ignored (not security settings): {', '.join(ignored)}", file=sys.stderr)
    if "bootstrap.servers" in props and args.bootstrap == DEFAULT_BOOTSTRAP:
        args.bootstrap = props["bootstrap.servers"]
    return ClientSecurity.from_config({k: v for k, v in props.items() if is_security_key(k)})


def _pairs(items: list[str], what: str) -> list[tuple[str, str]]:
    out = []
    for item in items:
        k, sep, v = item.partition("=")
        if not sep:
            raise SystemExit(f"error: {what} {item!r} is not KEY=VALUE")
        out.append((k, v))
    return out


# -- produce --------------------------------------------------------------------


def _produce(args) -> int:
    from ..client import Producer

    headers = [(k, v.encode()) for k, v in _pairs(args.header, "--header")] or None
    sep = args.key_separator.encode() if args.key_separator else None
    errors: list[BaseException] = []
    count = 0

    def report(meta, err):
        if err is not None:
            errors.append(err)
        elif args.verbose:
            print(f"{meta.topic}-{meta.partition}@{meta.offset}", file=sys.stderr)

    with Producer(
        args.bootstrap,
        security=args.security,
        acks=args.acks,
        compression=args.compression,
        linger_ms=args.linger_ms,
        enable_idempotence=not args.no_idempotence and args.acks in ("all", "-1"),
        request_timeout=args.request_timeout,
    ) as producer:
        for line in sys.stdin.buffer:
            line = line.rstrip(b"\n")
            if line.endswith(b"\r"):
                line = line[:-1]
            key = None
            if sep is not None:
                key, found, value = line.partition(sep)
                if not found:
                    key, value = None, line
            else:
                value = line
            producer.produce(args.topic, value, key, partition=args.partition, headers=headers, on_delivery=report)
            count += 1
            if errors:
                break
        producer.flush()
    if errors:
        print(f"error: {errors[0]}", file=sys.stderr)
        return 1
    return 0


# -- consume --------------------------------------------------------------------


def _consume(args) -> int:
    from ..client import Admin, Consumer

    if args.group is not None or args.include is not None:
        return _consume_group(args)
    if args.topic is None:
        print("error: name a topic (or --group G with --include REGEX)", file=sys.stderr)
        return 2
    if args.offset is not None and not args.partition:
        print("error: --offset needs --partition", file=sys.stderr)
        return 2
    with Admin(args.bootstrap, request_timeout=args.request_timeout, security=args.security) as admin:
        info = admin.describe_topics([args.topic])[args.topic]
    partitions = args.partition or sorted(info.partitions)
    missing = [p for p in partitions if p not in info.partitions]
    if missing:
        print(f"error: {args.topic} has no partition {missing[0]}", file=sys.stderr)
        return 1
    if args.offset is not None:
        start = int(args.offset) if args.offset.lstrip("-").isdigit() else args.offset
    else:
        start = "earliest" if args.from_beginning else "latest"
    out = sys.stdout.buffer
    sep = args.key_separator.encode()
    seen = 0
    with Consumer(
        args.bootstrap,
        security=args.security,
        isolation_level=args.isolation_level,
        request_timeout=args.request_timeout,
        fetch_max_wait_ms=200,
    ) as consumer:
        consumer.assign([(args.topic, p) for p in partitions], offset=start)
        last = time.monotonic()
        while args.max_messages is None or seen < args.max_messages:
            wait = 1.0 if args.timeout is None else max(0.0, min(1.0, args.timeout - (time.monotonic() - last)))
            records = consumer.poll(wait)
            if not records:
                if args.timeout is not None and time.monotonic() - last >= args.timeout:
                    break
                continue
            last = time.monotonic()
            for r in records:
                parts = []
                if args.print_offset:
                    parts.append(f"{r.partition}:{r.offset}".encode())
                if args.print_headers:
                    parts.append(b",".join(k.encode() + b"=" + (v if v is not None else b"") for k, v in r.headers))
                if args.print_key:
                    parts.append(r.key if r.key is not None else b"null")
                parts.append(r.value if r.value is not None else b"null")
                out.write(sep.join(parts) + b"\n")
                seen += 1
                if args.max_messages is not None and seen >= args.max_messages:
                    break
            out.flush()
    print(f"Processed a total of {seen} messages", file=sys.stderr)
    return 0


def _write_records(args, records, out) -> None:
    sep = args.key_separator.encode()
    for r in records:
        parts = []
        if args.print_offset:
            parts.append(f"{r.partition}:{r.offset}".encode())
        if args.print_headers:
            parts.append(b",".join(k.encode() + b"=" + (v if v is not None else b"") for k, v in r.headers))
        if args.print_key:
            parts.append(r.key if r.key is not None else b"null")
        parts.append(r.value if r.value is not None else b"null")
        out.write(sep.join(parts) + b"\n")
    out.flush()


def _property(value: str):
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    return int(value) if value.lstrip("-").isdigit() else value


def _consume_group(args) -> int:
    """``--group``: a group member (kafkawire.client.groups) until --max-messages, --timeout or a signal."""
    import signal

    from ..client import Consumer

    if args.group is None:
        print("error: --include needs --group", file=sys.stderr)
        return 2
    if args.partition or args.offset is not None:
        print("error: --partition and --offset do not go with --group (the group assigns partitions)", file=sys.stderr)
        return 2
    if (args.topic is None) == (args.include is None):
        print("error: with --group name topics or --include REGEX (one of them)", file=sys.stderr)
        return 2
    options = {
        k.replace(".", "_").replace("-", "_"): _property(v)
        for k, v in _pairs(args.consumer_property, "--consumer-property")
    }
    options.setdefault("auto_offset_reset", "earliest" if args.from_beginning else "latest")
    if args.assignor:
        if args.group_protocol == "classic":
            options["partition_assignment_strategy"] = args.assignor
        else:
            options["group_remote_assignor"] = args.assignor[0]

    def say(what):
        def report(tps):
            if args.verbose:
                text = ",".join(f"{t}-{p}" for t, p in tps)
                print(f"{what}: {text}", file=sys.stderr, flush=True)

        return report

    out = sys.stdout.buffer
    seen = 0
    try:
        consumer = Consumer(
            args.bootstrap,
            security=args.security,
            group_id=args.group,
            group_protocol=args.group_protocol,
            group_instance_id=args.group_instance_id,
            isolation_level=args.isolation_level,
            request_timeout=args.request_timeout,
            fetch_max_wait_ms=200,
            **options,
        )
    except (TypeError, ValueError) as exc:  # an unknown --consumer-property or a bad value
        print(f"error: {exc}", file=sys.stderr)
        return 2

    # SIGTERM leaves the group as Ctrl-C does (commit, revoke, LeaveGroup), instead of dying in place
    def terminate(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    with consumer:
        if args.include is not None:
            consumer.subscribe(
                pattern=args.include,
                on_partitions_assigned=say("assigned"),
                on_partitions_revoked=say("revoked"),
                on_partitions_lost=say("lost"),
            )
        else:
            consumer.subscribe(
                [t for t in args.topic.split(",") if t],
                on_partitions_assigned=say("assigned"),
                on_partitions_revoked=say("revoked"),
                on_partitions_lost=say("lost"),
            )
        last = time.monotonic()
        try:
            while args.max_messages is None or seen < args.max_messages:
                wait = 1.0 if args.timeout is None else max(0.0, min(1.0, args.timeout - (time.monotonic() - last)))
                left = None if args.max_messages is None else args.max_messages - seen
                records = consumer.poll(wait, max_records=left)  # what is not returned is not committed
                if not records:
                    if args.timeout is not None and time.monotonic() - last >= args.timeout:
                        break
                    continue
                last = time.monotonic()
                _write_records(args, records, out)
                seen += len(records)
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    print(f"Processed a total of {seen} messages", file=sys.stderr)
    return 0


# -- topics ---------------------------------------------------------------------


def _topics(args) -> int:
    from ..client import Admin, NewTopic

    with Admin(args.bootstrap, request_timeout=args.request_timeout, security=args.security) as admin:
        if args.action == "list":
            for name in admin.list_topics(include_internal=args.include_internal):
                print(name)
            return 0
        if args.action in ("create", "alter", "delete") and not args.names:
            print(f"error: topics {args.action} needs at least one TOPIC", file=sys.stderr)
            return 2
        if args.action == "create":
            configs = dict(_pairs(args.config, "--config"))
            results = admin.create_topics(
                [NewTopic(n, args.partitions, args.replication_factor, configs) for n in args.names], raise_errors=False
            )
            return _report(results, "Created topic", ok_codes=(36,) if args.if_not_exists else ())
        if args.action == "alter":  # kafka-topics --alter --partitions: more partitions, asked of the controller
            if args.partitions < 1:
                print("error: topics alter needs --partitions N (the new total)", file=sys.stderr)
                return 2
            results = admin.create_partitions({n: args.partitions for n in args.names}, raise_errors=False)
            return _report(results, "Altered topic")
        if args.action == "delete":
            results = admin.delete_topics(args.names, raise_errors=False)
            return _report(results, "Deleted topic", ok_codes=(3,) if args.if_exists else ())
        # describe
        topics = admin.describe_topics(args.names or None)
        for name, t in topics.items():
            if t.is_internal and not args.names and not args.include_internal:
                continue
            print(
                f"Topic: {name}\tTopicId: {t.topic_id}\tPartitionCount: {t.num_partitions}\t"
                f"ReplicationFactor: {len(next(iter(t.partitions.values())).replicas) if t.partitions else 0}"
            )
            for p in sorted(t.partitions.values(), key=lambda p: p.partition):
                print(
                    f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {p.leader}\t"
                    f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
                )
        return 0


def _report(results: dict, verb: str, ok_codes=()) -> int:
    status = 0
    for name, err in results.items():
        if err is None:
            print(f"{verb} {name}.")
        elif err.code in ok_codes:
            print(f"{name}: {err.name} (ignored)")
        else:
            print(f"error: {name}: {err}", file=sys.stderr)
            status = 1
    return status


# -- apis -----------------------------------------------------------------------


def _apis(args) -> int:
    from ..client import Admin
    from ..protocol import all_apis
    from ..protocol.negotiation import supported_ranges

    ours = supported_ranges()
    known = all_apis()
    with Admin(args.bootstrap, request_timeout=args.request_timeout, security=args.security) as admin:
        cluster = admin.cluster

        async def gather():
            await cluster.refresh()
            nodes = [None] if args.bootstrap_only or not cluster.brokers else sorted(cluster.brokers)
            out = []
            for node in nodes:
                conn = await (cluster.connection(node) if node is not None else cluster.any_connection())
                out.append((conn, dict(conn.broker_versions)))
            return out

        answers = admin._run(gather())
    for conn, versions in answers:
        node = conn.node_id if conn.node_id is not None else "bootstrap"
        rack = cluster.brokers[conn.node_id].rack if conn.node_id in cluster.brokers else None
        print(f"{conn.host}:{conn.port} (id: {node} rack: {rack if rack is not None else 'null'}) -> (")
        lines = []
        for key in sorted(versions):
            lo, hi = versions[key]
            info = known.get(key)
            name = info.name if info else "UNKNOWN"
            if key in ours:
                usable = min(hi, ours[key][1]) if max(lo, ours[key][0]) <= min(hi, ours[key][1]) else None
                note = f"[usable: {usable}]" if usable is not None else "[unusable: no common version]"
            else:
                note = "[unusable: unknown to kafkawire]"
            lines.append(f"\t{name}({key}): {lo} to {hi} {note}")
        print(",\n".join(lines))
        print(")")
    return 0
