"""``kafkawire decode``: annotate the bytes of a Kafka request or response.

Reads hex (an argument, ``--file`` or stdin; spaces, newlines and ``0x`` are
fine) and prints one line per field: byte offset, the field's own bytes, the
field path as a tree, the wire type and the value, like a hexdump annotated by
hand. Requests carry their API key and version; responses do not, so
``--response`` needs ``--api-key`` and ``--api-version``.

Exit status: 0 decoded, 1 malformed input (the error names the field and
byte offset), 2 unusable arguments or hex.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import uuid

from kafkawire.protocol.annotate import Annotated, Annotation, AnnotationError, annotate_request, annotate_response

_HEX_BYTES_SHOWN = 8
# A size prefix this close to the byte count is read as a frame (and a mismatch reported),
# since an unframed request starts with key << 16 | version and rarely lands there.
_FRAME_SLACK = 8


def configure(parser: argparse.ArgumentParser, name: str = "decode") -> None:
    parser.add_argument("hex", nargs="*", help="the bytes as hex (default: read from --file or stdin)")
    parser.add_argument("--file", "-f", help="read the hex from this file ('-' for stdin)")
    parser.add_argument(
        "--response", action="store_true", help="the bytes are a response (needs --api-key and --api-version)"
    )
    parser.add_argument("--api-key", type=int, help="API key of the response")
    parser.add_argument("--api-version", type=int, help="API version of the response")
    framing = parser.add_mutually_exclusive_group()
    framing.add_argument(
        "--framed",
        dest="framed",
        action="store_true",
        default=None,
        help="the bytes start with the 4-byte frame size (default: detect)",
    )
    framing.add_argument("--unframed", dest="framed", action="store_false", help="no 4-byte frame size")
    parser.add_argument("--json", action="store_true", help="print the annotations as JSON")
    parser.add_argument(
        "--no-strict", dest="strict", action="store_false", help="accept bytes left over after the message"
    )


class InputError(Exception):
    pass


def parse_hex(text: str) -> bytes:
    tokens = [t[2:] if t[:2].lower() == "0x" else t for t in re.split(r"[\s,]+", text.strip()) if t]
    digits = "".join(tokens)
    if not digits:
        raise InputError("no hex given")
    bad = re.search(r"[^0-9a-fA-F]", digits)
    if bad:
        raise InputError(f"not hex: {bad.group()!r}")
    if len(digits) % 2:
        raise InputError(f"odd number of hex digits ({len(digits)})")
    return bytes.fromhex(digits)


def _read_input(args) -> bytes:
    if args.hex:
        if args.file:
            raise InputError("give the hex as an argument or with --file, not both")
        return parse_hex(" ".join(args.hex))
    if args.file and args.file != "-":
        try:
            with open(args.file) as fh:
                return parse_hex(fh.read())
        except OSError as exc:
            raise InputError(f"cannot read {args.file}: {exc.strerror}") from None
    return parse_hex(sys.stdin.read())


def looks_framed(data: bytes) -> bool:
    if len(data) < 4:
        return False
    size = int.from_bytes(data[:4], "big", signed=True)
    return 0 <= size and abs(size - (len(data) - 4)) <= _FRAME_SLACK


def run(args) -> int:
    if args.response and (args.api_key is None or args.api_version is None):
        print("kafkawire decode: --response needs --api-key and --api-version", file=sys.stderr)
        return 2
    try:
        data = _read_input(args)
    except InputError as exc:
        print(f"kafkawire decode: {exc}", file=sys.stderr)
        return 2
    framed = looks_framed(data) if args.framed is None else args.framed
    try:
        if args.response:
            result = annotate_response(data, args.api_key, args.api_version, framed=framed, strict=args.strict)
        else:
            result = annotate_request(data, framed=framed, strict=args.strict)
    except AnnotationError as exc:
        _print(args, data, framed, exc.events, None, exc)
        return 1
    _print(args, data, framed, result.events, result, None)
    return 0


def _print(
    args, data: bytes, framed: bool, events: list[Annotation], result: Annotated | None, error: AnnotationError | None
) -> None:
    if args.json:
        out = {
            "kind": "response" if args.response else "request",
            "framed": framed,
            "length": len(data),
            "annotations": [e.to_dict() for e in events],
            "value": _jsonable(result.value) if result else None,
            "error": None
            if error is None
            else {
                "problem": error.problem,
                "message": error.message,
                "path": error.path,
                "offset": error.offset,
                "text": str(error),
            },
        }
        if args.response:
            out.update(api_key=args.api_key, api_version=args.api_version)
        print(json.dumps(out, indent=2))
    else:
        print(render(data, events))
    if error is not None:
        print(f"kafkawire decode: error: {error}", file=sys.stderr)


def render(data: bytes, events: list[Annotation]) -> str:
    rows = [("offset", "bytes", "field", "type", "value")]
    for i, e in enumerate(events):
        own_end = e.offset + (e.width or 0)
        if i + 1 < len(events) and events[i + 1].depth > e.depth:
            own_end = min(own_end, events[i + 1].offset)  # a container shows only its own prefix
        own = data[e.offset : own_end]
        shown = own[:_HEX_BYTES_SHOWN].hex(" ")
        if len(own) > _HEX_BYTES_SHOWN:
            shown += f" …+{len(own) - _HEX_BYTES_SHOWN}"
        name = "  " * e.depth + e.path.rsplit(".", 1)[-1]
        rows.append((str(e.offset), shown, name, e.wire_type, _show(e)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for r in rows:
        lines.append(
            f"{r[0]:>{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]:<{widths[3]}}  {r[4]}".rstrip()
        )
    return "\n".join(lines)


def _show(e: Annotation) -> str:
    value = e.value
    if e.wire_type.endswith(("struct",)) or " v" in e.wire_type:
        text = ""
    elif e.wire_type.endswith("array") or e.wire_type == "tagged_fields":
        text = "" if value is None else str(value)
    elif isinstance(value, (bytes, bytearray)):
        text = value[:16].hex() + ("…" if len(value) > 16 else "")
    elif value is None:
        text = "null"
    elif isinstance(value, str) and e.wire_type != "tag_header":
        text = json.dumps(value, ensure_ascii=False)
    else:
        text = str(value)
    if e.note and e.note != text:
        text = f"{text}  ({e.note})" if text else f"({e.note})"
    return text


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    return value
