#!/usr/bin/env python3
"""Conformance with Apache Kafka: the same requests to kafkawire and to Kafka, answers compared field by field.

    python tools/conformance.py                      # starts both brokers itself
    python tools/conformance.py --kafkawire 127.0.0.1:9092 --kafka 127.0.0.1:9093
    python tools/conformance.py --api Fetch,Produce --case '*session*' --json

Prints a table per API and version (pairs compared, identical, explained,
different), then every unexplained difference; writes the differences, one a
line, to ``--diffs`` (default /tmp/conformance-diffs.txt). Exits 1 on any
unexplained difference. The machinery is the package ``tools/conformance_suite``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from conformance_suite import runner  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kafkawire", metavar="HOST:PORT", help="a running kafkawire (default: start one)")
    parser.add_argument("--kafka", metavar="HOST:PORT", help="a running Apache Kafka (default: start the pinned one)")
    parser.add_argument("--api", metavar="NAMES", help="only cases of these APIs (comma-separated, globs)")
    parser.add_argument("--case", metavar="PATTERN", help="only cases whose name matches (glob or substring)")
    parser.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    parser.add_argument("--diffs", default="/tmp/conformance-diffs.txt", help="where to write the differences")
    parser.add_argument("--quiet", action="store_true", help="no per-version table")
    parser.add_argument("--progress", action="store_true", help="each case and its time on stderr")
    args = parser.parse_args(argv)

    with contextlib.ExitStack() as stack:
        kw = args.kafkawire or stack.enter_context(runner.kafkawire_broker())
        ka = args.kafka or stack.enter_context(runner.reference_broker())
        report = runner.run(
            runner.broker("kafkawire", kw),
            runner.broker("kafka", ka),
            api_filter=args.api,
            case_filter=args.case,
            jobs=args.jobs,
            progress=_progress if args.progress else None,
        )

    lines = [u.line() for u in report.unexplained]
    if args.diffs:
        Path(args.diffs).write_text("".join(line + "\n" for line in lines))
    if args.json:
        json.dump(report.to_json(), sys.stdout, indent=1, default=repr)
        print()
    else:
        if not args.quiet:
            print(report.table())
        print()
        print(report.api_table())
        if report.one_sided:
            print("\nversions only one side serves (not compared):")
            for name, sides in sorted(report.one_sided.items()):
                print(f"  {name}: " + "; ".join(f"{k} {_ranges(v)}" for k, v in sides.items()))
        uncovered = report.uncovered()
        if uncovered:
            print("\nversions both serve without a compared pair: " + ", ".join(f"{a} v{v}" for a, v in uncovered))
        print(
            f"\n{report.pairs} pairs in {report.seconds:.1f} s; {len(lines)} unexplained differences"
            + (":" if lines else "")
        )
        for line in lines:
            print("  " + line)
    return 1 if lines else 0


def _progress(case, seconds: float) -> None:
    print(f"{seconds:6.2f}s {case.name}", file=sys.stderr, flush=True)


def _ranges(versions: list[int]) -> str:
    out, start = [], None
    for i, v in enumerate(versions):
        if start is None:
            start = v
        if i + 1 == len(versions) or versions[i + 1] != v + 1:
            out.append(f"{start}" if start == v else f"{start}-{v}")
            start = None
    return ",".join(out)


if __name__ == "__main__":
    sys.exit(main())
