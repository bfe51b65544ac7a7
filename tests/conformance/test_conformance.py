"""kafkawire against Apache Kafka 4.4: the conformance suite (tools/conformance.py) as a test.

One run of the whole corpus against a kafkawire and a reference Kafka both started here
(fails in CI, skips elsewhere, when Kafka cannot run). The assertions are the suite's promises:
no unexplained difference, at least 2,000 compared pairs, and a compared pair at every version of
every API both brokers serve.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance_suite import runner

MIN_PAIRS = 2000


@pytest.fixture(scope="module")
def fresh_kafka(tmp_path_factory):
    """A Kafka node of its own: the session's shared reference has topics and groups from other tests,
    and cases that list everything (ListConfigResources, ListGroups) must see the same world on both
    brokers."""
    from conftest import reference_unavailable
    from kafka_reference import KafkaUnavailable, ReferenceKafka

    kafka = ReferenceKafka(tmp_path_factory.mktemp("conformance-kafka"))
    try:
        kafka.start()
    except KafkaUnavailable as exc:
        kafka.close()
        reference_unavailable(str(exc))
    yield kafka
    kafka.close()


@pytest.fixture(scope="module")
def report(fresh_kafka):
    with runner.kafkawire_broker() as kafkawire:
        result = runner.run(
            runner.broker("kafkawire", kafkawire), runner.broker("kafka", fresh_kafka.bootstrap), jobs=2
        )
    Path("/tmp/conformance-diffs.txt").write_text("".join(u.line() + "\n" for u in result.unexplained))
    return result


def test_enough_pairs_are_compared(report):
    assert report.pairs >= MIN_PAIRS, report.api_table()


def test_every_version_both_serve_is_compared(report):
    assert report.uncovered() == [], "versions both brokers serve without a compared pair"


def test_no_unexplained_differences(report):
    lines = [u.line() for u in report.unexplained]
    assert not lines, f"{len(lines)} unexplained differences:\n" + "\n".join(lines[:200])
