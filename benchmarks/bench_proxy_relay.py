#!/usr/bin/env python3
"""The relay's own cost, without a broker or a client library competing for the CPU: bytes through
``kafkawire.proxy`` per CPU second of the proxy's event-loop thread.

A scripted upstream answers each Produce v10 request (``--produce-mb`` MB of records) with a small response
and each Fetch v16 request with a ready-made response of ``--fetch-mb`` MB; a client on the same loop sends
them one at a time through a :class:`~kafkawire.proxy.Proxy` that runs on its own uvloop thread (as
``kafkawire proxy --quiet`` runs). Printed: MB relayed, the proxy thread's CPU seconds per 100 MB (Linux
/proc, 10 ms ticks; ``--total-mb`` sets how much to move) and the wall-clock rate. ``--module`` measures
another relay module with the same API (an older copy, to compare in one run).

Usage: python benchmarks/bench_proxy_relay.py [--total-mb 400] [--produce-mb 1] [--fetch-mb 8] [--repeat 3]
           [--module kafkawire.proxy.relay]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import io
import os
import statistics
import sys
import threading
import time

from kafkawire.protocol.api_keys import ApiKey
from kafkawire.protocol.messages import FetchRequest, FetchResponse, ProduceRequest, ProduceResponse
from kafkawire.protocol.rpc import encode_request, encode_response, request_header
from kafkawire.proxy import Reporter


def thread_cpu(tid: int) -> float:
    with open(f"/proc/self/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_request(corr: int, size: int) -> bytes:
    PD = ProduceRequest.TopicProduceData
    body = ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=[PD(name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=bytes(size))])],
    )
    return encode_request(request_header(ApiKey.PRODUCE, 10, corr, "bench"), body)


def fetch_response(corr: int, size: int) -> bytes:
    P = FetchResponse.PartitionData
    body = FetchResponse(
        session_id=0,
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic="t",
                partitions=[P(partition_index=0, high_watermark=1, last_stable_offset=1, records=bytes(size))],
            )
        ],
    )
    return encode_response(corr, body, 16)


async def upstream_handler(reader, writer, fetch_mb: int) -> None:
    big = fetch_response(0, fetch_mb << 20)[8:]  # after size and correlation id
    small = encode_response(0, ProduceResponse(responses=[]), 10)[8:]
    try:
        while True:
            head = await reader.readexactly(4)
            frame = await reader.readexactly(int.from_bytes(head, "big"))
            key, corr = int.from_bytes(frame[0:2], "big"), frame[4:8]
            rest = big if key == ApiKey.FETCH else small
            writer.write((len(rest) + 4).to_bytes(4, "big") + corr)
            writer.write(rest)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def client(port: int, kind: str, count: int, produce_mb: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 24)
    fetch = encode_request(
        request_header(ApiKey.FETCH, 16, 0, "bench"), FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 30)
    )
    produce = produce_request(0, produce_mb << 20)
    for corr in range(count):
        frame = bytearray(fetch if kind == "consume" else produce)
        frame[8:12] = corr.to_bytes(4, "big")
        writer.write(frame)
        size = int.from_bytes(await reader.readexactly(4), "big")
        await reader.readexactly(size)
    writer.close()


def run(module: str, args) -> dict[str, list[tuple[float, float]]]:
    relay = importlib.import_module(module)
    loop_ready = threading.Event()
    box: dict = {}

    def proxy_thread() -> None:
        import uvloop

        loop = uvloop.new_event_loop()
        asyncio.set_event_loop(loop)
        box["loop"], box["tid"] = loop, threading.get_native_id()
        loop_ready.set()
        loop.run_forever()

    threading.Thread(target=proxy_thread, daemon=True).start()
    loop_ready.wait()
    out: dict[str, list[tuple[float, float]]] = {"produce": [], "consume": []}

    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: upstream_handler(r, w, args.fetch_mb), "127.0.0.1", 0)
        up_port = server.sockets[0].getsockname()[1]
        config = relay.ProxyConfig("127.0.0.1", 0, [("127.0.0.1", up_port)])
        proxy = relay.Proxy(config, Reporter(io.StringIO(), quiet=True))
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(proxy.start(), box["loop"]))
        for _ in range(args.repeat):
            for kind, mb in (("produce", args.produce_mb), ("consume", args.fetch_mb)):
                count = max(1, args.total_mb // mb)
                c0, t0 = thread_cpu(box["tid"]), time.perf_counter()
                await client(proxy.port, kind, count, args.produce_mb)
                cpu, wall = thread_cpu(box["tid"]) - c0, time.perf_counter() - t0
                out[kind].append((cpu * 100 / (count * mb), count * mb / wall))
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(proxy.close(), box["loop"]))
        server.close()

    asyncio.run(main())
    box["loop"].call_soon_threadsafe(box["loop"].stop)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--total-mb", type=int, default=400)
    ap.add_argument("--produce-mb", type=int, default=1)
    ap.add_argument("--fetch-mb", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--module", action="append", help="relay module(s) to measure (default kafkawire.proxy.relay)")
    args = ap.parse_args(argv)
    modules = args.module or ["kafkawire.proxy.relay"]
    load = os.getloadavg()
    print(f"# bench_proxy_relay: {os.cpu_count()} cores, load average {load[0]:.2f}; {args.total_mb} MB each way")
    print(f"{'relay':<28} {'produce CPU s/100 MB':>21} {'MB/s':>7} {'consume CPU s/100 MB':>21} {'MB/s':>7}")
    for module in modules:
        r = run(module, args)
        p_cpu, p_rate = (statistics.median(x[i] for x in r["produce"]) for i in (0, 1))
        c_cpu, c_rate = (statistics.median(x[i] for x in r["consume"]) for i in (0, 1))
        print(f"{module:<28} {p_cpu:>21.3f} {p_rate:>7.0f} {c_cpu:>21.3f} {c_rate:>7.0f}", flush=True)
    load = os.getloadavg()
    print(f"# load average {load[0]:.2f} (medians of {args.repeat}; the proxy thread's CPU, 10 ms ticks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
