"""``kafkawire check DATA_DIR``: verify a data directory offline.

Reads every segment of every partition directory batch by batch (length, magic, CRC-32C, offsets in
order and below the next segment's base) and checks each ``.index`` / ``.timeindex`` against the
batches: every offset index entry must point at the start of a batch ending at its offset, every time
index entry at an offset of the segment. Nothing is changed. Exit status: 0 when nothing is damaged,
1 when something is, 2 when DATA_DIR is not a data directory.

The last segment of a partition may be being written by a running broker: a torn tail there is what a
crash leaves and what the broker cuts on start, so it is reported as a problem too (stop the broker for a
clean answer). Quarantine files (damage a broker already set aside, see ``broker/storage/recovery.py``)
are listed but are not damage. Entries that are not kafkawire's (no topic of ``topics.json`` owns them,
such as a Kafka data directory's partitions and checkpoints) are listed and not read, as the broker lists
them on start; ``kafkawire logs DIR`` reads them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

_LOG_FILE = re.compile(r"(\d{20})\.log")


def configure(parser: argparse.ArgumentParser, name: str = "check") -> None:
    parser.add_argument("data_dir", metavar="DATA_DIR", help="the broker's data directory (log.dirs)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--partition",
        action="append",
        default=[],
        metavar="TOPIC-N",
        help="check only this partition directory (repeatable)",
    )


def _check_indexes(segment, infos, is_last: bool) -> list[dict]:
    from kafkawire.broker.storage.index import IndexCorruptError

    problems = []
    starts = {i.position: i for i in infos}
    last_offset = infos[-1].last_offset if infos else segment.base_offset - 1
    size = segment.file_size()
    for index, kind in ((segment.offset_index, "offset index"), (segment.time_index, "time index")):
        if not os.path.exists(index.path):
            if not is_last:  # the active segment's indexes are written at roll and close
                problems.append({"file": index.path, "kind": "index", "detail": f"{kind} is missing"})
            continue
        try:
            index.load(size) if kind == "offset index" else index.load()
        except IndexCorruptError as exc:
            problems.append({"file": index.path, "kind": "index", "detail": str(exc)})
            continue
        if kind == "offset index":
            for offset, position in zip(index.offsets, index.positions):
                info = starts.get(position)
                if info is None or info.last_offset != offset:
                    problems.append(
                        {
                            "file": index.path,
                            "kind": "index",
                            "detail": f"entry (offset {offset}, position {position}) points at no batch "
                            f"ending at that offset",
                        }
                    )
                    break
        else:
            for ts, offset in zip(index.timestamps, index.offsets):
                if not segment.base_offset <= offset <= last_offset:
                    problems.append(
                        {
                            "file": index.path,
                            "kind": "index",
                            "detail": f"entry (timestamp {ts}, offset {offset}) is outside the segment's "
                            f"offsets {segment.base_offset}..{last_offset}",
                        }
                    )
                    break
    return problems


def check_partition(directory: str, compacted: bool = False) -> dict:
    from kafkawire.broker.storage import recovery
    from kafkawire.broker.storage.segment import LogSegment

    bases = sorted(int(m.group(1)) for m in map(_LOG_FILE.fullmatch, os.listdir(directory)) if m)
    report: dict[str, Any] = {
        "partition": os.path.basename(directory),
        "segments": len(bases),
        "batches": 0,
        "bytes": 0,
        "problems": [],
        "quarantined": sorted(n for n in os.listdir(directory) if recovery.QUARANTINE_FILE.fullmatch(n)),
    }
    for i, base in enumerate(bases):
        segment = LogSegment(directory, base, created_ms=0)
        is_last = i == len(bases) - 1
        max_last = None if is_last else bases[i + 1] - 1
        try:
            found = recovery.scan_segment(segment, max_last, compacted=compacted)
        except (OSError, ValueError) as exc:
            report["problems"].append({"file": segment.log_path, "kind": "unreadable", "detail": str(exc)})
            continue
        report["batches"] += len(found.infos)
        report["bytes"] += segment.file_size()
        for d in found.damaged:
            report["problems"].append(
                {
                    "file": segment.log_path,
                    "kind": "corrupt-batch",
                    "position": d.start,
                    "length": d.end - d.start,
                    "detail": d.why,
                }
            )
        if found.tail is not None:
            d = found.tail
            report["problems"].append(
                {
                    "file": segment.log_path,
                    "kind": "torn-tail" if is_last else "damaged-tail",
                    "position": d.start,
                    "length": d.end - d.start,
                    "detail": d.why,
                }
            )
        report["problems"] += _check_indexes(segment, found.infos, is_last)
    return report


def check(data_dir: str, partitions: list[str] | None = None) -> dict:
    """Check the partition directories of the topics in the metadata log; everything else that is not
    kafkawire's is listed under ``unknown``, as the broker's start lists it, and not read."""
    from kafkawire.broker.storage import metadata, recovery

    topics = metadata.read_topics(data_dir)
    owned, unknown = recovery.sort_entries(data_dir, topics)
    names = [name for name in owned if not partitions or name in partitions]

    def compacted(name: str) -> bool:  # the log cleaner leaves offset gaps in compacted topics
        meta = topics.get(name.rsplit("-", 1)[0])
        return meta is not None and "compact" in str((meta.configs or {}).get("cleanup.policy", ""))

    results = [check_partition(os.path.join(data_dir, name), compacted(name)) for name in names]
    return {
        "data_dir": os.path.abspath(data_dir),
        "partitions": results,
        "unknown": unknown,
        "damaged": any(r["problems"] for r in results),
    }


def run(args) -> int:
    if not os.path.isfile(os.path.join(args.data_dir, "meta.properties")):
        print(f"{args.data_dir} is not a kafkawire data directory (no meta.properties)", file=sys.stderr)
        return 2
    report = check(args.data_dir, args.partition)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        for r in report["partitions"]:
            status = "DAMAGED" if r["problems"] else "ok"
            print(f"{r['partition']}: {status} ({r['segments']} segments, {r['batches']} batches, {r['bytes']} bytes)")
            for p in r["problems"]:
                where = f" at byte {p['position']} ({p['length']} bytes)" if "position" in p else ""
                print(f"  {p['kind']}: {p['file']}{where}: {p['detail']}")
            for q in r["quarantined"]:
                print(f"  quarantined earlier: {q}")
        if report["unknown"]:
            print(f"not kafkawire's (left alone): {' '.join(report['unknown'])}")
        damaged = sum(1 for r in report["partitions"] if r["problems"])
        print(f"{len(report['partitions'])} partitions checked, {damaged} damaged")
    return 1 if report["damaged"] else 0
