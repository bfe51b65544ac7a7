import uuid

import pytest

from .harness import Broker


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path / "broker").start()
    yield b
    b.stop()


@pytest.fixture
def topic(request):
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]
    return f"{name}-{uuid.uuid4().hex[:6]}"


def pytest_runtest_makereport(item, call):
    if call.when == "call" and call.excinfo is not None:
        b = item.funcargs.get("broker") if hasattr(item, "funcargs") else None
        if b is not None:
            item.add_report_section("call", "broker log", b.log_tail(80))
