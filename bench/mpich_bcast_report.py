#!/usr/bin/env python3
"""docs/mpich_bcast.md and docs/mpich_bcast.svg from the raw results of
scripts/bench_mpich_bcast.sh.

    mpich_bcast_report.py <raw dir> <docs dir>

The raw dir holds meta.txt ("key value" lines: reps, ranks, iters, configs, load_before,
load_after, and per configuration "label.<name> <text>" and "base.<name> <name>") and one
file per run, <name>-<rep>.txt, with mpi_bcast_lat's "bcast_us <bytes> <us>" lines (a run
that failed has none, and "failed <reason>"). Plain python3; the plot is growth_report.py's
hand-written SVG."""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from growth_report import fmt, svg_plot  # noqa: E402

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"]


def main():
    raw, docs = sys.argv[1], sys.argv[2]
    meta = {}
    for line in open(os.path.join(raw, "meta.txt")):
        k, _, v = line.strip().partition(" ")
        meta[k] = v
    names = meta["configs"].split()
    reps = int(meta["reps"])
    runs = {n: [] for n in names}
    failures = {n: [] for n in names}
    for n in names:
        for r in range(1, reps + 1):
            try:
                text = open(os.path.join(raw, f"{n}-{r}.txt")).read()
            except OSError:
                continue
            d = {}
            for line in text.splitlines():
                w = line.split()
                if len(w) == 3 and w[0] == "bcast_us":
                    d[int(w[1])] = float(w[2])
                elif w and w[0] == "failed":
                    failures[n].append(line[len("failed "):])
            if d:
                runs[n].append(d)
    sizes = sorted({s for n in names for d in runs[n] for s in d})
    med = {}
    for n in names:
        for s in sizes:
            v = [d[s] for d in runs[n] if s in d]
            med[(n, s)] = statistics.median(v) if v else None

    def ratio(a, b):
        return a / b if a and b else None

    out = [
        "# MPICH 5 broadcast latency: triggered trees over rscntr against MPICH's default",
        "",
        "`scripts/bench_mpich_bcast.sh` (numbers never asserted; regenerate with it): MPI_Bcast of",
        "MPI_CHAR from root 0 (`bench/mpi_bcast_lat.c`, OSU-style: per size a barrier, then",
        f"{meta['iters']} broadcasts timed on every rank, a quarter of that above 64 KiB; the figure is",
        "the largest of the ranks' means), MPICH 5 built with `patches/mpich-5-triggered-by-caps.patch`",
        f"(`scripts/patched_mpich.sh`), {meta['ranks']} ranks on one node (`MPIR_CVAR_NOLOCAL=1`: every",
        "message through libfabric), each in a loopback-only namespace. Every configuration runs",
        f"once per repetition, interleaved, {reps} repetitions; each cell is the median over them.",
        f"Machine: 2 cores shared with other work; load average {meta.get('load_before', '?')} before,",
        f"{meta.get('load_after', '?')} after. Absolute numbers are only comparable within a run.",
        "",
        "Configurations:",
        "",
    ]
    for n in names:
        base = meta.get(f"base.{n}")
        out.append(f"- `{n}`: {meta.get('label.' + n, n)}" + (f" (ratio against `{base}`)" if base else ""))
    out += ["", "## Latency (µs, median) and ratio to the baseline", ""]
    head = "| size (B) |" + "".join(f" {n} |" for n in names)
    out += [head, "|---:|" + "---:|" * len(names)]
    for s in sizes:
        row = f"| {s} |"
        for n in names:
            v = med[(n, s)]
            base = meta.get(f"base.{n}")
            cell = "—" if v is None else fmt(v, 1)
            r = ratio(v, med.get((base, s))) if base else None
            if r is not None:
                cell += f" ({r:.2f}×)"
            row += f" {cell} |"
        out.append(row)
    out.append("")
    failed = [(n, f) for n in names for f in failures[n]]
    if failed:
        out += ["## Runs that failed", ""]
        seen = set()
        for n, f in failed:
            if (n, f) in seen:
                continue
            seen.add((n, f))
            k = sum(1 for m, g in failed if m == n and g == f)
            out.append(f"- `{n}` ({k} of {reps}): {f}")
        out.append("")
    series = []
    for i, n in enumerate(names):
        data = [(s, med[(n, s)]) for s in sizes]
        if any(v for _, v in data):
            series.append((n, COLOURS[i % len(COLOURS)], "default" in n, data))
    if svg_plot(os.path.join(docs, "mpich_bcast.svg"), f"MPI_Bcast, {meta['ranks']} ranks, medians",
                "bytes", "µs per broadcast", series):
        out += ["![MPI_Bcast latency](mpich_bcast.svg)", ""]
    open(os.path.join(docs, "mpich_bcast.md"), "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
