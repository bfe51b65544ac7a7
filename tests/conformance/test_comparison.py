"""The comparison and normalisation of the conformance suite: they must see real differences."""

from __future__ import annotations

import uuid

from kafkawire.protocol import message_class

from conformance_suite import explain
from conformance_suite.build import build
from conformance_suite.compare import differences
from conformance_suite.normalise import Normaliser

MetadataResponse = message_class("MetadataResponse")


def _metadata(topic_id, *, error=0, partitions=(0,), leader=1, port=9092, message_host="h", cluster="c1"):
    R = MetadataResponse
    return R(
        throttle_time_ms=7,
        cluster_id=cluster,
        controller_id=1,
        brokers=[R.MetadataResponseBroker(node_id=1, host=message_host, port=port, rack=None)],
        topics=[
            R.MetadataResponseTopic(
                error_code=error,
                name="events",
                topic_id=topic_id,
                is_internal=False,
                partitions=[
                    R.MetadataResponsePartition(
                        error_code=0,
                        partition_index=p,
                        leader_id=leader,
                        leader_epoch=0,
                        replica_nodes=[leader],
                        isr_nodes=[leader],
                        offline_replicas=[],
                    )
                    for p in partitions
                ],
            )
        ],
    )


def _tree(message, version=12, node=1):
    return Normaliser(node).tree(message, version)


def test_identical_answers_from_different_brokers_compare_equal():
    a = _metadata(uuid.uuid4(), port=1111, message_host="a", cluster="x")
    b = _metadata(uuid.uuid4(), port=2222, message_host="b", cluster="y")
    assert differences(_tree(a), _tree(b)) == []


def test_an_error_code_difference_is_found_with_its_path():
    found = differences(_tree(_metadata(uuid.uuid4())), _tree(_metadata(uuid.uuid4(), error=3)))
    assert [(d.path, d.kafkawire, d.kafka) for d in found] == [("topics[events].error_code", 0, 3)]


def test_a_missing_partition_is_found():
    found = differences(
        _tree(_metadata(uuid.uuid4(), partitions=(0,))), _tree(_metadata(uuid.uuid4(), partitions=(0, 1)))
    )
    assert [(d.path, d.kafkawire, d.kafka) for d in found] == [
        ("topics[events].partitions[1]", "<absent>", "<present>")
    ]


def test_partitions_in_another_order_are_the_same_answer():
    assert (
        differences(
            _tree(_metadata(uuid.uuid4(), partitions=(0, 1))), _tree(_metadata(uuid.uuid4(), partitions=(1, 0)))
        )
        == []
    )


def test_a_wrong_topic_id_is_still_a_difference():
    # a broker that first reported one id for "events" and later another has answered with a wrong id
    first, wrong = uuid.uuid4(), uuid.uuid4()
    norm_a, norm_b = Normaliser(1), Normaliser(1)
    norm_a.tree(_metadata(first), 12)
    norm_b.tree(_metadata(uuid.uuid5(uuid.NAMESPACE_DNS, "b")), 12)
    later_a = norm_a.tree(_metadata(wrong), 12)
    later_b = norm_b.tree(_metadata(uuid.uuid5(uuid.NAMESPACE_DNS, "b")), 12)
    paths = [d.path for d in differences(later_a, later_b)]
    assert paths == ["topics[events].topic_id"]


def test_a_foreign_node_id_is_not_hidden():
    # node ids are normalised only when they are the broker's own id
    found = differences(_tree(_metadata(uuid.uuid4(), leader=1)), _tree(_metadata(uuid.uuid4(), leader=2)))
    assert {d.path for d in found} >= {"topics[events].partitions[0].leader_id"}


def test_member_ids_are_mapped_consistently():
    JoinGroupResponse = message_class("JoinGroupResponse")

    def joined(leader, member):
        return JoinGroupResponse(
            error_code=0,
            generation_id=1,
            protocol_type="consumer",
            protocol_name="range",
            leader=leader,
            member_id=member,
            members=[],
        )

    same = differences(Normaliser(1).tree(joined("m-1", "m-1"), 9), Normaliser(1).tree(joined("x-9", "x-9"), 9))
    assert same == []
    # the member is not the leader on one side: a difference, though every id is generated
    other = differences(Normaliser(1).tree(joined("m-1", "m-1"), 9), Normaliser(1).tree(joined("x-9", "y-2"), 9))
    assert [d.path for d in other] == ["member_id"]


def test_null_and_text_error_messages_differ_but_texts_do_not():
    R = message_class("CreateTopicsResponse")

    def answer(message):
        return R(topics=[R.CreatableTopicResult(name="t", error_code=37, error_message=message)])

    assert differences(_tree(answer("one text"), 7), _tree(answer("another"), 7)) == []
    assert [d.path for d in differences(_tree(answer(None), 7), _tree(answer("text"), 7))] == [
        "topics[t].error_message"
    ]


def test_build_drops_fields_a_version_lacks():
    data = {
        "topics": [
            {
                "topic": "t",
                "topic_id": uuid.uuid4(),
                "partitions": [
                    {"partition": 0, "fetch_offset": 5, "current_leader_epoch": 3, "partition_max_bytes": 10}
                ],
            }
        ],
        "max_wait_ms": 0,
        "min_bytes": 1,
        "isolation_level": 1,
    }
    old = build("Fetch", 4, data)
    new = build("Fetch", 13, data)
    old.encode(4)
    new.encode(13)
    assert old.topics[0].topic == "t" and new.topics[0].topic_id == data["topics"][0]["topic_id"]


def test_build_refuses_a_field_no_version_has():
    import pytest

    with pytest.raises(KeyError):
        build("Metadata", 12, {"topicz": []})


def test_explanations_match_narrowly(tmp_path):
    path = tmp_path / "explained.toml"
    path.write_text(
        '[[explained]]\napi = "Produce"\nversions = [0, 2]\nfield = "<answer>"\n'
        'kafka = "<connection closed>"\nreason = "r"\n'
    )
    entries = explain.load(path)
    assert explain.find(entries, "Produce", 1, "Produce/x", "<answer>", {}, "<connection closed>")
    assert not explain.find(entries, "Produce", 3, "Produce/x", "<answer>", {}, "<connection closed>")
    assert not explain.find(entries, "Fetch", 1, "Fetch/x", "<answer>", {}, "<connection closed>")
    assert not explain.find(entries, "Produce", 1, "Produce/x", "error_code", 0, 3)


def test_blanket_explanations_are_refused(tmp_path):
    import pytest

    path = tmp_path / "explained.toml"
    path.write_text('[[explained]]\napi = "Produce"\nversions = [0, 13]\nfield = "*"\nreason = "r"\n')
    with pytest.raises(ValueError):
        explain.load(path)


def test_brackets_in_explained_paths_are_literal(tmp_path):
    path = tmp_path / "explained.toml"
    path.write_text(
        '[[explained]]\napi = "Metadata"\nversions = [4, 13]\nfield = "topics[*].error_code"\nreason = "r"\n'
    )
    entries = explain.load(path)
    assert explain.find(entries, "Metadata", 4, "Metadata/x", "topics[cf<run>-a].error_code", 0, 3)
    assert not explain.find(entries, "Metadata", 4, "Metadata/x", "topics[a].partitions[0].error_code", 0, 3)
    assert not explain.find(entries, "Metadata", 4, "Metadata/x", "topics*.error_code", 0, 3)


def _describe_configs(synonyms, documentation="text"):
    R = message_class("DescribeConfigsResponse")
    return R(
        results=[
            R.DescribeConfigsResult(
                error_code=0,
                error_message="",
                resource_type=2,
                resource_name="t",
                configs=[
                    R.DescribeConfigsResourceResult(
                        name="retention.ms",
                        value="1",
                        read_only=False,
                        config_source=1,
                        is_sensitive=False,
                        config_type=5,
                        documentation=documentation,
                        synonyms=[R.DescribeConfigsSynonym(name=n, value="1", source=src) for n, src in synonyms],
                    )
                ],
            )
        ]
    )


def test_synonyms_are_compared_in_precedence_order():
    first = [("retention.ms", 1), ("log.retention.hours", 5)]
    found = differences(_tree(_describe_configs(first), 4), _tree(_describe_configs(first[::-1]), 4))
    assert [d.path for d in found] == ["results[t].configs[retention.ms].synonyms.<order>"]
    assert differences(_tree(_describe_configs(first), 4), _tree(_describe_configs(first), 4)) == []


def test_documentation_texts_do_not_differ_but_null_and_text_do():
    syn = [("retention.ms", 1)]
    assert differences(_tree(_describe_configs(syn, "ours"), 4), _tree(_describe_configs(syn, "theirs"), 4)) == []
    assert [d.path for d in differences(_tree(_describe_configs(syn, None), 4), _tree(_describe_configs(syn), 4))] == [
        "results[t].configs[retention.ms].documentation"
    ]


def _config_resources(resources):
    R = message_class("ListConfigResourcesResponse")
    return R(
        throttle_time_ms=0,
        error_code=0,
        config_resources=[R.ConfigResource(resource_name=n, resource_type=t) for n, t in resources],
    )


def test_listed_config_resources_compare_as_a_set_but_a_missing_one_is_found():
    listed = [("__consumer_offsets", 2), ("events", 2), ("1", 4)]
    assert differences(_tree(_config_resources(listed), 1), _tree(_config_resources(listed[::-1]), 1)) == []
    found = differences(_tree(_config_resources(listed), 1), _tree(_config_resources(listed[:2]), 1))
    assert found, "a resource only one broker lists must be a difference"


def test_cases_of_one_lane_never_run_at_once(monkeypatch):
    """Kafka batches the transaction checks of concurrent requests into one call whose error mapping is the
    first request's, so the corpus's transaction-checking cases share a lane; the runner must keep the lane
    to one case at a time while the other job goes on with cases outside it."""
    import threading
    import time

    from conformance_suite import runner
    from conformance_suite.corpus import CASES, Case
    from conformance_suite.corpus.transactions import TXN_VERIFICATION
    from conformance_suite.session import Broker

    lane_case_names = {c.name for c in CASES if c.lane == TXN_VERIFICATION}
    assert {"Produce/transactional-not-added", "TxnOffsetCommit/not-added"} <= lane_case_names

    # Lane cases back to back first (two workers take two of them at the start), then alternating.
    lane = [Case("Produce", f"lane/{i}", None, lane="x") for i in range(6)]
    free = [Case("Produce", f"free/{i}", None) for i in range(4)]
    cases = lane[:2] + [c for pair in zip(lane[2:], free) for c in pair]
    lock = threading.Lock()
    active: dict[str, int] = {}
    most = {"lane": 0, "all": 0}

    def fake_run_case(case, broker, common, prefix):
        with lock:
            active[case.name] = active.get(case.name, 0) + 1
            most["lane"] = max(most["lane"], sum(1 for n in active if n.startswith("lane/")))
            most["all"] = max(most["all"], len(active))
        time.sleep(0.05)
        with lock:
            active[case.name] -= 1
            if not active[case.name]:
                del active[case.name]
        return [], None

    monkeypatch.setattr(runner, "CASES", cases)
    monkeypatch.setattr(runner, "warm_up", lambda b: None)
    monkeypatch.setattr(runner, "_run_case", fake_run_case)
    kw, ka = Broker("kafkawire", "127.0.0.1", 1), Broker("kafka", "127.0.0.1", 2)
    report = runner.run(kw, ka, jobs=2, explanations=[])
    assert report.unexplained == []
    assert most["lane"] == 1
    assert most["all"] == 2  # the two jobs still overlap a lane case with a free one
