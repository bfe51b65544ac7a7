"""A broker process whose open file limit is 256 serves 2,000 partitions: segment files are kept open through a
bounded LRU, not one (or two) per partition."""

from __future__ import annotations

import resource

from kafkawire.protocol import message_class

from .conftest import RawClient
from .helpers import batch, fetch_request, records_with_offsets
from .test_process import free_port, reap, stop, wait_listening

PARTITIONS = 2000
LIMIT = 256


def _limited():
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def _produce_all(client, topic, round_):
    R = message_class("ProduceRequest")
    for start in range(0, PARTITIONS, 500):
        parts = [
            R.PartitionProduceData(index=p, records=batch([b"%s-%d-%d" % (topic.encode(), p, round_)]))
            for p in range(start, start + 500)
        ]
        res = client.call(
            R(
                transactional_id=None,
                acks=1,
                timeout_ms=10_000,
                topic_data=[R.TopicProduceData(name=topic, partition_data=parts)],
            ),
            9,
        )
        for pr in res.responses[0].partition_responses:
            assert (pr.error_code, pr.base_offset) == (0, round_), (pr.index, pr.error_code, pr.error_message)


def test_2000_partitions_under_ulimit_256(tmp_path):
    import os
    import subprocess
    import sys

    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kafkawire",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--data-dir",
            str(tmp_path / "data"),
        ],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=_limited,
    )
    try:
        wait_listening(port, proc, timeout=30)
        client = RawClient(("127.0.0.1", port), timeout=120)
        C = message_class("CreateTopicsRequest")
        res = client.call(
            C(
                topics=[
                    C.CreatableTopic(
                        name="wide", num_partitions=PARTITIONS, replication_factor=1, assignments=[], configs=[]
                    )
                ],
                timeout_ms=60_000,
                validate_only=False,
            ),
            7,
        )
        assert res.topics[0].error_code == 0, res.topics[0].error_message
        for round_ in range(2):
            _produce_all(client, "wide", round_)
        # every partition in one fetch: more segments than the process may hold open at once
        res = client.call(fetch_request([("wide", p, 0) for p in range(PARTITIONS)], max_bytes=64 << 20), 12)
        got = {
            p.partition_index: records_with_offsets(p.records) for p in res.responses[0].partitions if p.error_code == 0
        }
        assert len(got) == PARTITIONS
        for p, records in got.items():
            assert records == [(0, b"wide-%d-0" % p), (1, b"wide-%d-1" % p)]
        fds = len(os.listdir(f"/proc/{proc.pid}/fd"))
        assert fds < LIMIT
        client.close()
        stop(proc)
        assert proc.returncode == 0, proc.err_text
        assert "open file limit: 256" in proc.err_text
        assert "Too many open files" not in proc.err_text and "Traceback" not in proc.err_text
    finally:
        reap(proc)
