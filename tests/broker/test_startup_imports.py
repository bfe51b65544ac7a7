"""A broker start imports no module it does not use to serve (issue 14's start-up target): each of these costs
milliseconds of every start on a quiet machine, for something only another command, a TLS listener or a later
request needs. Counted in a fresh interpreter, as ``kafkawire serve`` starts."""

import json
import pathlib
import subprocess
import sys

from kafkawire.broker.storage.segments import plain_path

# module -> why a start should not need it
NOT_ON_START = {
    "pathlib": "with urllib.parse and ipaddress, ~2.5 ms: the segment engine needs only a normalized path string",
    "tempfile": "only a TLS listener's key store needs a temporary directory",
    "secrets": "only SCRAM (a salt, a server nonce) needs it",
    "random": "only the first fetch session's id needs it (and tempfile and secrets imported it)",
}

_PROBE = r"""
import json, socket, sys, threading
from kafkawire.cli.main import main
port = int(sys.argv[2])
def answer_then_stop():
    import os, time
    from kafkawire.protocol import encode_request, request_header, decode_response
    from kafkawire.protocol.messages import ApiVersionsRequest
    frame = encode_request(request_header(18, 3, 1, "probe"), ApiVersionsRequest(client_software_name="probe"))
    for _ in range(600):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(frame)
                size = int.from_bytes(s.recv(4, socket.MSG_WAITALL), "big")
                decode_response(s.recv(size, socket.MSG_WAITALL), 18, 3, framed=False)
                break
        except OSError:
            time.sleep(0.05)
    # what the broker loaded to answer, and what this probe imported (which imports none of NOT_ON_START)
    print(json.dumps(sorted(sys.modules)), flush=True)
    os._exit(0)
threading.Thread(target=answer_then_stop, daemon=True).start()
main(["serve", "--listen", f"127.0.0.1:{port}", "--data-dir", sys.argv[3], "--storage", sys.argv[1]])
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _loaded_on_start(storage: str, data_dir) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, storage, str(_free_port()), str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_a_memory_or_disk_broker_start_imports_none_of_the_modules_it_does_not_need(tmp_path):
    for storage in ("memory", "segments"):
        loaded = _loaded_on_start(storage, tmp_path / storage)
        assert "kafkawire.broker.server" in loaded, "the probe did not see the broker's modules"
        unexpected = {name: why for name, why in NOT_ON_START.items() if name in loaded}
        assert not unexpected, f"{storage}: imported on start: {unexpected}"


def test_the_segment_engine_normalizes_its_directory_as_pathlib_does():
    for case in ("", ".", "/", "//", "///", "//a", "///a//b/", "a/", "./a", "a/./b//c/.", "../x/..", "d ir/ä"):
        assert plain_path(case) == str(pathlib.Path(case)), case
    assert plain_path(pathlib.Path("q/./r/")) == "q/r"
    assert plain_path(b"/b/./y") == "/b/y"


_PREPARED = r"""
import asyncio, json, sys
from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.server import Broker
from kafkawire.protocol import apis, message_class

async def main():
    broker = Broker(BrokerConfig(port=0, storage="segments", data_dir=sys.argv[1]))
    await broker.start()
    try:
        print(json.dumps({
            "handler": "kafkawire.broker.handlers.versions" in sys.modules,
            "registry": apis._registry.cache_info().currsize == 1,
            "header": 0 in message_class("ResponseHeader")._codecs,
        }))
    finally:
        await broker.stop()

asyncio.run(main())
"""


def test_a_disk_broker_prepares_what_a_first_connection_needs_while_its_metadata_log_is_written(tmp_path):
    # made in the loop's thread while the storage thread waits for the metadata log's fsyncs, rather than by the
    # first client's ApiVersions after them
    out = subprocess.run(
        [sys.executable, "-c", _PREPARED, str(tmp_path)], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == {"handler": True, "registry": True, "header": True}
