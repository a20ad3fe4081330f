#!/usr/bin/env bash
# Installs rscntr into the prefix of a libfabric installation, where that libfabric finds it
# without FI_PROVIDER_PATH:
#   PROVDIR/librscntr-fi.so                  the provider
#   PREFIX/include/rdma/fi_ext_rscntr.h      the extension header
#   PREFIX/share/man/man7/fi_rscntr.7        the man page
#
#   scripts/install.sh PREFIX
#
# PROVDIR is the directory the libfabric in LIBDIR scans when FI_PROVIDER_PATH is unset: the
# default its configure compiled in (its FI_PROVIDER_PATH parameter says it), when that lies
# under PREFIX. That is also where a libfabric built with its cores as DSOs keeps them
# (lib<core>-fi.so), and rscntr goes beside them. Otherwise (no libfabric.so.1 in LIBDIR yet, or
# a library copied from another prefix, which still scans the one it was configured with)
# PROVDIR is LIBDIR/libfabric. After installing, that libfabric's own fi_info (PREFIX/bin, else
# the one on PATH, run on LIBDIR's library) must list rscntr with FI_PROVIDER_PATH and
# FI_PROVIDER unset: if it does not, the install fails and says why.
#
# Builds rscntr first if needed (`cargo build --release`, a no-op when up to date); set
# RSCNTR_NO_BUILD=1 to install what target/release holds without running cargo. Idempotent:
# running it again replaces the files with identical ones. Environment:
#   LIBDIR   libfabric's libdir (default: PREFIX/lib64 if libfabric.so.1 is there, else PREFIX/lib)
#   DESTDIR  staging root for packaging, prepended to every installed path
set -euo pipefail
umask 022   # new directories 0755, whatever the caller's umask
ROOT=$(cd "$(dirname "$0")/.." && pwd)

if [ $# -ne 1 ] || [ -z "$1" ] || [[ $1 == -* ]]; then
    echo "usage: scripts/install.sh PREFIX" >&2
    exit 2
fi
case $1 in
    /*) PREFIX=$1 ;;
    *) PREFIX=$PWD/$1 ;;
esac
PREFIX=${PREFIX%/}
if [ -z "${LIBDIR:-}" ]; then
    LIBDIR=$PREFIX/lib
    if [ ! -e "$PREFIX/lib/libfabric.so.1" ] && [ -e "$PREFIX/lib64/libfabric.so.1" ]; then
        LIBDIR=$PREFIX/lib64
    fi
fi
DEST=${DESTDIR:-}

# The provider directory the library in LIBDIR scans by default.
configured_provdir() {
    [ -e "$LIBDIR/libfabric.so.1" ] || return 1
    grep -aoE '\(default: /[^)]*\)' "$LIBDIR/libfabric.so.1" | sed -n 's/^(default: \(.*\))$/\1/p' | head -n1
}
CONFIGURED=$(configured_provdir || true)
PROVDIR=$LIBDIR/libfabric
case $CONFIGURED in
    "$PREFIX"/*) PROVDIR=$CONFIGURED ;;
esac
cores=$(cd "$DEST$PROVDIR" 2>/dev/null && ls -- *-fi.so 2>/dev/null | grep -v '^librscntr-fi\.so$' | tr '\n' ' ' || true)

DSO=$ROOT/target/release/librscntr.so
if [ "${RSCNTR_NO_BUILD:-0}" != 1 ]; then
    (cd "$ROOT" && cargo build --release --quiet)
fi
[ -f "$DSO" ] || { echo "install.sh: $DSO is missing; build rscntr first" >&2; exit 1; }

put() { # <mode> <source> <target>
    install -D -m "$1" "$2" "$DEST$3"
    echo "installed $DEST$3"
}
# libfabric loads every file ending in "fi.so" from its provider directory; the name follows its
# lib<provider>-fi.so convention.
put 0755 "$DSO" "$PROVDIR/librscntr-fi.so"
[ -z "$cores" ] || echo "beside this libfabric's cores built as DSOs: $cores"
put 0644 "$ROOT/include/rdma/fi_ext_rscntr.h" "$PREFIX/include/rdma/fi_ext_rscntr.h"
put 0644 "$ROOT/man/man7/fi_rscntr.7" "$PREFIX/share/man/man7/fi_rscntr.7"

[ -z "$DEST" ] || exit 0   # a staged install: nothing there runs yet
if [ ! -e "$LIBDIR/libfabric.so.1" ]; then
    echo "note: no libfabric.so.1 in $LIBDIR; rscntr is found without FI_PROVIDER_PATH only by a" \
         "libfabric configured with --prefix=$PREFIX" >&2
    exit 0
fi

# ---- does that libfabric find it? -----------------------------------------------------------
FI_INFO=$PREFIX/bin/fi_info
[ -x "$FI_INFO" ] || FI_INFO=$(command -v fi_info || true)
if [ -z "$FI_INFO" ]; then
    echo "note: no fi_info in $PREFIX/bin or on PATH: not checked that the libfabric in $LIBDIR lists rscntr" >&2
    exit 0
fi
out=$(env -u FI_PROVIDER_PATH -u FI_PROVIDER LD_LIBRARY_PATH="$LIBDIR" FI_LOG_LEVEL=warn \
      timeout 60 "$FI_INFO" -l 2>&1)
if grep -q '^rscntr:' <<<"$out"; then
    echo "checked: $FI_INFO on $LIBDIR/libfabric.so.1 lists rscntr (FI_PROVIDER_PATH unset)"
    exit 0
fi
{
    echo "install.sh: FAILED: the libfabric in $LIBDIR does not list rscntr after the install"
    echo "  ($FI_INFO -l with LD_LIBRARY_PATH=$LIBDIR, FI_PROVIDER_PATH and FI_PROVIDER unset)."
    if [ -n "$CONFIGURED" ] && [ "$CONFIGURED" != "$PROVDIR" ]; then
        echo "  That library scans $CONFIGURED, the provider directory it was configured with, not"
        echo "  $PROVDIR: it was built for another prefix and copied here. Use"
        echo "  FI_PROVIDER_PATH=$PROVDIR (with every directory of your cores), or install into the"
        echo "  prefix it was configured with."
    else
        echo "  It scans $PROVDIR. What it said:"
        grep -iE 'rscntr|dlopen|warn' <<<"$out" | head -5 | sed 's/^/    /'
    fi
} >&2
exit 1
