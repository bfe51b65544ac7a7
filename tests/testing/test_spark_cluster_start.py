"""tools/spark_cluster.py's wait for the standalone master, against a stand-in web UI answering as a starting master.

A starting Spark master accepts on its web UI port before each page's handler has started: ``/json/`` then answers
404, or the root page's HTML when the "/" handler is up first (seen on CI). The wait must take both as "not up yet"
and go on to the JSON answer, not fail on the HTML.
"""

from __future__ import annotations

import http.server
import json
import threading

import pytest
from spark_cluster import SparkStandalone, SparkUnavailable

HTML = b'<!DOCTYPE html><html data-bs-theme="light"><body>Spark Master</body></html>'


def _stand_in(answers: list[tuple[int, str, bytes]]) -> http.server.ThreadingHTTPServer:
    """A web UI on 127.0.0.1 giving ``answers`` to GET /json/ in turn, the last one from then on."""
    served = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            status, kind, body = answers[min(len(served), len(answers) - 1)]
            served.append(self.path)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.served = served
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _cluster(tmp_path, server, monkeypatch) -> SparkStandalone:
    cluster = SparkStandalone(tmp_path, workers=2)
    cluster.webui_port = server.server_address[1]
    monkeypatch.setattr(SparkStandalone, "_spawn", lambda self, name, *args: None)  # no daemons: the stand-in answers
    return cluster


def test_start_waits_through_the_404_and_the_root_page_a_starting_master_answers(tmp_path, monkeypatch):
    alive = json.dumps({"workers": [{"state": "ALIVE"}, {"state": "ALIVE"}]}).encode()
    server = _stand_in(
        [
            (404, "text/html", b"not found"),
            (200, "text/html", HTML),
            (200, "application/json", json.dumps({"workers": [{"state": "ALIVE"}]}).encode()),
            (200, "application/json", alive),
        ]
    )
    try:
        cluster = _cluster(tmp_path, server, monkeypatch)
        assert cluster.start(timeout=30) is cluster
        assert server.served == ["/json/"] * 4  # returned on the first answer with both workers alive
    finally:
        server.shutdown()
        server.server_close()


def test_start_gives_up_with_the_reason_when_the_master_never_answers_json(tmp_path, monkeypatch):
    server = _stand_in([(200, "text/html", HTML)])
    try:
        cluster = _cluster(tmp_path, server, monkeypatch)
        with pytest.raises(SparkUnavailable, match="2 workers not ALIVE"):
            cluster.start(timeout=1.5)
        assert len(server.served) >= 2
    finally:
        server.shutdown()
        server.server_close()
