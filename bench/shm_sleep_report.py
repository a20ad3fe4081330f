#!/usr/bin/env python3
"""docs/shm_sleep.md and docs/shm_sleep.svg from the raw results of scripts/bench_shm_sleep.sh.

    shm_sleep_report.py [--check] <raw dir> <out dir>

--check (the smoke run): also exit 1, naming them, when some configuration produced no number
(a run that failed or timed out); timing is never judged. Plain python3, no third-party
module: the plot is SVG written by hand."""
import math
import os
import statistics
import sys

LABEL = {"bell": "rscntr(shm), doorbell", "nobell": "rscntr(shm), FI_RSCNTR_SHM_BELL=0",
         "base": "rscntr(shm) at base", "shm": "shm directly"}
QLABEL = {"bell": "quiet sender, rscntr as built", "base": "quiet sender, rscntr at base",
          "both": "both sides wait, rscntr as built"}
COLOUR = {"bell": "#2ca02c", "nobell": "#d62728", "base": "#ff7f0e", "shm": "#1f77b4"}
PROGRAMS = ("fi_rdm_pingpong", "fi_rdm_cntr_pingpong")
SIZES = (8, 65536)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b is not None and b > 0 else None


def fmt(v, digits=2):
    if v is None:
        return "–"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.{digits}f}"


def rfmt(r):
    return "–" if r is None else f"{r:.2f}×"


def read_meta(raw):
    meta = {}
    for line in open(os.path.join(raw, "meta.txt")):
        k, _, v = line.rstrip("\n").partition(" ")
        meta[k] = v
    return meta


def parse_wake(path):
    """One bound_wake run: cpu % of a core while waiting, median and p99 wake (us); or why not."""
    text = open(path).read() if os.path.exists(path) else ""
    for line in text.splitlines():
        w = line.split()
        if w and w[0] == "wake_us":
            kv = dict(x.split("=", 1) for x in w[4:] if "=" in x)
            n, cpu, wall = int(kv["n"]), float(kv["cpu_us"]), float(kv["wall_s"])
            pct = 100.0 * cpu * n / (wall * 1e6) if wall > 0 else None
            return {"med": float(w[1]), "p99": float(w[2]), "cpu_pct": pct, "cpu_us": cpu}
    why = next((l for l in text.splitlines() if l.startswith(("noresult", "error", "unsupported", "exit"))),
               "no output")
    return {"why": why}


def parse_waiters(path):
    """One growth -m waiters run: idle CPU (% of a core) of all the waiters over the idle window,
    median and p90 wake latency (us) of one completion; or why not."""
    text = open(path).read() if os.path.exists(path) else ""
    for line in text.splitlines():
        w = line.split()
        if w[:2] == ["wake", "mode=waiters"]:
            i = w.index("lat_us")
            kv = {k: w[j + 1] for j, k in enumerate(w[:-1]) if k in ("idle_cpu_us", "window_ms", "cpu_us")}
            win = float(kv["window_ms"]) * 1000
            return {"med": float(w[i + 1]), "p90": float(w[i + 2]),
                    "cpu_pct": 100.0 * float(kv["idle_cpu_us"]) / win if win > 0 else None}
    why = next((l for l in text.splitlines() if l.startswith(("noresult", "error", "exit"))), "no output")
    return {"why": why}


def gather(raw, name, parse, keys, reps, on, label, missing):
    """The medians over the runs raw/<name with {r} the repetition> of what `parse` reads (its
    `keys`), and their count; each run without a number goes into `missing`."""
    runs = [parse(os.path.join(raw, name.format(r=r))) for r in range(1, reps + 1)] if on else []
    for r, x in enumerate(runs, 1):
        if "why" in x:
            missing.append(f"{label} rep {r}: {x['why']}")
    ok = [x for x in runs if "why" not in x]
    out = {k: med([x[k] for x in ok]) for k in keys}
    out["runs"] = len(ok)
    return out


def parse_pair(path, size=8):
    """One oversubscribed pair's client: (messages per second, elapsed s) or None."""
    text = open(path).read() if os.path.exists(path) else ""
    for line in text.splitlines():
        w = line.split()
        if len(w) >= 7 and w[0] == str(size):
            try:
                mbps, us = float(w[4]), float(w[5])
            except ValueError:
                continue
            # both print 2 decimals: the larger of the two has more significant digits
            if us >= mbps and us > 0:
                return 1e6 / us
            if mbps > 0:
                return mbps * 1e6 / size
    return None


def main():
    args = sys.argv[1:]
    check = bool(args) and args[0] == "--check"
    if check:
        args = args[1:]
    if len(args) != 2:
        sys.exit(__doc__)
    raw, out = args
    meta = read_meta(raw)
    variants = meta["variants"].split()
    reps, pp_reps = int(meta["reps"]), int(meta["pp_reps"])
    pairs = [int(x) for x in meta["pairs"].split()]
    iters = int(meta["over_iters"])
    modes = meta.get("modes", "wake waiters pp over").split()
    nwaiters = [int(x) for x in meta.get("waiters", "").split()]
    qwaiters = [int(x) for x in meta.get("quiet_waiters", "").split()]
    qvariants = [v for v in ("bell", "base") if v in variants]
    missing = []

    # ---- 1-2: idle wake
    wake = {v: gather(raw, f"wake-{v}-{{r}}.txt", parse_wake, ("cpu_pct", "med", "p99", "cpu_us"), reps,
                      "wake" in modes, f"wake {v}", missing) for v in variants}
    # one kernel wake (bench/kernel_wake.c), the yardstick
    kw = []
    for r in range(1, reps + 1):
        path = os.path.join(raw, f"kwake-{r}.txt")
        line = next((l.split() for l in open(path) if l.startswith("kwake_us")), None) if os.path.exists(path) else None
        if line:
            kw.append((float(line[1]), float(line[2])))
        elif "wake" in modes:
            missing.append(f"kernel wake rep {r}: no kwake_us line")
    kwake = {"med": med([a for a, _ in kw]), "p99": med([b for _, b in kw])}

    waiters = {(n, v): gather(raw, f"waiters-{v}-{n}-{{r}}.txt", parse_waiters, ("cpu_pct", "med", "p90"),
                              reps, "waiters" in modes, f"{n} waiters {v}", missing)
               for n in nwaiters for v in variants}

    # ---- 2b: a sender whose domain never waits; "both" for bound_wake is the wake
    # part's bell run
    qwake = {v: gather(raw, f"quiet-wake-{v}-{{r}}.txt", parse_wake, ("cpu_pct", "med", "p99"), reps,
                       "quiet" in modes, f"quiet sender wake {v}", missing) for v in qvariants}
    if "bell" in wake:
        qwake["both"] = wake["bell"]
    qwait = {(n, v): gather(raw, f"quiet-waiters-{v}-{n}-{{r}}.txt", parse_waiters, ("cpu_pct", "med", "p90"),
                            reps, "quiet" in modes, f"quiet sender, {n} waiters {v}", missing)
             for n in qwaiters for v in qvariants + ["both"]}

    # ---- 2c: answers: the sender's domain never waits ("quiet") or waits ("waits")
    asamples = max(int(meta.get("samples", "3")) // 3, 1)
    answ = {(v, t): gather(raw, f"answers-{v}-{t}-{{r}}.txt", parse_wake, ("cpu_pct", "med", "p99"), reps,
                           "answers" in modes, f"answers {v}, sender {t}", missing)
            for v in qvariants for t in ("quiet", "waits")}

    # ---- 3: pingpongs
    pp = {}
    for prog in PROGRAMS:
        for size in SIZES:
            for v in variants:
                path = os.path.join(raw, f"pp-{prog}-{size}-{v}.txt")
                xs = [float(l) for l in open(path).read().split()] if os.path.exists(path) else []
                if len(xs) < pp_reps and "pp" in modes:
                    missing.append(f"{prog} {size} B {v}: {len(xs)} of {pp_reps} repetitions")
                pp[prog, size, v] = (med(xs), len(xs))

    # ---- 4: oversubscribed
    over = {}
    for n in pairs:
        for v in variants:
            aggs, spans, timeouts, walls = [], [], 0, []
            for r in range(1, reps + 1):
                d = os.path.join(raw, f"over-{v}-{n}-{r}")
                rates = [parse_pair(os.path.join(d, f"pair-{i}.txt")) for i in range(1, n + 1)]
                done = [x for x in rates if x is not None]
                m = os.path.join(d, "meta.txt")
                if os.path.exists(m):
                    walls.append(float(open(m).read().split()[1]))
                if "over" not in modes:
                    continue
                if len(done) < n:
                    timeouts += 1
                    missing.append(f"oversubscribed {n} pairs {v} rep {r}: {len(done)} of {n} pairs finished")
                else:
                    aggs.append(sum(done))
                    # every pair's messages over the slowest pair's time (2 x iterations each)
                    spans.append(n * 2 * iters / max(2 * iters / x for x in done))
            over[n, v] = {"agg": med(aggs), "min": min(aggs) if aggs else None,
                          "max": max(aggs) if aggs else None, "ok": len(aggs), "timeouts": timeouts,
                          "span": med(spans), "wall": max(walls) if walls else None}

    # ---- the report
    busy = float(meta.get("busy_before_pct", "nan"))
    others = float(meta.get("busy_others_pct", "nan"))
    quiet = "quiet" if busy < 10 and others < 10 else "not quiet"
    bell_in = meta.get("bell_in_dso", "?") == "yes"
    cmp_ = [v for v in ("nobell", "base", "shm") if v in variants]
    L = ["# Waits that sleep over shm (issues 27 and 48)", "",
         "Generated by `bench/shm_sleep_report.py` from one run of `scripts/bench_shm_sleep.sh`;",
         "do not edit by hand. Benchmarks never decide pass or fail.", "",
         f"- command: `{meta['command']}`",
         f"- date: {meta['date']}; {meta['seconds']} s",
         f"- machine: {meta['machine']}; libfabric {meta['libfabric']}",
         f"- {quiet}: {busy:.1f} % of the CPUs busy in the 2 s before the run, {others:.1f} % "
         "used by other processes than the benchmark's during it; load average "
         f"{meta['load_start']} at the start, {meta['load_end']} at the end",
         f"- rscntr {meta['rscntr']}" + (f", base {meta['base']}" if "base" in meta else ""), ""]
    if not bell_in:
        L += ["**This DSO has no doorbell** (it does not know `FI_RSCNTR_SHM_BELL`): "
              "the doorbell and FI_RSCNTR_SHM_BELL=0 columns measure the same code; the run "
              "shows the benchmark works and what waits over shm cost before the doorbell.", ""]
    L += ["Variants: " + "; ".join(f"**{v}** {LABEL[v]}" for v in variants) + ". "
          "Every run in a network and mount namespace of its own (loopback, a private /dev/shm); "
          "the variants interleaved, their order rotated from one repetition to the next.", ""]

    if "wake" in modes:
        L += ["## Idle waiter: CPU and wake latency", "",
              f"`bench/bound_wake.c -w unspec -I {meta['idle_ms']} -m 8`: one thread in `fi_cntr_wait` "
              "on a counter bound `FI_RECV` (`FI_WAIT_UNSPEC`); the peer idles "
              f"{meta['idle_ms']} ms (+0–1 ms) after the waiter says it waits, then sends 8 B carrying "
              f"its clock; {meta['samples']} samples a run, {reps} runs per variant. CPU: the "
              "receiver process's user + system time over the phase divided by its wall time (100 % = "
              "one core busy the whole time). Latency: the waiter's clock when the wait returns minus "
              "the time in the message. Medians over the runs of each run's figure.", ""]
        hdr = "| variant | idle CPU, % of a core | wake median µs | wake p99 µs |"
        sep = "|---|---:|---:|---:|"
        for c in cmp_:
            hdr += f" median vs {c} |"
            sep += "---:|"
        L += [hdr, sep]
        for v in variants:
            w = wake[v]
            row = f"| {LABEL[v]} | {fmt(w['cpu_pct'], 1)} | {fmt(w['med'])} | {fmt(w['p99'])} |"
            for c in cmp_:
                row += f" {rfmt(ratio(w['med'], wake[c]['med'])) if c != v else '–'} |"
            L.append(row)
        L.append(f"| one kernel wake (bench/kernel_wake.c: recv on an AF_UNIX datagram socket) | – | "
                 f"{fmt(kwake['med'])} | {fmt(kwake['p99'])} |" + " |" * len(cmp_))
        L.append("")

    if "waiters" in modes:
        L += ["## Many waiters in one process", "",
              f"`bench/growth.c -m waiters -N <n> -s {meta['waiter_samples']} -W 25` (as in "
              "[growth.md](growth.md)): n threads of one process, each in `fi_cntr_wait` on its own "
              "counter (`FI_WAIT_UNSPEC`) bound `FI_RECV` to its own endpoint; the peer process sends "
              "one 64 B message to one of them after 40 ms of quiet. Idle CPU: the process's CPU over "
              "a 25 ms window with no message (100 % = one core; the machine has "
              f"{meta['machine'].split()[0]}). Latency: of the one completion (median and p90 over the "
              "completions). Medians over the runs.", ""]
        hdr = "| waiters | variant | idle CPU, % of a core | wake median µs | wake p90 µs |"
        sep = "|---:|---|---:|---:|---:|"
        for c in cmp_:
            hdr += f" median vs {c} |"
            sep += "---:|"
        L += [hdr, sep]
        for n in nwaiters:
            for v in variants:
                w = waiters[n, v]
                row = f"| {n} | {LABEL[v]} | {fmt(w['cpu_pct'], 1)} | {fmt(w['med'])} | {fmt(w['p90'])} |"
                for c in cmp_:
                    row += f" {rfmt(ratio(w['med'], waiters[n, c]['med'])) if c != v else '–'} |"
                L.append(row)
        L.append("")

    if "quiet" in modes:
        L += ["## A sender whose domain never waits", "",
              "The receiver as above; the sender's domain has no counter or CQ with a wait object "
              "(`bench/bound_wake.c -Q`: its receive counter `FI_WAIT_NONE`, read in a loop in "
              "the pingpong; `bench/growth.c` without `-R`: its CQ `FI_WAIT_NONE`). Beside it, "
              "both sides waiting: the idle-wake part's doorbell run (`bound_wake` without `-Q`) and "
              "`growth -R`, rscntr as built. Medians over the runs; idle CPU as above (the waiter's "
              "process).", ""]
        hdr = "| receiver | variant | idle CPU, % of a core | wake median µs | wake p99 (one waiter) or p90 µs | median − both wait µs |"
        L += [hdr, "|---|---|---:|---:|---:|---:|"]
        for v in qvariants + ["both"]:
            w, b = qwake.get(v, {}), qwake.get("both", {})
            d = None if w.get("med") is None or b.get("med") is None else w["med"] - b["med"]
            L.append(f"| one waiter (`bound_wake`) | {QLABEL[v]} | {fmt(w.get('cpu_pct'), 1)} | "
                     f"{fmt(w.get('med'))} | {fmt(w.get('p99'))} | {'–' if v == 'both' or d is None else f'{d:+.1f}'} |")
        for n in qwaiters:
            for v in qvariants + ["both"]:
                w, b = qwait[n, v], qwait[n, "both"]
                d = None if w["med"] is None or b["med"] is None else w["med"] - b["med"]
                L.append(f"| {n} waiter{'s' if n > 1 else ''} in one process (`growth`) | {QLABEL[v]} | "
                         f"{fmt(w['cpu_pct'], 1)} | {fmt(w['med'])} | {fmt(w['p90'])} | "
                         f"{'–' if v == 'both' or d is None else f'{d:+.1f}'} |")
        L.append("")

    if "answers" in modes:
        L += ["## Answers: what the sender's progress makes", "",
              f"`bench/bound_wake.c -F -w unspec`, {asamples} samples a run: the receiver posts a "
              "fetching atomic (`FI_SUM` of 1 on a u64 the sender registered), tells the sender, and "
              "sleeps in `fi_cntr_wait` on its counter (bound `FI_RECV | FI_READ`); the sender idles "
              f"{meta.get('idle_ms', '20')} ms plus up to 1 ms without driving its endpoint, notes its "
              "clock and reads its CQ (`FI_WAIT_NONE`) once: that progress answers. Wake latency: the "
              "receiver's clock when its wait returned minus the sender's before that read. The "
              "sender's domain never waits (`-Q`: its counter `FI_WAIT_NONE` too) or waits (its counter "
              "`FI_WAIT_UNSPEC`, unused here). Medians over the runs; idle CPU: the receiver's "
              "process, per sample.", "",
              "| sender's domain | variant | idle CPU, % of a core | wake median µs | wake p99 µs |",
              "|---|---|---:|---:|---:|"]
        for t, who in (("quiet", "never waits"), ("waits", "waits, only reads its CQ")):
            for v in qvariants:
                w = answ[v, t]
                name = 'rscntr as built' if v == 'bell' else 'rscntr at base'
                if not w["runs"]:
                    L.append(f"| {who} | {name} | no result in any run: the waits outlasted the run's "
                             "budget (see the raw files) | | |")
                    continue
                L.append(f"| {who} | {name} | {fmt(w['cpu_pct'], 1)} | {fmt(w['med'])} | {fmt(w['p99'])} |")
        L.append("")

    if "pp" in modes:
        L += ["## Pingpongs: the send path, and waits that sleep", "",
              f"fi_rdm_pingpong (its default completion method, spin: CQs without a wait object, "
              "nobody arms; the doorbell's cost on the send path) and fi_rdm_cntr_pingpong (its "
              "default, sread: counters with FI_WAIT_UNSPEC and fi_cntr_wait, which arm and sleep "
              "whenever the peer is late, as in the handshake before the timed loop), "
              f"{meta['pp_iters']} iterations, median usec/xfer over {pp_reps} interleaved repetitions "
              "(from fabtests' usec/xfer or its MB/sec, whichever printed more digits), ratios to "
              "FI_RSCNTR_SHM_BELL=0 and to the base build. Enough iterations that the timed "
              "loop outlasts a start-up transient: two processes placed on one CPU at the start "
              "share it, yielding to each other, until the kernel's load balancer parts them "
              "(8 to 30 ms, measured with `perf sched`); in a 5000-iteration run of 8 B (about "
              "3 ms) that transient, not the send path, decided the figure.", ""]
        hdr = "| program | size | " + " | ".join(f"{v} µs" for v in variants) + " |"
        sep = "|---|---:|" + "---:|" * len(variants)
        for c in cmp_:
            hdr += f" bell/{c} |"
            sep += "---:|"
        L += [hdr, sep]
        for prog in PROGRAMS:
            for size in SIZES:
                row = f"| {prog} | {'64 KiB' if size == 65536 else f'{size} B'} | "
                row += " | ".join(fmt(pp[prog, size, v][0], 3) for v in variants) + " |"
                for c in cmp_:
                    row += f" {rfmt(ratio(pp[prog, size, 'bell'][0], pp[prog, size, c][0]))} |"
                L.append(row)
        L.append("")

    if "over" in modes:
        L += ["## Oversubscribed: pairs of fi_rdm_cntr_pingpong -c sread at once", "",
              f"1 to {pairs[-1]} pairs of `fi_rdm_cntr_pingpong -c sread -S 8 -I {iters}` (counters with "
              f"`FI_WAIT_UNSPEC`, `fi_cntr_wait`) at once on the machine's {meta['machine'].split()[0]} "
              "cores, each pair in its namespace; every client starts at the same moment. Aggregate "
              "messages per second: each pair's 2 × iterations / its elapsed time (fabtests' "
              "own timing), summed over the pairs; the median over "
              f"{reps} repetitions (min–max in brackets). A configuration bounded at "
              f"{meta['over_timeout_s']} s that did not finish is counted under timeouts, not hidden.", ""]
        hdr = "| pairs | " + " | ".join(f"{v} msgs/s" for v in variants) + " |"
        sep = "|---:|" + "---:|" * len(variants)
        for c in cmp_:
            hdr += f" bell/{c} |"
            sep += "---:|"
        hdr += " timeouts |"
        sep += "---|"
        L += [hdr, sep]
        for n in pairs:
            cells = []
            for v in variants:
                o = over[n, v]
                cells.append("timed out" if o["agg"] is None else
                             f"{fmt(o['agg'])} ({fmt(o['min'])}–{fmt(o['max'])})" if o["ok"] > 1 else fmt(o["agg"]))
            row = f"| {n} | " + " | ".join(cells) + " |"
            for c in cmp_:
                row += f" {rfmt(ratio(over[n, 'bell']['agg'], over[n, c]['agg']))} |"
            tos = ", ".join(f"{v} {over[n, v]['timeouts']}/{reps}" for v in variants if over[n, v]["timeouts"])
            row += f" {tos or 'none'} |"
            L.append(row)
        L += ["", "The same runs counted another way: all the pairs' messages over the slowest pair's "
              "elapsed time (what the machine delivered while every pair ran; below the sum when "
              "some pairs finish early, i.e. when the pairs are not served alike).", ""]
        hdr = "| pairs | " + " | ".join(f"{v} msgs/s" for v in variants) + " |"
        sep = "|---:|" + "---:|" * len(variants)
        for c in cmp_:
            hdr += f" bell/{c} |"
            sep += "---:|"
        L += [hdr, sep]
        for n in pairs:
            row = f"| {n} | " + " | ".join(fmt(over[n, v]["span"]) if over[n, v]["span"] else "timed out"
                                         for v in variants) + " |"
            for c in cmp_:
                row += f" {rfmt(ratio(over[n, 'bell']['span'], over[n, c]['span']))} |"
            L.append(row)
    L += ["", "![idle CPU, wake latency and oversubscribed throughput](shm_sleep.svg)", ""]
    if missing:
        L += ["## Runs without a number", ""] + [f"- {m}" for m in missing] + [""]

    # the idle-wake figures, up front (bold: past its goal); the benchmark decides nothing
    G = []
    if "wake" in modes and wake["bell"]["cpu_pct"] is not None:
        c = wake["bell"]["cpu_pct"]
        G.append(f"- idle waiter CPU (goal ≤ 1 % of a core): {'**' if c > 1 else ''}{c:.1f} %"
                 f"{'**' if c > 1 else ''} with the doorbell, "
                 + ", ".join(f"{fmt(wake[v]['cpu_pct'], 1)} % {v}" for v in cmp_))
        if wake["shm"]["med"] is not None and wake["bell"]["med"] is not None:
            d = wake["bell"]["med"] - wake["shm"]["med"]
            k = kwake["med"]
            b = "**" if k is not None and d > k else ""
            G.append(f"- idle wake median (goal: within one kernel wake of shm's spinning median): "
                     f"{fmt(wake['bell']['med'])} µs with the doorbell against {fmt(wake['shm']['med'])} µs "
                     f"over shm ({b}{d:+.1f} µs{b}; one kernel wake between two processes: {fmt(k)} µs); "
                     f"p99 {fmt(wake['bell']['p99'])} µs against {fmt(wake['shm']['p99'])} µs")
    if "waiters" in modes:
        for n in nwaiters:
            w, ws = waiters[n, "bell"], waiters[n, "shm"]
            G.append(f"- {n} waiters in one process: idle CPU {fmt(w['cpu_pct'], 1)} % with the doorbell, "
                     f"{fmt(ws['cpu_pct'], 1)} % over shm; wake median {fmt(w['med'])} µs against "
                     f"{fmt(ws['med'])} µs over shm")
    if "pp" in modes:
        for c in [x for x in ("nobell", "base") if x in variants]:
            rs = [(ratio(pp[k, sz, "bell"][0], pp[k, sz, c][0]), k, sz) for k in PROGRAMS for sz in SIZES]
            rs = [x for x in rs if x[0] is not None]
            if rs:
                worst = max(rs)
                b = "**" if worst[0] > 1.05 else ""
                G.append(f"- pingpongs (goal ≤ 1.05× of before): bell/{c} "
                         + ", ".join(f"{r:.2f}×" for r, _, _ in rs)
                         + f" (fi_rdm_pingpong 8 B, 64 KiB, fi_rdm_cntr_pingpong 8 B, 64 KiB); the worst {b}{worst[0]:.2f}×{b}")
    if "over" in modes:
        parts = [f"{n} pairs {rfmt(ratio(over[n, 'bell']['agg'], over[n, 'shm']['agg']))}" for n in pairs]
        G.append("- oversubscribed, aggregate messages per second, doorbell against shm directly: " + ", ".join(parts)
                 + "; against FI_RSCNTR_SHM_BELL=0: "
                 + ", ".join(f"{n} pairs {rfmt(ratio(over[n, 'bell']['agg'], over[n, 'nobell']['agg']))}" for n in pairs))
    # a sender whose domain never waits
    Q = []
    if "quiet" in modes and "bell" in qwake and qwake["bell"].get("med") is not None:
        k = kwake["med"]
        for n, (w, b, base) in [(1, (qwake["bell"], qwake.get("both", {}), qwake.get("base", {})))] + \
                [(n, (qwait[n, "bell"], qwait[n, "both"], qwait.get((n, "base"), {}))) for n in qwaiters]:
            what = "one waiter (bound_wake)" if n == 1 and w is qwake["bell"] else f"{n} waiter{'s' if n > 1 else ''} in one process (growth)"
            tail = "p99" if w is qwake["bell"] else "p90"
            d = None if w.get("med") is None or b.get("med") is None else w["med"] - b["med"]
            bold = "**" if d is not None and k is not None and d > k else ""
            c = w.get("cpu_pct")
            cb = "**" if c is not None and c > 1 else ""
            Q.append(f"- quiet sender, {what}: wake median {fmt(w.get('med'))} µs ({tail} {fmt(w.get(tail))}) "
                     f"against {fmt(b.get('med'))} µs ({tail} {fmt(b.get(tail))}) when both sides wait "
                     f"({bold}{'–' if d is None else f'{d:+.1f}'} µs{bold}; goal: within one kernel wake, "
                     f"{fmt(k)} µs); idle CPU {cb}{fmt(c, 1)} %{cb} (goal ≤ 1 %)"
                     + (f"; at base {fmt(base.get('med'))} µs ({tail} {fmt(base.get(tail))}), idle CPU "
                        f"{fmt(base.get('cpu_pct'), 1)} %" if base else ""))
    if "answers" in modes and answ.get(("bell", "quiet"), {}).get("med") is not None:
        k = kwake["med"]
        for t, who in (("quiet", "whose domain never waits"), ("waits", "whose domain waits and only reads its CQ")):
            w, base = answ["bell", t], answ.get(("base", t), {})
            c = w.get("cpu_pct")
            cb = "**" if c is not None and c > 1 else ""
            Q.append(f"- answers from a sender {who} (bound_wake -F): wake median {fmt(w.get('med'))} µs "
                     f"(p99 {fmt(w.get('p99'))}; one kernel wake: {fmt(k)} µs); idle CPU {cb}{fmt(c, 1)} %{cb}"
                     + ("" if not base else f"; at base {fmt(base.get('med'))} µs (p99 {fmt(base.get('p99'))}), "
                        f"idle CPU {fmt(base.get('cpu_pct'), 1)} %" if base.get("runs") else
                        "; at base no run finished (its waits outlasted the run's budget)"))
    if "pp" in modes and "base" in variants:
        for prog, who in (("fi_rdm_pingpong", "no side waits (spin: CQs without a wait object)"),
                          ("fi_rdm_cntr_pingpong", "both sides wait (sread: counters with FI_WAIT_UNSPEC)")):
            rs = [ratio(pp[prog, sz, "bell"][0], pp[prog, sz, "base"][0]) for sz in SIZES]
            if all(r is not None for r in rs):
                b = "**" if max(rs) > 1.02 else ""
                Q.append(f"- {prog}, {who}, rscntr as built against base (goal ≤ 1.02×): "
                         + ", ".join(f"{b if r > 1.02 else ''}{r:.2f}×{b if r > 1.02 else ''}" for r in rs)
                         + " (8 B, 64 KiB)")
    if G or Q:
        i = L.index("## Idle waiter: CPU and wake latency") if "wake" in modes else len(L)
        block = (["## Issue 27's figures", ""] + G + [""] if G else []) + \
            (["## Issue 48's figures", ""] + Q + [""] if Q else [])
        for k, line in enumerate(block):
            L.insert(i + k, line)

    os.makedirs(out, exist_ok=True)
    open(os.path.join(out, "shm_sleep.md"), "w").write("\n".join(L))
    svg(os.path.join(out, "shm_sleep.svg"), variants, wake, over, pairs)
    print(f"[shm-sleep] wrote {out}/shm_sleep.md and {out}/shm_sleep.svg")
    if check and missing:
        print("[shm-sleep] configurations without numbers:\n  " + "\n  ".join(missing))
        sys.exit(1)


def ticks_for(vmax):
    """A nice step (1, 2, 2.5 or 5 x 10^k) giving 3-6 ticks from 0 past vmax: (top, ticks)."""
    vmax = max(vmax, 1e-9)
    e = 10 ** math.floor(math.log10(vmax / 4))
    step = next(m * e for m in (1, 2, 2.5, 5, 10) if vmax / (m * e) <= 5)
    n = math.ceil(vmax / step)
    return n * step, [i * step for i in range(n + 1)]


def svg(path, variants, wake, over, pairs):
    """Three panels: idle CPU (bars), wake median and p99 (bars), aggregate msgs/s by pairs."""
    W, H, PW, GAP, T, B, L = 1080, 390, 290, 70, 40, 70, 60
    SHORT = {"bell": "rscntr(shm), doorbell", "nobell": "rscntr(shm), FI_RSCNTR_SHM_BELL=0",
             "base": "rscntr(shm) at base", "shm": "shm directly"}
    per_row = 3 if len(variants) <= 3 else 2
    rows = -(-len(variants) // per_row)
    HT = H + 16 * (rows - 1)
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{HT}" font-family="sans-serif" font-size="11">',
         f'<rect width="{W}" height="{HT}" fill="white"/>']
    fy = lambda v, top: H - B - (H - T - B) * v / top

    def axes(x0, title, ylabel, vmax, unit=1.0):
        top, ticks = ticks_for(vmax / unit)
        o.append(f'<text x="{x0 + PW / 2}" y="20" text-anchor="middle" font-size="13">{title}</text>')
        o.append(f'<line x1="{x0}" y1="{H - B}" x2="{x0 + PW}" y2="{H - B}" stroke="black"/>')
        o.append(f'<line x1="{x0}" y1="{T}" x2="{x0}" y2="{H - B}" stroke="black"/>')
        cy = (T + H - B) / 2
        o.append(f'<text x="{x0 - 40}" y="{cy}" text-anchor="middle" transform="rotate(-90 {x0 - 40} {cy})">{ylabel}</text>')
        for t in ticks:
            y = fy(t, top)
            o.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + PW}" y2="{y:.1f}" stroke="#ddd"/>')
            o.append(f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{t:g}</text>')
        return top * unit

    bw = (PW - 20) / len(variants)
    # panel 1: idle CPU
    x0 = L
    top = axes(x0, "Idle waiter CPU", "% of a core", max([wake[v]["cpu_pct"] or 0 for v in variants] + [1]))
    for i, v in enumerate(variants):
        c = wake[v]["cpu_pct"]
        x = x0 + 10 + i * bw
        if c is not None:
            h = H - B - fy(c, top)
            o.append(f'<rect x="{x:.1f}" y="{H - B - h:.1f}" width="{bw - 8:.1f}" height="{h:.1f}" fill="{COLOUR[v]}"/>')
            o.append(f'<text x="{x + (bw - 8) / 2:.1f}" y="{H - B - h - 3:.1f}" text-anchor="middle">{fmt(c, 1)}</text>')
        o.append(f'<text x="{x + (bw - 8) / 2:.1f}" y="{H - B + 14}" text-anchor="middle">{v}</text>')

    # panel 2: wake latency median and p99
    x0 = L + PW + GAP
    top = axes(x0, "Idle wake latency", "µs", max([wake[v]["p99"] or 0 for v in variants] + [1]))
    for i, v in enumerate(variants):
        x = x0 + 10 + i * bw
        for j, (k, op) in enumerate((("med", "1"), ("p99", "0.45"))):
            val = wake[v][k]
            if val is None:
                continue
            h = H - B - fy(val, top)
            xx = x + j * (bw - 8) / 2
            o.append(f'<rect x="{xx:.1f}" y="{H - B - h:.1f}" width="{(bw - 8) / 2:.1f}" height="{h:.1f}" fill="{COLOUR[v]}" fill-opacity="{op}"/>')
            o.append(f'<text x="{xx + (bw - 8) / 4:.1f}" y="{H - B - h - 3:.1f}" text-anchor="middle" font-size="9">{fmt(val, 1)}</text>')
        o.append(f'<text x="{x + (bw - 8) / 2:.1f}" y="{H - B + 14}" text-anchor="middle">{v}</text>')
    o.append(f'<text x="{x0 + PW / 2}" y="{H - B + 30}" text-anchor="middle" font-size="10">solid: median, light: p99</text>')

    # panel 3: aggregate msgs/s by pairs
    x0 = L + 2 * (PW + GAP)
    vals = [over[n, v]["agg"] for n in pairs for v in variants if over[n, v]["agg"]]
    top = axes(x0, "Oversubscribed: aggregate rate", "million messages per second", max(vals + [1]), 1e6)
    xs = {n: x0 + 20 + (PW - 40) * i / max(len(pairs) - 1, 1) for i, n in enumerate(pairs)}
    for n in pairs:
        o.append(f'<text x="{xs[n]:.1f}" y="{H - B + 14}" text-anchor="middle">{n}</text>')
    o.append(f'<text x="{x0 + PW / 2}" y="{H - B + 30}" text-anchor="middle">pairs of fi_rdm_cntr_pingpong -c sread</text>')
    o.append(f'<text x="{x0 + PW / 2}" y="{H - B + 44}" text-anchor="middle" font-size="10">solid: sum of the pairs\' rates; dashed: all / slowest pair\'s time</text>')
    for i, v in enumerate(variants):
        for key, dash in (("agg", ""), ("span", ' stroke-dasharray="5,4"')):
            d = [(xs[n], fy(over[n, v][key], top)) for n in pairs if over[n, v][key]]
            if d:
                o.append(f'<polyline fill="none" stroke="{COLOUR[v]}" stroke-width="2"{dash} points="' +
                         " ".join(f"{x:.1f},{y:.1f}" for x, y in d) + '"/>')
                for x, y in d:
                    o.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{COLOUR[v]}"/>')
        for n in pairs:
            if over[n, v]["agg"] is None:
                o.append(f'<text x="{xs[n]:.1f}" y="{T + 10 + 12 * i}" text-anchor="middle" fill="{COLOUR[v]}">timed out</text>')
    # legend
    for i, v in enumerate(variants):
        x, y = L + (i % per_row) * (W - L) / per_row, H - 20 + 16 * (i // per_row)
        o.append(f'<rect x="{x:.1f}" y="{y}" width="12" height="10" fill="{COLOUR[v]}"/>')
        o.append(f'<text x="{x + 16:.1f}" y="{y + 9}">{v}: {SHORT[v]}</text>')
    o.append("</svg>")
    open(path, "w").write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
