"""A broker's stop closes its coordinators' timers before it closes storage: a member's session timeout or a
pending member's expiry must not fire against a closed log when the loop lives on (embedded brokers, tests)."""

from __future__ import annotations

from kafkawire.broker.groups.timers import LoopScheduler
from kafkawire.broker.server import start_in_thread
from kafkawire.protocol import errors
from kafkawire.protocol.messages import JoinGroupRequest

from .wire import WireClient


def test_stop_cancels_the_group_timers_a_member_left_pending():
    broker = start_in_thread()
    try:
        client = WireClient("127.0.0.1", broker.port)
        try:
            # JoinGroup v4+ without a member id: MEMBER_ID_REQUIRED, and a pending-member expiry timer.
            answer = client.call(
                "JoinGroup",
                5,
                group_id="timers",
                session_timeout_ms=30_000,
                rebalance_timeout_ms=30_000,
                member_id="",
                protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
            )
            assert answer.error_code == errors.MEMBER_ID_REQUIRED
        finally:
            client.sock.close()
        scheduler = broker.call(lambda: broker.broker._scheduler)
        assert isinstance(scheduler, LoopScheduler)
        assert broker.call(scheduler.pending) >= 1
    finally:
        broker.stop()
    assert broker._stopped.wait(120), "the broker's loop did not finish stopping"  # stop() waits 10 s at most
    assert scheduler.pending() == 0
    late = scheduler.call_later(0, lambda: (_ for _ in ()).throw(AssertionError("fired after stop")))
    assert late.cancelled
