"""``terminate_all`` and ``stop_signals`` of kafkawire.testing._process, the stop that the broker launcher and the
cluster tools (tools/kafka_cluster.py, tools/spark_cluster.py) share, on plain child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from kafkawire.testing._process import stop_signals, terminate, terminate_all

# a child that says it is ready, then either waits to be signalled or ignores SIGTERM
CHILD = """
import signal, sys, time
if sys.argv[1] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(120)
"""


def _child(kind: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, kind], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"  # its SIGTERM disposition is set
    return proc


def test_terminate_all_signals_every_process_and_kills_those_still_running_after_the_grace():
    procs = [_child("polite"), _child("stubborn"), _child("polite")]
    try:
        codes = terminate_all([procs[0], None, procs[1], procs[2]], signal.SIGTERM, grace=2.0)
        assert codes == [-signal.SIGTERM, None, -signal.SIGKILL, -signal.SIGTERM]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_terminate_of_one_process_and_of_an_exited_one():
    proc = _child("polite")
    assert terminate(proc, signal.SIGTERM, grace=10.0) == -signal.SIGTERM
    assert terminate(proc, signal.SIGTERM, grace=10.0) == -signal.SIGTERM  # already gone: its code again
    assert terminate(None) is None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_stop_signals_raises_once_then_ignores_until_the_block_ends(sig):
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    # as in a background job of a non-interactive shell: SIGINT ignored on entry
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        unwound = []
        with pytest.raises(KeyboardInterrupt):
            with stop_signals():
                try:
                    os.kill(os.getpid(), sig)
                    signal.pause()  # the handler raises here, if the signal did not already interrupt
                finally:
                    os.kill(os.getpid(), signal.SIGINT)  # a second signal during the cleanup: ignored
                    unwound.append(True)
        assert unwound == [True]
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # what was there before the block
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
