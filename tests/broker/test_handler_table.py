"""The broker's dispatch table comes from broker/handlers/_table.py (written by tools/gen_handler_table.py),
so that a start imports no handler module; each is imported by the first request for one of its APIs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

from kafkawire.broker import dispatch

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_handler_table", ROOT / "tools" / "gen_handler_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_table_is_what_the_handlers_register():
    gen = _generator()
    assert gen.render() == gen.TABLE.read_text(), "broker/handlers/_table.py is stale: run tools/gen_handler_table.py"
    from kafkawire.broker.handlers._table import TABLE

    table = dispatch.load_handlers()
    assert sorted(row[0] for row in TABLE) == sorted(table)
    for key, name, lo, hi, module, function, is_async in TABLE:
        h = table[key]
        assert (h.name, h.min_version, h.max_version, h.is_async) == (name, lo, hi, is_async)
        assert (h.fn.__module__, h.fn.__name__) == (f"kafkawire.broker.handlers.{module}", function)


def _run(script: str) -> str:
    """In a fresh interpreter: this process has imported every handler module already."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_a_broker_imports_each_handler_module_with_its_first_request():
    out = _run(
        """
        import socket, sys
        from kafkawire.broker.server import start_in_thread
        from kafkawire.protocol import decode_response, encode_request, message_class, request_header

        def call(sock, body, version):
            sock.sendall(encode_request(request_header(body.api_key, version, 1, "t"), body))
            size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
            return decode_response(sock.recv(size, socket.MSG_WAITALL), body.api_key, version, framed=False).body

        def loaded():
            return sorted(m.rsplit(".", 1)[1] for m in sys.modules if m.startswith("kafkawire.broker.handlers.")
                          and not m.rsplit(".", 1)[1].startswith("_"))

        b = start_in_thread()
        try:
            print("started", loaded())
            c = socket.create_connection(b.address, timeout=30)
            AV = message_class("ApiVersionsRequest")
            keys = call(c, AV(client_software_name="t", client_software_version="1"), 3).api_keys
            print("advertised", len(keys))
            print("after ApiVersions", loaded())
            M = message_class("MetadataRequest")
            res = call(c, M(topics=None), 12)
            print("metadata answered", res.cluster_id is not None)
            print("after Metadata", loaded())
            print("Metadata's entry now the handler itself", b.broker.handlers[3].fn.__module__)
            print("Produce's entry still deferred", getattr(b.broker.handlers[0].fn, "deferred_to", None))
            c.close()
        finally:
            b.stop()
        """
    )
    assert "started []" in out, out
    assert "after ApiVersions ['versions']" in out, out
    assert "after Metadata ['metadata', 'versions']" in out, out
    assert "metadata answered True" in out, out
    assert "Metadata's entry now the handler itself kafkawire.broker.handlers.metadata" in out, out
    assert "Produce's entry still deferred produce" in out, out
    assert int(out.split("advertised ", 1)[1].split()[0]) == len(dispatch.load_handlers()), out


def test_a_stale_table_fails_the_first_request_to_that_module():
    out = _run(
        """
        from kafkawire.broker import dispatch
        from kafkawire.broker.handlers import _table

        # as if Metadata's @handles had been raised without regenerating the table
        _table.TABLE = tuple(row if row[0] != 3 else row[:3] + (row[3] - 1,) + row[4:] for row in _table.TABLE)
        table = dispatch.handler_table()
        try:
            table[3].fn(None, None, None)
        except RuntimeError as exc:
            print("refused:", exc)
        """
    )
    assert "refused: broker/handlers/_table.py states ('Metadata'" in out, out
    assert "run python tools/gen_handler_table.py" in out, out


def test_a_broker_without_an_authorizer_imports_none():
    out = _run(
        """
        import sys
        from kafkawire.broker.server import start_in_thread

        b = start_in_thread()
        try:
            print("without", sorted(m for m in sys.modules if m.startswith("kafkawire.security.authorizer")))
        finally:
            b.stop()
        b = start_in_thread(properties={"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
        try:
            print("with", type(b.broker.authorizer).__name__)
        finally:
            b.stop()
        """
    )
    assert "without []" in out, out
    assert "with StandardAuthorizer" in out, out
