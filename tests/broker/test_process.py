"""``python -m kafkawire serve`` as a process: start time, SIGTERM, restart on the same port, stdin closed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from .conftest import RawClient, msg


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args, tmp_path, stdin=subprocess.DEVNULL):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkawire", "serve", *args],
        cwd=tmp_path,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    return proc


def wait_listening(port, proc, timeout=10.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if proc.poll() is not None:
            raise AssertionError(f"broker exited: {proc.stderr.read().decode()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return time.monotonic() - start
        except OSError:
            time.sleep(0.02)
    raise AssertionError("broker did not start listening")


def reap(proc) -> None:
    """Kill a broker a test left running and close its pipes."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for f in (proc.stdin, proc.stdout, proc.stderr):
        if f is not None and not f.closed:
            f.close()


def stop(proc, sig=signal.SIGTERM) -> float:
    t = time.monotonic()
    proc.send_signal(sig)
    proc.wait(10)
    elapsed = time.monotonic() - t
    proc.err_text = proc.stderr.read().decode()
    proc.stderr.close()
    proc.stdout.close()
    return elapsed


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_starts_answers_and_exits_on_signal(tmp_path, sig):
    port = free_port()
    proc = start(["--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data")], tmp_path)
    try:
        wait_listening(port, proc)
        c = RawClient(("127.0.0.1", port))
        assert c.call(msg("ApiVersionsRequest"), 0).error_code == 0
        c.close()
        assert stop(proc, sig) < 2.0
        assert proc.returncode == 0
        err = proc.err_text
        assert "listening on 127.0.0.1" in err and "connection 1 from" in err and "shutting down" in err
        assert "kafkawire broker 1 stopped" in err  # the whole stop ran: storage flushed and closed before it
    finally:
        reap(proc)


def test_sigterm_with_open_connections_and_long_poll(tmp_path):
    port = free_port()
    proc = start(["--listen", f"127.0.0.1:{port}", "--storage", "memory"], tmp_path)
    try:
        wait_listening(port, proc)
        from .helpers import create_topic, fetch_request

        c = RawClient(("127.0.0.1", port))
        create_topic(c, "t")
        c.send(fetch_request([("t", 0, 0)], max_wait_ms=30_000), 12)
        time.sleep(0.2)
        assert stop(proc) < 2.0
        c.close()
    finally:
        reap(proc)


def test_restart_on_the_same_port_keeps_cluster_id_and_data(tmp_path):
    port = free_port()
    args = ["--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data")]
    from .helpers import batch, create_topic, fetch_request, produce_request, values_of

    proc = start(args, tmp_path)
    try:
        wait_listening(port, proc)
        c = RawClient(("127.0.0.1", port))
        cluster_id = c.call(msg("MetadataRequest", topics=[]), 12).cluster_id
        create_topic(c, "kept")
        c.call(produce_request("kept", 0, batch([b"durable"])), 9)
        c.close()
        stop(proc)
        proc = start(args, tmp_path)  # immediately, same port (SO_REUSEADDR)
        wait_listening(port, proc)
        c = RawClient(("127.0.0.1", port))
        assert c.call(msg("MetadataRequest", topics=[]), 12).cluster_id == cluster_id
        f = c.call(fetch_request([("kept", 0, 0)]), 12)
        assert values_of(f.responses[0].partitions[0].records) == [b"durable"]
        c.close()
        stop(proc)
    finally:
        reap(proc)


def test_survives_stdin_closed(tmp_path):
    port = free_port()
    proc = start(["--listen", f"127.0.0.1:{port}", "--storage", "memory"], tmp_path, stdin=subprocess.PIPE)
    try:
        proc.stdin.close()
        wait_listening(port, proc)
        time.sleep(0.3)
        assert proc.poll() is None
        c = RawClient(("127.0.0.1", port))
        assert c.call(msg("ApiVersionsRequest"), 0).error_code == 0
        c.close()
        assert stop(proc) < 2.0
    finally:
        reap(proc)


def test_server_properties_file_as_only_argument(tmp_path):
    port = free_port()
    props = tmp_path / "server.properties"
    props.write_text(
        "# a Kafka server.properties\n"
        "process.roles=broker,controller\n"
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{port + 1}\n"
        f"log.dirs={tmp_path / 'logs'}\n"
        "node.id=7\n"
        "num.partitions=4\n"
        "some.unknown.key=1\n"
    )
    proc = start([str(props)], tmp_path)
    try:
        wait_listening(port, proc)
        c = RawClient(("127.0.0.1", port))
        R = msg("MetadataRequest").__class__
        res = c.call(R(topics=[R.MetadataRequestTopic(name="fromprops")]), 12)
        assert res.controller_id == 7 and res.brokers[0].node_id == 7
        assert len(res.topics[0].partitions) == 4
        c.close()
        stop(proc)
        err = proc.err_text
        assert err.count("some.unknown.key") == 1
        assert "process.roles" not in err
        assert (tmp_path / "logs").exists()
    finally:
        reap(proc)


def test_start_reports_its_start_time(tmp_path):
    # the figure itself is measured by benchmarks/bench_startup.py, not asserted here
    port = free_port()
    proc = start(["--listen", f"127.0.0.1:{port}", "--storage", "memory"], tmp_path)
    try:
        wait_listening(port, proc)
    finally:
        stop(proc)
        if proc.stdin:
            proc.stdin.close()
    import re

    assert re.search(r"started in (\d+) ms", proc.err_text), proc.err_text[-500:]
