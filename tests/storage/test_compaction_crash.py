"""SIGKILL of a process cleaning a compacted partition loses no acknowledged record (``tools/compaction_crash.py``,
bounded here to 3 kills; ``--rounds 10`` and more for the full run)."""

from __future__ import annotations

import compaction_crash  # tools/, on sys.path through tests/conftest.py


def test_sigkill_during_cleaning_loses_nothing(tmp_path):
    summary = compaction_crash.run(rounds=3, seed=7, work_dir=str(tmp_path))
    assert summary["failures"] == [] and summary["rounds"] == 3
    assert summary["killed_while_cleaning"] >= 1  # the seed puts kills inside passes
