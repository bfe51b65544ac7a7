"""What the third-party suite runners (``run_kafka_python_integration``, ``run_client_security_suites``,
``run_aiokafka_transactions``, ``run_aiokafka_security``) print about a suite's run: the outcome of each test
from its JUnit file, one summary line per target, and the tests whose outcome differs between targets.

The summary line's shape (``N tests: P passed, F failed, E errors, S skipped``) is read by the tests that run
these tools, so all runners print it the same way.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

_TAGS = {"failure": "failed", "error": "error", "skipped": "skipped"}


def summarize(junit: Path) -> tuple[Counter, list[tuple[str, str, str]], dict[str, str]]:
    """(count per outcome, the failed and errored tests with their first message line, outcome per test)."""
    counts: Counter = Counter()
    problems = []
    outcomes: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '').replace('test.integration.', '')}::{case.get('name')}"
        outcome, detail = "passed", ""
        for child in case:
            if child.tag in _TAGS:
                outcome = _TAGS[child.tag]
                message = (child.get("message") or "").strip()
                detail = message.splitlines()[0][:160] if message else ""
                break
        counts[outcome] += 1
        outcomes[name] = outcome
        if outcome in ("failed", "error"):
            problems.append((outcome, name, detail))
    return counts, problems, outcomes


def report(title: str, junit: Path, log_path: Path) -> tuple[Counter, list[tuple[str, str, str]], dict[str, str]]:
    """Print one target's summary line and its failures; returns what :func:`summarize` found."""
    counts, problems, outcomes = summarize(junit)
    print(
        f"\n{title}: {sum(counts.values())} tests: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['error']} errors, {counts['skipped']} skipped"
    )
    for outcome, name, detail in problems:
        print(f"  {outcome.upper():6} {name}: {detail}")
    print(f"full log: {log_path}", flush=True)
    return counts, problems, outcomes


def failures(outcomes: dict[str, str]) -> int:
    return sum(1 for o in outcomes.values() if o in ("failed", "error"))


def print_differences(results: dict[str, dict[str, str]]) -> None:
    """With two targets or more, the tests whose outcome is not the same on every target ('-': not run there)."""
    if len(results) < 2:
        return
    targets = list(results)
    names = sorted(set().union(*results.values()))
    rows = [(n, [results[t].get(n, "-") for t in targets]) for n in names]
    differ = [(n, row) for n, row in rows if len(set(row)) > 1]
    print(f"\n{len(differ)} tests whose outcome differs ({' / '.join(targets)}):")
    for name, row in differ:
        print(f"  {' / '.join(row)}  {name}")
