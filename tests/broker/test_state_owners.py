"""Broker-wide state has one owner each, a package under ``kafkawire/broker/``, created and started by the
``Broker`` (not by a handler module) and reached by handlers through the broker."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import kafkawire.broker
from kafkawire.broker.config import BrokerConfig
from kafkawire.broker.server import start_in_thread

BROKER = Path(kafkawire.broker.__file__).parent
# the broker attribute -> the package that owns that state
OWNERS = {
    "waiters": "fetch_waiters",
    "fetch_sessions": "fetch_sessions",
    "producers": "producer_state",
    "group_coordinator": "groups",
}


def _imported_modules(path: Path) -> set[str]:
    """Every module a file imports, as dotted names relative to kafkawire.broker ("handlers.groups", ...)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            base = node.module or ""
            out.update(f"{base}.{a.name}" if base else a.name for a in node.names)
            if base:
                out.add(base)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kafkawire.broker."):
            out.add(node.module.removeprefix("kafkawire.broker."))
    return out


def test_server_imports_no_handler_module_for_state():
    handlers = {m for m in _imported_modules(BROKER / "server.py") if m.startswith("handlers")}
    # handlers.versions builds the UNSUPPORTED_VERSION answer to an ApiVersions the broker cannot decode
    assert handlers <= {"handlers.versions", "handlers.versions.unsupported_version_response"}, handlers
    for package in OWNERS.values():
        assert (BROKER / package / "__init__.py").is_file(), package
        assert package in _imported_modules(BROKER / "server.py")


def test_broker_creates_and_starts_each_owner():
    with start_in_thread(BrokerConfig(port=0, storage="memory")) as thread:
        broker = thread.broker
        for attribute, package in OWNERS.items():
            owner = getattr(broker, attribute)
            module = importlib.import_module(f"kafkawire.broker.{package}")
            assert type(owner) in {getattr(module, name) for name in module.__all__}, attribute
        coordinator = broker.group_coordinator
        assert thread.call(broker.current_group_coordinator) is coordinator  # started before serving
        coordinator.unload()  # __consumer_offsets deleted: the next request gets a new coordinator
        assert thread.call(broker.current_group_coordinator) is not coordinator
