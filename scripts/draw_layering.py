#!/usr/bin/env python3
"""Draws docs/layering.svg, the README's picture of how rscntr layers over a core provider:
the application calls the core's endpoints, CQs, AVs and MRs directly for data, and rscntr's
counters for counting and waiting; the core counts its completions into rscntr's counters.

    python3 scripts/draw_layering.py            write docs/layering.svg
    python3 scripts/draw_layering.py --check    fail if docs/layering.svg differs from what it draws

Plain Python, no dependency: the SVG is written by hand, so the output is the same everywhere.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "layering.svg")

W, H = 720, 430
FONT = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def box(x, y, w, h, fill, title, lines=(), stroke="#444"):
    out = [f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="8" fill="{fill}" stroke="{stroke}"/>',
           f'<text x="{x + w / 2}" y="{y + 22}" text-anchor="middle" font-size="15" '
           f'font-weight="bold">{esc(title)}</text>']
    for i, line in enumerate(lines):
        out.append(f'<text x="{x + w / 2}" y="{y + 42 + 17 * i}" text-anchor="middle" '
                   f'font-size="12">{esc(line)}</text>')
    return out


def arrow(x1, y1, x2, y2, label="", dx=8, anchor="start", dashed=False, color="#222"):
    dash = ' stroke-dasharray="6 4"' if dashed else ""
    out = [f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{color}" stroke-width="2"'
           f'{dash} marker-end="url(#head)"/>']
    if label:
        for i, part in enumerate(label.split("\n")):
            out.append(f'<text x="{(x1 + x2) / 2 + dx}" y="{(y1 + y2) / 2 - 4 + 14 * i}" '
                       f'text-anchor="{anchor}" font-size="12" fill="{color}">{esc(part)}</text>')
    return out


def draw():
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
         f'viewBox="0 0 {W} {H}" {FONT}>',
         '<title>rscntr layered over a core provider</title>',
         '<defs><marker id="head" markerWidth="10" markerHeight="8" refX="9" refY="4" '
         'orient="auto"><path d="M0,0 L10,4 L0,8 z" fill="#222"/></marker></defs>',
         f'<rect width="{W}" height="{H}" fill="white"/>']
    # The application.
    s += box(20, 15, 680, 60, "#eef3fb", "application",
             ["MPI, OpenSHMEM, fabtests, your program: libfabric calls"])
    # rscntr, on the right; the core, below across the whole width.
    s += box(390, 135, 310, 120, "#fdf0dc", "rscntr's counters",
             ["read, add, set, wait; fds for poll()",
              "triggered operations, deferred work",
              "remote-access counters, automatic progress",
              "(software, or rdma-core hardware counters)"], stroke="#b5651d")
    s += box(20, 315, 680, 95, "#e9f5e9", "core provider (tcp, shm, tcp;ofi_rxm, sockets, ...)",
             ["the core's endpoints, CQs, AVs and MRs carry the data",
              "chosen by FI_RSCNTR_CORE, or the first that answers the hints"], stroke="#2e7d32")
    # Data: straight from the application to the core.
    s += arrow(150, 75, 150, 313, "data operations\n(send, recv, RMA, atomics)\nstraight to the core", dx=10)
    # Counters: to rscntr.
    s += arrow(545, 75, 545, 133, "counter calls", dx=10)
    # rscntr drives and binds the core; the core counts into rscntr.
    s += arrow(430, 255, 430, 313, "binds, progress,\nfew control calls", dx=-10, anchor="end")
    s += arrow(660, 313, 660, 257, "completions counted\n(peer API)", dx=-10, anchor="end", color="#2e7d32")
    s.append("</svg>")
    return "\n".join(s) + "\n"


def main():
    svg = draw()
    if "--check" in sys.argv[1:]:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != svg:
                print("draw_layering.py: docs/layering.svg is stale; run python3 scripts/draw_layering.py",
                      file=sys.stderr)
                return 1
        print("draw_layering.py: docs/layering.svg is current")
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(svg)
    print("wrote docs/layering.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
