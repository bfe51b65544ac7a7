#!/usr/bin/env python3
"""What TLS and SASL cost: produce and consume throughput over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-256),
on kafkawire and on the reference Kafka 4.4 in the same run, with the same ``server.properties``; then TLS
handshakes per second on each SSL listener.

Each target is one process with three listeners; librdkafka (confluent-kafka) in this process produces
``--records`` records of ``--size`` bytes to a fresh one-partition topic per listener (acks=all, linger.ms=5,
from the first send to the last delivery report), then reads them back with an assigned consumer (offset 0 to
the last record). Handshakes: one client at a time, for ``--seconds``, each a new TCP connection, a full TLS
handshake (no session resumption) and a close, done with the standard library's ``ssl``. Targets run one
after the other, never together; the machine's cores and load are printed with the results.

Usage: python benchmarks/bench_security.py [--quick] [--records N] [--size B] [--repeat N] [--seconds S]
           [--targets kafkawire,kafka]
"""

from __future__ import annotations

import argparse
import os
import socket
import ssl
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
SCRAM = ("bench", "bench-secret")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def properties(certs: Path, ports: dict[str, int], controller_port: int) -> dict[str, str]:
    listeners = ",".join(f"{n}://127.0.0.1:{ports[n]}" for n in LISTENERS)
    return {
        "listeners": f"{listeners},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": listeners,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(certs / "broker.p12"),
        "ssl.keystore.password": "kafkawire",
        "ssl.key.password": "kafkawire",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    }


def client_conf(certs: Path, ports: dict[str, int], listener: str) -> dict:
    conf = {"bootstrap.servers": f"127.0.0.1:{ports[listener]}", "security.protocol": listener}
    if listener != "PLAINTEXT":
        conf["ssl.ca.location"] = str(certs / "ca.pem")
    if listener == "SASL_SSL":
        conf.update({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": SCRAM[0], "sasl.password": SCRAM[1]})
    return conf


def create_user(ports: dict[str, int]) -> None:
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
    upsert = UserScramCredentialUpsertion(
        SCRAM[0], ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), SCRAM[1].encode()
    )
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(30)


def wait_ready(conf: dict, timeout: float = 60.0) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(conf)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=2)
            return
        except Exception:
            time.sleep(0.5)
    raise RuntimeError(f"{conf['bootstrap.servers']} ({conf['security.protocol']}) never answered")


def produce(conf: dict, topic: str, records: int, size: int) -> float:
    from confluent_kafka import Producer

    p = Producer({**conf, "linger.ms": 5, "batch.size": 1_000_000, "acks": "all", "enable.idempotence": False})
    value = os.urandom(size)
    p.produce(topic, value, partition=0)  # creates the topic; not timed
    p.flush(30)
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(120) != 0:
        raise RuntimeError("records left undelivered")
    return records / (time.perf_counter() - started)


def consume(conf: dict, topic: str, records: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**conf, "group.id": "bench-" + topic, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 1)])  # after the untimed first record
    got = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < records and time.monotonic() < deadline:
        for m in c.consume(1000, 1.0):
            if not m.error():
                got += 1
    elapsed = time.perf_counter() - started
    c.close()
    if got < records:
        raise RuntimeError(f"read {got} of {records}")
    return records / elapsed


def kafkawire_client_produce(conf: dict, topic: str, records: int, size: int) -> float:
    """kafkawire's own client (the same security settings, Kafka's names): produce_many in chunks, acks=all."""
    from kafkawire.client import Producer

    security = {k: v for k, v in conf.items() if k != "bootstrap.servers"}
    value = os.urandom(size)
    with Producer(conf["bootstrap.servers"], security=security, linger_ms=5, enable_idempotence=False) as p:
        p.produce(topic, value, partition=0).result(30)  # creates the topic and connects; not timed
        started = time.perf_counter()
        chunk = 1000
        groups = []
        for i in range(0, records, chunk):
            n = min(chunk, records - i)
            groups.append(p.produce_many(topic, [value] * n, partitions=[0] * n))
        p.flush()
        for group in groups:
            group.result(120)
            group.raise_first()
        return records / (time.perf_counter() - started)


def handshakes(certs: Path, port: int, seconds: float) -> float:
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    done = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        with socket.create_connection(("127.0.0.1", port)) as raw, ctx.wrap_socket(raw, server_hostname="127.0.0.1"):
            done += 1
    return done / (time.perf_counter() - started)


def start_kafkawire(props: dict, port: int, workdir: Path):
    """``kafkawire serve`` through the project's launcher (kafkawire.testing's BrokerProcess: ready once its
    PLAINTEXT listener answers ApiVersions, stopped with SIGTERM)."""
    from kafkawire.testing._process import BrokerProcess

    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "kafkawire.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    argv = [sys.executable, "-m", "kafkawire", "serve", str(path), "--data-dir", str(workdir / "kafkawire-data")]
    argv += ["--storage", "memory", "--log-level", "WARNING"]
    return BrokerProcess(lambda _bootstrap: argv, workdir / "kafkawire.log", port=port).start()


def run_target(name: str, certs: Path, args, workdir: Path) -> dict:
    ports = {n: free_port() for n in LISTENERS}
    controller = free_port()
    props = properties(certs, ports, controller)
    kafka = proc = None
    if name == "kafkawire":
        proc = start_kafkawire(props, ports["PLAINTEXT"], workdir)
    else:
        from kafka_reference import ReferenceKafka

        kafka = ReferenceKafka(workdir / "kafka", port=ports["PLAINTEXT"], config=props)
        kafka.controller_port = controller
        kafka.start()
    try:
        wait_ready(client_conf(certs, ports, "PLAINTEXT"))
        create_user(ports)
        for listener in LISTENERS:
            wait_ready(client_conf(certs, ports, listener))
        out = {}
        for listener in LISTENERS:
            conf = client_conf(certs, ports, listener)
            prod, cons = [], []
            for _ in range(args.repeat):
                topic = f"bench-{listener.lower()}-{uuid.uuid4().hex[:8]}"
                prod.append(produce(conf, topic, args.records, args.size))
                cons.append(consume(conf, topic, args.records))
            out[listener] = (statistics.median(prod), statistics.median(cons))
            topic = f"bench-kw-{listener.lower()}-{uuid.uuid4().hex[:8]}"
            out["kafkawire-client", listener] = statistics.median(
                kafkawire_client_produce(conf, topic, args.records, args.size) for _ in range(args.repeat)
            )
        out["handshakes"] = {lst: handshakes(certs, ports[lst], args.seconds) for lst in ("SSL", "SASL_SSL")}
        return out
    finally:
        if proc is not None:
            proc.stop()
        if kafka is not None:
            kafka.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20,000 records, 1 run, 2 s of handshakes")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3, help="runs per case, median reported")
    ap.add_argument("--seconds", type=float, default=5.0, help="handshake phase length")
    ap.add_argument("--targets", default="kafkawire,kafka")
    args = ap.parse_args()
    if args.quick:
        args.records, args.repeat, args.seconds = 20_000, 1, 2.0
    from kafkawire.security.certs import create

    print(f"machine: {os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-security-") as tmp:
        workdir = Path(tmp)
        create(str(workdir / "certs"))
        for name in args.targets.split(","):
            results[name] = run_target(name, workdir / "certs", args, workdir / name)
    mb = args.size / 1e6
    print(
        f"\n{args.records:,} records of {args.size} B per phase, median of {args.repeat}; librdkafka, acks=all, "
        "linger.ms=5, one partition; SASL_SSL with SCRAM-SHA-256"
    )
    print(
        f"{'target':10} {'listener':10} {'produce rec/s':>14} {'MB/s':>7} {'vs plain':>9} {'consume rec/s':>14} "
        f"{'MB/s':>7} {'vs plain':>9}"
    )
    for name, res in results.items():
        base_p, base_c = res["PLAINTEXT"]
        for listener in LISTENERS:
            p, c = res[listener]
            print(
                f"{name:10} {listener:10} {p:14,.0f} {p * mb:7.1f} {p / base_p:9.2f} {c:14,.0f} {c * mb:7.1f} "
                f"{c / base_c:9.2f}"
            )
    print("\nkafkawire's own client, produce rec/s (acks=all, linger 5 ms), and its ratio to PLAINTEXT")
    for name, res in results.items():
        base = res["kafkawire-client", "PLAINTEXT"]
        print(
            f"{name:10} "
            + "  ".join(
                f"{lst} {res['kafkawire-client', lst]:,.0f} ({res['kafkawire-client', lst] / base:.2f})"
                for lst in LISTENERS
            )
        )
    print("\nTLS handshakes per second (one client at a time, full handshakes)")
    for name, res in results.items():
        print(f"{name:10} " + "  ".join(f"{lst} {v:,.0f}/s" for lst, v in res["handshakes"].items()))
    print(f"machine at end: load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
