"""The README's consumer-group example (Client and command line, Consumer groups), run as written."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def example() -> str:
    section = README.read_text().split("### Consumer groups", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_group_example_runs():
    proc = subprocess.run([sys.executable, "-c", example()], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    read = next(line for line in lines if line.startswith("read "))
    assert read.startswith("read 100 split ")
    split = ast.literal_eval(read.split(" split ", 1)[1])
    assert sorted(tp for member in split for tp in member) == [("orders", p) for p in range(4)]
    assert all(split), "a member ended up with no partition"
    committed = ast.literal_eval(next(line for line in lines if line.startswith("committed "))[10:])
    assert sum(committed.values()) == 100  # every record read and committed on close
    assert any(" got [" in line for line in lines)
