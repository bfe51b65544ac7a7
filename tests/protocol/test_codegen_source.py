"""The compiled codecs read like hand-written code: a header saying what they were compiled from, a comment per
field, locals named after fields, and their source in ``linecache`` so that a traceback shows the failing line."""

from __future__ import annotations

import linecache
import re
import traceback

import pytest

from kafkawire.protocol import DecodeError, message_class


def _failing_decode():
    R = message_class("MetadataRequest")
    data = R(topics=[R.MetadataRequestTopic(name="abc")]).encode(12)
    with pytest.raises(DecodeError) as info:
        R.decode(data[:-4], 12)  # cut inside the topic: its name runs past the end
    return info.value


def test_a_decode_error_traceback_shows_the_generated_line():
    error = _failing_decode()
    text = "".join(traceback.format_exception(error))
    # the checked decoder's frame, with the line of generated code that refused the input
    frames = [
        f
        for f in traceback.extract_tb(error.__cause__.__traceback__)
        if f.filename == "<kafkawire codec MetadataRequest v12>"
    ]
    assert frames, text
    last = frames[-1]
    assert last.name == "dc_MetadataRequestTopic" and last.line, text
    source = message_class("MetadataRequest").codec(12).source.splitlines()
    assert source[last.lineno - 1].strip() == last.line
    assert last.line in text and 'File "<kafkawire codec MetadataRequest v12>"' in text
    assert error.path.startswith("Topics[0]")


def test_the_generated_source_survives_linecache_checks():
    codec = message_class("MetadataRequest").codec(12)
    linecache.checkcache()
    assert linecache.getline("<kafkawire codec MetadataRequest v12>", 1) == codec.source.splitlines(True)[0]


def test_the_source_starts_with_what_it_was_compiled_from():
    first = message_class("FetchRequest").codec(13).source.splitlines()[0]
    assert first.startswith("# FetchRequest v13 (flexible): compiled by kafkawire.protocol.codegen")
    assert "kafka-clients-4.4.0.jar!common/message/FetchRequest.json" in first
    legacy = message_class("FetchRequest").codec(2).source.splitlines()[0]
    assert "kafka-clients-3.9.1.jar!common/message/FetchRequest.json" in legacy  # a version 4.0 removed


# locals that are no field's: the length or tag byte read ahead of a fixed run, and each struct's tag section
NAMED = {"ahead", "unknown_tags", "tag_count", "tag", "tag_size", "tag_end", "tagged", "tag_bytes"}


@pytest.mark.parametrize("name,version", [("FetchRequest", 13), ("MetadataResponse", 12), ("ProduceRequest", 3)])
def test_every_field_has_a_comment_and_locals_named_after_it(name, version):
    cls = message_class(name)
    source = cls.codec(version).source
    comments = set(re.findall(r"^\s*# (\w+): (\[\])?(\w+), versions ", source, re.M))
    seen = {c[0] for c in comments}
    for struct_name, fields in cls._class_fields.items():
        for f in fields:
            if f.present(version) or f.is_tagged(version):
                assert f.name in seen, (struct_name, f.name)
    # every numbered local is a field's name (with what it holds: its length, count, an element...)
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))
    attrs = {f.attr for fields in cls._class_fields.values() for f in fields}
    suffixes = ("", "_len", "_count", "_i", "_item", "_unpack", "_flat")
    suffixes += ("_at", "_shape", "_scalars", "_slice")  # shaped struct arrays
    numbered = set(re.findall(r"\b([a-z][a-z0-9_]*?)_\d+\b", code))
    assert numbered
    for local in numbered:
        assert local in NAMED or any(local.removesuffix(x) in attrs for x in suffixes if local.endswith(x)), local
    assert not re.search(
        r"(?<!\\)\b(v|n|x|i|l|u|t|fu|fl|it|sub|unk|ntags|size|end)\d+\b", code
    )  # the anonymous names they had before
