#!/usr/bin/env bash
# Set up everything rscntr needs, idempotently, cached in .deps/ (git-ignored):
#   apt packages, libfabric 2.1.0 + fabtests built from Debian's orig tarball, Debian 12's
#   libfabric 1.17.0 packages (unpacked), venvs with the MPICH and Open MPI wheels (their bundled
#   libfabric 2.5.1 and 1.22.0 are more runtimes to test against), and rscntr itself, staged as
#   target/fi/librscntr-fi.so (the directory is usable as FI_PROVIDER_PATH). Every version and
#   checksum is pinned in scripts/versions.sh.
# A second run only rebuilds rscntr (cargo is incremental) and finishes in seconds.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/env.sh"

log() { printf '[setup] %s\n' "$*" >&2; }
mkdir -p "$DEPS/stamps" "$DEPS/dl" "$DEPS/logs"

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

# ---- Debian source tarballs --------------------------------------------------------------------
# The pool is reached through the Debian mirror apt is configured with on this machine
# (override with RSCNTR_DEBIAN_MIRROR).
. "$ROOT/scripts/debian.sh"   # debian_mirror

fetch_pool() { # <pool path> <file> <sha256>: a file of Debian's pool, checked against its pin
    local dst="$DEPS/dl/$2"
    if [ -f "$dst" ] && echo "$3  $dst" | sha256sum -c --status; then return; fi
    log "downloading $2"
    curl -fsSL --retry 3 -o "$dst.part" "$(debian_mirror)/pool/$1/$2"
    echo "$3  $dst.part" | sha256sum -c --status || { log "sha256 mismatch for $2"; exit 1; }
    mv "$dst.part" "$dst"
}

# ---- libfabric 2.1.0 + fabtests ---------------------------------------------------------------
if [ ! -f "$DEPS/stamps/libfabric-2.1.0" ]; then
    fetch_pool main/libf/libfabric "$LF_TAR" "$LF_SHA"
    rm -rf "$DEPS/src/libfabric-2.1.0" "$LF_PREFIX"
    mkdir -p "$DEPS/src"
    tar -C "$DEPS/src" -xf "$DEPS/dl/$LF_TAR"
    cd "$DEPS/src/libfabric-2.1.0"
    log "building libfabric 2.1.0 (about a minute)"
    { ./autogen.sh &&
      ./configure --prefix="$LF_PREFIX" --disable-static --enable-only \
         --enable-tcp=yes --enable-udp=yes --enable-shm=yes --enable-sm2=yes \
         --enable-rxm=yes --enable-rxd=yes --enable-sockets=yes &&
      make -j"$(nproc)" install; } >"$DEPS/logs/libfabric.log" 2>&1 \
        || { tail -30 "$DEPS/logs/libfabric.log"; exit 1; }
    touch "$DEPS/stamps/libfabric-2.1.0"
    rm -f "$DEPS/stamps/fabtests-2.1.0"
fi
if [ ! -f "$DEPS/stamps/fabtests-2.1.0" ]; then
    cd "$DEPS/src/libfabric-2.1.0/fabtests"
    log "building fabtests 2.1.0"
    rm -rf "$FT_PREFIX"
    { ./autogen.sh &&
      ./configure --prefix="$FT_PREFIX" --with-libfabric="$LF_PREFIX" --disable-efa --disable-lpp &&
      make -j"$(nproc)" install; } >"$DEPS/logs/fabtests.log" 2>&1 \
        || { tail -30 "$DEPS/logs/fabtests.log"; exit 1; }
    touch "$DEPS/stamps/fabtests-2.1.0"
fi

# ---- libfabric 2.1.0, debug build (--enable-debug: asserts on) ----------------------------------
# A runtime only (same soname as the release build): the tests run rscntr against it, where
# libfabric asserts what its providers return (e.g. that only utility providers name a core).
if [ ! -f "$DEPS/stamps/libfabric-2.1.0-debug" ]; then
    fetch_pool main/libf/libfabric "$LF_TAR" "$LF_SHA"
    rm -rf "$DEPS/src/libfabric-2.1.0-debug" "$LF_DEBUG_PREFIX"
    mkdir -p "$DEPS/src/libfabric-2.1.0-debug"
    tar -C "$DEPS/src/libfabric-2.1.0-debug" --strip-components=1 -xf "$DEPS/dl/$LF_TAR"
    cd "$DEPS/src/libfabric-2.1.0-debug"
    log "building libfabric 2.1.0 with --enable-debug (about a minute)"
    { ./autogen.sh &&
      ./configure --prefix="$LF_DEBUG_PREFIX" --disable-static --enable-debug --enable-only \
         --enable-tcp=yes --enable-udp=yes --enable-shm=yes --enable-sm2=yes \
         --enable-rxm=yes --enable-rxd=yes --enable-sockets=yes &&
      make -j"$(nproc)" install; } >"$DEPS/logs/libfabric-debug.log" 2>&1 \
        || { tail -30 "$DEPS/logs/libfabric-debug.log"; exit 1; }
    touch "$DEPS/stamps/libfabric-2.1.0-debug"
fi

# ---- Debian 12's libfabric 1.17.0: the oldest runtime, unpacked (never installed) -----------
if [ ! -f "$DEPS/stamps/libfabric-$LF117_VERSION" ]; then
    rm -rf "$DEPS/lf117"
    for deb in "${LF117_DEBS[@]}"; do
        read -r file sha <<<"$deb"
        fetch_pool main/libf/libfabric "$file" "$sha"
        dpkg-deb -x "$DEPS/dl/$file" "$DEPS/lf117"
    done
    touch "$DEPS/stamps/libfabric-$LF117_VERSION"
fi

# ---- the MPI wheels: more libfabric runtimes (2.5.1, 1.22.0) ---------------------------------
# wheel_venv <venv> <"name==version sha256">: the venv holds exactly the pinned wheel, checked
# against its hash (pip --require-hashes); a venv with another version is made anew.
wheel_venv() {
    local venv=$1 spec sha name version have
    read -r spec sha <<<"$2"
    name=${spec%%==*} version=${spec##*==}
    have=$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$name'))" 2>/dev/null || true)
    [ "$have" = "$version" ] && return 0
    log "pip install $spec (pinned, hash checked)"
    rm -rf "$venv"
    printf '%s --hash=sha256:%s\n' "$spec" "$sha" > "$DEPS/dl/$name-$version.req"
    { python3 -m venv "$venv" &&
      "$venv/bin/pip" install -q --no-deps --require-hashes -r "$DEPS/dl/$name-$version.req"; } \
        >"$DEPS/logs/venv-$name-$version.log" 2>&1 || { tail -20 "$DEPS/logs/venv-$name-$version.log"; exit 1; }
}
wheel_venv "$MPICH_VENV" "$MPICH_WHEEL"
wheel_venv "$MPICH43_VENV" "$MPICH43_WHEEL"

# ---- MPICH 4.0.2's own test suite (Debian's orig tarball), built against the MPICH wheels -----
# Only test/mpi is unpacked: a release tree with its own configure. Fortran, C++, ROMIO and spawn
# off; threads on (threads/rma asks MPI_THREAD_MULTIPLE). util/, rma/ and threads/rma are built
# (about 1.5 min); prov_test/mpi/mpich_testsuite.sh runs them with the suite's runtests.
# Built twice: against the MPICH 5 wheel ($MPICH_TESTS) and the mpich==4.3.2 wheel
# ($MPICH43_TESTS, libfabric 1.22). The stamp holds the wheel it was built against: another
# wheel, another build.
mpich_tests() { # <dir> <venv> <"name==version sha256"> <stamp> <log>
    local dir=$1 venv=$2 wheel=$3 stamp=$4 logf=$5
    [ "$(cat "$DEPS/stamps/$stamp" 2>/dev/null)" != "$wheel" ] || return 0
    fetch_pool main/m/mpich "$MPICH_TAR" "$MPICH_SHA"
    rm -rf "$dir"
    mkdir -p "$dir"
    tar -C "$dir" --strip-components=3 -xJf "$DEPS/dl/$MPICH_TAR" mpich-4.0.2/test/mpi
    log "building MPICH 4.0.2's test suite (util, rma, threads/rma) against ${wheel%% *} (about 2 min)"
    ( cd "$dir" &&
      timeout 900 ./configure --with-mpi="$venv" --disable-fortran --disable-cxx --disable-romio \
         --disable-spawn --enable-threads=multiple &&
      timeout 900 make -C util -j"$(nproc)" &&
      timeout 900 make -C rma -j"$(nproc)" &&
      timeout 900 make -C threads/rma -j"$(nproc)" ) >"$DEPS/logs/$logf" 2>&1 \
        || { tail -30 "$DEPS/logs/$logf"; exit 1; }
    echo "$wheel" > "$DEPS/stamps/$stamp"
}
mpich_tests "$MPICH_TESTS" "$MPICH_VENV" "$MPICH_WHEEL" mpich-4.0.2-tests mpich-tests.log
mpich_tests "$MPICH43_TESTS" "$MPICH43_VENV" "$MPICH43_WHEEL" mpich-4.0.2-tests-43 mpich-tests-43.log

# ---- rdma-core 65.0: libibverbs only, never installed into the system ---------------------------
# .deps/rdma65/include holds verbs.h for the layout test, .deps/rdma65/lib/libibverbs.so.1 the
# library the detection tests load through FI_RSCNTR_VERBS_LIB.
if [ ! -f "$DEPS/stamps/rdma-core-65.0" ]; then
    fetch_pool main/r/rdma-core "$RDMA_TAR" "$RDMA_SHA"
    rm -rf "$DEPS/src/rdma-core-65.0" "$RDMA65"
    mkdir -p "$DEPS/src/rdma-core-65.0"
    tar -C "$DEPS/src/rdma-core-65.0" --strip-components=1 -xzf "$DEPS/dl/$RDMA_TAR"
    mkdir -p "$DEPS/src/rdma-core-65.0/build"
    cd "$DEPS/src/rdma-core-65.0/build"
    log "building libibverbs from rdma-core 65.0 (about 15 s)"
    { timeout 600 cmake -GNinja -DNO_MAN_PAGES=1 -DNO_PYVERBS=1 -DCMAKE_BUILD_TYPE=Release .. &&
      timeout 600 ninja lib/libibverbs.so.1; } >"$DEPS/logs/rdma-core.log" 2>&1 \
        || { tail -30 "$DEPS/logs/rdma-core.log"; exit 1; }
    mkdir -p "$RDMA65/lib"
    cp -a lib/libibverbs.so* "$RDMA65/lib/"
    cp -rL include "$RDMA65/include"
    touch "$DEPS/stamps/rdma-core-65.0"
fi

wheel_venv "$OMPI_VENV" "$OMPI_WHEEL"
wheel_venv "$OMPI41_VENV" "$OMPI41_WHEEL"

# ---- rscntr -----------------------------------------------------------------------------------
cd "$ROOT"
log "cargo build --release"
cargo build --release --quiet
mkdir -p "$PROV_DIR"
install -m 0755 "$ROOT/target/release/librscntr.so" "$PROV_DIR/librscntr-fi.so"
log "staged $PROV_DIR/librscntr-fi.so"
