"""The consumer's Arrow decode, in process: CPU per record, strided copy of fixed-size spans vs the filter path.

    python benchmarks/bench_arrow_decode.py [--records 1000000] [--size 100]

Builds v2 batches of about 1 MB (librdkafka's default batch.size; no compression) of records with
keys and values of ``--size`` bytes (or null keys, or values of varying size), then times
``ArrowColumns.add_batch`` for every batch + ``to_batch`` (the whole decode to a RecordBatch), and
``to_batch`` alone (where keys and values are gathered), best of 5 in CPU seconds
(``time.process_time``: the machine may be shared). Each case runs three ways in the same process:
``joined`` the gather before the strided copy (every records section joined into one buffer per
piece, then one Arrow ``filter`` of the spans out of it; rebuilt here from the module's helpers);
``sections`` every batch forced through the fallback (its spans filtered out of its own section, no
join, no strided copy); ``strided`` the decode as shipped (runs of evenly spaced spans of one length
copied as strided rows, the rest as ``sections``). Ratios against ``joined`` are printed; the three
results are checked to be equal.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pyarrow as pa

from kafkawire.client import arrow
from kafkawire.client.arrow import ArrowColumns
from kafkawire.protocol.records import build_batch, iter_batches

BATCH_BYTES = 1_000_000


def make_batches(n: int, size: int, keys: str, varied: bool) -> list:
    value = os.urandom(2 * size)
    per_record = (size if keys == "keyed" else 0) + size + 20
    per_batch = max(1, BATCH_BYTES // per_record)
    out, off, ts = [], 0, 1_700_000_000_000
    while off < n:
        k = min(per_batch, n - off)
        recs = [
            (
                (b"%0*d" % (size, off + i))[-size:] if keys == "keyed" else None,
                value[: size + (i * 7919) % size] if varied else value[:size],
                None,
                ts + (off + i) // 1000,  # a producer stamps many records with the same millisecond
            )
            for i in range(k)
        ]
        out.append(build_batch(recs, base_offset=off))
        off += k
    return list(iter_batches(b"".join(out)))


def _joined(piece, positions, valid, runs):
    """The gather before the strided copy: the piece's sections joined once, the spans filtered out."""
    joined = _JOINED.get(id(piece))
    if joined is None:
        joined = _JOINED[id(piece)] = pa.py_buffer(b"".join(piece.sections))
    return arrow._with_validity(arrow._filter_spans(joined, np.concatenate(positions)), positions, valid)


_JOINED: dict = {}


def decode(batches, n: int) -> tuple[float, float, object]:
    """(CPU s of the whole decode, CPU s of to_batch alone, the result)."""
    t0 = time.process_time()
    cols = ArrowColumns("bench", 0)
    _JOINED.clear()
    for batch in batches:
        cols.add_batch(batch)
    t1 = time.process_time()
    rb = cols.to_batch()
    t2 = time.process_time()
    _JOINED.clear()
    assert rb.num_rows == n
    return t2 - t0, t2 - t1, rb


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n = args.records
    print(f"load average {os.getloadavg()[0]:.2f}; {n:,} records, ~1 MB batches, no compression; ns of CPU per record")
    assemble, even_runs = arrow._assemble, arrow._even_runs
    modes = {
        "joined": (_joined, even_runs),
        "sections": (assemble, lambda pos: None),  # every batch through the fallback
        "strided": (assemble, even_runs),
    }
    for keys, varied in (("keyed", False), ("null", False), ("keyed", True)):
        batches = make_batches(n, args.size, keys, varied)
        best = {m: [float("inf"), float("inf")] for m in modes}
        for rep in range(args.repeat):  # the modes take turns: a burst of load hits all of them alike
            results = {}
            for mode, (assemble_with, runs_with) in modes.items():
                arrow._assemble, arrow._even_runs = assemble_with, runs_with
                try:
                    whole, to_batch, rb = decode(batches, n)
                finally:
                    arrow._assemble, arrow._even_runs = assemble, even_runs
                best[mode] = [min(best[mode][0], whole), min(best[mode][1], to_batch)]
                if rep == 0:
                    results[mode] = rb
                del rb
            if rep == 0:
                assert results["strided"].equals(results["joined"]) and results["sections"].equals(results["joined"])
                del results
        label = f"{keys} keys, {'varied' if varied else 'fixed'} {args.size} B values ({len(batches)} batches)"
        print(label)
        for i, what in enumerate(("decode  ", "to_batch")):
            a, b, c = (best[m][i] for m in modes)
            print(
                f"  {what} joined {1e9 * a / n:5.0f}  sections {1e9 * b / n:5.0f} ({a / b:.2f}x)  "
                f"strided {1e9 * c / n:5.0f} ({a / c:.2f}x)"
            )


if __name__ == "__main__":
    main()
