"""Fixtures for the record batch tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def java_records_tool():
    """The compiled ``KafkaRecordsTool`` (skips the test when Java or the jar is missing)."""
    from support.java import JavaProgram

    return JavaProgram.require("KafkaRecordsTool.java")
