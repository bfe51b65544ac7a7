"""The exactly-once sink with its driver killed (SIGKILL) at random points and restarted from the
checkpoint, 3 times (``tools/spark_eos_kill.py --rounds 10`` for more): a read_committed consumer sees
every input record exactly once."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "spark_eos_kill.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("spark_eos_kill", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_driver_killed_three_times(broker, tmp_path):
    tool = load_tool()
    seed = random.randrange(1 << 30)
    result = tool.run(
        broker.bootstrap, rounds=3, records=10000, per_trigger=500, workdir=str(tmp_path), seed=seed, timeout=240
    )
    print(result)
    log = Path(result["driver_log"]).read_text(errors="replace")[-3000:]
    assert result["final"] == "finished", log
    assert result["kills"] >= 1, result  # the query did not finish before the first kill
    assert result["duplicates"] == 0 and result["losses"] == 0 and result["unexpected"] == 0, (result, log)
    assert result["read_committed"] == 10000
