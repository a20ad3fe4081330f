#!/usr/bin/env python3
"""docs/growth.md and docs/growth_*.svg from the raw results of scripts/bench_growth.sh.

    growth_report.py <raw dir> <docs dir>

When the run measured only some modes (scripts/bench_growth.sh -m), the report has only their
sections and is written into the raw dir instead (docs/growth.md stays one whole run).
Plain python3, no third-party module: the plots are SVG written by hand."""
import math
import os
import re
import sys

GOAL = 1.2
VIAS = ("core", "rscntr")


def vias_of(base):
    """The runs of a section: the core's, rscntr from another build (`base`, when given), rscntr."""
    return ("core",) + (("base",) if base else ()) + ("rscntr",)


def parse(path):
    out = {}
    try:
        text = open(path).read()
    except OSError:
        return {"missing": True}
    for line in text.splitlines():
        w = line.split()
        if not w:
            continue
        if w[0] == "objects":
            d = {}
            for k, v in zip(w, w[1:]):
                if k in ("open_us", "bind_us", "close_us", "rss_b", "heap_b", "ep_rss_b", "fds"):
                    d[k] = float(v)
            out["objects"] = d
        elif w[0] == "wake":
            d = {}
            for i, k in enumerate(w):
                if k == "lat_us":
                    d["lat"], d["lat90"], d["latmax"] = map(float, w[i + 1:i + 4])
                elif k in ("cpu_us", "idle_cpu_us", "woke", "idle_woke", "wakes", "idle_wakes", "timeouts"):
                    d[k] = float(w[i + 1])
            out["wake"] = d
        elif w[0] == "read_ns":
            out["read_ns"] = float(w[2])
        elif w[0] == "spin":
            i = w.index("lat_us")
            out["spin"], out["spin90"], out["spinmax"] = map(float, w[i + 1:i + 4])
            out["spin_reads"] = float(w[w.index("reads") + 1])
        elif w[0] in ("kwake_us", "chain_us"):
            k = "kwake" if w[0] == "kwake_us" else "chain"
            out[k], out[k + "99"] = map(float, w[1:3])
            if "cpu_us" in w:
                out[k + "_cpu"] = float(w[w.index("cpu_us") + 1])
        elif w[0] in ("error", "noresult", "exit", "sender"):
            out.setdefault("error", line.strip())
    return out


def window_less_idle(w):
    """A wake run's CPU per window less its idle window's: what the completion itself cost."""
    return w["cpu_us"] - w["idle_cpu_us"]


def second_wake_line(kw, one, many, ns):
    """What a second wake in turn adds on this machine (kernel_wake -c, the same run), beside what
    N waiters add to one over rscntr and what the issue's 1.2x would leave room for."""
    add_lat, add_cpu = kw["chain"] - kw["kwake"], kw["chain_cpu"] - kw["kwake_cpu"]
    exc = window_less_idle
    got_lat, got_cpu = many["lat"] - one["lat"], exc(many) - exc(one)
    return (f"Two wakes in turn (`kernel_wake -c`, alternating with the single wakes: the woken "
            f"thread wakes a second asleep in `futex(2)`, as a leader wakes a follower): median "
            f"{fmt(kw['chain'])} µs against {fmt(kw['kwake'])}, CPU of the sleeping threads "
            f"{fmt(kw['chain_cpu'])} against {fmt(kw['kwake_cpu'])} µs: the second wake adds "
            f"{fmt(add_lat)} µs of latency and {fmt(add_cpu)} µs of CPU. rscntr N = {ns[-1]} − "
            f"N = {ns[0]}: {fmt(got_lat)} µs of latency and {fmt(got_cpu)} µs of window − idle CPU; "
            f"1.2 × N = {ns[0]} leaves room for {fmt(0.2 * one['lat'])} µs and "
            f"{fmt(0.2 * exc(one))} µs.\n")


def fmt(v, digits=1):
    if v is None:
        return "–"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.{digits}f}"


def ratio(a, b):
    if a is None or b is None or b <= 0:
        return None
    return a / b


def rfmt(r):
    if r is None:
        return "–"
    s = f"{r:.2f}×"
    return f"**{s}**" if r > GOAL else s


def svg_plot(path, title, xlabel, ylabel, series, logy=True):
    """series: (label, colour, dashed, [(x, y)]); x on a log2 axis."""
    W, H, L, R, T, B = 560, 360, 70, 170, 30, 45
    pts = [(x, y) for s in series for x, y in s[3] if y is not None and y > 0]
    if not pts:
        return False
    xs = sorted({x for x, _ in pts})
    ymin, ymax = min(y for _, y in pts), max(y for _, y in pts)
    if logy:
        lo, hi = math.floor(math.log10(ymin)), math.ceil(math.log10(ymax))
        if hi == lo:
            hi += 1
        fy = lambda y: T + (H - T - B) * (1 - (math.log10(y) - lo) / (hi - lo))
        ticks = [10 ** e for e in range(lo, hi + 1)]
    else:
        lo, hi = 0, ymax * 1.1
        fy = lambda y: T + (H - T - B) * (1 - y / hi)
        ticks = [hi * i / 4 for i in range(5)]
    x0, x1 = math.log2(xs[0]), math.log2(xs[-1]) if len(xs) > 1 else math.log2(xs[0]) + 1
    fx = lambda x: L + (W - L - R) * (math.log2(x) - x0) / ((x1 - x0) or 1)
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="13">{title}</text>',
         f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
         f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
         f'<text x="{(L + W - R) / 2}" y="{H - 8}" text-anchor="middle">{xlabel}</text>',
         f'<text x="14" y="{(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 14 {(T + H - B) / 2})">{ylabel}</text>']
    for x in xs:
        o.append(f'<line x1="{fx(x):.1f}" y1="{H - B}" x2="{fx(x):.1f}" y2="{H - B + 4}" stroke="black"/>')
        o.append(f'<text x="{fx(x):.1f}" y="{H - B + 16}" text-anchor="middle">{x}</text>')
    for t in ticks:
        y = fy(t)
        o.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{L - 4}" y="{y + 4:.1f}" text-anchor="end">{fmt(t)}</text>')
    for i, (label, colour, dashed, data) in enumerate(series):
        d = [(fx(x), fy(y)) for x, y in data if y is not None and y > 0]
        if not d:
            continue
        dash = f' stroke-dasharray="{dashed}"' if isinstance(dashed, str) else ' stroke-dasharray="5,4"' if dashed else ""
        o.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="' +
                 " ".join(f"{x:.1f},{y:.1f}" for x, y in d) + '"/>')
        for x, y in d:
            o.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>')
        ly = T + 10 + 16 * i
        o.append(f'<line x1="{W - R + 10}" y1="{ly}" x2="{W - R + 35}" y2="{ly}" stroke="{colour}" stroke-width="2"{dash}/>')
        o.append(f'<text x="{W - R + 40}" y="{ly + 4}">{label}</text>')
    o.append("</svg>")
    open(path, "w").write("\n".join(o) + "\n")
    return True


COLOURS = {"tcp": "#1f77b4", "tcp;ofi_rxm": "#d62728", "shm": "#2ca02c"}


def main():
    raw, docs = sys.argv[1], sys.argv[2]
    meta = {}
    for line in open(os.path.join(raw, "meta.txt")):
        k, _, v = line.strip().partition(" ")
        meta[k] = v
    cores = meta.get("cores", "tcp tcp;ofi_rxm shm").split()
    modes = meta.get("modes", "objects waiters endpoints").split()
    base = meta.get("base")  # rscntr from another build, beside in the waiters and endpoints modes
    if set(modes) != {"objects", "waiters", "endpoints"}:
        docs = raw
    get = lambda core, via, tag: parse(os.path.join(raw, f"{core.replace(';', '_')}-{via}-{tag}.txt"))
    md = []
    md.append("# Cost growth\n")
    md.append("Generated by `bash scripts/bench_growth.sh` (bench/growth.c, bench/growth_report.py) "
              f"on the project's {meta.get('nproc', '?')}-core machine: `{meta.get('command', '')}`, "
              f"rscntr {meta.get('rscntr', '?')}, libfabric {meta.get('libfabric', '?')}, "
              f"{meta.get('seconds', '?')} s, load average {meta.get('load_start', '?')} at the start "
              f"and {meta.get('load_end', '?')} at the end. Each run is one process (objects) or two "
              "(a receiver that measures and a sender, forked), in a namespace with only loopback. "
              "`core` is the core provider with its own counters (`-p <core>`), `rscntr` rscntr over it "
              "(`-p rscntr`, `FI_RSCNTR_CORE=<core>`): same program, same calls. "
              f"Ratios are largest/smallest case; those above the goal ({GOAL}×) are in bold.\n")
    if base:
        md.append(f"In sections 2 and 3 `base` is rscntr {base} (its DSO built apart, `-B`), run "
                  "beside the others in the same run.\n")

    # ---- 1. objects ------------------------------------------------------------------------
    if "objects" in modes:
        objects_section(md, cores, get)

    # ---- 2 and 3. wakes -----------------------------------------------------------------------
    wake_sections(md, cores, get, modes, base, raw)
    plots(md, docs, cores, get, modes, base)
    open(os.path.join(docs, "growth.md"), "w").write("\n".join(md))


NS_OBJ = [1, 16, 256, 1024, 4096]


def objects_section(md, cores, get):
    md.append("## 1. Counters per domain\n")
    md.append("N counters (`FI_WAIT_UNSPEC`) opened in one domain, then closed: µs per counter for "
              "`fi_cntr_open`, `fi_ep_bind` and `fi_close`, the median of max(5, 1024/N) rounds after a "
              "warm-up round of one counter (so warm memory: the first round at N = 4096 pays page faults, "
              "`first_open_us` in the raw files); memory per counter on the first round: heap in use (`mallinfo2`, bytes, exact) and "
              "resident set (`/proc/self/statm`, page-granular: 0 at N = 1), and file descriptors per "
              "counter. *Bound*: counters bound two per endpoint (counter 2i `FI_SEND`, 2i+1 `FI_RECV` "
              "on endpoint i; an endpoint takes one counter per flag, so thousands of bound counters need "
              "thousands of endpoints, and one per endpoint passes the machine's 20000-fd limit over "
              "`tcp;ofi_rxm` at 4096), the N/2 endpoints opened (not enabled) before the counters and "
              "measured apart (ep KiB = resident set per endpoint); the bind's time includes rscntr's "
              "core counter, opened at the first bind. *Unbound*: the counters alone.\n")
    ns_obj = NS_OBJ
    for kind, tagp in (("unbound", "u"), ("bound", "b")):
        for core in cores:
            md.append(f"### {core}, {kind}\n")
            head = "| N | " + " | ".join(
                f"{via} {m}" for via in VIAS for m in
                (["open µs", "close µs", "heap B", "RSS B", "fds"] if kind == "unbound" else
                 ["open µs", "bind µs", "close µs", "heap B", "RSS B", "fds", "ep KiB"])) + " |"
            md.append(head)
            md.append("|" + "---|" * (head.count("|") - 1))
            rows = {}
            for n in ns_obj:
                cells = [str(n)]
                for via in VIAS:
                    r = get(core, via, f"objects-{tagp}-{n}")
                    o = r.get("objects")
                    rows[(via, n)] = o
                    k = 5 if kind == "unbound" else 7
                    if not o:
                        why = r.get("error", "no result")
                        cells += [f"{why.replace('|', '/')}"] + [""] * (k - 1)
                        continue
                    vals = [o["open_us"]] + ([o["bind_us"]] if kind == "bound" else []) + \
                        [o["close_us"], o["heap_b"], o["rss_b"], o["fds"]] + \
                        ([o["ep_rss_b"] / 1024] if kind == "bound" else [])
                    cells += [fmt(v, 2) for v in vals]
                md.append("| " + " | ".join(cells) + " |")
            # ratios: largest N with a result / N = 1 (heap), N = 16 (RSS: page-granular below)
            rl = []
            for via in VIAS:
                have = [n for n in ns_obj if rows.get((via, n))]
                if len(have) < 2:
                    continue
                a, z = rows[(via, have[0])], rows[(via, have[-1])]
                rss0 = rows.get((via, 16)) or a
                parts = [f"open {rfmt(ratio(z['open_us'], a['open_us']))}"]
                if kind == "bound":
                    parts.append(f"bind {rfmt(ratio(z['bind_us'], a['bind_us']))}")
                parts += [f"close {rfmt(ratio(z['close_us'], a['close_us']))}",
                          f"heap {rfmt(ratio(z['heap_b'], a['heap_b']))}",
                          f"RSS (from N = 16) {rfmt(ratio(z['rss_b'], rss0['rss_b']))}"]
                rl.append(f"{via} N = {have[-1]} / N = {have[0]}: " + ", ".join(parts))
            md.append("\nRatios: " + "; ".join(rl) + ".\n")



def wake_sections(md, cores, get, modes, base, raw):
    vias = vias_of(base)

    def wake_section(title, mode, ns, intro, yardstick=False):
        md.append(title + "\n")
        md.append(intro + "\n")
        for core in cores:
            md.append(f"### {core}\n")
            cols = ["lat µs", "p90 µs", "CPU µs", "idle CPU µs", "woke", "idle woke"]
            head = "| N | " + " | ".join(f"{via} {c}" for via in vias for c in cols) + " |"
            md.append(head)
            md.append("|" + "---|" * (head.count("|") - 1))
            rows = {}
            for n in ns:
                cells = [str(n)]
                for via in vias:
                    r = get(core, via, f"{mode}-{n}")
                    w = r.get("wake")
                    rows[(via, n)] = (w, r.get("read_ns"))
                    if not w:
                        cells += [r.get("error", "no result").replace("|", "/")] + [""] * (len(cols) - 1)
                        continue
                    vals = [w["lat"], w["lat90"], w["cpu_us"], w["idle_cpu_us"], w["woke"], w["idle_woke"]]
                    cells += [fmt(v) for v in vals]
                md.append("| " + " | ".join(cells) + " |")
            rl = []
            for via in vias:
                have = [n for n in ns if rows.get((via, n), (None,))[0]]
                if len(have) < 2:
                    continue
                (a, ra), (z, rz) = rows[(via, have[0])], rows[(via, have[-1])]
                exc = window_less_idle
                parts = [f"latency {rfmt(ratio(z['lat'], a['lat']))}",
                         f"CPU per window {rfmt(ratio(z['cpu_us'], a['cpu_us']))}",
                         f"idle CPU {rfmt(ratio(z['idle_cpu_us'], max(a['idle_cpu_us'], 1.0)))}"]
                parts.append(f"window − idle {fmt(exc(a), 0)} → {fmt(exc(z), 0)} µs")
                parts.append(f"others woken {fmt(a['woke'], 0)} → {fmt(z['woke'], 0)}")
                rl.append(f"{via} N = {have[-1]} / N = {have[0]}: " + ", ".join(parts))
            md.append("\nRatios: " + "; ".join(rl) + ".\n")
            timed_out = [f"{via} N = {n}: {fmt(w['timeouts'], 0)}" for (via, n), (w, _) in rows.items()
                         if w and w.get("timeouts", 0) > 0]
            if timed_out:
                md.append("Waits that timed out during the run (each a wake in some window): "
                          + ", ".join(timed_out) + ".\n")
            r, b = (rows.get((via, ns[-1]), (None,))[0] for via in ("rscntr", "base"))
            if base and r and b:
                md.append(f"rscntr / base at N = {ns[-1]}: latency {rfmt(ratio(r['lat'], b['lat']))}, "
                          f"p90 {rfmt(ratio(r['lat90'], b['lat90']))}, "
                          f"CPU per window {rfmt(ratio(r['cpu_us'], b['cpu_us']))}.\n")
            kw = yardstick and parse(os.path.join(raw, f"kwake-{core.replace(';', '_')}.txt"))
            one, many = (rows.get(("rscntr", n), (None,))[0] for n in (ns[0], ns[-1]))
            if kw and "kwake" in kw and one and many:
                extra = many["lat"] - one["lat"]
                md.append(f"One kernel wake (bench/kernel_wake.c, a process asleep 40 ms woken by a "
                          f"datagram, run before this core's waiters): median {fmt(kw['kwake'])} µs, "
                          f"p99 {fmt(kw['kwake99'])}. rscntr N = {ns[-1]} − N = {ns[0]}: "
                          f"{fmt(extra)} µs of latency, {extra / kw['kwake']:.2f} times one kernel "
                          "wake.\n")
                if "chain" in kw and "kwake_cpu" in kw:
                    md.append(second_wake_line(kw, one, many, ns))

    common = ("Per sample the waiters have slept 40 ms; the receiver then takes its CPU time "
              "(`getrusage(RUSAGE_SELF)`, all threads) and every waiter's voluntary context switches "
              "(`/proc/self/task/<tid>/status`), has the sender send one 64-byte message carrying its "
              "`CLOCK_MONOTONIC` time, sleeps the window (25 ms) and takes both again. *lat*: median "
              "(and p90) of the target waiter's return from `fi_cntr_wait` minus the payload's time; "
              "*CPU*: median CPU of the window, all threads (the receiver's own bookkeeping included, "
              "about 10-30 µs); *woke*: median count of the other waiters that were woken from sleep at "
              "least once in the window (context switches moved); *idle*: the same window without a "
              "message, right after (what the waiters cost without a completion; window − idle is "
              "noisy, a difference of two medians). ")
    if "waiters" in modes:
        wake_section("## 2. Waiters per domain", "waiters", [1, 4, 16, 64],
                 "N threads, each in `fi_cntr_wait(FI_WAIT_UNSPEC, 60 s)` on its own counter bound "
                 "`FI_RECV` to its own endpoint, all in ONE domain; one message to endpoint (sample mod N). " + common +
                 "Over shm the core's own waiters yield between progress calls: they never sleep (woke is 0: "
                 "a yield is no voluntary context switch) and one waiter takes a whole core, two or more both "
                 "cores (the CPU column is the machine's 2 × 25 ms); rscntr's sleep on the domain's doorbell. "
                 "Over tcp and tcp;ofi_rxm a completion for a waiter that does not lead the room (docs/design.md) "
                 "costs two wakes in turn, the leader's and its own: each core's table is followed by one "
                 "kernel wake, and two in turn, measured in the same run, the yardstick of that second wake.", yardstick=True)
    if "endpoints" not in modes:
        return
    wake_section("## 3. Endpoints per counter", "endpoints", [1, 16, 64, 256],
                 "N endpoints of one domain bound `FI_RECV` to ONE counter, one thread waiting on it; one "
                 "message to endpoint (sample mod N). " + common +
                 "Reads of that counter, once the waiter has left, are in the next table.")
    reads_section(md, cores, get, base)


def reads_section(md, cores, get, base):
    vias = vias_of(base)
    ns = [1, 16, 64, 256]
    md.append("### Reads\n")
    md.append("The same runs, after the waiter has left (nothing else drives progress). *read ns*: "
              "`fi_cntr_read` on the counter bound to the N endpoints, median of 5 batches of 500 "
              "back-to-back reads (the mean read of a batch). *spin*: the spinning reader, per sample "
              "(twice as many as the wake samples, 5 ms apart) the receiver's main thread has the sender send "
              "one message to a pseudo-random endpoint (the same sequence in every run) and spins on "
              "`fi_cntr_read` until the counter moves: "
              "median (and p90) of its clock then minus the payload's time, µs; *reads*: median reads "
              "per sample.\n")
    for core in cores:
        md.append(f"#### {core}\n")
        cols = ["read ns", "spin µs", "spin p90 µs", "reads"]
        head = "| N | " + " | ".join(f"{via} {c}" for via in vias for c in cols) + " |"
        md.append(head)
        md.append("|" + "---|" * (head.count("|") - 1))
        rows = {}
        for n in ns:
            cells = [str(n)]
            for via in vias:
                r = get(core, via, f"endpoints-{n}")
                rows[(via, n)] = r
                if r.get("read_ns") is None:
                    cells += [r.get("error", "no result").replace("|", "/")] + [""] * (len(cols) - 1)
                    continue
                cells += [fmt(r.get("read_ns")), fmt(r.get("spin")), fmt(r.get("spin90")),
                          fmt(r.get("spin_reads"), 0)]
            md.append("| " + " | ".join(cells) + " |")
        rl = []
        for via in vias:
            have = [n for n in ns if rows.get((via, n), {}).get("read_ns") is not None]
            if len(have) < 2:
                continue
            a, z = rows[(via, have[0])], rows[(via, have[-1])]
            rl.append(f"{via} N = {have[-1]} / N = {have[0]}: read {rfmt(ratio(z['read_ns'], a['read_ns']))}, "
                      f"spin {rfmt(ratio(z.get('spin'), a.get('spin')))}")
        side = []
        for n in ns:
            r, c = rows.get(("rscntr", n), {}), rows.get(("core", n), {})
            b = rows.get(("base", n), {})
            part = [f"N = {n}: read/core {rfmt(ratio(r.get('read_ns'), c.get('read_ns')))}",
                    f"spin/core {rfmt(ratio(r.get('spin'), c.get('spin')))}"]
            if base:
                part += [f"read/base {rfmt(ratio(r.get('read_ns'), b.get('read_ns')))}",
                         f"spin/base {rfmt(ratio(r.get('spin'), b.get('spin')))}"]
            side.append(", ".join(part))
        md.append("\nRatios: " + "; ".join(rl) + ".\n")
        md.append("rscntr beside the others: " + "; ".join(side) + ".\n")



def plots(md, docs, cores, get, modes, base):
    ns_obj = NS_OBJ
    plots = []
    vias = vias_of(base)

    def wake_plot(mode, ns, key, name, title, ylabel):
        series = []
        for core in cores:
            for via in vias:
                data = []
                for n in ns:
                    w = get(core, via, f"{mode}-{n}").get("wake")
                    data.append((n, w[key] if w else None))
                series.append((f"{via} {core}", COLOURS.get(core, "black"),
                               {"core": True, "base": "1,3", "rscntr": False}[via], data))
        if svg_plot(os.path.join(docs, name), title, "N", ylabel, series):
            plots.append((name, title))
    if "waiters" in modes:
        wake_plot("waiters", [1, 4, 16, 64], "lat", "growth_waiters_latency.svg",
                  "Waiters per domain: wake latency (median)", "µs")
        wake_plot("waiters", [1, 4, 16, 64], "cpu_us", "growth_waiters_cpu.svg",
                  "Waiters per domain: CPU per 25 ms window with one completion", "µs")
    if "endpoints" in modes:
        wake_plot("endpoints", [1, 16, 64, 256], "lat", "growth_endpoints_latency.svg",
                  "Endpoints per counter: wake latency (median)", "µs")
        for key, name, title, unit in (("read_ns", "growth_read.svg", "Endpoints per counter: fi_cntr_read", "ns"),
                                       ("spin", "growth_spin.svg",
                                        "Spinning reader: send to seen (median)", "µs")):
            series = []
            for core in cores:
                for via in vias:
                    series.append((f"{via} {core}", COLOURS.get(core, "black"),
                                   {"core": True, "base": "1,3", "rscntr": False}[via],
                                   [(n, get(core, via, f"endpoints-{n}").get(key)) for n in [1, 16, 64, 256]]))
            if svg_plot(os.path.join(docs, name), title, "N", unit, series):
                plots.append((name, title))
    series = []
    for core in cores:
        for via in VIAS:
            series.append((f"{via} {core}", COLOURS.get(core, "black"), via == "core",
                           [(n, (get(core, via, f"objects-b-{n}").get("objects") or {}).get("heap_b")) for n in ns_obj]))
    if "objects" in modes and svg_plot(os.path.join(docs, "growth_memory.svg"),
                                       "Bound counters: heap per counter", "N", "bytes", series):
        plots.append(("growth_memory.svg", "memory"))
    md.append("## Plots\n")
    md.append("Dashed: the core's own counters; dotted: `base` (rscntr before, where drawn); solid: "
              "rscntr over that core.\n")
    for name, title in plots:
        md.append(f"![{title}]({name})\n")


if __name__ == "__main__":
    main()
