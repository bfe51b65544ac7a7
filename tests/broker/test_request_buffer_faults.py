"""The broker process reuses the memory of its request buffers (net/malloc.py) instead of faulting in fresh
zero-filled pages for every large request."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import RawClient
from .helpers import batch, create_topic, produce_request
from .test_process import free_port, wait_listening

RECORD = b"v" * 100


def _minor_faults(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])  # minflt, the 10th field


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/stat (Linux)")
def test_request_buffers_are_reused_not_faulted_in_per_request(tmp_path):
    """glibc hands each buffer of 128 KiB or more fresh zero-filled pages unless its thresholds are raised
    (net/malloc.py): one to three faults per 4 KiB of requests received. Counted in a broker process of its own."""
    if not os.confstr("CS_GNU_LIBC_VERSION"):
        pytest.skip("the C library is not glibc: kafkawire leaves its allocator alone")
    port = free_port()
    with open(tmp_path / "broker.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafkawire", "serve", "--listen", f"127.0.0.1:{port}"]
            + ["--data-dir", str(tmp_path / "data"), "--override", "kafkawire.acks.all.fsync=false"],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        wait_listening(port, proc, timeout=30)
        c = RawClient(("127.0.0.1", port), timeout=60)
        create_topic(c, "faults")
        # requests of 0.3 to 1 MB, five in flight, as librdkafka sends 100 B records: frames of varying sizes that
        # the event loop's 256 KiB reads split anywhere
        requests = [produce_request("faults", 0, batch([RECORD] * n), acks=1) for n in (3000, 8700, 5100, 6400, 4000)]

        def produce(rounds):
            for _ in range(rounds):
                cids = [c.send(request, 9) for request in requests]
                for cid in cids:
                    assert c.recv(0, 9, cid).responses[0].partition_responses[0].error_code == 0

        produce(3)  # the heap grows to its working size
        before = _minor_faults(proc.pid)
        rounds = 8
        produce(rounds)
        faults = _minor_faults(proc.pid) - before
        pages = rounds * sum(len(r.topic_data[0].partition_data[0].records) for r in requests) // 4096
        # without the tuning: more faults than pages received (6,567 for 5,844 in one run); with it, a few
        assert faults < pages // 10, f"{faults} minor page faults for {pages} pages of requests"
        c.close()
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
