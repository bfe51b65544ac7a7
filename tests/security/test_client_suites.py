"""kafka-python's own SSL and SASL integration tests against kafkawire (the bounded run of
``tools/run_client_security_suites.py``: kafkawire only, SASL over SASL_SSL; ``--target kafkawire,kafka`` for
both brokers and the differences)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "run_client_security_suites.py"


def test_kafka_python_ssl_and_sasl_suites_pass_on_kafkawire():
    run = subprocess.run(
        [sys.executable, str(TOOL), "--target", "kafkawire", "--transport", "SASL_SSL", "--timeout", "120"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    counts = re.search(r"(\d+) tests: (\d+) passed, (\d+) failed, (\d+) errors, (\d+) skipped", run.stdout)
    assert counts, run.stdout + run.stderr  # the suite ran (a failed download of its source fails here too)
    total, passed, failed, errors, skipped = map(int, counts.groups())
    assert total >= 11 and passed == total, run.stdout
    assert run.returncode == 0, run.stdout
