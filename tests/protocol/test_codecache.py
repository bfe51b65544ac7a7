"""The disk cache of compiled codec code (kafkawire.protocol.codecache): used only for the very source it was
compiled from, rebuilt when damaged, off when asked, and never in the way of a decode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkawire.protocol import codecache

SOURCE = "def f(x):\n    return x + 1\n"
OTHER = "def f(x):\n    return x + 2\n"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKAWIRE_CODEC_CACHE", str(tmp_path / "codecs"))
    monkeypatch.setattr(codecache, "_directory", False)  # looked up again under the environment above
    monkeypatch.setattr(codecache, "_pruned", False)  # this process's one prune not spent yet
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


def source(n: int) -> str:
    return f"def f(x):\n    return x + {n}\n"


def aged_entries(cache_dir, monkeypatch, count: int) -> list[Path]:
    """``count`` entries, written without a prune, the first the least recently used (an hour apart)."""
    monkeypatch.setattr(codecache, "_pruned", True)
    paths = []
    now = time.time()
    for n in range(count):
        before = set(cache_dir.iterdir()) if cache_dir.exists() else set()
        codecache.compiled(source(n), "<t>")
        (path,) = set(cache_dir.iterdir()) - before
        os.utime(path, (now - (count - n) * 3600, now - (count - n) * 3600))
        paths.append(path)
    monkeypatch.setattr(codecache, "_pruned", False)
    return paths


def test_a_miss_over_the_limit_removes_the_least_recently_used_down_to_half(cache_dir, monkeypatch):
    monkeypatch.setattr(codecache, "_LIMIT", 8)
    old = aged_entries(cache_dir, monkeypatch, 10)
    assert run(codecache.compiled(source(100), "<t>")) == 101  # a miss: written, then 11 > 8 entries
    (new,) = set(cache_dir.iterdir()) - set(old)
    assert set(cache_dir.iterdir()) == {*old[-3:], new}
    # once per process: later misses leave the directory over the limit until another process writes
    for n in range(200, 210):
        codecache.compiled(source(n), "<t>")
    assert len(list(cache_dir.iterdir())) == 14


def test_a_prune_lists_at_most_twice_the_limit(cache_dir, monkeypatch):
    """A directory grown far past the limit (by a kafkawire without the bound) costs one process a listing of
    twice the limit, and shrinks over several processes."""
    monkeypatch.setattr(codecache, "_LIMIT", 4)
    aged_entries(cache_dir, monkeypatch, 12)
    codecache.compiled(source(100), "<t>")  # 13 entries; 8 listed, the oldest 6 of those removed
    assert len(list(cache_dir.iterdir())) == 7
    monkeypatch.setattr(codecache, "_pruned", False)  # as the next process
    codecache.compiled(source(101), "<t>")  # 8 entries, all listed: down to 2
    assert len(list(cache_dir.iterdir())) == 2


def test_a_miss_under_the_limit_removes_nothing(cache_dir, monkeypatch):
    monkeypatch.setattr(codecache, "_LIMIT", 8)
    old = aged_entries(cache_dir, monkeypatch, 7)
    codecache.compiled(source(100), "<t>")  # 8 entries: at the limit, not over
    assert set(old) < set(cache_dir.iterdir()) and len(list(cache_dir.iterdir())) == 8


def test_a_hit_refreshes_the_entry_so_a_prune_keeps_it(cache_dir, monkeypatch):
    monkeypatch.setattr(codecache, "_LIMIT", 8)
    old = aged_entries(cache_dir, monkeypatch, 10)
    monkeypatch.setattr(codecache, "_pruned", True)
    with monkeypatch.context() as m:
        no_compile(m)
        assert run(codecache.compiled(source(0), "<t>")) == 1  # the oldest entry, loaded
    assert old[0].stat().st_mtime > old[-1].stat().st_mtime
    monkeypatch.setattr(codecache, "_pruned", False)
    codecache.compiled(source(100), "<t>")
    (new,) = set(cache_dir.iterdir()) - set(old)
    assert set(cache_dir.iterdir()) == {old[0], *old[-2:], new}


def test_temporary_files_older_than_an_hour_are_removed_and_newer_kept(cache_dir, monkeypatch):
    codecache.compiled(SOURCE, "<t>")
    (entry,) = cache_dir.iterdir()
    killed = cache_dir / f"{entry.name}.999-1.tmp"  # as a writer killed between open and rename leaves it
    writing = cache_dir / f"{entry.name}.998-1.tmp"
    for path in (killed, writing):
        path.write_bytes(b"half an entr")
    hour_ago = time.time() - 3700
    os.utime(killed, (hour_ago, hour_ago))
    os.utime(entry, (hour_ago, hour_ago))  # an entry as old is only an entry: under the limit it stays
    monkeypatch.setattr(codecache, "_pruned", False)
    codecache.compiled(OTHER, "<t>")
    assert not killed.exists()
    assert writing.exists() and entry.exists()
    assert len(list(cache_dir.glob("*.bin"))) == 2


def test_a_read_only_cache_still_decodes_and_keeps_its_entries(cache_dir, monkeypatch):
    monkeypatch.setattr(codecache, "_LIMIT", 4)
    old = aged_entries(cache_dir, monkeypatch, 6)
    stale = cache_dir / "0-0.bin.1-1.tmp"
    stale.write_bytes(b"")
    os.utime(stale, (0, 0))
    before = {p: p.stat().st_mtime_ns for p in cache_dir.iterdir()}
    cache_dir.chmod(0o555)
    try:
        with monkeypatch.context() as m:
            # root ignores a directory's mode: refuse every change as a read-only mount (EROFS) would
            def refuse(*args, **kwargs):
                raise OSError(30, "Read-only file system")

            for name in ("utime", "unlink", "replace"):
                m.setattr(codecache.os, name, refuse)
            real_open = open
            m.setattr(
                codecache,
                "open",
                lambda path, mode="r", *a, **k: refuse() if "w" in mode else real_open(path, mode, *a, **k),
                raising=False,
            )
            with monkeypatch.context() as hit:
                no_compile(hit)  # a failed refresh does not cost the entry
                assert run(codecache.compiled(source(0), "<t>")) == 1
            assert run(codecache.compiled(source(100), "<t>")) == 101  # a miss: no write, a prune that fails
            assert codecache._pruned
    finally:
        cache_dir.chmod(0o755)
    assert {p: p.stat().st_mtime_ns for p in cache_dir.iterdir()} == before
    assert set(old) < set(before)


def test_an_entry_pruned_by_another_process_is_compiled_again(cache_dir, monkeypatch):
    """Two processes pruning at once: the second's unlinks of what the first removed are ignored, and a
    reader whose entry went compiles and writes it again."""
    monkeypatch.setattr(codecache, "_LIMIT", 8)
    old = aged_entries(cache_dir, monkeypatch, 10)
    listed = list(os.scandir(cache_dir))
    for entry in listed:
        entry.stat(follow_symlinks=False)  # kept by the DirEntry: the prune sorts on these
    real_scandir = os.scandir

    class Raced:  # this process's listing and stats, taken before another process removed every entry
        def __init__(self, path):
            self.inner = real_scandir(path)

        def __enter__(self):
            self.inner.__enter__()
            for path in old:
                path.unlink()
            return iter(listed)

        def __exit__(self, *exc):
            return self.inner.__exit__(*exc)

    with monkeypatch.context() as m:
        m.setattr(codecache.os, "scandir", Raced)
        assert run(codecache.compiled(source(100), "<t>")) == 101  # unlinks of 6 vanished entries ignored
    assert run(codecache.compiled(source(0), "<t>")) == 1
    assert len(list(cache_dir.iterdir())) == 2
