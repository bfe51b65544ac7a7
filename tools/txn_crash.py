"""Crash a kafkawire broker (SIGKILL) under a transactional load, again and again, then check what is readable.

Usage: ``python tools/txn_crash.py --rounds 20 [--producers 3] [--seed N] [--keep DIR]``

A ``kafkawire serve`` on the segments (disk) engine runs through the shared launcher
(``kafkawire.testing.KafkaBroker``). Producer subprocesses (confluent-kafka, librdkafka's transactional
producer) write transactions of known contents, committing some and aborting others, and journal every
step: ``BEGIN n``, ``COMMIT? n k`` (commit requested, k records), ``COMMITTED n`` (commit acknowledged),
``ABORTED n`` (abort acknowledged). Each round SIGKILLs the broker at a random point and starts it again
on the same port and data; a producer that fails re-creates itself (``init_transactions`` fences its
previous incarnation and ends what it left). At the end one producer leaves a transaction open on
purpose. Then, after the transaction timeout:

* ListTransactions/DescribeTransactions show no transaction Ongoing or Prepare*;
* a ``read_committed`` consumer sees every acknowledged commit's records exactly once, no record of a
  transaction whose commit was never requested (aborted, interrupted, left open), and a transaction whose
  commit was requested but not acknowledged (the crash came in between) either whole or not at all.

``run()`` is the same check for tests (``tests/transactions/test_crash_broker.py``, a few rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

TXN_TIMEOUT_MS = 8000  # the producers' transaction.timeout.ms: what the broker aborts on its own
TOPIC = "txn-crash"
PARTITIONS = 3


# --------------------------------------------------------------------------- the producer subprocess


def worker(
    bootstrap: str, tid: str, journal: str, stop_file: str, seed: int, leave_open: bool, max_seconds: float
) -> int:
    from confluent_kafka import KafkaException, Producer

    rng = random.Random(seed)
    out = open(journal, "a", buffering=1)

    def note(*words) -> None:
        out.write(" ".join(str(w) for w in words) + "\n")

    def new_producer():
        return Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": tid,
                "transaction.timeout.ms": TXN_TIMEOUT_MS,
                "linger.ms": 5,
                "socket.connection.setup.timeout.ms": 3000,
                "reconnect.backoff.max.ms": 500,
                "message.timeout.ms": TXN_TIMEOUT_MS - 1000,
            }
        )

    deadline = time.monotonic() + max_seconds
    producer = None
    # a restarted incarnation (its predecessor SIGKILLed) numbers its transactions after the journal's last
    n = max(parse_journal(Path(journal)), default=0)
    while time.monotonic() < deadline:
        if producer is None:
            producer = new_producer()
            try:
                producer.init_transactions(20)
                note("INIT")
            except KafkaException as exc:
                note("INIT_ERROR", exc.args[0].name())
                producer = None
                time.sleep(0.5)
                continue
        if os.path.exists(stop_file):
            break
        n += 1
        count = rng.randint(1, 12)
        commit = rng.random() < 0.65
        phase = "produce"
        try:
            producer.begin_transaction()
            note("BEGIN", n)
            for j in range(count):
                producer.produce(TOPIC, value=f"{tid}|{n}|{j}|{count}".encode(), partition=rng.randrange(PARTITIONS))
            if commit:
                phase = "commit"
                note("COMMIT?", n, count)
                producer.commit_transaction(20)
                note("COMMITTED", n)
            else:
                producer.flush(20)  # the records reach the log, so the abort has markers to write
                phase = "abort"
                producer.abort_transaction(20)
                note("ABORTED", n)
        except KafkaException as exc:
            err = exc.args[0]
            note("ERROR", n, phase, err.name(), int(err.retriable()), int(err.txn_requires_abort()), int(err.fatal()))
            if err.txn_requires_abort() and not err.fatal():
                try:
                    producer.abort_transaction(20)
                    note("ABORTED", n)
                    continue
                except KafkaException as again:
                    note("ERROR", n, "abort", again.args[0].name())
            # anything else: a new incarnation, whose init_transactions ends what this one left
            producer = None
    if leave_open and producer is not None:
        n += 1
        producer.begin_transaction()
        note("BEGIN", n)
        for j in range(5):
            producer.produce(TOPIC, value=f"{tid}|{n}|{j}|5".encode(), partition=j % PARTITIONS)
        producer.flush(20)
        note("LEFT_OPEN", n)
        out.close()
        os._exit(0)  # no commit, no abort: the broker must time it out
    out.close()
    return 0


# --------------------------------------------------------------------------- the broker side


def _call(bootstrap: str, name: str, version: int, **fields):
    from kafkawire.protocol import decode_response, encode_request, message_class, request_header

    host, port = bootstrap.rsplit(":", 1)
    body = message_class(name)(**fields)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(encode_request(request_header(body.api_key, version, 1, "txn-crash"), body))
        size = struct.unpack(">i", _read(s, 4))[0]
        return decode_response(_read(s, size), body.api_key, version, framed=False).body


def _read(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return bytes(buf)


def open_transactions(bootstrap: str, tids: list[str]) -> dict[str, str]:
    """Transactional id -> state, for every id ListTransactions or DescribeTransactions says is not ended."""
    listed = _call(bootstrap, "ListTransactionsRequest", 0, state_filters=[], producer_id_filters=[])
    states = {t.transactional_id: t.transaction_state for t in listed.transaction_states}
    described = _call(bootstrap, "DescribeTransactionsRequest", 0, transactional_ids=tids)
    for t in described.transaction_states:
        states.setdefault(t.transactional_id, t.transaction_state)
        if t.error_code == 0:
            states[t.transactional_id] = t.transaction_state
    return {tid: s for tid, s in states.items() if s in ("Ongoing", "PrepareCommit", "PrepareAbort")}


def read_committed(bootstrap: str, timeout: float = 60.0) -> list[str]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "txn-crash-check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        parts = [TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)]
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
        consumer.assign(parts)
        values: list[str] = []
        deadline = time.monotonic() + timeout
        idle_since = time.monotonic()
        while time.monotonic() < deadline:
            msgs = consumer.consume(500, 0.5)
            for m in msgs:
                if m.error() is None:
                    values.append(m.value().decode())
            if msgs:
                idle_since = time.monotonic()
            positions = {tp.partition: tp.offset for tp in consumer.position(parts)}
            if all(positions[p] >= ends[p] for p in ends):
                break
            if time.monotonic() - idle_since > 10:  # the last offsets are markers a position may stop before
                break
        return values
    finally:
        consumer.close()


# --------------------------------------------------------------------------- the run


def parse_journal(path: Path) -> dict[int, dict]:
    txns: dict[int, dict] = defaultdict(dict)
    if not path.exists():
        return txns
    for line in path.read_text().splitlines():
        word, *rest = line.split() or [""]
        if not rest or not rest[0].isdigit():
            continue  # INIT, or a line cut short by a SIGKILLed producer
        if word in ("BEGIN", "COMMITTED", "ABORTED", "LEFT_OPEN"):
            txns[int(rest[0])][word] = True
        elif word == "COMMIT?" and len(rest) == 2:
            txns[int(rest[0])]["COMMIT?"] = int(rest[1])
    return txns


def check(bootstrap: str, journals: dict[str, Path]) -> dict:
    values = read_committed(bootstrap)
    seen = Counter(values)
    by_txn: dict[tuple[str, int], dict[int, int]] = defaultdict(dict)
    for value, times in seen.items():
        tid, n, j, _count = value.split("|")
        by_txn[(tid, int(n))][int(j)] = times
    problems: list[str] = []
    summary = Counter()
    for tid, path in journals.items():
        for n, t in parse_journal(path).items():
            got = by_txn.pop((tid, n), {})
            duplicates = {j: c for j, c in got.items() if c > 1}
            if duplicates:
                problems.append(f"{tid} txn {n}: records read more than once {duplicates}")
            if t.get("COMMITTED"):
                summary["committed"] += 1
                if sorted(got) != list(range(t["COMMIT?"])):
                    problems.append(f"{tid} txn {n}: acknowledged commit of {t['COMMIT?']} records, read {sorted(got)}")
            elif "COMMIT?" in t:
                summary["commit_unacknowledged"] += 1
                if got and sorted(got) != list(range(t["COMMIT?"])):
                    problems.append(f"{tid} txn {n}: commit in doubt, read only part: {sorted(got)}")
                summary["commit_unacknowledged_visible"] += bool(got)
            else:
                summary["aborted" if t.get("ABORTED") else "left_open" if t.get("LEFT_OPEN") else "interrupted"] += 1
                if got:
                    problems.append(f"{tid} txn {n}: never committed, yet read {sorted(got)}")
    for (tid, n), got in by_txn.items():
        problems.append(f"{tid} txn {n}: read {sorted(got)} but never journalled")
    summary["records_read"] = len(values)
    summary["producer_incarnations"] = sum(p.read_text().split().count("INIT") for p in journals.values())
    return {"problems": problems, "summary": dict(summary)}


def run(
    rounds: int,
    *,
    producers: int = 3,
    seed: int | None = None,
    workdir: str | None = None,
    min_gap: float = 1.0,
    max_gap: float = 4.0,
    log=print,
) -> dict:
    """``rounds`` SIGKILLs under load; returns {"problems": [...], "summary": {...}, ...}."""
    from kafkawire.testing import KafkaBroker

    seed = random.randrange(1 << 30) if seed is None else seed
    rng = random.Random(seed)
    root = Path(workdir or tempfile.mkdtemp(prefix="kafkawire-txn-crash-"))
    root.mkdir(parents=True, exist_ok=True)
    config = {
        "num.partitions": PARTITIONS,
        # check for timed-out transactions each second, so the end needs not wait Kafka's 10 s
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
    }
    broker = KafkaBroker(storage="segments", data_dir=root / "data", config=config)
    procs: list[subprocess.Popen] = []
    stop_file = root / "stop"
    journals = {f"crash-{i}": root / f"crash-{i}.journal" for i in range(producers)}
    started = time.monotonic()
    try:
        broker.start()
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        budget = 60 + rounds * (max_gap + 30)

        def spawn(i: int, tid: str) -> subprocess.Popen:
            with open(root / f"{tid}.out", "ab") as out:
                return subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--worker",
                        broker.bootstrap,
                        tid,
                        str(journals[tid]),
                        str(stop_file),
                        str(seed + 1000 * i + len(procs)),
                        "1" if i == 0 else "0",
                        str(budget),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )

        tids = list(journals)
        for i, tid in enumerate(tids):
            procs.append(spawn(i, tid))
        current = list(procs)
        kills = 0
        for r in range(rounds):
            time.sleep(rng.uniform(min_gap, max_gap))
            broker.kill()
            # every other round on average a producer dies with the broker: its next incarnation's
            # init_transactions must fence it and end the transaction it left
            victim = rng.randrange(len(tids)) if rng.random() < 0.5 else None
            if victim is not None:
                kills += 1
                current[victim].kill()
                current[victim].wait(10)
            log(
                f"round {r + 1}/{rounds}: broker killed at {time.monotonic() - started:.1f} s"
                + (f", producer {tids[victim]} too" if victim is not None else "")
            )
            time.sleep(rng.uniform(0, 1.0))
            broker.start()
            if victim is not None:
                current[victim] = spawn(victim, tids[victim])
                procs.append(current[victim])
        # every producer must get a commit through after the last crash: recovery, not just survival
        marks = {tid: path.read_text().count("COMMITTED") if path.exists() else 0 for tid, path in journals.items()}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            now = {tid: path.read_text().count("COMMITTED") if path.exists() else 0 for tid, path in journals.items()}
            if all(now[t] > marks[t] for t in journals):
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"a producer made no commit after the last restart: {marks} -> {now}")
        stop_file.write_text("stop")
        for p in current:
            p.wait(60)
        # the one left open must be aborted by its timeout; nothing may stay Ongoing/Prepare*
        deadline = time.monotonic() + TXN_TIMEOUT_MS / 1000 + 30
        while True:
            left = open_transactions(broker.bootstrap, list(journals))
            if not left or time.monotonic() > deadline:
                break
            time.sleep(1)
        result = check(broker.bootstrap, journals)
        if left:
            result["problems"].append(f"transactions not ended after the timeout: {left}")
        result.update(
            seed=seed,
            rounds=rounds,
            producers=producers,
            producer_kills=kills,
            seconds=round(time.monotonic() - started, 1),
            workdir=str(root) if workdir else None,
        )  # removed unless kept
        return result
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        broker.stop()
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        bootstrap, tid, journal, stop_file, seed, leave_open, budget = argv[1:8]
        return worker(bootstrap, tid, journal, stop_file, int(seed), leave_open == "1", float(budget))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--producers", type=int, default=3)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--keep", help="work directory to keep (journals, broker data and log)")
    args = ap.parse_args(argv)
    result = run(args.rounds, producers=args.producers, seed=args.seed, workdir=args.keep)
    print(json.dumps(result, indent=2))
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
