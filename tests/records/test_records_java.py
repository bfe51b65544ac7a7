"""Agreement with Apache Kafka's Java client (kafka-clients 3.9.1) in both directions.

Java builds batches with ``MemoryRecords.builder`` for every magic and codec;
kafkawire must read them exactly.  kafkawire builds the same batches; Java
must read them exactly, and uncompressed ones must be byte-identical.  Java's
``MemoryRecords.downConvert`` is the reference for down-conversion.
"""

from __future__ import annotations

import json
import random

import pytest

from kafkawire.protocol.records import (
    ControlRecordType,
    CorruptRecordError,
    Record,
    RecordBatch,
    TimestampType,
    UnsupportedCodecError,
    batches_to_message_set,
    build_batch,
    build_control_batch,
    build_message_set,
    decompress,
    iter_batches,
)

from .helpers import CODECS, Case, describe, expected_records, random_records, spec_lines


def _cases() -> list[Case]:
    rnd = random.Random(91_2024)
    cases = []
    for magic in (0, 1, 2):
        for codec in CODECS:
            if codec == "zstd" and magic < 2:
                continue
            for ts_type in ["CREATE_TIME"] if magic == 0 else ["CREATE_TIME", "LOG_APPEND_TIME"]:
                for size in (1, 40):
                    base = rnd.choice([0, 17, 1_234_567_890_123])
                    case = Case(
                        name=f"m{magic}-{codec}-{ts_type.lower()}-{size}",
                        magic=magic,
                        codec=codec,
                        timestamp_type=ts_type,
                        base_offset=base,
                        log_append_time=1_700_000_999_999 if ts_type == "LOG_APPEND_TIME" else -1,
                        records=random_records(rnd, size, base_offset=base, headers=magic == 2, gaps=True),
                    )
                    if magic == 2:
                        case.leader_epoch = rnd.randrange(0, 1000)
                        if size > 1:
                            case.producer_id = rnd.randrange(1, 1 << 40)
                            case.producer_epoch = rnd.randrange(0, 1 << 15)
                            case.base_sequence = rnd.randrange(0, 1 << 20)
                            case.transactional = rnd.random() < 0.5
                    cases.append(case)
    # Bigger than snappy's 32 KiB and lz4's 64 KiB blocks.
    for codec in CODECS:
        case = Case(name=f"m2-{codec}-big", magic=2, codec=codec, base_offset=100)
        case.records = [
            (100 + i, 1_700_000_000_000 + i, str(i).encode(), bytes([i % 251]) * 1500, []) for i in range(120)
        ]
        cases.append(case)
    # Sequence numbers wrap at int32 (lastSequence).
    wrap = Case(
        name="m2-none-seqwrap",
        magic=2,
        codec="none",
        producer_id=42,
        producer_epoch=1,
        base_sequence=(1 << 31) - 3,
        records=random_records(rnd, 6, base_offset=0, headers=True, gaps=False),
    )
    cases.append(wrap)
    for i, marker in enumerate(["COMMIT", "ABORT"]):
        cases.append(
            Case(
                name=f"m2-control-{marker.lower()}",
                magic=2,
                codec="none",
                producer_id=7_000 + i,
                producer_epoch=3,
                transactional=True,
                control=True,
                leader_epoch=11,
                base_offset=555,
                marker=(marker, 42 + i),
                marker_offset=555,
                marker_timestamp=1_700_000_000_321,
            )
        )
    return cases


CASES = _cases()
CASES_BY_NAME = {c.name: c for c in CASES}


def kafkawire_build(case: Case) -> bytes:
    if case.marker is not None:
        return build_control_batch(
            ControlRecordType[case.marker[0]],
            producer_id=case.producer_id,
            producer_epoch=case.producer_epoch,
            coordinator_epoch=case.marker[1],
            base_offset=case.marker_offset,
            timestamp=case.marker_timestamp,
            partition_leader_epoch=case.leader_epoch,
        )
    records = [Record(*r) for r in case.records]
    lat = case.log_append_time if case.timestamp_type == "LOG_APPEND_TIME" else None
    if case.magic == 2:
        return build_batch(
            records,
            compression=case.codec,
            base_offset=case.base_offset,
            producer_id=case.producer_id,
            producer_epoch=case.producer_epoch,
            base_sequence=case.base_sequence,
            transactional=case.transactional,
            timestamp_type=TimestampType[case.timestamp_type],
            partition_leader_epoch=case.leader_epoch,
            log_append_time=lat,
        )
    return build_message_set(
        records,
        case.magic,
        case.codec,
        base_offset=case.base_offset,
        timestamp_type=TimestampType[case.timestamp_type],
        log_append_time=lat,
    )


def _java_describe(tool, paths) -> dict[str, dict]:
    out = tool.run("KafkaRecordsTool", "read", *paths)
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(lines) == len(paths)
    return {d["file"]: d for d in lines}


@pytest.fixture(scope="module")
def java_built(java_records_tool):
    """name -> (bytes Java built, Java's own description of them)."""
    tool = java_records_tool
    work = tool.tempdir("java-built-")
    spec = work / "spec.txt"
    spec.write_text(spec_lines(CASES))
    tool.run("KafkaRecordsTool", "build", spec, work / "out")
    paths = [work / "out" / f"{c.name}.bin" for c in CASES]
    described = _java_describe(tool, paths)
    return {c.name: (p.read_bytes(), described[p.name]) for c, p in zip(CASES, paths)}


@pytest.fixture(scope="module")
def kafkawire_built(java_records_tool):
    """name -> (bytes kafkawire built, Java's description of them)."""
    tool = java_records_tool
    work = tool.tempdir("kw-built-")
    built = {c.name: kafkawire_build(c) for c in CASES}
    paths = []
    for name, data in built.items():
        path = work / f"{name}.bin"
        path.write_bytes(data)
        paths.append(path)
    described = _java_describe(tool, paths)
    return {name: (data, described[f"{name}.bin"]) for name, data in built.items()}


def _check_against_spec(case: Case, batches: list[dict]) -> None:
    assert batches, case.name
    records = [r for b in batches for r in b["records"]]
    for b in batches:
        assert b["isValid"] is True
        assert b["magic"] == case.magic
        assert b["compression"] == case.codec
        if case.magic == 2:
            assert b["producerId"] == case.producer_id
            assert b["producerEpoch"] == case.producer_epoch
            assert b["baseSequence"] == case.base_sequence
            assert b["isTransactional"] == case.transactional
            assert b["isControlBatch"] == case.control
            assert b["partitionLeaderEpoch"] == case.leader_epoch
            assert b["timestampType"] == case.timestamp_type
        elif case.magic == 1:
            assert b["timestampType"] == case.timestamp_type
        else:
            assert b["timestampType"] == "NO_TIMESTAMP_TYPE"
    if case.marker is not None:
        assert len(records) == 1
        assert records[0]["offset"] == case.marker_offset
        assert records[0]["timestamp"] == case.marker_timestamp
        assert records[0]["controlType"] == case.marker[0]
        assert records[0]["coordinatorEpoch"] == case.marker[1]
    else:
        assert records == expected_records(case)
        assert batches[-1]["lastOffset"] == case.records[-1][0]


@pytest.mark.parametrize("name", list(CASES_BY_NAME))
def test_kafkawire_reads_java_batches(java_built, name):
    data, java_view = java_built[name]
    ours = describe(data)
    assert ours == java_view["batches"]
    _check_against_spec(CASES_BY_NAME[name], ours)
    for _batch in iter_batches(data, check_crc=True, allow_partial=False):
        pass


@pytest.mark.parametrize("name", list(CASES_BY_NAME))
def test_java_reads_kafkawire_batches(kafkawire_built, name):
    data, java_view = kafkawire_built[name]
    assert java_view["validBytes"] == len(data)
    _check_against_spec(CASES_BY_NAME[name], java_view["batches"])
    assert java_view["batches"] == describe(data)


@pytest.mark.parametrize("name", [c.name for c in CASES if c.codec == "none"])
def test_uncompressed_bytes_identical_to_java(java_built, kafkawire_built, name):
    assert kafkawire_built[name][0] == java_built[name][0]


@pytest.mark.parametrize("name", [c.name for c in CASES if c.codec != "none"])
def test_compressed_batches_match_java_up_to_the_compressor(java_built, kafkawire_built, name):
    """Compressors differ in their exact output; everything else must be the same bytes."""
    case = CASES_BY_NAME[name]
    theirs, ours = java_built[name][0], kafkawire_built[name][0]
    (tb,), (ob,) = list(iter_batches(theirs)), list(iter_batches(ours))
    if case.magic == 2:
        th, oh = tb.header(), ob.header()
        # Everything but batch length (index 1) and CRC (index 4).
        assert th[:1] + th[2:4] + th[5:] == oh[:1] + oh[2:4] + oh[5:]
        codec = tb.compression
        assert decompress(codec, tb.buffer[61:]) == decompress(codec, ob.buffer[61:])
    else:
        assert (tb.offset, tb.magic, tb.attributes, tb.timestamp, tb.key) == (
            ob.offset,
            ob.magic,
            ob.attributes,
            ob.timestamp,
            ob.key,
        )
        codec = tb.compression
        assert decompress(codec, tb.value, magic=case.magic) == decompress(codec, ob.value, magic=case.magic)


DOWN_CASES = [c.name for c in CASES if c.magic == 2]


@pytest.fixture(scope="module")
def java_down_converted(java_records_tool, kafkawire_built):
    """(target magic, name) -> bytes Java's downConvert produced (first offset 0), or ("error", text)."""
    tool = java_records_tool
    work = tool.tempdir("down-")
    results = {}
    for magic in (0, 1):
        args = []
        for name in DOWN_CASES:
            src = work / f"{name}.bin"
            src.write_bytes(kafkawire_built[name][0])
            args += [src, work / f"{name}-to{magic}.out"]
        lines = tool.run("KafkaRecordsTool", "downconvert", magic, 0, *args).splitlines()
        assert len(lines) == len(DOWN_CASES)
        for name, line in zip(DOWN_CASES, lines):
            status, path_or_src, *rest = line.split(" ", 2)
            results[(magic, name)] = open(path_or_src, "rb").read() if status == "ok" else ("error", " ".join(rest))
    return results


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("name", DOWN_CASES)
def test_down_conversion_matches_java(java_down_converted, kafkawire_built, java_records_tool, magic, name):
    case = CASES_BY_NAME[name]
    source = kafkawire_built[name][0]
    theirs = java_down_converted[(magic, name)]
    if isinstance(theirs, tuple):
        assert case.codec == "zstd", theirs
        assert "UnsupportedCompressionType" in theirs[1]
        with pytest.raises(UnsupportedCodecError):
            batches_to_message_set(source, magic)
        return
    ours = batches_to_message_set(source, magic)
    if case.control:
        assert ours == theirs == b""
        return
    if case.codec == "none":
        assert ours == theirs
    else:
        # Compressed sizes and CRCs depend on the compressor; the rest may not.
        def strip(batches):
            return [{k: v for k, v in b.items() if k not in ("sizeInBytes", "checksum")} for b in batches]

        assert strip(describe(ours)) == strip(describe(theirs))
        (t,), (o,) = list(iter_batches(theirs)), list(iter_batches(ours))
        assert (t.offset, t.magic, t.attributes, t.timestamp) == (o.offset, o.magic, o.attributes, o.timestamp)
        assert decompress(t.compression, t.value, magic=magic) == decompress(o.compression, o.value, magic=magic)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize(
    "name", [n for n in DOWN_CASES if CASES_BY_NAME[n].codec == "none" and len(CASES_BY_NAME[n].records) > 1]
)
def test_down_conversion_from_an_offset_inside_the_batch_matches_java(java_records_tool, kafkawire_built, magic, name):
    case = CASES_BY_NAME[name]
    first = case.records[len(case.records) // 2][0]
    tool = java_records_tool
    work = tool.tempdir("down-mid-")
    src, dst = work / "in.bin", work / "out.bin"
    src.write_bytes(kafkawire_built[name][0])
    line = tool.run("KafkaRecordsTool", "downconvert", magic, first, src, dst).strip()
    assert line.startswith("ok "), line
    theirs = dst.read_bytes()
    ours = batches_to_message_set(kafkawire_built[name][0], magic, first_offset=first)
    assert ours == theirs
    assert all(r["offset"] >= first for b in describe(ours) for r in b["records"])


def test_crc_verdicts_match_java(java_records_tool, kafkawire_built):
    """Flip bytes in CRC-covered and uncovered places: Java's isValid and ours agree."""
    tool = java_records_tool
    work = tool.tempdir("flip-")
    rnd = random.Random(5)
    paths, expectations = [], []
    for name in [
        "m2-none-create_time-40",
        "m2-gzip-create_time-40",
        "m1-snappy-create_time-40",
        "m0-none-create_time-1",
        "m2-control-commit",
    ]:
        data = kafkawire_built[name][0]
        first = next(iter(iter_batches(data)))
        size = first.size
        # prefix bytes (offset, epoch), CRC bytes, attributes, somewhere in the records
        legacy = first.magic < 2
        spots = [3, 13, 18, 22, size - 1, rnd.randrange(30, size)] if not legacy else [3, 13, 18, size - 1]
        for spot in spots:
            bad = bytearray(data)
            bad[spot] ^= 0x20
            path = work / f"{name}-{spot}.bin"
            path.write_bytes(bytes(bad))
            paths.append(path)
            (batch,) = list(iter_batches(bytes(bad[:size])))
            expectations.append((path.name, batch.crc_ok))
    described = _java_describe(tool, paths)
    seen_bad = 0
    for fname, ours in expectations:
        java_batches = described[fname]["batches"]
        assert java_batches and "isValid" in java_batches[0], described[fname]
        assert java_batches[0]["isValid"] == ours, fname
        seen_bad += not ours
    assert seen_bad >= 10


def test_java_rejects_what_kafkawire_rejects(java_records_tool):
    """A v2 batch whose declared record count is too high (CRC fixed up): both sides refuse it."""
    data = bytearray(build_batch([(b"k", b"v", [], 1)] * 3))
    # count 3 -> 4 and recompute the CRC, so only the structure is wrong
    data[57:61] = (4).to_bytes(4, "big")
    from crc32c import crc32c

    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
    batch = RecordBatch.from_bytes(bytes(data))
    batch.validate_crc()
    with pytest.raises(CorruptRecordError, match="base offset 0"):
        batch.decode_records()
    work = java_records_tool.tempdir("reject-")
    path = work / "bad.bin"
    path.write_bytes(bytes(data))
    (java_view,) = _java_describe(java_records_tool, [path]).values()
    records = java_view["batches"][0]["records"]
    assert any("recordError" in r for r in records), records
