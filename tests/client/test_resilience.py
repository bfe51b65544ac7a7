"""The client across a broker restart: connections re-established, producer state renewed."""

from __future__ import annotations

import time

from kafkawire.client import Consumer, Producer


def test_producer_and_consumer_survive_a_broker_restart(private_broker, topic, tansu_gap):
    tansu_gap("a fetch beyond the log end gets no OFFSET_OUT_OF_RANGE")
    bootstrap = private_broker.bootstrap
    with Producer(bootstrap, linger_ms=0) as p, Consumer(bootstrap, auto_offset_reset="earliest") as c:
        for i in range(5):
            p.produce(topic, b"before-%d" % i, partition=0)
        p.flush(30)
        c.assign([(topic, 0)], offset="earliest")
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            got += c.poll(0.5)
        assert [r.value for r in got] == [b"before-%d" % i for i in range(5)]

        private_broker.restart()  # memory storage: the topic and our producer id are gone

        fut = p.produce(topic, b"after", partition=0)
        p.flush(60)
        meta = fut.result(0)
        assert meta.offset == 0  # a new log
        # the consumer's position (5) is past the new log's end: it resets to the earliest offset
        got = []
        deadline = time.monotonic() + 60
        while not got and time.monotonic() < deadline:
            got += c.poll(0.5)
        assert [(r.offset, r.value) for r in got] == [(0, b"after")]
