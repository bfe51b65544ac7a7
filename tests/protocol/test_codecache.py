"""The disk cache of compiled codec code (kafkawire.protocol.codecache): used only for the very source it was
compiled from, rebuilt when damaged, off when asked, and never in the way of a decode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkawire.protocol import codecache

SOURCE = "def f(x):\n    return x + 1\n"
OTHER = "def f(x):\n    return x + 2\n"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKAWIRE_CODEC_CACHE", str(tmp_path / "codecs"))
    monkeypatch.setattr(codecache, "_directory", False)  # looked up again under the environment above
    yield tmp_path / "codecs" / sys.implementation.cache_tag
    monkeypatch.setattr(codecache, "_directory", False)


def run(code) -> int:
    ns: dict = {}
    exec(code, ns)
    return ns["f"](1)


def no_compile(monkeypatch):
    def refuse(*args):
        raise AssertionError("compiled although the cache holds this source")

    monkeypatch.setattr(codecache, "compile", refuse, raising=False)  # shadows the builtin in the module


def test_a_second_use_loads_the_kept_code_without_compiling(cache_dir, monkeypatch):
    assert run(codecache.compiled(SOURCE, "<t>")) == 2
    (entry,) = cache_dir.iterdir()
    no_compile(monkeypatch)
    assert run(codecache.compiled(SOURCE, "<t>")) == 2
    assert list(cache_dir.iterdir()) == [entry]


def test_an_entry_of_another_source_under_the_same_name_is_not_used(cache_dir):
    codecache.compiled(SOURCE, "<t>")
    (entry,) = cache_dir.iterdir()
    # another source's entry in this source's place (a checksum collision, or a file put there)
    other = cache_dir / "other"
    other.mkdir()
    codecache._directory = str(other)
    codecache.compiled(OTHER, "<t>")
    (other_entry,) = other.iterdir()
    codecache._directory = str(cache_dir)
    entry.write_bytes(other_entry.read_bytes())
    assert run(codecache.compiled(SOURCE, "<t>")) == 2
    assert run(codecache.compiled(OTHER, "<t>")) == 3


@pytest.mark.parametrize("damage", [b"", b"\x00" * 7, b"not zlib", "truncated"])
def test_a_damaged_entry_is_compiled_again_and_rewritten(cache_dir, monkeypatch, damage):
    codecache.compiled(SOURCE, "<t>")
    (entry,) = cache_dir.iterdir()
    good = entry.read_bytes()
    entry.write_bytes(good[: len(good) // 2] if damage == "truncated" else damage)
    assert run(codecache.compiled(SOURCE, "<t>")) == 2
    assert entry.read_bytes() == good
    no_compile(monkeypatch)
    assert run(codecache.compiled(SOURCE, "<t>")) == 2


def test_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKAWIRE_CODEC_CACHE", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(codecache, "_directory", False)
    assert run(codecache.compiled(SOURCE, "<t>")) == 2
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(codecache, "_directory", False)


def test_a_cache_that_cannot_be_made_is_no_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("KAFKAWIRE_CODEC_CACHE", str(blocker / "codecs"))  # under a file: makedirs fails
    monkeypatch.setattr(codecache, "_directory", False)
    assert run(codecache.compiled(SOURCE, "<t>")) == 2
    assert codecache._directory is None
    monkeypatch.setattr(codecache, "_directory", False)


DECODE = """
import json, sys
from kafkawire.protocol import decode_response, encode_response, message_class
R = message_class("MetadataResponse")
body = R(
    throttle_time_ms=0,
    brokers=[R.MetadataResponseBroker(node_id=1, host="h", port=9092, rack=None)],
    cluster_id="c",
    controller_id=1,
    topics=[],
)
data = encode_response(7, body, 12)
back = decode_response(data, 3, 12).body
print(json.dumps([back.cluster_id, back.brokers[0].port, data.hex()]))
"""


def test_processes_sharing_a_cache_encode_and_decode_alike(tmp_path):
    """A real codec through the cache: the process that writes the entries and the one that loads them give
    the same bytes and objects as a process with the cache off."""
    env = {**os.environ, "KAFKAWIRE_CODEC_CACHE": str(tmp_path / "codecs")}
    outs = []
    for setting in (str(tmp_path / "codecs"), str(tmp_path / "codecs"), "off"):
        env["KAFKAWIRE_CODEC_CACHE"] = setting
        done = subprocess.run([sys.executable, "-c", DECODE], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        outs.append(json.loads(done.stdout))
    assert outs[0] == outs[1] == outs[2]
    assert outs[0][:2] == ["c", 9092]
    assert any(Path(tmp_path / "codecs" / sys.implementation.cache_tag).iterdir())
