#!/usr/bin/env python3
"""Derive kafkawire's protocol spec from Apache Kafka's JSON message schemas.

Reads ``kafka-3.9/`` (every historical version) and ``kafka-4.x/`` (newest
definitions) and writes ``src/kafkawire/protocol/spec/messages.json`` and
``errors.json``: facts only (names, types, version ranges, nullability, tags,
defaults, map keys, entity types, flexible versions, listeners, API keys).
Documentation texts and comments are dropped.

A message's versions are the union of both folders. Each message is stored as
a list of *definitions*, each valid for a contiguous version range: the 4.x
schema for the versions it defines, the 3.9 schema for older versions that
4.x dropped. Where both folders define a version, 4.x wins; the test suite
checks that both produce the same wire layout there.

Usage: python tools/gen_spec.py [--schemas DIR] [--out DIR] [--check]
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SCHEMAS = ROOT.parent / "shared" / "kafka-schemas"
DEFAULT_OUT = ROOT / "src" / "kafkawire" / "protocol" / "spec"

_COMMENT = re.compile(r"^\s*//")


def load_schema(path: Path) -> dict:
    """Kafka's JSON dialect allows whole-line // comments."""
    text = "\n".join(line for line in path.read_text().splitlines() if not _COMMENT.match(line))
    return json.loads(text)


def parse_versions(text: str | None) -> list | None:
    """'0-3' -> [0, 3]; '2+' -> [2, None]; '5' -> [5, 5]; 'none'/None -> None."""
    if text is None:
        return None
    text = text.strip()
    if text == "none" or text == "":
        return None
    if text.endswith("+"):
        return [int(text[:-1]), None]
    if "-" in text:
        lo, hi = text.split("-")
        return [int(lo), int(hi)]
    return [int(text), int(text)]


def _field(raw: dict) -> dict:
    out: dict = {"name": raw["name"], "type": raw["type"]}
    versions = parse_versions(raw.get("versions"))
    if versions is not None:
        out["versions"] = versions
    for key, name in (("nullableVersions", "nullable"), ("taggedVersions", "tagged"),
                      ("flexibleVersions", "flexible")):
        if key in raw:
            out[name] = parse_versions(raw[key])
            if key == "flexibleVersions" and out[name] is None:
                out[name] = "none"
    if "tag" in raw:
        out["tag"] = int(raw["tag"])
    if "default" in raw:
        out["default"] = str(raw["default"])
    if raw.get("mapKey"):
        out["map_key"] = True
    if raw.get("ignorable"):
        out["ignorable"] = True
    if raw.get("zeroCopy"):
        out["zero_copy"] = True
    if "entityType" in raw:
        out["entity_type"] = raw["entityType"]
    if "fields" in raw:
        out["fields"] = [_field(f) for f in raw["fields"]]
    return out


def definition(schema: dict, versions: list) -> dict:
    out = {
        "versions": versions,
        "flexible": parse_versions(schema.get("flexibleVersions")),
        "fields": [_field(f) for f in schema.get("fields", [])],
    }
    if schema.get("commonStructs"):
        out["common_structs"] = [
            {"name": cs["name"], "versions": parse_versions(cs.get("versions")),
             "fields": [_field(f) for f in cs["fields"]]}
            for cs in schema["commonStructs"]
        ]
    return out


def merge(old: dict | None, new: dict | None) -> dict:
    """One message from both folders: 4.x for its versions, 3.9 below them."""
    primary = new or old
    assert primary is not None
    lo_new, hi_new = parse_versions(primary["validVersions"])
    defs = [definition(primary, [lo_new, hi_new])]
    lo, hi = lo_new, hi_new
    if new is not None and old is not None:
        lo_old, hi_old = parse_versions(old["validVersions"])
        if lo_old < lo_new:
            defs.insert(0, definition(old, [lo_old, lo_new - 1]))
            lo = lo_old
        hi = max(hi_new, hi_old)
        if hi_old > hi_new:
            raise SystemExit(f"{primary['name']}: 3.9 defines versions above 4.x ({hi_old} > {hi_new})")
    msg = {
        "name": primary["name"],
        "type": primary["type"],
        "valid": [lo, hi],
        "definitions": defs,
    }
    if "apiKey" in primary:
        msg["api_key"] = primary["apiKey"]
    if "listeners" in primary:
        msg["listeners"] = sorted(primary["listeners"])
    if primary.get("latestVersionUnstable"):
        msg["latest_version_unstable"] = True
    deprecated = parse_versions(primary.get("deprecatedVersions"))
    if deprecated is not None:
        msg["deprecated"] = deprecated
    if old is not None and new is not None and old["name"] != new["name"]:
        msg["former_name"] = old["name"]
    return msg


def _identity(schema: dict) -> tuple:
    # API key + kind identifies an RPC across renames (key 74 was renamed in 4.x).
    if "apiKey" in schema:
        return (schema["type"], schema["apiKey"])
    return (schema["type"], schema["name"])


def generate(schemas: Path) -> tuple[dict, dict]:
    old = {_identity(s): s for s in map(load_schema, sorted((schemas / "kafka-3.9").glob("*.json")))}
    new = {_identity(s): s for s in map(load_schema, sorted((schemas / "kafka-4.x").glob("*.json")))}
    messages = {}
    for ident in sorted(set(old) | set(new), key=str):
        msg = merge(old.get(ident), new.get(ident))
        messages[msg["name"]] = msg
    test_messages = {}
    for path in sorted((schemas / "test-messages").glob("*.json")):
        schema = load_schema(path)
        test_messages[schema["name"]] = merge(None, schema)
    errors = []
    with open(schemas / "errors.tsv", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            errors.append([int(row["code"]), row["name"], row["retriable"].strip() == "yes"])
    spec = {
        "generated_by": "tools/gen_spec.py",
        "derived_from": "Apache Kafka message schemas (Apache License 2.0): kafka-3.9 and kafka-4.x",
        "messages": dict(sorted(messages.items())),
        "test_messages": test_messages,
    }
    return spec, {"errors": errors}


def render(obj: dict) -> str:
    # One message per line block keeps diffs of a regenerated spec readable.
    return json.dumps(obj, indent=1, sort_keys=False, separators=(",", ":")) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemas", type=Path, default=DEFAULT_SCHEMAS)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed spec is stale")
    args = ap.parse_args(argv)
    spec, errors = generate(args.schemas)
    outputs = {"messages.json": render(spec), "errors.json": render(errors)}
    stale = []
    for name, text in outputs.items():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print(f"stale spec files: {', '.join(stale)}; run tools/gen_spec.py", file=sys.stderr)
        return 1
    if not args.check:
        print(f"wrote {len(spec['messages'])} messages and {len(errors['errors'])} error codes to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
