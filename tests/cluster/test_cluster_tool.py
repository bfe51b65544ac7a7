"""``tools/kafka_cluster.py serve`` and ``tools/kafka_reference.py serve`` stop every JVM they started on SIGINT
or SIGTERM, also as a background job.

A non-interactive shell starts a background job (``cmd &``) with SIGINT ignored, so Python never raises
KeyboardInterrupt; SIGTERM's default ends the interpreter without unwinding. Either way the nodes, each in a
session of its own, outlived the tool. Here the tool runs as ``sh -c 'tool & wait'`` with a one-node cluster
(the signal handling does not depend on the size, and one JVM is what the shared machine can spare).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import reference_unavailable

pytestmark = pytest.mark.kafka_cluster

TOOLS = Path(__file__).resolve().parents[2] / "tools"
SERVE = {
    "kafka_cluster": f"{TOOLS / 'kafka_cluster.py'} serve --size 1",
    "kafka_reference": f"{TOOLS / 'kafka_reference.py'} serve",
}


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return out


def _is_kafka(pid: int) -> bool:
    """A live Kafka JVM (not a zombie, not a recycled pid)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"kafka.Kafka" in f.read()
    except OSError:
        return False


@pytest.mark.timeout(420)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("tool", sorted(SERVE))
def test_serve_in_the_background_stops_every_node_on_a_signal(tmp_path, tool, sig):
    from kafka_reference import KafkaUnavailable, _tool, resolve

    try:
        _tool("java")
        resolve()
    except KafkaUnavailable as exc:
        reference_unavailable(str(exc))
    script = f"{sys.executable} {SERVE[tool]} --data-dir {tmp_path / 'data'} & echo $!; wait $!"
    shell = subprocess.Popen(
        ["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    jvms: list[int] = []
    try:
        tool_pid = int(shell.stdout.readline())
        ready = shell.stdout.readline()  # the bootstrap, printed once the node is ready
        assert re.search(r"\b127\.0\.0\.1:\d+", ready), ready + shell.stdout.read(4000)
        jvms = [p for p in _children(tool_pid) if _is_kafka(p)]
        assert len(jvms) == 1, jvms
        os.kill(tool_pid, sig)
        # bounded: Kafka's controlled shutdown of one node takes seconds; the tool's grace is 30 s
        assert shell.wait(90) == 0
        assert [p for p in jvms if _is_kafka(p)] == []
    finally:
        for pid in jvms:  # whatever a failure left, by the pids this test saw
            if _is_kafka(pid):
                os.kill(pid, signal.SIGKILL)
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait(10)
        for pid in jvms:
            deadline = time.monotonic() + 10
            while _is_kafka(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
