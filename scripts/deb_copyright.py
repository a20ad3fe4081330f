#!/usr/bin/env python3
"""Writes the Debian copyright file (machine-readable format 1.0) of librscntr-fi to stdout.

    deb_copyright.py <repository root> <cargo metadata JSON file> <the DSO> <rustc release> <rustc sysroot>

What librscntr-fi.so holds, and so what the file covers:
  - rscntr itself (LICENSE);
  - every crate it links: the normal (not build, not dev) dependencies that `cargo metadata
    --filter-platform x86_64-unknown-linux-gnu` resolves from rscntr, transitively; each with its
    Cargo.toml licence and the copyright lines of its own licence files (its authors when those
    name nobody);
  - Rust's standard library, linked statically, and the crates.io crates it is built from whose
    code is in the DSO (found by the source paths rustc leaves in it, /rust/deps/<crate>-<version>:
    give it the DSO before stripping, whose debug information names each of them).
A licence this script has no text or common-licenses file for, or a std crate it does not know,
stops it with an error: the file is never written incomplete.
"""
import json
import os
import re
import sys

ROOT, METADATA, DSO, RUSTC_RELEASE, SYSROOT = sys.argv[1:6]

# SPDX name -> DEP-5 short name, for the licences the file can carry.
DEP5 = {"MIT": "Expat", "Apache-2.0": "Apache-2.0", "BSD-2-Clause": "BSD-2-clause",
        "GPL-2.0-only": "GPL-2", "GPL-2.0": "GPL-2", "Unicode-3.0": "Unicode-3.0"}

# Crates of Rust's standard library (out of its tree, from crates.io) and their licences as
# crates.io and rustc's COPYRIGHT-library.html give them. A std crate found in the DSO that is not
# here is an error: look its licence up and add it.
STD_CRATES = {
    "addr2line": "Apache-2.0 OR MIT", "adler2": "0BSD OR MIT OR Apache-2.0",
    "cfg-if": "MIT OR Apache-2.0", "gimli": "MIT OR Apache-2.0", "hashbrown": "MIT OR Apache-2.0",
    "libc": "MIT OR Apache-2.0", "memchr": "Unlicense OR MIT",
    "miniz_oxide": "MIT OR Zlib OR Apache-2.0", "object": "Apache-2.0 OR MIT",
    "rustc-demangle": "MIT/Apache-2.0",
}


def fail(msg):
    sys.stderr.write("deb_copyright.py: %s\n" % msg)
    sys.exit(1)


def dep5_license(spdx, what):
    """(DEP-5 licence, comment): an SPDX 'A OR B' expression (or the old 'A/B') in DEP-5 words.
    Alternatives without a text here are left out (the recipient may choose among them), and the
    comment says so."""
    if re.search(r"\b(AND|WITH)\b|[()]", spdx):
        fail("%s: licence %r is not a plain choice: write its paragraph by hand" % (what, spdx))
    alts = [a.strip() for a in re.split(r"\s+OR\s+|/", spdx) if a.strip()]
    kept = [DEP5[a] for a in alts if a in DEP5]
    if not kept:
        fail("%s: no text for any of %r: add one to deb_copyright.py" % (what, spdx))
    comment = None
    if len(kept) < len(alts):
        comment = ("offered under %s, distributed here under %s." %
                   (spdx, " or ".join(kept)))
    return " or ".join(kept), comment


def copyright_lines(text):
    out = []
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r"Copyright\s+(?:\(c\)\s*|©\s*)?(.+)$", s, re.I)
        if not m or not s.startswith("Copyright"):
            continue
        rest = m.group(1).strip()
        if rest[0] in "<[" or rest[0].islower():     # a template ("[yyyy]", "<year>"), or prose
            continue
        if "Free Software Foundation" in rest:       # the GPL's text, not the crate's authors
            continue
        rest = re.sub(r"\s*All rights reserved\.?$", "", rest)
        if rest not in out:
            out.append(rest)
    return out


def field(name, lines):
    lines = [l for l in lines if l]
    return "%s: %s\n" % (name, lines[0]) + "".join(" %s\n" % l for l in lines[1:])


def text_field(name, first, body):
    """A field whose value is free text: each line indented, empty lines as ' .'."""
    out = "%s: %s\n" % (name, first)
    for line in body.strip("\n").splitlines():
        out += " %s\n" % line.rstrip() if line.strip() else " .\n"
    return out


paragraphs = []

meta = json.load(open(METADATA))
pkgs = {p["id"]: p for p in meta["packages"]}
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
root = meta["resolve"]["root"]
me = pkgs[root]

rustc_release = RUSTC_RELEASE

lic, _ = dep5_license(me["license"], me["name"])
own = copyright_lines(open(os.path.join(ROOT, "LICENSE")).read()) or fail("LICENSE names nobody")
paragraphs.append(
    "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
    "Upstream-Name: %s\n" % me["name"] +
    text_field("Comment", "librscntr-fi.so is built from rscntr's source with rustc %s." % rustc_release,
               "It links the crates from crates.io listed below (rscntr's normal dependencies,\n"
               "as cargo metadata resolves them for x86_64-unknown-linux-gnu) and Rust's standard\n"
               "library, statically. It links libfabric, libgcc_s and the C library dynamically\n"
               "and loads libibverbs at run time when present; those are other packages."))
paragraphs.append(field("Files", ["*"]) + field("Copyright", own) + "License: %s\n" % lic)

# rscntr's normal dependencies, transitively (dep_kinds kind null = normal).
seen, todo = set(), [root]
while todo:
    i = todo.pop()
    if i in seen:
        continue
    seen.add(i)
    for d in nodes[i]["deps"]:
        if any(k["kind"] is None for k in d["dep_kinds"]):
            todo.append(d["pkg"])
seen.discard(root)
for i in sorted(seen, key=lambda i: (pkgs[i]["name"], pkgs[i]["version"])):
    p = pkgs[i]
    what = "%s-%s" % (p["name"], p["version"])
    if not p.get("license"):
        fail("%s has no licence expression in its Cargo.toml" % what)
    lic, comment = dep5_license(p["license"], what)
    src = os.path.dirname(p["manifest_path"])
    holders = []
    for f in sorted(os.listdir(src)):
        if re.match(r"(LICEN[CS]E|COPYING|COPYRIGHT|NOTICE)", f, re.I) and os.path.isfile(os.path.join(src, f)):
            holders += [h for h in copyright_lines(open(os.path.join(src, f), errors="replace").read())
                        if h not in holders]
    if not holders:
        holders = [re.sub(r"\s*<[^>]*>", "", a) for a in p.get("authors") or []] or \
                  ["the %s developers" % p["name"]]
    par = field("Files", ["crates.io/%s/*" % what]) + field("Copyright", holders) + "License: %s\n" % lic
    par += "Comment: from crates.io, linked into librscntr-fi.so%s\n" % (
        ("; " + comment) if comment else ".")
    paragraphs.append(par)

# Rust's standard library, and the crates.io crates of it whose code the DSO holds.
paragraphs.append(
    field("Files", ["rust-std/*"]) +
    field("Copyright", ["The Rust Project Developers"]) +
    "License: Apache-2.0 or Expat\n" +
    text_field("Comment", "The standard library of rustc %s, linked statically." % rustc_release,
               "rustc's COPYRIGHT-library.html gives the notices of each of its parts."))
paragraphs.append(
    field("Files", ["rust-std/core/src/unicode/unicode_data.rs"]) +
    field("Copyright", ["1991-2024 Unicode, Inc"]) + "License: Unicode-3.0\n")
blob = open(DSO, "rb").read()
found = sorted(set(m.decode() for m in re.findall(rb"/rust/deps/([A-Za-z0-9_-]+?-[0-9][A-Za-z0-9_.+]*)(?![A-Za-z0-9_.+-])", blob)))
for what in found:
    name = re.match(r"(.+?)-[0-9]", what).group(1)
    if name not in STD_CRATES:
        fail("the DSO holds std's crate %s, whose licence deb_copyright.py does not know" % what)
    lic, comment = dep5_license(STD_CRATES[name], what)
    paragraphs.append(
        field("Files", ["rust-std/deps/%s/*" % what]) +
        field("Copyright", ["the %s developers" % name]) + "License: %s\n" % lic +
        "Comment: part of Rust's standard library, from crates.io%s\n" % (("; " + comment) if comment else "."))

# The licences' own paragraphs: the texts in common-licenses are referred to, the rest given.
used = set()
for par in paragraphs:
    for m in re.finditer(r"^License: (.+)$", par, re.M):
        used.update(x.strip() for x in m.group(1).split(" or "))

def body_after(text, start):
    i = text.find(start)
    return text[i:] if i >= 0 else fail("no %r in the licence text" % start)

mit_src = None
for i in sorted(seen, key=lambda i: pkgs[i]["name"]):
    f = os.path.join(os.path.dirname(pkgs[i]["manifest_path"]), "LICENSE-MIT")
    if os.path.isfile(f):
        mit_src = f
        break
sysroot_lic = os.path.join(SYSROOT, "share/doc/rust/licenses")
texts = {
    "BSD-2-clause": lambda: body_after(open(os.path.join(ROOT, "LICENSE")).read(), "Redistribution and use"),
    "Expat": lambda: body_after(open(mit_src or fail("no LICENSE-MIT among the crates")).read(),
                                "Permission is hereby granted"),
    "Unicode-3.0": lambda: open(os.path.join(sysroot_lic, "Unicode-3.0.txt")).read(),
}
common = {"Apache-2.0": "Apache-2.0", "GPL-2": "GPL-2"}
for name in sorted(used):
    if name in common:
        paragraphs.append(text_field("License", name,
            "On Debian systems, the complete text of this licence is in\n"
            "/usr/share/common-licenses/%s." % common[name]))
    elif name in texts:
        paragraphs.append(text_field("License", name, texts[name]()))
    else:
        fail("no text for licence %s" % name)

sys.stdout.write("\n".join(paragraphs))
