"""The console's bounded tap and its fail-closed authentication, without a browser."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from kafkawire.protocol import encode_request, message_class, request_header
from kafkawire.tools.pcap import Connection
from kafkawire.ui.options import console_options
from kafkawire.ui.server import Console, ConsoleRefused, check_bind
from kafkawire.ui.tap import Tap

CONN = Connection(1, ("127.0.0.1", 50000), ("127.0.0.1", 9092))


def _request(corr: int, client_id: str = "tap-test") -> bytes:
    body = message_class("MetadataRequest")(topics=None)
    return encode_request(request_header(3, 12, corr, client_id), body)[4:]


def test_pending_pairs_drop_oldest_when_the_console_falls_behind():
    tap = Tap(pending=3, keep=10)
    for corr in range(5):
        tap.publish(CONN, _request(corr))
    assert tap.published == 5 and tap.dropped == 2
    tap.drain()
    assert [e["correlation_id"] for e in tap.recent()] == [2, 3, 4]
    assert tap.recent()[0]["api"] == "Metadata" and tap.recent()[0]["client_id"] == "tap-test"


def test_a_slow_browser_loses_its_oldest_exchanges_and_the_tap_keeps_only_the_last():
    tap = Tap(keep=4, subscriber_queue=2)
    sub = tap.subscribe()
    for corr in range(6):
        tap.publish(CONN, _request(corr))
    tap.drain()
    assert [x["correlation_id"] for x in sub.queue] == [4, 5] and sub.dropped == 4
    assert sorted(tap.entries) == [3, 4, 5, 6]  # ids: the last four


def test_large_frames_are_cut_and_marked():
    tap = Tap(frame_bytes=64)
    request = _request(7)
    tap.publish(CONN, request, b"\0" * 1000)
    tap.drain()
    entry = tap.entries[1]
    assert entry.response_truncated and len(entry.exchange.response_payload) == 64
    assert not entry.request_truncated or len(request) > 64
    assert "first bytes kept" in entry.summary["problem"]


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.1", "", "::"])
def test_a_bind_beyond_loopback_without_a_token_is_refused_naming_the_option(host):
    with pytest.raises(ConsoleRefused, match="--ui-token"):
        check_bind(host, None)
    check_bind(host, "secret")  # with a token it may


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_needs_no_token(host):
    check_bind(host, None)


def test_console_options_read_the_environment_token(monkeypatch):
    monkeypatch.setenv("KAFKAWIRE_UI_TOKEN", "from-env")
    assert console_options("0.0.0.0:8080", None).token == "from-env"
    monkeypatch.delenv("KAFKAWIRE_UI_TOKEN")
    with pytest.raises(ValueError, match="--ui-token"):
        console_options("0.0.0.0:8080", None)
    with pytest.raises(ValueError, match="HOST:PORT"):
        console_options("nonsense", None)
    assert console_options("8080", None).host == "127.0.0.1"  # a port alone binds loopback


@pytest.mark.parametrize("command", ["serve", "proxy"])
def test_the_commands_refuse_an_open_console_before_starting(command, tmp_path, monkeypatch):
    monkeypatch.delenv("KAFKAWIRE_UI_TOKEN", raising=False)
    args = [sys.executable, "-m", "kafkawire", command, "--ui", "0.0.0.0:0"]
    args += (
        ["--upstream", "127.0.0.1:1"] if command == "proxy" else ["--storage", "memory", "--data-dir", str(tmp_path)]
    )
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert "--ui-token" in done.stderr


def test_with_a_token_every_request_must_carry_it():
    import aiohttp

    async def scenario():
        console = await Console(Tap(), None, token="s3cret").start("127.0.0.1", 0)
        try:
            async with aiohttp.ClientSession(
                cookie_jar=aiohttp.CookieJar(unsafe=True)
            ) as http:  # IP hosts keep cookies
                base = console.url
                async with http.get(base + "api/exchanges") as r:
                    assert r.status == 401
                async with http.get(base + "api/exchanges", headers={"Authorization": "Bearer wrong"}) as r:
                    assert r.status == 401
                async with http.get(base + "api/exchanges", headers={"Authorization": "Bearer s3cret"}) as r:
                    assert r.status == 200 and await r.json() == []
                async with http.get(base + "?token=s3cret") as r:  # sets the cookie the page's own calls carry
                    assert r.status == 200 and "kafkawire console" in await r.text()
                async with http.get(base + "api/info") as r:
                    assert r.status == 200 and (await r.json())["kind"] == "broker"
        finally:
            await console.close()

    asyncio.run(scenario())
