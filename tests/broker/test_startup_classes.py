"""A broker start builds no dataclass beyond the few that need one (issue 14's start-up target).

Python 3.11 builds each dataclass by exec'ing a generated ``__init__``, ``__repr__`` and ``__eq__``: ~0.3 ms a
class, ~28 ms of a ~160 ms start before the start path's classes became msgspec structs (~0.01 ms a class).
The start runs in a fresh interpreter so every module on the path is imported, and the classes are counted,
not timed.
"""

import json
import subprocess
import sys

# dataclasses a start may still build, and why they are not structs
ALLOWED = {
    # protocol/codegen.py, a module owned by the code generator's work
    "kafkawire.protocol.codegen.Codec",
    # hides the listener's plain passwords from repr (field(repr=False)), which a msgspec struct cannot
    "kafkawire.security.listeners.Listener",
}

_PROBE = r"""
import dataclasses, json, sys, tempfile
built = []
_process = dataclasses._process_class
def _count(cls, *args, **kwargs):
    built.append(f"{cls.__module__}.{cls.__qualname__}")
    return _process(cls, *args, **kwargs)
dataclasses._process_class = _count
@dataclasses.dataclass
class Probe:  # shows the count reaches dataclasses
    x: int = 0
import kafkawire.cli.serve  # what `kafkawire serve` loads before it starts the broker
from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.server import start_in_thread
broker = start_in_thread(BrokerConfig(port=0, storage=sys.argv[1], data_dir=tempfile.mkdtemp()))
broker.stop()
print(json.dumps(built))
"""


def _built_on_start(storage: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, storage], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    built = json.loads(out.strip().splitlines()[-1])
    assert "__main__.Probe" in built, "the probe's own dataclass was not seen: the count no longer reaches dataclasses"
    return {name for name in built if name.startswith("kafkawire.")}


def test_a_memory_or_disk_broker_start_builds_only_the_allowed_dataclasses():
    for storage in ("memory", "segments"):
        built = _built_on_start(storage)
        assert built <= ALLOWED, f"{storage}: dataclasses built on start: {sorted(built - ALLOWED)}"
