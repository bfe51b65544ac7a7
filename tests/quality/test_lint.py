"""Lint and type check as tests, so that CI (tools/run-tests) runs them: ruff over the repository and
mypy over the public API, both with the configuration in pyproject.toml."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(BIN))
    if path is None:
        pytest.fail(f"{name} is not installed: it is in the test extra (pip install -e '.[test]')")
    return path


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_ruff_finds_nothing():
    result = _run(_tool("ruff"), "check", "--no-cache", "--output-format", "concise", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_leaves_every_file_as_it_is():
    # the layout is the formatter's (pyproject.toml [tool.ruff.format]); generated files are excluded there
    result = _run(_tool("ruff"), "format", "--check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_check_reports_a_file_it_would_change(tmp_path):
    # the check above can fail: hand alignment the formatter rewrites is reported
    bad = tmp_path / "bad.py"
    bad.write_text("x = {'a': 1,\n     'b': 2}\n")
    result = _run(_tool("ruff"), "format", "--check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad))
    assert result.returncode == 1, result.stdout + result.stderr


def test_ruff_with_the_project_rules_reports_a_finding(tmp_path):
    # the check above can fail: the configured rules do flag code
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nfrom typing import List\n\n\ndef f(x: List[int]):\n    return x == None\n")
    result = _run(
        _tool("ruff"),
        "check",
        "--no-cache",
        "--output-format",
        "concise",
        "--config",
        str(ROOT / "pyproject.toml"),
        str(bad),
    )
    assert result.returncode == 1
    for code in ("F401", "UP006", "E711"):
        assert code in result.stdout, result.stdout


def test_mypy_finds_nothing_in_the_public_api(tmp_path):
    result = _run(_tool("mypy"), "--cache-dir", str(tmp_path / "cache"), "--no-color-output")
    assert result.returncode == 0, result.stdout + result.stderr
    checked = re.search(r"Success: no issues found in (\d+) source files", result.stdout)
    assert checked and int(checked.group(1)) >= 30, result.stdout  # the packages of pyproject, not nothing
