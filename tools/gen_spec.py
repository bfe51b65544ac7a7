#!/usr/bin/env python3
"""Derive kafkawire's protocol spec from Apache Kafka's released jars.

The jars are the pinned releases of ``tools/kafka_pins.py``, resolved (and
cached) by ``tools/kafka_reference.resolve``. The JSON schemas are read from
inside the jars; nothing is unpacked. Writes
``src/kafkawire/protocol/spec/messages.json`` and ``errors.json``: facts only
(names, types, version ranges, nullability, tags, defaults, map keys, entity
types, flexible versions, listeners, API keys), and each error code's default
message, which Kafka sends in some error answers. Comments and the field
descriptions ("about") are dropped: nothing in kafkawire reads them (the codec,
the stub, ``kafkawire decode`` and the annotator work from names, types and
versions; a description would only be decoration there). Every definition records the jar and path it came from.

- ``messages``: the RPCs, headers and data payloads of kafka-clients
  ``common/message/``. A message's versions are the union of the current
  release (``KAFKA``) and the last 3.x (``KAFKA_LEGACY``), which still has the
  versions and API keys that Kafka 4.0 removed. Each message is a list of
  *definitions*, each valid for a contiguous version range: the current schema
  for the versions it defines, the legacy schema for older versions the
  current release dropped. Where both define a version the current release
  wins; the test suite checks that both give the same wire layout there.
- ``records``: the schemas Kafka keeps outside kafka-clients for its own logs
  and internal topics: KRaft metadata records (kafka-metadata), the group,
  transaction and share coordinators' records, kafka-raft's quorum state and
  kafka-storage's remote log metadata and producer snapshots. They are not
  RPCs: their ``apiKey`` is a record type, stored as ``record_type``.
- ``test_messages``: the schemas Kafka tests its own generator with
  (kafka-clients' test jar, ``KAFKA_TEST_SCHEMAS``).
- ``errors.json``: every error code of kafka-clients' ``Errors`` enum with its
  name, whether its exception is retriable and its default message, printed by
  ``tools/java/ErrorTable.java`` run against the current kafka-clients jar.

Usage: python tools/gen_spec.py [--out DIR] [--check]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))
import kafka_pins  # noqa: E402  (tools/ is not a package)
import kafka_reference  # noqa: E402

ROOT = TOOLS.parent
DEFAULT_OUT = ROOT / "src" / "kafkawire" / "protocol" / "spec"
ERROR_TABLE = TOOLS / "java" / "ErrorTable.java"

# Where the schemas live: (pinned set, jar name prefix, folder inside the jar).
CLIENTS = (kafka_pins.BROKER, "kafka-clients", "common/message/")
LEGACY_CLIENTS = (kafka_pins.LEGACY_CLIENTS, "kafka-clients", "common/message/")
TEST_SCHEMAS = (kafka_pins.TEST_SCHEMAS, "kafka-clients", "common/message/")
RECORD_SOURCES = (
    (kafka_pins.BROKER, "kafka-metadata", "common/metadata/"),
    (kafka_pins.BROKER, "kafka-group-coordinator", "common/message/"),
    (kafka_pins.BROKER, "kafka-transaction-coordinator", "common/message/"),
    (kafka_pins.BROKER, "kafka-share-coordinator", "common/message/"),
    (kafka_pins.BROKER, "kafka-raft", "common/message/"),
    (kafka_pins.BROKER, "kafka-storage", "message/"),
)
RPC_KINDS = ("request", "response")

_COMMENT = re.compile(r"^\s*//")


def parse_schema(text: str) -> dict:
    """Kafka's JSON dialect allows whole-line // comments."""
    return json.loads("\n".join(line for line in text.splitlines() if not _COMMENT.match(line)))


def read_jar_schemas(source: tuple[str, str, str]) -> list[tuple[str, dict]]:
    """(origin, schema) for every JSON schema directly in the source's folder; origin is 'jar!path'."""
    pinned, prefix, folder = source
    path = kafka_reference.jar(pinned, prefix)
    out = []
    with zipfile.ZipFile(path) as jar:
        for entry in sorted(jar.namelist()):
            rest = entry[len(folder) :]
            if entry.startswith(folder) and rest.endswith(".json") and "/" not in rest:
                out.append((f"{path.name}!{entry}", parse_schema(jar.read(entry).decode("utf-8"))))
    if not out:
        raise SystemExit(f"no JSON schemas under {folder} in {path}")
    return out


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
    for key, name in (("nullableVersions", "nullable"), ("taggedVersions", "tagged"), ("flexibleVersions", "flexible")):
        if key in raw:
            out[name] = parse_versions(raw[key])
            if key == "flexibleVersions" and out[name] is None:
                out[name] = "none"
    if "tag" in raw:
        out["tag"] = int(raw["tag"])
    if raw.get("default") is not None:  # a JSON null default is no default, as in Kafka's generator
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


def definition(schema: dict, versions: list, origin: str) -> dict:
    out = {
        "versions": versions,
        "flexible": parse_versions(schema.get("flexibleVersions")),
        "source": origin,
        "fields": [_field(f) for f in schema.get("fields", [])],
    }
    if schema.get("commonStructs"):
        out["common_structs"] = [
            {
                "name": cs["name"],
                "versions": parse_versions(cs.get("versions")),
                "fields": [_field(f) for f in cs["fields"]],
            }
            for cs in schema["commonStructs"]
        ]
    return out


def merge(old: tuple[str, dict] | None, new: tuple[str, dict] | None) -> dict:
    """One message from both releases: the current one for its versions, the legacy one below them.

    A current schema whose validVersions is "none" (the ZooKeeper-era keys 4-7 since 4.0) defines no
    version: the legacy schema is the whole message."""
    if new is not None and old is not None and parse_versions(new[1]["validVersions"]) is None:
        new = None
    origin, primary = new or old
    lo_new, hi_new = parse_versions(primary["validVersions"])
    defs = [definition(primary, [lo_new, hi_new], origin)]
    lo, hi = lo_new, hi_new
    if new is not None and old is not None:
        old_origin, old_schema = old
        lo_old, hi_old = parse_versions(old_schema["validVersions"])
        if lo_old < lo_new:
            defs.insert(0, definition(old_schema, [lo_old, lo_new - 1], old_origin))
            lo = lo_old
        hi = max(hi_new, hi_old)
        if hi_old > hi_new:
            raise SystemExit(
                f"{primary['name']}: {kafka_pins.KAFKA_LEGACY} defines versions above "
                f"{kafka_pins.KAFKA} ({hi_old} > {hi_new})"
            )
    msg = {
        "name": primary["name"],
        "type": primary["type"],
        "valid": [lo, hi],
        "definitions": defs,
    }
    if "apiKey" in primary:
        # An RPC's API key; for a record schema (metadata, coordinator records) the record type.
        msg["api_key" if primary["type"] in RPC_KINDS else "record_type"] = primary["apiKey"]
    if "listeners" in primary:
        msg["listeners"] = sorted(primary["listeners"])
    if primary.get("latestVersionUnstable"):
        msg["latest_version_unstable"] = True
    deprecated = parse_versions(primary.get("deprecatedVersions"))
    if deprecated is not None:
        msg["deprecated"] = deprecated
    if old is not None and new is not None and old[1]["name"] != new[1]["name"]:
        msg["former_name"] = old[1]["name"]
    return msg


def identity(schema: dict) -> tuple:
    # API key + kind identifies an RPC across renames (key 74 was renamed in 4.0).
    if schema["type"] in RPC_KINDS:
        return (schema["type"], schema["apiKey"])
    return (schema["type"], schema["name"])


def error_table() -> list[list]:
    """[code, name, retriable, default message] for every entry of kafka-clients' Errors enum, as Java sees it."""
    java = kafka_reference._tool("java")
    proc = subprocess.run(
        [java, "-cp", kafka_reference.classpath(CLIENTS[0]), str(ERROR_TABLE)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{ERROR_TABLE.name} failed:\n{proc.stderr[-3000:]}")
    rows = []
    for line in proc.stdout.splitlines():
        code, name, retriable, message = line.split("\t")
        rows.append([int(code), name, {"true": True, "false": False}[retriable], message])
    return sorted(rows)


def generate() -> tuple[dict, dict]:
    old = {identity(s): (o, s) for o, s in read_jar_schemas(LEGACY_CLIENTS)}
    new = {identity(s): (o, s) for o, s in read_jar_schemas(CLIENTS)}
    messages = {}
    for ident in sorted(set(old) | set(new), key=str):
        msg = merge(old.get(ident), new.get(ident))
        messages[msg["name"]] = msg
    records = {}
    for source in RECORD_SOURCES:
        for origin, schema in read_jar_schemas(source):
            records[schema["name"]] = merge(None, (origin, schema))
    test_messages = {}
    for origin, schema in read_jar_schemas(TEST_SCHEMAS):
        test_messages[schema["name"]] = merge(None, (origin, schema))
    seen: dict[str, str] = {}
    for section, table in (("messages", messages), ("records", records), ("test_messages", test_messages)):
        for name in table:
            if name in seen:
                raise SystemExit(f"{name} is defined in both {seen[name]} and {section}: names must be distinct")
            seen[name] = section
    derived = (
        f"Apache Kafka's message schemas (Apache License 2.0), read from the jars of Apache Kafka "
        f"{kafka_pins.KAFKA} (current definitions), kafka-clients {kafka_pins.KAFKA_LEGACY} (versions "
        f"removed since) and kafka-clients {kafka_pins.KAFKA_TEST_SCHEMAS} test (generator test schemas)"
    )
    kafka = {
        "current": kafka_pins.KAFKA,
        "legacy": kafka_pins.KAFKA_LEGACY,
        "test_schemas": kafka_pins.KAFKA_TEST_SCHEMAS,
    }
    spec = {
        "generated_by": "tools/gen_spec.py",
        "derived_from": derived,
        "kafka": kafka,
        "messages": dict(sorted(messages.items())),
        "records": dict(sorted(records.items())),
        "test_messages": dict(sorted(test_messages.items())),
    }
    errors = {
        "generated_by": "tools/gen_spec.py (tools/java/ErrorTable.java)",
        "derived_from": f"org.apache.kafka.common.protocol.Errors of Apache Kafka {kafka_pins.KAFKA} "
        f"(Apache License 2.0); retriable: the exception extends RetriableException; message: "
        f"Errors.message(), the text of an error answer that carries the code's own message",
        "kafka": {"current": kafka_pins.KAFKA},
        "errors": error_table(),
    }
    return spec, errors


def render(obj: dict) -> str:
    # One message per line block keeps diffs of a regenerated spec readable.
    return json.dumps(obj, indent=1, sort_keys=False, separators=(",", ":")) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed spec is stale")
    args = ap.parse_args(argv)
    spec, errors = generate()
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
        print(
            f"wrote {len(spec['messages'])} messages, {len(spec['records'])} records, "
            f"{len(spec['test_messages'])} test messages and {len(errors['errors'])} error codes to {args.out}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
