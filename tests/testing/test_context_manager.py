"""``kafkawire.testing.broker()``: a broker for a ``with`` block (unittest, scripts), stopped at its end."""

from __future__ import annotations

import signal
import textwrap
import threading

import pytest

import kafkawire.testing
from kafkawire.client import Admin, Consumer, NewTopic, Producer
from kafkawire.testing._broker import KafkaBroker, answers

pytest_plugins = ["pytester"]


def _read_back(bootstrap: str, topic: str) -> list[bytes]:
    with Consumer(bootstrap) as c:
        c.assign([(topic, 0)], offset="earliest")
        got: list[bytes] = []
        for _ in range(20):
            got += [r.value for r in c.poll(0.5)]
            if len(got) >= 5:
                break
    return got


def _round_trip(bootstrap: str, topic: str) -> list[bytes]:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    with Producer(bootstrap) as p:
        for i in range(5):
            p.produce(topic, b"v%d" % i)
        p.flush(30)
    return _read_back(bootstrap, topic)


@pytest.mark.parametrize("mode", ["subprocess", "thread"])
def test_context_manager_serves_then_stops(mode):
    with kafkawire.testing.broker(mode=mode, num_partitions=3) as b:
        host, port = b.bootstrap.rsplit(":", 1)
        assert host == "127.0.0.1" and b.running and b.mode == mode
        root = b.log_path.parent
        assert b.data_dir.is_dir() and root.is_dir()
        with Admin(b.bootstrap) as admin:
            admin.create_topics([NewTopic("cm")])
            assert len(admin.describe_topics(["cm"])["cm"].partitions) == 3  # num_partitions=3 applied
        assert _round_trip(b.bootstrap, "cm-one") == [b"v%d" % i for i in range(5)]
        proc = b.process
        assert (proc is not None) == (mode == "subprocess")
    assert not b.running
    assert not answers(host, int(port), timeout=1.0)  # nothing answers on its port any more
    assert not root.exists()  # its temporary directory is gone
    if mode == "subprocess":
        assert proc.returncode is not None  # the process has exited
    else:
        assert not any(t.name == "kafkawire-broker" and t.is_alive() for t in threading.enumerate())


def test_context_manager_stops_when_the_block_raises():
    with pytest.raises(ZeroDivisionError):
        with kafkawire.testing.broker() as b:
            proc = b.process
            1 / 0
    assert proc.poll() is not None and not b.running


def test_given_data_dir_is_kept_and_disk_storage_writes_there(tmp_path):
    data = tmp_path / "data"
    with kafkawire.testing.broker(storage="disk", data_dir=data) as b:
        assert b.storage == "segments"
        assert _round_trip(b.bootstrap, "kept") == [b"v%d" % i for i in range(5)]
    assert list((data / "kept-0").glob("*.log"))  # the segments outlive the broker
    with kafkawire.testing.broker(storage="disk", data_dir=data) as again:  # and a new broker reads them
        assert _read_back(again.bootstrap, "kept") == [b"v%d" % i for i in range(5)]


@pytest.mark.parametrize("mode", ["subprocess", "thread"])
def test_restart_keeps_the_port_and_the_data(mode):
    with kafkawire.testing.broker(storage="disk", mode=mode) as b:
        bootstrap = b.bootstrap
        first = b.process
        assert _round_trip(bootstrap, "restarted") == [b"v%d" % i for i in range(5)]
        b.restart()
        assert b.running and b.bootstrap == bootstrap
        if mode == "subprocess":
            assert first.returncode == 0 and b.process.pid != first.pid  # stopped cleanly, a new process
        assert _read_back(bootstrap, "restarted") == [b"v%d" % i for i in range(5)]


def test_kill_is_a_crash_and_start_brings_the_broker_back_with_its_data():
    with kafkawire.testing.broker(storage="disk") as b:
        bootstrap = b.bootstrap
        assert _round_trip(bootstrap, "crashed") == [b"v%d" % i for i in range(5)]  # acks=all: on disk
        proc = b.process
        b.kill()
        assert proc.returncode == -signal.SIGKILL and not b.running
        host, port = bootstrap.rsplit(":", 1)
        assert not answers(host, int(port), timeout=1.0)
        b.start()
        assert b.running and b.bootstrap == bootstrap
        assert _read_back(bootstrap, "crashed") == [b"v%d" % i for i in range(5)]


def test_a_thread_broker_cannot_be_killed():
    with kafkawire.testing.broker(mode="thread") as b:
        with pytest.raises(ValueError, match="subprocess"):
            b.kill()
        assert b.running


def test_bad_settings_are_refused_before_anything_starts():
    with pytest.raises(ValueError, match="storage"):
        KafkaBroker(storage="tape")
    with pytest.raises(ValueError, match="mode"):
        KafkaBroker(mode="container")


def test_a_broker_that_cannot_start_says_why():
    b = KafkaBroker(config={"num.partitions": "not-a-number"}, start_timeout=20)
    with pytest.raises(RuntimeError, match="exited with code"):
        b.start()
    assert not b.running


def test_unittest_class_with_the_context_manager(pytester):
    pytester.makepyfile(
        test_ut=textwrap.dedent("""
        import unittest
        import kafkawire.testing
        from kafkawire.client import Admin, NewTopic

        class TopicsTest(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                cls.broker = cls.enterClassContext(kafkawire.testing.broker())

            def test_create(self):
                with Admin(self.broker.bootstrap) as admin:
                    admin.create_topics([NewTopic("orders", 2)])
                    self.assertEqual(sorted(admin.describe_topics(["orders"])["orders"].partitions), [0, 1])

        if __name__ == "__main__":
            unittest.main()
    """)
    )
    result = pytester.runpython(pytester.path / "test_ut.py")
    assert result.ret == 0, result.stderr.str()
    assert "OK" in result.stderr.str()
