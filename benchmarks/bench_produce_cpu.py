#!/usr/bin/env python3
"""The broker's own cost and speed for fixed request streams: kafkawire against Tansu and Apache Kafka.

With librdkafka or Kafka's perf tool as the client, the client uses one to one and a half of this machine's
two cores, so throughput mostly measures who gets the cores, and even a broker's CPU per MB moves with the
batch sizes the client happens to build. Here the client costs next to nothing and every broker gets the
same bytes:

- **produce**: ProduceRequest v10 frames built once before the phase (acks=1, one batch of one partition per
  request, as librdkafka sends them, partitions in turn), sent over one connection with WINDOW requests in
  flight. A partition answered with an error (Kafka's NOT_LEADER_OR_FOLLOWER while a new topic's leadership
  settles) is counted, printed by name, and its request sent again, so every broker stores every record.
- **consume**: Fetch v12 of every partition from offset 0 to the end, READS times, each over a new
  connection with one fetch in flight, as a consumer reads (max_wait 100 ms, 1 MiB a partition, 50 MiB a response). The client decodes
  the response but reads only each batch's header, for the next offset.

Per phase and broker it prints the broker's CPU seconds per MB of record values (``bench_broker.CpuMeter``),
the MB/s, the broker's cores and the client's own cores (this process's CPU over the wall time: what the client took from the
broker). Each figure is the median over the rounds, with kafkawire's ratio to each peer.

Every broker runs for the whole benchmark (one start each) and first gets one untimed pass of every case, so
that Kafka's JIT has compiled the paths the cases take before any is timed, as in a long-running broker.
Durability: kafkawire on disk without fsync (kafkawire.acks.all.fsync=false); Kafka on disk with its default
flush policy (never forced); Tansu in memory. No case fsyncs: acks=1 everywhere.

Memory: before every produce phase the client touches ``--warm-mb`` (512) MB of fresh memory, frees it,
and prints what one new page cost ("fresh page"). On a VM whose host takes back the guest's free memory
(virtio-balloon free page reporting, with DAMON paging out cold page cache, as on the machine these figures
come from), the first write to a page the host took back cost ~12 us instead of ~2 (measured by touching
6 GB page by page). A broker's writes into the page cache then cost 3-4x the CPU per MB, in whichever
broker's phase the warm pages run out: kafkawire's 1 KiB produce went from 0.6 to 2.7 ms/MB and Kafka's
from 1.1 to 4.0 once Kafka's deleted topics (removed after its 60 s file.delete.delay.ms) held the warm
memory. Touching fresh pages right before the phase hands it warm pages, whichever broker it is (it makes
such rounds rarer, not gone); ``--warm-mb 0`` turns it off.

Cases: 100 B values (``--sizes 100,1024`` adds 1 KiB ones, as many MB per case: records scaled down), 1
partition (500 records a request) and 12 partitions (100 records a request), codecs none and lz4; and ``x1``:
1 partition, one record a request, 20,000 requests (what a producer with linger.ms=0 sends), where the broker's
cost per request is what counts. A table of broker CPU per produce request follows the MB table.

Usage: python benchmarks/bench_produce_cpu.py [--brokers kafkawire,tansu,kafka] [--records N] [--rounds N]
           [--sizes 100,1024] [--warm-mb 512]
           [--kafkawire-src PATH]   # also run the kafkawire of another source tree (e.g. a git worktree of
                                    # an older commit), as "kafkawire-other"
"""

from __future__ import annotations

import argparse
import collections
import os
import socket
import statistics
import struct
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_broker as bb  # noqa: E402

from kafkawire.protocol import rpc  # noqa: E402
from kafkawire.protocol.errors import error_for  # noqa: E402
from kafkawire.protocol.messages import FetchRequest, ProduceRequest  # noqa: E402
from kafkawire.protocol.records.builder import build_batch  # noqa: E402
from kafkawire.protocol.records.reader import iter_batches  # noqa: E402

from peers.peer_harness import BrokerProcess  # noqa: E402

SIZE = 100
CASES = [(1, "none", 500), (1, "lz4", 500), (12, "none", 100), (12, "lz4", 100), (1, "none", 1)]
# The one-record case (a producer with linger.ms=0 at a rate the broker keeps up with sends each record alone) is
# about the broker's cost per request, not per MB: this many requests, whatever --records says. On one core
# (2026-12-01, 1 KiB values, acks=1, 20 in flight, after 20,000 untimed) kafkawire spent 62 us a request, Tansu 70
# and Kafka 146; that cost is what sets a broker's latency at 20,000 records/s with linger.ms=0.
SINGLE_RECORD_REQUESTS = 20_000
WINDOW = 8  # produce requests in flight, as a producer's max.in.flight
# times the consume phase reads each case's topic: 12 partitions of 50 MB are about 4 fetches of 12 MiB, and
# a read of 50 MB takes 20-60 ms, too short to time alone
READS = 10
RESENDS = 50  # times one request is sent again after an error before the benchmark gives up
PLACEHOLDER = "cpu-rr-cc"  # the topic name the frames are built with; each case swaps in its own
FETCH_VERSION = 12  # the last Fetch version that names topics (13 and later use topic ids)
DURABILITY = {
    "kafkawire": "disk, no fsync",
    "kafkawire-other": "disk, no fsync",
    "kafka": "disk, default flush (no fsync)",
    "tansu": "memory",
}


def requests(topic: str, partitions: int, codec: str, per_request: int, records: int, size: int = SIZE) -> list[bytes]:
    values = bb.payloads(size)
    out = []
    for i in range(records // per_request):
        first = i * per_request
        batch = build_batch(
            [(b"k%d" % (j & 1023), values[j & 63]) for j in range(first, first + per_request)],
            compression=codec,
            base_offset=0,
        )
        body = ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout_ms=30000,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name=topic,
                    partition_data=[ProduceRequest.PartitionProduceData(index=i % partitions, records=batch)],
                )
            ],
        )
        out.append(rpc.encode_request(rpc.request_header(0, 10, i + 1, "bench-produce-cpu"), body))
    return out


def _recv_into(sock: socket.socket, view: memoryview) -> None:
    """Fill ``view`` from the socket."""
    got, n = 0, len(view)
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise ConnectionError("broker closed the connection")
        got += k


def _read(sock: socket.socket, n: int) -> bytearray:
    """``n`` bytes from the socket, received into one buffer (the decoder reads it in place: no copy)."""
    buf = bytearray(n)
    _recv_into(sock, memoryview(buf))
    return buf


def _frame(sock: socket.socket) -> bytearray:
    return _read(sock, struct.unpack(">i", _read(sock, 4))[0])


class _Receiver:
    """Fetch responses received into one buffer, kept from fetch to fetch (replaced only by a larger one).

    A new 12 MB bytearray per fetch costs the client a page fault per 4 KiB each time glibc hands the memory
    back and takes it again, ~2 us a page, ~12 us on a VM whose host took the page back: that made the
    client's CPU per MB of a 12-partition fetch 3x higher in some rounds than in others, and the consume MB/s
    with it, whichever broker was measured."""

    def __init__(self) -> None:
        self.buf = bytearray(0)

    def frame(self, sock: socket.socket) -> memoryview:
        n = struct.unpack(">i", _read(sock, 4))[0]
        if len(self.buf) < n:
            self.buf = bytearray(n)  # a new object: the last response's views of the old one stay valid
        view = memoryview(self.buf)[:n]
        _recv_into(sock, view)
        return view


_receiver = _Receiver()


def _connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def send(bootstrap: str, frames: list[bytes], window: int = WINDOW) -> collections.Counter:
    """Send every frame, ``window`` in flight, until each is accepted; the errors answered, by name."""
    errors: collections.Counter = collections.Counter()
    tries = [0] * len(frames)
    with _connect(bootstrap) as sock:
        queue = collections.deque(range(len(frames)))
        in_flight: collections.deque = collections.deque()
        while queue or in_flight:
            while queue and len(in_flight) < window:
                i = queue.popleft()
                sock.sendall(frames[i])
                in_flight.append(i)
            i = in_flight.popleft()  # answers come in request order on one connection
            response = rpc.decode_response(_frame(sock), 0, 10, framed=False)
            codes = [p.error_code for t in response.body.responses for p in t.partition_responses if p.error_code]
            if codes:
                errors.update(error_for(c).name for c in codes)
                tries[i] += 1
                if tries[i] > RESENDS:
                    raise RuntimeError(f"request {i} refused {RESENDS} times: {dict(errors)}")
                time.sleep(0.02)
                queue.append(i)
    return errors


def fetch_all(bootstrap: str, topic: str, ends: list[int]) -> tuple[int, int]:
    """Fetch every partition from offset 0 until each reaches ``ends[p]``, one fetch in flight: the records
    read (from the batch headers: each batch's next offset) and the fetches it took."""
    nxt = [0] * len(ends)
    correlation = 0
    with _connect(bootstrap) as sock:
        while True:
            wanted = [p for p in range(len(ends)) if nxt[p] < ends[p]]
            if not wanted:
                return sum(nxt), correlation
            correlation += 1
            body = FetchRequest(
                replica_id=-1,
                max_wait_ms=100,
                min_bytes=1,
                max_bytes=50 * 1024 * 1024,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[
                    FetchRequest.FetchTopic(
                        topic=topic,
                        partitions=[
                            FetchRequest.FetchPartition(
                                partition=p,
                                current_leader_epoch=-1,
                                fetch_offset=nxt[p],
                                log_start_offset=-1,
                                partition_max_bytes=1024 * 1024,
                            )
                            for p in wanted
                        ],
                    )
                ],
                forgotten_topics_data=[],
                rack_id="",
            )
            sock.sendall(
                rpc.encode_request(rpc.request_header(1, FETCH_VERSION, correlation, "bench-produce-cpu"), body)
            )
            response = rpc.decode_response(_receiver.frame(sock), 1, FETCH_VERSION, framed=False)
            for t in response.body.responses:
                for part in t.partitions:
                    if part.error_code:
                        raise RuntimeError(
                            f"fetch of {topic}-{part.partition_index}: {error_for(part.error_code).name}"
                        )
                    # whole batches only (a batch cut at the response's size limit is fetched again)
                    for batch in iter_batches(part.records or b""):
                        nxt[part.partition_index] = batch.next_offset


class Running:
    """One broker, started once: bootstrap, a CPU-seconds reader, close()."""

    def __init__(self, name: str, other_src: str | None, pin=None):
        self.name = name
        with bb.on_broker_cpus(pin):  # the broker and every thread it starts on --pin's broker CPUs
            self._start(name, other_src)

    def _start(self, name: str, other_src: str | None) -> None:
        if name == "kafka":
            from kafka_reference import ReferenceKafka

            self._proc = ReferenceKafka()
            self._proc.start()
            self.cpu = bb.CpuMeter(self._proc.proc)
            self.bootstrap = self._proc.bootstrap
            self.close = lambda: (self.cpu.__exit__(None, None, None), self._proc.close())
            return
        if name == "tansu":
            broker = BrokerProcess("tansu", storage="memory")
            broker.__enter__()
        else:
            saved = os.environ.get("PYTHONPATH")
            os.environ["PYTHONPATH"] = other_src if name == "kafkawire-other" else str(REPO / "src")
            try:  # the process is started here, with the source tree chosen above
                broker = BrokerProcess(
                    "kafkawire", storage="disk", extra_args=("--override", "kafkawire.acks.all.fsync=false")
                )
                broker.__enter__()
            finally:
                if saved is None:
                    os.environ.pop("PYTHONPATH", None)
                else:
                    os.environ["PYTHONPATH"] = saved
        self.bootstrap = broker.bootstrap
        self.cpu = bb.CpuMeter(broker.proc)
        self.close = lambda: (self.cpu.__exit__(None, None, None), broker.__exit__(None, None, None))


def run_case(
    broker: Running,
    topic: str,
    partitions: int,
    frames: list[bytes],
    per: int,
    mb: float,
    warm_mb: int = 0,
    window: int = WINDOW,
) -> dict:
    """Produce ``frames`` into a new topic, then fetch it all back; each phase's broker CPU ms per MB, MB/s
    and client cores, and what a fresh page cost just before (``bench_broker.warm_memory``, when ``warm_mb``)."""
    bb.create_topic(broker.bootstrap, topic, partitions, {})
    out: dict = {"fresh_page_us": bb.warm_memory(warm_mb) if warm_mb > 0 else None}
    c0, p0, t0 = broker.cpu(), time.process_time(), time.perf_counter()
    out["errors"] = send(broker.bootstrap, frames, window)
    c1, p1, t1 = broker.cpu(), time.process_time(), time.perf_counter()
    ends = [0] * partitions
    for i in range(len(frames)):
        ends[i % partitions] += per
    fetches = 0
    for _ in range(READS):
        read, n = fetch_all(broker.bootstrap, topic, ends)
        fetches += n
        if read != sum(ends):
            raise RuntimeError(f"{broker.name} {topic}: read {read} of {sum(ends)} records")
    c2, p2, t2 = broker.cpu(), time.process_time(), time.perf_counter()
    out["produce"] = ((c1 - c0) * 1000 / mb, mb / (t1 - t0), (p1 - p0) / (t1 - t0))
    out["consume"] = ((c2 - c1) * 1000 / (mb * READS), mb * READS / (t2 - t1), (p2 - p1) / (t2 - t1))
    out["fetches"] = fetches
    out["mb"] = mb
    bb.delete_topic(broker.bootstrap, topic)  # Tansu keeps a memory-stored topic's records until it is deleted
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", default="kafkawire,tansu", help="kafkawire,tansu,kafka (default kafkawire,tansu)")
    parser.add_argument(
        "--records", type=int, default=500_000, help="records of 100 B per case (default 500000: 50 MB)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds, brokers interleaved (default 3)")
    parser.add_argument("--kafkawire-src", help="another kafkawire source tree, run as kafkawire-other")
    parser.add_argument("--sizes", default=str(SIZE), help=f"value sizes in bytes (default {SIZE})")
    parser.add_argument(
        "--warm-mb",
        type=int,
        default=bb.WARM_MB,
        help=f"fresh memory touched before each produce phase (default {bb.WARM_MB}; 0: none)",
    )
    parser.add_argument("--window", type=int, default=WINDOW, help=f"produce requests in flight (default {WINDOW})")
    parser.add_argument(
        "--pin",
        type=bb.parse_pin,
        metavar="BROKER_CPUS:CLIENT_CPUS",
        help="each broker on some CPUs, this client on others, e.g. 0:1 (as bench_broker.py --pin)",
    )
    args = parser.parse_args(argv)
    if args.pin:
        os.sched_setaffinity(0, args.pin[1])
    names = [b for b in args.brokers.split(",") if b]
    if args.kafkawire_src:
        names.insert(1, "kafkawire-other")
    sizes = [int(x) for x in args.sizes.split(",") if x]
    cases = []
    requests_per_case: dict[str, int] = {}
    for size, (partitions, codec, per) in ((z, c) for z in sizes for c in CASES):
        records = max(per, args.records * SIZE // size // per * per)
        if per == 1:
            records = SINGLE_RECORD_REQUESTS
        label = f"{size}B p{partitions} {codec}" + (" x1" if per == 1 else "")
        frames = requests(PLACEHOLDER, partitions, codec, per, records, size)
        cases.append((label, partitions, per, frames, records * size / bb.MB))
        requests_per_case[label] = len(frames)
    print(
        f"{bb.machine_state()}; {args.records * SIZE / bb.MB:.1f} MB of values per case; {args.window} produce "
        "requests in flight"
        + (f"; brokers on CPUs {sorted(args.pin[0])}, this client on {sorted(args.pin[1])}" if args.pin else ""),
        flush=True,
    )
    for name in names:
        print(f"  {name:16} {DURABILITY[name]}")
    brokers: dict[str, Running] = {}
    figures: dict = {}
    try:
        for name in names:
            brokers[name] = Running(name, args.kafkawire_src, args.pin)
            print(f"  {name:16} CPU read from {brokers[name].cpu.how}", flush=True)
        for r in range(-1, args.rounds):  # round -1: the untimed pass of every case
            for name in names:
                for i, (label, partitions, per, frames, mb) in enumerate(cases):
                    topic = f"cpu-{r + 1:02d}-{i:02d}"  # as long as PLACEHOLDER
                    # the topic's name is the first thing in each request that can match: before the records
                    named = [f.replace(PLACEHOLDER.encode(), topic.encode(), 1) for f in frames]
                    got = run_case(brokers[name], topic, partitions, named, per, mb, args.warm_mb, args.window)
                    fresh = got["fresh_page_us"]
                    if r >= 0:
                        figures.setdefault(label, {}).setdefault(name, []).append(got)
                    (pc, pt, pk), (cc, ct, ck) = got["produce"], got["consume"]
                    errors = ", ".join(f"{n} x{k}" for n, k in got["errors"].items())
                    print(
                        f"{'warm' if r < 0 else f'round {r}':8} {name:16} {label:14}"
                        f" produce {pc:6.2f} ms/MB {pt:7.1f} MB/s broker {pc * pt / 1000:.2f} client {pk:.2f} cores"
                        f" | consume {cc:6.2f} ms/MB {ct:7.1f} MB/s broker {cc * ct / 1000:.2f} client {ck:.2f} cores,"
                        f" {got['fetches']} fetches"
                        f"{f' | resent after: {errors}' if errors else ''}; load {os.getloadavg()[0]:.1f}"
                        f"{f'; fresh page {fresh:.1f} us' if fresh is not None else ''}",
                        flush=True,
                    )
    finally:
        for broker in brokers.values():
            broker.close()
    report(figures, names, args.rounds, requests_per_case)
    print(f"\n{bb.machine_state()}")
    return 0


def report(figures: dict, names: list[str], rounds: int, requests_per_case: dict[str, int] | None = None) -> None:
    peers = [n for n in names if n != "kafkawire"]
    print(f"\nmedian of {rounds} round(s). ms/MB: the broker's CPU per MB of values; MB/s: values per second;")
    print("peer/kw (CPU): how many times more CPU the peer spends (above 1: kafkawire spends less);")
    print("kw/peer (MB/s): kafkawire's speed over the peer's (above 1: kafkawire is faster)")
    head = f"{'case':14} {'phase':8}" + "".join(f" {n + ' ms/MB':>22} {'MB/s':>7}" for n in names)
    head += "".join(f" {p + '/kw CPU':>20} {'kw/' + p + ' MB/s':>20}" for p in peers)
    print(head)
    for label, by_name in figures.items():
        for phase in ("produce", "consume"):
            med = {n: tuple(statistics.median(x[phase][k] for x in by_name[n]) for k in range(3)) for n in names}
            row = f"{label:14} {phase:8}" + "".join(f" {med[n][0]:22.2f} {med[n][1]:7.1f}" for n in names)
            kw = med["kafkawire"]
            row += "".join(f" {med[p][0] / kw[0]:20.2f} {kw[1] / med[p][1]:20.2f}" for p in peers)
            print(row)
    if requests_per_case:
        print("\nbroker CPU per produce request (us), median; peer/kw: above 1, kafkawire spends less")
        print(
            f"{'case':14} {'requests':>9}"
            + "".join(f" {n:>16}" for n in names)
            + "".join(f" {p + '/kw':>16}" for p in peers)
        )
        for label, by_name in figures.items():
            n_requests = requests_per_case[label]
            us = {}
            for n in names:
                ms_per_mb = statistics.median(x["produce"][0] for x in by_name[n])
                us[n] = ms_per_mb * by_name[n][0]["mb"] * 1000 / n_requests
            print(
                f"{label:14} {n_requests:9,}"
                + "".join(f" {us[n]:16.1f}" for n in names)
                + "".join(f" {us[p] / us['kafkawire']:16.2f}" for p in peers)
            )
    cores = [x[p][2] for by_name in figures.values() for n in names for x in by_name[n] for p in ("produce", "consume")]
    if cores:
        print(f"client cores over every phase: {min(cores):.2f}-{max(cores):.2f}")


if __name__ == "__main__":
    sys.exit(main())
