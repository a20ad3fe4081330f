#!/usr/bin/env bash
# Installs rscntr into the prefix of a libfabric installation, where that libfabric finds it
# without FI_PROVIDER_PATH:
#   PREFIX/lib/libfabric/librscntr-fi.so     the provider (libfabric scans <libdir>/libfabric)
#   PREFIX/include/rdma/fi_ext_rscntr.h      the extension header
#   PREFIX/share/man/man7/fi_rscntr.7        the man page
#
#   scripts/install.sh PREFIX
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

DSO=$ROOT/target/release/librscntr.so
if [ "${RSCNTR_NO_BUILD:-0}" != 1 ]; then
    (cd "$ROOT" && cargo build --release --quiet)
fi
[ -f "$DSO" ] || { echo "install.sh: $DSO is missing; build rscntr first" >&2; exit 1; }

put() { # <mode> <source> <target>
    install -D -m "$1" "$2" "$DEST$3"
    echo "installed $DEST$3"
}
# libfabric loads every file ending in "fi.so" from <libdir>/libfabric; the name follows its
# lib<provider>-fi.so convention.
put 0755 "$DSO" "$LIBDIR/libfabric/librscntr-fi.so"
put 0644 "$ROOT/include/rdma/fi_ext_rscntr.h" "$PREFIX/include/rdma/fi_ext_rscntr.h"
put 0644 "$ROOT/man/man7/fi_rscntr.7" "$PREFIX/share/man/man7/fi_rscntr.7"

if [ -z "$DEST" ] && [ ! -e "$LIBDIR/libfabric.so.1" ]; then
    echo "note: no libfabric.so.1 in $LIBDIR; rscntr is found without FI_PROVIDER_PATH only by a" \
         "libfabric configured with --prefix=$PREFIX" >&2
fi
