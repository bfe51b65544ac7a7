"""A broker whose reported end offset is behind the records it serves: ``read_range`` warns (no Spark).

The end offset is faked by patching the client's ``Consumer.end_offsets``; the broker itself is kafkawire
and its fetch answers (records and high watermark) are real.
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from kafkawire.client import Consumer
from kafkawire.spark import kafka_access

N = 12_000


@pytest.fixture(scope="module")
def full_partition(broker):
    from confluent_kafka import Producer

    topic = broker.new_topic("wrong-end", partitions=1)
    p = Producer(dict(broker.producer_conf(), **{"linger.ms": 50}))
    for i in range(N):
        p.produce(topic, b"v%d" % i, partition=0)
    assert p.flush(60) == 0
    return topic


def _read(broker, topic, start, end):
    batches = list(
        kafka_access.read_range(
            {"bootstrap.servers": broker.bootstrap}, topic, 0, start, end, include_headers=False, fail_on_data_loss=True
        )
    )
    return pa.Table.from_batches(batches, schema=kafka_access.arrow_read_schema(False))


def _warnings(caplog):
    return [r for r in caplog.records if r.name == "kafkawire.spark" and r.levelno == logging.WARNING]


def test_records_past_a_wrong_end_offset_are_warned_about(broker, full_partition, monkeypatch, caplog):
    if broker.kind != "kafkawire":
        pytest.skip("checks the fetch high watermark of kafkawire's broker")
    monkeypatch.setattr(Consumer, "end_offsets", lambda self, tps: {tuple(tp): 3 for tp in tps})
    caplog.set_level(logging.WARNING, logger="kafkawire.spark")
    table = _read(broker, full_partition, 0, 3)
    assert table.column("offset").to_pylist() == [0, 1, 2]  # the range asked for, nothing more
    [w] = _warnings(caplog)
    assert w.args == (full_partition, 0, 3, N - 1)  # partition, the end it was told, what exists
    assert f"{full_partition}-0" in w.getMessage() and "end offset 3" in w.getMessage()


def test_a_topic_that_grew_meanwhile_is_not_warned_about(broker, full_partition, monkeypatch, caplog):
    real = Consumer.end_offsets
    answers = []

    def first_stale_then_real(self, tps):
        # the first answer is from before the topic grew; later ones are the broker's own
        answers.append(1)
        return {tuple(tp): 3 for tp in tps} if len(answers) == 1 else real(self, tps)

    monkeypatch.setattr(Consumer, "end_offsets", first_stale_then_real)
    caplog.set_level(logging.WARNING, logger="kafkawire.spark")
    table = _read(broker, full_partition, 0, 3)
    assert table.column("offset").to_pylist() == [0, 1, 2]
    assert len(answers) == 2  # asked again once, having seen records past 3
    assert _warnings(caplog) == []


def test_a_range_below_the_true_end_asks_nothing_more(broker, full_partition, monkeypatch, caplog):
    real = Consumer.end_offsets
    calls = []
    monkeypatch.setattr(Consumer, "end_offsets", lambda self, tps: calls.append(1) or real(self, tps))
    caplog.set_level(logging.WARNING, logger="kafkawire.spark")
    table = _read(broker, full_partition, 100, 200)
    assert table.column("offset").to_pylist() == list(range(100, 200))
    assert len(calls) == 1 and _warnings(caplog) == []
