"""kcat -G (librdkafka's balanced consumer, as packaged by Debian) against the group coordinator."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from .harness import create_topic, produce

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (apt-get install kcat)")


def kcat_group(broker, group, topic, timeout=60):
    return subprocess.Popen(
        [
            "kcat",
            "-b",
            broker.bootstrap,
            "-G",
            group,
            topic,
            "-X",
            "auto.offset.reset=earliest",
            "-e",
            "-q",
            "-f",
            "%p %o %s\\n",
            "-X",
            "session.timeout.ms=6000",
            "-X",
            "heartbeat.interval.ms=500",
            "-X",
            "auto.commit.interval.ms=200",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def parse(out):
    return [tuple(int(x) for x in line.split()) for line in out.splitlines() if line.strip()]


def test_kcat_balanced_consumer(broker, topic):
    create_topic(broker.bootstrap, topic, 4)
    produce(broker.bootstrap, topic, list(range(400)), 4)
    group = f"kcat-{topic}"
    a, b = kcat_group(broker, group, topic), kcat_group(broker, group, topic)
    out_a, err_a = a.communicate(timeout=90)
    out_b, err_b = b.communicate(timeout=90)
    assert a.returncode == 0 and b.returncode == 0, err_a + err_b
    rows = parse(out_a) + parse(out_b)
    assert {v for _, _, v in rows} == set(range(400))
    # the committed offsets hold: a new member of the group reads only what was produced since
    produce(broker.bootstrap, topic, list(range(400, 440)), 4)
    c = kcat_group(broker, group, topic)
    out_c, err_c = c.communicate(timeout=90)
    assert c.returncode == 0, err_c
    rows = parse(out_c)
    assert {v for _, _, v in rows} == set(range(400, 440)), rows[:10]
    assert all(o >= 100 for _, o, _ in rows)
