#!/usr/bin/env python3
"""Per-kernel device time of one window of a run, from Nsight Compute's CSV.

`ncu --csv --print-units base --metrics gpu__time_duration.sum --graph-profiling node ...`
times every kernel alone (graph replays included, one row per kernel node), so the sum over a
window is the device time of that window without the gaps an eager, marker-timed profile counts
where the host queues slower than the device runs.

With `dcc-bench --profiler-window` and `ncu --profile-from-start off` the file holds only the
bracketed chunk or round. Otherwise `--start NAME` opens the window at the `--nth`-last launch
whose kernel name contains NAME (for the flow: `embed_gather`, the first kernel of every chunk's
encoder; a round of N batched sessions has N of them); it runs to the end of the file. Prints one row per kernel name: launches, total µs,
µs per launch, share; the total last.

    python3 scripts/ncu_table.py ncu.csv --title "SRc, tf32x3"
"""

import argparse
import csv
import sys
from collections import OrderedDict


def rows(path):
    with open(path, newline="") as f:
        # ncu prints its own log lines (==PROF==) before the CSV header
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") == "gpu__time_duration.sum":
            yield r["Kernel Name"], float(r["Metric Value"].replace(",", ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--start", help="kernel name that opens the window (default: the whole file)")
    ap.add_argument("--nth", type=int, default=1, help="open at the nth-last such launch")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    ks = list(rows(a.csv))
    if not ks:
        sys.exit(f"{a.csv}: no gpu__time_duration.sum rows")
    win = ks
    if a.start:
        opens = [i for i, (n, _) in enumerate(ks) if a.start in n]
        if len(opens) < a.nth:
            sys.exit(f"{a.csv}: {len(opens)} launches of '{a.start}', fewer than --nth {a.nth}")
        win = ks[opens[-a.nth]:]
    by = OrderedDict()
    for n, ns in win:
        short = n.split("(")[0]
        c, t = by.get(short, (0, 0.0))
        by[short] = (c + 1, t + ns)
    total = sum(t for _, t in by.values())
    print(f"# {a.title}: {len(win)} kernels, {total / 1e3:.1f} µs = {total / 1e6:.3f} ms device "
          "(each kernel timed alone" + (f"; window from the {a.nth}-last '{a.start}')" if a.start else ")"))
    print(f"{'kernel':<40} {'launches':>8} {'total µs':>10} {'µs/launch':>10} {'share':>7}")
    for n, (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print(f"{n[:40]:<40} {c:>8} {t / 1e3:>10.1f} {t / 1e3 / c:>10.2f} {100 * t / total:>6.1f}%")
    print(f"{'total':<40} {len(win):>8} {total / 1e3:>10.1f}")


if __name__ == "__main__":
    main()
