"""Topic and broker config changes write (and fsync) the KRaft metadata log off the event loop: while a change's
write is held, the broker answers other requests; the change's answer goes out only after its write returned;
changes queued behind it are written in arrival order, each validated against the one before."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.server import start_in_thread
from kafkawire.protocol import decode_response, encode_request, message_class, request_header

IAC = message_class("IncrementalAlterConfigsRequest")


def _send(sock, body, version: int, correlation: int) -> None:
    sock.sendall(encode_request(request_header(body.api_key, version, correlation, "off-loop"), body))


def _receive(sock, body, version: int):
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    return decode_response(sock.recv(size, socket.MSG_WAITALL), body.api_key, version, framed=False).body


def _alter(resource_type: int, name: str, key: str, op: int, value: str | None):
    return IAC(
        resources=[
            IAC.AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=[IAC.AlterableConfig(name=key, config_operation=op, value=value)],
            )
        ],
        validate_only=False,
    )


class Gate:
    """Wraps a storage/metadata call: each call records its arguments and waits until released."""

    def __init__(self, fn):
        self.fn, self.calls, self.entered = fn, [], threading.Semaphore(0)
        self.release = threading.Event()
        self.written: list = []

    def __call__(self, *args):
        self.calls.append(args)
        self.entered.release()
        assert self.release.wait(60), "never released"
        out = self.fn(*args)
        self.written.append(args)
        return out


@pytest.mark.parametrize("resource", ["topic", "broker"])
def test_config_changes_are_written_off_the_loop_in_order(resource, tmp_path):
    b = start_in_thread(BrokerConfig(port=0, storage="segments", data_dir=str(tmp_path / "data")))
    try:
        broker = b.broker
        host, port = b.address if isinstance(b.address, tuple) else b.address.rsplit(":", 1)
        CT = message_class("CreateTopicsRequest")
        with socket.create_connection((host, int(port)), timeout=30) as s:
            body = CT(topics=[CT.CreatableTopic(name="t", num_partitions=1, replication_factor=1)], timeout_ms=30000)
            _send(s, body, 7, 1)
            assert _receive(s, body, 7).topics[0].error_code == 0
        if resource == "topic":
            target, attr, rtype, name = broker.storage, "set_topic_configs", 2, "t"
        else:
            target, attr, rtype, name = broker.metadata_log, "save_configs", 4, str(broker.node_id)
        gate = Gate(getattr(target, attr))
        setattr(target, attr, gate)
        try:
            first = socket.create_connection((host, int(port)), timeout=30)
            second = socket.create_connection((host, int(port)), timeout=30)
            other = socket.create_connection((host, int(port)), timeout=30)
            # cleanup.policy (topic) / log.cleaner.threads (broker): the second change builds on the first
            if resource == "topic":
                a, c = (
                    _alter(rtype, name, "cleanup.policy", 0, "compact"),
                    _alter(rtype, name, "cleanup.policy", 2, "delete"),
                )
            else:
                a, c = (
                    _alter(rtype, name, "log.cleaner.threads", 0, "2"),
                    _alter(rtype, name, "log.cleaner.threads", 1, None),
                )
            _send(first, a, 1, 2)
            assert gate.entered.acquire(timeout=30), "the change never reached its write"
            _send(second, c, 1, 3)
            # the write is held: the loop still answers another client
            MD = message_class("MetadataRequest")
            md = MD(topics=None, allow_auto_topic_creation=False)
            _send(other, md, 12, 4)
            assert [t.name for t in _receive(other, md, 12).topics] == ["t"]
            # ...and the change is not acknowledged before its write returns
            first.setblocking(False)
            with pytest.raises(BlockingIOError):
                first.recv(1)
            first.setblocking(True)
            assert len(gate.calls) == 1  # the second change waits behind the first
            gate.release.set()
            assert _receive(first, a, 1).responses[0].error_code == 0
            assert _receive(second, c, 1).responses[0].error_code == 0
            assert len(gate.written) == 2
            if resource == "topic":
                assert [args[1].get("cleanup.policy") for args in gate.written] == ["compact", "compact,delete"]
            else:
                assert [args[2].get("log.cleaner.threads") for args in gate.written] == ["2", None]
            for sock in (first, second, other):
                sock.close()
        finally:
            setattr(target, attr, gate.fn)
    finally:
        b.stop()
