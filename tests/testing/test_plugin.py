"""The plugin's fixtures, markers and options, exercised by running small test files with ``pytester``."""

from __future__ import annotations

import importlib.util
import textwrap

import pytest

pytest_plugins = ["pytester"]


def run(pytester, source: str, *args: str):
    pytester.makepyfile(test_it=textwrap.dedent(source))
    return pytester.runpytest("-p", "no:cacheprovider", "-v", *args)


def test_plugin_is_registered_by_entry_point():
    from importlib.metadata import entry_points

    [ep] = [e for e in entry_points(group="pytest11") if e.name == "kafkawire"]
    assert ep.value == "kafkawire.testing.plugin"


def test_fixtures_give_a_broker_a_topic_and_an_admin(pytester):
    result = run(
        pytester,
        """
        import os, threading
        import pytest
        from kafkawire.client import NewTopic

        seen = []

        def test_broker(kafka_broker):
            host, port = kafka_broker.bootstrap.rsplit(":", 1)
            assert host == "127.0.0.1" and int(port) > 0
            assert kafka_broker.storage == "memory" and kafka_broker.mode == "subprocess"
            assert kafka_broker.data_dir.is_dir()
            assert not any(t.name == "kafkawire-broker" for t in threading.enumerate())   # not in this process
            seen.append(kafka_broker.bootstrap)

        def test_same_broker_for_the_session(kafka_broker):
            assert seen == [kafka_broker.bootstrap]

        def test_topic_exists_with_one_partition(kafka_topic, kafka_admin):
            assert "test_topic_exists" in kafka_topic
            assert sorted(kafka_admin.describe_topics([kafka_topic])[kafka_topic].partitions) == [0]

        def test_topics_are_fresh(kafka_topic, kafka_admin):
            assert kafka_topic in kafka_admin.list_topics()
            assert not any(t.startswith("test_topic_exists") for t in kafka_admin.list_topics())

        @pytest.mark.kafka_topic(partitions=3, configs={"cleanup.policy": "compact"})
        def test_topic_marker(kafka_topic, kafka_admin):
            assert sorted(kafka_admin.describe_topics([kafka_topic])[kafka_topic].partitions) == [0, 1, 2]
            assert kafka_admin.describe_configs(kafka_topic)["cleanup.policy"] == "compact"

        @pytest.mark.parametrize("kafka_topic", [2, {"partitions": 4, "configs": {"retention.ms": "60000"}}],
                                 indirect=True)
        def test_topic_indirect(kafka_topic, kafka_admin, request):
            want = 2 if request.node.callspec.id == "2" else 4
            assert len(kafka_admin.describe_topics([kafka_topic])[kafka_topic].partitions) == want
            if want == 4:
                assert kafka_admin.describe_configs(kafka_topic)["retention.ms"] == "60000"
    """,
    )
    result.assert_outcomes(passed=7)


def test_topic_is_deleted_after_the_test_even_when_it_fails(pytester):
    result = run(
        pytester,
        """
        made = []

        def test_a_fails(kafka_topic, kafka_admin):
            made.append(kafka_topic)
            assert kafka_topic in kafka_admin.list_topics()
            assert False, "on purpose"

        def test_b_checks(kafka_admin):
            assert made and made[0] not in kafka_admin.list_topics()

        def test_c_deletes_its_own_topic(kafka_topic, kafka_admin):
            kafka_admin.delete_topics([kafka_topic])   # the fixture's own delete then finds nothing: no error
    """,
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*kafkawire broker log (127.0.0.1:*)*"])  # the broker's log on the failure


def test_broker_config_marker_gives_brokers_per_setting(pytester):
    result = run(
        pytester,
        """
        import pytest
        from kafkawire.client import NewTopic

        brokers = {}

        def partitions_of_a_new_topic(admin, name):
            admin.create_topics([NewTopic(name)])            # the broker's num.partitions
            return len(admin.describe_topics([name])[name].partitions)

        def test_default(kafka_broker, kafka_admin):
            brokers["default"] = kafka_broker.bootstrap
            assert partitions_of_a_new_topic(kafka_admin, "d") == 1

        @pytest.mark.kafka_broker_config(num_partitions=4)
        def test_four(kafka_broker, kafka_admin):
            brokers.setdefault("four", set()).add(kafka_broker.bootstrap)
            assert kafka_broker.config == {"num.partitions": "4"}
            assert partitions_of_a_new_topic(kafka_admin, "f") == 4

        @pytest.mark.kafka_broker_config({"num.partitions": "4"})
        def test_four_again(kafka_broker, kafka_topic):
            brokers.setdefault("four", set()).add(kafka_broker.bootstrap)

        @pytest.mark.kafka_broker_config(num_partitions=2, auto_create_topics_enable="false")
        def test_two(kafka_broker, kafka_admin):
            brokers["two"] = kafka_broker.bootstrap
            assert partitions_of_a_new_topic(kafka_admin, "t") == 2

        def test_z_summary():
            assert len(brokers["four"]) == 1                  # equal settings share one broker
            assert len({brokers["default"], *brokers["four"], brokers["two"]}) == 3
    """,
    )
    result.assert_outcomes(passed=5)


def test_ini_config_and_storage_and_mode_options(pytester):
    pytester.makeini("""
        [pytest]
        kafka_broker_config =
            num.partitions=2
            # a comment
            log.segment.bytes=1048576
        kafka_broker_storage = disk
    """)
    source = """
        import threading
        from kafkawire.client import NewTopic, Producer

        def test_settings(kafka_broker, kafka_admin, kafka_topic, pytestconfig):
            mode = pytestconfig.getoption("kafka_broker_mode") or "subprocess"
            assert kafka_broker.mode == mode
            assert (mode == "thread") == any(t.name == "kafkawire-broker" for t in threading.enumerate())
            assert kafka_broker.storage == "segments"
            assert kafka_broker.config == {"num.partitions": "2", "log.segment.bytes": "1048576"}
            kafka_admin.create_topics([NewTopic("x")])
            assert len(kafka_admin.describe_topics(["x"])["x"].partitions) == 2
            with Producer(kafka_broker.bootstrap) as p:
                p.produce(kafka_topic, b"v")
                p.flush(30)
            assert list((kafka_broker.data_dir / f"{kafka_topic}-0").glob("*.log"))   # segments on disk
    """
    run(pytester, source).assert_outcomes(passed=1)
    run(pytester, source, "--kafka-broker-mode=thread").assert_outcomes(passed=1)


def test_bad_storage_option_is_a_usage_error(pytester):
    result = run(
        pytester,
        """
        def test_x(kafka_broker):
            pass
    """,
        "--kafka-broker-storage=tape",
    )
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*storage must be memory, segments or disk*"])


def test_tests_without_the_fixtures_start_no_broker(pytester):
    result = run(
        pytester,
        """
        from kafkawire.testing import plugin

        def test_plain():
            assert plugin._brokers == []
    """,
    )
    result.assert_outcomes(passed=1)


@pytest.mark.skipif(importlib.util.find_spec("xdist") is None, reason="pytest-xdist is not installed")
def test_xdist_workers_each_run_their_own_broker(pytester):
    out = pytester.path / "out"
    out.mkdir()
    pytester.makepyfile(
        test_it=textwrap.dedent(f"""
        import os, pytest
        from kafkawire.client import Consumer, Producer

        @pytest.mark.parametrize("i", range(6))
        def test_use(i, kafka_broker, kafka_topic):
            with Producer(kafka_broker.bootstrap) as p:
                p.produce(kafka_topic, b"%d" % i)
                p.flush(30)
            with Consumer(kafka_broker.bootstrap) as c:
                c.assign([(kafka_topic, 0)], offset="earliest")
                got = []
                for _ in range(20):
                    got += [r.value for r in c.poll(0.5)]
                    if got:
                        break
            assert got == [b"%d" % i]
            worker = os.environ["PYTEST_XDIST_WORKER"]
            with open(os.path.join({str(out)!r}, f"{{worker}}-{{i}}"), "w") as f:
                f.write(kafka_broker.bootstrap)
    """)
    )
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    by_worker: dict[str, set[str]] = {}
    for f in out.iterdir():
        by_worker.setdefault(f.name.split("-")[0], set()).add(f.read_text())
    assert sorted(by_worker) == ["gw0", "gw1"]
    assert all(len(b) == 1 for b in by_worker.values())  # one broker per worker...
    assert by_worker["gw0"] != by_worker["gw1"]  # ...each its own
