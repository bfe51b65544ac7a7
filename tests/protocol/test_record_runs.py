"""``record_runs`` finds every record of a section and groups neighbours of one size, as a record-by-record
walk would.

It measures a run over windows of records (16, then four times the last), so runs that end just before, on
and after a window's edge are checked, and neighbours whose length varints share their first byte but not
their second (record lengths 64 apart) must not be taken for one run.
"""

from __future__ import annotations

import random

import pytest

from kafkawire.protocol.primitives import varint_bytes as varint
from kafkawire.protocol.records.errors import CorruptRecordError
from kafkawire.protocol.records.walk import _ManyRuns, record_runs


def record(length: int) -> bytes:
    """A record of ``length`` bytes after its length varint (only the length matters to ``record_runs``)."""
    return varint(length) + bytes(length)


def expected_runs(lengths: list[int]) -> tuple[list, list, list]:
    """The runs, grouped one record at a time."""
    starts, sizes, counts = [], [], []
    pos = 0
    for length in lengths:
        size = len(varint(length)) + length
        if sizes and sizes[-1] == size and counts[-1] >= 1 and starts[-1] + sizes[-1] * counts[-1] == pos:
            counts[-1] += 1
        else:
            starts.append(pos)
            sizes.append(size)
            counts.append(1)
        pos += size
    return starts, sizes, counts


def merged(runs: tuple[list, list, list]) -> list[tuple[int, int]]:
    """(size, records) per run with neighbouring runs of one size joined: ``record_runs`` counts a run of
    fewer than four records left at the section's end record by record, which splits a run in two."""
    out: list[list[int]] = []
    for size, n in zip(runs[1], runs[2]):
        if out and out[-1][0] == size:
            out[-1][1] += n
        else:
            out.append([size, n])
    return [(size, n) for size, n in out]


def check(lengths: list[int]) -> None:
    data = b"".join(record(n) for n in lengths)
    got = record_runs(data, 0, len(data), len(lengths))
    want = expected_runs(lengths)
    assert merged(got) == merged(want)
    assert sum(got[2]) == len(lengths)
    # every run's start is where its records begin
    pos = 0
    for start, size, n in zip(*got):
        assert start == pos
        pos += size * n
    assert pos == len(data)


@pytest.mark.parametrize("n", [1, 3, 4, 5, 15, 16, 17, 63, 64, 65, 79, 80, 81, 335, 336, 337, 1400])
def test_runs_around_the_window_edges(n):
    check([100] * n + [101] + [100] * n)
    check([30] * n + [31] * 2 + [30] * n)  # one-byte length varints


@pytest.mark.parametrize("n", [5, 16, 17, 80, 81])
def test_lengths_that_share_the_first_varint_byte_are_not_one_run(n):
    # 100 and 164: zigzag 200 and 328, first bytes 0xC8 both, second bytes 1 and 2
    assert varint(100)[0] == varint(164)[0] and varint(100)[1] != varint(164)[1]
    check([100] * n + [164] * n + [100] * 3 + [164])
    check([100] * (n - 1) + [164] + [100] * n)


@pytest.mark.parametrize("seed", range(6))
def test_random_producer_like_sections(seed):
    rng = random.Random(seed)
    for _ in range(40):
        lengths: list[int] = []
        while len(lengths) < rng.randint(1, 3000):
            length = rng.choice((20, 60, 63, 100, 101, 110, 164, 8190, 8200))
            lengths += [length] * rng.choice((1, 1, 2, 7, 8, 16, 17, 74, 300))
        check(lengths)


def test_records_past_the_end_or_short_of_it_are_refused():
    data = b"".join(record(100) for _ in range(50))
    with pytest.raises(CorruptRecordError):
        record_runs(data[:-1], 0, len(data) - 1, 50)  # the last record cut
    with pytest.raises(CorruptRecordError):
        record_runs(data, 0, len(data), 49)  # a record left over
    with pytest.raises((CorruptRecordError, IndexError)):
        record_runs(data, 0, len(data), 51)  # one record more than there are


def test_max_runs():
    data = b"".join(record(100 + i % 2) for i in range(10))
    with pytest.raises(_ManyRuns):
        record_runs(data, 0, len(data), 10, max_runs=5)
    assert len(record_runs(data, 0, len(data), 10, max_runs=10)[0]) == 10


@pytest.mark.parametrize("n", [4, 16, 17, 80, 81, 336, 337, 5000])
def test_a_run_of_one_size_is_one_run(n):
    data = b"".join(record(100) for _ in range(n))
    assert record_runs(data, 0, len(data), n) == ([0], [102], [n])
