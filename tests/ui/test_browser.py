"""The console in a real browser: Debian's chromium driven by Playwright (no browser download).

A kafkawire broker runs with ``--ui``; confluent-kafka (librdkafka) produces and consumes against it; the
pages must show what it just did: its requests in the live view, the hex and tree of a frame highlighting
the same field from either side, its record in the record browser, its group with lag. The proxy's
console is checked the same way in front of that broker. Screenshots of each page go to
``$KAFKAWIRE_SCREENSHOTS`` or the test's tmp directory (never committed).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kafkawire.testing._process import BrokerProcess, free_port, terminate

CHROMIUM = os.environ.get("KAFKAWIRE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
TIMEOUT_MS = 15_000


def _needed(what: str):
    if os.environ.get("CI"):
        pytest.fail(f"{what} is required in CI (tools/run-tests installs it)", pytrace=False)
    pytest.skip(f"{what} unavailable")


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _needed("the playwright package")
    if not os.path.exists(CHROMIUM):
        _needed("Debian's chromium")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory) -> Path:
    out = Path(os.environ.get("KAFKAWIRE_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """``kafkawire serve --ui`` on two free loopback ports: (bootstrap, console url)."""
    root = tmp_path_factory.mktemp("ui-broker")
    ui_port = free_port()

    def command(address: str) -> list[str]:
        return [sys.executable, "-m", "kafkawire", "serve", "--listen", address, "--storage", "memory"] + [
            "--data-dir",
            str(root),
            "--ui",
            f"127.0.0.1:{ui_port}",
            "--log-level",
            "WARNING",
        ]

    process = BrokerProcess(command, root / "broker.log", cwd=root)
    process.start()
    try:
        yield process.bootstrap, f"http://127.0.0.1:{ui_port}/"
    finally:
        process.stop()


def _produce(bootstrap: str, topic: str, value: bytes, client_id: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 0})
    p.produce(topic, value, key=b"key-1", headers=[("trace", b"abc")])
    assert p.flush(20) == 0


def test_live_view_shows_a_real_clients_request_and_highlights_fields_in_hex_and_tree(broker, browser, screenshots):
    bootstrap, url = broker
    page = browser.new_page(viewport={"width": 1500, "height": 900})
    try:
        page.goto(url)
        page.wait_for_selector("#status:has-text('live')", timeout=TIMEOUT_MS)
        topic = f"ui-live-{uuid.uuid4().hex[:8]}"
        _produce(bootstrap, topic, b'{"order": 42}', "ui-live-client")  # after the page subscribed: a live update
        page.fill("#filters [name=client]", "ui-live-*")
        row = page.locator("#exchanges tbody tr", has_text="Produce").filter(has_text=topic).first
        row.wait_for(timeout=TIMEOUT_MS)
        assert "ui-live-client" in row.inner_text()
        row.click()
        page.wait_for_selector("#detail .tree[data-side=response] div", timeout=TIMEOUT_MS)
        # hover the topic name in the request's tree: exactly its bytes light up in the hex
        tree_line = page.locator("#detail .tree[data-side=request] div").filter(has_text=topic).first
        title = tree_line.get_attribute("title")
        offset, width = (int(x) for x in re.search(r"@(\d+)\+(\d+)", title).groups())
        tree_line.hover()
        lit = page.locator("#detail .hex[data-side=request] span.b.hl")
        assert lit.count() == width
        assert int(lit.first.get_attribute("data-i")) == offset
        text = bytes.fromhex("".join(lit.all_inner_texts()))
        assert topic.encode() in text  # the length prefix and the name
        # and from the other side: a byte of the topic name lights its tree line
        page.mouse.move(0, 0)
        page.locator(f"#detail .hex[data-side=request] span.b[data-i='{offset + width - 1}']").hover()
        lit_line = page.locator("#detail .tree[data-side=request] div.hl")
        assert lit_line.count() == 1 and topic in lit_line.inner_text()
        page.screenshot(path=str(screenshots / "live.png"), full_page=False)
    finally:
        page.close()


def test_cluster_view_shows_a_record_produced_by_confluent_kafka_and_produces_one(broker, browser, screenshots):
    bootstrap, url = broker
    topic = f"ui-records-{uuid.uuid4().hex[:8]}"
    _produce(bootstrap, topic, b'{"order": 7, "item": "tea"}', "ui-records-client")
    page = browser.new_page(viewport={"width": 1500, "height": 900})
    try:
        page.goto(url)
        page.click("nav button[data-page=topics]")
        page.locator(f"#topic-list tr[data-topic='{topic}']").click(timeout=TIMEOUT_MS)
        page.wait_for_selector("#browse", timeout=TIMEOUT_MS)
        page.select_option("#browse [name=format]", "json")
        page.click("#browse button")
        page.wait_for_selector("#records table.records tbody tr", timeout=TIMEOUT_MS)
        cells = page.locator("#records table.records tbody tr").first.inner_text()
        assert '"item": "tea"' in cells and "key-1" in cells and "trace=abc" in cells
        page.screenshot(path=str(screenshots / "topics.png"), full_page=True)
        # a test record from the page, read back by librdkafka
        page.fill("#produce [name=value]", "from the console")
        page.fill("#produce [name=key]", "console-key")
        page.click("#produce button")
        page.wait_for_selector("#produced:has-text('written')", timeout=TIMEOUT_MS)
        assert page.inner_text("#produced").endswith("@1")
    finally:
        page.close()
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ui-reader-{topic}", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 1)])
        deadline = time.monotonic() + 20
        got = None
        while got is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got = m
        assert got is not None and got.value() == b"from the console" and got.key() == b"console-key"
    finally:
        c.close()


def test_groups_view_shows_members_assignments_and_lag(broker, browser, screenshots):
    from confluent_kafka import Consumer

    bootstrap, url = broker
    topic = f"ui-groups-{uuid.uuid4().hex[:8]}"
    for i in range(3):
        _produce(bootstrap, topic, f"r{i}".encode(), "ui-groups-producer")
    group = f"ui-group-{uuid.uuid4().hex[:6]}"
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "client.id": "ui-groups-consumer",
        }
    )
    try:
        c.subscribe([topic])
        got = None
        deadline = time.monotonic() + 30
        while got is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got = m
        assert got is not None
        c.commit(offsets=None, message=got, asynchronous=False)  # offset 1 of 3: lag 2
        page = browser.new_page(viewport={"width": 1300, "height": 700})
        try:
            page.goto(url)
            page.click("nav button[data-page=groups]")
            box = page.locator(f".group[data-group='{group}']")
            box.wait_for(timeout=TIMEOUT_MS)
            text = box.inner_text()
            assert "Stable" in text and "ui-groups-consumer" in text and f"{topic}-0" in text
            lag_row = box.locator("tr", has_text=topic).last.inner_text().split()
            assert lag_row[-3:] == ["1", "3", "2"]  # committed, end, lag
            page.screenshot(path=str(screenshots / "groups.png"), full_page=True)
        finally:
            page.close()
    finally:
        c.close()


def test_proxy_console_shows_the_clients_exchanges_and_the_upstreams_topics(broker, browser, screenshots):
    bootstrap, _ = broker
    ui_port = free_port()
    proxy = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kafkawire",
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            bootstrap,
            "--quiet",
            "--ui",
            f"127.0.0.1:{ui_port}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proxy.stderr.readline()
        found = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        assert found, line
        console_line = proxy.stderr.readline()
        assert f"127.0.0.1:{ui_port}" in console_line, console_line
        page = browser.new_page(viewport={"width": 1500, "height": 900})
        try:
            page.goto(f"http://127.0.0.1:{ui_port}/")
            page.wait_for_selector("#status:has-text('live')", timeout=TIMEOUT_MS)
            assert "proxy" in page.inner_text("#kind")
            topic = f"ui-proxy-{uuid.uuid4().hex[:8]}"
            _produce(f"127.0.0.1:{found.group(1)}", topic, b"via the proxy", "ui-proxy-client")
            page.fill("#filters [name=api]", "Metadata,Produce")
            row = page.locator("#exchanges tbody tr", has_text="Produce").filter(has_text=topic).first
            row.wait_for(timeout=TIMEOUT_MS)
            page.locator("#exchanges tbody tr", has_text="Metadata").first.click()
            page.wait_for_selector("#detail .tree[data-side=response] div", timeout=TIMEOUT_MS)
            tree = page.inner_text("#detail .tree[data-side=response]")
            upstream_port = bootstrap.rsplit(":", 1)[1]
            # the frame the client received: the broker's address rewritten to the proxy's own port
            assert "Brokers" in tree and "Port int32 = " in tree and f"Port int32 = {upstream_port}\n" not in tree
            page.screenshot(path=str(screenshots / "proxy-live.png"))
            page.click("nav button[data-page=topics]")
            page.locator(f"#topic-list tr[data-topic='{topic}']").wait_for(timeout=TIMEOUT_MS)
        finally:
            page.close()
    finally:
        terminate(proxy)
