"""``kafkawire logs``: what a data directory holds, and the contents of its files, offline.

``kafkawire logs DIR`` summarises a kafkawire or Kafka data directory: its identity (meta.properties),
its topics (kafkawire's ``topics.json``, or Kafka's ``__cluster_metadata-0`` replayed), every partition
directory (segments with their batches, records, offsets and bytes, index entries, producer snapshots,
leader epochs, topic id), the top-level checkpoints, the offsets committed in ``__consumer_offsets`` and
the entries it does not know. ``kafkawire logs --dump FILE...`` decodes one file: a ``.log`` batch by
batch and record by record (like Kafka's ``kafka-dump-log.sh --deep-iteration --print-data-log``),
``.index``/``.timeindex``/``.txnindex`` entries, a producer ``.snapshot``, a KRaft snapshot ``.checkpoint``, text
checkpoints, ``partition.metadata``, ``meta.properties``, ``quorum-state``. Records of the metadata log
and of ``__consumer_offsets`` are decoded by their schemas (chosen from the directory name, or
``--decode``). ``--json`` prints JSON lines.

Nothing is written. Exit status: 0 when everything read cleanly, 1 when something is damaged (each
problem printed with its file and byte position), 2 for a path that is missing or of an unknown kind.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from kafkawire.tools import logdump


def configure(parser: argparse.ArgumentParser, name: str = "logs") -> None:
    parser.add_argument(
        "paths", nargs="+", metavar="DIR|FILE", help="a data directory (log.dirs), or with --dump the files to decode"
    )
    parser.add_argument("--dump", action="store_true", help="decode the given files (.log, .index, ...)")
    parser.add_argument(
        "--decode",
        choices=logdump.DECODERS,
        default="auto",
        help="how to read record keys and values of a .log: by the directory name (auto), "
        "raw, the KRaft metadata log's records, __consumer_offsets' or __transaction_state's",
    )
    parser.add_argument("--json", action="store_true", help="JSON lines instead of text")
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=logdump.DEFAULT_MAX_BYTES,
        metavar="N",
        help=f"show at most N bytes of each key, value and header (default {logdump.DEFAULT_MAX_BYTES}; 0 for all)",
    )
    parser.add_argument("--headers-only", action="store_true", help="batches only, not their records")


def run(args) -> int:
    out = sys.stdout
    status = 0
    for path in args.paths:
        if args.dump:
            code = _dump(path, args, out)
        else:
            code = _summary(path, args, out)
        status = max(status, code)
    return status


def _error_line(item: dict) -> str:
    where = f"line {item['line']}" if "line" in item else f"byte {item.get('position', 0)}"
    return f"ERROR {item.get('file', '')}{' ' if item.get('file') else ''}at {where}: {item['reason']}"


# ------------------------------------------------------------------- --dump


def _dump(path: str, args, out) -> int:
    if not os.path.isfile(path):
        print(f"{path}: no such file", file=sys.stderr)
        return 2
    if logdump.file_kind(path) is None:
        print(f"{path}: not a file kafkawire logs knows", file=sys.stderr)
        return 2
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        print(f"{path}: {exc.strerror}", file=sys.stderr)
        return 2
    decoder = logdump.decoder_for(path) if args.decode == "auto" else args.decode
    damaged = False
    if not args.json:
        print(
            f"Dumping {path} ({len(data)} bytes, {logdump.file_kind(path)}"
            f"{', decoder ' + decoder if logdump.file_kind(path) == 'log' else ''})",
            file=out,
        )
    counts = {"batches": 0, "records": 0}
    for item in logdump.dump_file(path, data, decoder=decoder, records=not args.headers_only, max_bytes=args.max_bytes):
        item = {**item, "file": path}
        if item["kind"] == "error":
            damaged = True
        if item["kind"] == "batch":
            counts["batches"] += 1
            counts["records"] += len(item.get("records", ()))
        if args.json:
            print(json.dumps(item, ensure_ascii=False), file=out)
        else:
            _print_item(item, out)
    if not args.json and logdump.file_kind(path) == "log":
        print(f"{counts['batches']} batches, {counts['records']} records{', DAMAGED' if damaged else ''}", file=out)
    return 1 if damaged else 0


def _flags(b: dict) -> str:
    flags = [f"codec {b['codec']}", b["timestamp_type"]]
    if b.get("transactional"):
        flags.append("transactional")
    if b.get("control"):
        flags.append("control")
    if b.get("delete_horizon_ms") is not None:
        flags.append(f"delete horizon {b['delete_horizon_ms']}")
    return ", ".join(flags)


def _print_item(item: dict, out) -> None:
    kind = item["kind"]
    if kind == "error":
        print(_error_line({k: v for k, v in item.items() if k != "file"}), file=out)
    elif kind == "batch":
        crc = "ok" if item["crc_valid"] else "BAD"
        count = item.get("count", 1)
        line = (
            f"batch @{item['position']}: offsets {item['base_offset']}..{item['last_offset']} ({count} records), "
            f"{item['size']} bytes, magic {item['magic']}, crc 0x{item['crc']:08x} {crc}, {_flags(item)}"
        )
        if item["magic"] == 2:
            line += (
                f"\n    producer {item['producer_id']} epoch {item['producer_epoch']} "
                f"seq {item['base_sequence']}..{item['last_sequence']}, leader epoch "
                f"{item['partition_leader_epoch']}, timestamps {item['base_timestamp']}..{item['max_timestamp']}"
            )
        print(line, file=out)
        for rec in item.get("records", ()):
            _print_record(rec, out)
        if "records_error" in item:
            print(f"    records not decoded: {item['records_error']}", file=out)
    elif kind == "index_entry":
        if "position" in item:
            print(f"offset {item['offset']} -> position {item['position']}", file=out)
        else:
            print(f"timestamp {item['timestamp']} -> offset {item['offset']}", file=out)
    elif kind == "aborted_txn":
        print(
            f"aborted: producer {item['producer_id']} offsets {item['first_offset']}..{item['last_offset']}, "
            f"last stable offset {item['last_stable_offset']}",
            file=out,
        )
    elif kind == "index_summary":
        print(
            f"{item['entries']} entries"
            + (f" ({item['preallocated_bytes']} preallocated bytes after them)" if item["preallocated_bytes"] else ""),
            file=out,
        )
    elif kind == "producer_snapshot":
        print(
            f"producer snapshot v{item['version']}, crc 0x{item['crc']:08x} {'ok' if item['crc_valid'] else 'BAD'}, "
            f"{len(item['producers'])} producers",
            file=out,
        )
        for p in item["producers"]:
            print("  " + ", ".join(f"{k} {v}" for k, v in p.items()), file=out)
    elif kind == "checkpoint":
        print(f"{len(item['entries'])} entries", file=out)
        for e in item["entries"]:
            print("  " + " ".join(e), file=out)
    elif kind == "properties":
        for k, v in item["properties"].items():
            print(f"{k}={v}", file=out)
    elif kind == "partition_metadata":
        for k, v in item["fields"].items():
            print(f"{k}: {v}", file=out)
    elif kind == "json":
        print(json.dumps(item["document"], indent=2), file=out)


def _print_record(rec: dict, out) -> None:
    line = (
        f"  offset {rec['offset']}  ts {rec['timestamp']}  key {logdump.bytes_label(rec['key'])}"
        f"  value {logdump.bytes_label(rec['value'])} ({rec['value_size']} B)"
    )
    if rec["headers"]:
        line += "  headers " + ", ".join(f"{k}={logdump.bytes_label(v)}" for k, v in rec["headers"])
    print(line, file=out)
    dec = rec.get("decoded")
    if dec is not None:
        if "control" in dec:
            print(
                f"    control {dec['control']}"
                + (f" {json.dumps(dec['data'])}" if "data" in dec else "")
                + (f" coordinator epoch {dec['coordinator_epoch']}" if "coordinator_epoch" in dec else ""),
                file=out,
            )
        elif "data" in dec:
            print(f"    {dec['type']} v{dec['version']} {json.dumps(dec['data'])}", file=out)
        else:
            print(f"    {dec['type']} key {json.dumps(dec['key'])} value {json.dumps(dec['value'])}", file=out)
    if "decode_error" in rec:
        print(f"    not decoded: {rec['decode_error']}", file=out)


# ----------------------------------------------------------------- summary


def _summary(path: str, args, out) -> int:
    if not os.path.isdir(path):
        print(f"{path}: not a directory (use --dump for a file)", file=sys.stderr)
        return 2
    try:
        items = list(logdump.summarize_data_dir(path))
    except OSError as exc:  # the directory itself cannot be listed (files that cannot be read are problems)
        print(f"{path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    damaged = any(i["kind"] == "error" for i in items)
    if args.json:
        for item in items:
            print(json.dumps(item, ensure_ascii=False), file=out)
        return 1 if damaged else 0
    by_kind: dict[str, list[dict]] = {}
    for item in items:
        by_kind.setdefault(item["kind"], []).append(item)
    head = by_kind["data_dir"][0]
    props = head["meta_properties"]
    print(
        f"{head['path']}: {head['layout']} data directory"
        + (
            f" (cluster.id {props.get('cluster.id')}, node.id {props.get('node.id')}"
            + (f", directory.id {props['directory.id']}" if "directory.id" in props else "")
            + ")"
            if props
            else ""
        ),
        file=out,
    )
    topics = by_kind.get("topic", [])
    if topics:
        source = topics[0]["source"] + (
            f", {topics[0]['metadata_records']} records" if "metadata_records" in topics[0] else ""
        )
        print(f"\ntopics ({len(topics)}, from {source}):", file=out)
        width = max(len(t["name"]) for t in topics)
        for t in topics:
            configs = " ".join(f"{k}={v}" for k, v in sorted(t["configs"].items()))
            print(
                f"  {t['name']:<{width}}  id {t['topic_id']}  {t['partitions']} partitions"
                + (f"  {configs}" if configs else ""),
                file=out,
            )
    parts = by_kind.get("partition", [])
    if parts:
        print(f"\npartitions ({len(parts)}):", file=out)
        empty = [
            p["name"]
            for p in parts
            if p["first_offset"] is None and not p["quarantined"] and not p["other_files"] and not p["kraft_snapshots"]
        ]
        for p in parts:
            if p["name"] in empty:
                continue
            segs = p["segments"]
            offsets = f"offsets {p['first_offset']}..{p['last_offset']}" if p["first_offset"] is not None else "empty"
            extra = []
            if p.get("topic_id"):
                extra.append(f"topic id {p['topic_id']}")
            if p.get("leader_epochs"):
                extra.append("leader epochs " + " ".join(f"{e}@{o}" for e, o in p["leader_epochs"]))
            if p["snapshots"]:
                extra.append(f"{len(p['snapshots'])} producer snapshots")
            if p["kraft_snapshots"]:
                extra.append(f"{len(p['kraft_snapshots'])} KRaft snapshots")
            if p["quarantined"]:
                extra.append(f"{len(p['quarantined'])} quarantined")
            if p["other_files"]:
                extra.append("other files: " + " ".join(p["other_files"]))
            print(
                f"  {p['name']}: {len(segs)} segments, {sum(s['batches'] for s in segs)} batches, "
                f"{p['records']} records, {offsets}, {p['bytes']} bytes" + ("; " + "; ".join(extra) if extra else ""),
                file=out,
            )
            if len(segs) > 1:
                for s in segs:
                    print(
                        f"    {s['base_offset']:020d}.log: {s['batches']} batches, {s['records']} records, "
                        f"{s['bytes']} bytes, index {s.get('index_entries', '-')} entries, "
                        f"timeindex {s.get('timeindex_entries', '-')} entries"
                        + (f", {s['txnindex_entries']} aborted transactions" if s.get("txnindex_entries") else ""),
                        file=out,
                    )
            for snap in p["kraft_snapshots"]:  # <end offset>-<epoch>.checkpoint: the image up to that offset
                end, epoch = int(snap["file"][:20]), int(snap["file"][21:31])
                print(
                    f"    {snap['file']}: snapshot of offsets ..{end - 1} (epoch {epoch}), {snap['batches']} batches, "
                    f"{snap['records']} records with header and footer, {snap['bytes']} bytes",
                    file=out,
                )
        if empty:
            print(f"  no records ({len(empty)}): {' '.join(empty)}", file=out)
    checkpoints = by_kind.get("dir_checkpoint", [])
    if checkpoints:
        print("\ncheckpoints:", file=out)
    for c in checkpoints:
        print(
            f"  {c['name']}: {c['entries']} entries"
            + (", non-zero: " + ", ".join(c["nonzero"]) if c["nonzero"] else ""),
            file=out,
        )
    for co in by_kind.get("consumer_offsets", []):
        print(
            f"\n__consumer_offsets ({co['partitions']} partitions): {len(co['groups'])} groups with committed offsets",
            file=out,
        )
        for group, offsets in co["groups"].items():
            print(f"  {group}: " + ", ".join(f"{tp}={o}" for tp, o in offsets.items()), file=out)
    for u in by_kind.get("unknown_entries", []):
        print(f"\nnot kafkawire's or Kafka's (left alone): {' '.join(u['names'])}", file=out)
    errors = by_kind.get("error", [])
    if errors:
        print(f"\n{len(errors)} problems:", file=out)
        for e in errors:
            print("  " + _error_line(e), file=out)
    return 1 if damaged else 0
