"""SIGKILL during log compaction loses nothing.

A writer process appends keyed batches (updates and tombstones) to a compacted topic of a segments-engine
data directory, journaling each acknowledged record (key, offset, value) after its append returns (a SIGKILL
keeps the page cache, so appends are not fsynced: the writer spends its time cleaning, where the kills matter),
and cleans the partition after every few rounds. This tool SIGKILLs it at a random moment of a cleaning
pass (after a random time, early in the next pass), opens the directory as a restarted broker would (an
interrupted pass is finished or dropped at start) and checks, for every key, that the log's last record of
it is the last one journaled, or one written after it (appended, not yet journaled when the kill came);
then it starts the writer again on the same directory. After the last round a final pass must leave exactly one record per key
(its last), offsets ascending and every batch valid.

    python tools/compaction_crash.py --rounds 10          # the full run; exit 1 on a loss
    python tools/compaction_crash.py --rounds 3 --seed 7  # what tests/storage/test_compaction_crash.py runs

Prints one JSON line per kill and a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOPIC = "compacted"
KEYS = 500
SEGMENT_BYTES = 64 * 1024


def _storage(data_dir: str):
    from kafkawire.broker.storage.segments import SegmentStorage

    return SegmentStorage(data_dir, {"log.segment.bytes": str(SEGMENT_BYTES)})


def writer(data_dir: str, journal: str, seed: int) -> None:
    """The child: append, journal, clean, forever (until killed)."""
    from kafkawire.broker.storage import cleaner
    from kafkawire.protocol.records import build_batch

    storage = _storage(data_dir)
    if TOPIC not in storage.topics():
        storage.create_topic(TOPIC, 1, {"cleanup.policy": "compact", "delete.retention.ms": "0"})
    plog = storage.partition(TOPIC, 0)
    work = cleaner.Cleaner(data_dir)
    rng = random.Random(seed)
    phase = os.open(journal + ".phase", os.O_RDWR | os.O_CREAT, 0o644)  # what the writer is doing (read at a kill)
    with open(journal, "a", encoding="utf-8") as out:
        while True:
            os.pwrite(phase, b"appending", 0)
            for _ in range(200):
                records = []
                for _ in range(rng.randint(1, 20)):
                    key = f"k{rng.randrange(KEYS)}"
                    value = None if rng.random() < 0.05 else f"v{rng.getrandbits(48)}"
                    records.append((key.encode(), None if value is None else value.encode()))
                base = plog.append(build_batch(records, compression="gzip" if rng.random() < 0.3 else 0))
                first = base.base_offset
                out.write(
                    "".join(
                        f"{k.decode()} {first + i} {v.decode() if v else '-'} .\n" for i, (k, v) in enumerate(records)
                    )
                )
                out.flush()  # the page cache survives a SIGKILL: no fsync needed for the journal
            plog.roll()
            os.pwrite(phase, b"cleaning ", 0)
            work.clean_partition(plog, plog._settings(), force=True)


def _journal(path: Path) -> dict[str, tuple[int, str | None]]:
    last: dict[str, tuple[int, str | None]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split(" ")
        if len(parts) != 4 or parts[3] != ".":
            continue  # a line cut by the kill (the last one): only whole lines count
        key, offset, value, _ = parts
        last[key] = (int(offset), None if value == "-" else value)
    return last


def _log(data_dir: str) -> tuple[dict[str, tuple[int, str | None]], int]:
    from kafkawire.protocol.records import iter_batches

    storage = _storage(data_dir)
    try:
        plog = storage.partition(TOPIC, 0)
        last, count, previous = {}, 0, -1
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            data = b"".join(bytes(c) for c in plog.read(offset, 8 << 20).chunks)
            for batch in iter_batches(data):
                batch.validate_crc()
                offset = batch.last_offset + 1
                for r in batch.records():
                    assert r.offset > previous, f"offset {r.offset} after {previous}"
                    previous = r.offset
                    count += 1
                    last[bytes(r.key).decode()] = (r.offset, None if r.value is None else bytes(r.value).decode())
        return last, count
    finally:
        storage.close()


def check(data_dir: str, journal: Path) -> list[str]:
    """Every key's last record in the log is its last acknowledged one, or a later write."""
    acked = _journal(journal)
    found, _ = _log(data_dir)
    problems = []
    for key, (offset, value) in acked.items():
        got = found.get(key)
        if got is None and value is None:
            continue  # a tombstone may be gone (delete.retention.ms=0)
        if got is None or got[0] < offset or (got[0] == offset and got[1] != value):
            problems.append(f"{key}: acknowledged {offset}={value}, log has {got}")
    return problems


def final_check(data_dir: str) -> list[str]:
    from kafkawire.broker.storage import cleaner

    storage = _storage(data_dir)
    try:
        plog = storage.partition(TOPIC, 0)
        plog.roll()
        cleaner.Cleaner(data_dir).clean_partition(plog, plog._settings(), force=True)
    finally:
        storage.close()
    last, count = _log(data_dir)
    return [] if count == len(last) else [f"{count} records left for {len(last)} keys after a final pass"]


def run(rounds: int, seed: int, work_dir: str | None = None, keep: bool = False) -> dict:
    rng = random.Random(seed)
    root = Path(work_dir or tempfile.mkdtemp(prefix="kafkawire-compaction-crash-"))
    data_dir, journal = root / "data", root / "journal.txt"
    journal.touch()
    results, failures = [], []
    for n in range(rounds):
        proc = subprocess.Popen(
            [sys.executable, __file__, "--writer", str(data_dir), str(journal), str(seed * 1000 + n)],
            stdout=subprocess.DEVNULL,
            stderr=open(root / f"writer-{n}.log", "wb"),
            start_new_session=True,
        )
        delay = rng.uniform(1.0, 4.0)
        phase_file = Path(str(journal) + ".phase")
        try:
            proc.wait(timeout=delay)
            failures.append(f"round {n}: the writer exited with {proc.returncode} (see writer-{n}.log)")
            break
        except subprocess.TimeoutExpired:
            # then into the next cleaning pass (bounded: a pass starts every few hundred milliseconds), at a
            # random point of it
            deadline = time.monotonic() + 30
            while (
                (not phase_file.exists() or phase_file.read_bytes()[:8] != b"cleaning")
                and time.monotonic() < deadline
                and proc.poll() is None
            ):
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.05))
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        leftovers = sorted(p.name for p in (data_dir / f"{TOPIC}-0").glob("*.log.*"))
        phase = phase_file.read_text().strip() if phase_file.exists() else "starting"
        problems = check(str(data_dir), journal)
        results.append(
            {
                "round": n,
                "killed_after_s": round(delay, 2),
                "phase": phase,
                "leftovers": leftovers,
                "problems": problems,
            }
        )
        print(json.dumps(results[-1]), flush=True)
        failures += [f"round {n}: {p}" for p in problems]
    if not failures:
        failures += final_check(str(data_dir))
    summary = {
        "rounds": len(results),
        "killed_while_cleaning": sum(1 for r in results if r["phase"] == "cleaning"),
        "interrupted_swaps": sum(1 for r in results if r["leftovers"]),
        "failures": failures,
        "work_dir": str(root) if keep or failures else None,
    }
    if not keep and not failures:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--work-dir")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--writer", nargs=3, metavar=("DATA_DIR", "JOURNAL", "SEED"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.writer:
        writer(args.writer[0], args.writer[1], int(args.writer[2]))
        return 0
    summary = run(args.rounds, args.seed, args.work_dir, args.keep)
    print(json.dumps(summary))
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
