"""The README's "Testing with kafkawire" examples, run as written (one test file per client, with pytester)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

README = Path(__file__).resolve().parents[2] / "README.md"
CLIENTS = {
    "confluent-kafka": "confluent_kafka",
    "kafka-python": "kafka",
    "aiokafka": "aiokafka",
    "kafkawire's own client": "kafkawire",
}


def section() -> str:
    text = README.read_text()
    start = text.index("## Testing with kafkawire")
    return text[start : text.index("\n## ", start + 1)]


def examples() -> dict[str, str]:
    """{first comment line: code} of the section's python blocks that start with a comment naming a client."""
    out = {}
    for block in re.findall(r"```python\n(.*?)```", section(), re.S):
        first = block.splitlines()[0]
        for name in CLIENTS:
            if first.startswith(f"# {name}"):
                out[name] = block
    return out


def test_readme_shows_a_test_for_each_client():
    assert sorted(examples()) == sorted(CLIENTS)


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_readme_example_passes(pytester, name):
    if importlib.util.find_spec(CLIENTS[name]) is None:
        pytest.skip(f"{CLIENTS[name]} is not installed")
    pytester.makepyfile(test_readme=examples()[name])
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
