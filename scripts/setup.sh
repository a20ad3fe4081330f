#!/usr/bin/env bash
# Set up everything rscntr needs, idempotently:
#   the Rust toolchain checked (not installed); apt packages (system-wide: the only part that is
#   not in .deps/); libfabric 2.1.0 + fabtests built from Debian's orig tarball, and a debug build;
#   Debian 12's libfabric 1.17.0 packages (unpacked); venvs with the MPICH and Open MPI wheels
#   (their bundled libfabric 2.5.1 and 1.22.0 are more runtimes to test against); MPICH 4.0.2's
#   test suite; rdma-core 65's libibverbs; and rscntr itself, staged as target/fi/librscntr-fi.so
#   (the directory is usable as FI_PROVIDER_PATH). Every version and checksum is pinned in
#   scripts/versions.sh.
# The third-party builds live in a cache outside the tree (RSCNTR_CACHE, by default
# ~/.cache/rscntr), one directory per build named by a hash of what it is made from: the pinned
# file and its sha256, the builds it uses, and the text of the function that makes it. The
# tree's git-ignored .deps/ links to them. A build whose key changed, or that never finished, is
# made anew; a download is checked against its sha256 each time it is used; `bash scripts/test.sh
# docs` checks what is installed against the pins. So a second clone on the same machine skips
# the builds, and a fresh machine still makes everything.
# A second run only rebuilds rscntr (cargo is incremental) and finishes in seconds.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/env.sh"

log() { printf '[setup] %s\n' "$*" >&2; }

# ---- the Rust toolchain: edition 2024 needs Rust 1.85 or newer ----------------------------------
RUST_MIN=1.85
rust_have=$(rustc --version 2>/dev/null | sed -n 's/^rustc \([0-9]*\.[0-9]*\).*/\1/p')
if [ -z "$rust_have" ] || ! command -v cargo >/dev/null; then
    log "no Rust toolchain (rustc and cargo) on PATH: rscntr needs Rust $RUST_MIN or newer (edition 2024)."
    log "Debian 12's rustc is too old; install rustup's stable toolchain, then run this again."
    exit 1
fi
if [ "$(printf '%s\n%s\n' "$RUST_MIN" "$rust_have" | sort -V | head -n1)" != "$RUST_MIN" ]; then
    log "rustc $rust_have is too old: rscntr needs Rust $RUST_MIN or newer (edition 2024); 'rustup update stable' or a newer toolchain first."
    exit 1
fi

mkdir -p "$DEPS/stamps" "$DEPS/logs" "$DEPS_CACHE"
rm -rf "$DEPS/src"   # an older tree's source trees: the builds are made in the cache now
# .deps/dl: the downloads, in the cache (an older tree's own directory is moved there).
if [ -d "$DEPS/dl" ] && [ ! -L "$DEPS/dl" ]; then
    mkdir -p "$DEPS_CACHE/dl"; cp -an "$DEPS/dl/." "$DEPS_CACHE/dl/" && rm -rf "$DEPS/dl"
fi
mkdir -p "$DEPS_CACHE/dl"; ln -sfn "$DEPS_CACHE/dl" "$DEPS/dl"

# ---- apt --------------------------------------------------------------------------------------
APT_PKGS=(build-essential pkg-config autoconf automake libtool libclang-dev xz-utils curl
          python3-venv valgrind pandoc groff-base
          # prov_test/net/hosts.sh: loss on the shaped links between test hosts
          nftables
          # rdma-core 65's libibverbs is built from source (below); Debian's libibverbs1 (44, no
          # completion counters) is the old library rscntr must also run with.
          cmake ninja-build libnl-3-dev libnl-route-3-dev libibverbs1
          # scripts/package.sh (the Debian 13 packages) and prov_test/debian/trixie.sh (a trixie root)
          dpkg-dev lintian mmdebstrap
          # what Debian 12's libfabric1 1.17 (unpacked below, not installed) needs to load
          libpsm-infinipath1 libpsm2-2 librdmacm1)
missing=()
for p in "${APT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -q >"$DEPS/logs/apt-update.log" 2>&1
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}" >"$DEPS/logs/apt-install.log" 2>&1
fi

# ---- the cache ---------------------------------------------------------------------------------
# cached <name> <what it is made from> <function> [functions it calls...]: .deps/<name> links to
# $DEPS_CACHE/<name>-<key>, the key a hash of <what it is made from> and the functions' text;
# the function makes the build in
# the directory it is given (an absolute path that stays valid: the builds name their prefix).
# One process at a time makes a build (flock); one that died half way leaves no .complete, and
# the next run starts it again.
cached() {
    local name=$1 from=$2 fn=$3 key dir lock
    shift 2
    key=$(printf '%s\n' "$from" "$(declare -f "$@")" | sha256sum | cut -c1-16)
    dir=$DEPS_CACHE/$name-$key
    exec {lock}>"$dir.lock"
    flock "$lock"
    if [ ! -f "$dir/.complete" ]; then
        rm -rf "$dir"; mkdir -p "$dir"
        "$fn" "$dir"
        printf '%s\n' "$from" > "$dir/.complete"
    fi
    exec {lock}>&-
    [ -L "$DEPS/$name" ] || rm -rf "${DEPS:?}/$name"   # an older tree's own build
    ln -sfn "$dir" "$DEPS/$name"
    CACHED_DIR=$dir
}

# ---- Debian source tarballs --------------------------------------------------------------------
# The pool is reached through the Debian mirror apt is configured with on this machine
# (override with RSCNTR_DEBIAN_MIRROR).
. "$ROOT/scripts/debian.sh"   # debian_mirror

fetch_pool() { # <pool path> <file> <sha256>: a file of Debian's pool, checked against its pin
    local dst="$DEPS_CACHE/dl/$2"
    if [ -f "$dst" ] && echo "$3  $dst" | sha256sum -c --status; then return; fi
    log "downloading $2"
    curl -fsSL --retry 3 -o "$dst.part.$$" "$(debian_mirror)/pool/$1/$2"
    echo "$3  $dst.part.$$" | sha256sum -c --status || { rm -f "$dst.part.$$"; log "sha256 mismatch for $2"; exit 1; }
    mv "$dst.part.$$" "$dst"
}

# A scratch directory for a build's source tree, removed when the build is done.
scratch() { mktemp -d "$DEPS_CACHE/build.XXXXXX"; }

# ---- libfabric 2.1.0 + fabtests, and a debug build ---------------------------------------------
# The debug build (--enable-debug: asserts on) is a runtime only (same soname as the release
# build): the tests run rscntr against it, where libfabric asserts what its providers return
# (e.g. that only utility providers name a core).
LF_CONFIG=(--disable-static --enable-only --enable-tcp=yes --enable-udp=yes --enable-shm=yes
           --enable-sm2=yes --enable-rxm=yes --enable-rxd=yes --enable-sockets=yes)
build_libfabric() { # <prefix> [configure options...]
    local prefix=$1 src; shift
    fetch_pool main/libf/libfabric "$LF_TAR" "$LF_SHA"
    src=$(scratch)
    tar -C "$src" --strip-components=1 -xf "$DEPS/dl/$LF_TAR"
    log "building libfabric 2.1.0 $* (about a minute)"
    { cd "$src" && ./autogen.sh && ./configure --prefix="$prefix" "${LF_CONFIG[@]}" "$@" &&
      make -j"$(nproc)" install; } >"$DEPS/logs/$(basename "$prefix").log" 2>&1 \
        || { tail -30 "$DEPS/logs/$(basename "$prefix").log"; exit 1; }
    cd "$ROOT"; rm -rf "$src"
}
make_lf() { build_libfabric "$1"; }
make_lf_debug() { build_libfabric "$1" --enable-debug; }
cached lf "$LF_TAR $LF_SHA ${LF_CONFIG[*]}" make_lf build_libfabric
LF_BUILD=$CACHED_DIR
cached lf-debug "$LF_TAR $LF_SHA ${LF_CONFIG[*]}" make_lf_debug build_libfabric
# A third build with tcp, shm and rxm as DSOs (lib<core>-fi.so in its provider directory), as
# some distributions and vendors ship libfabric: prov_test/check_install.sh installs rscntr
# beside them.
make_lf_dl() { build_libfabric "$1" --enable-tcp=dl --enable-shm=dl --enable-rxm=dl; }
cached lf-dl "$LF_TAR $LF_SHA ${LF_CONFIG[*]}" make_lf_dl build_libfabric
make_ft() { # fabtests 2.1.0, from the same tarball, against the release build
    local src
    src=$(scratch)
    tar -C "$src" --strip-components=1 -xf "$DEPS/dl/$LF_TAR"
    log "building fabtests 2.1.0"
    { cd "$src/fabtests" && ./autogen.sh &&
      ./configure --prefix="$1" --with-libfabric="$LF_BUILD" --disable-efa --disable-lpp &&
      make -j"$(nproc)" install; } >"$DEPS/logs/fabtests.log" 2>&1 \
        || { tail -30 "$DEPS/logs/fabtests.log"; exit 1; }
    cd "$ROOT"; rm -rf "$src"
}
cached ft "$LF_TAR $LF_SHA $LF_BUILD" make_ft

# ---- Debian 12's libfabric 1.17.0: the oldest runtime, unpacked (never installed) -----------
make_lf117() {
    local deb file sha
    for deb in "${LF117_DEBS[@]}"; do
        read -r file sha <<<"$deb"
        fetch_pool main/libf/libfabric "$file" "$sha"
        dpkg-deb -x "$DEPS/dl/$file" "$1"
    done
}
cached lf117 "${LF117_DEBS[*]}" make_lf117

# ---- the MPI wheels: more libfabric runtimes (2.5.1, 1.22.0) ---------------------------------
# wheel_venv <name> <"name==version sha256">: a venv holding exactly the pinned wheel, checked
# against its hash (pip --require-hashes).
make_venv() {
    local spec sha name version
    read -r spec sha <<<"$WHEEL"
    name=${spec%%==*} version=${spec##*==}
    log "pip install $spec (pinned, hash checked)"
    { python3 -m venv "$1" &&
      "$1/bin/pip" install -q --no-deps --require-hashes -r "$DEPS/dl/$name-$version.req"; } \
        >"$DEPS/logs/venv-$name-$version.log" 2>&1 || { tail -20 "$DEPS/logs/venv-$name-$version.log"; exit 1; }
}
wheel_venv() { # <.deps name> <"name==version sha256">
    local spec sha
    WHEEL=$2
    read -r spec sha <<<"$2"
    # the .req file check_versions.sh reads beside the downloads
    printf '%s --hash=sha256:%s\n' "$spec" "$sha" > "$DEPS/dl/${spec%%==*}-${spec##*==}.req"
    cached "$1" "$2" make_venv
}
wheel_venv venv-mpich "$MPICH_WHEEL"
MPICH_VENV_BUILD=$CACHED_DIR
wheel_venv venv-mpich43 "$MPICH43_WHEEL"
MPICH43_VENV_BUILD=$CACHED_DIR

# ---- MPICH 4.0.2's own test suite (Debian's orig tarball), built against the MPICH wheels -----
# Only test/mpi is unpacked: a release tree with its own configure. Fortran, C++, ROMIO and spawn
# off; threads on (threads/rma asks MPI_THREAD_MULTIPLE). util/, rma/ and threads/rma are built
# (about 1.5 min); prov_test/mpi/mpich_testsuite.sh runs them with the suite's runtests.
# Built twice: against the MPICH 5 wheel (.deps/mpich-tests) and the mpich==4.3.2 wheel
# (.deps/mpich-tests-43, libfabric 1.22). The stamp says which wheel it was built against.
make_mpich_tests() { # <dir>; MPI_VENV, MPI_WHEEL
    local dir=$1
    fetch_pool main/m/mpich "$MPICH_TAR" "$MPICH_SHA"
    tar -C "$dir" --strip-components=3 -xJf "$DEPS/dl/$MPICH_TAR" mpich-4.0.2/test/mpi
    log "building MPICH 4.0.2's test suite (util, rma, threads/rma) against ${MPI_WHEEL%% *} (about 2 min)"
    ( cd "$dir" &&
      timeout 900 ./configure --with-mpi="$MPI_VENV" --disable-fortran --disable-cxx --disable-romio \
         --disable-spawn --enable-threads=multiple &&
      timeout 900 make -C util -j"$(nproc)" &&
      timeout 900 make -C rma -j"$(nproc)" &&
      timeout 900 make -C threads/rma -j"$(nproc)" ) >"$DEPS/logs/$MPI_LOG" 2>&1 \
        || { tail -30 "$DEPS/logs/$MPI_LOG"; exit 1; }
}
mpich_tests() { # <.deps name> <venv build> <"name==version sha256"> <stamp> <log>
    MPI_VENV=$2 MPI_WHEEL=$3 MPI_LOG=$5
    cached "$1" "$MPICH_TAR $MPICH_SHA $2 $3 $5" make_mpich_tests
    echo "$3" > "$DEPS/stamps/$4"
}
mpich_tests mpich-tests "$MPICH_VENV_BUILD" "$MPICH_WHEEL" mpich-4.0.2-tests mpich-tests.log
mpich_tests mpich-tests-43 "$MPICH43_VENV_BUILD" "$MPICH43_WHEEL" mpich-4.0.2-tests-43 mpich-tests-43.log

# ---- rdma-core 65.0: libibverbs only, never installed into the system ---------------------------
# .deps/rdma65/include holds verbs.h for the layout test, .deps/rdma65/lib/libibverbs.so.1 the
# library the detection tests load through FI_RSCNTR_VERBS_LIB.
make_rdma65() {
    local src
    fetch_pool main/r/rdma-core "$RDMA_TAR" "$RDMA_SHA"
    src=$(scratch)
    tar -C "$src" --strip-components=1 -xzf "$DEPS/dl/$RDMA_TAR"
    mkdir -p "$src/build"
    log "building libibverbs from rdma-core 65.0 (about 15 s)"
    { cd "$src/build" &&
      timeout 600 cmake -GNinja -DNO_MAN_PAGES=1 -DNO_PYVERBS=1 -DCMAKE_BUILD_TYPE=Release .. &&
      timeout 600 ninja lib/libibverbs.so.1; } >"$DEPS/logs/rdma-core.log" 2>&1 \
        || { tail -30 "$DEPS/logs/rdma-core.log"; exit 1; }
    mkdir -p "$1/lib"
    cp -a lib/libibverbs.so* "$1/lib/"
    cp -rL include "$1/include"
    cd "$ROOT"; rm -rf "$src"
}
cached rdma65 "$RDMA_TAR $RDMA_SHA" make_rdma65

wheel_venv venv-ompi "$OMPI_WHEEL"
wheel_venv venv-ompi41 "$OMPI41_WHEEL"

# ---- rscntr -----------------------------------------------------------------------------------
cd "$ROOT"
log "cargo build --release"
cargo build --release --quiet
mkdir -p "$PROV_DIR"
install -m 0755 "$ROOT/target/release/librscntr.so" "$PROV_DIR/librscntr-fi.so"
log "staged $PROV_DIR/librscntr-fi.so"
